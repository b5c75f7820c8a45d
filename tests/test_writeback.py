"""Semantics 13.7 on both implementations, exact values: plan_offload(..., max_pages=k)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest


def ids(a: Any) -> list[int]:
    return [int(x) for x in a]


def full_request(impl: ModuleType, host_blocks: int) -> tuple[Any, Any, list[bytes]]:
    """One full group B=4, 16 tokens computed and named: 4 reachable pages (1, 2, 3, 4)."""
    c = impl.Coordinator(
        [impl.GroupSpec("full", 4)], impl.BlockPool(20), impl.HostPool(host_blocks)
    )
    ts = c.new_tables()
    assert c.acquire(ts, 16)
    keys = impl.page_keys(list(range(16)), 4)
    assert c.cache_full_blocks(ts, keys, 16) == 4
    return c, ts, keys


def test_four_pages_three_free_host_pages(impl: ModuleType) -> None:
    c, ts, keys = full_request(impl, 4)  # 3 usable host pages
    refs, hq = ids(c.pool.ref_counts()), ids(c.host.free_queue())
    assert c.plan_offload(ts, 16) is None  # the whole plan or nothing (section 10)
    assert (ids(c.pool.ref_counts()), ids(c.host.free_queue())) == (refs, hq)
    plan = c.plan_offload(ts, 16, max_pages=c.host.num_free)  # what fits: the first 3 slots
    assert (ids(plan.groups), ids(plan.slots)) == ([0, 0, 0], [0, 1, 2])
    assert (ids(plan.device_pages), ids(plan.host_pages)) == ([1, 2, 3], [1, 2, 3])
    assert ids(c.pool.ref_counts())[1:5] == [2, 2, 2, 1]
    assert c.host.num_free == 0
    c.complete_offload(plan)
    c.free(ts)
    assert c.pool.reset_names()  # the device forgets: only the host serves a match
    m = c.match_prefix(keys)
    assert m.num_tokens == 12  # the longest prefix 3 host pages can hold
    assert [ids(h) for h in m.host_pages] == [[1, 2, 3]]


def test_lowest_boundaries_first_across_groups(impl: ModuleType) -> None:
    # full B=4 and a live-tail sliding group B=2, W=3 (R=1; lcm 4): boundary b (tokens 4b)
    # needs full slot b-1 (and those below) and sliding slot 2b-1.
    specs = [impl.GroupSpec("full", 4), impl.GroupSpec("sliding", 2, 3, live_tail_alloc=True)]
    c = impl.Coordinator(specs, impl.BlockPool(40), impl.HostPool(40))
    ts = c.new_tables()
    assert c.acquire(ts, 16)
    c.cache_full_blocks(ts, impl.page_keys(list(range(16)), 2), 16)
    assert ids(ts[1].page_ids()) == [0, 5, 0, 6, 0, 7, 0, 8]
    first = c.plan_offload(ts, 16, max_pages=3)  # boundary 4: full 0, sliding 1; then full 1
    assert (ids(first.groups), ids(first.slots)) == ([0, 0, 1], [0, 1, 1])
    assert ids(first.device_pages) == [1, 2, 5]
    empty = c.plan_offload(ts, 16, max_pages=0)
    assert empty is not None and empty.num_pages == 0
    c.complete_offload(first)
    c.complete_offload(empty)
    # The host holds boundary 4's pages and full slot 1: next come sliding 3 (boundary 8),
    # then full 2 and sliding 5 (boundary 12).
    second = c.plan_offload(ts, 16, max_pages=3)
    assert (ids(second.groups), ids(second.slots)) == ([0, 1, 1], [2, 3, 5])
    # A limit above what is left plans the rest, as a whole plan does.
    c.abort_offload(second)
    rest = c.plan_offload(ts, 16, max_pages=99)
    assert (ids(rest.groups), ids(rest.slots)) == ([0, 0, 1, 1, 1], [2, 3, 3, 5, 7])


def test_partial_plan_is_all_or_nothing_for_its_pages(impl: ModuleType) -> None:
    c, ts, _ = full_request(impl, 3)  # 2 usable host pages
    refs, hq = ids(c.pool.ref_counts()), ids(c.host.free_queue())
    assert c.plan_offload(ts, 16, max_pages=3) is None
    assert (ids(c.pool.ref_counts()), ids(c.host.free_queue())) == (refs, hq)
    plan = c.plan_offload(ts, 16, max_pages=2)
    assert ids(plan.slots) == [0, 1]


def test_bad_max_pages(impl: ModuleType) -> None:
    c, ts, _ = full_request(impl, 4)
    with pytest.raises(ValueError, match="max_pages"):
        c.plan_offload(ts, 16, max_pages=-1)
    with pytest.raises(TypeError, match="max_pages"):
        c.plan_offload(ts, 16, max_pages=True)
    with pytest.raises(TypeError):
        c.plan_offload(ts, 16, max_pages=1.5)
    assert c.host.num_free == 3
