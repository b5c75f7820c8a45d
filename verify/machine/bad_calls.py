"""Bad calls of the differential machine: each expects one exception type and no change.

The op ``bad`` names an entry of ``BAD_CALLS`` (docs/traces.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..trace import Geometry
from .side import Side, State


@dataclass(frozen=True)
class BadCall:
    expect: str
    applicable: Callable[[State, Geometry, int, int], bool]
    run: Callable[[Side, int, int], Any]


def _always(s: State, geo: Geometry, r: int, g: int) -> bool:
    return True


def _bound(s: State, geo: Geometry, r: int, g: int) -> bool:
    return s.table(r, g).bound


def _any_bound(s: State, geo: Geometry, r: int, g: int) -> bool:
    return any(t.bound for t in s.tables[r])


def _any_owned(s: State, geo: Geometry, r: int, g: int) -> bool:
    """A table of r was bound by the coordinator: another coordinator must reject it."""
    return any(s.owned[r])


def _two_groups(s: State, geo: Geometry, r: int, g: int) -> bool:
    return len(geo.groups) >= 2


def _other_size(geo: Geometry, g: int) -> int:
    return geo.groups[g].block_size + 1


def _max_extent(side: Side, r: int) -> int:
    return max(int(t.extent) for t in side.tables[r])


BAD_CALLS: dict[str, BadCall] = {
    "acquire-negative": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.acquire(s.tables[r], -1)
    ),
    "acquire-bool": BadCall(
        "TypeError", _always, lambda s, r, g: s.coord.acquire(s.tables[r], True)
    ),
    "acquire-float": BadCall(
        "TypeError", _always, lambda s, r, g: s.coord.acquire(s.tables[r], 1.5)
    ),
    "acquire-past-int32": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.acquire(s.tables[r], 2**31)
    ),
    "acquire-far-past-int32": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.acquire(s.tables[r], 2**40)
    ),
    "needed-negative": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.blocks_needed_for(s.tables[r], -1)
    ),
    "needed-past-int32": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.blocks_needed_for(s.tables[r], 2**31)
    ),
    "sequential-negative": BadCall(
        "ValueError",
        _always,
        lambda s, r, g: s.coord.blocks_needed_for_sequential(s.tables[r], 1, -1),
    ),
    "sequential-bool": BadCall(
        "TypeError",
        _always,
        lambda s, r, g: s.coord.blocks_needed_for_sequential(s.tables[r], False, 1),
    ),
    "sequential-past-int32": BadCall(
        "ValueError",
        _always,
        lambda s, r, g: s.coord.blocks_needed_for_sequential(s.tables[r], 2**30, 2**30),
    ),
    "reclaim-past-extent": BadCall(
        "ValueError",
        _always,
        lambda s, r, g: s.coord.reclaim_expired(s.tables[r], _max_extent(s, r) + 1),
    ),
    "reclaim-negative": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.reclaim_expired(s.tables[r], -1)
    ),
    "tables-too-few": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.acquire(s.tables[r][:-1], 1)
    ),
    "tables-too-many": BadCall(
        "ValueError",
        _always,
        lambda s, r, g: s.coord.acquire([*s.tables[r], s.mod.BlockTable()], 1),
    ),
    "tables-duplicate": BadCall(
        "ValueError",
        _two_groups,
        lambda s, r, g: s.coord.acquire([s.tables[r][0], *s.tables[r][:-1]], 1),
    ),
    "tables-not-tables": BadCall(
        "TypeError", _always, lambda s, r, g: s.coord.acquire([None] * len(s.tables[r]), 1)
    ),
    "free-too-few-tables": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.free(s.tables[r][:-1])
    ),
    "coordinator-foreign-pool": BadCall(
        "ValueError", _any_bound, lambda s, r, g: s.other_coord.acquire(s.tables[r], 1)
    ),
    "coordinator-twin-free": BadCall(
        "ValueError", _any_owned, lambda s, r, g: s.twin_coord.free(s.tables[r])
    ),
    "coordinator-twin-acquire": BadCall(
        "ValueError", _any_owned, lambda s, r, g: s.twin_coord.acquire(s.tables[r], 1)
    ),
    "acquire-foreign-pool": BadCall(
        "ValueError",
        _bound,
        lambda s, r, g: s.managers[g].acquire(s.other_pool, s.tables[r][g], 1),
    ),
    "acquire-zero-foreign-pool": BadCall(
        "ValueError",
        _bound,
        lambda s, r, g: s.managers[g].acquire(s.other_pool, s.tables[r][g], 0),
    ),
    "reclaim-foreign-pool": BadCall(
        "ValueError",
        _bound,
        lambda s, r, g: s.managers[g].reclaim_expired(s.other_pool, s.tables[r][g], 0),
    ),
    "free-foreign-pool": BadCall(
        "ValueError", _bound, lambda s, r, g: s.managers[g].free(s.other_pool, s.tables[r][g])
    ),
    "acquire-page-size-mismatch": BadCall(
        "ValueError",
        _bound,
        lambda s, r, g: s.mod.FullAttentionManager(_other_size(s.geometry, g)).acquire(
            s.pool, s.tables[r][g], 1
        ),
    ),
    "needed-page-size-mismatch": BadCall(
        "ValueError",
        _bound,
        lambda s, r, g: s.mod.FullAttentionManager(_other_size(s.geometry, g)).blocks_needed_for(
            s.tables[r][g], 1
        ),
    ),
    "reclaimable-past-extent": BadCall(
        "ValueError",
        _always,
        lambda s, r, g: s.managers[g].blocks_reclaimable_at(
            s.tables[r][g], int(s.tables[r][g].extent) + 1
        ),
    ),
    "reclaimable-uncached-not-bool": BadCall(
        "TypeError",
        _always,
        lambda s, r, g: s.managers[g].blocks_reclaimable_at(s.tables[r][g], 0, 1),
    ),
    "group-acquire-negative": BadCall(
        "ValueError",
        _always,
        lambda s, r, g: s.managers[g].acquire(s.pool, s.tables[r][g], -1),
    ),
    "group-acquire-not-a-table": BadCall(
        "TypeError", _always, lambda s, r, g: s.managers[g].acquire(s.pool, None, 1)
    ),
    "pool-zero-blocks": BadCall("ValueError", _always, lambda s, r, g: s.mod.BlockPool(0)),
    "pool-bool-blocks": BadCall("TypeError", _always, lambda s, r, g: s.mod.BlockPool(True)),
    "spec-sliding-without-window": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.GroupSpec("sliding", 8)
    ),
    "spec-full-with-window": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.GroupSpec("full", 8, 4)
    ),
    "spec-full-live-tail": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.GroupSpec("full", 8, None, True)
    ),
    "spec-state-checkpoints-without-live-tail": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.GroupSpec("state", 8, checkpoints=True)
    ),
    "state-manager-checkpoints-without-live-tail": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.StateManager(8, checkpoints=True)
    ),
    "spec-unknown-kind": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.GroupSpec("mamba", 8)
    ),
    "spec-zero-block-size": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.GroupSpec("full", 0)
    ),
    "manager-misaligned": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.SlidingWindowManager(8, 12, 12)
    ),
    "manager-zero-window": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.SlidingWindowManager(8, 0)
    ),
    "coordinator-no-groups": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.Coordinator([], s.pool)
    ),
    "coordinator-alignment-off-lcm": BadCall(
        "ValueError",
        _always,
        lambda s, r, g: s.mod.Coordinator(
            [s.mod.GroupSpec("full", 8)], s.pool, alignment=12
        ),
    ),
}
