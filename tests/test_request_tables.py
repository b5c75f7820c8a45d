"""One request's tables (semantics sections 3 and 6), on the native module and the spec.

Every coordinator call that takes a request's tables checks that they can be one request's:
all of one extent (a request's groups cover the same tokens), and none bound by another
coordinator over the same pool (an acquire or claim binds a table to its coordinator until
it is freed or detached). Either fault is a ValueError naming the table, nothing changed.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest


def keys8(impl: ModuleType) -> list[bytes]:
    return list(impl.page_keys(list(range(8)), 4))


def two_groups(impl: ModuleType) -> list[Any]:
    return [impl.GroupSpec("full", 4), impl.GroupSpec("sliding", 4, sliding_window=4)]


class World:
    """Requests a (8 tokens) and b (12 tokens) of one coordinator, with a host tier."""

    def __init__(self, impl: ModuleType) -> None:
        self.impl = impl
        self.pool = impl.BlockPool(64, events=True)
        self.host = impl.HostPool(64)
        self.c = impl.Coordinator(two_groups(impl), self.pool, self.host)
        self.a = self.c.new_tables()
        self.b = self.c.new_tables()
        assert self.c.acquire(self.a, 8)
        assert self.c.acquire(self.b, 12)
        assert self.c.cache_full_blocks(self.a, keys8(impl), 8) == 4
        self.pool.take_events()

    def snapshot(self) -> object:
        tables = [*self.a, *self.b]
        return (
            [int(p) for p in self.pool.free_queue()],
            [int(n) for n in self.pool.ref_counts()],
            [([int(p) for p in t.page_ids()], t.tail_available, t.reclaim_floor) for t in tables],
            [t.is_bound for t in tables],
            self.c.stats(),
            self.pool.num_cached,
            [repr(e) for e in self.pool.take_events()],
        )


def raises(w: World, call: Callable[[], object], match: str) -> None:
    before = w.snapshot()
    with pytest.raises(ValueError, match=match):
        call()
    assert w.snapshot() == before


def table_calls(impl: ModuleType, c: Any, ts: list[Any]) -> list[Callable[[], object]]:
    """Every coordinator entry point that takes one request's tables."""
    keys = keys8(impl)
    match = c.match_prefix(keys)  # outside the calls: a match counts in the pool's stats
    assert match.num_tokens == 8
    return [
        lambda: c.acquire(ts, 4),
        lambda: c.acquire(ts, 0),
        lambda: c.blocks_needed_for(ts, 4),
        lambda: c.blocks_needed_for_sequential(ts, 4, 1),
        lambda: c.reclaim_expired(ts, 0),
        lambda: c.free(ts),
        lambda: c.detach(ts),
        lambda: c.cache_full_blocks(ts, keys, 0),
        lambda: c.cache_full_blocks(ts, keys, 0, list(range(8))),
        lambda: c.plan_offload(ts, 0),
        lambda: c.claim(ts, match),
    ]


def test_tables_of_two_requests_are_a_value_error_everywhere(impl: ModuleType) -> None:
    w = World(impl)
    mixed = [w.a[0], w.b[1]]
    for call in table_calls(impl, w.c, mixed):
        raises(w, call, r"tables\[1\] has extent 12, tables\[0\] 8: one request's tables")
    # The same pair swapped names the other extents.
    for call in table_calls(impl, w.c, [w.b[0], w.a[1]]):
        raises(w, call, r"tables\[1\] has extent 8, tables\[0\] 12")


def test_batch_calls_name_the_request_of_unequal_tables(impl: ModuleType) -> None:
    w = World(impl)
    mixed = [w.a[0], w.b[1]]
    raises(w, lambda: w.c.decode_step([mixed], [0]), r"requests\[0\]\[1\]: .*extent 12")
    raises(w, lambda: w.c.plan_step([(mixed, 1)]), r"requests\[0\].*extent 12")
    # Only the bad request is blamed; the first one is fine.
    other = w.c.new_tables()
    raises(
        w, lambda: w.c.decode_step([w.a, [other[0], w.b[1]]], [0, 0]), r"requests\[1\]\[1\]"
    )
    raises(w, lambda: w.c.plan_step([(w.a, 1), ([other[0], w.b[1]], 1)]), r"requests\[1\]")


def test_a_fresh_table_beside_a_used_one_is_not_one_request(impl: ModuleType) -> None:
    w = World(impl)
    mixed = [w.a[0], impl.BlockTable()]
    raises(w, lambda: w.c.acquire(mixed, 4), r"tables\[1\] has extent 0, tables\[0\] 8")
    raises(w, lambda: w.c.free(mixed), r"tables\[1\] has extent 0")


def test_a_manager_call_that_splits_a_request_makes_coordinator_calls_raise(
    impl: ModuleType,
) -> None:
    pool = impl.BlockPool(32)
    c = impl.Coordinator(two_groups(impl), pool)
    ts = c.new_tables()
    assert c.acquire(ts, 8)
    assert c.managers[1].acquire(pool, ts[1], 4)  # one group alone grows: extents 8 and 12
    with pytest.raises(ValueError, match=r"tables\[1\] has extent 12, tables\[0\] 8"):
        c.free(ts)
    assert [t.extent for t in ts] == [8, 12]
    # Group by group through the managers the tables can still be freed.
    for m, t in zip(c.managers, ts):
        m.free(pool, t)
    assert pool.num_free == 31


def test_equal_extents_with_holes_and_reclaims_are_one_request(impl: ModuleType) -> None:
    pool = impl.BlockPool(64)
    specs = [impl.GroupSpec("full", 4), impl.GroupSpec("sliding", 2, 3, True)]
    c = impl.Coordinator(specs, pool)
    ts = c.new_tables()
    assert c.acquire(ts, 13)  # 4 slots of 4 (tail 3) and 7 slots of 2 (tail 1)
    assert [len(t) for t in ts] == [4, 7]
    assert c.reclaim_expired(ts, 13) > 0
    assert c.acquire(ts, 1)
    assert [t.extent for t in ts] == [14, 14]
    c.free(ts)
    assert pool.num_free == 63


# --- tables bound by another coordinator over the same pool ------------------------------


def test_a_second_coordinator_cannot_touch_the_first_ones_tables(impl: ModuleType) -> None:
    w = World(impl)
    twin = impl.Coordinator(two_groups(impl), w.pool, w.host)
    pinned = w.c.stats()["pinned_pages"]
    assert pinned == [5, 5]
    for call in table_calls(impl, twin, w.a):
        raises(w, call, r"tables\[0\] is bound to another coordinator")
    raises(w, lambda: twin.decode_step([w.a], [0]), r"requests\[0\]\[0\]: .*another coordinator")
    raises(w, lambda: twin.plan_step([(w.a, 1)]), r"requests\[0\].*another coordinator")
    # Unchecked, twin.free(w.a) released a's pages: twin's count went to [-2, -2] and w.c's
    # stayed at [5, 5] with those pages back in the queue.
    assert w.c.stats()["pinned_pages"] == pinned
    assert twin.stats()["pinned_pages"] == [0, 0]


def test_a_freed_or_detached_table_is_free_for_any_coordinator(impl: ModuleType) -> None:
    w = World(impl)
    twin = impl.Coordinator(two_groups(impl), w.pool)
    w.c.free(w.a)
    assert twin.acquire(w.a, 4)  # unbound now: the twin binds it
    assert twin.stats()["pinned_pages"] == [1, 1]
    with pytest.raises(ValueError, match=r"tables\[0\] is bound to another coordinator"):
        w.c.free(w.a)
    handle = twin.detach(w.a)
    assert w.c.acquire(w.a, 4)  # detached: unbound again
    assert twin.release_detached(handle) == 2
    assert twin.stats()["pinned_pages"] == [0, 0]
    assert w.c.stats()["pinned_pages"] == [4, 4]


def test_tables_a_manager_bound_are_taken_over_by_the_first_coordinator_acquire(
    impl: ModuleType,
) -> None:
    pool = impl.BlockPool(32)
    c1 = impl.Coordinator(two_groups(impl), pool)
    c2 = impl.Coordinator(two_groups(impl), pool)
    ts = c1.new_tables()
    for m, t in zip(c1.managers, ts):
        assert m.acquire(pool, t, 4)
    # Bound by no coordinator: either may use them; an acquire of 0 tokens binds nothing.
    assert c1.blocks_needed_for(ts, 4) == c2.blocks_needed_for(ts, 4) == 2
    assert c1.acquire(ts, 0)
    assert c2.acquire(ts, 4)
    with pytest.raises(ValueError, match="another coordinator"):
        c1.acquire(ts, 4)
    c2.free(ts)
    assert pool.num_free == 31


def test_a_claim_binds_the_tables_to_its_coordinator(impl: ModuleType) -> None:
    pool = impl.BlockPool(32)
    c1 = impl.Coordinator(two_groups(impl), pool)
    c2 = impl.Coordinator(two_groups(impl), pool)
    first = c1.new_tables()
    assert c1.acquire(first, 8)
    keys = keys8(impl)
    c1.cache_full_blocks(first, keys, 8)
    ts = c2.new_tables()
    assert c2.claim(ts, c2.match_prefix(keys)) is None
    assert [t.extent for t in ts] == [8, 8]
    with pytest.raises(ValueError, match="another coordinator"):
        c1.free(ts)
    c2.free(ts)
    c1.free(first)
    assert (c1.stats()["pinned_pages"], c2.stats()["pinned_pages"]) == ([0, 0], [0, 0])


def test_another_tenant_of_the_pool_with_its_own_tables_still_works(impl: ModuleType) -> None:
    pool = impl.BlockPool(16)
    c = impl.Coordinator(two_groups(impl), pool)
    tenant = impl.Coordinator([impl.GroupSpec("full", 1)], pool)
    ts = c.new_tables()
    assert c.acquire(ts, 8)
    assert tenant.acquire(tenant.new_tables(), pool.num_free)
    assert pool.num_free == 0
    c.free(ts)
    assert c.stats()["pinned_pages"] == [0, 0]
    assert tenant.stats()["pinned_pages"] == [11]
