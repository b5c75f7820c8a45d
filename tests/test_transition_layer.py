"""The model's table transitions are computed by the rules Z3 executes (spec/slots.py).

reclaim_expired, blocks_reclaimable_at, free and claim write and count each slot through a
rule of spec/slots.py, the host tier's plans end entry by entry through its plan-end rules
(complete_offload, abort_offload, complete_load), and the pool sends each released page
where slots.joins_front says and takes each page of an allocation where slots.from_front
says, evicting as slots.evicts says.
Each test replaces one rule by a different one and checks that the model's effect changes
exactly as the replaced rule says: so the model computes nothing of these effects itself.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from livetail import spec
from livetail.spec import slots

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def rule(name: str, replacement: Any) -> Iterator[None]:
    original = getattr(slots, name)
    setattr(slots, name, replacement)
    try:
        yield
    finally:
        setattr(slots, name, original)


@contextmanager
def unchecked(m: Any) -> Iterator[None]:
    """Without the model's run-time check of slots against runs (it would catch the rule)."""
    m.check_runs = False
    try:
        yield
    finally:
        m.check_runs = True


def sliding(B: int = 2, W: int = 3) -> tuple[spec.BlockPool, spec.SlidingWindowManager]:
    return spec.BlockPool(32), spec.SlidingWindowManager(B, W)


def test_reclaim_writes_what_reclaim_cell_says() -> None:
    pool, m = sliding()
    t = spec.BlockTable()
    assert m.acquire(pool, t, 12)  # 6 slots, pages 1..6
    assert t.page_ids() == [1, 2, 3, 4, 5, 6]
    # slid_out(12) = (12 - 3 + 1) // 2 = 5: the band is [0, 5).
    assert m.reclaim_expired(pool, t, 12) == 5
    assert t.page_ids() == [0, 0, 0, 0, 0, 6]
    # The batch runs from the band's top down; released last entry first, each unnamed page
    # to the queue's front: slot 0's page goes first, slot 4's ends at the head.
    assert pool.free_queue()[:5] == [5, 4, 3, 2, 1]

    pool, m = sliding()
    t = spec.BlockTable()
    assert m.acquire(pool, t, 12)
    # A rule that punches only even slots: the odd ones keep their pages (and are not let go).
    with (
        rule("reclaim_cell", lambda s, p, lo, hi, ar=None: 0 if lo <= s < hi and s % 2 == 0 else p),
        rule("punched", lambda s, p, lo, hi, ar=None: lo <= s < hi and s % 2 == 0 and p != 0),
        unchecked(m),
    ):
        assert m.reclaim_expired(pool, t, 12) == 3
    assert t.page_ids() == [0, 2, 0, 4, 0, 6]
    assert pool.free_queue()[:3] == [5, 3, 1]
    assert t.reclaim_floor == 5


def test_blocks_reclaimable_at_counts_what_reclaimable_cell_says() -> None:
    pool, m = sliding()
    t = spec.BlockTable()
    assert m.acquire(pool, t, 12)
    assert m.blocks_reclaimable_at(t, 12) == 5
    with rule("reclaimable_cell", lambda s, p, ref, cached, every, lo, hi, ar=None: s == lo):
        assert m.blocks_reclaimable_at(t, 12) == 1
    assert m.blocks_reclaimable_at(t, 12, count_uncached=False) == 0


def test_free_releases_what_freed_says_in_the_batch_order() -> None:
    pool, m = sliding()
    t = spec.BlockTable()
    assert m.acquire(pool, t, 8)  # pages 1..4
    m.free(pool, t)
    assert pool.free_queue()[:4] == [1, 2, 3, 4]  # the last slot's page re-entered first
    assert t.page_ids() == []

    pool, m = sliding()
    t = spec.BlockTable()
    assert m.acquire(pool, t, 8)
    with rule("freed", lambda s, p, n, ar=None: p != 0 and s != 1), unchecked(m):
        m.free(pool, t)
    assert pool.free_queue()[:3] == [1, 3, 4]
    assert pool.ref_count(2) == 1  # the rule kept slot 1's page: nothing else let it go


def test_release_destination_is_joins_front() -> None:
    pool, m = sliding()
    t = spec.BlockTable()
    assert m.acquire(pool, t, 4)  # pages 1, 2
    with rule("joins_front", lambda named, retention, ar=None: False):
        m.free(pool, t)
    # Unnamed pages sent to the back by the replaced rule: the never-used pages come first.
    assert pool.free_queue()[:2] == [3, 4]
    assert pool.free_queue()[-2:] == [2, 1]


def test_claim_places_what_claim_cell_says() -> None:
    pool = spec.BlockPool(16)
    c = spec.Coordinator([spec.GroupSpec("full", 2)], pool)
    keys = spec.page_keys(list(range(8)), 2)
    a = c.new_tables()
    assert c.acquire(a, 8)
    assert c.cache_full_blocks(a, keys, 8) == 4
    match = c.match_prefix(keys)
    assert match.num_tokens == 8
    b = c.new_tables()
    c.claim(b, match)
    assert b[0].page_ids() == a[0].page_ids() == [1, 2, 3, 4]
    c.free(b)
    match = c.match_prefix(keys)
    b = c.new_tables()
    hole_for_3 = rule("claim_cell", lambda dev, host, fresh, ar=None: dev if dev != 3 else 0)
    with hole_for_3, unchecked(c.managers[0]):
        c.claim(b, match)
    assert b[0].page_ids() == [1, 2, 0, 4]


def churned() -> tuple[spec.Coordinator, spec.BlockPool]:
    """Pool of 8, one full group of 4 tokens.  Request a takes 1, 2, 3 and names 1 and 2;
    request b takes 4, 5; both are freed.  The free queue is then the stack of unnamed
    released pages (3, 4, 5, top first), the never-used 6, 7, and the named 2, 1."""
    pool = spec.BlockPool(8)
    c = spec.Coordinator([spec.GroupSpec("full", 4)], pool)
    keys = spec.page_keys(list(range(8)), 4)
    a, b = c.new_tables(), c.new_tables()
    assert c.acquire(a, 12) and c.cache_full_blocks(a, keys, 12) == 2
    assert c.acquire(b, 8)
    c.free(b)
    c.free(a)
    assert pool.free_queue() == [3, 4, 5, 6, 7, 2, 1]
    assert (pool.num_free, pool.num_cached, pool.num_cached_free) == (7, 2, 2)
    return c, pool


def test_allocation_takes_where_from_front_says() -> None:
    c, pool = churned()
    t = c.new_tables()
    assert c.acquire(t, 12)  # the first three of the queue: the stack's pages, no eviction
    assert t[0].page_ids() == [3, 4, 5]
    assert pool.free_queue() == [6, 7, 2, 1]
    assert (pool.num_cached, pool.stats()["pages_evicted"]) == (2, 0)

    c, pool = churned()
    t = c.new_tables()
    # A rule that takes the ordered queue first: 6, 7, then 2, whose name goes while the
    # unnamed 3, 4, 5 stay free.
    with rule("from_front", lambda front, queue, ar=None: queue == 0):
        assert c.acquire(t, 12)
    assert t[0].page_ids() == [6, 7, 2]
    assert pool.free_queue() == [3, 4, 5, 1]
    assert (pool.num_free, pool.num_pinned) == (4, 3)
    assert (pool.num_cached, pool.name(2), pool.stats()["pages_evicted"]) == (1, None, 1)


def test_allocation_evicts_what_evicts_says() -> None:
    c, pool = churned()
    t = c.new_tables()
    assert c.acquire(t, 28)  # all seven pages: the oldest named page, 2, goes before 1
    assert t[0].page_ids() == [3, 4, 5, 6, 7, 2, 1]
    assert (pool.num_cached, pool.stats()["pages_evicted"], pool.stats()["names_removed"]) == (
        0,
        2,
        2,
    )

    c, pool = churned()
    t = c.new_tables()
    with rule("evicts", lambda named, ar=None: False):  # pages handed out keep their names
        assert c.acquire(t, 28)
    assert t[0].page_ids() == [3, 4, 5, 6, 7, 2, 1]
    assert pool.free_queue() == []
    assert (pool.num_cached, pool.stats()["pages_evicted"], pool.num_cached_free) == (2, 0, 0)
    assert pool.name(2) is not None and pool.name(1) is not None


def test_evict_names_moves_a_page_where_joins_front_says() -> None:
    c, pool = churned()
    assert pool.evict_names([1]) == 1
    assert pool.free_queue() == [1, 3, 4, 5, 6, 7, 2]  # unnamed now: the stack's top

    c, pool = churned()
    with rule("joins_front", lambda named, retention, ar=None: False):
        assert pool.evict_names([1]) == 1
    assert pool.free_queue() == [3, 4, 5, 6, 7, 2, 1]  # it stays where it was, unnamed
    assert (pool.num_cached, pool.name(1)) == (1, None)


def _offloaded() -> tuple[spec.Coordinator, list[spec.BlockTable], spec.OffloadPlan]:
    """Request a computed 8 tokens of a full group (pages 1-4, named) and planned their
    offload to host pages 1-4 (one copy reference more on each device page)."""
    pool, host = spec.BlockPool(16), spec.HostPool(8)
    c = spec.Coordinator([spec.GroupSpec("full", 2)], pool, host)
    a = c.new_tables()
    assert c.acquire(a, 8)
    assert c.cache_full_blocks(a, spec.page_keys(list(range(8)), 2), 8) == 4
    plan = c.plan_offload(a, 8)
    assert plan is not None
    assert plan.device_pages == plan.host_pages == [1, 2, 3, 4]
    assert pool.ref_counts()[1:5] == [2, 2, 2, 2] and host.ref_counts()[1:5] == [1, 1, 1, 1]
    return c, a, plan


def _loading() -> tuple[spec.Coordinator, spec.LoadPlan, list[Any]]:
    """The offload completed, request a freed, every device name evicted by another tenant;
    the prompt claimed back: a load of host pages 1-4 into device pages 5-8."""
    c, a, plan = _offloaded()
    c.complete_offload(plan)
    names = [c.host.name(h) for h in (1, 2, 3, 4)]  # type: ignore[union-attr]
    c.free(a)
    tenant = c.new_tables()
    assert c.acquire(tenant, 30)
    c.free(tenant)
    match = c.match_prefix(spec.page_keys(list(range(8)), 2))
    assert match.host_pages == [[1, 2, 3, 4]]
    load = c.claim(c.new_tables(), match)
    assert load is not None and load.device_pages == [5, 6, 7, 8]
    return c, load, names


def test_plan_ends_name_what_copy_name_and_copy_target_say() -> None:
    c, _, plan = _offloaded()
    host = c.host
    assert host is not None
    with rule("copy_name", lambda name, completed, ar=None: name):
        c.abort_offload(plan)
    # The replaced rule names the host pages although the plan was aborted.
    assert [host.name(h) for h in (1, 2, 3, 4)] == [c.pool.name(d) for d in (1, 2, 3, 4)]

    c, load, names = _loading()
    # Another request pins every free device page, 1-4 among them (only a pinned page
    # takes a name: the pool asserts it).
    other = c.new_tables()
    assert c.acquire(other, 22) and c.pool.num_free == 0
    assert sorted(other[0].page_ids())[:4] == [1, 2, 3, 4]
    with rule("copy_target", lambda device, host, load, ar=None: host):
        c.complete_load(load)
    # Named at the host pages' ids (device pages 1-4), the loaded pages 5-8 left unnamed.
    assert [c.pool.name(p) for p in (1, 2, 3, 4)] == names
    assert [c.pool.name(p) for p in (5, 6, 7, 8)] == [None] * 4


def test_plan_ends_drop_what_drops_device_and_drops_host_say() -> None:
    c, _, plan = _offloaded()
    with rule("drops_device", lambda load, completed, ar=None: False):
        c.complete_offload(plan)
    assert c.pool.ref_counts()[1:5] == [2, 2, 2, 2]  # the copy references kept
    assert c.host is not None and c.host.ref_counts()[1:5] == [0, 0, 0, 0]

    c, load, _ = _loading()
    with rule("drops_host", lambda load, completed, ar=None: False):
        c.complete_load(load)
    assert c.host is not None and c.host.ref_counts()[1:5] == [1, 1, 1, 1]  # pins kept
    assert c.pool.ref_counts()[5:9] == [1, 1, 1, 1]


def test_plan_ends_visit_the_entries_ends_entry_says() -> None:
    c, _, plan = _offloaded()
    host = c.host
    assert host is not None
    with rule("ends_entry", lambda i, k, ar=None: 0 <= i < k - 1):
        c.complete_offload(plan)
    # The last entry is skipped: its host page unnamed and held, its copy reference kept.
    assert [host.name(h) is not None for h in (1, 2, 3, 4)] == [True, True, True, False]
    assert host.ref_counts()[1:5] == [0, 0, 0, 1]
    assert c.pool.ref_counts()[1:5] == [1, 1, 1, 2]


MODEL = ("managers.py", "coordinator.py", "pool.py", "pool_state.py", "detach.py", "host.py")


def _calls(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "slots"
    }


def test_every_slot_rule_is_called_by_the_model() -> None:
    called = set().union(*(_calls(ROOT / "spec" / f) for f in MODEL))
    rules = {
        "apply",
        "batch",
        "punched",
        "reclaim_cell",
        "reclaimable_cell",
        "free_batch",
        "claim_cell",
        "claim_takes",
        "joins_front",
        "from_front",
        "evicts",
        "reachable",
        "ends_entry",
        "copy_target",
        "copy_name",
        "drops_device",
        "drops_host",
    }
    assert rules <= called, rules - called


def test_no_model_module_writes_a_slot_but_through_slots_apply() -> None:
    """Slot writes (``x.slots[i] = ...``) happen only in spec/slots.py's apply."""
    offenders = []
    for f in MODEL:
        tree = ast.parse((ROOT / "spec" / f).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if (
                        isinstance(target, ast.Subscript)
                        and isinstance(target.value, ast.Attribute)
                        and target.value.attr == "slots"
                    ):
                        offenders.append(f"{f}:{node.lineno}")
    assert offenders == []
