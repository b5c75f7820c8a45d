"""Symbolic states for the theorems that execute the spec's transitions (``spec/runs.py``).

A symbolic table is a ``runs.TableState`` whose shape, floor and runs are Z3 terms, with
the hypotheses that make it a table some sequence of transitions can reach: runs are
contiguous from slot 0 and cover the slots, the tail room is valid, every run was placed
at a frontier no later than the extent, and the floor is at most the slid-out bound of
the extent (reclaims never pass the frontier).  The theorems call ``runs.acquire``,
``runs.reclaim``, ``runs.free_table`` and ``runs.coordinator_acquire`` on such states:
the spec's own code, never a re-typed copy of it.
"""

from __future__ import annotations

from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.spec import runs

from ..z3arith import Z3
from ._common import Geometry, Term, shape
from ._prover import Prover, uninterpreted


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

    from ._common import count_bounds_lemma

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
