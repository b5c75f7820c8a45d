"""Sections 7.5, 7.6, 7.8 and 7.11 slot by slot: the per-slot rules the model runs.

The model's reclaim_expired, blocks_reclaimable_at, free and claim write each slot through
the rules of ``spec/slots.py``.  These theorems call the same rules on one symbolic slot of
a symbolic table (its page ids an unbounded Z3 array), so what they prove holds for every
slot of every table at once, and tie the slots to the run description (``spec/runs.py``)
that the count-level theorems execute: a page is real exactly where the runs say, before
and after each transition.
"""

from __future__ import annotations

from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.spec import runs, slots

from ..z3arith import Z3
from ._common import Geometry, every_kind, ints
from ._prover import Prover
from ._registry import theorem
from ._runs import group, table

_I = z3.IntSort()


def _pages(name: str) -> Any:
    return z3.Array(name, _I, _I)


def _follows(t: runs.TableState, pages: Any, s: Any, gr: runs.Group) -> Any:
    """Slot s of the table holds a page iff the run description says it is real."""
    return (pages[s] != 0) == runs.slot_real(t, s, gr, Z3)


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
    rlimit=2_000_000,
    executes=("reclaim", "slots.reclaim_cell", "slots.punched"),
)
def reclaim_slots(p: Prover) -> None:
    for g in every_kind()[1:]:
        _reclaim_slots(p, g)


def _reclaim_slots(p: Prover, g: Geometry) -> None:
    gr = group(g)
    tb, th = table(g, "", 2)
    pages = _pages("pages")
    f, s, F = ints("f s F")
    hyps = [*g.hyps, *th, f >= 0, f <= geo.extent(tb.slots, tb.tail, g.B), s >= 0]
    hyps += [s < tb.slots, _follows(tb, pages, s, gr)]
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
        _follows_cell(after, cell, s, gr),
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


def _follows_cell(t: runs.TableState, cell: Any, s: Any, gr: runs.Group) -> Any:
    return (cell != 0) == runs.slot_real(t, s, gr, Z3)


@theorem(
    "reclaimable-counts-what-reclaim-frees",
    """Executes blocks_reclaimable_at's rule (spec/slots.py reclaimable_cell) and reclaim's
    (slots.punched, then the pool's runs.drop_reference on the page's count) on one
    symbolic slot s of a table whose page ids, reference counts and names are unbounded
    arrays, on a symbolic band: with count_uncached, a slot is counted iff reclaim lets go
    of its page and the page re-enters the free queue (its count drops to 0); without it,
    iff besides that the page is named. As a table holds a page in one slot at most, the
    count blocks_reclaimable_at returns is the number of pages reclaim returns to the
    queue, shared pages (count >= 2) and holes excluded. Unbounded.""",
    """An engine can plan on blocks_reclaimable_at: it is exactly what the next reclaim
    gives back, whether or not prefix caching shares the pages.""",
    kills=("reclaimable-ignores-names", "reclaimable-counts-shared"),
    cost=1,
    rlimit=2_000_000,
    executes=("slots.reclaimable_cell", "slots.punched"),
)
def reclaimable_slots(p: Prover) -> None:
    pages, refs = _pages("pages"), _pages("refs")
    named = z3.Array("named", _I, z3.BoolSort())
    s, lo, hi = ints("s lo hi")
    every = z3.Bool("count_uncached")
    page = pages[s]
    hyps = [refs[page] >= z3.If(page == 0, 0, 1)]  # a page a slot holds has a holder
    counted = slots.reclaimable_cell(s, page, refs[page], named[page], every, lo, hi, Z3)
    _, re_enters = runs.drop_reference(refs[page], Z3)
    frees = z3.And(slots.punched(s, page, lo, hi, Z3), re_enters)
    show = {"s": s, "page": page, "ref": refs[page], "count_uncached": every}
    p.prove(
        "counted iff reclaim returns the page to the queue (named, unless count_uncached)",
        counted == z3.And(frees, z3.Or(every, named[page])),
        hyps,
        show,
    )


@theorem(
    "claim-places-matched-and-loaded-pages",
    """Executes the claim's slot rule (spec/slots.py claim_cell and loaded) on one symbolic
    slot s of a match of b slots (b unbounded; the matched device pages, host pages and
    the fresh device pages taken for host copies are unbounded arrays) and runs.claim_run
    for the run description the claim leaves, for a full group, a state group, a sliding
    group with A = 0 and a live-tail sliding group (B, W, m unbounded). The match is any
    match section 8 and 10 allow: below the resume pages (slots < b - R) nothing; at the
    resume pages (every slot for a full group) a device page or else a host copy. Then the
    claimed slot holds a page exactly where the claim's runs say (runs.slot_real): holes
    below the floor b - R, real pages from it on; a device-served slot holds its matched
    page; a host-served slot holds the fresh device page loaded for it, a real slot, never
    a hole. Unbounded.""",
    """A claimed request reads its resumed prefix from real pages only, and each host copy
    lands in the very slot that needs it.""",
    kills=("load-into-hole", "claim-cell-host-id"),
    cost=2,
    rlimit=2_000_000,
    executes=("claim_run", "slots.claim_cell"),
)
def claim_slots(p: Prover) -> None:
    for g in every_kind():
        gr = group(g)
        dev, host, fresh = _pages("device"), _pages("host"), _pages("fresh")
        b, s = ints("b s")
        resume = -1 if g.kind == "full" else geo.resume_pages(g.W, g.B, Z3)
        low = 0 if g.kind == "full" else Z3.max(0, b - resume)
        claimed = runs.claim_run(b, gr, resume, Z3)
        hyps = [*g.hyps, b >= 0, s >= 0, s < b]
        served = s >= low
        hyps += [
            z3.Implies(z3.Not(served), z3.And(dev[s] == 0, host[s] == 0)),
            z3.Implies(served, z3.Or(dev[s] != 0, host[s] != 0)),
            z3.Implies(dev[s] != 0, host[s] == 0),  # device copies preferred slot by slot
            z3.Implies(host[s] != 0, fresh[s] != 0),  # a fresh device page per host copy
        ]
        cell = slots.claim_cell(dev[s], host[s], fresh[s], Z3)
        show = {"s": s, "b": b, "device": dev[s], "host": host[s], "fresh": fresh[s], "slot": cell}
        label = f"[{g.label}]"
        p.prove(
            f"{label} the slot follows the claim's runs",
            _follows_cell(claimed, cell, s, gr),
            hyps,
            show,
        )
        p.prove(
            f"{label} a device-served slot holds its matched page",
            z3.Implies(dev[s] != 0, cell == dev[s]),
            hyps,
            show,
        )
        p.prove(
            f"{label} a host-served slot holds the page loaded for it",
            z3.Implies(host[s] != 0, cell == fresh[s]),
            hyps,
            show,
        )


@theorem(
    "offload-set-is-reachable-set",
    """Executes the offload's slot rule (spec/slots.py reachable, which the model's
    offload_set asks of every slot below n / B) on a symbolic slot j, token count n, page
    size B and lcm of q pages (all unbounded), for a full group, a state group and sliding
    groups (W unbounded): the rule picks exactly section 10's reachable slots. For a full
    group, the slots j < n / B; for a sliding or state group, the slots in [b - R, b) of
    some lcm boundary b (a multiple of q) with b*B <= n: every slot the rule picks lies
    behind such a boundary (the first boundary above it), and every slot behind one is
    picked. No slot at or past n / B is picked, so asking the slots below n / B is enough.
    Unbounded.""",
    """An offload copies to host memory exactly the pages a later match can use, and every
    one of them: nothing a hit needs is left on the device alone, nothing else takes host
    memory.""",
    kills=("offload-skips-resume-page",),
    cost=2,
    rlimit=2_200_000,
    executes=("slots.reachable",),
)
def offload_reachable(p: Prover) -> None:
    times = p.lemma(
        "lemma: x <= y and c >= 0 give x*c <= y*c",
        lambda x, y, c: ([x <= y, c >= 0], x * c <= y * c),
        3,
    )
    above = p.lemma(
        "lemma: j < k*q with q >= 1 gives j div q + 1 <= k",
        lambda j, k, q: ([j >= 0, q >= 1, j < k * q], j / q + 1 <= k),
        3,
    )
    # The rule does not read the alignment: live tail or not, a sliding group is the same.
    for g in every_kind()[:3]:
        j, n, q, k = ints("j n q k")
        full = g.kind == "full"
        R = -1 if full else geo.resume_pages(g.W, g.B, Z3)
        hyps = [*g.hyps, j >= 0, n >= 0, q >= 1]
        picked = slots.reachable(j, n, g.B, R, q, Z3)
        show = {"j": j, "n": n, "q": q, "picked": picked}
        label = f"[{g.label}]"
        p.prove(
            f"{label} a picked slot lies below n / B", z3.Implies(picked, j < n / g.B), hyps, show
        )
        if full:
            p.prove(
                f"{label} every slot below n / B is picked",
                z3.Implies(j < n / g.B, picked),
                hyps,
                show,
            )
            continue
        first = (j / q + 1) * q
        p.prove(
            f"{label} a picked slot lies behind a boundary b = the first multiple of q above it",
            z3.Implies(picked, z3.And(first * g.B <= n, first - R <= j, j < first)),
            hyps,
            show,
        )
        b = k * q
        # The first boundary above j is at or below b, so it is within n and j behind it.
        facts = [above(j, k, q), times(j / q + 1, k, q), times(first, b, g.B)]
        p.prove(
            f"{label} every slot behind a boundary b <= n / B is picked",
            z3.Implies(z3.And(k >= 1, b * g.B <= n, b - R <= j, j < b), picked),
            [*hyps, *facts],
            show,
        )


@theorem(
    "naming-reaches-every-resume-page",
    """Executes cache_full_blocks' slot rules (spec/slots.py offered and takes_name) on a
    symbolic slot j of a symbolic table of two runs (runs.slot_real for the pages its
    acquires placed and its reclaims left) at a naming frontier n up to the extent, for a
    full group, a state group, a sliding group with A = 0 and a live-tail sliding group
    whose alignment is the lcm (B, W, m unbounded). The engine names a chunk's pages before
    it reclaims for that chunk, with keys covering n, so the reclaim floor is at most the
    naming cursor u. Then every slot a later match at a boundary T <= n needs, and that no
    earlier call offered (j >= u), is offered a name now and holds a real page, which takes
    the name unless it has one: for a full group every slot below n / B; for a sliding group
    the R slots behind every lcm boundary b with b*B <= n (live tail included: the resume
    pages are real); for a state group the slot ending at n when n is a multiple of B (its
    chunk end). Unbounded.""",
    """Live tail never costs a prefix hit: every page a later match needs gets its name
    while it is still real, holes included in the table.""",
    kills=("names-skip-last-page",),
    cost=2,
    rlimit=2_500_000,
    executes=("run_real", "slots.offered", "slots.takes_name"),
)
def naming_reaches(p: Prover) -> None:
    cancel = p.lemma(
        "lemma: x*B <= y*B with B >= 1 gives x <= y",
        lambda x, y, B: ([B >= 1, x * B <= y * B], x <= y),
        3,
    )
    for g in every_kind():
        gr = group(g)
        tb, th = table(g, "", 2)
        n, u, j, k, q = ints("n u j k q")
        named = z3.Bool("named")
        covered = n / g.B  # keys cover n
        hyps = [*g.hyps, *th, n >= 0, n <= geo.extent(tb.slots, tb.tail, g.B), u >= 0]
        hyps += [tb.floor <= u, u <= covered, j >= u]
        if g.kind == "full":
            hyps += [tb.floor == 0]  # a full group never reclaims
        state = g.kind == "state"
        offer = slots.offered(j, n, g.B, u, covered, state, Z3)
        page = z3.If(runs.slot_real(tb, j, gr, Z3), z3.Int("page"), 0)
        hyps.append(z3.Int("page") >= 1)
        gets = z3.And(
            offer, runs.slot_real(tb, j, gr, Z3), slots.takes_name(page, named, Z3) == z3.Not(named)
        )
        label = f"[{g.label}]"
        show = {"j": j, "n": n, "u": u, "floor": tb.floor, "slots": tb.slots}
        if g.kind == "full":
            needed = j < covered
        elif state:
            needed = z3.And(n % g.B == 0, j == n / g.B - 1)
        else:
            # An lcm boundary b, a multiple of q (for live tail q = m: the alignment is the lcm).
            if g.live:
                hyps.append(q == g.m)
            hyps.append(q >= 1)
            b = k
            needed = z3.And(b >= 1, b % q == 0, b * g.B <= n, b - g.R() <= j, j < b)
            hyps.append(cancel(b, tb.slots, g.B))  # b*B <= n <= extent <= slots*B
            if g.live:
                kept = _kept(p, g)
                hyps += [kept(j, b, r.frontier) for r in tb.runs]
        if g.live:
            p.exhibit(f"{label} a needed slot past the cursor exists", [*hyps, needed], show)
        p.prove(
            f"{label} a needed slot past the cursor is offered, real, and named",
            z3.Implies(needed, gets),
            hyps,
            show,
        )


def _kept(p: Prover, g: Geometry) -> Any:
    """Lemma instantiator: a resume slot of an aligned boundary is live at every frontier."""
    return p.lemma(
        f"[{g.label}] lemma: a slot behind an aligned boundary is live at every frontier",
        lambda j, b, f: (
            [*g.hyps, b >= 1, b % g.m == 0, b - g.R() <= j, j < b, j >= 0, f >= 0],
            geo.live(j, f, g.W, g.B, g.A, Z3),
        ),
        3,
    )


@theorem(
    "step-plan-apply-never-fails",
    """Executes the spec's step plan (spec/runs.py plan_stepped over plan_fits, the rule the
    model's plan_step decides by) for two requests in priority order, each a symbolic table
    of one run (symbolic sizes, frontier, floor and tail room) with a symbolic token count,
    its pages held alone or shared with holders outside the plan (reference count c >= 1),
    symbolic free pages F, for a full group and a live-tail sliding group (B, W, m unbounded;
    a state group and a sliding group with A = 0 allocate exactly as a full group does, and a
    plan never reclaims): then applies it as
    apply_step does, runs.free_table on the preempted requests and runs.acquire on the
    stepped ones in priority order. Every stepped acquire succeeds; the free pages after
    are F + released - taken, the plan's free_after; the stepped prefix is the longest that
    fits (stepping one more would not fit with the rest preempted); and the top request is
    stepped whenever it fits with the other preempted. Unbounded in sizes and counts, for
    two requests that share no page with each other (pages shared between requests of one
    plan: step-plan-bounded and the differential campaign); for every live_count,
    ceil_div, extent, slid_out, tail_after and new_slots function (the facts the steps use
    are proved lemmas).""",
    """A step an engine plans never fails half-way, preempts no more than it must, and never
    starves the request at the head of its queue.""",
    kills=("plan-fits-strict",),
    cost=4,
    rlimit=8_800_000,
    executes=("plan_stepped", "free_table", "acquire"),
)
def step_plan(p: Prover) -> None:
    from .transitions import ARITH, count_lemmas, general, shape_facts, take_lemma

    # A state group and a sliding group with A = 0 allocate as a full group does (every new
    # slot real) and a plan never reclaims: full and live tail are the two acquires there are.
    kinds = every_kind()
    for g in (kinds[0], kinds[3]):
        gr = group(g)
        cf = count_lemmas(p, g)
        ext0, _ = shape_facts(p, g)
        take = take_lemma(p, g, cf, ext0)

        def setup(g: Geometry = g, gr: runs.Group = gr, take: Any = take) -> tuple[Any, ...]:
            F = z3.Int("F")
            tabs, hyps, ns, cs = [], [*g.hyps, F >= 0], [], []
            for i in range(2):
                t, th = table(g, f"_{i}", 1)
                n, c = ints(f"n_{i} c_{i}")
                tabs.append(t)
                ns.append(n)
                cs.append(c)
                hyps += [*th, n >= 0, c >= 1]
            needs = [
                geo.blocks_needed(t.slots, t.tail, n, g.W, g.B, g.A, Z3) for t, n in zip(tabs, ns)
            ]
            rel = [runs.free_table(0, t, gr, (c,), Z3).released for t, c in zip(tabs, cs)]

            def released_from(k: int) -> Any:
                return sum(rel[k:], z3.IntVal(0))

            k = runs.plan_stepped(needs, F, released_from, Z3)
            # apply_step: free the preempted (lowest priority first), then acquire in order.
            back = z3.If(k == 0, released_from(0), z3.If(k == 1, released_from(1), 0))
            a0 = runs.acquire(F + back, tabs[0], ns[0], gr, Z3)
            a1 = runs.acquire(z3.If(k >= 1, a0.free, F + back), tabs[1], ns[1], gr, Z3)
            hyps += take(tabs[0].slots, tabs[0].tail, ns[0], F + back)
            hyps += take(tabs[1].slots, tabs[1].tail, ns[1], z3.If(k >= 1, a0.free, F + back))
            hyps += [r >= 0 for r in rel]
            return F, needs, released_from, k, back, a0, a1, hyps

        def applies(setup: Any = setup) -> tuple[Any, Any]:
            F, needs, released_from, k, back, a0, a1, hyps = setup()
            after = z3.If(k == 2, a1.free, z3.If(k == 1, a0.free, F + back))
            taken = z3.If(k == 2, needs[0] + needs[1], z3.If(k == 1, needs[0], 0))
            claim = z3.And(
                z3.Implies(k >= 1, a0.ok),
                z3.Implies(k >= 2, a1.ok),
                after == F + back - taken,
            )
            return claim, hyps

        def longest(setup: Any = setup) -> tuple[Any, Any]:
            F, needs, released_from, k, back, a0, a1, hyps = setup()
            one_more = z3.And(
                z3.Implies(k == 0, needs[0] > F + released_from(1)),
                z3.Implies(k == 1, needs[0] + needs[1] > F),
            )
            top = z3.Implies(needs[0] <= F + released_from(1), k >= 1)
            return z3.And(one_more, top, k >= 0, k <= 2), hyps

        label = f"[{g.label}]"
        if g.kind == "full":
            free0, need, rel_from, stepped, *_, facts = setup()
            p.exhibit(
                f"{label} a plan that steps the top request and preempts the other exists",
                [*facts, stepped == 1, rel_from(1) >= 1, need[0] > free0],
            )
        general(
            p,
            g,
            f"{label} every stepped acquire succeeds; free after = free_after",
            applies,
            over=ARITH,
        )
        general(
            p,
            g,
            f"{label} the stepped prefix is the longest; the top request progresses",
            longest,
            over=ARITH,
        )


@theorem(
    "events-replay-to-the-names",
    """Executes the pool's event rules (spec/slots.py stores and removes, which the model's
    naming, eviction and evict_names decide by) on one name (group, key) carried by a
    symbolic number c >= 0 of pages, and replays the events as section 11 defines them (a
    stored event adds the name, a removed event drops it, a cleared event drops every
    name). Inductively: if the replayed set holds the name exactly when some page carries
    it (c > 0), it still does after naming one more page with it, after one of its pages
    loses it (eviction by an allocation, or evict_names), and after reset_names (every
    name dropped, one cleared event). The same rules serve the device pool and the host
    pool. Unbounded in the number of pages that share the name.""",
    """A router that replays an engine's event stream from the start holds exactly the names
    the engine holds, after every operation, however many copies of a prefix exist.""",
    kills=("removes-while-copies-remain",),
    cost=1,
    rlimit=2_000_000,
    executes=("slots.stores", "slots.removes"),
)
def events_replay(p: Prover) -> None:
    c = z3.Int("holders")
    held = z3.Bool("held")
    hyps = [c >= 0, held == (c > 0)]
    show = {"holders": c, "held": held}
    stored = slots.stores(c, Z3)
    p.prove(
        "naming one more page keeps replay = names",
        z3.Or(held, stored) == (c + 1 > 0),
        hyps,
        show,
    )
    removed = slots.removes(c - 1, Z3)
    p.prove(
        "a page losing the name keeps replay = names",
        z3.And(held, z3.Not(removed)) == (c - 1 > 0),
        [*hyps, c >= 1],
        show,
    )
    p.prove("reset_names keeps replay = names", z3.BoolVal(False) == (z3.IntVal(0) > 0), hyps, show)
