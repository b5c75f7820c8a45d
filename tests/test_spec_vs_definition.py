"""Both implementations against the differential machine's slot-by-slot oracle, on a grid.

The oracle (verify/machine/oracle.py) is written from semantics.md alone and judges every step
of the differential test; here it is checked exhaustively on small geometries against the
spec and the native module, so a disagreement points at one of the three, not at chance.
"""

from __future__ import annotations

import itertools
from types import ModuleType

import pytest
from livetail.verify.machine.oracle import (
    GroupRule,
    Shape,
    oracle_after,
    oracle_live,
    oracle_sequential,
    oracle_take,
)

# (B, W, m): windows below, at and above a page and the alignment A = m * B, incl. W = 1.
GRID = [
    (B, W, m)
    for B, m in itertools.product((1, 2, 3, 8), (1, 2, 3, 5))
    for W in sorted({1, 2, B, B + 1, m * B, m * B + 1, 2 * m * B + 3})
]


def _prefixes(B: int, A: int) -> list[int]:
    return sorted({0, 1, B - 1, B, A - 1, A, A + 1, 2 * A + 3} - {-1})


def test_oracle_reproduces_the_reference_figures() -> None:
    live = GroupRule("sliding", 8, 12, 256)
    assert oracle_take(Shape(0, 0), 8192, live) == 64
    assert [s for s in range(1024) if oracle_live(s, 8192, live)] == sorted(
        {1022, 1023} | {s for s in range(1024) if s % 32 >= 30}
    )
    assert (oracle_take(Shape(0, 0), 17, live), oracle_take(Shape(0, 0), 19, live)) == (3, 2)
    assert oracle_sequential(Shape(0, 0), 17, 2, live) == 3


def test_oracle_shape_after_acquire_follows_section_5() -> None:
    assert oracle_after(Shape(0, 0), 17, 8) == Shape(3, 7)
    assert oracle_after(Shape(3, 7), 7, 8) == Shape(3, 0)
    assert oracle_after(Shape(3, 0), 16, 8) == Shape(5, 0)
    assert oracle_after(Shape(3, 5), 2, 8) == Shape(3, 3)


@pytest.mark.parametrize(("B", "W", "m"), GRID)
def test_needed_and_sequential_equal_the_slot_by_slot_count(
    impl: ModuleType, B: int, W: int, m: int
) -> None:
    A = m * B
    rule = GroupRule("sliding", B, W, A)
    manager = impl.SlidingWindowManager(B, W, A)
    for p in _prefixes(B, A):
        pool = impl.BlockPool(4 * A + 64)
        table = impl.BlockTable()
        assert manager.acquire(pool, table, p)
        shape = Shape(len(table), int(table.tail_available))
        for n in range(0, 2 * A + 2 * B + 1):
            assert manager.blocks_needed_for(table, n) == oracle_take(shape, n, rule), (p, n)
        for first, extra in itertools.product(range(0, A + B + 1), (0, 1, 2, B)):
            assert manager.blocks_needed_for_sequential(table, first, extra) == (
                oracle_sequential(shape, first, extra, rule)
            ), (p, first, extra)


@pytest.mark.parametrize(("B", "W", "m"), GRID)
def test_acquire_makes_exactly_the_live_slots_real(
    impl: ModuleType, B: int, W: int, m: int
) -> None:
    A = m * B
    rule = GroupRule("sliding", B, W, A)
    manager = impl.SlidingWindowManager(B, W, A)
    for p, n in itertools.product(_prefixes(B, A), (1, B, A, A + 1, 2 * A + B - 1)):
        pool = impl.BlockPool(8 * A + 64)
        table = impl.BlockTable()
        assert manager.acquire(pool, table, p)
        before = len(table)
        extent = int(table.extent)
        assert manager.acquire(pool, table, n)
        pages = [int(x) for x in table.page_ids()]
        real = [s for s in range(before, len(table)) if pages[s] != 0]
        live = [s for s in range(before, len(table)) if oracle_live(s, extent + n, rule)]
        assert real == live, (p, n)
