"""docs/theorems.md's table of measured Z3 use agrees with the registry's budgets.

The table is ``livetail rlimits --markdown`` (seeds 0, 1, 2, every theorem in full and under
each variant it claims to reject); each budget is at least twice the most units a seed used.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("z3")

from livetail.verify.rlimits import MARGIN  # noqa: E402
from livetail.verify.theorems import THEOREMS  # noqa: E402

DOC = Path(__file__).resolve().parent.parent / "docs" / "theorems.md"
ROW = re.compile(r"^\| `([^`]+)` \| (.*) \| ([\d,]+) \| ([\d.]+x|-) \|$")


def _table() -> dict[str, tuple[list[int], int]]:
    text = DOC.read_text()
    start, end = text.index("<!-- rlimits:start -->"), text.index("<!-- rlimits:end -->")
    rows: dict[str, tuple[list[int], int]] = {}
    for line in text[start:end].splitlines():
        m = ROW.match(line.strip())
        if m:
            used = [int(u.replace(",", "")) for u in m.group(2).split(" | ")]
            rows[m.group(1)] = (used, int(m.group(3).replace(",", "")))
    return rows


def test_every_theorem_has_a_row_with_its_registered_budget() -> None:
    rows = _table()
    assert sorted(rows) == sorted(THEOREMS)
    for name, (used, budget) in rows.items():
        assert len(used) == 3, name
        assert budget == THEOREMS[name].budget, name


def test_every_budget_covers_twice_the_most_a_seed_used() -> None:
    for name, (used, budget) in _table().items():
        assert budget >= MARGIN * max(used), name
        # Measured, not left at the default.
        assert THEOREMS[name].rlimit is not None, name
