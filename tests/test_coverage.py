"""What the theorems execute (livetail verify --coverage): the measure, the allow-list, the table.

The measure runs every unbounded Z3 theorem (as --quick runs it) and the campaign at --quick
size under a line tracer: about a minute of CPU, once for this file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from livetail.verify import coverage as cov
from livetail.verify.theorems.tables import refresh

ROOT = Path(__file__).resolve().parent.parent


def _writes(src: str) -> list[bool]:
    """writes_state for each statement of the body of ``def f(self, pool, slots): ...``."""
    fn = ast.parse(f"def f(self, pool, slots):\n    {src}").body[0]
    assert isinstance(fn, ast.FunctionDef)
    return [cov.writes_state(s, frozenset({"self", "pool", "slots"})) for s in fn.body]


@pytest.mark.parametrize(
    "src,expected",
    [
        ("self._free -= k", True),
        ("pool._ref[page] += 1", True),
        ("table.slots[s] = 0", True),  # an attribute of any object
        ("slots[s] = cell(s, slots[s])", True),  # an item of a parameter
        ("self._queue.append(p)", True),
        ("p = self._queue.pop()", True),
        ("return self._names.pop(page, None)", True),
        ("del self._pages_named[name]", True),
        ("pool._by_name.setdefault(n, []).append(p)", True),
        ("x = 1", False),  # a local
        ("out = []; out.append(3)", False),  # a local list
        ("n = len(self._queue)", False),  # a read
        ("slots = [0]", False),  # rebinding a parameter changes nothing outside
        ("y = pool._ref[page] + 1", False),
    ],
)
def test_state_changes_are_found_syntactically(src: str, expected: bool) -> None:
    assert any(_writes(src)) is expected


def test_statements_are_keyed_by_function_and_text(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text(
        "class P:\n"
        "    def take(self, k):\n"
        '        """Doc."""\n'
        "        if k:\n"
        "            self._free  -=  k\n"
        "        return k\n"
        "def g(t):\n"
        "    def inner():\n"
        "        t.x = 1\n"
        "    inner()\n"
    )
    got = [(s.function, s.text, s.state) for s in cov.statements(f, "spec/m.py")]
    assert got == [
        ("P.take", "if k:", False),
        ("P.take", "self._free -= k", True),
        ("P.take", "return k", False),
        ("g.inner", "t.x = 1", True),
        ("g", "inner()", False),
    ]


def test_allowlist_round_trips_and_rejects_a_bad_header(tmp_path: Path) -> None:
    entries = {
        ("spec/pool.py", "BlockPool._allocate", "self._free -= k"): "glue not yet a transition",
        ("spec/pool.py", "BlockPool._allocate", "q.pop()"): "glue not yet a transition",
        ("spec/table.py", "BlockTable.claim", "self.slots[s] = p"): "another reason",
    }
    path = tmp_path / "allow.txt"
    path.write_text(cov.render_allowlist(entries))
    assert cov.read_allowlist(path) == entries
    path.write_text("## spec/pool.py no reason here\nx = 1\n")
    with pytest.raises(ValueError, match="FILE FUNCTION: REASON"):
        cov.read_allowlist(path)


@pytest.fixture(scope="module")
def measure() -> cov.Measure:
    return cov.measure()


def test_every_unbounded_theorem_proved_under_the_tracer(measure: cov.Measure) -> None:
    assert measure.verdicts == {n: "proved" for n in cov.unbounded_theorems()}


def test_z3_executes_the_slot_rules_and_not_the_glue(measure: cov.Measure) -> None:
    by_key = {(s.file, s.function): s for s in measure.statements}
    # Rules the slot theorems run on symbolic slots ...
    for fn in ("punched", "reclaim_cell", "reclaimable_cell", "stores", "removes", "clears"):
        assert by_key[("spec/slots.py", fn)].ran(measure.z3), fn
    # ... the pool's own transitions, every state change of them (ListMem's writes are the
    # list spelling of what the theorems run as Z3 stores) ...
    pool = [s for s in measure.statements if s.file == "spec/pool_state.py" and s.state]
    lists = [s for s in pool if s.function.startswith("ListMem.")]
    assert len(lists) == 6 and all(s.ran(measure.model) and not s.ran(measure.z3) for s in lists)
    rest = [s for s in pool if s not in lists]
    assert rest and all(s.ran(measure.z3) and s.ran(measure.model) for s in rest)
    # ... and glue no unbounded theorem runs, which the model does.
    glue = [s for s in measure.statements if s.function == "_Manager._acquire" and s.state]
    assert glue and not any(s.ran(measure.z3) for s in glue)
    assert all(s.ran(measure.model) for s in glue)


def test_every_unexecuted_state_change_is_allow_listed_and_no_entry_is_stale(
    measure: cov.Measure,
) -> None:
    missing, stale = measure.check(cov.read_allowlist())
    assert not missing, "not allow-listed (livetail verify --coverage --write-allowlist): " + (
        "; ".join(f"{s.file}:{s.first} {s.function}: {s.text}" for s in missing)
    )
    assert not stale, f"stale allow-list entries: {stale}"


def test_an_unlisted_state_change_fails_the_check(measure: cov.Measure) -> None:
    allowed = cov.read_allowlist()
    dropped = next(iter(allowed))
    missing, stale = measure.check({k: v for k, v in allowed.items() if k != dropped})
    assert [s.key() for s in missing] == [dropped] * len(missing) and missing
    _, stale = measure.check({**allowed, ("spec/pool.py", "BlockPool.nothing", "x = 1"): "r"})
    assert stale == [("spec/pool.py", "BlockPool.nothing", "x = 1")]


def test_docs_table_is_the_measure(measure: cov.Measure) -> None:
    text = (ROOT / "docs" / "theorems.md").read_text()
    fresh = refresh(text, {cov.DOC_MARKER: lambda: measure.table(cov.read_allowlist())})
    assert text == fresh, "stale: livetail verify --coverage --write-allowlist (source tree)"


def test_write_allowlist_needs_coverage() -> None:
    from livetail.verify.cli import EXIT_USAGE, main

    assert main(["verify", "--write-allowlist"]) == EXIT_USAGE
