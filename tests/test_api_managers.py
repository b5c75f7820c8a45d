"""Managers and tables (semantics sections 3-5), on the native module and the spec alike."""

from __future__ import annotations

from types import ModuleType

import pytest


def ids(a: object) -> list[int]:
    return [int(x) for x in a]  # type: ignore[attr-defined]


def real_slots(t: object) -> list[int]:
    return [s for s, p in enumerate(ids(t.page_ids())) if p != 0]  # type: ignore[attr-defined]


POOL = 2**16


# --- table shape ------------------------------------------------------------------------


def test_fresh_table_is_empty_and_unbound(impl: ModuleType) -> None:
    t = impl.BlockTable()
    assert len(t) == 0
    assert t.tail_available == 0
    assert t.reclaim_floor == 0
    assert t.extent == 0
    assert t.num_real_pages == 0
    assert not t.is_bound
    assert ids(t.page_ids()) == []


def test_acquire_tracks_tail_room_and_extent(impl: ModuleType) -> None:
    pool, t, m = impl.BlockPool(64), impl.BlockTable(), impl.FullAttentionManager(8)
    assert m.acquire(pool, t, 5)
    assert (len(t), t.tail_available, t.extent) == (1, 3, 5)
    assert m.acquire(pool, t, 3)  # fills the tail room: no new slot, no page
    assert (len(t), t.tail_available, t.extent, pool.num_free) == (1, 0, 8, 62)
    assert m.acquire(pool, t, 17)
    assert (len(t), t.tail_available, t.extent, pool.num_free) == (4, 7, 25, 59)


def test_acquire_of_zero_tokens_is_a_no_op_that_binds_nothing(impl: ModuleType) -> None:
    pool, t = impl.BlockPool(8), impl.BlockTable()
    assert impl.SlidingWindowManager(4, 4, 4).acquire(pool, t, 0)
    assert not t.is_bound
    assert (len(t), pool.num_free) == (0, 7)


def test_acquire_that_only_fills_tail_room_binds_the_table(impl: ModuleType) -> None:
    pool, m = impl.BlockPool(8), impl.FullAttentionManager(4)
    t = impl.BlockTable()
    m.acquire(pool, t, 1)
    m.free(pool, t)
    assert not t.is_bound
    m.acquire(pool, t, 1)
    assert t.is_bound


# --- reference figures (semantics section 4) ----------------------------------------------


def test_live_tail_chunk_of_8192_tokens_has_64_real_pages_of_1024_slots(impl: ModuleType) -> None:
    pool, t = impl.BlockPool(POOL), impl.BlockTable()
    m = impl.SlidingWindowManager(8, 12, 256)
    assert m.blocks_needed_for(t, 8192) == 64
    assert m.acquire(pool, t, 8192)
    assert len(t) == 1024
    assert t.num_real_pages == 64
    assert real_slots(t) == [s for s in range(1024) if s % 32 >= 30]  # includes 1022, 1023
    # Real slots take the queue front in ascending slot order.
    assert [ids(t.page_ids())[s] for s in real_slots(t)] == list(range(1, 65))
    assert pool.num_free == POOL - 1 - 64


def test_live_tail_need_is_not_monotonic_in_tokens(impl: ModuleType) -> None:
    t, m = impl.BlockTable(), impl.SlidingWindowManager(8, 12, 256)
    assert m.blocks_needed_for(t, 17) == 3
    assert m.blocks_needed_for(t, 19) == 2


def test_sequential_charge_17_then_2_is_3_while_combined_19_is_2(impl: ModuleType) -> None:
    pool, t, m = impl.BlockPool(64), impl.BlockTable(), impl.SlidingWindowManager(8, 12, 256)
    assert m.blocks_needed_for_sequential(t, 17, 2) == 3
    assert m.blocks_needed_for(t, 19) == 2
    m.acquire(pool, t, 17)
    m.acquire(pool, t, 2)
    assert pool.num_pinned == 3


def test_sequential_charge_with_a_zero_part_is_the_combined_charge(impl: ModuleType) -> None:
    t, m = impl.BlockTable(), impl.SlidingWindowManager(8, 12, 256)
    assert m.blocks_needed_for_sequential(t, 0, 19) == 2
    assert m.blocks_needed_for_sequential(t, 19, 0) == 2


def test_sequential_charge_of_a_non_live_group_is_the_combined_charge(impl: ModuleType) -> None:
    t, m = impl.BlockTable(), impl.SlidingWindowManager(8, 12)
    assert m.blocks_needed_for_sequential(t, 17, 2) == m.blocks_needed_for(t, 19) == 3


def test_plain_sliding_acquire_makes_every_slot_real(impl: ModuleType) -> None:
    pool, t, m = impl.BlockPool(POOL), impl.BlockTable(), impl.SlidingWindowManager(8, 12)
    assert m.blocks_needed_for(t, 8192) == 1024
    m.acquire(pool, t, 8192)
    assert ids(t.page_ids()) == list(range(1, 1025))


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([8192, 1, 7, 1], [64, 1, 0, 1]),
        ([17, 2, 300, 5], [3, 0, 4, 1]),
        ([5, 250, 1, 256], [1, 2, 0, 2]),
    ],
)
def test_acquire_takes_exactly_blocks_needed_for(
    impl: ModuleType, steps: list[int], expected: list[int]
) -> None:
    pool, t, m = impl.BlockPool(POOL), impl.BlockTable(), impl.SlidingWindowManager(8, 12, 256)
    taken = []
    for n in steps:
        need = m.blocks_needed_for(t, n)
        before = pool.num_free
        assert m.acquire(pool, t, n)
        assert before - pool.num_free == need
        taken.append(need)
    assert taken == expected


def test_window_of_one_chunk_ending_on_a_page_boundary_takes_no_page(impl: ModuleType) -> None:
    pool, t, m = impl.BlockPool(8), impl.BlockTable(), impl.SlidingWindowManager(8, 1, 8)
    assert m.blocks_needed_for(t, 16) == 0
    assert m.acquire(pool, t, 16)
    assert ids(t.page_ids()) == [0, 0]
    assert pool.num_free == 7
    assert t.is_bound
    # One token past the boundary: the query at token 16 reads its own page.
    assert m.acquire(pool, t, 1)
    assert ids(t.page_ids()) == [0, 0, 1]


def test_live_tail_with_period_no_longer_than_resume_pages_is_full_allocation(
    impl: ModuleType,
) -> None:
    # B=8, W=100: R = ceil(99/8) = 13 >= m = 64/8 = 8, so every slot is live.
    pool, t, m = impl.BlockPool(256), impl.BlockTable(), impl.SlidingWindowManager(8, 100, 64)
    assert m.acquire(pool, t, 1024)
    assert t.num_real_pages == 128


# --- reclaim ---------------------------------------------------------------------------------


def test_reclaim_punches_every_real_slot_below_slid_out_and_returns_the_count(
    impl: ModuleType,
) -> None:
    pool, t, m = impl.BlockPool(POOL), impl.BlockTable(), impl.SlidingWindowManager(8, 12, 256)
    m.acquire(pool, t, 8192)
    # slid_out(8192) = (8192 - 11) // 8 = 1022: all resume pages below go, 1022 and 1023 stay.
    assert m.blocks_reclaimable_at(t, 8192) == 62
    assert m.reclaim_expired(pool, t, 8192) == 62
    assert real_slots(t) == [1022, 1023]
    assert t.reclaim_floor == 1022
    assert t.num_real_pages == 2
    assert m.reclaim_expired(pool, t, 8192) == 0
    assert pool.num_pinned == 2


def test_reclaim_puts_unnamed_pages_at_the_front_last_slot_first_across_holes(
    impl: ModuleType,
) -> None:
    pool, t, m = impl.BlockPool(POOL), impl.BlockTable(), impl.SlidingWindowManager(8, 12, 256)
    m.acquire(pool, t, 8192)
    page = ids(t.page_ids())
    m.reclaim_expired(pool, t, 8192)
    released = [page[s] for s in range(1022) if page[s] != 0]
    # Released in ascending slot order, each pushed on the queue's front (retention rule).
    assert ids(pool.free_queue())[:62] == released[::-1]


def test_reclaim_never_moves_the_floor_back(impl: ModuleType) -> None:
    pool, t, m = impl.BlockPool(64), impl.BlockTable(), impl.SlidingWindowManager(4, 4)
    m.acquire(pool, t, 40)
    assert m.reclaim_expired(pool, t, 40) == 9  # slid_out(40) = 37 // 4 = 9
    assert t.reclaim_floor == 9
    assert m.reclaim_expired(pool, t, 20) == 0
    assert t.reclaim_floor == 9


def test_reclaim_below_the_window_releases_nothing(impl: ModuleType) -> None:
    pool, t, m = impl.BlockPool(64), impl.BlockTable(), impl.SlidingWindowManager(4, 12)
    m.acquire(pool, t, 12)
    assert m.reclaim_expired(pool, t, 12) == 0  # slid_out(12) = (12 - 11) // 4 = 0
    assert t.reclaim_floor == 0


def test_full_attention_reclaims_nothing_and_keeps_the_floor(impl: ModuleType) -> None:
    pool, t, m = impl.BlockPool(64), impl.BlockTable(), impl.FullAttentionManager(4)
    m.acquire(pool, t, 40)
    assert m.blocks_reclaimable_at(t, 40) == 0
    assert m.reclaim_expired(pool, t, 40) == 0
    assert t.reclaim_floor == 0
    assert t.num_real_pages == 10


def test_state_group_keeps_only_its_last_page_after_reclaim(impl: ModuleType) -> None:
    pool, t, m = impl.BlockPool(64), impl.BlockTable(), impl.StateManager(16)
    assert (m.kind, m.sliding_window, m.live_alloc_alignment) == ("state", 2, 0)
    m.acquire(pool, t, 100)
    assert t.num_real_pages == 7  # a chunk allocates every slot, like plain sliding
    assert m.reclaim_expired(pool, t, t.extent) == 6
    assert real_slots(t) == [6]


def test_reclaimable_without_uncached_pages_is_zero_before_prefix_caching(
    impl: ModuleType,
) -> None:
    pool, t, m = impl.BlockPool(64), impl.BlockTable(), impl.SlidingWindowManager(4, 4)
    m.acquire(pool, t, 40)
    assert m.blocks_reclaimable_at(t, 40) == 9
    assert m.blocks_reclaimable_at(t, 40, count_uncached=False) == 0


# --- free ------------------------------------------------------------------------------------


def test_free_empties_and_unbinds_the_table_and_restores_the_pool(impl: ModuleType) -> None:
    pool, t, m = impl.BlockPool(POOL), impl.BlockTable(), impl.SlidingWindowManager(8, 12, 256)
    m.acquire(pool, t, 8190)
    m.reclaim_expired(pool, t, 4000)
    m.free(pool, t)
    assert (len(t), t.tail_available, t.reclaim_floor, t.extent) == (0, 0, 0, 0)
    assert not t.is_bound
    assert pool.num_free == POOL - 1
    assert ids(pool.ref_counts()) == [0] * POOL


def test_free_of_a_live_table_puts_its_pages_at_the_front_in_slot_order(
    impl: ModuleType,
) -> None:
    pool, t, m = impl.BlockPool(POOL), impl.BlockTable(), impl.SlidingWindowManager(8, 12, 256)
    m.acquire(pool, t, 8192)
    m.free(pool, t)
    # Last slot released first, each unnamed page pushed on the front.
    assert ids(pool.free_queue())[:64] == list(range(1, 65))


def test_free_of_an_unbound_table_is_a_no_op(impl: ModuleType) -> None:
    pool, t = impl.BlockPool(8), impl.BlockTable()
    impl.FullAttentionManager(4).free(pool, t)
    assert pool.num_free == 7


def test_table_is_reusable_after_free(impl: ModuleType) -> None:
    pool, t, m = impl.BlockPool(16), impl.BlockTable(), impl.FullAttentionManager(4)
    m.acquire(pool, t, 8)
    m.free(pool, t)
    other = impl.BlockPool(16)
    assert m.acquire(other, t, 4)  # a freed table may join another pool
    assert ids(t.page_ids()) == [1]


# --- manager properties --------------------------------------------------------------------


def test_manager_properties(impl: ModuleType) -> None:
    full = impl.FullAttentionManager(256)
    assert (full.kind, full.block_size, full.sliding_window, full.live_alloc_alignment) == (
        "full",
        256,
        None,
        0,
    )
    sw = impl.SlidingWindowManager(8, 12, live_alloc_alignment=256)
    assert (sw.kind, sw.block_size, sw.sliding_window, sw.live_alloc_alignment) == (
        "sliding",
        8,
        12,
        256,
    )
    assert impl.SlidingWindowManager(block_size=8, sliding_window=12).live_alloc_alignment == 0
