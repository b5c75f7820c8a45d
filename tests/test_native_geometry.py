"""native/include/livetail/geometry.h against spec/geometry.py, through the native managers.

The C++ closed forms must give exactly what the Python expressions give (the ones the Z3
proofs cover), and acquire must place real pages exactly where the slot-by-slot
definition says, for every geometry.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from livetail import BlockPool, BlockTable, SlidingWindowManager, StateManager
from livetail.spec import geometry as g

INT32_MAX = 2**31 - 1


@st.composite
def geometries(draw: st.DrawFn) -> tuple[int, int, int]:
    B = draw(st.integers(1, 12))
    W = draw(st.integers(1, 40))
    A = B * draw(st.integers(0, 6))
    return B, W, A


@given(
    geo=geometries(),
    steps=st.lists(
        st.tuples(st.integers(0, 90), st.integers(0, 30), st.integers(0, 100)), max_size=8
    ),
)
def test_acquire_and_queries_match_the_python_geometry(
    geo: tuple[int, int, int], steps: list[tuple[int, int, int]]
) -> None:
    B, W, A = geo
    m = SlidingWindowManager(B, W, A)
    pool, t = BlockPool(4096), BlockTable()
    for n, extra, back in steps:
        slots, tail, extent = len(t), t.tail_available, t.extent
        need = m.blocks_needed_for(t, n)
        assert need == g.blocks_needed(slots, tail, n, W, B, A)
        assert m.blocks_needed_for_sequential(t, n, extra) == g.blocks_needed_sequential(
            slots, tail, n, extra, W, B, A
        )
        free = pool.num_free
        assert m.acquire(pool, t, n)
        assert free - pool.num_free == need
        new = g.new_slots(tail, B, n)
        live = g.live_slots_by_definition(slots, new, extent + n, W, B, A)
        assert [p != 0 for p in t.page_ids()[slots:].tolist()] == live
        assert t.tail_available == g.tail_after(tail, B, n)
        # Reclaim at a frontier some tokens behind the extent.
        f = max(0, t.extent - back)
        b = g.reclaim_bound(f, len(t), W, B)
        expect = sum(1 for p in t.page_ids()[t.reclaim_floor : max(b, 0)].tolist() if p)
        assert m.blocks_reclaimable_at(t, f) == expect
        assert m.reclaim_expired(pool, t, f) == expect
        assert not t.page_ids()[:b].any()
        assert t.num_real_pages == int((t.page_ids() != 0).sum())
    m.free(pool, t)
    assert pool.num_free == 4095


@given(
    B=st.integers(1, INT32_MAX),
    W=st.integers(1, INT32_MAX),
    k=st.integers(0, INT32_MAX),
    n=st.integers(0, INT32_MAX),
    extra=st.integers(0, INT32_MAX),
)
def test_queries_match_the_python_geometry_at_the_int32_limits(
    B: int, W: int, k: int, n: int, extra: int
) -> None:
    A = min(k, INT32_MAX // B) * B
    m, t = SlidingWindowManager(B, W, A), BlockTable()
    if g.fits_int32(0, 0, B, n):
        assert m.blocks_needed_for(t, n) == g.blocks_needed(0, 0, n, W, B, A)
    else:
        with pytest.raises(ValueError, match="num_tokens"):
            m.blocks_needed_for(t, n)
    both_fit = g.fits_int32(0, 0, B, n) and g.fits_int32(
        g.new_slots(0, B, n), g.tail_after(0, B, n), B, extra
    )
    if both_fit:
        assert m.blocks_needed_for_sequential(t, n, extra) == g.blocks_needed_sequential(
            0, 0, n, extra, W, B, A
        )
    else:
        with pytest.raises(ValueError, match="tokens"):
            m.blocks_needed_for_sequential(t, n, extra)


@given(B=st.integers(1, 64), n=st.integers(1, 2000))
def test_state_group_allocates_every_slot_then_keeps_the_last(B: int, n: int) -> None:
    m, pool, t = StateManager(B), BlockPool(4096), BlockTable()
    m.acquire(pool, t, n)
    assert t.num_real_pages == len(t) == g.ceil_div(n, B)
    m.reclaim_expired(pool, t, n)
    assert t.num_real_pages == 1
    assert t.page_ids()[-1] != 0
