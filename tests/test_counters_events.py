"""Counters and events (semantics section 11) on both implementations, exact values."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest


def ids(a: Any) -> list[int]:
    return [int(x) for x in a]


def named_request(impl: ModuleType) -> tuple[Any, Any, list[bytes]]:
    """Pool of 8, one full group of 4 tokens: a request of 12 tokens names its first 2 pages."""
    c = impl.Coordinator([impl.GroupSpec("full", 4)], impl.BlockPool(8, events=True))
    keys = impl.page_keys(list(range(8)), 4)
    ts = c.new_tables()
    assert c.acquire(ts, 12)  # pages 1, 2, 3
    assert c.cache_full_blocks(ts, keys, 12) == 2
    return c, ts, keys


def counters(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in stats.items() if v != 0}


def test_a_new_pool_counts_nothing_and_has_no_events(impl: ModuleType) -> None:
    pool = impl.BlockPool(8, events=True)
    assert pool.stats() == {
        "pages_allocated": 0,
        "pages_released": 0,
        "pages_named": 0,
        "pages_evicted": 0,
        "names_stored": 0,
        "names_removed": 0,
        "match_calls": 0,
        "match_tokens_queried": 0,
        "match_tokens_matched": 0,
        "pages_claimed": 0,
        "pages_claimed_free": 0,
        "num_free": 7,
        "num_pinned": 0,
        "num_cached": 0,
        "num_cached_free": 0,
        "num_names": 0,
    }
    assert pool.take_events() == []


def test_naming_a_request_is_one_stored_event_in_chain_order(impl: ModuleType) -> None:
    c, _, keys = named_request(impl)
    assert c.pool.take_events() == [("stored", "GPU", 0, (keys[0], keys[1]), None, 0, ())]
    assert c.pool.take_events() == []  # drained
    assert counters(c.stats()) == {
        "pages_allocated": 3,
        "pages_named": 2,
        "names_stored": 2,
        "num_free": 4,
        "num_pinned": 3,
        "num_cached": 2,
        "num_names": 2,
        "pinned_pages": [3],
    }


def test_eviction_is_a_removed_event_and_counts_hits_and_claims(impl: ModuleType) -> None:
    c, ts, keys = named_request(impl)
    c.pool.take_events()
    c.free(ts)  # 3 joins the front, then 2 and 1 the back: 2 is the oldest named page
    assert (c.pool.num_cached_free, c.stats()["pages_released"]) == (2, 3)
    assert c.acquire(ts, 20)  # pages 3..7: no name dropped
    assert c.match_prefix(keys).num_tokens == 8
    other = c.new_tables()
    assert c.acquire(other, 4)  # page 2 loses its name (keys[1])
    assert c.pool.take_events() == [("removed", "GPU", 0, (keys[1],), None, None, ())]
    hit = c.match_prefix(keys)  # keys[0] is still on page 1, free
    assert hit.num_tokens == 4
    claimed = c.new_tables()
    c.claim(claimed, hit)
    assert counters(c.stats()) == {
        "pages_allocated": 9,
        "pages_released": 3,
        "pages_named": 2,
        "pages_evicted": 1,
        "names_stored": 2,
        "names_removed": 1,
        "match_calls": 2,
        "match_tokens_queried": 16,
        "match_tokens_matched": 12,
        "pages_claimed": 1,
        "pages_claimed_free": 1,
        "num_pinned": 7,
        "num_cached": 1,
        "num_names": 1,
        "pinned_pages": [7],
    }


def test_a_name_already_held_is_not_stored_again(impl: ModuleType) -> None:
    c, _, keys = named_request(impl)
    c.pool.take_events()
    twin = c.new_tables()
    assert c.acquire(twin, 8)
    assert c.cache_full_blocks(twin, keys, 8) == 2  # two more pages, no new name
    assert c.pool.take_events() == []
    st = c.stats()
    assert (st["pages_named"], st["names_stored"], st["num_cached"], st["num_names"]) == (
        4,
        2,
        4,
        2,
    )


def test_stored_events_carry_the_parent_key_and_each_group_its_own_keys(impl: ModuleType) -> None:
    specs = [impl.GroupSpec("full", 4), impl.GroupSpec("full", 8)]
    c = impl.Coordinator(specs, impl.BlockPool(16, events=True))
    k = impl.page_keys(list(range(16)), 4)
    ts = c.new_tables()
    assert c.acquire(ts, 16)
    c.cache_full_blocks(ts, k, 8)
    c.cache_full_blocks(ts, k, 16)
    assert c.pool.take_events() == [
        ("stored", "GPU", 0, (k[0], k[1]), None, 0, ()),
        ("stored", "GPU", 1, (k[1],), None, 0, ()),
        ("stored", "GPU", 0, (k[2], k[3]), k[1], 2, ()),
        ("stored", "GPU", 1, (k[3],), k[1], 1, ()),
    ]
    assert c.stats()["pinned_pages"] == [4, 2]


def test_holes_split_a_live_tail_group_into_one_event_per_run(impl: ModuleType) -> None:
    # lcm 16: the live group (B=4, W=4, R=1) keeps slot 3 of every 16 tokens, and slot 15.
    specs = [impl.GroupSpec("full", 16), impl.GroupSpec("sliding", 4, 4, live_tail_alloc=True)]
    c = impl.Coordinator(specs, impl.BlockPool(64, events=True))
    k = impl.page_keys(list(range(64)), 4)
    ts = c.new_tables()
    assert c.acquire(ts, 64)
    assert c.cache_full_blocks(ts, k, 64) == 8
    assert c.pool.take_events() == [
        ("stored", "GPU", 0, (k[3], k[7], k[11], k[15]), None, 0, ()),
        ("stored", "GPU", 1, (k[3],), k[2], 3, ()),
        ("stored", "GPU", 1, (k[7],), k[6], 7, ()),
        ("stored", "GPU", 1, (k[11],), k[10], 11, ()),
        ("stored", "GPU", 1, (k[15],), k[14], 15, ()),
    ]
    assert c.stats()["pinned_pages"] == [4, 4]


def test_one_allocation_that_evicts_many_names_is_one_removed_event(impl: ModuleType) -> None:
    c = impl.Coordinator([impl.GroupSpec("full", 4)], impl.BlockPool(5, events=True))
    k = impl.page_keys(list(range(16)), 4)
    ts = c.new_tables()
    assert c.acquire(ts, 16)
    c.cache_full_blocks(ts, k, 16)
    c.free(ts)  # named pages join the back in release order: 4, 3, 2, 1
    c.pool.take_events()
    assert c.acquire(ts, 12)  # evicts 4, 3, 2: slots 3, 2, 1
    assert c.acquire(c.new_tables(), 4)  # another allocation: evicts 1 (slot 0)
    assert c.pool.take_events() == [
        ("removed", "GPU", 0, (k[3], k[2], k[1]), None, None, ()),
        ("removed", "GPU", 0, (k[0],), None, None, ()),
    ]


def test_pinned_pages_per_group_follow_reclaim_and_free(impl: ModuleType) -> None:
    specs = [impl.GroupSpec("full", 8), impl.GroupSpec("sliding", 8, 12)]
    c = impl.Coordinator(specs, impl.BlockPool(64))
    ts = c.new_tables()
    assert c.acquire(ts, 64)
    assert c.stats()["pinned_pages"] == [8, 8]
    assert c.reclaim_expired(ts, 64) == 6  # slid_out(64) = 6
    assert c.stats()["pinned_pages"] == [8, 2]
    c.free(ts)
    assert c.stats()["pinned_pages"] == [0, 0]
    assert c.pool.stats()["pages_released"] == 16


def test_events_off_counts_but_take_events_is_an_error(impl: ModuleType) -> None:
    c = impl.Coordinator([impl.GroupSpec("full", 4)], impl.BlockPool(8))
    ts = c.new_tables()
    assert c.acquire(ts, 8)
    c.cache_full_blocks(ts, impl.page_keys(list(range(8)), 4), 8)
    assert c.stats()["names_stored"] == 2
    with pytest.raises(ValueError, match="events"):
        c.pool.take_events()


def test_events_must_be_a_bool(impl: ModuleType) -> None:
    with pytest.raises(TypeError):
        impl.BlockPool(8, events=1)


def test_pinned_pages_per_group_follow_a_step_plan_with_preemption(impl: ModuleType) -> None:
    specs = [impl.GroupSpec("full", 8), impl.GroupSpec("sliding", 8, 12)]
    c = impl.Coordinator(specs, impl.BlockPool(9))  # 8 free pages
    a, b = c.new_tables(), c.new_tables()
    assert c.acquire(a, 16) and c.acquire(b, 16)  # 2 + 2 pages each
    plan = c.plan_step([(a, 8), (b, 1)])  # 2 + 2 needed, none free: b is preempted
    assert plan.stepped == 1
    c.apply_step(plan)
    assert [t.num_real_pages for t in a] == [3, 3]
    assert c.stats()["pinned_pages"] == [3, 3]
    assert c.pool.num_pinned == 6


def test_pages_a_manager_takes_directly_count_in_the_pool_not_in_a_group(impl: ModuleType) -> None:
    c = impl.Coordinator([impl.GroupSpec("full", 8)], impl.BlockPool(8))
    t = impl.BlockTable()
    assert c.managers[0].acquire(c.pool, t, 16)
    st = c.stats()
    assert (st["pinned_pages"], st["num_pinned"], st["pages_allocated"]) == ([0], 2, 2)
