"""What the theorems execute: spec/ lines run by the model, by Z3, and the state changes left.

``livetail verify --coverage`` runs every unbounded Z3 theorem (each in a forked process,
as ``--quick`` runs it, under a line tracer) and the differential campaign at CI size
(under the same tracer, in this process), and reports, per spec/ file:

- *statements*: the statements of its function bodies (a docstring is not one);
- *model runs*: how many of them the campaign executes (the model's own runs);
- *Z3 executes*: how many of them run while the unbounded theorems build and decide their
  formulas (the spec's functions called on Z3 terms);
- *state changes*: the statements that write state, found syntactically (``ast``): an
  assignment, augmented assignment or ``del`` whose target is an attribute (``self.x``,
  ``pool._ref[p]``, ``table.slots[s]``) or an item of a parameter, and a call of a mutating
  method (``append``, ``pop``, ``insert``, ``remove``, ``clear``, ...) on an attribute or a
  parameter;
- *unproved*: the state changes no unbounded theorem executes, and how many of them the
  allow-list (``coverage_allowlist.txt``, next to this file) names.

The check fails when a state change outside what Z3 executes is not on the allow-list, or
when an entry of the allow-list names no such line any more (the list only shrinks by
being rewritten: ``livetail verify --coverage --write-allowlist`` in the source tree).
Entries are keyed by (file, function, the line's text with its spaces normalised), not by
line numbers, so edits elsewhere in a file leave them valid.
"""

from __future__ import annotations

import ast
import multiprocessing
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ALLOWLIST = Path(__file__).with_name("coverage_allowlist.txt")
DEFAULT_REASON = "glue not yet a transition"
CAMPAIGN_EXAMPLES = 10
"""Random examples per machine of the measured campaign (``--quick``'s), after its scenarios."""
MUTATORS = frozenset(
    {
        "append",
        "appendleft",
        "extend",
        "extendleft",
        "insert",
        "pop",
        "popleft",
        "popitem",
        "remove",
        "clear",
        "add",
        "discard",
        "update",
        "setdefault",
        "sort",
        "reverse",
        "move_to_end",
    }
)


def spec_dir() -> Path:
    from livetail import spec

    return Path(spec.__file__).resolve().parent


Line = tuple[str, int]
"""(file relative to the project root, e.g. ``spec/pool.py``, line number)."""


# --- the tracer ------------------------------------------------------------------------------


class Tracer:
    """Records the (file, line) of every line event in spec/ files while it is on."""

    def __init__(self) -> None:
        root = spec_dir()
        self.files = {str(p): f"spec/{p.name}" for p in root.glob("*.py")}
        self.lines: set[Line] = set()

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.lines.add((self.files[frame.f_code.co_filename], frame.f_lineno))
        return self._local

    def _global(self, frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename in self.files:
            return self._local
        return None

    def run(self, fn: Callable[[], Any]) -> Any:
        old = sys.gettrace()
        sys.settrace(self._global)
        threading.settrace(self._global)
        try:
            return fn()
        finally:
            sys.settrace(old)
            threading.settrace(old)


def _theorem_lines(name: str) -> tuple[str, list[Line], float]:
    """In a forked process: theorem ``name`` as ``--quick`` runs it, traced; its CPU."""
    import time

    from .theorems import run_theorem

    t = Tracer()
    r = t.run(lambda: run_theorem(name, quick=True))
    return str(r["verdict"]), sorted(t.lines), time.process_time()


def unbounded_theorems() -> list[str]:
    """The Z3 theorems that expect a proof (not bounded, not witnesses)."""
    from .theorems import THEOREMS

    return [n for n, th in THEOREMS.items() if not th.bounded and th.expected == "proved"]


def z3_lines(names: Sequence[str], jobs: int = 2) -> tuple[set[Line], dict[str, str], float]:
    """The spec lines the theorems ``names`` execute, each theorem's verdict, their CPU."""
    from . import runner

    # As livetail verify runs them: each theorem in a fresh process forked from a server
    # that imported the theorems, with PYTHONHASHSEED=0 (the same queries in the same order).
    ctx = runner._fork_context() or multiprocessing.get_context("spawn")
    lines: set[Line] = set()
    verdicts: dict[str, str] = {}
    cpu = 0.0
    with (
        runner._environment(runner._child_env()),
        ctx.Pool(max(1, jobs), maxtasksperchild=1) as pool,
    ):
        for name, (verdict, found, used) in zip(
            names, pool.map(_theorem_lines, names, chunksize=1)
        ):
            verdicts[name] = verdict
            lines.update((f, n) for f, n in found)
            cpu += used
    return lines, verdicts, cpu


def model_lines(examples: int = CAMPAIGN_EXAMPLES, seed: int = 0) -> set[Line]:
    """The spec lines the differential campaign executes (its scenarios and examples)."""
    import tempfile

    from .campaign import run_campaign

    t = Tracer()
    with tempfile.TemporaryDirectory() as traces:  # no trace is kept: the campaign passes
        # The closed forms' memos (spec/geometry.py) would hide the lines of every call this
        # process made before (another test, another run): measure from cold memos.
        from livetail.spec import geometry

        for memo in geometry._MEMOS:
            memo.cache_clear()
        res = t.run(lambda: run_campaign(examples, Path(traces), seed=seed))
    if res.get("failures"):
        raise RuntimeError(f"the campaign failed: {res.get('failure')}")
    return t.lines


# --- statements and state changes ------------------------------------------------------------


def normalise(text: str) -> str:
    return " ".join(text.split())


def _unparse(s: ast.stmt) -> str:
    """ast.unparse, the same on every Python: 3.10 writes a tuple target in parentheses,
    3.11 and later do not (the allow-list's keys follow the later form)."""
    if isinstance(s, ast.Assign) and any(isinstance(t, ast.Tuple) for t in s.targets):
        targets = " = ".join(
            ", ".join(map(ast.unparse, t.elts)) if isinstance(t, ast.Tuple) else ast.unparse(t)
            for t in s.targets
        )
        return f"{targets} = {ast.unparse(s.value)}"
    return ast.unparse(s)


@dataclass(frozen=True)
class Statement:
    file: str
    function: str  # qualified: Class.method, or outer.inner for a nested function
    first: int  # the lines whose events mean it ran: a simple statement's own lines,
    last: int  # a compound statement's header
    text: str  # its first line's text, spaces normalised
    state: bool  # does it write state

    def key(self) -> tuple[str, str, str]:
        return (self.file, self.function, self.text)

    def ran(self, lines: set[Line]) -> bool:
        return any((self.file, n) in lines for n in range(self.first, self.last + 1))


def _root(e: ast.expr) -> ast.expr:
    while isinstance(e, (ast.Attribute, ast.Subscript, ast.Call)):
        e = e.func if isinstance(e, ast.Call) else e.value
    return e


def _owned(e: ast.expr, params: frozenset[str]) -> bool:
    """Is ``e`` state outside the function: reached through an attribute, or a parameter?"""
    if isinstance(e, ast.Attribute):
        return True
    if isinstance(e, ast.Subscript):
        return _owned(e.value, params) or (
            isinstance(_root(e), ast.Name) and _root(e).id in params  # type: ignore[attr-defined]
        )
    return isinstance(e, ast.Name) and e.id in params


def _target_writes(t: ast.expr, params: frozenset[str]) -> bool:
    if isinstance(t, (ast.Tuple, ast.List)):
        return any(_target_writes(x, params) for x in t.elts)
    if isinstance(t, ast.Starred):
        return _target_writes(t.value, params)
    return isinstance(t, (ast.Attribute, ast.Subscript)) and _owned(t, params)


def writes_state(stmt: ast.stmt, params: frozenset[str]) -> bool:
    """Does a simple statement write state outside its function (see the module's doc)?"""
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target] if not isinstance(stmt, ast.AnnAssign) or stmt.value else []
    elif isinstance(stmt, ast.Delete):
        targets = list(stmt.targets)
    if any(_target_writes(t, params) for t in targets):
        return True
    if isinstance(stmt, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)):
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in MUTATORS
                and _owned(node.func.value, params)
            ):
                return True
    return False


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return frozenset(names)


def _constructor(qual: str) -> bool:
    return qual.rsplit(".", 1)[-1] in ("__init__", "__post_init__", "__new__")


_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)


def statements(path: Path, rel: str) -> list[Statement]:
    """The statements of every function body in the file (nested ones included)."""
    source = path.read_text(encoding="utf-8")
    text = source.splitlines()
    out: list[Statement] = []

    def body(stmts: Iterable[ast.stmt], qual: str, params: frozenset[str]) -> None:
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                function(s, f"{qual}.{s.name}" if qual else s.name)
                continue
            if isinstance(s, ast.ClassDef):
                klass(s, f"{qual}.{s.name}" if qual else s.name)
                continue
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
                continue  # a docstring (or a bare constant): no code runs
            children = [
                c
                for name in ("body", "orelse", "finalbody", "handlers")
                for c in getattr(s, name, []) or []
            ]
            if isinstance(s, _COMPOUND) or children:
                first_child = min((c.lineno for c in children), default=s.lineno + 1)
                last = max(s.lineno, first_child - 1)
                state = False
            else:
                last = s.end_lineno or s.lineno
                # A constructor sets the initial state, which the theorems take as given
                # (symbolic); it is not a transition.
                state = writes_state(s, params) and not _constructor(qual)
            # A simple statement's key is its code (ast.unparse): its comments and line
            # breaks do not matter; a compound statement's, its first line.
            compound = isinstance(s, _COMPOUND) or bool(children)
            line = normalise(text[s.lineno - 1] if compound else _unparse(s))
            out.append(Statement(rel, qual, s.lineno, last, line, state))
            for name in ("body", "orelse", "finalbody"):
                body(getattr(s, name, []) or [], qual, params)
            for h in getattr(s, "handlers", []) or []:
                body(h.body, qual, params)

    def function(fn: ast.FunctionDef | ast.AsyncFunctionDef, qual: str) -> None:
        body(fn.body, qual, _params(fn))

    def klass(c: ast.ClassDef, qual: str) -> None:
        for s in c.body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                function(s, f"{qual}.{s.name}")
            elif isinstance(s, ast.ClassDef):
                klass(s, f"{qual}.{s.name}")

    for s in ast.parse(source).body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function(s, s.name)
        elif isinstance(s, ast.ClassDef):
            klass(s, s.name)
    return out


def spec_statements() -> list[Statement]:
    root = spec_dir()
    out: list[Statement] = []
    for p in sorted(root.glob("*.py")):
        out += statements(p, f"spec/{p.name}")
    return out


# --- the allow-list ---------------------------------------------------------------------------

Key = tuple[str, str, str]


def read_allowlist(path: Path = ALLOWLIST) -> dict[Key, str]:
    """The allow-list: each (file, function, normalised line) with its reason.

    Format: a header line ``## FILE FUNCTION: REASON`` opens a function's entries, each
    following non-empty line is one statement's text; ``#`` lines are comments."""
    out: dict[Key, str] = {}
    head: tuple[str, str, str] | None = None
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if line.startswith("## "):
            where, sep, reason = line[3:].partition(": ")
            parts = where.split()
            if not sep or len(parts) != 2 or not reason.strip():
                raise ValueError(f"{path}:{n}: expected '## FILE FUNCTION: REASON'")
            head = (parts[0], parts[1], reason.strip())
        elif not line or line.startswith("#"):
            continue
        elif head is None:
            raise ValueError(f"{path}:{n}: an entry before any '## FILE FUNCTION: REASON'")
        else:
            out[(head[0], head[1], normalise(line))] = head[2]
    return out


def render_allowlist(entries: dict[Key, str]) -> str:
    lines = [
        "# State-changing spec/ lines that no unbounded Z3 theorem executes, by function, with",
        "# the reason each is allowed (livetail verify --coverage; docs/theorems.md, 'What the",
        "# theorems execute'). Rewrite with: livetail verify --coverage --write-allowlist",
        "# (run in the source tree); keyed by file, function and the line's text.",
    ]
    by_function: dict[tuple[str, str, str], list[str]] = {}
    for (f, fn, text), reason in entries.items():
        by_function.setdefault((f, fn, reason), []).append(text)
    for (f, fn, reason), texts in sorted(by_function.items()):
        lines += ["", f"## {f} {fn}: {reason}", *texts]
    return "\n".join(lines) + "\n"


# --- the measure ------------------------------------------------------------------------------


@dataclass
class Measure:
    statements: list[Statement]
    model: set[Line]
    z3: set[Line]
    verdicts: dict[str, str] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # seconds: theorems, campaign

    def unproved(self) -> list[Statement]:
        """The state changes no unbounded theorem executes."""
        return [s for s in self.statements if s.state and not s.ran(self.z3)]

    def check(self, allowed: dict[Key, str]) -> tuple[list[Statement], list[Key]]:
        """(state changes outside what Z3 executes and not allowed, allow-list entries that
        name no such line)."""
        outside = self.unproved()
        keys = {s.key() for s in outside}
        return [s for s in outside if s.key() not in allowed], [k for k in allowed if k not in keys]

    def allowlist(self, old: dict[Key, str]) -> dict[Key, str]:
        """The allow-list for this measure: every unproved state change, old reasons kept."""
        return {s.key(): old.get(s.key(), DEFAULT_REASON) for s in self.unproved()}

    def table(self, allowed: dict[Key, str]) -> str:
        rows = [
            "| spec file | statements | model runs | Z3 executes | state changes "
            "| state changes Z3 executes | not executed by Z3 (allow-listed) |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        files = sorted({s.file for s in self.statements})
        total = [0] * 6
        for f in files:
            ss = [s for s in self.statements if s.file == f]
            st = [s for s in ss if s.state]
            out = [s for s in st if not s.ran(self.z3)]
            row = [
                len(ss),
                sum(s.ran(self.model) for s in ss),
                sum(s.ran(self.z3) for s in ss),
                len(st),
                len(st) - len(out),
                len(out),
            ]
            listed = sum(s.key() in allowed for s in out)
            total = [a + b for a, b in zip(total, row)]
            rows.append(f"| `{f}` | " + " | ".join(map(str, row[:5])) + f" | {row[5]} ({listed}) |")
        listed = sum(s.key() in allowed for s in self.unproved())
        rows.append(
            "| **all** | " + " | ".join(f"**{x}**" for x in total[:5]) + f" | **{total[5]}** "
            f"(**{listed}**) |"
        )
        return "\n".join(rows)


def measure(
    examples: int = CAMPAIGN_EXAMPLES, seed: int = 0, jobs: int = 2, campaign: bool = True
) -> Measure:
    """Run the unbounded theorems (quick) and the campaign under the tracer."""
    import time

    z3, verdicts, cpu = z3_lines(unbounded_theorems(), jobs=jobs)
    c0 = time.thread_time()
    model = model_lines(examples, seed) if campaign else set()
    costs = {"theorems": round(cpu, 1), "campaign": round(time.thread_time() - c0, 1)}
    return Measure(spec_statements(), model, z3, verdicts, costs)


DOC_MARKER = "coverage"


def write_docs(root: Path, m: Measure, allowed: dict[Key, str]) -> bool:
    """Rewrite docs/theorems.md's coverage table under ``root``; whether it changed."""
    from .theorems.tables import refresh

    path = root / "docs" / "theorems.md"
    text = path.read_text(encoding="utf-8")
    new = refresh(text, {DOC_MARKER: lambda: m.table(allowed)})
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def main(
    *, write_allowlist: bool, root: Path, jobs: int, seed: int, out: Callable[[str], None] = print
) -> int:
    """``livetail verify --coverage``: measure, print the table, check the allow-list."""
    m = measure(seed=seed, jobs=jobs)
    bad = {n: v for n, v in m.verdicts.items() if v != "proved"}
    if write_allowlist:
        target = root / "verify" / ALLOWLIST.name
        if not target.parent.is_dir():
            out(f"livetail verify --coverage: no verify/ under {root}: run it in the source tree")
            return 2
        old = read_allowlist(target) if target.exists() else {}
        entries = m.allowlist(old)
        target.write_text(render_allowlist(entries), encoding="utf-8")
        changed = write_docs(root, m, entries)
        out(f"wrote {target} ({len(entries)} entries)" + (", docs/theorems.md" if changed else ""))
        allowed = entries
    else:
        allowed = read_allowlist()
    out(m.table(allowed))
    out(
        f"measured with {m.cpu['theorems']:.1f} s of CPU in {len(m.verdicts)} theorem processes "
        f"and {m.cpu['campaign']:.1f} s in the campaign"
    )
    missing, stale = m.check(allowed)
    for s in missing:
        out(
            f"not executed by any unbounded theorem, not allow-listed: {s.file}:{s.first} "
            f"({s.function}) {s.text}"
        )
    for f, fn, text in stale:
        out(f"allow-list entry names no unexecuted state change any more: {f} {fn}: {text}")
    for n, v in bad.items():
        out(f"theorem {n}: {v} (its lines are counted as far as it ran)")
    if missing or stale:
        out("rewrite the allow-list with: livetail verify --coverage --write-allowlist")
    return 1 if missing or stale or bad else 0


def add_arguments(p: Any) -> None:
    """``livetail verify``'s --coverage and --write-allowlist (an argparse parser)."""
    p.add_argument(
        "--coverage",
        action="store_true",
        help="instead of a verify run: run the unbounded theorems (as --quick) and the campaign "
        "(--quick size) under a line tracer; print per spec/ file the statements the model "
        "runs, the ones Z3 executes and the state changes no unbounded theorem executes; fail "
        "when one of those is not on verify/coverage_allowlist.txt, or an entry is stale",
    )
    p.add_argument(
        "--write-allowlist",
        action="store_true",
        help="with --coverage, run in the source tree: rewrite verify/coverage_allowlist.txt "
        "and docs/theorems.md's coverage table from the measure",
    )


def from_args(args: Any) -> int:
    """Run --coverage for parsed ``livetail verify`` arguments; 2 (usage) without it."""
    if not args.coverage:
        print("livetail verify: --write-allowlist needs --coverage", file=sys.stderr)
        return 2
    return main(
        write_allowlist=args.write_allowlist, root=Path.cwd(), jobs=args.jobs, seed=args.seed
    )
