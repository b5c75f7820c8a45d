"""BlockPool (semantics section 2), on the native module and the spec alike."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest


def ids(a: object) -> list[int]:
    return [int(x) for x in a]  # type: ignore[attr-defined]


def test_new_pool_queues_every_page_but_the_null_page_in_id_order(impl: ModuleType) -> None:
    pool = impl.BlockPool(6)
    assert pool.num_blocks == 6
    assert pool.num_free == 5
    assert pool.num_pinned == 0
    assert ids(pool.free_queue()) == [1, 2, 3, 4, 5]
    assert ids(pool.ref_counts()) == [0, 0, 0, 0, 0, 0]


def test_pool_of_one_block_holds_only_the_null_page(impl: ModuleType) -> None:
    pool = impl.BlockPool(1)
    assert pool.num_free == 0
    assert ids(pool.free_queue()) == []
    assert ids(pool.ref_counts()) == [0]


def test_allocation_takes_the_queue_front_with_count_one(impl: ModuleType) -> None:
    pool = impl.BlockPool(8)
    t = impl.BlockTable()
    assert impl.FullAttentionManager(4).acquire(pool, t, 12)
    assert ids(t.page_ids()) == [1, 2, 3]
    assert ids(pool.free_queue()) == [4, 5, 6, 7]
    assert ids(pool.ref_counts()) == [0, 1, 1, 1, 0, 0, 0, 0]
    assert pool.ref_count(2) == 1
    assert pool.ref_count(0) == 0
    assert pool.num_free + pool.num_pinned == pool.num_blocks - 1


def test_batch_free_puts_unnamed_pages_at_the_front_in_slot_order(impl: ModuleType) -> None:
    pool = impl.BlockPool(8)
    t = impl.BlockTable()
    m = impl.FullAttentionManager(4)
    m.acquire(pool, t, 12)
    m.free(pool, t)
    # Released 3, 2, 1 (reverse), each pushed on the front: 1, 2, 3 lead the queue.
    assert ids(pool.free_queue()) == [1, 2, 3, 4, 5, 6, 7]
    # The next allocation reuses the unnamed pages first.
    m.acquire(pool, t, 8)
    assert ids(t.page_ids()) == [1, 2]
    assert ids(pool.free_queue()) == [3, 4, 5, 6, 7]


def test_batch_free_without_retention_appends_in_reverse_slot_order(impl: ModuleType) -> None:
    pool = impl.BlockPool(8, retention=False)
    assert pool.retention is False
    t = impl.BlockTable()
    m = impl.FullAttentionManager(4)
    m.acquire(pool, t, 12)
    m.free(pool, t)
    assert ids(pool.free_queue()) == [4, 5, 6, 7, 3, 2, 1]
    m.acquire(pool, t, 8)
    assert ids(t.page_ids()) == [4, 5]
    assert ids(pool.free_queue()) == [6, 7, 3, 2, 1]


def test_reclaimed_unnamed_pages_reenter_at_the_front(impl: ModuleType) -> None:
    pool = impl.BlockPool(16)
    t = impl.BlockTable()
    m = impl.SlidingWindowManager(4, 4)
    m.acquire(pool, t, 16)  # slots 0..3 -> pages 1..4
    # slid_out(16) = (16 - 4 + 1) // 4 = 3: slots 0, 1, 2 go, batch [3, 2, 1] released 1 first.
    assert m.reclaim_expired(pool, t, 16) == 3
    assert ids(pool.free_queue()) == [3, 2, 1, *range(5, 16)]
    m.free(pool, t)
    assert ids(pool.free_queue()) == [4, 3, 2, 1, *range(5, 16)]


def test_reclaimed_pages_without_retention_reenter_in_ascending_slot_order(
    impl: ModuleType,
) -> None:
    pool = impl.BlockPool(16, retention=False)
    t = impl.BlockTable()
    m = impl.SlidingWindowManager(4, 4)
    m.acquire(pool, t, 16)
    assert m.reclaim_expired(pool, t, 16) == 3
    assert ids(pool.free_queue()) == list(range(5, 16)) + [1, 2, 3]
    m.free(pool, t)
    assert ids(pool.free_queue()) == list(range(5, 16)) + [1, 2, 3, 4]


def test_retention_that_is_not_a_bool_is_a_type_error(impl: ModuleType) -> None:
    with pytest.raises(TypeError, match="retention"):
        impl.BlockPool(4, retention=1)


@pytest.mark.parametrize("bad", [0, -1, 2**31, 2**64])
def test_pool_size_out_of_range_is_a_value_error(impl: ModuleType, bad: int) -> None:
    with pytest.raises(ValueError, match="num_blocks"):
        impl.BlockPool(bad)


@pytest.mark.parametrize("bad", [True, 4.0, "4", None])
def test_pool_size_that_is_not_an_int_is_a_type_error(impl: ModuleType, bad: object) -> None:
    with pytest.raises(TypeError, match="num_blocks"):
        impl.BlockPool(bad)


def test_pool_size_accepts_numpy_integers(impl: ModuleType) -> None:
    assert impl.BlockPool(np.int64(5)).num_free == 4
    assert impl.BlockPool(np.uint16(3)).num_free == 2


def test_largest_pool_size_is_accepted_without_touching_its_pages() -> None:
    import livetail

    try:  # O(1) time: never-used pages are not materialized (address space is reserved)
        pool = livetail.BlockPool(2**31 - 1)
    except MemoryError:
        pytest.skip("this machine does not reserve 24 GiB of address space")
    assert pool.num_free == 2**31 - 2
    assert pool.ref_count(2**31 - 2) == 0


@pytest.mark.parametrize("page", [-1, 6, 2**40])
def test_ref_count_of_a_page_outside_the_pool_is_a_value_error(impl: ModuleType, page: int) -> None:
    with pytest.raises(ValueError, match="page"):
        impl.BlockPool(6).ref_count(page)
