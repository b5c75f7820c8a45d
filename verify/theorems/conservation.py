"""Section 7, property 6: free + pinned = N - 1, as an inductive invariant.

Over the executed transitions (``runs.acquire``, ``runs.reclaim``, ``runs.free_table``) on
symbolic states; the per-page facts are ``reclaim-bounded``'s (``reclaim.py``).
"""

from __future__ import annotations

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.spec import runs

from ..z3arith import Z3
from .prover.prover import Prover
from .prover.states import count_lemmas, general, group, real_in_lemmas, table
from .prover.symbols import every_kind, ints
from .prover.theorem import theorem
from .prover.traces import transition_traces


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
