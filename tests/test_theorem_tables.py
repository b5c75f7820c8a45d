"""The theorem tables of README.md and docs/theorems.md say what the registry says.

Each row's domain (unbounded / bounded / witness), its "executes" mark (which spec/runs.py
transitions the theorem runs on symbolic state, and whether the model's own classes call
them) and its section-7 property are read back from the docs and compared with the
registry, so a doc row cannot claim more than the theorem does.  The kill table's claimed
cells are the registry's claimed kills.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from livetail.verify.theorems import (
    MODEL_CALLS,
    NO_THEOREM,
    PROPERTY,
    SECTION7,
    THEOREMS,
    domain,
    executed,
    properties,
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


def test_readme_rows_state_each_theorems_domain_executes_mark_and_property() -> None:
    rows = {r[0].strip("`"): r for r in _rows(README) if r[0].startswith("`")}
    assert set(rows) >= set(THEOREMS)
    for name in THEOREMS:
        _, dom, executes, establishes, _ = rows[name]
        assert dom == _short(name), name
        assert executes == executed(THEOREMS[name]), name
        assert establishes == PROPERTY[name], name


def test_docs_property_table_rows_match_the_registry() -> None:
    table = _between(DOCS, "<!-- properties:start -->", "<!-- properties:end -->")
    rows = _rows(table)[1:]  # the header row first
    seen: dict[int, list[str]] = {k: [] for k in SECTION7}
    for prop, name, dom, executes in rows:
        k = int(prop.split(".")[0])
        assert prop == f"{k}. {SECTION7[k]}"
        if name == "-":
            assert dom == NO_THEOREM[k] and executes == "-", prop
            continue
        name = name.strip("`")
        assert k in properties(THEOREMS[name]), (prop, name)
        assert dom == _short(name), name
        assert executes == executed(THEOREMS[name]), name
        seen[k].append(name)
    for k in SECTION7:
        want = [n for n, th in THEOREMS.items() if k in properties(th)]
        assert seen[k] == want, k
        assert bool(want) != (k in NO_THEOREM), k


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
