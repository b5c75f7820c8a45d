"""Group configurations and snapshots of the bounded theorems over managers and coordinators.

The bounded theorems run the spec's own classes (``livetail.spec``) over every
configuration inside stated bounds; these are the configurations (``every_group``) and the
state they compare before and after an operation (``Snapshot``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from livetail import spec

from .prefix import _clone

MAX_B = 3


@dataclass(frozen=True)
class Group:
    """One group's manager parameters: kind, B, W (None for full), m (0: live tail off)."""

    kind: str
    B: int
    W: int | None = None
    m: int = 0

    def manager(self) -> Any:
        if self.kind == "full":
            return spec.FullAttentionManager(self.B)
        if self.kind == "state":
            return spec.StateManager(self.B)
        assert self.W is not None
        return spec.SlidingWindowManager(self.B, self.W, self.m * self.B)

    def groups(self) -> list[dict[str, Any]]:
        """Coordinator groups realising this manager (group 0), fixing the lcm to m*B."""
        if self.kind != "sliding":
            return [{"kind": self.kind, "block_size": self.B}]
        g: dict[str, Any] = {"kind": "sliding", "block_size": self.B, "sliding_window": self.W}
        if self.m == 0:
            return [g]
        out = [{**g, "live_tail_alloc": True}]
        if self.m > 1:
            out.append({"kind": "full", "block_size": self.m * self.B})
        return out

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "B": self.B, "W": self.W, "m": self.m}


def every_group(max_b: int, max_w: int, max_m: int) -> Iterator[Group]:
    for B in range(1, max_b + 1):
        yield Group("full", B)
        yield Group("state", B)
        for W in range(1, max_w + 1):
            yield Group("sliding", B, W, 0)
            for m in range(1, max_m + 1):
                yield Group("sliding", B, W, m)


@dataclass
class Snapshot:
    queue: list[int]
    refs: list[int]
    slots: list[int]
    tail: int
    floor: int

    def key(self) -> tuple[Any, ...]:
        return (tuple(self.queue), tuple(self.refs), tuple(self.slots), self.tail, self.floor)

    @staticmethod
    def of(pool: Any, table: Any) -> Snapshot:
        return Snapshot(
            pool.free_queue(),
            pool.ref_counts(),
            list(table.slots),
            table.tail_available,
            table.reclaim_floor,
        )


def prepared_manager(g: Group, prior: int, free: int) -> tuple[Any, Any, Any, int]:
    """A pool with exactly `free` free pages after a table acquired `prior` tokens."""
    mgr = g.manager()
    probe = spec.BlockTable()
    take = mgr.blocks_needed_for(probe, prior)
    pool = spec.BlockPool(1 + take + free)
    table = spec.BlockTable()
    assert mgr.acquire(pool, table, prior)
    return mgr, pool, table, take


def fork(pool: Any, table: Any) -> tuple[Any, Any]:
    """An independent copy of a pool and a table bound to it (to branch a run)."""
    p = _clone(pool)
    return p, _clone(table, pool, p)
