"""Procedural properties Z3 cannot see through (the spec's loops): bounded, exhaustive.

Each theorem runs the spec's own classes (``livetail.spec``) over every configuration inside
the stated bounds and checks the property on each; a failure is a concrete configuration,
turned into a trace of coordinator or group operations.  Verdict ``proved`` here means
"proved for every configuration within the bounds" and the statement says so.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from livetail import spec
from livetail.spec import geometry as geo

from ._prefix_world import _clone
from ._prover import Prover, Values
from ._registry import theorem
from ._traces import ops_trace

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


def _prepared(g: Group, prior: int, free: int) -> tuple[Any, Any, Any, int]:
    """A pool with exactly `free` free pages after a table acquired `prior` tokens."""
    mgr = g.manager()
    probe = spec.BlockTable()
    take = mgr.blocks_needed_for(probe, prior)
    pool = spec.BlockPool(1 + take + free)
    table = spec.BlockTable()
    assert mgr.acquire(pool, table, prior)
    return mgr, pool, table, take


# --- acquire: all-or-nothing, exact take ----------------------------------------------------


def _acquire_search(max_b: int, max_w: int, max_m: int) -> tuple[int, Values | None]:
    cases = 0
    for g in every_group(max_b, max_w, max_m):
        for prior in range(0, 2 * g.B + 2):
            mgr, _, table, _ = _prepared(g, prior, 0)
            prepared: dict[int, tuple[Any, Any, Any, int]] = {}  # by free pages, copied
            for n in range(0, 3 * g.B + 3):
                need = mgr.blocks_needed_for(table, n)
                for free in sorted({max(need - 1, 0), need, need + 1}):
                    cases += 1
                    if free not in prepared:
                        prepared[free] = _prepared(g, prior, free)
                    problem = _acquire_case(g, n, free, prepared[free])
                    if problem:
                        return cases, {
                            **g.describe(),
                            "prior": prior,
                            "n": n,
                            "free": free,
                            "problem": problem,
                        }
    return cases, None


def _acquire_case(g: Group, n: int, free: int, prepared: tuple[Any, Any, Any, int]) -> str:
    mgr, pool, table, _ = prepared
    pool, table = _fork(pool, table)
    need = mgr.blocks_needed_for(table, n)
    before = Snapshot.of(pool, table)
    first, extent = len(table.slots), table.extent
    ok = mgr.acquire(pool, table, n)
    if ok != (need <= free):
        return f"acquire returned {ok} with need {need} and {free} free"
    if not ok:
        after = Snapshot.of(pool, table)
        return "" if after == before else "a failed acquire changed the pool or the table"
    taken = free - pool.num_free
    if taken != need:
        return f"acquire took {taken} pages, blocks_needed_for said {need}"
    new = geo.new_slots(before.tail, g.B, n)
    if len(table.slots) != first + new or table.tail_available != geo.tail_after(
        before.tail, g.B, n
    ):
        return "acquire left the wrong shape"
    if table.extent != extent + n or table.slots[:first] != before.slots:
        return "acquire changed existing slots or grew the extent by the wrong amount"
    real = [p for p in table.slots[first:] if p != 0]
    if real != before.queue[: len(real)]:
        return "new pages are not the front of the free queue in ascending slot order"
    return ""


def _acquire_traces(
    verdict: str, found: Sequence[tuple[str, Values]], variant: str | None
) -> list[dict[str, Any]]:
    out = []
    for _step, v in found:
        g = Group(v["kind"], v["B"], v["W"], v["m"])
        mgr, _, _, take = _prepared(g, v["prior"], 0)
        ops = [{"op": "group_acquire", "request": 0, "group": 0, "tokens": v["prior"]}]
        ops.append({"op": "group_acquire", "request": 0, "group": 0, "tokens": v["n"]})
        out.append(
            ops_trace(
                g.groups(),
                1 + take + v["free"],
                1,
                ops[0 if v["prior"] else 1 :],
                f"acquire-all-or-nothing-bounded {verdict}: {v['problem']}",
                "acquire-all-or-nothing-bounded",
                variant,
                v,
            )
        )
    return out


@theorem(
    "acquire-all-or-nothing-bounded",
    """Bounded, exhaustive over the spec's classes: for every manager kind with B <= 3,
    W <= 5, m <= 3 (and A = 0), every table left by a prior acquire of up to 2B+1 tokens, every
    n <= 3B+2 and every free-page count in {need-1, need, need+1}: acquire(n) succeeds exactly
    when blocks_needed_for(n) <= free pages; a success takes exactly blocks_needed_for(n)
    pages, the front of the free queue, in ascending slot order, and leaves the shape
    (new_slots, tail_after); a failure changes neither the pool nor the table.""",
    """acquire is all-or-nothing and takes what blocks_needed_for promised: an engine that
    checks the count first never sees a half-allocated table.""",
    kills=("acquire-before-check",),
    bounded=True,
    trace=_acquire_traces,
    rlimit=2_000_000,
)
def acquire_all_or_nothing(p: Prover) -> None:
    p.exhaust("every configuration within the bounds", lambda: _acquire_search(MAX_B, 5, 3))


# --- the sequential charge with reclaims in between -------------------------------------------


def _sequential_search() -> tuple[int, Values | None]:
    """Each table, chunk acquire and reclaim is run once and branched by copies: what an
    operation does depends only on the pool and table it starts from."""
    cases = 0
    for g in every_group(MAX_B, 4, 3):
        for prior in range(0, g.B + 2):
            mgr, pool, table, _ = _prepared(g, prior, 64)
            for first in range(0, 2 * g.B + 2):
                chunked = _fork(pool, table)
                chunk = _Chunk(mgr, table, first, mgr.acquire(*chunked, first), pool, chunked)
                for extra in range(0, g.B + 2):
                    for f in [None, *range(0, table.extent + first + 1)]:
                        cases += 1
                        problem = _sequential_case(chunk, extra, f)
                        if problem:
                            return cases, {
                                **g.describe(),
                                "prior": prior,
                                "first": first,
                                "extra": extra,
                                "reclaim_at": f,
                                "problem": problem,
                            }
    return cases, None


class _Chunk:
    """A prepared table, and the same after acquire(first) succeeded or not (`ok`), with
    the reclaims after it by frontier (None: no reclaim), each run once."""

    def __init__(
        self, mgr: Any, table: Any, first: int, ok: bool, pool: Any, chunked: tuple[Any, Any]
    ) -> None:
        self.mgr, self.table, self.first, self.ok = mgr, table, first, ok
        self.chunk_need = mgr.blocks_needed_for(table, first)
        self.take1 = pool.num_free - chunked[0].num_free
        self.reclaimed: dict[int | None, tuple[int, Any, Any]] = {None: (0, *chunked)}

    def reclaim(self, f: int | None) -> tuple[int, Any, Any]:
        """(pages released, pool, table) after reclaim_expired(f) on the chunked table."""
        if f not in self.reclaimed:
            pool, table = _fork(*self.reclaimed[None][1:])
            self.reclaimed[f] = (self.mgr.reclaim_expired(pool, table, f), pool, table)
        return self.reclaimed[f]


def _sequential_case(chunk: _Chunk, extra: int, f: int | None) -> str:
    mgr = chunk.mgr
    charge = mgr.blocks_needed_for_sequential(chunk.table, chunk.first, extra)
    chunk_need = chunk.chunk_need
    if not chunk.ok:
        return "chunk acquire failed with enough pages free"
    take1 = chunk.take1
    released, pool, table = chunk.reclaim(f)
    pool, table = _fork(pool, table)
    free1 = pool.num_free
    if not mgr.acquire(pool, table, extra):
        return "decode acquire failed with enough pages free"
    take2 = free1 - pool.num_free
    peak = max(take1, take1 - released + take2)
    if take1 + take2 != charge:
        return f"the acquires took {take1} + {take2}, sequential charge {charge}"
    if charge - chunk_need != take2 or charge - chunk_need < 0:
        return f"decode reserve {charge - chunk_need}, decode took {take2}"
    if peak > charge:
        return f"peak pinned {peak} above the charge {charge}"
    return ""


def _sequential_traces(
    verdict: str, found: Sequence[tuple[str, Values]], variant: str | None
) -> list[dict[str, Any]]:
    out = []
    for _, v in found:
        g = Group(v["kind"], v["B"], v["W"], v["m"])
        ops: list[dict[str, Any]] = []
        if v["prior"]:
            ops.append({"op": "acquire", "request": 0, "tokens": v["prior"]})
        admit: dict[str, Any] = {
            "op": "admit",
            "request": 0,
            "chunk": v["first"],
            "reserve": v["extra"],
        }
        if v["reclaim_at"] is not None:
            admit["reclaim_between"] = True
        ops.append(admit)
        mgr, _, _, take = _prepared(g, v["prior"], 0)
        out.append(
            ops_trace(
                g.groups(),
                1 + 4 * (take + v["first"] + v["extra"] + 2),
                1,
                ops,
                f"sequential-charge-with-reclaims-bounded {verdict}: {v['problem']}",
                "sequential-charge-with-reclaims-bounded",
                variant,
                v,
            )
        )
    return out


@theorem(
    "sequential-charge-with-reclaims-bounded",
    """Bounded, exhaustive over the spec's classes: for every manager kind with B <= 3,
    W <= 4, m <= 3 (and A = 0), every table left by a prior acquire of up to B+1 tokens, every
    first <= 2B+1, extra <= B+1, and either no reclaim or one reclaim_expired at any frontier
    up to the extent between the two acquires: acquire(first) and acquire(extra) take exactly
    blocks_needed_for_sequential(first, extra) pages together, the decode acquire takes
    exactly the charge minus blocks_needed_for(first) (never negative), and the pages pinned
    never exceed the charge.""",
    """The executable acquire and reclaim agree with the closed-form admission charge, with
    reclaims interleaved the way an engine does them.""",
    kills=("combined-charge",),
    bounded=True,
    cost=3,
    trace=_sequential_traces,
    rlimit=2_000_000,
)
def sequential_with_reclaims(p: Prover) -> None:
    p.exhaust("every configuration within the bounds", _sequential_search)


# --- reclaim ---------------------------------------------------------------------------------


def _check_reclaim(
    mgr: Any, pool: Any, table: Any, f: int, repeated: dict[Any, int] | None = None
) -> str:
    """Reclaim at f and check semantics section 5 and property 7.5; '' when all hold.

    `repeated` maps a state (pool and table) to the greatest frontier up to which repeats
    on it were checked: a repeat depends only on the state and its frontier, so the repeats
    at or below it are not run again (all of them are when one of the others fails)."""
    B = mgr.block_size
    predicted = mgr.blocks_reclaimable_at(table, f)
    before = Snapshot.of(pool, table)
    n = len(table.slots)
    released = mgr.reclaim_expired(pool, table, f)
    b = int(geo.reclaim_bound(f, n, mgr._window(), B)) if mgr.kind != "full" else 0
    band = range(before.floor, max(before.floor, b))
    freed = [before.slots[s] for s in band if before.slots[s] != 0]
    if released != predicted or released != len(freed):
        return (
            f"released {released}, blocks_reclaimable_at said {predicted}, band held {len(freed)}"
        )
    left = [s for s in range(b) if table.slots[s] != 0]
    if left:
        return f"real pages left below the bound {b} at slots {left}"
    if table.reclaim_floor != max(before.floor, b):
        return f"floor {table.reclaim_floor}, expected {max(before.floor, b)}"
    expected = [0 if s in band else p for s, p in enumerate(before.slots)]
    if table.slots != expected or table.tail_available != before.tail:
        return "reclaim changed slots outside the band or the shape"
    if pool.free_queue() != freed[::-1] + before.queue:
        return "released (unnamed) pages did not re-enter the queue's front, last slot first"
    if pool.num_free + pool.num_pinned != pool.num_blocks - 1:
        return "free + pinned != num_blocks - 1"
    snap = Snapshot.of(pool, table)
    state = (*snap.key(), tuple(table.runs), tuple(pool._name_of.items()))
    done = -1 if repeated is None else repeated.get(state, -1)
    again = [mgr.reclaim_expired(pool, table, f2) for f2 in range(f, done, -1)]
    if any(again) or Snapshot.of(pool, table) != snap:
        again += [mgr.reclaim_expired(pool, table, f2) for f2 in range(min(f, done), -1, -1)]
        return f"a repeat reclaim at a frontier <= {f} freed {again} or changed state"
    if repeated is not None:
        repeated[state] = max(f, done)
    return ""


def _fork(pool: Any, table: Any) -> tuple[Any, Any]:
    """An independent copy of a pool and a table bound to it (to branch a run)."""
    p = _clone(pool)
    return p, _clone(table, pool, p)


def _reachable_search() -> tuple[int, Values | None]:
    """Tables reached by acquire a, reclaim f1, acquire b, reclaim f2 (live-tail groups).

    Each prefix of the run is computed and checked once and branched by copies: what a
    step does and its check's verdict depend only on the pool and table it starts from."""
    cases = 0
    for g in every_group(2, 4, 3):
        if g.kind == "full":
            continue
        mgr = g.manager()
        repeated: dict[Any, int] = {}
        for a in range(1, 3 * g.B + 1):
            pool = spec.BlockPool(64)
            table = spec.BlockTable()
            mgr.acquire(pool, table, a)
            after_f1: dict[int, tuple[str, Any, Any]] = {}
            for b in range(0, 2 * g.B + 1):
                for f1 in range(0, a + 1):
                    if f1 not in after_f1:
                        p1, t1 = _fork(pool, table)
                        after_f1[f1] = (_check_reclaim(mgr, p1, t1, f1, repeated), p1, t1)
                    problem, p1, t1 = after_f1[f1]
                    if not problem:
                        p2, t2 = _fork(p1, t1)
                        mgr.acquire(p2, t2, b)
                    for f2 in range(f1, a + b + 1):
                        cases += 1
                        if not problem:
                            p3, t3 = _fork(p2, t2)
                            problem = _check_reclaim(mgr, p3, t3, f2, repeated)
                        if problem:
                            return cases, {
                                **g.describe(),
                                "a": a,
                                "f1": f1,
                                "b": b,
                                "f2": f2,
                                "problem": problem,
                            }
    return cases, None


def _unchecked(mgr: Any) -> Any:
    """The manager with its run-description checks off, for hand-built hole patterns.

    No run of acquires builds most of these tables (a plain sliding group has no holes above
    its floor), so the concrete spec's check that slots agree with their runs would reject
    them; what this search covers is the reclaim loop itself over every pattern.
    """
    cls = type(mgr)
    unchecked = type(
        f"Unchecked{cls.__name__}",
        (cls,),
        {"_check_runs": lambda *a: None, "_check_released": lambda *a: None},
    )
    mgr.__class__ = unchecked
    return mgr


def _pattern_search(max_slots: int, max_w: int) -> tuple[int, Values | None]:
    """Every hole pattern above every floor, every tail room, every frontier."""
    cases = 0
    for B in range(1, MAX_B + 1):
        kinds = [Group("state", B), Group("full", B)]
        kinds += [Group("sliding", B, W, 0) for W in range(1, max_w + 1)]
        for g in kinds:
            mgr = _unchecked(g.manager())
            repeated: dict[Any, int] = {}
            for n in range(0, max_slots + 1):
                for floor in range(0, n + 1):
                    for bits in range(1 << (n - floor)):
                        for tail in range(0, B if n else 1):
                            extent = n * B - tail
                            pool0 = spec.BlockPool(n + 2)
                            table0 = spec.BlockTable()
                            mgr.acquire(pool0, table0, extent)  # n real slots, bound
                            pool0._release([p for p in table0.slots if p])
                            table0.slots = [0] * n
                            for s in range(floor, n):
                                if bits >> (s - floor) & 1:
                                    table0.slots[s] = pool0._allocate(1)[0]  # type: ignore[index]
                            table0.reclaim_floor = floor
                            for f in range(0, extent + 1):
                                cases += 1
                                pool, table = _fork(pool0, table0)
                                problem = _check_reclaim(mgr, pool, table, f, repeated)
                                if problem:
                                    real = [s for s in range(n) if table.slots[s]]
                                    return cases, {
                                        **g.describe(),
                                        "slots": n,
                                        "floor": floor,
                                        "pattern": bits,
                                        "tail": tail,
                                        "frontier": f,
                                        "real_after": real,
                                        "problem": problem,
                                    }
    return cases, None


def _reclaim_traces(
    verdict: str, found: Sequence[tuple[str, Values]], variant: str | None
) -> list[dict[str, Any]]:
    out = []
    for _, v in found:
        if "a" not in v:
            continue  # a hole pattern set by hand: not reachable by operations
        g = Group(v["kind"], v["B"], v["W"], v["m"])
        ops = [
            {"op": "group_acquire", "request": 0, "group": 0, "tokens": v["a"]},
            {"op": "group_reclaim", "request": 0, "group": 0, "frontier": v["f1"]},
            {"op": "group_acquire", "request": 0, "group": 0, "tokens": v["b"]},
            {"op": "group_reclaim", "request": 0, "group": 0, "frontier": v["f2"]},
        ]
        out.append(
            ops_trace(
                g.groups(),
                64,
                1,
                ops,
                f"reclaim-bounded {verdict}: {v['problem']}",
                "reclaim-bounded",
                variant,
                v,
            )
        )
    return out


@theorem(
    "reclaim-bounded",
    """Bounded, exhaustive over the spec's classes: (1) every table a live-tail, plain sliding or
    state group with B <= 2, W <= 4, m <= 3 reaches by acquire(a <= 3B), reclaim(f1),
    acquire(b <= 2B), reclaim(f2); (2) every table of up to 6 slots (5 with livetail verify
    --quick) with every hole pattern above every reclaim floor, every tail room, B <= 3, W
    <= 3 (sliding, state and full groups), at every frontier up to the extent. After
    reclaim_expired(f) no real page is below min(slid_out(f), slots); it released exactly
    what blocks_reclaimable_at(f) predicted (no page is shared), released in ascending slot
    order (so, unnamed, they lead the queue last slot first: the retention rule), moved the
    floor to the bound, changed nothing else, kept free + pinned = num_blocks - 1; and a
    repeat at f or any earlier frontier frees nothing and changes nothing.""",
    """reclaim_expired gives back every expired page, whatever holes live tail left in the
    band, predicts its own result, and is idempotent: an engine can call it after every
    chunk.""",
    kills=("reclaim-stops-at-hole",),
    bounded=True,
    cost=10,
    trace=_reclaim_traces,
    rlimit=2_000_000,
)
def reclaim_bounded(p: Prover) -> None:
    p.exhaust("(1) tables reached by acquire, reclaim, acquire, reclaim", _reachable_search)
    slots = 5 if p.quick else 6  # --quick: 36,275 cases instead of 90,885
    p.exhaust(
        f"(2) every hole pattern above every floor, up to {slots} slots",
        lambda: _pattern_search(slots, 3),
    )


# --- coordinator -------------------------------------------------------------------------------

COORDINATORS: list[list[dict[str, Any]]] = [
    [{"kind": "full", "block_size": 2}],
    [
        {"kind": "sliding", "block_size": 2, "sliding_window": 3, "live_tail_alloc": True},
        {"kind": "full", "block_size": 4},
    ],
    [
        {"kind": "sliding", "block_size": 1, "sliding_window": 2, "live_tail_alloc": True},
        {"kind": "full", "block_size": 3},
        {"kind": "state", "block_size": 1},
    ],
    [{"kind": "sliding", "block_size": 2, "sliding_window": 3}, {"kind": "state", "block_size": 2}],
    [
        {"kind": "sliding", "block_size": 1, "sliding_window": 1, "live_tail_alloc": True},
        {"kind": "sliding", "block_size": 2, "sliding_window": 5, "live_tail_alloc": True},
        {"kind": "full", "block_size": 4},
    ],
    [
        {"kind": "sliding", "block_size": 3, "sliding_window": 4, "live_tail_alloc": True},
        {"kind": "sliding", "block_size": 2, "sliding_window": 2},
    ],
]


def _coordinator(groups: Sequence[dict[str, Any]], num_blocks: int) -> Any:
    specs = [
        spec.GroupSpec(
            g["kind"], g["block_size"], g.get("sliding_window"), g.get("live_tail_alloc", False)
        )
        for g in groups
    ]
    return spec.Coordinator(specs, spec.BlockPool(num_blocks))


def _coordinator_search() -> tuple[int, Values | None]:
    cases = 0
    for index, groups in enumerate(COORDINATORS):
        lcm = _coordinator(groups, 2).lcm_block_size
        for prior in range(0, lcm + 2):
            for n in range(0, 2 * lcm + 3):
                probe = _coordinator(groups, 1 << 12)
                tables = probe.new_tables()
                probe.acquire(tables, prior)
                taken = probe.pool.num_pinned
                need = sum(m.blocks_needed_for(t, n) for m, t in zip(probe.managers, tables))
                for free in sorted({max(need - 1, 0), need, need + 1}):
                    cases += 1
                    problem = _coordinator_case(groups, prior, n, 1 + taken + free, need)
                    if problem:
                        return cases, {
                            "coordinator": index,
                            "prior": prior,
                            "n": n,
                            "num_blocks": 1 + taken + free,
                            "problem": problem,
                        }
    return cases, None


def _coordinator_case(
    groups: Sequence[dict[str, Any]], prior: int, n: int, nb: int, need: int
) -> str:
    coord = _coordinator(groups, nb)
    tables = coord.new_tables()
    if not coord.acquire(tables, prior):
        return "prior acquire failed"
    pool = coord.pool
    free = pool.num_free
    before = [(list(t.slots), t.tail_available, t.reclaim_floor) for t in tables]
    queue, refs = pool.free_queue(), pool.ref_counts()
    summed = coord.blocks_needed_for(tables, n)
    if summed != need:
        return f"coordinator blocks_needed_for {summed}, sum over groups {need}"
    ok = coord.acquire(tables, n)
    if ok != (need <= free):
        return f"acquire returned {ok} with summed need {need} and {free} free"
    after = [(list(t.slots), t.tail_available, t.reclaim_floor) for t in tables]
    if not ok:
        unchanged = after == before and pool.free_queue() == queue and pool.ref_counts() == refs
        return "" if unchanged else "a failed coordinator acquire changed a table or the pool"
    if free - pool.num_free != need:
        return f"took {free - pool.num_free} pages, summed need {need}"
    new_pages = [p for (s0, _, _), t in zip(before, tables) for p in t.slots[len(s0) :] if p]
    if new_pages != queue[: len(new_pages)]:
        return "pages were not taken from the queue front, groups in index order"
    return ""


def _coordinator_traces(
    verdict: str, found: Sequence[tuple[str, Values]], variant: str | None
) -> list[dict[str, Any]]:
    out = []
    for _, v in found:
        ops = [
            {"op": "acquire", "request": 0, "tokens": v["prior"]},
            {"op": "acquire", "request": 0, "tokens": v["n"]},
        ]
        out.append(
            ops_trace(
                COORDINATORS[v["coordinator"]],
                v["num_blocks"],
                1,
                ops[0 if v["prior"] else 1 :],
                f"coordinator-acquire-iff-fits-bounded {verdict}: {v['problem']}",
                "coordinator-acquire-iff-fits-bounded",
                variant,
                v,
            )
        )
    return out


@theorem(
    "coordinator-acquire-iff-fits-bounded",
    """Bounded, exhaustive over the spec's classes: for six coordinators mixing full, plain
    sliding, live-tail sliding and state groups (page sizes 1 to 4, lcm up to 4), every table
    set left by a prior acquire of up to lcm+1 tokens, every n <= 2*lcm+2 and every free-page
    count in {need-1, need, need+1}: the coordinator's blocks_needed_for(n) is the sum over
    groups, and acquire(n) succeeds exactly when that sum fits the free pages; a success takes
    exactly the sum (queue front, groups in index order); a failure changes no table and not
    the pool.""",
    """Admission for a multi-group request is one comparison: summed need against free
    pages; a coordinator acquire never leaves some groups grown and others not.""",
    bounded=True,
    trace=_coordinator_traces,
    rlimit=2_000_000,
)
def coordinator_acquire(p: Prover) -> None:
    p.exhaust("every configuration within the bounds", _coordinator_search)
