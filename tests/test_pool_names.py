"""Semantics section 12 on both implementations, exact values: pool.name(page),
pool.reset_names() and pool.evict_names(pages), on the device and the host pool."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest


def ids(a: Any) -> list[int]:
    return [int(x) for x in a]


def named_request(impl: ModuleType, retention: bool = True) -> tuple[Any, Any, list[bytes]]:
    """Pool of 8, one full group of 4 tokens: 12 tokens take pages 1, 2, 3; 1 and 2 are named."""
    pool = impl.BlockPool(8, retention=retention, events=True)
    c = impl.Coordinator([impl.GroupSpec("full", 4)], pool)
    keys = impl.page_keys(list(range(8)), 4)
    ts = c.new_tables()
    assert c.acquire(ts, 12)
    assert c.cache_full_blocks(ts, keys, 12) == 2
    c.pool.take_events()
    return c, ts, keys


def snapshot(pool: Any) -> tuple[Any, ...]:
    names = tuple(pool.name(p) for p in range(pool.num_blocks))
    return ids(pool.free_queue()), ids(pool.ref_counts()), names, pool.stats()


# --- name -----------------------------------------------------------------------------------


def test_name_is_the_group_and_key_of_a_named_page_else_none(impl: ModuleType) -> None:
    c, ts, keys = named_request(impl)
    pool = c.pool
    assert pool.name(1) == (0, keys[0])
    assert pool.name(2) == (0, keys[1])
    assert pool.name(3) is None  # real but not a full named page
    assert pool.name(0) is None
    assert pool.name(7) is None  # never allocated
    c.free(ts)
    assert pool.name(2) == (0, keys[1])  # a free named page keeps its name


def test_name_rejects_bad_page_ids(impl: ModuleType) -> None:
    pool = impl.BlockPool(8)
    with pytest.raises(ValueError, match="page"):
        pool.name(8)
    with pytest.raises(ValueError, match="page"):
        pool.name(-1)
    with pytest.raises(TypeError, match="page"):
        pool.name(1.0)
    with pytest.raises(TypeError, match="page"):
        pool.name(True)


# --- reset_names ----------------------------------------------------------------------------


def test_reset_refuses_while_a_named_page_is_pinned_and_changes_nothing(impl: ModuleType) -> None:
    c, ts, keys = named_request(impl)
    before = snapshot(c.pool)
    assert c.pool.reset_names() is False
    assert snapshot(c.pool) == before
    assert c.pool.take_events() == []


def test_reset_drops_every_name_keeps_queue_and_counts_and_emits_one_cleared(
    impl: ModuleType,
) -> None:
    c, ts, keys = named_request(impl)
    c.free(ts)
    pool = c.pool
    assert ids(pool.free_queue()) == [3, 4, 5, 6, 7, 2, 1]
    stats = pool.stats()
    assert (stats["num_cached"], stats["num_names"]) == (2, 2)
    assert pool.reset_names() is True
    assert ids(pool.free_queue()) == [3, 4, 5, 6, 7, 2, 1]
    assert ids(pool.ref_counts()) == [0] * 8
    assert [pool.name(p) for p in range(8)] == [None] * 8
    assert pool.take_events() == [("cleared", "GPU", -1, (), None, None, ())]
    after = pool.stats()
    assert after == {
        **stats,
        "pages_evicted": stats["pages_evicted"] + 2,
        "names_removed": stats["names_removed"] + 2,
        "num_cached": 0,
        "num_cached_free": 0,
        "num_names": 0,
    }
    # Nothing left to match; an empty reset still succeeds and still emits its cleared event.
    assert c.match_prefix(keys).num_tokens == 0
    assert pool.reset_names() is True
    assert pool.take_events() == [("cleared", "GPU", -1, (), None, None, ())]
    # The unnamed pages are reused as queued: the page that was named last goes last.
    ts2 = c.new_tables()
    assert c.acquire(ts2, 28)
    assert ids(ts2[0].page_ids()) == [3, 4, 5, 6, 7, 2, 1]
    assert pool.take_events() == []  # the allocation evicted no name


def test_reset_does_not_make_a_step_plan_stale(impl: ModuleType) -> None:
    c, ts, keys = named_request(impl)
    c.free(ts)
    other = c.new_tables()
    plan = c.plan_step([(other, 4)])
    assert c.pool.reset_names() is True
    c.apply_step(plan)  # queue and counts unchanged: still fresh
    assert ids(other[0].page_ids()) == [3]


def test_host_pool_reset_and_name(impl: ModuleType) -> None:
    host = impl.HostPool(4, events=True)
    assert host.name(1) is None
    assert host.reset_names() is True
    assert host.take_events() == [("cleared", "CPU", -1, (), None, None, ())]


# --- evict_names ----------------------------------------------------------------------------


def test_evicting_free_named_pages_moves_them_to_the_front_in_list_order(
    impl: ModuleType,
) -> None:
    c, ts, keys = named_request(impl)
    c.free(ts)
    pool = c.pool
    assert ids(pool.free_queue()) == [3, 4, 5, 6, 7, 2, 1]
    assert pool.evict_names([1, 2]) == 2
    assert ids(pool.free_queue()) == [1, 2, 3, 4, 5, 6, 7]
    assert pool.take_events() == [("removed", "GPU", 0, (keys[0], keys[1]), None, None, ())]
    st = pool.stats()
    assert (st["pages_evicted"], st["names_removed"], st["num_cached"], st["num_names"]) == (
        2,
        2,
        0,
        0,
    )
    assert c.match_prefix(keys).num_tokens == 0


def test_evict_skips_unnamed_pages_and_counts_repeats_once(impl: ModuleType) -> None:
    c, ts, keys = named_request(impl)
    c.free(ts)
    pool = c.pool
    assert pool.evict_names([2, 5, 2, 3]) == 1
    assert ids(pool.free_queue()) == [2, 3, 4, 5, 6, 7, 1]
    assert pool.take_events() == [("removed", "GPU", 0, (keys[1],), None, None, ())]
    assert pool.evict_names([2, 3]) == 0
    assert pool.take_events() == []
    assert pool.evict_names([]) == 0


def test_evicting_pinned_pages_keeps_them_pinned_and_unnamed(impl: ModuleType) -> None:
    c, ts, keys = named_request(impl)
    pool = c.pool
    assert pool.evict_names([2]) == 1
    assert ids(pool.free_queue()) == [4, 5, 6, 7]
    assert (pool.ref_count(2), pool.name(2), pool.name(1)) == (1, None, (0, keys[0]))
    assert pool.stats()["num_pinned"] == 3
    # Unnamed now, page 2 goes to the front when freed; the cursor does not name it again.
    assert c.cache_full_blocks(ts, keys, 12) == 0
    c.free(ts)
    assert ids(pool.free_queue()) == [2, 3, 4, 5, 6, 7, 1]


def test_a_name_several_pages_carry_is_removed_with_its_last_page(impl: ModuleType) -> None:
    c, ts, keys = named_request(impl)
    pool = c.pool
    ts2 = c.new_tables()
    assert c.acquire(ts2, 12)  # pages 4, 5, 6
    assert c.cache_full_blocks(ts2, keys, 12) == 2  # the same two names again
    assert pool.take_events() == []
    assert pool.evict_names([1]) == 1
    assert pool.take_events() == []  # page 4 still carries keys[0]
    assert pool.name(4) == (0, keys[0])
    assert pool.evict_names([4, 5]) == 2
    # keys[0] lost its last page; page 2 still carries keys[1].
    assert pool.take_events() == [("removed", "GPU", 0, (keys[0],), None, None, ())]
    assert pool.name(2) == (0, keys[1])
    assert c.match_prefix(keys).num_tokens == 0  # slot 0's name is gone: no prefix
    st = pool.stats()
    assert (st["num_cached"], st["num_names"]) == (1, 1)


@pytest.mark.parametrize(
    "pages, error",
    [([1, 0], ValueError), ([1, 8], ValueError), ([1, -1], ValueError), ([1, True], TypeError)],
)
def test_evict_rejects_bad_lists_and_changes_nothing(
    impl: ModuleType, pages: list[Any], error: type[Exception]
) -> None:
    c, ts, keys = named_request(impl)
    c.free(ts)
    before = snapshot(c.pool)
    with pytest.raises(error, match="pages"):
        c.pool.evict_names(pages)
    assert snapshot(c.pool) == before
    assert c.pool.take_events() == []


def test_evicting_a_free_page_makes_a_step_plan_stale_a_pinned_one_does_not(
    impl: ModuleType,
) -> None:
    c, ts, keys = named_request(impl)
    other = c.new_tables()
    plan = c.plan_step([(other, 4)])
    assert c.pool.evict_names([1]) == 1  # pinned: the queue did not change
    c.apply_step(plan)
    c.free(other)
    c.free(ts)
    plan = c.plan_step([(other, 4)])
    assert c.pool.evict_names([2]) == 1  # free: it moves to the front
    with pytest.raises(ValueError, match="stale"):
        c.apply_step(plan)


def test_without_retention_an_evicted_free_page_stays_in_place(impl: ModuleType) -> None:
    c, ts, keys = named_request(impl, retention=False)
    c.free(ts)
    assert ids(c.pool.free_queue()) == [4, 5, 6, 7, 3, 2, 1]
    assert c.pool.evict_names([1, 2]) == 2
    assert ids(c.pool.free_queue()) == [4, 5, 6, 7, 3, 2, 1]


def test_evict_accepts_a_numpy_array(impl: ModuleType) -> None:
    import numpy as np

    c, ts, keys = named_request(impl)
    c.free(ts)
    assert c.pool.evict_names(np.array([2, 1], dtype=np.int64)) == 2
    assert ids(c.pool.free_queue()) == [2, 1, 3, 4, 5, 6, 7]
