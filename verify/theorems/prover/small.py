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

from .nodes import APP, Walk

WIDTH = 8
"""Bits per word: symbols in [-4, 4] and the few products of them a step forms stay inside
[-128, 127] (a product that wraps only makes a candidate the Int formula rejects)."""
LEVELS = ((1, 5, 100_000), (4, WIDTH, 250_000))
"""The boxes searched in turn, [-K, K], with the word width and the most units each search
may use: a counterexample with sizes of 1 is found in tens of thousands of units, and a
search not decided at its cap is given up (the unbounded query then decides)."""


QUICK_LEVELS = ((1, 5, 100_000),)
"""The boxes with ``livetail verify --quick``: [-1, 1] alone.  Every claimed kill of a Z3
theorem is a counterexample with sizes of 1 (tests/test_theorems.py checks each in quick
mode), while on the real spec a [-4, 4] search either decides that no counterexample is there
or runs to its cap undecided: in both cases it proves nothing, and the unbounded proof
decides either way.  A full run searches both boxes."""


class Unsupported(Exception):
    """The formula has a term the translation does not cover (an unknown function)."""


def to_bv(
    formula: Any,
    xs: Sequence[Any],
    width: int = WIDTH,
    arrays: dict[str, tuple[Any, Any]] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """The bit-vector image of ``formula`` and the word of each Int symbol of ``xs``.

    An array symbol from Int to Int or Bool (the slot theorems' page ids, counts, names)
    becomes an array from words to words (or Bools), read and written by ``select`` and
    ``store``; ``arrays``, when given, receives each one's (Int array, word array) by name,
    so a model of the image can be read back as Int arrays (``int_array``).

    Walked and built through the C API (``nodes.py``), node by node as z3py's operators
    would build it (``a + b`` is ``bvadd``, ``a <= b`` is ``bvsle``, ``a % b`` is
    ``bvsmod``, ``a / b`` is ``bvsdiv``): the same terms, a fraction of the Python work.
    """
    w = Walk(formula.ctx)
    c = w.c
    env = {str(x): z3.BitVec(str(x), width) for x in xs}
    words = {x.get_id(): env[str(x)].as_ast() for x in xs}
    sort = z3.BitVecSort(width, w.ctx).ast
    limit = 2 ** (width - 2)  # e.g. the range theorems' 2^31 - 1 is outside
    memo: dict[int, Any] = {}
    made: list[Any] = []  # every node built here holds a reference until the image does

    def keep(a: Any) -> Any:
        z3.Z3_inc_ref(c, a)
        made.append(a)
        return a

    def go(e: Any) -> Any:
        k = z3.Z3_get_ast_id(c, e)
        if k not in memo:
            memo[k] = convert(e)
        return memo[k]

    def convert(e: Any) -> Any:
        value = w.int_value(e)
        if value is not None:
            if abs(value) >= limit:
                raise Unsupported(f"constant {value} is outside the small domain")
            return keep(z3.Z3_mk_numeral(c, str(value), sort))
        kind = w.op(e)
        if kind in (z3.Z3_OP_TRUE, z3.Z3_OP_FALSE):
            return e
        args = w.args(e)
        if kind == z3.Z3_OP_UNINTERPRETED and not args:
            s = w.sort_kind(e)
            if s == z3.Z3_INT_SORT:
                k = z3.Z3_get_ast_id(c, e)
                return words[k] if k in words else env[str(w.wrap(e))].as_ast()
            if s == z3.Z3_BOOL_SORT:
                return e
            if s == z3.Z3_ARRAY_SORT:
                return array(w.wrap(e))
            raise Unsupported(str(w.wrap(e).sort()))
        if kind in (z3.Z3_OP_SELECT, z3.Z3_OP_STORE):
            a = [go(x) for x in args]
            make = z3.Z3_mk_select if kind == z3.Z3_OP_SELECT else z3.Z3_mk_store
            return keep(make(c, *a))
        a = [go(x) for x in args]
        if kind in NARY:
            out = a[0]
            for x in a[1:]:
                out = keep(NARY[kind](c, out, x))
            return out
        if kind == z3.Z3_OP_UMINUS:
            return keep(z3.Z3_mk_bvneg(c, a[0]))
        if kind in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD):
            x, y = a
            # bvsmod by |y|: the Euclidean remainder, >= 0
            zero = keep(z3.Z3_mk_numeral(c, "0", sort))
            neg = keep(z3.Z3_mk_bvslt(c, y, zero))
            r = keep(
                z3.Z3_mk_bvsmod(c, x, keep(z3.Z3_mk_ite(c, neg, keep(z3.Z3_mk_bvneg(c, y)), y)))
            )
            if kind == z3.Z3_OP_MOD:
                return r
            return keep(z3.Z3_mk_bvsdiv(c, keep(z3.Z3_mk_bvsub(c, x, r)), y))
        if kind in FLIP and w.kind(a[1]) == NUMERAL and w.kind(a[0]) != NUMERAL:
            # z3py's ``x <= 3`` with 3 a numeral word is Python's reflected ``3 >= x`` (the
            # numeral's class is a subclass of the word's), so its image is that term
            return keep(FIXED[FLIP[kind]](c, a[1], a[0]))
        if kind in FIXED:
            return keep(FIXED[kind](c, *a))
        if kind in LISTS:
            return keep(LISTS[kind](c, len(a), (z3.Ast * len(a))(*a)))
        raise Unsupported(w.wrap(e).decl().name())

    def array(e: Any) -> Any:
        dom, rng = e.sort().domain(), e.sort().range()
        if dom != z3.IntSort(w.ctx) or rng not in (z3.IntSort(w.ctx), z3.BoolSort(w.ctx)):
            raise Unsupported(str(e.sort()))
        word = z3.BitVecSort(width, w.ctx)
        bv = z3.Array(str(e), word, word if rng == z3.IntSort(w.ctx) else rng)
        if arrays is not None:
            arrays[str(e)] = (e, bv)
        return bv.as_ast()

    try:
        image = z3.BoolRef(go(formula.as_ast()), w.ctx)
    finally:
        for a in made:
            z3.Z3_dec_ref(c, a)
    return image, env


def int_array(value: Any, sort: Any) -> Any | None:
    """A word array's value in a model (constant arrays and stores of numerals) as an Int
    array term of ``sort``; None for any other form (the candidate is then not confirmed)."""
    if z3.is_K(value):
        inner = int_value(value.arg(0))
        return None if inner is None else z3.K(sort.domain(), inner)
    if z3.is_store(value):
        base = int_array(value.arg(0), sort)
        i, v = int_value(value.arg(1)), int_value(value.arg(2))
        if base is None or i is None or v is None:
            return None
        return z3.Store(base, i, v)
    return None


def int_value(v: Any) -> Any | None:
    if z3.is_bv_value(v):
        return z3.IntVal(v.as_signed_long())
    if z3.is_true(v) or z3.is_false(v):
        return v
    return None


NARY: dict[int, Any] = {
    z3.Z3_OP_ADD: z3.Z3_mk_bvadd,
    z3.Z3_OP_SUB: z3.Z3_mk_bvsub,
    z3.Z3_OP_MUL: z3.Z3_mk_bvmul,
}
FIXED: dict[int, Any] = {
    z3.Z3_OP_LE: z3.Z3_mk_bvsle,
    z3.Z3_OP_LT: z3.Z3_mk_bvslt,
    z3.Z3_OP_GE: z3.Z3_mk_bvsge,
    z3.Z3_OP_GT: z3.Z3_mk_bvsgt,
    z3.Z3_OP_EQ: z3.Z3_mk_eq,
    z3.Z3_OP_ITE: z3.Z3_mk_ite,
    z3.Z3_OP_NOT: z3.Z3_mk_not,
    z3.Z3_OP_IMPLIES: z3.Z3_mk_implies,
    z3.Z3_OP_XOR: z3.Z3_mk_xor,
}
NUMERAL = z3.Z3_NUMERAL_AST
LISTS: dict[int, Any] = {
    z3.Z3_OP_DISTINCT: z3.Z3_mk_distinct,
    z3.Z3_OP_AND: z3.Z3_mk_and,
    z3.Z3_OP_OR: z3.Z3_mk_or,
}


def bounds(facts: Sequence[Any], xs: Sequence[Any], k: int) -> dict[str, tuple[int, int]]:
    """Each symbol's range in the box [-k, k], narrowed by the top-level facts ``x >= c``,
    ``x <= c``, ``x > c``, ``x < c`` and ``x == c`` among ``facts`` (conjunctions opened)."""
    out = {str(x): (-k, k) for x in xs}
    if not xs:
        return out
    w = Walk(xs[0].ctx)
    names = {x.get_id(): str(x) for x in xs}
    stack = [f.as_ast() for f in facts if isinstance(f, z3.AstRef)]
    while stack:
        e = stack.pop()
        op = w.op(e)
        if op == z3.Z3_OP_AND:
            stack.extend(w.args(e))
            continue
        args = w.args(e) if op != -1 else []
        if len(args) != 2:
            continue
        a, b = args
        c = w.int_value(a)
        if c is not None and w.kind(b) in APP and not w.args(b):  # c <= x and friends: flip
            a, b = b, a
            kind = FLIP.get(op)
        else:
            kind = op
            c = w.int_value(b)
        name = names.get(w.ident(a)) if w.is_symbol(a) else None
        if name is None or c is None or kind is None:
            continue
        lo, hi = out[name]
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
        out[name] = (lo, hi)
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


def array_blaster(ctx: z3.Context) -> z3.Solver:
    """For an image over arrays (a pool's or a table's state, read and written by ``select``
    and ``store``), which bit-blasting alone leaves undecided: Z3's tactic for
    quantifier-free arrays over bit-vectors, every limit counted in work too."""
    return z3.Tactic("qfaufbv", ctx=ctx).solver()
