"""Bad input raises the documented type and changes nothing (issue 2 item 4, docs/decisions.md).

Every case runs against a pool and tables already in use, and compares their full state
before and after the failing call. Native and spec alike.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest


def ids(a: object) -> list[int]:
    return [int(x) for x in a]  # type: ignore[attr-defined]


def state(pool: Any, *tables: Any) -> object:
    return (
        ids(pool.free_queue()),
        ids(pool.ref_counts()),
        [
            (ids(t.page_ids()), t.tail_available, t.reclaim_floor, t.is_bound, t.extent)
            for t in tables
        ],
    )


class World:
    """A live-tail table mid-request, a full table, a fresh table and a second pool."""

    def __init__(self, impl: ModuleType) -> None:
        self.pool = impl.BlockPool(4096)
        self.other = impl.BlockPool(4096)
        self.live = impl.SlidingWindowManager(8, 12, 256)
        self.full = impl.FullAttentionManager(8)
        self.t = impl.BlockTable()
        self.u = impl.BlockTable()
        self.fresh = impl.BlockTable()
        assert self.live.acquire(self.pool, self.t, 1000)
        self.live.reclaim_expired(self.pool, self.t, 600)
        assert self.full.acquire(self.other, self.u, 20)

    def snapshot(self) -> object:
        return (state(self.pool, self.t, self.fresh), state(self.other, self.u))


def raises_and_changes_nothing(
    w: World, kind: type[Exception], call: Callable[[], object], match: str | None = None
) -> None:
    before = w.snapshot()
    with pytest.raises(kind, match=match):
        call()
    assert w.snapshot() == before


BAD_COUNTS: list[tuple[object, type[Exception]]] = [
    (-1, ValueError),
    (-(2**70), ValueError),
    (2**70, ValueError),
    (True, TypeError),
    (False, TypeError),
    (1.0, TypeError),
    ("8", TypeError),
    (None, TypeError),
    (np.bool_(True), TypeError),
    (np.float64(8.0), TypeError),
]


@pytest.mark.parametrize(("bad", "kind"), BAD_COUNTS)
def test_bad_token_count_raises_and_changes_nothing(
    impl: ModuleType, bad: object, kind: type[Exception]
) -> None:
    w = World(impl)
    raises_and_changes_nothing(w, kind, lambda: w.live.acquire(w.pool, w.t, bad), "num_tokens")
    raises_and_changes_nothing(w, kind, lambda: w.live.blocks_needed_for(w.t, bad), "num_tokens")
    raises_and_changes_nothing(
        w, kind, lambda: w.live.blocks_needed_for_sequential(w.t, bad, 1), "first_tokens"
    )
    raises_and_changes_nothing(
        w, kind, lambda: w.live.blocks_needed_for_sequential(w.t, 1, bad), "extra_tokens"
    )
    raises_and_changes_nothing(
        w, kind, lambda: w.live.reclaim_expired(w.pool, w.t, bad), "num_computed_tokens"
    )
    raises_and_changes_nothing(
        w, kind, lambda: w.live.blocks_reclaimable_at(w.t, bad), "num_computed_tokens"
    )
    raises_and_changes_nothing(
        w, kind, lambda: w.full.reclaim_expired(w.other, w.u, bad), "num_computed_tokens"
    )


def test_numpy_integer_counts_are_accepted(impl: ModuleType) -> None:
    w = World(impl)
    assert w.live.blocks_needed_for(w.t, np.int64(17)) == w.live.blocks_needed_for(w.t, 17)
    assert w.live.acquire(w.pool, w.t, np.uint8(3))
    assert w.live.reclaim_expired(w.pool, w.t, np.int32(1003)) >= 0


def test_frontier_above_the_extent_raises_and_changes_nothing(impl: ModuleType) -> None:
    w = World(impl)
    raises_and_changes_nothing(
        w, ValueError, lambda: w.live.reclaim_expired(w.pool, w.t, 1001), "num_computed_tokens"
    )
    raises_and_changes_nothing(
        w, ValueError, lambda: w.live.blocks_reclaimable_at(w.t, 1001), "num_computed_tokens"
    )
    raises_and_changes_nothing(
        w, ValueError, lambda: w.full.reclaim_expired(w.other, w.u, 21), "num_computed_tokens"
    )
    raises_and_changes_nothing(
        w, ValueError, lambda: w.live.reclaim_expired(w.pool, w.fresh, 1), "num_computed_tokens"
    )


def test_frontier_equal_to_the_extent_is_accepted(impl: ModuleType) -> None:
    w = World(impl)
    assert w.live.reclaim_expired(w.pool, w.t, 1000) > 0
    assert w.live.reclaim_expired(w.pool, w.fresh, 0) == 0


def test_table_bound_to_another_pool_raises_and_changes_nothing(impl: ModuleType) -> None:
    w = World(impl)
    for call in (
        lambda: w.live.acquire(w.other, w.t, 8),
        lambda: w.live.acquire(w.other, w.t, 0),  # even a no-op checks the pool
        lambda: w.live.reclaim_expired(w.other, w.t, 0),
        lambda: w.live.free(w.other, w.t),
        lambda: w.full.acquire(w.pool, w.u, 1),
    ):
        raises_and_changes_nothing(w, ValueError, call, "pool")


def test_queries_accept_a_table_bound_to_any_pool(impl: ModuleType) -> None:
    w = World(impl)
    assert w.full.blocks_needed_for(w.u, 4) == 0
    assert w.full.blocks_needed_for_sequential(w.u, 4, 8) == 1
    assert w.full.blocks_reclaimable_at(w.u, 20) == 0


def test_table_used_with_a_manager_of_another_page_size_raises(impl: ModuleType) -> None:
    w = World(impl)
    other_size = impl.SlidingWindowManager(16, 12)
    for call in (
        lambda: other_size.acquire(w.pool, w.t, 8),
        lambda: other_size.blocks_needed_for(w.t, 8),
        lambda: other_size.reclaim_expired(w.pool, w.t, 0),
        lambda: other_size.free(w.pool, w.t),
    ):
        raises_and_changes_nothing(w, ValueError, call, "block_size")


def test_acquire_past_the_int32_extent_raises_and_changes_nothing(impl: ModuleType) -> None:
    w = World(impl)
    # The table spans 125 slots of 8 tokens; 2**31 - 1 tokens fit in 268435455 slots.
    room = (2**31 - 1) // 8 * 8 - w.t.extent
    assert w.live.blocks_needed_for(w.t, room) >= 0
    for call in (
        lambda: w.live.acquire(w.pool, w.t, room + 1),
        lambda: w.live.blocks_needed_for(w.t, room + 1),
        lambda: w.live.blocks_needed_for_sequential(w.t, room, 1),
        lambda: w.live.blocks_needed_for_sequential(w.t, 1, room),
        lambda: w.live.blocks_needed_for_sequential(w.t, room + 1, 0),
    ):
        raises_and_changes_nothing(w, ValueError, call, "tokens")


def test_int32_limit_on_a_fresh_table(impl: ModuleType) -> None:
    t, m = impl.BlockTable(), impl.FullAttentionManager(2**31 - 1)
    assert m.blocks_needed_for(t, 2**31 - 1) == 1
    with pytest.raises(ValueError, match="num_tokens"):
        m.blocks_needed_for(t, 2**31)
    with pytest.raises(ValueError, match="tokens"):
        m.blocks_needed_for_sequential(t, 2**31 - 1, 1)


def test_shortfall_fails_without_raising_and_changes_nothing(impl: ModuleType) -> None:
    pool, t, m = impl.BlockPool(64), impl.BlockTable(), impl.SlidingWindowManager(8, 12)
    m.acquire(pool, t, 8)
    before = state(pool, t)
    assert m.blocks_needed_for(t, 8 * 63) == 63
    assert not m.acquire(pool, t, 8 * 63)
    assert state(pool, t) == before


def test_failed_acquire_binds_nothing(impl: ModuleType) -> None:
    pool, t, m = impl.BlockPool(2), impl.BlockTable(), impl.FullAttentionManager(4)
    assert not m.acquire(pool, t, 9)
    assert not t.is_bound


@pytest.mark.parametrize(
    ("make", "kind", "match"),
    [
        (lambda L: L.FullAttentionManager(0), ValueError, "block_size"),
        (lambda L: L.FullAttentionManager(-8), ValueError, "block_size"),
        (lambda L: L.FullAttentionManager(2**31), ValueError, "block_size"),
        (lambda L: L.FullAttentionManager(8.0), TypeError, "block_size"),
        (lambda L: L.StateManager(0), ValueError, "block_size"),
        (lambda L: L.SlidingWindowManager(0, 12), ValueError, "block_size"),
        (lambda L: L.SlidingWindowManager(8, 0), ValueError, "sliding_window"),
        (lambda L: L.SlidingWindowManager(8, -3), ValueError, "sliding_window"),
        (lambda L: L.SlidingWindowManager(8, 2**31), ValueError, "sliding_window"),
        (lambda L: L.SlidingWindowManager(8, True), TypeError, "sliding_window"),
        (lambda L: L.SlidingWindowManager(8, 12, 100), ValueError, "live_alloc_alignment"),
        (lambda L: L.SlidingWindowManager(8, 12, -8), ValueError, "live_alloc_alignment"),
        (lambda L: L.SlidingWindowManager(8, 12, 2**31), ValueError, "live_alloc_alignment"),
        (lambda L: L.SlidingWindowManager(8, 12, "256"), TypeError, "live_alloc_alignment"),
    ],
)
def test_bad_manager_geometry_raises(
    impl: ModuleType, make: Callable[[ModuleType], object], kind: type[Exception], match: str
) -> None:
    with pytest.raises(kind, match=match):
        make(impl)


def test_extreme_manager_geometry_is_accepted(impl: ModuleType) -> None:
    m = impl.SlidingWindowManager(2**31 - 1, 2**31 - 1, 2**31 - 1)
    assert m.blocks_needed_for(impl.BlockTable(), 2**31 - 1) == 1
    assert impl.SlidingWindowManager(1, 1, 0).live_alloc_alignment == 0


# numpy < 2.3 gives numpy.bool_ an __index__, so only an explicit check keeps it out; CI runs
# these with the oldest numpy the metadata allows as well as the newest.
NUMPY_BOOLS = [np.True_, np.False_, np.bool_(1)]


@pytest.mark.parametrize("flag", NUMPY_BOOLS, ids=["True_", "False_", "bool_(1)"])
def test_numpy_bool_is_not_a_count_anywhere(impl: ModuleType, flag: object) -> None:
    w = World(impl)
    coord = impl.Coordinator([impl.GroupSpec("sliding", 8, sliding_window=12)], w.pool)
    tables = coord.new_tables()
    assert coord.acquire(tables, 40)
    calls: list[tuple[Callable[[], object], str]] = [
        (lambda: impl.BlockPool(flag), "num_blocks"),
        (lambda: impl.FullAttentionManager(flag), "block_size"),
        (lambda: impl.StateManager(flag), "block_size"),
        (lambda: impl.SlidingWindowManager(flag, 12), "block_size"),
        (lambda: impl.SlidingWindowManager(8, flag), "sliding_window"),
        (lambda: impl.SlidingWindowManager(8, 12, flag), "live_alloc_alignment"),
        (lambda: impl.GroupSpec("full", flag), "block_size"),
        (lambda: impl.GroupSpec("sliding", 8, sliding_window=flag), "sliding_window"),
        (lambda: w.pool.ref_count(flag), "page"),
        (lambda: w.live.acquire(w.pool, w.t, flag), "num_tokens"),
        (lambda: w.live.blocks_needed_for(w.t, flag), "num_tokens"),
        (lambda: w.live.blocks_needed_for_sequential(w.t, flag, 1), "first_tokens"),
        (lambda: w.live.blocks_needed_for_sequential(w.t, 1, flag), "extra_tokens"),
        (lambda: w.live.reclaim_expired(w.pool, w.t, flag), "num_computed_tokens"),
        (lambda: w.live.blocks_reclaimable_at(w.t, flag), "num_computed_tokens"),
        (lambda: coord.acquire(tables, flag), "num_tokens"),
        (lambda: coord.blocks_needed_for(tables, flag), "num_tokens"),
        (lambda: coord.blocks_needed_for_sequential(tables, flag, 1), "first_tokens"),
        (lambda: coord.reclaim_expired(tables, flag), "num_computed_tokens"),
        (lambda: impl.page_keys(list(range(16)), flag), "base_block_size"),
    ]
    before = (w.snapshot(), state(w.pool, *tables))
    for call, name in calls:
        with pytest.raises(TypeError, match=name):
            call()
    assert (w.snapshot(), state(w.pool, *tables)) == before


def test_numpy_bool_frontier_in_a_decode_step_is_rejected() -> None:
    import livetail

    pool = livetail.BlockPool(64)
    coord = livetail.Coordinator([livetail.GroupSpec("sliding", 8, sliding_window=12)], pool)
    tables = coord.new_tables()
    assert coord.acquire(tables, 20)
    before = state(pool, *tables)
    with pytest.raises(TypeError, match="num_computed_tokens"):
        coord.decode_step([tables], [np.True_])
    assert state(pool, *tables) == before


CONSTRUCTOR_ERRORS: list[tuple[Callable[[Any], Any], str]] = [
    (lambda m: m.BlockPool("x"), "num_blocks"),
    (lambda m: m.BlockPool(8, retention="x"), "retention"),
    (lambda m: m.BlockPool(8, retention=1), "retention"),
    (lambda m: m.BlockPool(8, events="yes"), "events"),
    (lambda m: m.HostPool("x"), "num_blocks"),
    (lambda m: m.HostPool(8, events="x"), "events"),
    (lambda m: m.GroupSpec(3, 4), "kind"),
    (lambda m: m.GroupSpec("full", "x"), "block_size"),
    (lambda m: m.GroupSpec("sliding", 4, "w"), "sliding_window"),
    (lambda m: m.GroupSpec("sliding", 4, 4, "x"), "live_tail_alloc"),
    (lambda m: m.Coordinator("x", m.BlockPool(8)), "specs"),
    (lambda m: m.Coordinator([m.GroupSpec("full", 4), 3], m.BlockPool(8)), r"specs\[(i|1)\]"),
    (lambda m: m.Coordinator([m.GroupSpec("full", 4)], "x"), "pool"),
    (lambda m: m.Coordinator([m.GroupSpec("full", 4)], m.HostPool(8)), "pool"),
    (lambda m: m.Coordinator([m.GroupSpec("full", 4)], m.BlockPool(8), "h"), "host"),
]


@pytest.mark.parametrize(("make", "name"), CONSTRUCTOR_ERRORS)
def test_constructor_type_errors_name_the_argument(
    impl: ModuleType, make: Callable[[Any], Any], name: str
) -> None:
    with pytest.raises(TypeError, match=name) as e:
        make(impl)
    assert "incompatible function arguments" not in str(e.value)
