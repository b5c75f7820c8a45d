"""README.md and docs/theorems.md agree with the registry on what is proved unbounded."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("z3")

from livetail.verify.theorems import SECTION7, THEOREMS  # noqa: E402
from livetail.verify.theorems.registry import properties  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PARTIAL = "6, 8, 9, 10, 11 and 12"
"""The properties whose unbounded theorems cover part of them (the rest bounded)."""


def _text(rel: str) -> str:
    return " ".join((ROOT / rel).read_text().split())


def test_every_property_has_an_unbounded_theorem() -> None:
    for k in SECTION7:
        unbounded = [
            th.name
            for th in THEOREMS.values()
            if k in properties(th) and not th.bounded and th.expected == "proved"
        ]
        assert unbounded, k


def test_readme_and_theorems_doc_state_the_same_unbounded_coverage() -> None:
    readme, doc = _text("README.md"), _text("docs/theorems.md")
    assert "it checks properties 1 to 12 of the reference semantics" in readme
    assert "each of 1 to 12 has an unbounded theorem" in doc
    for text in (readme, doc):
        assert f"for {PARTIAL} over part of the property" in text
    assert "checked by tests only" not in readme
    # Both say the model's own code around the rules is not what Z3 executes.
    assert "What the theorems execute" in readme and "What the theorems execute" in doc
