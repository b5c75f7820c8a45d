"""Step planning (semantics section 9): one exact plan for a step of many requests.

A step acquires each scheduled request's new tokens; acquires of distinct requests do not
interact, so a step's need is the sum of each request's blocks_needed_for. The plan steps
the longest priority prefix that fits once every request after it is preempted (freed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import runs
from ._args import count

if TYPE_CHECKING:
    from .coordinator import Coordinator
    from .table import BlockTable

# What a plan remembers of a table to tell that it changed: slots, tail, floor, pool.
Shape = tuple[int, int, int, int]


def _shape(t: BlockTable) -> Shape:
    return (len(t.slots), t.tail_available, t.reclaim_floor, id(t.pool) if t.pool else 0)


class StepPlan:
    """Requests [0, stepped) step, [stepped, stepped + preempted) are freed."""

    def __init__(
        self,
        coordinator: Coordinator,
        requests: list[tuple[list[BlockTable], int]],
        stepped: int,
        pages_taken: int,
        pages_released: int,
        free_after: int,
        top_fits: bool,
    ) -> None:
        self._coordinator = coordinator
        self._requests = requests
        self._version = coordinator.pool._version
        self._shapes = [[_shape(t) for t in ts] for ts, _ in requests]
        self._applied = False
        self.stepped = stepped
        self.preempted = len(requests) - stepped
        self.pages_taken = pages_taken
        self.pages_released = pages_released
        self.free_after = free_after
        self.top_fits = top_fits

    def __repr__(self) -> str:
        return (
            f"StepPlan(stepped={self.stepped}, preempted={self.preempted}, "
            f"pages_taken={self.pages_taken}, pages_released={self.pages_released}, "
            f"free_after={self.free_after}, top_fits={self.top_fits})"
        )


def _check_requests(c: Coordinator, requests: object) -> list[tuple[list[BlockTable], int]]:
    if not isinstance(requests, (list, tuple)):
        raise TypeError("requests must be a list of (tables, num_tokens) pairs")
    out: list[tuple[list[BlockTable], int]] = []
    seen: set[int] = set()
    counts = []
    for i, r in enumerate(requests):  # every pair and count first, then the tables (as native)
        if not isinstance(r, (list, tuple)) or len(r) != 2:
            raise TypeError(f"requests[{i}] must be a (tables, num_tokens) pair")
        counts.append(count(f"requests[{i}] num_tokens", r[1]))
    for i, (r, n) in enumerate(zip(requests, counts)):
        try:
            ts = c._check_tables(r[0])
        except ValueError as e:
            raise ValueError(f"requests[{i}]: {e}") from None
        for m, t in zip(c._managers, ts):
            m._check_fits(t, "num_tokens", n)
            if id(t) in seen:
                raise ValueError(f"requests[{i}]: a table appears in two requests")
            seen.add(id(t))
        out.append((ts, n))
    return out


def plan_step(c: Coordinator, requests: object) -> StepPlan:
    """Read-only: the greatest k with sum(need_i, i < k) <= free + released({k..n-1})."""
    rs = _check_requests(c, requests)
    pool = c.pool
    needs = [sum(m.blocks_needed_for(t, n) for m, t in zip(c._managers, ts)) for ts, n in rs]
    free = pool.num_free
    # released_from(k): pages preempting requests k.. puts back. The plan asks it for
    # k = n, n-1, ... down to its answer, so only the preempted requests' slots are scanned.
    held: dict[int, int] = {}  # page -> references held by the scanned suffix
    first = len(rs)  # the suffix scanned so far starts here
    released = 0  # the pages it releases

    def released_from(k: int) -> int:
        nonlocal first, released
        while first > k:
            first -= 1
            for t in rs[first][0]:
                for p in t.slots:
                    if p:
                        held[p] = held.get(p, 0) + 1
                        if held[p] == pool._ref[p]:
                            released += 1
        return released

    k = int(runs.plan_stepped(needs, free, released_from))
    prefix, back = sum(needs[:k]), released_from(k)
    return StepPlan(c, rs, k, prefix, back, free + back - prefix, k > 0 or not rs)


def apply_step(c: Coordinator, plan: object) -> None:
    """Free the preempted requests (lowest priority first), then acquire for the stepped."""
    if not isinstance(plan, StepPlan):
        raise TypeError(f"plan must be a StepPlan, not {type(plan).__name__}")
    if plan._coordinator is not c:
        raise ValueError("plan comes from another coordinator")
    if plan._applied:
        raise ValueError("plan was applied already")
    stale = plan._version != c.pool._version or any(
        _shape(t) != s
        for (ts, _), shapes in zip(plan._requests, plan._shapes)
        for t, s in zip(ts, shapes)
    )
    if stale:
        raise ValueError("stale plan: the pool or a table changed since plan_step; plan again")
    plan._applied = True
    for ts, _ in reversed(plan._requests[plan.stepped :]):
        c.free(ts)
    for ts, n in plan._requests[: plan.stepped]:
        ok = c.acquire(ts, n)
        assert ok, "a fresh plan's acquire failed"
