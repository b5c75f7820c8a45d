"""The small-domain search of "refute, then prove": a step's formula over bit-vectors.

With every Int symbol bounded to a few units, a step's formula has a counterexample iff its
bit-vector image has one, once the words are wide enough that no intermediate wraps:
``+ - *`` become their bit-vector forms, Z3's Euclidean ``div`` and ``mod`` are written
with a signed remainder by ``|b|`` (``r = a smod |b|``, ``q = (a - r) / b``, exact).  Z3
decides that by bit-blasting to SAT, where its SMT core, given the same bounded formula
over Ints, spends millions of units on the nonlinear terms (``m*B``, division by a symbolic
page size) before finding a model with sizes of 1.  A model is only ever a candidate: the
prover checks it on the Int formula itself (``confirmed``), so a wrapped intermediate or a
division by zero can at worst make the search miss, never report a false counterexample.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import z3  # type: ignore[import-untyped]

WIDTH = 8
"""Bits per word: symbols in [-4, 4] and the few products of them a step forms stay inside
[-128, 127] (a product that wraps only makes a candidate the Int formula rejects)."""
LEVELS = ((1, 5, 100_000), (4, WIDTH, 250_000))
"""The boxes searched in turn, [-K, K], with the word width and the most units each search
may use: a counterexample with sizes of 1 is found in tens of thousands of units, and a
search not decided at its cap is given up (the unbounded query then decides)."""


QUICK_LEVELS = ((1, 5, 100_000), (4, WIDTH, 100_000))
"""The same boxes with ``livetail verify --quick``, where [-4, 4] stops at 100,000 units: on
the real spec a search in that box either decides in fewer (no counterexample) or runs to
its cap undecided, which proves nothing (the unbounded proof decides either way)."""


class Unsupported(Exception):
    """The formula has a term the translation does not cover (an unknown function)."""


def to_bv(formula: Any, xs: Sequence[Any], width: int = WIDTH) -> tuple[Any, dict[str, Any]]:
    """The bit-vector image of ``formula`` and the word of each Int symbol of ``xs``."""
    env = {str(x): z3.BitVec(str(x), width) for x in xs}
    memo: dict[int, Any] = {}

    def go(e: Any) -> Any:
        k = e.get_id()
        if k not in memo:
            memo[k] = convert(e)
        return memo[k]

    def convert(e: Any) -> Any:
        if z3.is_int_value(e):
            if abs(e.as_long()) >= 2 ** (width - 2):  # e.g. the range theorems' 2^31 - 1
                raise Unsupported(f"constant {e.as_long()} is outside the small domain")
            return z3.BitVecVal(e.as_long(), width)
        if z3.is_true(e) or z3.is_false(e):
            return e
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            if e.sort() == z3.IntSort():
                return env[str(e)]
            if e.sort() == z3.BoolSort():
                return e
            raise Unsupported(str(e.sort()))
        kind = e.decl().kind()
        a = [go(c) for c in e.children()]
        if kind in NARY:
            out = a[0]
            for x in a[1:]:
                out = NARY[kind](out, x)
            return out
        if kind == z3.Z3_OP_UMINUS:
            return -a[0]
        if kind in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD):
            x, y = a
            r = x % z3.If(y < 0, -y, y)  # bvsmod by |y|: the Euclidean remainder, >= 0
            return r if kind == z3.Z3_OP_MOD else (x - r) / y
        if kind in FIXED:
            return FIXED[kind](*a)
        raise Unsupported(e.decl().name())

    return go(formula), env


NARY: dict[int, Any] = {
    z3.Z3_OP_ADD: lambda a, b: a + b,
    z3.Z3_OP_SUB: lambda a, b: a - b,
    z3.Z3_OP_MUL: lambda a, b: a * b,
}
FIXED: dict[int, Any] = {
    z3.Z3_OP_LE: lambda a, b: a <= b,
    z3.Z3_OP_LT: lambda a, b: a < b,
    z3.Z3_OP_GE: lambda a, b: a >= b,
    z3.Z3_OP_GT: lambda a, b: a > b,
    z3.Z3_OP_EQ: lambda a, b: a == b,
    z3.Z3_OP_DISTINCT: lambda *a: z3.Distinct(*a),
    z3.Z3_OP_ITE: lambda c, a, b: z3.If(c, a, b),
    z3.Z3_OP_AND: lambda *a: z3.And(*a),
    z3.Z3_OP_OR: lambda *a: z3.Or(*a),
    z3.Z3_OP_NOT: lambda a: z3.Not(a),
    z3.Z3_OP_IMPLIES: lambda a, b: z3.Implies(a, b),
    z3.Z3_OP_XOR: lambda a, b: z3.Xor(a, b),
}


def bounds(facts: Sequence[Any], xs: Sequence[Any], k: int) -> dict[str, tuple[int, int]]:
    """Each symbol's range in the box [-k, k], narrowed by the top-level facts ``x >= c``,
    ``x <= c``, ``x > c``, ``x < c`` and ``x == c`` among ``facts`` (conjunctions opened)."""
    out = {str(x): (-k, k) for x in xs}
    stack = list(facts)
    while stack:
        e = stack.pop()
        if z3.is_and(e):
            stack.extend(e.children())
            continue
        if not z3.is_app(e) or e.num_args() != 2:
            continue
        a, b = e.children()
        if z3.is_int_value(a) and z3.is_const(b):  # c <= x and friends: flip
            a, b = b, a
            kind = FLIP.get(e.decl().kind())
        else:
            kind = e.decl().kind()
        if not (z3.is_const(a) and str(a) in out and z3.is_int_value(b)) or kind is None:
            continue
        lo, hi = out[str(a)]
        c = b.as_long()
        if kind == z3.Z3_OP_GE:
            lo = max(lo, c)
        elif kind == z3.Z3_OP_GT:
            lo = max(lo, c + 1)
        elif kind == z3.Z3_OP_LE:
            hi = min(hi, c)
        elif kind == z3.Z3_OP_LT:
            hi = min(hi, c - 1)
        elif kind == z3.Z3_OP_EQ:
            lo, hi = max(lo, c), min(hi, c)
        out[str(a)] = (lo, hi)
    return out


FLIP = {
    z3.Z3_OP_GE: z3.Z3_OP_LE,
    z3.Z3_OP_GT: z3.Z3_OP_LT,
    z3.Z3_OP_LE: z3.Z3_OP_GE,
    z3.Z3_OP_LT: z3.Z3_OP_GT,
    z3.Z3_OP_EQ: z3.Z3_OP_EQ,
}


def blaster(ctx: z3.Context) -> z3.Solver:
    """Bit-blasting to SAT, every limit counted in work (rlimit), none in time."""
    return z3.Then("simplify", "solve-eqs", "bit-blast", "sat", ctx=ctx).solver()
