"""Symbols, domains and shared lemmas for the theorems.

Every closed form is reached through the module attribute (``geo.live(...)``), never
imported by name, so a wrong variant that patches ``livetail.spec.geometry`` is what the
theorems see.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo

from ...z3arith import Z3
from .prover import Prover

Term = Any


def ints(names: str) -> list[Term]:
    return [z3.Int(n) for n in names.split()]


def indicator(c: Term) -> Term:
    return z3.If(c, z3.IntVal(1), z3.IntVal(0))


@dataclass(frozen=True)
class Geometry:
    """A symbolic group geometry: page size B, window W, alignment A (= m*B, or 0)."""

    B: Term
    W: Term
    A: Term  # a Z3 term m*B, or the Python int 0 (live tail off)
    m: Term  # slots per alignment block (1 when off)
    hyps: tuple[Term, ...]
    label: str
    kind: str  # "live", "full", "state", "sliding" (A = 0): what a trace builds

    @property
    def live(self) -> bool:
        return not (isinstance(self.A, int) and self.A == 0)

    def R(self) -> Term:
        return geo.resume_pages(self.W, self.B, Z3)

    def kept(self) -> Term:
        return geo.kept_per_period(self.W, self.B, self.A, Z3)

    def period(self) -> Term:
        return geo.period(self.A, self.B, Z3)


def live_tail(suffix: str = "") -> Geometry:
    """Live-tail sliding group: B >= 1, W >= 1, A = m*B with m >= 1 (all unbounded)."""
    B, W, m = ints(f"B{suffix} W{suffix} m{suffix}")
    return Geometry(B, W, m * B, m, (B >= 1, W >= 1, m >= 1), "live-tail sliding (A = m*B)", "live")


def full_alloc(kind: str, suffix: str = "") -> Geometry:
    """A = 0: full (window unused, the model passes 1), state (W = 2) or plain sliding (any W)."""
    B, W = ints(f"B{suffix} W{suffix}")
    if kind == "full":
        return Geometry(B, z3.IntVal(1), 0, z3.IntVal(1), (B >= 1,), "full", "full")
    if kind == "state":
        return Geometry(B, z3.IntVal(2), 0, z3.IntVal(1), (B >= 1,), "state (W = 2)", "state")
    return Geometry(
        B, W, 0, z3.IntVal(1), (B >= 1, W >= 1), "sliding, live tail off (A = 0)", "sliding"
    )


def every_kind(suffix: str = "") -> list[Geometry]:
    return [
        full_alloc("full", suffix),
        full_alloc("state", suffix),
        full_alloc("sliding", suffix),
        live_tail(suffix),
    ]


def shape(slots: Term, tail: Term, B: Term) -> list[Term]:
    """A valid table shape: tail room in [0, B-1], and 0 for an empty table."""
    return [slots >= 0, tail >= 0, tail <= B - 1, z3.Implies(slots == 0, tail == 0)]


def slot_by_slot_count(p: Prover, g: Geometry, tag: str) -> None:
    """live_count(first, new, f) = #{s in [first, first+new) : live(s, f)}, by induction on new.

    Base new = 0; step new -> new+1 adds exactly [live(first+new, f)].  slid_out(f) is
    abstracted by a fresh value >= 0 after proving slid_out(f) >= 0 (the step depends on f
    only through it; the direct query is seed-sensitive).
    """
    first, new, f = ints(f"first{tag} new{tag} f{tag}")
    hyps = [*g.hyps, first >= 0, new >= 0, f >= 0]

    def lc(k: Term) -> Term:
        return geo.live_count(first, k, f, g.W, g.B, g.A, Z3)

    p.prove(f"[{g.label}] count base: live_count(first, 0, f) = 0", lc(0) == 0, hyps)
    step = lc(new + 1) - lc(new) == indicator(geo.live(first + new, f, g.W, g.B, g.A, Z3))
    if g.live:
        S = geo.slid_out(f, g.W, g.B, Z3)
        p.prove(f"[{g.label}] slid_out(f) >= 0", S >= 0, hyps)
        p.prove(
            f"[{g.label}] count step: live_count(first, new+1, f) - live_count(first, new, f)"
            " = [live(first+new, f)]",
            step,
            [*hyps, S >= 0],
            opaque=[S],
        )
    else:
        p.prove(
            f"[{g.label}] count step: live_count(first, new+1, f) - live_count(first, new, f)"
            " = [live(first+new, f)]",
            step,
            hyps,
        )


def acquire_shape(p: Prover, B: Term, tag: str) -> None:
    """The shape an acquire leaves: fewest new slots, valid tail room, extent grows by n."""
    slots, tail, n = ints(f"slots{tag} tail{tag} n{tag}")
    hyps = [B >= 1, *shape(slots, tail, B), n >= 0]
    new = geo.new_slots(tail, B, n, Z3)
    tail1 = geo.tail_after(tail, B, n, Z3)
    over = n - tail
    p.prove(
        "acquire shape: n > tail appends the fewest slots that hold n - tail tokens",
        z3.Implies(n > tail, z3.And(new >= 1, (new - 1) * B < over, over <= new * B)),
        hyps,
    )
    p.prove(
        "acquire shape: n <= tail appends nothing and uses tail room",
        z3.Implies(n <= tail, z3.And(new == 0, tail1 == tail - n)),
        hyps,
    )
    p.prove(
        "acquire shape: the new shape is valid and its extent is extent + n",
        z3.And(
            *shape(slots + new, tail1, B),
            geo.extent(slots + new, tail1, B) == geo.extent(slots, tail, B) + n,
        ),
        hyps,
    )


# --- reusable lemmas (proved, then instantiated on concrete terms) --------------------------


def needed(g: Geometry, slots: Term, tail: Term, n: Term) -> Term:
    return geo.blocks_needed(slots, tail, n, g.W, g.B, g.A, Z3)


def sequential(g: Geometry, slots: Term, tail: Term, first: Term, extra: Term) -> Term:
    return geo.blocks_needed_sequential(slots, tail, first, extra, g.W, g.B, g.A, Z3)


def after(g: Geometry, slots: Term, tail: Term, n: Term) -> tuple[Term, Term]:
    """The table shape (slots, tail) acquire(n) leaves."""
    return slots + geo.new_slots(tail, g.B, n, Z3), geo.tail_after(tail, g.B, n, Z3)


def shape_lemma(p: Prover, g: Geometry) -> Any:
    """after(shape, n) is a valid shape with extent + n tokens (instantiator over s, t, n)."""

    def build(s: Term, t: Term, n: Term) -> tuple[list[Term], Term]:
        s1, t1 = after(g, s, t, n)
        claim = z3.And(*shape(s1, t1, g.B), geo.extent(s1, t1, g.B) == geo.extent(s, t, g.B) + n)
        return [*g.hyps, *shape(s, t, g.B), n >= 0], claim

    return p.lemma(f"[{g.label}] lemma: acquire leaves a valid shape, extent + n", build, 3)


def count_bounds_lemma(p: Prover, g: Geometry) -> Any:
    """0 <= live_count(first, new, f) <= new (instantiator over first, new, f).

    By induction on new for live tail; directly when A = 0 (live_count = new).
    """
    if not g.live:
        return p.lemma(
            f"[{g.label}] lemma: 0 <= live_count(first, new, f) <= new",
            lambda first, new, f: (
                [*g.hyps, first >= 0, new >= 0, f >= 0],
                z3.And(
                    geo.live_count(first, new, f, g.W, g.B, g.A, Z3) >= 0,
                    geo.live_count(first, new, f, g.W, g.B, g.A, Z3) <= new,
                ),
            ),
            3,
        )
    first, new, f = ints("bfirst bnew bf")
    hyps = [*g.hyps, first >= 0, new >= 0, f >= 0]

    def lc(k: Term) -> Term:
        return geo.live_count(first, k, f, g.W, g.B, g.A, Z3)

    p.prove(f"[{g.label}] count bounds base: live_count(first, 0, f) = 0", lc(0) == 0, hyps)
    S = geo.slid_out(f, g.W, g.B, Z3)
    step = lc(new + 1) - lc(new) == indicator(geo.live(first + new, f, g.W, g.B, g.A, Z3))
    p.prove(f"[{g.label}] count bounds: slid_out(f) >= 0", S >= 0, hyps)
    p.prove(
        f"[{g.label}] count bounds step: live_count grows by 0 or 1 per slot",
        step,
        [*hyps, S >= 0],
        opaque=[S],
    )
    p.prove(
        f"[{g.label}] count bounds induction: 0 <= live_count(new) <= new => same for new+1",
        z3.Implies(
            z3.And(lc(new) >= 0, lc(new) <= new),
            z3.And(lc(new + 1) >= 0, lc(new + 1) <= new + 1),
        ),
        [*hyps, step],
        opaque=[lc(new), lc(new + 1), geo.live(first + new, f, g.W, g.B, g.A, Z3)],
    )

    def count_bounds(first: Term, new: Term, f: Term) -> Term:
        c = geo.live_count(first, new, f, g.W, g.B, g.A, Z3)
        return z3.Implies(z3.And(*g.hyps, first >= 0, new >= 0, f >= 0), z3.And(c >= 0, c <= new))

    return count_bounds


def needed_bounds_lemma(p: Prover, g: Geometry, count_bounds: Any = None) -> Any:
    """0 <= blocks_needed(shape, n) <= new slots (instantiator over s, t, n)."""
    if g.live and count_bounds is None:
        count_bounds = count_bounds_lemma(p, g)

    def build(s: Term, t: Term, n: Term) -> tuple[Any, ...]:
        bn = needed(g, s, t, n)
        facts = []
        if g.live:
            new = geo.ceil_div(n - t, g.B, Z3)
            facts = [count_bounds(s, new, geo.extent(s, t, g.B) + n)]
        return (
            [*g.hyps, *shape(s, t, g.B), n >= 0],
            z3.And(bn >= 0, bn <= geo.new_slots(t, g.B, n, Z3)),
            facts,
        )

    opaque = None
    if g.live:

        def opaque(s: Term, t: Term, n: Term) -> list[Term]:
            new = geo.ceil_div(n - t, g.B, Z3)
            return [geo.live_count(s, new, geo.extent(s, t, g.B) + n, g.W, g.B, g.A, Z3)]

    return p.lemma(f"[{g.label}] lemma: 0 <= blocks_needed <= new slots", build, 3, opaque)


def ceil_lemma(p: Prover, g: Geometry) -> Any:
    """E = extent + n => slots + new_slots(tail, B, n) = ceil(E / B) (instantiator s, t, n, E).

    E is an argument so that instances for different shapes reaching the same extent share
    one ceil term (no congruence reasoning over equal arguments of a division needed).
    """

    def build(s: Term, t: Term, n: Term, E: Term) -> tuple[list[Term], Term]:
        total = s + geo.new_slots(t, g.B, n, Z3)
        return [*g.hyps, *shape(s, t, g.B), n >= 0, geo.extent(s, t, g.B) + n == E], (
            total == geo.ceil_div(E, g.B, Z3)
        )

    return p.lemma(f"[{g.label}] lemma: slots after acquire(n) = ceil((extent + n) / B)", build, 4)


def charge_setup(g: Geometry) -> tuple[list[Term], Term, Term, Term, Term]:
    """The symbols of a charge query (a table shape, first and extra) and their hypotheses."""
    slots, tail, first, extra = ints("slots tail first extra")
    return (
        [*g.hyps, *shape(slots, tail, g.B), first >= 0, extra >= 0],
        slots,
        tail,
        first,
        extra,
    )
