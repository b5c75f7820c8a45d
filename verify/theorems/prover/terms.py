"""Formula helpers of the prover: unknown functions, abstraction, models and their values."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import z3  # type: ignore[import-untyped]

from .nodes import free_constants
from .query import Values


@contextlib.contextmanager
def uninterpreted(module: Any, attribute: str) -> Iterator[Any]:
    """Within the block, ``module.attribute`` is an unknown function of its number arguments.

    The ``Arith`` argument is dropped and ints are lifted; the result sort is Bool when the
    function's return annotation says so, else Int.  Used to prove a fact for *every*
    function (``Prover.prove_general``) and by the definitional check, which re-runs a
    theorem with the function it is about made unknown.
    """
    original = module.__dict__[attribute]
    ann = str(getattr(original, "__annotations__", {}).get("return", ""))
    sort = z3.BoolSort() if "Bool" in ann or "bool" in ann else z3.IntSort()
    funcs: dict[int, Any] = {}

    def unknown(*args: Any) -> Any:
        xs = [a for a in args if not (hasattr(a, "cond") and hasattr(a, "div"))]
        if len(xs) not in funcs:
            sig = [z3.IntSort()] * len(xs)
            funcs[len(xs)] = z3.Function(f"unknown_{attribute}", *sig, sort)
        return funcs[len(xs)](*[z3.IntVal(x) if isinstance(x, int) else x for x in xs])

    setattr(module, attribute, unknown)
    try:
        yield unknown
    finally:
        setattr(module, attribute, original)


def antecedents(claim: Any) -> list[Any]:
    """The antecedent of every implication at the top of a goal (through conjunctions)."""
    out: list[Any] = []
    stack = [claim]
    while stack:
        e = stack.pop()
        if z3.is_and(e):
            stack.extend(e.children())
        elif z3.is_implies(e):
            out.append(e.arg(0))
            stack.append(e.arg(1))
    return out


def abstract(claim: Any, hyps: Sequence[Any], terms: Sequence[Any]) -> tuple[Any, list[Any]]:
    """Replace each of ``terms`` by a fresh constant of its sort in ``claim`` and ``hyps``."""
    # Named by position, not z3.FreshConst: a process-wide counter would make the query's
    # text, and so Z3's search, depend on what ran before it.
    pairs = [(t, z3.Const(f"opaque_{i}", t.sort())) for i, t in enumerate(terms)]
    return z3.substitute(claim, *pairs), [z3.substitute(h, *pairs) for h in hyps]


def simplified(e: Any) -> Any:
    """``z3.simplify(e)``, done in a fresh context so the result does not depend on term ids.

    The simplifier orders the arguments of ``and``, ``or``, ``+`` by the ids of their terms,
    and the main context hands out ids in the order terms were made (and reuses the ids of
    terms Python freed), so simplified in place, the same formula came out with its
    disjuncts in another order after other code ran first, and a query built from it used
    other units (measured: 2,201,399 and 2,201,400 for one theorem's small-domain searches
    in two processes).  Parsed from its text into a new context, the formula gets the same
    ids whatever ran before; the result is translated back unchanged.
    """
    ctx = z3.Context()
    text = z3.Solver()
    text.add(e)
    parsed = z3.parse_smt2_string(text.sexpr(), ctx=ctx)
    return z3.simplify(parsed[0]).translate(z3.main_ctx())


def pinned(r: tuple[int, int]) -> bool:
    return r[0] == r[1]


def confirmed(model: z3.ModelRef, claim: Any, hyps: Sequence[Any]) -> bool:
    """Do the model's values of the formula's own symbols make hyps true and claim false?

    Evaluated by substituting numerals and simplifying (no solver), so a counterexample or
    witness is checked on the concrete formula, not on an abstraction of it.
    """
    formula = z3.And(*hyps, z3.Not(claim))
    consts = free_constants(formula)
    pairs = [(c, model.eval(c, model_completion=True)) for c in consts]
    value = z3.simplify(z3.substitute(formula, *pairs) if pairs else formula)
    return bool(z3.is_true(value))


def model_values(model: z3.ModelRef, show: Mapping[str, Any] | None) -> Values:
    """Every 0-ary symbol of the model, plus the named ``show`` terms evaluated in it."""
    out: Values = {}
    for d in model.decls():
        if d.arity() != 0:
            continue
        v = model[d]
        out[d.name()] = as_python(v)
    for k, term in (show or {}).items():
        if isinstance(term, (int, bool, str)):
            out[k] = term
        else:
            out[k] = as_python(model.eval(term, model_completion=True))
    return dict(sorted(out.items()))


def as_python(v: Any) -> Any:
    if z3.is_int_value(v):
        return v.as_long()
    if z3.is_bv_value(v):
        return v.as_signed_long()
    if z3.is_true(v):
        return True
    if z3.is_false(v):
        return False
    return str(v)


def render(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())
