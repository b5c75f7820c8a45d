"""Coordinator and group specs (semantics section 6), on the native module and the spec."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest


def ids(a: object) -> list[int]:
    return [int(x) for x in a]  # type: ignore[attr-defined]


def state(pool: Any, tables: list[Any]) -> object:
    return (
        ids(pool.free_queue()),
        ids(pool.ref_counts()),
        [(ids(t.page_ids()), t.tail_available, t.reclaim_floor, t.is_bound) for t in tables],
    )


def three_groups(impl: ModuleType) -> list[Any]:
    return [
        impl.GroupSpec("full", 256),
        impl.GroupSpec("sliding", 128, sliding_window=511),
        impl.GroupSpec("sliding", 8, sliding_window=12, live_tail_alloc=True),
    ]


# --- reference figures -----------------------------------------------------------------------


def test_three_group_request_of_8192_tokens_takes_32_64_64_pages(impl: ModuleType) -> None:
    pool = impl.BlockPool(2**16)
    c = impl.Coordinator(three_groups(impl), pool)
    assert (c.base_block_size, c.lcm_block_size, c.num_groups) == (8, 256, 3)
    tables = c.new_tables()
    assert c.blocks_needed_for(tables, 8192) == 160
    assert c.acquire(tables, 8192)
    assert [t.num_real_pages for t in tables] == [32, 64, 64]
    assert [len(t) for t in tables] == [32, 64, 1024]
    assert pool.num_pinned == 160


def test_live_tail_groups_align_to_the_lcm(impl: ModuleType) -> None:
    c = impl.Coordinator(three_groups(impl), impl.BlockPool(8))
    assert [m.kind for m in c.managers] == ["full", "sliding", "sliding"]
    assert [m.block_size for m in c.managers] == [256, 128, 8]
    assert [m.live_alloc_alignment for m in c.managers] == [0, 0, 256]
    assert [m.sliding_window for m in c.managers] == [None, 511, 12]


def test_gcd_and_lcm_of_page_sizes(impl: ModuleType) -> None:
    specs = [impl.GroupSpec("full", 12), impl.GroupSpec("state", 18)]
    c = impl.Coordinator(specs, impl.BlockPool(8))
    assert (c.base_block_size, c.lcm_block_size) == (6, 36)
    assert [m.kind for m in c.managers] == ["full", "state"]


def test_coordinator_exposes_its_pool_and_specs(impl: ModuleType) -> None:
    pool = impl.BlockPool(8)
    specs = three_groups(impl)
    c = impl.Coordinator(specs, pool)
    assert c.pool is pool
    assert [(s.kind, s.block_size, s.sliding_window, s.live_tail_alloc) for s in c.specs] == [
        ("full", 256, None, False),
        ("sliding", 128, 511, False),
        ("sliding", 8, 12, True),
    ]
    tables = c.new_tables()
    assert len(tables) == 3
    assert len({id(t) for t in tables}) == 3
    assert all(len(t) == 0 and not t.is_bound for t in tables)


# --- acquire, reclaim, free ------------------------------------------------------------------


def test_coordinator_acquire_is_all_or_nothing_on_shortfall(impl: ModuleType) -> None:
    pool = impl.BlockPool(160)  # 159 free: one short of 32 + 64 + 64
    c = impl.Coordinator(three_groups(impl), pool)
    tables = c.new_tables()
    before = state(pool, tables)
    assert not c.acquire(tables, 8192)
    assert state(pool, tables) == before
    assert not any(t.is_bound for t in tables)
    assert c.acquire(tables, 4096)  # 16 + 32 + 32 pages fit
    assert c.acquire(c.new_tables(), 0)


def test_coordinator_acquire_succeeds_with_exactly_enough_pages(impl: ModuleType) -> None:
    pool = impl.BlockPool(161)
    c = impl.Coordinator(three_groups(impl), pool)
    assert c.acquire(c.new_tables(), 8192)
    assert pool.num_free == 0


def test_groups_act_in_ascending_index(impl: ModuleType) -> None:
    pool = impl.BlockPool(16)
    specs = [impl.GroupSpec("full", 4), impl.GroupSpec("sliding", 4, sliding_window=4)]
    c = impl.Coordinator(specs, pool)
    tables = c.new_tables()
    assert c.acquire(tables, 8)
    assert [ids(t.page_ids()) for t in tables] == [[1, 2], [3, 4]]
    c.free(tables)
    # Group 0 releases 2, 1 onto the front, then group 1 releases 4, 3 in front of them.
    assert ids(pool.free_queue()) == [3, 4, 1, 2, *range(5, 16)]
    assert not any(t.is_bound for t in tables)


def test_coordinator_reclaim_sums_over_groups(impl: ModuleType) -> None:
    pool = impl.BlockPool(2**16)
    c = impl.Coordinator(three_groups(impl), pool)
    tables = c.new_tables()
    c.acquire(tables, 8192)
    # full: 0; sliding 128/511: slid_out = 7682 // 128 = 60; live: 62 resume pages.
    assert c.reclaim_expired(tables, 8192) == 60 + 62
    assert [t.num_real_pages for t in tables] == [32, 4, 2]
    assert [t.reclaim_floor for t in tables] == [0, 60, 1022]
    assert c.reclaim_expired(tables, 8192) == 0


def test_coordinator_sequential_charge_exceeds_combined_for_live_tail(impl: ModuleType) -> None:
    c = impl.Coordinator(three_groups(impl), impl.BlockPool(2**16))
    tables = c.new_tables()
    assert c.blocks_needed_for_sequential(tables, 17, 2) == 1 + 1 + 3
    assert c.blocks_needed_for(tables, 19) == 1 + 1 + 2


def test_decode_reserve_equals_what_the_decode_acquire_takes(impl: ModuleType) -> None:
    pool = impl.BlockPool(2**16)
    c = impl.Coordinator(three_groups(impl), pool)
    tables = c.new_tables()
    reserve = c.blocks_needed_for_sequential(tables, 8191, 1) - c.blocks_needed_for(tables, 8191)
    c.acquire(tables, 8191)
    before = pool.num_free
    c.acquire(tables, 1)
    assert before - pool.num_free == reserve


# --- errors ------------------------------------------------------------------------------------


class World:
    def __init__(self, impl: ModuleType) -> None:
        self.pool = impl.BlockPool(4096)
        self.other = impl.BlockPool(64)
        self.c = impl.Coordinator(three_groups(impl), self.pool)
        self.tables = self.c.new_tables()
        assert self.c.acquire(self.tables, 3000)
        self.c.reclaim_expired(self.tables, 2000)
        self.stranger = impl.BlockTable()
        impl.FullAttentionManager(256).acquire(self.other, self.stranger, 1)

    def snapshot(self) -> object:
        return (state(self.pool, self.tables), state(self.other, [self.stranger]))


def check(
    w: World, kind: type[Exception], call: Callable[[], object], match: str | None = None
) -> None:
    before = w.snapshot()
    with pytest.raises(kind, match=match):
        call()
    assert w.snapshot() == before


def test_wrong_number_of_tables_raises_and_changes_nothing(impl: ModuleType) -> None:
    w = World(impl)
    for tables in (w.tables[:2], w.tables + [impl.BlockTable()], []):
        check(w, ValueError, lambda t=tables: w.c.acquire(t, 8))
        check(w, ValueError, lambda t=tables: w.c.blocks_needed_for(t, 8))
        check(w, ValueError, lambda t=tables: w.c.blocks_needed_for_sequential(t, 8, 1))
        check(w, ValueError, lambda t=tables: w.c.reclaim_expired(t, 8))
        check(w, ValueError, lambda t=tables: w.c.free(t))


def test_repeated_table_raises_and_changes_nothing(impl: ModuleType) -> None:
    w = World(impl)
    fresh = impl.BlockTable()
    twice = [fresh, fresh, impl.BlockTable()]
    check(w, ValueError, lambda: w.c.acquire(twice, 8))
    check(w, ValueError, lambda: w.c.free([w.tables[0], w.tables[0], w.tables[2]]))


def test_non_table_and_non_list_are_type_errors(impl: ModuleType) -> None:
    w = World(impl)
    check(w, TypeError, lambda: w.c.acquire([w.tables[0], w.tables[1], "t"], 8))
    check(w, TypeError, lambda: w.c.acquire(None, 8))
    check(w, TypeError, lambda: w.c.free(w.tables[0]))
    assert w.c.blocks_needed_for(tuple(w.tables), 8) == w.c.blocks_needed_for(w.tables, 8)


def test_table_bound_to_another_pool_raises_in_every_coordinator_call(impl: ModuleType) -> None:
    w = World(impl)
    mixed = [w.stranger, impl.BlockTable(), impl.BlockTable()]
    for call in (
        lambda: w.c.acquire(mixed, 8),
        lambda: w.c.acquire(mixed, 0),
        lambda: w.c.blocks_needed_for(mixed, 8),
        lambda: w.c.blocks_needed_for_sequential(mixed, 8, 1),
        lambda: w.c.reclaim_expired(mixed, 0),
        lambda: w.c.free(mixed),
    ):
        check(w, ValueError, call, "pool")


def test_a_fault_in_any_group_raises_before_any_group_acts(impl: ModuleType) -> None:
    w = World(impl)
    check(w, ValueError, lambda: w.c.reclaim_expired(w.tables, 3001), "num_computed_tokens")
    check(w, ValueError, lambda: w.c.acquire(w.tables, 2**31), "num_tokens")
    check(w, ValueError, lambda: w.c.acquire(w.tables, -1), "num_tokens")
    check(w, TypeError, lambda: w.c.acquire(w.tables, True), "num_tokens")
    # The last group's table is bound elsewhere: the first two groups must not acquire.
    a, b = impl.BlockTable(), impl.BlockTable()
    check(w, ValueError, lambda: w.c.acquire([a, b, w.stranger], 8))
    assert (len(a), len(b), a.is_bound, b.is_bound) == (0, 0, False, False)


def test_empty_specs_raise(impl: ModuleType) -> None:
    with pytest.raises(ValueError, match="specs"):
        impl.Coordinator([], impl.BlockPool(8))


def test_lcm_of_page_sizes_past_int32_raises(impl: ModuleType) -> None:
    specs = [impl.GroupSpec("full", 65536), impl.GroupSpec("full", 65537)]
    with pytest.raises(ValueError, match="lcm"):
        impl.Coordinator(specs, impl.BlockPool(8))


@pytest.mark.parametrize(
    ("args", "kwargs", "kind", "match"),
    [
        (("attention", 8), {}, ValueError, "kind"),
        ((3, 8), {}, TypeError, "kind"),
        (("sliding", 8), {}, ValueError, "sliding_window"),
        (("full", 8), {"sliding_window": 12}, ValueError, "sliding_window"),
        (("state", 8), {"sliding_window": 2}, ValueError, "sliding_window"),
        (("full", 8), {"live_tail_alloc": True}, ValueError, "live_tail_alloc"),
        (("chunked", 8), {"attention_chunk_size": 8, "live_tail_alloc": True}, ValueError,
         "live_tail_alloc"),
        (("state", 8), {"checkpoints": True}, ValueError, "checkpoints"),
        (("sliding", 8), {"sliding_window": 4, "checkpoints": True}, ValueError, "checkpoints"),
        (("state", 8), {"live_tail_alloc": True, "checkpoints": 1}, TypeError, "checkpoints"),
        (("full", 0), {}, ValueError, "block_size"),
        (("full", 2**31), {}, ValueError, "block_size"),
        (("full", 8.0), {}, TypeError, "block_size"),
        (("sliding", 8), {"sliding_window": 0}, ValueError, "sliding_window"),
        (("sliding", 8), {"sliding_window": 2**31}, ValueError, "sliding_window"),
        (("sliding", 8), {"sliding_window": 1.5}, TypeError, "sliding_window"),
        (("sliding", 8), {"sliding_window": 4, "live_tail_alloc": 1}, TypeError, "live_tail_alloc"),
    ],
)
def test_bad_group_spec_raises(
    impl: ModuleType, args: tuple[object, ...], kwargs: dict[str, object], kind: type, match: str
) -> None:
    with pytest.raises(kind, match=match):
        impl.GroupSpec(*args, **kwargs)


def test_group_spec_properties(impl: ModuleType) -> None:
    s = impl.GroupSpec("sliding", 8, sliding_window=12, live_tail_alloc=True)
    assert (s.kind, s.block_size, s.sliding_window, s.live_tail_alloc) == ("sliding", 8, 12, True)
    f = impl.GroupSpec("state", 16)
    assert (f.kind, f.block_size, f.sliding_window, f.live_tail_alloc) == ("state", 16, None, False)
    assert not f.checkpoints
    # Section 13.5: a state group with live tail, with checkpoints or not.
    for ck in (False, True):
        g = impl.GroupSpec("state", 16, live_tail_alloc=True, checkpoints=ck)
        assert (g.kind, g.live_tail_alloc, g.checkpoints) == ("state", True, ck)
        (m,) = impl.Coordinator([g], impl.BlockPool(8)).managers
        assert (m.live_tail, m.checkpoints, m.live_alloc_alignment) == (True, ck, 0)
        extra = ", live_tail=True" + (", checkpoints=True" if ck else "")
        assert repr(m) == f"StateManager(block_size=16{extra})"
