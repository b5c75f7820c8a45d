"""The theorem tables of README.md and docs/theorems.md say what the registry says.

The tables that are registry data (the README's theorem table, the per-property table, the
hot-path inventory, the kill table's variant legend, the theorem list) are generated
(``livetail theorems --docs DIR``, ``verify/theorems/tables.py``) and must equal what the
registry generates now.  Each row's domain (unbounded / bounded / witness), its "executes"
mark (which spec/runs.py transitions the theorem runs on symbolic state, and whether the
model's own classes call them) and its section-7 property are checked against what the
theorems and the spec do.  The kill table's cells are measured, not generated; its claimed
cells are the registry's claimed kills.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from livetail.verify.cli import main
from livetail.verify.theorems import (
    MODEL_CALLS,
    NO_THEOREM,
    SECTION7,
    THEOREMS,
    domain,
    properties,
)
from livetail.verify.theorems.tables import (
    DOC_BLOCKS,
    THROUGH,
    readme_table,
    refresh,
    stale_docs,
)
from livetail.verify.variants import VARIANTS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = (ROOT / "docs" / "theorems.md").read_text()


def _rows(text: str) -> list[list[str]]:
    """Every markdown table row of ``text`` as its stripped cells."""
    return [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("|---")
    ]


def _between(text: str, start: str, end: str) -> str:
    return text[text.index(start) + len(start) : text.index(end)]


def _short(name: str) -> str:
    return domain(THEOREMS[name]).split(" (")[0]


def test_generated_tables_of_the_docs_are_the_registrys() -> None:
    assert stale_docs(ROOT) == [], "stale: run `livetail theorems --docs .` and commit"


def test_refresh_rewrites_only_between_the_markers() -> None:
    text = "intro\n<!-- theorem-table:start -->\n| old | row |\n<!-- theorem-table:end -->\nend\n"
    out = refresh(text, DOC_BLOCKS["README.md"])
    assert out == (
        "intro\n<!-- theorem-table:start -->\n\n"
        + readme_table()
        + "\n\n<!-- theorem-table:end -->\nend\n"
    )
    assert refresh(out, DOC_BLOCKS["README.md"]) == out
    with pytest.raises(ValueError, match="theorem-table:start"):
        refresh("no markers", DOC_BLOCKS["README.md"])


def test_livetail_theorems_docs_checks_and_rewrites_a_stale_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for rel in DOC_BLOCKS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    doc = tmp_path / "docs" / "theorems.md"
    name = next(iter(THEOREMS))
    row = f"| 2. closed forms = slot-by-slot | `{name}` | unbounded |"
    text = doc.read_text()
    assert row in text
    doc.write_text(text.replace(row, f"| 2. closed forms = slot-by-slot | `{name}` | bounded |"))
    assert main(["theorems", "--docs", str(tmp_path), "--check"]) == 1
    assert capsys.readouterr().out == f"stale: {doc}\n"
    assert row not in doc.read_text()  # --check changes nothing
    assert main(["theorems", "--docs", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"rewrote: {doc}\n"
    assert doc.read_text() == text
    assert main(["theorems", "--docs", str(tmp_path), "--check"]) == 0
    assert capsys.readouterr().out == ""


def test_every_property_has_a_theorem_or_says_what_checks_it() -> None:
    for k in SECTION7:
        proving = [n for n, th in THEOREMS.items() if k in properties(th)]
        assert bool(proving) != (k in NO_THEOREM), k
    assert all(set(properties(th)) <= set(SECTION7) for th in THEOREMS.values())


# The module each section-7 property's theorems live in (docs/theorems.md, "Where things are").
MODULES = {
    1: {"all_or_nothing"},
    2: {"closed_forms"},
    3: {"sequential_charge", "prompt_charge"},
    4: {"live_tail_safety"},
    5: {"reclaim", "chunked"},
    6: {"conservation", "pool_transitions"},
    7: {"arithmetic", "hot_paths"},
    8: {"prefix", "naming", "chunked"},
    9: {"retention", "pool_transitions"},
    10: {"plans"},
    11: {"host_offload", "host_loads", "host_plans", "host_writeback"},
    12: {"events"},
}


def test_each_theorem_lives_in_the_module_of_the_property_it_establishes() -> None:
    for name, th in THEOREMS.items():
        module = th.check.__module__.removeprefix("livetail.verify.theorems.")
        first = properties(th)[:1]
        assert module in (MODULES[first[0]] if first else {"shift"}), (name, module)
    assert all(f"`{m}.py`" in DOCS for ms in MODULES.values() for m in ms)


def test_unbounded_means_no_bounds_and_witness_means_expected_witness() -> None:
    for name, th in THEOREMS.items():
        dom = _short(name)
        assert (dom == "bounded") == th.bounded, name
        assert (dom == "witness") == (th.expected == "witness" and not th.bounded), name
        if dom == "unbounded":
            assert "Unbounded" in th.statement or "unbounded" in th.statement, name
        assert not (th.bounded and th.executes), name


@pytest.mark.parametrize("function", sorted(MODEL_CALLS))
def test_model_calls_the_transitions_marked_as_its_own(function: str) -> None:
    """A "model's" mark is true: a spec module other than runs.py calls the function."""
    model = "\n".join(
        p.read_text() for p in (ROOT / "spec").glob("*.py") if p.name not in ("runs.py", "slots.py")
    )
    qualified = function if "." in function else f"runs.{function}"
    glue = THROUGH.get(qualified)
    if glue is not None:  # called through a glue function of spec/slots.py that calls it
        source = (ROOT / "spec" / "slots.py").read_text()
        body = source.split(f"def {glue.removeprefix('slots.')}(", 1)[1].split("\ndef ", 1)[0]
        assert re.search(rf"\b{re.escape(qualified.removeprefix('slots.'))}\(", body), function
        qualified = glue
    assert re.search(rf"\b{re.escape(qualified)}\(", model), function


def test_parallel_transitions_are_not_called_by_the_model() -> None:
    """A "parallel" mark is true: no spec module but runs.py calls the function."""
    model = "\n".join(p.read_text() for p in (ROOT / "spec").glob("*.py") if p.name != "runs.py")
    executed_anywhere = {f for th in THEOREMS.values() for f in th.executes}
    for function in executed_anywhere - MODEL_CALLS:
        qualified = function if "." in function else f"runs.{function}"
        assert not re.search(rf"\b{re.escape(qualified)}\(", model), function


def test_docs_claim_nothing_the_suite_does_not_do() -> None:
    """Claims an earlier version made and the suite does not back."""
    for text in (README, DOCS):
        flat = " ".join(text.split())
        assert "proves properties 1 to 11" not in flat
        assert "executed reclaim, free" not in flat
        assert "(reclaim, executed" not in flat


def test_kill_table_claims_are_the_registrys() -> None:
    table = _between(DOCS, "## Kill table", "## The theorems")
    header = next(r for r in _rows(table) if r[0] == "theorem")
    numbers = [int(c) for c in header[1:]]
    legend = dict(re.findall(r"^(\d+)\. `([a-z0-9-]+)`", table, flags=re.MULTILINE))
    assert [legend[str(i)] for i in numbers] == list(VARIANTS)
    rows = {r[0]: r[1:] for r in _rows(table) if r[0] in THEOREMS}
    assert list(rows) == list(THEOREMS)
    for name, cells in rows.items():
        for variant, cell in zip(VARIANTS, cells):
            assert cell.endswith("!") == (variant in THEOREMS[name].kills), (name, variant)
