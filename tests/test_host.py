"""Host tier (semantics section 10): offload, match across tiers, claim with loads.

One worked sequence, by hand: groups {full B=4; sliding B=2 W=3 live tail}, base 2, lcm 4
(A = 4, m = 2, R = 1: a sliding slot is real iff it is odd or still in the window), a
device pool of 20 pages and a host pool of 10. Request A acquires 16 tokens: full slots
0..3 get pages 1..4, sliding slots 1, 3, 5, 7 get pages 5..8 (slots 0, 2, 4, 6 are holes).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import pytest

# The implementations that have the host tier.
HOST_IMPLEMENTATIONS = {"native": "livetail", "spec": "livetail.spec"}


@pytest.fixture(params=sorted(HOST_IMPLEMENTATIONS))
def impl(request: pytest.FixtureRequest) -> ModuleType:
    return importlib.import_module(HOST_IMPLEMENTATIONS[request.param])


def as_list(a: Any) -> list[int]:
    return [int(x) for x in a]


def specs(impl: ModuleType, live: bool = True) -> list[Any]:
    return [
        impl.GroupSpec("full", 4),
        impl.GroupSpec("sliding", 2, sliding_window=3, live_tail_alloc=live),
    ]


def build(impl: ModuleType, host_blocks: int = 10, live: bool = True) -> tuple[Any, list[bytes]]:
    c = impl.Coordinator(
        specs(impl, live), impl.BlockPool(20, events=True), impl.HostPool(host_blocks, events=True)
    )
    return c, impl.page_keys(list(range(16)), 2)


def request_a(c: Any, keys: list[bytes]) -> list[Any]:
    a = c.new_tables()
    assert c.acquire(a, 16)
    assert c.cache_full_blocks(a, keys, 16) == 8
    return a


def offloaded(impl: ModuleType) -> tuple[Any, list[bytes], list[Any]]:
    """Request A offloaded (plan completed) and freed."""
    c, keys = build(impl)
    a = request_a(c, keys)
    c.complete_offload(c.plan_offload(a, 16))
    c.free(a)
    c.pool.take_events()
    c.host.take_events()
    return c, keys, a


def evict_most(c: Any) -> list[Any]:
    """Request C takes 32 tokens: 16 pages, evicting device pages 4, 3, 2, 1 and 8."""
    assert as_list(c.pool.free_queue()) == [*range(9, 20), 4, 3, 2, 1, 8, 7, 6, 5]
    tc = c.new_tables()
    assert c.acquire(tc, 32)
    assert as_list(c.pool.free_queue()) == [7, 6, 5]
    return tc


def state(c: Any, tables: list[Any]) -> tuple[Any, ...]:
    p, h = c.pool, c.host
    return (
        as_list(p.free_queue()),
        as_list(p.ref_counts()),
        p.num_cached,
        as_list(h.free_queue()),
        as_list(h.ref_counts()),
        h.num_cached,
        [(as_list(t.page_ids()), t.tail_available, t.reclaim_floor, t.is_bound) for t in tables],
    )


def test_offload_plans_exactly_the_reachable_named_pages(impl: ModuleType) -> None:
    c, keys = build(impl)
    a = request_a(c, keys)
    plan = c.plan_offload(a, 16)
    assert plan.num_pages == 8
    assert as_list(plan.groups) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert as_list(plan.device_pages) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert as_list(plan.host_pages) == [1, 2, 3, 4, 5, 6, 7, 8]
    # One more reference per device page for the copy; the host pages are pinned.
    assert as_list(c.pool.ref_counts())[:10] == [0, 2, 2, 2, 2, 2, 2, 2, 2, 0]
    assert as_list(c.host.free_queue()) == [9]


def test_offload_up_to_a_boundary_takes_only_the_pages_behind_it(impl: ModuleType) -> None:
    c, keys = build(impl)
    a = request_a(c, keys)
    # 10 tokens: full slots 0, 1 (slot 2 ends at 12); sliding slots 1, 3 (lcm boundaries 4, 8).
    plan = c.plan_offload(a, 10)
    assert as_list(plan.device_pages) == [1, 2, 5, 6]
    assert as_list(plan.groups) == [0, 0, 1, 1]


def test_without_live_tail_the_host_still_gets_only_the_resume_pages(impl: ModuleType) -> None:
    c, keys = build(impl, live=False)
    a = c.new_tables()
    assert c.acquire(a, 16)
    # Every sliding slot is real (pages 5..12), but only 1, 3, 5, 7 are reachable, and only
    # they are named (section 13.4): 4 full + 4 sliding names.
    assert c.cache_full_blocks(a, keys, 16) == 8
    assert [c.pool.name(p) is not None for p in range(5, 13)] == [False, True] * 4
    plan = c.plan_offload(a, 16)
    assert as_list(plan.device_pages) == [1, 2, 3, 4, 6, 8, 10, 12]


def test_complete_offload_names_host_pages_last_slot_evicted_first(impl: ModuleType) -> None:
    c, keys = build(impl)
    a = request_a(c, keys)
    c.complete_offload(c.plan_offload(a, 16))
    # Released as one batch, last entry first: page 8 is the oldest host name.
    assert as_list(c.host.free_queue()) == [9, 8, 7, 6, 5, 4, 3, 2, 1]
    assert c.host.num_cached == 8
    assert as_list(c.pool.ref_counts())[:10] == [0, 1, 1, 1, 1, 1, 1, 1, 1, 0]
    k = keys
    assert c.host.take_events() == [
        ("stored", "CPU", 0, (k[1], k[3], k[5], k[7]), None, 0, ()),
        ("stored", "CPU", 1, (k[1],), None, 1, ()),
        ("stored", "CPU", 1, (k[3],), None, 3, ()),
        ("stored", "CPU", 1, (k[5],), None, 5, ()),
        ("stored", "CPU", 1, (k[7],), None, 7, ()),
    ]
    stats = c.host.stats()
    assert (stats["pages_allocated"], stats["pages_named"], stats["pages_offloaded"]) == (8, 8, 8)
    # Everything reachable is on the host now: a second plan copies nothing.
    again = c.plan_offload(a, 16)
    assert again.num_pages == 0


def test_abort_offload_returns_host_pages_unnamed_to_the_front(impl: ModuleType) -> None:
    c, keys = build(impl)
    a = request_a(c, keys)
    c.abort_offload(c.plan_offload(a, 16))
    assert as_list(c.host.free_queue()) == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert c.host.num_cached == 0
    assert c.host.take_events() == []
    assert as_list(c.pool.ref_counts())[:10] == [0, 1, 1, 1, 1, 1, 1, 1, 1, 0]


def test_plan_offload_short_of_host_pages_returns_none_and_changes_nothing(
    impl: ModuleType,
) -> None:
    c, keys = build(impl, host_blocks=8)  # 7 free host pages, the plan needs 8
    a = request_a(c, keys)
    before = state(c, a)
    assert c.plan_offload(a, 16) is None
    assert state(c, a) == before


def test_an_offloaded_page_freed_meanwhile_is_held_until_the_copy_ends(impl: ModuleType) -> None:
    c, keys = build(impl)
    a = request_a(c, keys)
    plan = c.plan_offload(a, 16)
    c.free(a)
    assert as_list(c.pool.free_queue()) == list(range(9, 20))  # the copy still holds 1..8
    c.complete_offload(plan)
    assert as_list(c.pool.free_queue()) == [*range(9, 20), 8, 7, 6, 5, 4, 3, 2, 1]


def test_match_across_tiers_prefers_device_copies_slot_by_slot(impl: ModuleType) -> None:
    c, keys, _ = offloaded(impl)
    evict_most(c)
    m16 = c.match_prefix(keys)
    assert m16.num_tokens == 16
    assert [as_list(p) for p in m16.pages] == [[0, 0, 0, 0], [0] * 8]
    assert [as_list(p) for p in m16.host_pages] == [[1, 2, 3, 4], [0, 0, 0, 0, 0, 0, 0, 8]]
    assert c.blocks_consumed_by_claim(m16) == 5
    # At 12 tokens the sliding group's slot 5 is still on the device (page 7, free).
    m12 = c.match_prefix(keys[:6])
    assert m12.num_tokens == 12
    assert [as_list(p) for p in m12.pages] == [[0, 0, 0], [0, 0, 0, 0, 0, 7]]
    assert [as_list(p) for p in m12.host_pages] == [[1, 2, 3], [0] * 6]
    assert c.blocks_consumed_by_claim(m12) == 4


def test_claim_with_loads_short_of_device_pages_raises_and_changes_nothing(
    impl: ModuleType,
) -> None:
    c, keys, _ = offloaded(impl)
    tc = evict_most(c)
    m = c.match_prefix(keys)  # takes 5 free device pages, 3 are free
    d = c.new_tables()
    before = state(c, [*tc, *d])
    with pytest.raises(ValueError, match="match"):
        c.claim(d, m)
    assert state(c, [*tc, *d]) == before


def claimed(impl: ModuleType) -> tuple[Any, list[bytes], list[Any], Any]:
    c, keys, _ = offloaded(impl)
    tc = evict_most(c)
    m = c.match_prefix(keys)
    c.free(tc)
    assert as_list(c.pool.free_queue())[:8] == [17, 18, 19, 4, 3, 2, 1, 8]
    d = c.new_tables()
    return c, keys, d, c.claim(d, m)


def test_claim_with_loads_puts_fresh_pages_in_real_slots_and_pins_host_pages(
    impl: ModuleType,
) -> None:
    c, _, d, plan = claimed(impl)
    assert as_list(plan.groups) == [0, 0, 0, 0, 1]
    assert as_list(plan.host_pages) == [1, 2, 3, 4, 8]
    assert as_list(plan.device_pages) == [17, 18, 19, 4, 3]
    assert as_list(d[0].page_ids()) == [17, 18, 19, 4]
    assert as_list(d[1].page_ids()) == [0, 0, 0, 0, 0, 0, 0, 3]
    assert (d[1].reclaim_floor, d[1].tail_available) == (7, 0)
    assert as_list(c.pool.free_queue()) == [2, 1, 8, *range(9, 17), 7, 6, 5]
    assert as_list(c.host.free_queue()) == [9, 7, 6, 5]
    assert as_list(c.host.ref_counts()) == [0, 1, 1, 1, 1, 0, 0, 0, 1, 0]
    # Pages 4 and 3 lost their names to the allocation; the loaded pages are unnamed yet.
    assert c.pool.num_cached == 3


def test_complete_load_names_the_device_pages_and_unpins_the_host(impl: ModuleType) -> None:
    c, keys, d, plan = claimed(impl)
    c.pool.take_events()
    c.complete_load(plan)
    assert as_list(c.host.ref_counts()) == [0] * 10
    assert as_list(c.host.free_queue()) == [9, 7, 6, 5, 8, 4, 3, 2, 1]
    assert c.pool.take_events() == [
        ("stored", "GPU", 0, (keys[1], keys[3], keys[5], keys[7]), None, 0, ()),
        ("stored", "GPU", 1, (keys[7],), keys[6], 7, ()),
    ]
    assert c.host.stats()["pages_loaded"] == 5
    m = c.match_prefix(keys)
    assert [as_list(p) for p in m.pages] == [[17, 18, 19, 4], [0, 0, 0, 0, 0, 0, 0, 3]]
    assert [as_list(p) for p in m.host_pages] == [[0] * 4, [0] * 8]


def test_freeing_a_request_with_a_pending_load_aborts_the_load(impl: ModuleType) -> None:
    c, _, d, plan = claimed(impl)
    c.free(d)
    assert plan.state == "aborted"
    # The loaded pages hold nothing: unnamed, they return to the front of the device queue
    # (group 0's batch first, then group 1's page 3 in front of it).
    assert as_list(c.pool.free_queue())[:5] == [3, 17, 18, 19, 4]
    assert c.pool.num_cached == 3
    assert as_list(c.host.ref_counts()) == [0] * 10
    before = state(c, d)
    with pytest.raises(ValueError, match="aborted"):
        c.complete_load(plan)
    assert state(c, d) == before


def test_reclaim_of_a_table_with_a_pending_load_raises(impl: ModuleType) -> None:
    c, _, d, plan = claimed(impl)
    before = state(c, d)
    with pytest.raises(ValueError, match="pending load"):
        c.reclaim_expired(d, 16)
    assert state(c, d) == before
    c.complete_load(plan)
    assert c.reclaim_expired(d, 16) == 0  # slid_out(16) = 7 = the floor: nothing to punch


def test_claim_without_host_served_slots_returns_none(impl: ModuleType) -> None:
    c, keys = build(impl)
    a = request_a(c, keys)
    c.free(a)
    assert c.claim(c.new_tables(), c.match_prefix(keys)) is None


def test_plans_complete_or_abort_once(impl: ModuleType) -> None:
    c, keys = build(impl)
    a = request_a(c, keys)
    plan = c.plan_offload(a, 16)
    c.complete_offload(plan)
    before = state(c, a)
    for call in (c.complete_offload, c.abort_offload):
        with pytest.raises(ValueError, match="completed already"):
            call(plan)
        assert state(c, a) == before
    _, _, _, load = claimed(impl)
    with pytest.raises(TypeError, match="plan"):
        c.complete_offload(load)


def test_plans_of_another_coordinator_are_rejected(impl: ModuleType) -> None:
    c, keys = build(impl)
    a = request_a(c, keys)
    plan = c.plan_offload(a, 16)
    other, _ = build(impl)
    for call in (other.complete_offload, other.abort_offload):
        with pytest.raises(ValueError, match="another coordinator"):
            call(plan)
    _, _, _, load = claimed(impl)
    with pytest.raises(ValueError, match="another coordinator"):
        c.complete_load(load)
    assert plan.state == "pending" and load.state == "pending"


def test_host_calls_on_a_coordinator_without_host_pool_raise(impl: ModuleType) -> None:
    c = impl.Coordinator(specs(impl), impl.BlockPool(20))
    keys = impl.page_keys(list(range(16)), 2)
    a = request_a(c, keys)
    assert c.host is None
    with pytest.raises(ValueError, match="no host pool"):
        c.plan_offload(a, 16)
    hc, _ = build(impl)
    plan = hc.plan_offload(request_a(hc, keys), 16)
    with pytest.raises(ValueError, match="no host pool"):
        c.complete_offload(plan)
    with pytest.raises(ValueError, match="no host pool"):
        c.abort_offload(plan)
    _, _, _, load = claimed(impl)
    with pytest.raises(ValueError, match="no host pool"):
        c.complete_load(load)


def test_plan_offload_checks_its_arguments(impl: ModuleType) -> None:
    c, keys = build(impl)
    a = request_a(c, keys)
    with pytest.raises(ValueError, match="num_tokens"):
        c.plan_offload(a, 17)
    with pytest.raises(ValueError, match="num_tokens"):
        c.plan_offload(a, -1)
    with pytest.raises(TypeError, match="num_tokens"):
        c.plan_offload(a, True)
    assert as_list(c.host.free_queue()) == list(range(1, 10))


def test_a_host_pool_is_not_a_device_pool(impl: ModuleType) -> None:
    with pytest.raises(TypeError, match="pool"):
        impl.Coordinator(specs(impl), impl.HostPool(20))
    with pytest.raises(TypeError, match="host"):
        impl.Coordinator(specs(impl), impl.BlockPool(20), impl.BlockPool(20))


def test_host_eviction_drops_the_oldest_host_names_with_cpu_events(impl: ModuleType) -> None:
    c, keys, _ = offloaded(impl)
    # A second request with other tokens needs 8 host pages: page 9 and 7 of the names.
    other = impl.page_keys([100 + t for t in range(16)], 2)
    b = c.new_tables()
    assert c.acquire(b, 16)
    c.cache_full_blocks(b, other, 16)
    plan = c.plan_offload(b, 16)
    assert as_list(plan.host_pages) == [9, 8, 7, 6, 5, 4, 3, 2]
    assert c.host.take_events() == [
        ("removed", "CPU", 1, (keys[7], keys[5], keys[3], keys[1]), None, None, ()),
        ("removed", "CPU", 0, (keys[7], keys[5], keys[3]), None, None, ()),
    ]
    assert c.host.num_cached == 1


def test_a_state_slot_whose_load_is_pending_is_not_named_until_the_load_completes(
    impl: ModuleType,
) -> None:
    # {full B=4; state B=4}, lcm 4. Request A computes 8 tokens and names them at 8: full
    # slots 0 and 1, and the state slot ending at 8 (slot 1). Offloaded, freed, evicted by
    # request C, they come back to request D through the host: a load of three pages.
    c = impl.Coordinator(
        [impl.GroupSpec("full", 4), impl.GroupSpec("state", 4)], impl.BlockPool(7), impl.HostPool(8)
    )
    keys = impl.page_keys(list(range(8)), 4)
    a = c.new_tables()
    assert c.acquire(a, 8)
    assert c.cache_full_blocks(a, keys, 8) == 3
    c.complete_offload(c.plan_offload(a, 8))
    c.free(a)
    tc = c.new_tables()
    assert c.acquire(tc, 12)
    assert c.pool.num_cached == 0
    c.free(tc)
    d = c.new_tables()
    load = c.claim(d, c.match_prefix(keys))
    assert (as_list(load.groups), as_list(load.slots)) == ([0, 0, 1], [0, 1, 1])
    # The engine names D's computed prefix while the copies are in flight: the loaded pages
    # hold nothing yet, so none of them takes a name (the state slot ending at 8 included),
    # and a match still finds the prefix on the host only.
    assert c.cache_full_blocks(d, keys, 8) == 0
    assert c.pool.num_cached == 0
    m = c.match_prefix(keys)
    assert [as_list(p) for p in m.pages] == [[0, 0], [0, 0]]
    assert [as_list(p) for p in m.host_pages] == [
        as_list(load.host_pages)[:2],
        [0, int(load.host_pages[2])],
    ]
    c.complete_load(load)
    assert c.pool.num_cached == 3
    m = c.match_prefix(keys)
    assert [as_list(p) for p in m.pages] == [
        as_list(load.device_pages)[:2],
        [0, int(load.device_pages[2])],
    ]
