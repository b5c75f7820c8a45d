"""Semantics 13.6 on both implementations, exact values: Coordinator.fork and copy_tail."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest


def ids(a: Any) -> list[int]:
    return [int(x) for x in a]


def mixed(impl: ModuleType, pages: int = 40, host: Any = None) -> Any:
    """full B=4 and a live-tail sliding group B=2, W=3 (lcm 4)."""
    specs = [impl.GroupSpec("full", 4), impl.GroupSpec("sliding", 2, 3, live_tail_alloc=True)]
    return impl.Coordinator(specs, impl.BlockPool(pages), host)


def shape(t: Any) -> tuple[list[int], int, int, int, bool]:
    return ids(t.page_ids()), int(t.tail_available), int(t.reclaim_floor), len(t), t.is_bound


def test_fork_shares_every_real_page_and_reports_the_tail_slot(impl: ModuleType) -> None:
    c = mixed(impl)
    ts = c.new_tables()
    assert c.acquire(ts, 10)  # full: 3 slots, 2 tokens of room; sliding: 5 slots, page-aligned
    assert shape(ts[0]) == ([1, 2, 3], 2, 0, 3, True)
    assert shape(ts[1]) == ([0, 4, 0, 5, 6], 0, 0, 5, True)
    queue = ids(c.pool.free_queue())
    fork, tails = c.fork(ts)
    assert tails == [2, -1]  # the full group's slot 2 is partly written; the sliding one aligned
    assert [shape(t) for t in fork] == [shape(t) for t in ts]
    assert [int(t.extent) for t in fork] == [10, 10]
    assert ids(c.pool.ref_counts())[:8] == [0, 2, 2, 2, 2, 2, 2, 0]
    assert ids(c.pool.free_queue()) == queue  # no page taken: a fork only shares
    assert c.pool.num_free == 33
    assert c.stats()["pinned_pages"] == [3, 3]


def test_copy_tail_copies_the_shared_tail_once(impl: ModuleType) -> None:
    c = mixed(impl)
    ts = c.new_tables()
    assert c.acquire(ts, 10)
    fork, _ = c.fork(ts)
    assert c.copy_tail(fork) == [(0, 3, 7)]  # one fresh page (the queue's head) for group 0
    assert ids(fork[0].page_ids()) == [1, 2, 7]
    assert ids(ts[0].page_ids()) == [1, 2, 3]
    assert ids(c.pool.ref_counts())[:8] == [0, 2, 2, 1, 2, 2, 2, 1]
    assert c.pool.num_free == 32
    assert c.stats()["pinned_pages"] == [4, 3]
    assert c.copy_tail(ts) == []  # page 3 has one holder left: nothing to copy
    assert c.copy_tail(fork) == []
    assert c.pool.num_free == 32


def test_fork_pages_return_when_the_last_holder_lets_go(impl: ModuleType) -> None:
    c = mixed(impl)
    ts = c.new_tables()
    assert c.acquire(ts, 10)
    fork, _ = c.fork(ts)
    c.free(ts)
    assert c.pool.num_free == 33  # every page still held by the fork
    assert ids(c.pool.ref_counts())[1:7] == [1] * 6
    c.free(fork)
    assert c.pool.num_free == 39
    assert c.stats()["pinned_pages"] == [0, 0]


def test_copy_tail_is_all_or_nothing(impl: ModuleType) -> None:
    # Two full groups B=4, 6 tokens: each has a partial tail; a pool of 5 pages (4 free
    # after the acquire) lacks the room for the second copy after another acquire.
    specs = [impl.GroupSpec("full", 4), impl.GroupSpec("full", 4)]
    c = impl.Coordinator(specs, impl.BlockPool(7))
    ts = c.new_tables()
    assert c.acquire(ts, 6)  # pages 1, 2 | 3, 4
    fork, tails = c.fork(ts)
    assert tails == [1, 1]
    other = c.new_tables()
    assert c.acquire(other, 1)  # pages 5 | 6: no page left
    refs, queue = ids(c.pool.ref_counts()), ids(c.pool.free_queue())
    assert c.copy_tail(fork) is None
    assert (ids(c.pool.ref_counts()), ids(c.pool.free_queue())) == (refs, queue)
    assert ids(fork[0].page_ids()) == [1, 2] and ids(fork[1].page_ids()) == [3, 4]
    c.free(other)
    assert c.copy_tail(fork) == [(0, 2, 6), (1, 4, 5)]
    assert ids(fork[0].page_ids()) == [1, 6] and ids(fork[1].page_ids()) == [3, 5]


def test_fork_keeps_the_reclaim_floor_and_holes(impl: ModuleType) -> None:
    c = mixed(impl)
    ts = c.new_tables()
    assert c.acquire(ts, 16)
    assert c.reclaim_expired(ts, 16) == 3  # the sliding group keeps slot 7 alone
    fork, tails = c.fork(ts)
    assert tails == [-1, -1]
    assert shape(fork[1]) == shape(ts[1]) == ([0] * 7 + [8], 0, 7, 8, True)
    assert int(c.pool.ref_count(8)) == 2
    # The fork acquires past the shared extent without a copy (new slots, unshared pages).
    assert c.acquire(fork, 2)
    assert ids(fork[0].page_ids()) == [1, 2, 3, 4, 7]
    assert ids(fork[1].page_ids()) == [0] * 7 + [8, 6]
    assert ids(ts[1].page_ids()) == [0] * 7 + [8]


def test_fork_of_fresh_tables_is_fresh(impl: ModuleType) -> None:
    c = mixed(impl)
    fork, tails = c.fork(c.new_tables())
    assert tails == [-1, -1]
    assert [shape(t) for t in fork] == [([], 0, 0, 0, False)] * 2
    assert c.pool.num_free == 39


def test_fork_refuses_a_pending_load_and_bad_tables(impl: ModuleType) -> None:
    c = mixed(impl, host=impl.HostPool(16))
    keys = impl.page_keys(list(range(16)), 2)
    ts = c.new_tables()
    assert c.acquire(ts, 16)
    c.cache_full_blocks(ts, keys, 16)
    plan = c.plan_offload(ts, 16)
    c.complete_offload(plan)
    c.free(ts)
    c.pool.reset_names()  # the device forgets: the next claim loads from the host
    loading = c.new_tables()
    load = c.claim(loading, c.match_prefix(keys))
    assert load is not None and load.num_pages > 0
    refs = ids(c.pool.ref_counts())
    with pytest.raises(ValueError, match="pending load"):
        c.fork(loading)
    assert ids(c.pool.ref_counts()) == refs
    c.complete_load(load)
    fork, _ = c.fork(loading)
    assert [ids(t.page_ids()) for t in fork] == [ids(t.page_ids()) for t in loading]
    with pytest.raises(ValueError):
        c.fork([loading[0]])
    with pytest.raises(ValueError):
        c.copy_tail([fork[0], fork[0]])
    with pytest.raises(TypeError):
        c.fork(None)


def test_fork_makes_a_step_plan_stale(impl: ModuleType) -> None:
    c = mixed(impl)
    ts = c.new_tables()
    assert c.acquire(ts, 10)
    plan = c.plan_step([(ts, 1)])
    c.fork(ts)
    with pytest.raises(ValueError):
        c.apply_step(plan)


def test_an_offload_in_flight_survives_a_fork(impl: ModuleType) -> None:
    c = mixed(impl, host=impl.HostPool(16))
    ts = c.new_tables()
    assert c.acquire(ts, 16)
    c.cache_full_blocks(ts, impl.page_keys(list(range(16)), 2), 16)
    plan = c.plan_offload(ts, 16)
    assert plan.num_pages == 8
    fork, tails = c.fork(ts)
    assert tails == [-1, -1]
    assert int(c.pool.ref_count(1)) == 3  # the request, its fork and the copy
    c.complete_offload(plan)
    assert int(c.pool.ref_count(1)) == 2
    c.free(ts)
    c.free(fork)
    assert c.pool.num_free == 39
    assert c.host.num_cached == 8
