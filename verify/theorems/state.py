"""Sections 7.4 and 7.5 over the executed transitions: hole placement and reclaim exactness.

The theorems call ``runs.acquire`` and ``runs.reclaim`` (spec/runs.py) on symbolic states
and read the state they leave: which slots the executed acquire made holes, what the
executed reclaim released, what ``runs.reclaimable`` (blocks_reclaimable_at) predicted.
"""

from __future__ import annotations

from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.spec import runs

from ..z3arith import Z3
from ._common import Geometry, every_kind, ints, live_tail
from ._prover import Prover
from ._registry import theorem
from ._runs import group
from ._traces import transition_traces


@theorem(
    "acquire-places-holes-outside-every-window",
    """Executes the spec's acquire (spec/runs.py) of n tokens on a symbolic table shape
    (B, W, m unbounded, A = m*B, any slot count, tail room and count n, enough free pages)
    and reads which of the new run's slots it made real (runs.run_real, the placement the
    concrete acquire fills its slots by); E = extent + n is the extent it leaves. First it
    exhibits a hole (the statement is not vacuous); then every hole of the run is outside the window
    of every later query t >= E ((s+1)*B <= t - W + 1) and is no resume page of any
    A-aligned boundary b (not b - R <= s < b); every slot of the run the next query reads
    ((s+1)*B > E - W + 1) is real; and every real slot of the run is either read by that
    query or one of the R resume pages of the aligned boundary (s div m + 1)*m at or below E
    (minimality). Unbounded.""",
    """A kernel never reads a hole, a request can always resume from an lcm boundary, and
    live tail pins nothing else: the acquire that placed the pages put every hole where no
    query will look and every real page where one will.""",
    kills=("real-pages-packed-first", "slid-out-off-by-one", "acquire-frontier-minus-one"),
    cost=3,
    rlimit=42_000_000,
    executes=("acquire", "run_real"),
    trace=transition_traces("acquire-places-holes-outside-every-window", "live"),
)
def acquire_places_holes(p: Prover) -> None:
    g = live_tail()
    gr = group(g)
    slots, tail, n, s, t, b, F = ints("slots tail n s t b F")
    state = runs.TableState(slots, tail, 0, ())
    run = runs.acquire(F, state, n, gr, Z3).run
    # The extent the acquire leaves (acquire-all-or-nothing proves the executed acquire
    # leaves exactly this): the frontier of the next query.
    E = geo.extent(slots, tail, g.B) + n
    hyps = [*g.hyps, slots >= 0, tail >= 0, tail <= g.B - 1, n >= 0]
    inside = [run.first <= s, s < run.end]
    real = runs.run_real(run, s, gr, Z3)
    hole = z3.Not(real)
    show = {"first": run.first, "count": run.count, "frontier": run.frontier, "E": E}
    p.exhibit("a hole exists", [*hyps, *inside, hole], show=show)
    hyps = [*hyps, *inside]
    p.prove(
        "a hole is outside the window of every query t >= the run's frontier",
        z3.Implies(z3.And(hole, t >= run.frontier), (s + 1) * g.B <= t - g.W + 1),
        hyps,
        show=show,
    )
    p.prove(
        "a hole is no resume page of any aligned boundary",
        z3.Implies(z3.And(hole, b % g.m == 0, b >= 1), z3.Not(z3.And(b - g.R() <= s, s < b))),
        hyps,
        show=show,
    )
    p.prove(
        "every slot of the run the next query reads is real",
        z3.Implies((s + 1) * g.B > E - g.W + 1, real),
        hyps,
        show=show,
    )
    boundary = (s / g.m + 1) * g.m
    resume = z3.And(boundary - g.R() <= s, boundary * g.B <= E)
    p.prove(
        "every real slot is read by the next query or a resume page of a boundary <= E",
        z3.Implies(real, z3.Or((s + 1) * g.B > E - g.W + 1, resume)),
        hyps,
        show=show,
    )


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
    drops nothing. Unbounded; the last two steps for every live_count function (the facts
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
    rlimit=17_000_000,
    executes=("reclaim", "reclaimable"),
    trace=transition_traces("reclaim-exact-with-shared-pages"),
)
def reclaim_exact(p: Prover) -> None:
    for g in every_kind()[1:]:
        gr = group(g)
        from ._runs import table

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
        _reclaim_lets_go(p, g)


def _reclaim_lets_go(p: Prover, g: Geometry) -> None:
    """One reference dropped per real slot let go, and a repeat reclaim lets go of nothing.

    Proved for every live_count function from instances of proved lemmas (live_count(x, 0,
    f) = 0, and real_in splits at any slot), so holes in the band cost nothing to decide.
    """
    from ._runs import real_in_lemmas, table
    from .transitions import count_lemmas, general

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
    "conservation-inductive",
    """Conservation as an inductive invariant over the executed transitions (spec/runs.py):
    for every manager kind (B, W, m unbounded), from any state of a pool of N pages with F
    free, other >= 0 pages pinned by other holders and a symbolic table of two runs whose
    pages it holds alone, with F + other + real pages of the table = N - 1, each of
    acquire(n) (succeeding or not), reclaim_expired(f) (any f up to the extent) and free
    leaves F' + other + real pages' = N - 1; free returns every real page, so with no other
    holder it leaves F' = N - 1 (freeing every table restores the pool). Unbounded in sizes
    and counts, for tables of two runs; every live_count function (facts from proved
    lemmas). Per-page facts (queue membership against counts) are covered by the bounded
    reclaim-bounded theorem and the differential campaign.""",
    """Pages never leak or double-count: whatever an engine acquires, reclaims and frees,
    free plus pinned stays the pool size, and freeing every request gives the pool back.""",
    kills=(
        "reclaim-keeps-band-top",
        "reclaim-floor-not-updated",
    ),
    cost=6,
    rlimit=14_000_000,
    executes=("acquire", "reclaim", "free_table"),
    trace=transition_traces("conservation-inductive"),
)
def conservation(p: Prover) -> None:
    from ._runs import real_in_lemmas, table
    from .transitions import count_lemmas, general

    for g in every_kind():
        gr = group(g)
        cf = count_lemmas(p, g)
        bounds, split = real_in_lemmas(p, g, cf.cb)

        def setup(g=g, gr=gr, cf=cf):  # type: ignore[no-untyped-def]
            t, th = table(g, "", 2)
            N, F, other = ints("N F other")
            hyps = [*g.hyps, *th, F >= 0, other >= 0]
            inv = F + other + runs.real_pages(t, gr, Z3) == N - 1
            return t, N, F, other, [*hyps, inv]

        def after_acquire(g=g, gr=gr, cf=cf, setup=setup):  # type: ignore[no-untyped-def]
            t, N, F, other, hyps = setup()
            n = z3.Int("n")
            e = geo.extent(t.slots, t.tail, g.B) + n
            hyps += [n >= 0, *cf.zero(t.slots, e)]
            hyps += cf.whole(t.slots, geo.new_slots(t.tail, g.B, n, Z3), e)
            st = runs.acquire(F, t, n, gr, Z3)
            return st.free + other + runs.real_pages(st.table, gr, Z3) == N - 1, hyps

        def after_reclaim(g=g, gr=gr, setup=setup, split=split):  # type: ignore[no-untyped-def]
            t, N, F, other, hyps = setup()
            f = z3.Int("f")
            hyps += [f >= 0, f <= geo.extent(t.slots, t.tail, g.B)]
            b = geo.reclaim_bound(f, t.slots, g.W, g.B, Z3)
            y = Z3.max(t.floor, b)
            hyps += [split(r.first, r.count, r.frontier, t.floor, y, t.slots) for r in t.runs]
            hyps += [b <= t.slots]
            st = runs.reclaim(F, t, f, gr, (1, 1), Z3)
            return st.free + other + runs.real_pages(st.table, gr, Z3) == N - 1, hyps

        def after_free(gr=gr, setup=setup):  # type: ignore[no-untyped-def]
            t, N, F, other, hyps = setup()
            st = runs.free_table(F, t, gr, (1, 1), Z3)
            restored = z3.Implies(other == 0, st.free == N - 1)
            return z3.And(
                st.free + other + runs.real_pages(st.table, gr, Z3) == N - 1, restored
            ), hyps

        general(p, g, f"[{g.label}] acquire preserves free + pinned = N - 1", after_acquire)
        general(p, g, f"[{g.label}] reclaim preserves free + pinned = N - 1", after_reclaim)
        general(p, g, f"[{g.label}] free preserves it and restores the pool", after_free)
        del bounds
