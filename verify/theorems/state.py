"""Sections 7.4 and 7.5 over the executed transitions: hole placement and reclaim exactness.

The theorems call ``runs.acquire`` and ``runs.reclaim`` (spec/runs.py) on symbolic states
and read the state they leave: which slots the executed acquire made holes, what the
executed reclaim released, what ``runs.reclaimable`` (blocks_reclaimable_at) predicted.
"""

from __future__ import annotations

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.spec import runs

from ..z3arith import Z3
from ._common import every_kind, ints, live_tail
from ._prover import Prover
from ._registry import theorem
from ._runs import group


@theorem(
    "acquire-places-holes-outside-every-window",
    """Executes the spec's acquire (spec/runs.py) of n tokens on a symbolic table shape
    (B, W, m unbounded, A = m*B, any slot count, tail room and count n) and reads which of
    the new run's slots it made real (runs.run_real, the placement the concrete acquire fills
    its slots by). First it exhibits a hole (the statement is not vacuous); then every hole
    of the run is outside the window of every later query t >= the run's frontier ((s+1)*B <=
    t - W + 1), is no resume page of any A-aligned boundary b (not b - R <= s < b), and
    every slot of the run that the next query reads ((s+1)*B > f - W + 1) is real.
    Unbounded.""",
    """A kernel never reads a hole, and a request can always resume from an lcm boundary: the
    acquire that placed the pages put every hole where no query will look.""",
    kills=("real-pages-packed-first", "slid-out-off-by-one"),
    cost=3,
)
def acquire_places_holes(p: Prover) -> None:
    g = live_tail()
    gr = group(g)
    slots, tail, n, s, t, b = ints("slots tail n s t b")
    state = runs.TableState(slots, tail, 0, ())
    hyps = [*g.hyps, slots >= 0, tail >= 0, tail <= g.B - 1, n >= 0]
    run = runs.acquire(z3.Int("F"), state, n, gr, Z3).run
    inside = [run.first <= s, s < run.end]
    hole = z3.Not(runs.run_real(run, s, gr, Z3))
    show = {"first": run.first, "count": run.count, "frontier": run.frontier}
    p.exhibit("a hole exists", [*hyps, *inside, hole, z3.Int("F") >= run.count], show=show)
    hyps = [*hyps, *inside]
    p.prove(
        "a hole is outside the window of every query t >= the frontier",
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
        z3.Implies((s + 1) * g.B > run.frontier - g.W + 1, runs.run_real(run, s, gr, Z3)),
        hyps,
        show=show,
    )


@theorem(
    "reclaim-exact-with-shared-pages",
    """Executes the spec's reclaim_expired (spec/runs.py reclaim) at any frontier f up to the
    extent on a symbolic table of two runs (symbolic slot counts, frontiers, tail room and
    floor) whose first run's pages are shared with other holders (reference count c >= 2)
    and second run's are not, for a sliding group with A = 0 and a state group (B, W
    unbounded): it returns exactly what blocks_reclaimable_at(f) (runs.reclaimable) predicted
    before, the free pages grow by that much, it drops one reference per real slot it lets
    go (references dropped = real pages before - real pages after, so no real page below the
    bound is left), the floor never moves down and ends at or above the bound, and a repeat
    reclaim at f frees nothing and drops nothing. Unbounded.""",
    """An engine can predict what reclaim_expired gives back even when prefix caching shares
    pages, call it after every chunk, and never rescans a slot.""",
    kills=("reclaim-keeps-band-top", "reclaimable-counts-shared", "reclaim-floor-to-bound"),
    cost=3,
)
def reclaim_exact(p: Prover) -> None:
    for g in every_kind()[1:3]:
        gr = group(g)
        from ._runs import table

        tb, th = table(g, "", 2)
        F, f, c = ints("F f c")
        refs = (c, z3.IntVal(1))
        hyps = [*g.hyps, *th, F >= 0, c >= 2, f >= 0, f <= geo.extent(tb.slots, tb.tail, g.B)]
        predicted = runs.reclaimable(tb, f, gr, refs, Z3)
        step = runs.reclaim(F, tb, f, gr, refs, Z3)
        b = geo.reclaim_bound(f, tb.slots, g.W, g.B, Z3)
        show = {"predicted": predicted, "released": step.released, "bound": b}
        p.exhibit(
            f"[{g.label}] a band holding a shared and an unshared page exists",
            [*hyps, *[k >= 1 for k in runs.real_pages_in(tb, tb.floor, b, gr, Z3)]],
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
        before, after = runs.real_pages(tb, gr, Z3), runs.real_pages(step.table, gr, Z3)
        p.prove(
            f"[{g.label}] one reference dropped per real slot let go",
            step.dropped == before - after,
            hyps,
            show={**show, "before": before, "after": after},
        )
        again = runs.reclaim(step.free, step.table, f, gr, step.refs, Z3)
        p.prove(
            f"[{g.label}] a repeat reclaim at f frees and drops nothing",
            z3.And(again.released == 0, again.dropped == 0),
            hyps,
            show=show,
        )
