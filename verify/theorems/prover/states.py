"""Symbolic states for the theorems that execute the spec's transitions (``spec/runs.py``).

A symbolic table is a ``runs.TableState`` whose shape, floor and runs are Z3 terms, with
the hypotheses that make it a table some sequence of transitions can reach: runs are
contiguous from slot 0 and cover the slots, the tail room is valid, every run was placed
at a frontier no later than the extent, and the floor is at most the slid-out bound of
the extent (reclaims never pass the frontier).  The theorems call ``runs.acquire``,
``runs.reclaim``, ``runs.free_table`` and ``runs.coordinator_acquire`` on such states:
the spec's own code, never a re-typed copy of it.

The lemmas about the executed transitions that several theorems share (``count_lemmas``,
``take_lemma``, ``shape_facts``, ``general``) are here too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.spec import runs

from ...z3arith import Z3
from .prover import Prover
from .symbols import Geometry, Term, count_bounds_lemma, ints, shape, shape_lemma
from .terms import uninterpreted


def group(g: Geometry) -> runs.Group:
    return runs.Group(g.B, g.W, g.A, g.kind != "full")


def table(g: Geometry, tag: str, k: int) -> tuple[runs.TableState, list[Term]]:
    """A reachable table of k runs with symbolic sizes, and the hypotheses it satisfies."""
    counts = [z3.Int(f"count{i}{tag}") for i in range(k)]
    fronts = [z3.Int(f"frontier{i}{tag}") for i in range(k)]
    tail, floor = z3.Int(f"tail{tag}"), z3.Int(f"floor{tag}")
    rs: list[runs.Run] = []
    first: Term = z3.IntVal(0)
    for c, f in zip(counts, fronts):
        rs.append(runs.Run(first, c, f))
        first = first + c
    slots = first
    ext = geo.extent(slots, tail, g.B)
    hyps = [*shape(slots, tail, g.B), floor >= 0, floor <= slots]
    hyps.append(floor <= geo.slid_out(ext, g.W, g.B, Z3))
    for r in rs:
        hyps += [r.count >= 0, r.frontier >= 0, r.frontier <= ext]
    return runs.TableState(slots, tail, floor, tuple(rs)), hyps


def extent(t: runs.TableState, g: Geometry) -> Term:
    return geo.extent(t.slots, t.tail, g.B)


def real_in_lemmas(p: Prover, g: Geometry, cb: Any = None) -> tuple[Any, Any]:
    """Two facts about ``runs.real_in`` for every resume-count function, as instantiators.

    bounds(first, count, frontier, lo, hi): 0 <= real_in <= number of slots in the range;
    split(first, count, frontier, x, y, z): x <= y <= z => real_in(x, z) = real_in(x, y) +
    real_in(y, z).  Both are proved with ``resume_count_below`` unknown (so for any count of
    resume slots, in particular the proved one) and live_count's monotone step proved by
    the count-bounds induction.
    """
    gr = group(g)
    first, count, fr, x, y, z = (z3.Int(n) for n in ["rf", "rc", "rt", "rx", "ry", "rz"])
    base = [*g.hyps, first >= 0, count >= 0, fr >= 0]
    run = runs.Run(first, count, fr)
    with uninterpreted(geo, "resume_count_below"):
        p.prove(
            f"[{g.label}] real_in(x, z) = real_in(x, y) + real_in(y, z) for x <= y <= z",
            runs.real_in(run, x, z, gr, Z3)
            == runs.real_in(run, x, y, gr, Z3) + runs.real_in(run, y, z, gr, Z3),
            [*base, x <= y, y <= z],
        )

    def split(first: Term, count: Term, fr: Term, x: Term, y: Term, z: Term) -> Term:
        r = runs.Run(first, count, fr)
        return z3.Implies(
            z3.And(*g.hyps, first >= 0, count >= 0, fr >= 0, x <= y, y <= z),
            runs.real_in(r, x, z, gr, Z3)
            == runs.real_in(r, x, y, gr, Z3) + runs.real_in(r, y, z, gr, Z3),
        )

    if cb is None and g.live:
        cb = count_bounds_lemma(p, g)

    def facts(first: Term, count: Term, fr: Term, lo: Term, hi: Term) -> list[Term]:
        a = Z3.min(Z3.max(lo, first), first + count)
        e = Z3.min(Z3.max(hi, a), first + count)
        return [cb(a, e - a, fr)] if cb is not None else []

    def bound_build(first: Term, count: Term, fr: Term, lo: Term, hi: Term) -> tuple[Any, ...]:
        r = runs.Run(first, count, fr)
        v = runs.real_in(r, lo, hi, gr, Z3)
        return (
            [*g.hyps, first >= 0, count >= 0, fr >= 0],
            z3.And(v >= 0, v <= count),
            facts(first, count, fr, lo, hi),
        )

    def bound_opaque(first: Term, count: Term, fr: Term, lo: Term, hi: Term) -> list[Term]:
        return [runs.real_in(runs.Run(first, count, fr), lo, hi, gr, Z3)] if g.live else []

    bounds = p.lemma(
        f"[{g.label}] lemma: 0 <= real_in(run, lo, hi) <= count", bound_build, 5, bound_opaque
    )
    return bounds, split


def table_needed(g: Geometry, t: runs.TableState, n: Term) -> Term:
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
        need = table_needed(g, st, n)
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


def shape_facts(p: Prover, g: Geometry) -> tuple[Any, Any]:
    """Instantiators: a valid shape has extent >= 0; acquire(n) leaves a valid shape, extent + n."""
    ext0 = p.lemma(
        f"[{g.label}] lemma: a valid shape has extent >= 0",
        lambda s, t: ([*g.hyps, *shape(s, t, g.B)], geo.extent(s, t, g.B) >= 0),
        2,
    )
    return ext0, shape_lemma(p, g)


def slot_pages(name: str) -> Any:
    """A table's page ids, slot by slot: an unbounded Z3 array from slot to page (0 = hole)."""
    return z3.Array(name, z3.IntSort(), z3.IntSort())


def follows_runs(t: runs.TableState, page: Term, s: Term, gr: runs.Group) -> Term:
    """Slot s holds a page (``page`` != 0) iff the run description says it is real."""
    return (page != 0) == runs.slot_real(t, s, gr, Z3)
