"""Section 7, property 5: reclaim gives back exactly the expired pages.

``reclaim-exact-with-shared-pages`` executes ``runs.reclaim`` on symbolic states and
compares what it released with what ``runs.reclaimable`` (blocks_reclaimable_at)
predicted; ``reclaim-releases-only-expired`` is the bound over the closed forms;
``reclaim-bounded`` runs the spec's classes over every small configuration (and checks
property 6 per page).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail import spec
from livetail.spec import geometry as geo
from livetail.spec import runs, slots

from ..z3arith import Z3
from .prover.prover import Prover
from .prover.query import Values
from .prover.slot_traces import (
    first_of,
    reclaim_candidates,
    reclaimable_candidates,
    shared_reclaim_candidates,
    slot_traces,
)
from .prover.states import (
    count_lemmas,
    follows_runs,
    general,
    group,
    real_in_lemmas,
    slot_pages,
    table,
)
from .prover.symbols import Geometry, every_kind, ints, shape
from .prover.theorem import theorem
from .prover.traces import ops_trace, transition_traces
from .worlds.managers import MAX_B, Group, Snapshot, every_group, fork


@theorem(
    "reclaim-exact-with-shared-pages",
    """Executes the run-level reclaim (spec/runs.py reclaim, whose band, floor update and
    reclaimable test, runs.reclaim_band, runs.floor_after and runs.counts_as_reclaimable, the
    model's reclaim_expired and blocks_reclaimable_at call; its slot rules, which the model
    writes and counts by, are executed by reclaim-slots-follow-runs and
    reclaimable-counts-what-reclaim-frees, which tie them to this run description) at any
    frontier f
    up to the extent on a symbolic table of two runs (symbolic slot counts, frontiers, tail
    room and floor) whose first run's pages are shared with other holders (reference count
    c >= 2) and second run's are not, for a state group, a sliding group with A = 0 and a
    live-tail sliding group (B, W, m unbounded; its band holds the holes its acquires left,
    and an instance with a hole in the band is exhibited first): it returns exactly what
    blocks_reclaimable_at(f) (runs.reclaimable) predicted before, the free pages grow by that
    much, it drops one reference per real slot it lets go (references dropped = real pages
    before - real pages after, so no real page below the bound is left), the floor never
    moves down and ends at or above the bound, and a repeat reclaim at f frees nothing and
    drops nothing; and the bound is the window's: every slot the floor moves past is wholly
    outside the window of every query t >= f, no slot at or above the floor it leaves is
    (so the steps fail with reclaim_bound replaced by an unknown function). Unbounded; the
    "one reference dropped" and "repeat" steps for every live_count function (the facts
    they use are proved lemmas).""",
    """An engine can predict what reclaim_expired gives back even when prefix caching shares
    pages, call it after every chunk, and never rescans a slot.""",
    kills=(
        "reclaim-keeps-band-top",
        "reclaimable-counts-shared",
        "reclaim-floor-to-bound",
        "reclaim-floor-not-updated",
    ),
    cost=3,
    rlimit=19_000_000,
    executes=("reclaim", "reclaimable"),
    trace=first_of(
        transition_traces("reclaim-exact-with-shared-pages"),
        slot_traces("reclaim-exact-with-shared-pages", shared_reclaim_candidates),
    ),
)
def reclaim_exact(p: Prover) -> None:
    for g in every_kind()[1:]:
        gr = group(g)

        tb, th = table(g, "", 2)
        F, f, c, h = ints("F f c hole")
        refs = (c, z3.IntVal(1))
        hyps = [*g.hyps, *th, F >= 0, c >= 2, f >= 0, f <= geo.extent(tb.slots, tb.tail, g.B)]
        predicted = runs.reclaimable(tb, f, gr, refs, Z3)
        step = runs.reclaim(F, tb, f, gr, refs, Z3)
        b = geo.reclaim_bound(f, tb.slots, g.W, g.B, Z3)
        show = {"predicted": predicted, "released": step.released, "bound": b}
        band = [*hyps, *[k >= 1 for k in runs.real_pages_in(tb, tb.floor, b, gr, Z3)]]
        if g.live:
            # Live tail: the band also holds a hole its acquire left (slot h, placed unreal).
            # Z3 is pointed at one small geometry (B = 1, W = 2, m = 3); the search for the
            # instance is what is slow, not its existence.
            band += [tb.floor <= h, h < b, z3.Not(runs.slot_real(tb, h, gr, Z3))]
            band += [g.B == 1, g.W == 2, g.m == 3]
        p.exhibit(
            f"[{g.label}] a band holding a shared and an unshared page"
            + (" and a hole" if g.live else "")
            + " exists",
            band,
            show=show,
        )
        p.prove(
            f"[{g.label}] released = blocks_reclaimable_at(f) before, free grows by it",
            z3.And(step.released == predicted, step.free == F + predicted),
            hyps,
            show=show,
        )
        p.prove(
            f"[{g.label}] the floor never moves down and ends at or above the bound",
            z3.And(step.table.floor >= tb.floor, step.table.floor >= b),
            hyps,
            show=show,
        )
        # The bound itself, pinned to the window: the slots reclaim moves the floor past are
        # wholly outside the window of every query t >= f, the slots above it are not.
        s = z3.Int("s")
        at = [*hyps, s >= 0, s < tb.slots]
        p.prove(
            f"[{g.label}] every slot the floor moves past is expired",
            z3.Implies(z3.And(tb.floor <= s, s < step.table.floor), (s + 1) * g.B <= f - g.W + 1),
            at,
            show=show,
        )
        p.prove(
            f"[{g.label}] no slot at or above the floor reclaim leaves is expired",
            z3.Implies(s >= step.table.floor, (s + 1) * g.B > f - g.W + 1),
            at,
            show=show,
        )
        _reclaim_lets_go(p, g)


def _reclaim_lets_go(p: Prover, g: Geometry) -> None:
    """One reference dropped per real slot let go, and a repeat reclaim lets go of nothing.

    Proved for every live_count function from instances of proved lemmas (live_count(x, 0,
    f) = 0, and real_in splits at any slot), so holes in the band cost nothing to decide.
    """

    gr = group(g)
    cf = count_lemmas(p, g)
    _, split = real_in_lemmas(p, g, cf.cb)

    def setup() -> tuple[Any, ...]:
        tb, th = table(g, "", 2)
        F, f, c = ints("F f c")
        refs = (c, z3.IntVal(1))
        hyps = [*g.hyps, *th, F >= 0, c >= 2, f >= 0, f <= geo.extent(tb.slots, tb.tail, g.B)]
        step = runs.reclaim(F, tb, f, gr, refs, Z3)
        b = geo.reclaim_bound(f, tb.slots, g.W, g.B, Z3)
        y = Z3.max(tb.floor, b)
        hyps += [b <= tb.slots]
        for r in tb.runs:
            hyps.append(split(r.first, r.count, r.frontier, tb.floor, y, tb.slots))
            for lo in (tb.floor, y):  # an empty range [lo, hi <= lo) of the run counts 0
                hyps += cf.zero(Z3.min(Z3.max(lo, r.first), r.end), r.frontier)
        return tb, F, f, hyps, step

    def dropped() -> tuple[Any, Any]:
        tb, F, f, hyps, step = setup()
        before, after = runs.real_pages(tb, gr, Z3), runs.real_pages(step.table, gr, Z3)
        return step.dropped == before - after, hyps

    def repeat() -> tuple[Any, Any]:
        tb, F, f, hyps, step = setup()
        again = runs.reclaim(step.free, step.table, f, gr, step.refs, Z3)
        return z3.And(again.released == 0, again.dropped == 0), hyps

    general(p, g, f"[{g.label}] one reference dropped per real slot let go", dropped)
    general(p, g, f"[{g.label}] a repeat reclaim at f frees and drops nothing", repeat)


@theorem(
    "reclaim-releases-only-expired",
    """For every group (B, W >= 1), table shape and frontier f <= extent, the reclaim bound
    b = min(slid_out(f), slots) lies in [0, slots], every slot below it has every token
    outside the window of every query t >= f, and the bound never decreases as the frontier
    and the table grow. A state group (W = 2) reclaimed at its extent keeps at most its last
    page. Unbounded.""",
    """reclaim_expired only gives back pages no later query reads, and its scan (which
    starts at the floor) never has to revisit a slot.""",
    rlimit=2_000_000,
)
def reclaim_releases_only_expired(p: Prover) -> None:
    B, W, slots, tail, f, t, s = ints("B W slots tail f t s")
    hyps = [B >= 1, W >= 1, *shape(slots, tail, B), f >= 0, f <= geo.extent(slots, tail, B)]
    b = geo.reclaim_bound(f, slots, W, B, Z3)
    p.prove("0 <= b <= slots", z3.And(b >= 0, b <= slots), hyps)
    p.prove(
        "s < b => slot s is outside the window of every query t >= f",
        z3.Implies(z3.And(s >= 0, s < b, t >= f), (s + 1) * B <= t - W + 1),
        hyps,
    )
    f2, slots2 = ints("f2 slots2")
    p.prove(
        "f <= f2 and slots <= slots2 => b(f) <= b(f2)",
        b <= geo.reclaim_bound(f2, slots2, W, B, Z3),
        [*hyps, f <= f2, slots <= slots2],
    )
    state = geo.reclaim_bound(geo.extent(slots, tail, B), slots, 2, B, Z3)
    p.prove(
        "state group (W = 2) reclaimed at its extent keeps at most the last page",
        slots - state <= 1,
        [B >= 1, *shape(slots, tail, B)],
    )


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
                        p1, t1 = fork(pool, table)
                        after_f1[f1] = (_check_reclaim(mgr, p1, t1, f1, repeated), p1, t1)
                    problem, p1, t1 = after_f1[f1]
                    if not problem:
                        p2, t2 = fork(p1, t1)
                        mgr.acquire(p2, t2, b)
                    for f2 in range(f1, a + b + 1):
                        cases += 1
                        if not problem:
                            p3, t3 = fork(p2, t2)
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
                                pool, table = fork(pool0, table0)
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
    acquire(b <= 2B), reclaim(f2); (2) every table of up to 6 slots (4 with livetail verify
    --quick, where reclaim-slots-follow-runs covers every table, unbounded) with every hole
    pattern above every reclaim floor, every tail room, B <= 3, W <= 3 (sliding, state and
    full groups), at every frontier up to the extent. After
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
    slots = 4 if p.quick else 6  # --quick: 13,595 cases instead of 90,885
    p.exhaust(
        f"(2) every hole pattern above every floor, up to {slots} slots",
        lambda: _pattern_search(slots, 3),
    )


@theorem(
    "reclaim-slots-follow-runs",
    """Executes the model's reclaim slot by slot (spec/slots.py reclaim_cell and punched, on
    the band runs.reclaim_band gives, and runs.reclaim for the run description it leaves) on
    one symbolic slot s of a symbolic table (its page ids an unbounded array, two runs of
    symbolic sizes and frontiers, symbolic floor and tail room) at any frontier f up to the
    extent, for a state group, a sliding group with A = 0 and a live-tail sliding group (B,
    W, m unbounded; the live-tail band may hold holes). From a table whose slots follow its
    runs (a page exactly where runs.slot_real says), reclaim leaves slot s following the
    runs reclaim leaves; no slot below the bound min(slid_out(f), slots) holds a page after
    it; a slot outside the band is left as it was (so visiting the band alone is enough);
    the slots it lets go are exactly the real slots of the band (what runs.reclaim counts);
    a slot stops holding its page exactly when reclaim lets go of it, so the pool drops one
    reference per slot that stops holding a page (reference counts keep equal to holders);
    and a repeat reclaim at f lets go of nothing. Unbounded.""",
    """After reclaim_expired(f) no page below the window is pinned, holes included, and the
    pages it frees are exactly the ones the count-level proofs count.""",
    kills=("reclaim-cell-spares-floor", "reclaim-keeps-band-top", "reclaim-floor-not-updated"),
    cost=2,
    rlimit=3_000_000,  # the small pass searches its page arrays (1.4M units)
    executes=("reclaim", "slots.reclaim_cell", "slots.punched"),
    trace=slot_traces("reclaim-slots-follow-runs", reclaim_candidates),
)
def reclaim_slots(p: Prover) -> None:
    for g in every_kind()[1:]:
        _reclaim_slots(p, g)


def _reclaim_slots(p: Prover, g: Geometry) -> None:
    gr = group(g)
    tb, th = table(g, "", 2)
    pages = slot_pages("pages")
    f, s, F = ints("f s F")
    hyps = [*g.hyps, *th, f >= 0, f <= geo.extent(tb.slots, tb.tail, g.B), s >= 0]
    hyps += [s < tb.slots, follows_runs(tb, pages[s], s, gr)]
    b = geo.reclaim_bound(f, tb.slots, g.W, g.B, Z3)
    lo, hi = runs.reclaim_band(tb.floor, b, Z3)
    after = runs.reclaim(F, tb, f, gr, (1, 1), Z3).table
    page = pages[s]
    cell = slots.reclaim_cell(s, page, lo, hi, Z3)
    let_go = slots.punched(s, page, lo, hi, Z3)
    show = {"s": s, "page": page, "after": cell, "bound": b, "floor": tb.floor}
    label = f"[{g.label}]"
    p.prove(
        f"{label} the slot follows the runs reclaim leaves",
        follows_runs(after, cell, s, gr),
        hyps,
        show,
    )
    p.prove(
        f"{label} no slot below the bound holds a page", z3.Implies(s < b, cell == 0), hyps, show
    )
    p.prove(
        f"{label} a slot outside the band is left as it was",
        z3.Implies(z3.Not(slots.in_band(s, lo, hi, Z3)), cell == page),
        hyps,
        show,
    )
    p.prove(
        f"{label} the slots let go are the band's real slots",
        let_go == z3.And(slots.in_band(s, lo, hi, Z3), runs.slot_real(tb, s, gr, Z3)),
        hyps,
        show,
    )
    p.prove(
        f"{label} a slot stops holding its page iff reclaim lets go of it (one reference each)",
        (cell != page) == let_go,
        hyps,
        show,
    )
    lo2, hi2 = runs.reclaim_band(after.floor, geo.reclaim_bound(f, after.slots, g.W, g.B, Z3), Z3)
    p.prove(
        f"{label} a repeat reclaim at f lets go of nothing",
        z3.Not(slots.punched(s, cell, lo2, hi2, Z3)),
        hyps,
        show,
    )


@theorem(
    "reclaimable-counts-what-reclaim-frees",
    """Executes blocks_reclaimable_at's rule (spec/slots.py reclaimable_cell, which decides
    by slots.punched) and reclaim's (slots.reclaim_cell, what reclaim writes into the slot,
    then the pool's runs.drop_reference on the page's count) on one symbolic slot s of a
    table whose page ids, reference counts and names are unbounded arrays, on a symbolic
    band: with count_uncached, a slot is counted iff reclaim empties it of a page and the
    page re-enters the free queue (its count drops to 0); without it, iff besides that the
    page is named (the step fails with punched replaced by an unknown function). As a
    table holds a page in one slot at most, the count blocks_reclaimable_at returns is the
    number of pages reclaim returns to the queue, shared pages (count >= 2) and holes
    excluded. Unbounded.""",
    """An engine can plan on blocks_reclaimable_at: it is exactly what the next reclaim
    gives back, whether or not prefix caching shares the pages.""",
    kills=("reclaimable-ignores-names", "reclaimable-counts-shared"),
    cost=1,
    rlimit=2_000_000,
    executes=("slots.reclaimable_cell", "slots.punched", "slots.reclaim_cell"),
    trace=slot_traces("reclaimable-counts-what-reclaim-frees", reclaimable_candidates),
)
def reclaimable_slots(p: Prover) -> None:
    pages, refs = slot_pages("pages"), slot_pages("refs")
    named = z3.Array("named", z3.IntSort(), z3.BoolSort())
    s, lo, hi = ints("s lo hi")
    every = z3.Bool("count_uncached")
    page = pages[s]
    hyps = [refs[page] >= z3.If(page == 0, 0, 1)]  # a page a slot holds has a holder
    counted = slots.reclaimable_cell(s, page, refs[page], named[page], every, lo, hi, Z3)
    _, re_enters = runs.drop_reference(refs[page], Z3)
    # What reclaim does to the slot (reclaim_cell: a hole where it held a page), not the
    # rule reclaimable_cell is written with (punched): the step depends on punched's body.
    emptied = z3.And(slots.reclaim_cell(s, page, lo, hi, Z3) == 0, page != 0)
    frees = z3.And(emptied, re_enters)
    show = {"s": s, "page": page, "ref": refs[page], "count_uncached": every}
    p.prove(
        "counted iff reclaim empties the slot of a page that re-enters the queue (named, "
        "unless count_uncached)",
        counted == z3.And(frees, z3.Or(every, named[page])),
        hyps,
        show,
    )
