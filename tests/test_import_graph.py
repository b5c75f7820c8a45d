"""No import cycle among livetail's Python sources (``spec/``, ``verify/``, ``python/livetail/``).

The graph is built from the sources, not from ``sys.modules``: every ``.py`` file of the three
trees is a module named as installed (``pyproject.toml``'s ``wheel.packages`` maps
``livetail`` -> ``python/livetail``, ``livetail.spec`` -> ``spec``, ``livetail.verify`` ->
``verify``), and an edge ``a -> b`` means that running ``a`` imports ``b``:

- ``import livetail.x.y`` and ``from livetail.x import y`` (absolute), ``from . import y``,
  ``from .a import b``, ``from ..a import b`` (relative, resolved against the importing
  module's package), and ``importlib.import_module("livetail...")`` with a literal name;
- ``from p import n`` is an edge to the submodule ``p.n`` when there is one, else to ``p``
  (the name comes from ``p``'s ``__init__``);
- importing a module also runs each enclosing package's ``__init__`` first: an edge to each
  of those packages, except the importer's own enclosing packages. Those are already being
  initialised when the importer runs (Python imports a parent before its child), so a
  package whose ``__init__`` imports its own submodules is the usual layout, not a circle;
  but a module that imports its package by name (``from . import name``, ``import
  livetail``) has an edge to it like any other;
- imports inside functions count: a lazy import that closes a circle is still a circle
  (it only moves the failure from import time to the first call and hides the layering);
- imports under ``if TYPE_CHECKING:`` do not count: they never run.

``livetail._core`` is the native extension (``NB_MODULE(_core, ...)`` in
``native/python/binding.cpp``): a leaf, it imports no Python module of ours.

The first tests check the builder on small synthetic trees (so that the final check can fail);
the last one checks the project and names every circle it finds.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTENSION_MODULES = ("livetail._core",)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int


def package_roots(pyproject: Path) -> dict[str, Path]:
    """``wheel.packages`` of pyproject.toml: import name -> source directory (CPython 3.10
    has no tomllib, and the table is one line of literal strings)."""
    text = pyproject.read_text(encoding="utf-8")
    line = re.search(r"^wheel\.packages\s*=\s*\{(.*)\}\s*$", text, re.MULTILINE)
    assert line is not None, "pyproject.toml has no one-line wheel.packages table"
    pairs = re.findall(r'"([^"]+)"\s*=\s*"([^"]+)"', line.group(1))
    return {name.replace("/", "."): pyproject.parent / path for name, path in pairs}


def module_files(roots: Mapping[str, Path]) -> dict[str, Path]:
    """Every module of the trees, by its installed dotted name (a package by its own name).

    A file under two roots (a tree nested in another) belongs to the longer import name.
    """
    files: dict[str, Path] = {}
    owner: dict[Path, str] = {}
    for name, root in sorted(roots.items(), key=lambda kv: len(kv[0])):
        for path in sorted(root.rglob("*.py")):
            owner[path] = name  # later (longer) names win
    for path, name in owner.items():
        rel = path.relative_to(roots[name]).with_suffix("").parts
        parts = rel[:-1] if rel[-1] == "__init__" else rel
        files[".".join((name, *parts))] = path
    return files


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.stmt | ast.Call]:
    """Import statements and importlib.import_module calls, outside ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _enclosing(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_edges(files: Mapping[str, Path]) -> list[Edge]:
    known = set(files) | set(EXTENSION_MODULES)
    edges: list[Edge] = []
    for module, path in sorted(files.items()):
        is_package = path.name == "__init__.py"
        package = module if is_package else module.rpartition(".")[0]
        own = {module, *_enclosing(module)}

        def add(target: str, line: int, module: str = module, own: set[str] = own) -> None:
            # The packages around the target run first, unless they enclose the importer.
            for t in _enclosing(target):
                if t in known and t not in own:
                    edges.append(Edge(module, t, line))
            if target in known and target != module:
                edges.append(Edge(module, target, line))

        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _imports(tree):
            if isinstance(node, ast.Call):
                const = node.args[0]
                assert isinstance(const, ast.Constant)
                add(str(const.value), node.lineno)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, node.lineno)
            else:
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    origin = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    origin = node.module or ""
                for alias in node.names:
                    sub = f"{origin}.{alias.name}"
                    add(sub if sub in known else origin, node.lineno)
    return edges


def cycles(edges: list[Edge]) -> list[list[Edge]]:
    """One circle per strongly connected component with a circle (Tarjan), as its edges."""
    graph: dict[str, list[Edge]] = {}
    for e in edges:
        graph.setdefault(e.source, []).append(e)
        graph.setdefault(e.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for e in graph[v]:
            if e.target not in index:
                visit(e.target)
                low[v] = min(low[v], low[e.target])
            elif e.target in on_stack:
                low[v] = min(low[v], index[e.target])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1 or any(e.target == v for e in graph[v]):
                components.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for comp in components:
        start = min(comp)
        # Shortest circle through `start` inside the component (breadth first).
        prev: dict[str, Edge] = {}
        frontier = [start]
        found: Edge | None = None
        while frontier and found is None:
            nxt = []
            for v in frontier:
                for e in graph[v]:
                    if e.target not in comp:
                        continue
                    if e.target == start:
                        found = e
                        break
                    if e.target not in prev:
                        prev[e.target] = e
                        nxt.append(e.target)
                if found is not None:
                    break
            frontier = nxt
        assert found is not None
        path = [found]
        while path[0].source != start:
            path.insert(0, prev[path[0].source])
        out.append(path)
    return out


def describe(circle: list[Edge], files: Mapping[str, Path], edges: list[Edge]) -> str:
    """The circle with each import's file and line, then every module tangled with it."""
    steps = []
    for e in circle:
        where = files[e.source].relative_to(ROOT) if ROOT in files[e.source].parents else e.source
        steps.append(f"{e.source} ({where}:{e.line})")
    text = " -> ".join([*steps, circle[0].source])
    tangled = _reachable(circle[0].source, edges) & _reachable(circle[0].source, edges, back=True)
    if len(tangled) > len(circle):
        text += f"\n  (one circle of {len(tangled)} modules: {', '.join(sorted(tangled))})"
    return text


def _reachable(start: str, edges: list[Edge], back: bool = False) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        v = todo.pop()
        for e in edges:
            a, b = (e.target, e.source) if back else (e.source, e.target)
            if a == v and b not in seen:
                seen.add(b)
                todo.append(b)
    return seen


# --- the builder on synthetic trees ----------------------------------------------------------


def _tree(tmp: Path, sources: Mapping[str, str]) -> dict[str, Path]:
    for rel, text in sources.items():
        path = tmp / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return module_files({"livetail": tmp / "pkg"})


def _names(circles: list[list[Edge]]) -> list[list[str]]:
    return [[e.source for e in c] for c in circles]


def test_builder_names_a_lazy_relative_circle(tmp_path: Path) -> None:
    files = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from .b import f\n",
            "b.py": "def f():\n    from . import a\n    return a\n",
            "c.py": "from .a import x\n",
        },
    )
    found = cycles(import_edges(files))
    assert _names(found) == [["livetail.a", "livetail.b"]]
    text = describe(found[0], files, import_edges(files))
    assert text.startswith("livetail.a (")
    assert ":1) -> livetail.b (" in text and text.endswith(":2) -> livetail.a")


def test_builder_resolves_absolute_and_parent_relative_forms(tmp_path: Path) -> None:
    files = _tree(
        tmp_path,
        {
            "__init__.py": "from .core import X\n",
            "core.py": "X = 1\n",
            "sub/__init__.py": "",
            "sub/one.py": "import livetail.sub.two as two\n",
            "sub/two.py": "from ..core import X\nfrom livetail.sub import one\n",
        },
    )
    edges = {(e.source, e.target) for e in import_edges(files)}
    assert edges == {
        ("livetail", "livetail.core"),
        ("livetail.sub.one", "livetail.sub.two"),
        ("livetail.sub.two", "livetail.core"),
        ("livetail.sub.two", "livetail.sub.one"),
    }
    assert _names(cycles(import_edges(files))) == [["livetail.sub.one", "livetail.sub.two"]]


def test_builder_ignores_type_checking_and_own_package_init(tmp_path: Path) -> None:
    files = _tree(
        tmp_path,
        {
            "__init__.py": "from . import a, b\n",
            "a.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from .b import B\nelse:\n    import json\n"
            ),
            "b.py": "from . import a\n",
        },
    )
    edges = {(e.source, e.target) for e in import_edges(files)}
    assert edges == {
        ("livetail", "livetail.a"),
        ("livetail", "livetail.b"),
        ("livetail.b", "livetail.a"),
    }
    assert cycles(import_edges(files)) == []


def test_builder_counts_a_name_taken_from_the_package_init(tmp_path: Path) -> None:
    files = _tree(
        tmp_path,
        {
            "__init__.py": "from .a import run\nVALUE = 1\n",
            "a.py": (
                "import importlib\n\n"
                "def run():\n    return importlib.import_module('livetail')\n"
            ),
            "b.py": "from . import VALUE\n",
        },
    )
    assert _names(cycles(import_edges(files))) == [["livetail", "livetail.a"]]
    edges = {(e.source, e.target) for e in import_edges(files)}
    assert ("livetail.b", "livetail") in edges


# --- the project ------------------------------------------------------------------------------


def test_package_roots_are_the_three_trees() -> None:
    roots = package_roots(ROOT / "pyproject.toml")
    assert roots == {
        "livetail": ROOT / "python" / "livetail",
        "livetail.spec": ROOT / "spec",
        "livetail.verify": ROOT / "verify",
    }


def test_no_import_cycle() -> None:
    files = module_files(package_roots(ROOT / "pyproject.toml"))
    assert "livetail.verify.campaign" in files and "livetail.spec.coordinator" in files
    assert len(import_edges(files)) > 50  # the graph is not empty by a resolution slip
    edges = import_edges(files)
    found = cycles(edges)
    assert not found, "import cycles:\n" + "\n".join(describe(c, files, edges) for c in found)


def test_machine_modules_import_only_modules_listed_before_them() -> None:
    """verify/machine/__init__.py lists its modules in import order: each imports only the
    modules listed before it (the core none of its plug-ins, no module the Hypothesis rules)."""
    files = module_files(package_roots(ROOT / "pyproject.toml"))
    package = "livetail.verify.machine"
    doc = ast.get_docstring(ast.parse(files[package].read_text(encoding="utf-8"))) or ""
    order = [
        name
        for line in doc.splitlines()
        if line.startswith("- ")
        for name in re.findall(r"``(\w+)``", line.split("  ")[0])
    ]
    modules = {m.rpartition(".")[2] for m in files if m.startswith(package + ".")}
    assert sorted(order) == sorted(modules), "list every module of verify/machine/ once"
    rank = {f"{package}.{name}": i for i, name in enumerate(order)}
    upward = [
        f"{e.source} imports {e.target} (line {e.line})"
        for e in import_edges(files)
        if e.source in rank and e.target in rank and rank[e.target] >= rank[e.source]
    ]
    assert not upward, "\n".join(upward)
    assert rank[f"{package}.core"] < rank[f"{package}.plan"] < rank[f"{package}.lockstep"]
    assert rank[f"{package}.core"] < rank[f"{package}.host"] < rank[f"{package}.lockstep"]
