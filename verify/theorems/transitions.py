"""Section 7.1 and 7.3 over the executed transitions: all-or-nothing and the admission promise.

Every theorem here calls the spec's transitions (``spec/runs.py``: ``acquire``,
``reclaim``, ``coordinator_acquire``) on symbolic states and reads the resulting state;
the queries it compares them with (``blocks_needed``, ``blocks_needed_sequential``) are
the spec's closed forms.  No formula of a transition is re-typed here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.spec import runs

from ..z3arith import Z3
from ._common import (
    Geometry,
    Term,
    count_bounds_lemma,
    every_kind,
    ints,
    shape,
    shape_lemma,
)
from ._prover import Prover
from ._registry import theorem
from ._runs import extent, group, real_in_lemmas, table
from ._traces import transition_traces


def _needed(g: Geometry, t: runs.TableState, n: Term) -> Term:
    return geo.blocks_needed(t.slots, t.tail, n, g.W, g.B, g.A, Z3)


@dataclass(frozen=True)
class CountFacts:
    """Instances of proved facts about live_count, for steps that make it an unknown function.

    zero(x, f): live_count(x, 0, f) = 0; bounds(x, k, f): 0 <= live_count(x, k, f) <= k;
    whole(x, k, f): live_count(x, k, f) = k when live tail is off (A = 0).  Each returns a
    list of implications (empty where the geometry needs none).
    """

    zero: Callable[[Term, Term], list[Term]]
    bounds: Callable[[Term, Term, Term], list[Term]]
    whole: Callable[[Term, Term, Term], list[Term]]
    cb: Any = None  # the count-bounds instantiator itself (live tail only)
    ceil: Any = None  # ceil(a): a >= 0 => ceil_div(a, B) >= 0


def count_lemmas(p: Prover, g: Geometry) -> CountFacts:
    def lc(x: Term, k: Term, f: Term) -> Term:
        return geo.live_count(x, k, f, g.W, g.B, g.A, Z3)

    ceil0 = p.lemma(
        f"[{g.label}] lemma: ceil_div(a, B) >= 0 for a >= 0",
        lambda a: ([*g.hyps, a >= 0], geo.ceil_div(a, g.B, Z3) >= 0),
        1,
    )
    ns = p.lemma(
        f"[{g.label}] lemma: new_slots(tail, B, n) is ceil_div(n - tail, B) past the tail, else 0",
        lambda t, n: (
            [*g.hyps, t >= 0, n >= 0],
            geo.new_slots(t, g.B, n, Z3) == z3.If(n > t, geo.ceil_div(n - t, g.B, Z3), 0),
        ),
        2,
    )

    def ceil(t: Term, n: Term) -> list[Term]:
        return [ceil0(n - t), ns(t, n)]

    if not g.live:
        whole = p.lemma(
            f"[{g.label}] lemma: live_count(first, k, f) = k (every slot real)",
            lambda x, k, f: ([*g.hyps, x >= 0, k >= 0, f >= 0], lc(x, k, f) == k),
            3,
        )
        return CountFacts(
            lambda x, f: [whole(x, 0, f)],
            lambda x, k, f: [],
            lambda x, k, f: [whole(x, k, f)],
            None,
            ceil,
        )
    cb = count_bounds_lemma(p, g)
    zero = p.lemma(
        f"[{g.label}] lemma: live_count(first, 0, f) = 0",
        lambda x, f: ([*g.hyps, x >= 0, f >= 0], lc(x, 0, f) == 0),
        2,
    )
    return CountFacts(
        lambda x, f: [zero(x, f)], lambda x, k, f: [cb(x, k, f)], lambda x, k, f: [], cb, ceil
    )


ARITH = [
    (geo, "live_count"),
    (geo, "ceil_div"),
    (geo, "extent"),
    (geo, "slid_out"),
    (geo, "tail_after"),
    (geo, "new_slots"),
]
"""Closed forms a step about composed transitions never needs to look inside."""


def take_lemma(p: Prover, g: Geometry, cf: CountFacts, ext0: Any) -> Any:
    """The executed acquire against blocks_needed_for, as an instantiator over (slots, tail, n, F).

    Proved for every live_count, ceil_div, extent, slid_out, tail_after and new_slots
    function satisfying the count facts: ``runs.acquire(F, shape, n)`` succeeds iff
    ``blocks_needed_for(n) <= F``, then takes exactly that many pages, else none, and the
    need is >= 0.  This is the step that compares the transition's actual take with the
    closed form: with ``blocks_needed`` unknown it does not prove.  An instance is the list
    of the count facts it rests on (proved lemmas) and the implication itself.
    """
    gr = group(g)

    def facts(s: Term, t: Term, n: Term) -> list[Term]:
        e = geo.extent(s, t, g.B) + n
        out = [ext0(s, t), *cf.ceil(t, n), *cf.zero(s, e)]
        out += cf.whole(s, geo.new_slots(t, g.B, n, Z3), e)
        return out + cf.bounds(s, geo.ceil_div(n - t, g.B, Z3), e)

    def build(s: Term, t: Term, n: Term, F: Term) -> tuple[list[Term], Term]:
        st = runs.TableState(s, t, 0, ())
        step = runs.acquire(F, st, n, gr, Z3)
        need = _needed(g, st, n)
        fits = need <= F
        return [*g.hyps, *shape(s, t, g.B), n >= 0], z3.And(
            need >= 0,
            step.ok == fits,
            step.take == z3.If(fits, need, 0),
            step.free == F - step.take,
        )

    tag = "".join(c for c in g.label if c.isalnum())
    xs = ints(f"take_s_{tag} take_t_{tag} take_n_{tag} take_F_{tag}")

    def general_build() -> tuple[Term, list[Term]]:
        h, c = build(*xs)
        return c, [*h, *facts(*xs[:3])]

    p.prove_general(
        f"[{g.label}] lemma: the executed acquire takes blocks_needed_for(n) if it fits, else 0",
        general_build,
        ARITH,
    )

    def instance(s: Term, t: Term, n: Term, F: Term) -> list[Term]:
        h, c = build(s, t, n, F)
        return [*facts(s, t, n), z3.Implies(z3.And(*h, *facts(s, t, n)), c)]

    return instance


def general(
    p: Prover, g: Geometry, name: str, build: Any, show: Any = None, over: Any = None
) -> None:
    """Prove for every live_count function (its facts come as lemma instances in the hyps)."""
    del g
    p.prove_general(name, build, over or [(geo, "live_count")], show=show)


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
        return t, F, n, hyps, step, _needed(g, t, n)

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
        needs = [_needed(g, t, n) for g, t in zip(gs, tabs)]
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


@theorem(
    "admission-promise",
    """Executes acquire(first), reclaim_expired(f) at any frontier f up to the extent, and
    acquire(extra) (spec/runs.py) from a symbolic table of two earlier runs whose pages may be
    shared (any reference counts >= 1), with symbolic free pages F, for every manager kind
    (full; state; sliding with A = 0; live-tail sliding with A = m*B; B, W, m unbounded): when
    blocks_needed_for_sequential(first, extra) <= F neither acquire fails, the pages pinned
    after each of the three operations never exceed the pages pinned before plus the charge,
    and without the reclaim the two acquires pin exactly the charge. The charge is compared
    with the executed acquire(first) then acquire(extra) by a lemma (it does not prove with
    blocks_needed_for_sequential made unknown). Unbounded, for every live_count, ceil_div,
    extent, slid_out, tail_after and new_slots function (the facts about them the steps use
    are proved lemmas).""",
    """An engine that admits a request only when the sequential charge fits the free pages
    can never run out of pages in the middle of the chunk or the decode step, whatever it
    reclaims between them.""",
    cost=8,
    rlimit=28_000_000,
    executes=("acquire", "reclaim"),
    trace=transition_traces("admission-promise"),
)
def admission_promise(p: Prover) -> None:
    for g in every_kind():
        _admission_kind(p, g)


def shape_facts(p: Prover, g: Geometry) -> tuple[Any, Any]:
    """Instantiators: a valid shape has extent >= 0; acquire(n) leaves a valid shape, extent + n."""
    ext0 = p.lemma(
        f"[{g.label}] lemma: a valid shape has extent >= 0",
        lambda s, t: ([*g.hyps, *shape(s, t, g.B)], geo.extent(s, t, g.B) >= 0),
        2,
    )
    return ext0, shape_lemma(p, g)


def charge_lemma(p: Prover, g: Geometry, take: Any, after: Any) -> Any:
    """The charge against the executed acquires, as an instantiator over (slots, tail, first,
    extra, F).

    When blocks_needed_for_sequential(first, extra) <= F, ``runs.acquire(first)`` and then
    ``runs.acquire(extra)`` on the table it leaves both succeed, the first takes at most the
    charge and the two together exactly the charge.  Proved for every live_count, ceil_div,
    extent, slid_out, tail_after and new_slots function from instances of the take lemma;
    this is the step that compares the transitions with the charge: with
    ``blocks_needed_sequential`` unknown it does not prove.  An instance is the list of the
    proved facts it rests on and the implication itself.
    """
    gr = group(g)

    def facts(s: Term, t: Term, first: Term, extra: Term, F: Term) -> list[Term]:
        a1 = runs.acquire(F, runs.TableState(s, t, 0, ()), first, gr, Z3)
        s1 = s + geo.new_slots(t, g.B, first, Z3)
        t1 = geo.tail_after(t, g.B, first, Z3)
        return [after(s, t, first), *take(s, t, first, F), *take(s1, t1, extra, a1.free)]

    def build(s: Term, t: Term, first: Term, extra: Term, F: Term) -> tuple[list[Term], Term]:
        charge = geo.blocks_needed_sequential(s, t, first, extra, g.W, g.B, g.A, Z3)
        a1 = runs.acquire(F, runs.TableState(s, t, 0, ()), first, gr, Z3)
        a2 = runs.acquire(a1.free, a1.table, extra, gr, Z3)
        hyps = [*g.hyps, *shape(s, t, g.B), first >= 0, extra >= 0, charge <= F]
        claim = z3.And(a1.ok, a2.ok, F - a1.free <= charge, F - a2.free == charge)
        return hyps, claim

    tag = "".join(c for c in g.label if c.isalnum())
    xs = ints(f"ch_s_{tag} ch_t_{tag} ch_first_{tag} ch_extra_{tag} ch_F_{tag}")

    def general_build() -> tuple[Term, list[Term]]:
        h, c = build(*xs)
        return c, [*h, *facts(*xs)]

    p.prove_general(
        f"[{g.label}] lemma: when the charge fits, the executed acquire(first) then"
        " acquire(extra) succeed and take exactly the charge",
        general_build,
        ARITH,
    )

    def instance(s: Term, t: Term, first: Term, extra: Term, F: Term) -> list[Term]:
        h, c = build(s, t, first, extra, F)
        fs = facts(s, t, first, extra, F)
        return [*fs, z3.Implies(z3.And(*h, *fs), c)]

    return instance


def _admission_kind(p: Prover, g: Geometry) -> None:
    gr = group(g)
    cf = count_lemmas(p, g)
    bounds, _ = real_in_lemmas(p, g, cf.cb)
    ext0, after = shape_facts(p, g)
    charged = charge_lemma(p, g, take_lemma(p, g, cf, ext0), after)

    def setup() -> tuple[Any, ...]:
        t, th = table(g, "", 2)
        F, first, extra, f, r1, r2 = ints("F first extra f ref0 ref1")
        charge = geo.blocks_needed_sequential(t.slots, t.tail, first, extra, g.W, g.B, g.A, Z3)
        hyps = [*g.hyps, *th, F >= 0, first >= 0, extra >= 0, r1 >= 1, r2 >= 1, charge <= F]
        a1 = runs.acquire(F, t, first, gr, Z3)
        hyps += [f >= 0, f <= extent(a1.table, g)]
        rec = runs.reclaim(a1.free, a1.table, f, gr, (r1, r2, z3.IntVal(1)), Z3)
        a2 = runs.acquire(rec.free, rec.table, extra, gr, Z3)
        plain = runs.acquire(a1.free, a1.table, extra, gr, Z3)
        hyps += charged(t.slots, t.tail, first, extra, F)
        b = geo.reclaim_bound(f, a1.table.slots, g.W, g.B, Z3)
        lo, hi = runs.reclaim_band(a1.table.floor, b, Z3)
        hyps += [
            bounds(r.first, r.count, r.frontier, Z3.max(lo, a1.table.floor), hi)
            for r in a1.table.runs
        ]
        return F, charge, hyps, a1, rec, a2, plain

    def promise() -> tuple[Any, Any]:
        F, charge, hyps, a1, rec, a2, plain = setup()
        return z3.And(
            a1.ok, a2.ok, F - a1.free <= charge, F - rec.free <= charge, F - a2.free <= charge
        ), hyps

    def peak() -> tuple[Any, Any]:
        F, charge, hyps, a1, rec, a2, plain = setup()
        return z3.And(plain.ok, F - plain.free == charge), hyps

    general(
        p,
        g,
        f"[{g.label}] neither acquire fails; pinned <= pinned before + charge",
        promise,
        over=ARITH,
    )
    general(
        p,
        g,
        f"[{g.label}] without the reclaim the acquires pin exactly the charge",
        peak,
        over=ARITH,
    )
