"""Section 7, property 6: free + pinned = N - 1, as an inductive invariant, and per page.

``conservation-inductive`` runs the executed transitions (``runs.acquire``, ``runs.reclaim``,
``runs.free_table``) on symbolic states; ``references-equal-holders-per-page`` runs the slot
rules of acquire, claim and free on a symbolic page (reclaim's per-slot facts are
``reclaim-slots-follow-runs``'s, ``reclaim.py``).
"""

from __future__ import annotations

from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.spec import runs, slots

from ..z3arith import Z3
from .prover.prover import Prover
from .prover.slot_traces import per_page_candidates, slot_traces
from .prover.states import (
    count_lemmas,
    general,
    group,
    real_in_lemmas,
    shape_facts,
    slot_pages,
    table,
)
from .prover.symbols import Geometry, every_kind, indicator, ints
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
    lemmas). Per-page facts (a page's count equals its holders, queue membership against
    counts) are references-equal-holders-per-page (acquire, claim, free) and
    reclaim-slots-follow-runs (reclaim), unbounded, and reclaim-bounded and the
    differential campaign, over the model's classes.""",
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


@theorem(
    "references-equal-holders-per-page",
    """Per page, over the rules the model's acquire, claim and free run. Free: spec/slots.py
    freed (the rule free's batch lets go by) and runs.drop_reference (the pool's release, once
    per entry of the batch), on a symbolic page p >= 1 whose reference count equals its
    holders (h >= 0 elsewhere, plus the slots of the table at hand holding it: slot a, or none,
    as a table holds a page in one slot at most) and which is in the free queue iff its count
    is 0, in a table of n slots (page ids an unbounded array): free drops p's count once per
    slot holding it, so it ends at h, its holders after (free empties the table), and p is in
    the queue after iff that count is 0. Claim into a fresh table, per slot served by the
    device tier (matched page d >= 1, which the claim takes one more reference to), the host
    tier (host page c >= 1 and the fresh device page l taken for it, count 0 before, l != d) or
    neither: slots.claim_cell puts in the slot exactly the page the claim took a reference to
    for it, so every page's count rises by the number of slots that hold it now; a matched
    page leaves the queue exactly when its count was 0 (slots.claim_takes), so the queue stays
    the count-0 pages. Fork (semantics 13.6): slots.forked takes one more reference
    (slots.share) to the page of every real slot, whose copy the fork's slot holds
    (slots.fork_cell), so p's count rises by the fork's slots holding it and stays >= 1;
    copy_tail: when slots.copies_tail picks the tail slot (slots.tail_slot) of a table whose
    page another holder shares, slots.copy_tail_cell puts a fresh page l (count 0 before) in
    it and the shared page drops one reference (runs.drop_reference) without re-entering the
    queue, so every page's count equals its holders after. Acquire (runs.acquire's run and
    runs.run_real, for a full, a state, a sliding group with A = 0 and a live-tail sliding
    group, B, W, m unbounded): the model
    gives its k-th taken page (count 0 -> 1) to the run's k-th real slot; every real slot's
    rank is below the pages it took and two real slots have different ranks, so each page it
    took gets one holder (as many real slots as pages taken: live-count-closed-form).
    Unbounded (slot counts, page ids, reference counts; every live_count function).""",
    """A page's reference count is the number of table slots holding it through every
    acquire, claim and free: it re-enters the free queue exactly when its last holder lets
    go, never while one holds it, and no page leaks; a fork shares every page it copies and a
    tail copy moves exactly one reference.""",
    kills=("free-skips-last-slot", "fork-skips-last-slot"),
    cost=2,
    rlimit=14_000_000,
    executes=(
        "acquire",
        "run_real",
        "slots.claim_cell",
        "slots.claim_takes",
        "slots.freed",
        "drop_reference",
        "slots.forked",
        "slots.fork_cell",
        "slots.share",
        "slots.tail_slot",
        "slots.copies_tail",
        "slots.copy_tail_cell",
    ),
    trace=slot_traces("references-equal-holders-per-page", per_page_candidates),
)
def references_per_page(p: Prover) -> None:
    pages, refs = slot_pages("pages"), slot_pages("refs")
    page, n, a, h = ints("p n a h")
    held = z3.And(a >= 0, a < n, pages[a] == page)
    hyps = [page >= 1, n >= 0, h >= 0, refs[page] == h + indicator(held)]
    # The batch's entries that are p: only slot a can hold p.
    lets_go = z3.And(held, slots.freed(a, pages[a], n, Z3))
    dropped, requeued = runs.drop_reference(refs[page], Z3)
    count = z3.If(lets_go, dropped, refs[page])
    queued = z3.Or(refs[page] == 0, z3.And(lets_go, requeued))
    show = {"p": page, "n": n, "a": a, "h": h, "count_before": refs[page], "count_after": count}
    p.prove("free: p's count drops to its holders after (h)", count == h, hyps, show)
    p.prove("free: p is in the queue after iff its count is 0", queued == (count == 0), hyps, show)

    d, c, fresh = ints("d c l")
    cell = slots.claim_cell(d, c, fresh, Z3)
    hyps = [page >= 1, h >= 0, refs[page] == h, d >= 0, c >= 0, fresh >= 1, fresh != d]
    hyps += [z3.Or(d == 0, c == 0), refs[fresh] == 0, refs[d] >= 0]
    # The references the coordinator's claim takes for the slot: one more to the matched
    # page (its _take_shared), count 1 for the page allocated for a host-served slot.
    taken = indicator(z3.And(d != 0, d == page)) + indicator(z3.And(c != 0, fresh == page))
    show = {"p": page, "d": d, "c": c, "l": fresh, "cell": cell, "h": h}
    p.prove(
        "claim: each page's count rises by the slots that hold it now",
        refs[page] + taken == h + indicator(z3.And(cell != 0, cell == page)),
        hyps,
        show,
    )
    leaves = slots.claim_takes(refs[d], Z3)
    p.prove(
        "claim: a matched page leaves the queue iff its count was 0",
        z3.Implies(d != 0, z3.And(refs[d] == 0, z3.Not(leaves)) == (refs[d] + 1 == 0)),
        hyps,
        {"d": d, "count": refs[d]},
    )
    _fork_per_page(p)
    for g in every_kind():
        _acquire_per_page(p, g)


def _fork_per_page(p: Prover) -> None:
    """fork: the fork's slot holds the source slot's page (slots.fork_cell) and takes one more
    reference to it (slots.forked, slots.share); copy_tail: the tail slot (slots.tail_slot)
    whose page another holder shares (slots.copies_tail) takes a fresh page (count 0 -> 1)
    and drops one reference of the shared one (runs.drop_reference)."""
    pages, refs = slot_pages("pages"), slot_pages("refs")
    page, n, a, h = ints("p n a h")
    held = z3.And(a >= 0, a < n, pages[a] == page)
    hyps = [page >= 1, n >= 0, h >= 0, refs[page] == h + indicator(held)]
    takes = z3.And(held, slots.forked(a, pages[a], n, Z3))
    count = z3.If(takes, slots.share(refs[page], Z3), refs[page])
    # After the fork slot a of the source and slot a of the fork hold what they hold.
    copy = z3.And(a >= 0, a < n, slots.fork_cell(pages[a], Z3) == page)
    holders = h + indicator(held) + indicator(copy)
    show = {"p": page, "n": n, "a": a, "h": h, "count_before": refs[page], "count_after": count}
    p.prove(
        "fork: p's count rises to its holders after (the fork's slot too)",
        count == holders,
        hyps,
        show,
    )
    p.prove(
        "fork: a page it shares is never in the queue", z3.Implies(held, count >= 1), hyps, show
    )

    tail, fresh = ints("tail l")
    last = slots.tail_slot(n, tail, Z3)
    old = pages[last]
    hyps = [page >= 1, n >= 0, h >= 0, tail >= 0, fresh >= 1, refs[fresh] == 0, fresh != old]
    in_table = z3.And(last >= 0, last < n, pages[last] == page)
    hyps += [refs[page] == h + indicator(in_table), z3.Or(page != fresh, h == 0)]
    copied = z3.And(last >= 0, slots.copies_tail(old, refs[old], Z3))
    cell = slots.copy_tail_cell(last, old, last, copied, fresh, Z3)
    dropped, requeued = runs.drop_reference(refs[old], Z3)
    after = z3.If(
        z3.And(copied, page == old),
        dropped,
        z3.If(z3.And(copied, page == fresh), 1, refs[page]),
    )
    now = h + indicator(z3.And(last >= 0, last < n, cell == page))
    show = {"p": page, "n": n, "tail": tail, "h": h, "l": fresh, "count_after": after}
    p.prove("copy_tail: p's count equals its holders after", after == now, hyps, show)
    p.prove(
        "copy_tail: the shared page stays out of the queue",
        z3.Implies(copied, z3.Not(requeued)),
        hyps,
        show,
    )


def _acquire_per_page(p: Prover, g: Geometry) -> None:
    """acquire places its k-th taken page in its k-th real slot (the model's fill): every real
    slot's rank is below the take and two real slots have different ranks."""
    gr = group(g)
    cf = count_lemmas(p, g)
    bounds, split = real_in_lemmas(p, g, cf.cb)
    ext0, _ = shape_facts(p, g)
    one = p.lemma(
        f"[{g.label}] lemma: one slot of a run counts 1 iff it is real",
        lambda first, count, fr, s: (
            [*g.hyps, first >= 0, count >= 0, fr >= 0, first <= s, s < first + count],
            runs.real_in(runs.Run(first, count, fr), s, s + 1, gr, Z3)
            == indicator(runs.run_real(runs.Run(first, count, fr), s, gr, Z3)),
        ),
        4,
    )

    def setup() -> tuple[Any, ...]:
        t, th = table(g, "", 1)
        F, n, s, s2 = ints("F n s s2")
        step = runs.acquire(F, t, n, gr, Z3)
        r = step.run
        hyps = [*g.hyps, *th, F >= 0, n >= 0, step.ok, r.first <= s, s < s2, s2 < r.end]
        hyps += [runs.run_real(r, s, gr, Z3)]
        at = (r.first, r.count, r.frontier)
        hyps += [split(*at, r.first, s, s + 1), split(*at, r.first, s + 1, s2)]
        hyps += [split(*at, r.first, s + 1, r.end), one(*at, s)]
        hyps += [bounds(*at, r.first, s), bounds(*at, s + 1, s2), bounds(*at, s + 1, r.end)]
        hyps += [ext0(t.slots, t.tail), *cf.ceil(t.tail, n)]
        return step, s, s2, hyps

    def rank(step: Any, x: Any) -> Any:
        return runs.real_in(step.run, step.run.first, x, gr, Z3)

    def below_take() -> tuple[Any, Any]:
        step, s, _, hyps = setup()
        return z3.And(rank(step, s) >= 0, rank(step, s) < step.take), hyps

    def distinct() -> tuple[Any, Any]:
        step, s, s2, hyps = setup()
        return z3.Implies(runs.run_real(step.run, s2, gr, Z3), rank(step, s) < rank(step, s2)), hyps

    general(p, g, f"[{g.label}] acquire: a real slot's page is one it took", below_take)
    general(p, g, f"[{g.label}] acquire: two real slots hold different pages", distinct)
