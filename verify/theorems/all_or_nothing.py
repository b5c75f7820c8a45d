"""Section 7, property 1: acquire is all-or-nothing, for a manager and for a coordinator.

Unbounded over the executed transitions (``spec/runs.py``: ``acquire``,
``coordinator_acquire`` on symbolic states, compared with the closed form
``blocks_needed``), and bounded over the spec's own classes (every configuration inside the
stated bounds, each failure a trace of group or coordinator operations).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.spec import runs

from ..z3arith import Z3
from .prover.prover import Prover
from .prover.query import Values
from .prover.states import (
    ARITH,
    count_lemmas,
    extent,
    general,
    group,
    shape_facts,
    table,
    table_needed,
    take_lemma,
)
from .prover.symbols import Geometry, every_kind, ints, shape
from .prover.theorem import theorem
from .prover.traces import ops_trace, spec_coordinator, transition_traces
from .worlds.managers import MAX_B, Group, Snapshot, every_group, fork, prepared_manager


@theorem(
    "acquire-all-or-nothing",
    """Executes the spec's acquire (spec/runs.py) on a symbolic table of two earlier runs
    (symbolic slot counts, frontiers, tail room and reclaim floor), symbolic free pages F and
    count n, for every manager kind (full; state; sliding with A = 0; live-tail sliding with
    A = m*B, B, W, m unbounded): it succeeds iff blocks_needed_for(n) <= F; on success it
    takes exactly blocks_needed_for(n) pages (F drops by that much, the table's real pages
    grow by that much, the new shape is valid with extent + n); on failure the free count,
    slot count, tail room, reclaim floor and real pages are all unchanged. Unbounded.""",
    """acquire is all-or-nothing and takes what blocks_needed_for promised: an engine that
    checks the count first never sees a half-allocated table.""",
    kills=(
        "acquire-frontier-minus-one",
        "take-counts-holes",
        "tail-after-off-by-one",
    ),
    cost=6,
    rlimit=14_000_000,
    executes=("acquire",),
    trace=transition_traces("acquire-all-or-nothing"),
)
def acquire_all_or_nothing(p: Prover) -> None:
    for g in every_kind():
        _acquire_kind(p, g)


def _acquire_kind(p: Prover, g: Geometry) -> None:
    gr = group(g)
    facts = count_lemmas(p, g)

    def setup() -> tuple[Any, ...]:
        t, th = table(g, "", 2)
        F, n = ints("F n")
        hyps = [*g.hyps, *th, F >= 0, n >= 0]
        step = runs.acquire(F, t, n, gr, Z3)
        hyps += facts.zero(t.slots, extent(t, g) + n)
        hyps += facts.whole(t.slots, geo.new_slots(t.tail, g.B, n, Z3), extent(t, g) + n)
        return t, F, n, hyps, step, table_needed(g, t, n)

    def ok_iff() -> tuple[Any, Any]:
        t, F, n, hyps, step, need = setup()
        return step.ok == (need <= F), hyps

    def success() -> tuple[Any, Any]:
        t, F, n, hyps, step, need = setup()
        after = step.table
        return z3.Implies(
            step.ok,
            z3.And(
                step.take == need,
                step.free == F - need,
                *shape(after.slots, after.tail, g.B),
                extent(after, g) == extent(t, g) + n,
                after.floor == t.floor,
            ),
        ), hyps

    def failure() -> tuple[Any, Any]:
        t, F, n, hyps, step, need = setup()
        after = step.table
        return z3.Implies(
            z3.Not(step.ok),
            z3.And(
                step.take == 0,
                step.free == F,
                after.slots == t.slots,
                after.tail == t.tail,
                after.floor == t.floor,
                step.run.count == 0,
            ),
        ), hyps

    def pages() -> tuple[Any, Any]:
        t, F, n, hyps, step, need = setup()
        claim = runs.real_pages(step.table, gr, Z3) == runs.real_pages(t, gr, Z3) + step.take
        return claim, hyps

    general(p, g, f"[{g.label}] acquire succeeds iff blocks_needed_for(n) <= F", ok_iff)
    general(p, g, f"[{g.label}] success takes exactly blocks_needed_for(n), extent + n", success)
    general(p, g, f"[{g.label}] failure changes no field", failure)
    general(p, g, f"[{g.label}] the table's real pages grow by exactly the take", pages)


@theorem(
    "coordinator-acquire-all-or-nothing",
    """Executes the spec's coordinator acquire (spec/runs.py coordinator_acquire) over three
    groups (two live-tail sliding groups with page sizes B1, B2 and windows W1, W2, and a
    full group of page size B3, all symbolic) aligned to a symbolic common alignment L that
    is a multiple of every page size, on symbolic table shapes, free pages F and count n: it
    succeeds iff the summed blocks_needed_for(n) fits F; then every group's acquire succeeds
    and takes exactly its own blocks_needed_for(n), so together they take that sum; otherwise
    no group's slot count or tail room changes and no page is taken. Each group's executed
    acquire is compared with its blocks_needed_for(n) by a lemma (it does not prove with
    blocks_needed made unknown); the first step, ok iff the sum fits, is definitional: the
    coordinator decides by the summed query. Unbounded, for every live_count, ceil_div,
    extent, slid_out, tail_after and new_slots function (the facts about them the steps use
    are proved lemmas).""",
    """Admission for a multi-group request is one comparison: summed need against free pages;
    a coordinator acquire never leaves some groups grown and others not.""",
    kills=("coordinator-fits-strict",),
    cost=8,
    rlimit=17_000_000,
    executes=("coordinator_acquire", "acquire"),
)
def coordinator_all_or_nothing(p: Prover) -> None:
    L, k1, k2, k3 = ints("L k1 k2 k3")
    gs = []
    for i, k in zip((1, 2), (k1, k2)):
        B, W = ints(f"B{i} W{i}")
        gs.append(Geometry(B, W, L, k, (B >= 1, W >= 1, k >= 1, L == k * B), f"live {i}", "live"))
    B3 = z3.Int("B3")
    full = (B3 >= 1, k3 >= 1, L == k3 * B3)
    gs.append(Geometry(B3, z3.IntVal(1), 0, z3.IntVal(1), full, "full", "full"))
    facts = [count_lemmas(p, g) for g in gs]
    exts = [shape_facts(p, g)[0] for g in gs]
    takes = [take_lemma(p, g, cf, e0) for g, cf, e0 in zip(gs, facts, exts)]
    keeps = [
        p.lemma(
            f"[{g.label}] lemma: acquire(0) keeps the tail room",
            lambda t, g=g: ([*g.hyps, t >= 0], geo.tail_after(t, g.B, 0, Z3) == t),
            1,
        )
        for g in gs
    ]

    def setup() -> tuple[Any, ...]:
        F, n = ints("F n")
        tabs, hyps = [], [F >= 0, n >= 0]
        for i, g in enumerate(gs):
            s, t = ints(f"slots{i} tail{i}")
            tabs.append(runs.TableState(s, t, 0, ()))
            hyps += [*g.hyps, *shape(s, t, g.B)]
        step = runs.coordinator_acquire(F, tabs, [group(g) for g in gs], n, Z3)
        left = F
        for t, keep, take, st in zip(tabs, keeps, takes, step.steps):
            hyps += [keep(t.tail), *take(t.slots, t.tail, n, F)]
            hyps += take(t.slots, t.tail, z3.If(step.ok, n, 0), left)
            left = st.free
        needs = [table_needed(g, t, n) for g, t in zip(gs, tabs)]
        return F, tabs, hyps, step, needs

    def ok_iff() -> tuple[Any, Any]:
        F, tabs, hyps, step, needs = setup()
        return step.ok == (sum(needs) <= F), hyps

    def success() -> tuple[Any, Any]:
        F, tabs, hyps, step, needs = setup()
        return z3.Implies(
            step.ok,
            z3.And(
                *[z3.And(s.ok, s.take == need) for s, need in zip(step.steps, needs)],
                step.free == F - sum(needs),
            ),
        ), hyps

    def failure() -> tuple[Any, Any]:
        F, tabs, hyps, step, needs = setup()
        same = [
            z3.And(s.table.slots == t.slots, s.table.tail == t.tail, s.take == 0)
            for s, t in zip(step.steps, tabs)
        ]
        return z3.Implies(z3.Not(step.ok), z3.And(step.free == F, *same)), hyps

    general(p, gs[0], "ok iff the summed need fits the free pages", ok_iff, over=ARITH)
    general(
        p,
        gs[0],
        "success: every group acquires and takes its blocks_needed_for(n)",
        success,
        over=ARITH,
    )
    general(p, gs[0], "failure: no group changes, nothing is taken", failure, over=ARITH)


# --- acquire: all-or-nothing, exact take ----------------------------------------------------


def _acquire_search(max_b: int, max_w: int, max_m: int) -> tuple[int, Values | None]:
    cases = 0
    for g in every_group(max_b, max_w, max_m):
        for prior in range(0, 2 * g.B + 2):
            mgr, _, table, _ = prepared_manager(g, prior, 0)
            prepared: dict[int, tuple[Any, Any, Any, int]] = {}  # by free pages, copied
            for n in range(0, 3 * g.B + 3):
                need = mgr.blocks_needed_for(table, n)
                for free in sorted({max(need - 1, 0), need, need + 1}):
                    cases += 1
                    if free not in prepared:
                        prepared[free] = prepared_manager(g, prior, free)
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
    pool, table = fork(pool, table)
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
        mgr, _, _, take = prepared_manager(g, v["prior"], 0)
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
def acquire_all_or_nothing_bounded(p: Prover) -> None:
    p.exhaust("every configuration within the bounds", lambda: _acquire_search(MAX_B, 5, 3))


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


def _coordinator_search() -> tuple[int, Values | None]:
    cases = 0
    for index, groups in enumerate(COORDINATORS):
        lcm = spec_coordinator(groups, 2).lcm_block_size
        for prior in range(0, lcm + 2):
            for n in range(0, 2 * lcm + 3):
                probe = spec_coordinator(groups, 1 << 12)
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
    coord = spec_coordinator(groups, nb)
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
