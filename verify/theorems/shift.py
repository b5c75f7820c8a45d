"""Section 6: charges on fresh tables, and why a claimed prefix must end on an lcm multiple."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo

from ..z3arith import Z3
from .prover.prover import Prover
from .prover.query import Values
from .prover.symbols import (
    Term,
    after,
    every_kind,
    indicator,
    ints,
    live_tail,
    needed,
    sequential,
    shape,
    shape_lemma,
    slot_by_slot_count,
)
from .prover.theorem import theorem
from .prover.traces import shift_trace

# --- shift invariance -------------------------------------------------------------------------


@theorem(
    "shift-invariance-by-alignment",
    """For every geometry and every table whose extent is a multiple of the alignment A
    (j*m slots, no tail room, j >= 0), blocks_needed_for(n) and
    blocks_needed_for_sequential(first, extra) equal their values on a fresh table, for all
    counts. More generally, prefixing any table with j*m slots changes no charge. Unbounded
    (for A = 0: any number of slots). Proof: live(s + j*m, f + j*A) = live(s, f), then
    induction on the number of new slots.""",
    """After a prefix-cache hit at an lcm boundary, charging the rest of the prompt on
    fresh tables is exact: an engine can price admission before it claims.""",
    cost=4,
    rlimit=9_700_000,
)
def shift_invariance(p: Prover) -> None:
    g = live_tail()
    B, W, A, m = g.B, g.W, g.A, g.m
    P = g.period()

    def LC(first: Term, new: Term, f: Term) -> Term:
        return geo.live_count(first, new, f, W, B, A, Z3)

    def LV(s: Term, f: Term) -> Term:
        return geo.live(s, f, W, B, A, Z3)

    slot_by_slot_count(p, g, "")  # count base and step, for every first, new, f

    def count_step(first: Term, new: Term, f: Term) -> Term:
        return LC(first, new + 1, f) - LC(first, new, f) == indicator(LV(first + new, f))

    p.prove("period(m*B) = m", m == P, list(g.hyps))
    div_shift = p.lemma(
        "lemma: D = n0*B + d => D div B = n0 + d div B",
        lambda D, n0, d: ([B >= 1, n0 * B + d == D], n0 + d / B == D / B),
        3,
    )
    mod_shift = p.lemma(
        "lemma: q divides n0 => (n0+x) div q = n0 div q + x div q, (n0+x) mod q = x mod q",
        lambda n0, x, q: (
            [q >= 1, n0 >= 0, x >= 0, n0 % q == 0],
            z3.And((n0 + x) / q == n0 / q + x / q, (n0 + x) % q == x % q),
        ),
        3,
    )
    pointwise = p.lemma(
        "lemma: live(x + n0, f + n0*B) = live(x, f) when m divides n0",
        lambda n0, X, x, F, f: (
            [*g.hyps, n0 >= 0, n0 % m == 0, x >= 0, f >= 0, n0 + x == X, n0 * B + f == F],
            LV(X, F) == LV(x, f),
            [m == P, div_shift(F - W + 1, n0, f - W + 1), mod_shift(n0, x, P)],
        ),
        5,
    )
    n0, first, new, F, f = ints("n0 first new F f")
    H = [*g.hyps, n0 >= 0, n0 % m == 0, first >= 0, f >= 0, new >= 0, n0 * B + f == F]
    p.prove(
        "shift base: live_count(n0+first, 0, F) = live_count(first, 0, f)",
        LC(n0 + first, 0, F) == LC(first, 0, f),
        H,
    )
    p.prove(
        "shift step: equal live counts stay equal when one slot is added",
        z3.Implies(
            LC(n0 + first, new, F) == LC(first, new, f),
            LC(n0 + first, new + 1, F) == LC(first, new + 1, f),
        ),
        [
            *H,
            count_step(n0 + first, new, F),
            count_step(first, new, f),
            pointwise(n0, (n0 + first) + new, first + new, F, f),
        ],
        opaque=[
            LC(n0 + first, new, F),
            LC(first, new, f),
            LC(n0 + first, new + 1, F),
            LC(first, new + 1, f),
            LV((n0 + first) + new, F),
            LV(first + new, f),
        ],
    )

    def count_shift(n0: Term, S: Term, first: Term, new: Term, F: Term, f: Term) -> Term:
        """The induction's conclusion, for every new >= 0 (base + step above), at S = n0+first."""
        return z3.Implies(
            z3.And(
                *g.hyps,
                n0 >= 0,
                n0 % m == 0,
                first >= 0,
                f >= 0,
                new >= 0,
                n0 * B + f == F,
                n0 + first == S,
            ),
            LC(S, new, F) == LC(first, new, f),
        )

    def needed_shift_build(n0: Term, S: Term, s: Term, t: Term, n: Term) -> tuple[Any, ...]:
        new_ = geo.ceil_div(n - t, B, Z3)
        Fb, fs = geo.extent(S, t, B) + n, geo.extent(s, t, B) + n
        return (
            [*g.hyps, n0 >= 0, n0 % m == 0, *shape(s, t, B), n >= 0, n0 + s == S],
            needed(g, S, t, n) == needed(g, s, t, n),
            [count_shift(n0, S, s, new_, Fb, fs)],
        )

    needed_shift = p.lemma(
        "lemma: blocks_needed on a table with n0 more slots (m divides n0) is unchanged",
        needed_shift_build,
        5,
        opaque=lambda n0, S, s, t, n: [
            LC(S, geo.ceil_div(n - t, B, Z3), geo.extent(S, t, B) + n),
            LC(s, geo.ceil_div(n - t, B, Z3), geo.extent(s, t, B) + n),
        ],
    )
    j, s, t, n, a, b = ints("j s t n first extra")
    hyps = [*g.hyps, j >= 0, *shape(s, t, B), n >= 0, a >= 0, b >= 0]
    p.prove(
        "blocks_needed(j*m + s, tail, n) = blocks_needed(s, tail, n)",
        needed(g, j * m + s, t, n) == needed(g, s, t, n),
        [*hyps, needed_shift(j * m, j * m + s, s, t, n)],
        opaque=[needed(g, j * m + s, t, n), needed(g, s, t, n)],
    )
    S1, T1 = after(g, j * m + s, t, a)
    s1, t1 = after(g, s, t, a)
    p.prove(
        "sequential(j*m + s, tail, first, extra) = sequential(s, tail, first, extra)",
        sequential(g, j * m + s, t, a, b) == sequential(g, s, t, a, b),
        [
            *hyps,
            needed_shift(j * m, j * m + s, s, t, a),
            needed_shift(j * m, S1, s1, t1, b),
            needed_shift(j * m, j * m + s, s, t, a + b),
            shape_lemma(p, g)(s, t, a),
        ],
        opaque=[
            needed(g, j * m + s, t, a),
            needed(g, s, t, a),
            needed(g, S1, t1, b),
            needed(g, s1, t1, b),
        ],
    )
    for k in every_kind()[:3]:
        hyps0 = [*k.hyps, j >= 0, *shape(s, t, k.B), n >= 0, a >= 0, b >= 0]
        p.prove(
            f"[{k.label}] any number of extra slots changes no charge",
            z3.And(
                needed(k, j + s, t, n) == needed(k, s, t, n),
                sequential(k, j + s, t, a, b) == sequential(k, s, t, a, b),
            ),
            hyps0,
        )


def _shift_traces(
    verdict: str, found: Sequence[tuple[str, Values]], variant: str | None
) -> list[dict[str, Any]]:
    name = "shift-by-non-multiple-fails"
    return [shift_trace(v, f"{name} {verdict}: {step}", name, variant) for step, v in found]


@theorem(
    "shift-by-non-multiple-fails",
    """Shift invariance needs a multiple of the alignment: Z3 finds a live-tail geometry and a
    table of `slots` full pages with slots not a multiple of m where blocks_needed_for(k)
    differs from its value on a fresh table (searched with B, m <= 4, W <= 8, slots <= 8,
    k <= 32).""",
    """A charge computed on fresh tables is only valid for a claimed prefix that ends on an
    lcm multiple, which is why prefix matches are lcm-aligned.""",
    expected="witness",
    trace=_shift_traces,
    rlimit=5_400_000,
)
def shift_by_non_multiple(p: Prover) -> None:
    g = live_tail()
    slots, k = ints("slots k")
    hyps = [*g.hyps, slots >= 0, k >= 0, slots % g.m != 0]
    small = [g.B <= 4, g.m <= 4, g.W <= 8, slots <= 8, k <= 32]
    fresh, shifted = needed(g, 0, 0, k), needed(g, slots, 0, k)
    p.refute(
        "blocks_needed(slots, 0, k) = blocks_needed(0, 0, k) fails for some slots, m not dividing",
        shifted == fresh,
        [*hyps, *small],
        show={"group": "live", "fresh_take": fresh, "shifted_take": shifted},
    )
