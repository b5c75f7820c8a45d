"""The spec's ``Arith`` over Z3 terms, and a tracking variant that records range obligations.

``geometry.py`` is written once against a tiny arithmetic interface.  ``Z3Arith`` makes its
closed forms evaluate on Z3 integer terms, so the theorems reason about the code the model
runs.  ``RangeArith`` evaluates the same expression trees on ``Tracked`` numbers: every
``+ - * div mod`` result becomes an obligation "this value fits the machine integer",
guarded by the branch conditions under which it is computed (``cond`` is lazy: only the
branch that runs in C++ is obliged), plus "divisor >= 1" and "dividend >= 0" for every
division, where Python's floor, Z3's Euclidean and C++'s truncating division agree.

Both numbers and arithmetic come in two flavours: unbounded Ints with explicit range
obligations (the form Z3 proves, see ``docs/theorems.md``) and signed 64-bit bit-vectors
(``bits=64``), the literal C++ semantics, used as a counterexample search.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import z3  # type: ignore[import-untyped]

Term = Any  # a z3 ArithRef / BitVecRef / BoolRef, or a Python int / bool
Number = int | z3.ArithRef


def _is_py(x: object) -> bool:
    return isinstance(x, (int, bool)) and not isinstance(x, z3.ExprRef)


class Z3Arith:
    """``Arith`` over Z3 integer terms (Python ints are folded where both operands are ints).

    Z3's ``div``/``mod`` are Euclidean; they agree with Python's floor and C++'s truncation on
    the non-negative dividends and positive divisors that ``geometry`` promises to use.
    """

    def div(self, a: Term, b: Term) -> Term:
        if _is_py(a) and _is_py(b):
            return int(a) // int(b)
        return a / b

    def mod(self, a: Term, b: Term) -> Term:
        if _is_py(a) and _is_py(b):
            return int(a) % int(b)
        return a % b

    def min(self, a: Term, b: Term) -> Term:
        if _is_py(a) and _is_py(b):
            return min(int(a), int(b))
        return z3.If(a <= b, a, b)

    def max(self, a: Term, b: Term) -> Term:
        if _is_py(a) and _is_py(b):
            return max(int(a), int(b))
        return z3.If(a >= b, a, b)

    def cond(self, c: Term, then: Callable[[], Term], otherwise: Callable[[], Term]) -> Term:
        if _is_py(c):
            return then() if c else otherwise()
        return ite(c, then(), otherwise())

    def either(self, a: Term, b: Term) -> Term:
        if _is_py(a) and _is_py(b):
            return bool(a) or bool(b)
        return z3.Or(a, b)


Z3 = Z3Arith()


class BVArith:
    """``Arith`` over signed bit-vectors as C++ computes: truncating ``/``, ``SRem`` for ``%``."""

    def __init__(self, bits: int) -> None:
        self.bits = bits

    def _bv(self, x: Term) -> Term:
        if isinstance(x, bool):
            raise TypeError("bool is not a number here")
        return z3.BitVecVal(x, self.bits) if isinstance(x, int) else x

    def div(self, a: Term, b: Term) -> Term:
        return self._bv(a) / self._bv(b)

    def mod(self, a: Term, b: Term) -> Term:
        return z3.SRem(self._bv(a), self._bv(b))

    def min(self, a: Term, b: Term) -> Term:
        a, b = self._bv(a), self._bv(b)
        return z3.If(a <= b, a, b)

    def max(self, a: Term, b: Term) -> Term:
        a, b = self._bv(a), self._bv(b)
        return z3.If(a >= b, a, b)

    def cond(self, c: Term, then: Callable[[], Term], otherwise: Callable[[], Term]) -> Term:
        if _is_py(c):
            return then() if c else otherwise()
        a, b = then(), otherwise()
        if isinstance(a, bool) or isinstance(b, bool) or z3.is_bool(a) or z3.is_bool(b):
            return z3.If(c, _as_bool(a), _as_bool(b))
        return z3.If(c, self._bv(a), self._bv(b))

    def either(self, a: Term, b: Term) -> Term:
        return z3.Or(_as_bool(a), _as_bool(b))


def ite(c: Term, a: Term, b: Term) -> Term:
    """``z3.If`` that accepts two Python constants (it needs one Z3 operand to pick a sort)."""
    if _is_py(a) and _is_py(b):
        if isinstance(a, bool) and isinstance(b, bool):
            return z3.If(c, z3.BoolVal(a), z3.BoolVal(b))
        return z3.If(c, z3.IntVal(int(a)), z3.IntVal(int(b)))
    return z3.If(c, a, b)


# --- range obligations ---------------------------------------------------------------------


@dataclass(frozen=True)
class Obligation:
    """``value`` must lie in the machine range whenever ``guard`` holds (``kind`` says why)."""

    kind: str  # "range", "divisor", "dividend"
    op: str  # "+", "-", "*", "div", "mod"
    label: str  # which public expression was being evaluated
    guard: Any  # z3 BoolRef: the path condition
    value: Any  # the z3 term the operation produced (or the divisor / dividend)
    holds: Any  # z3 BoolRef that must hold, or None: "value fits the width being proved"


@dataclass
class Tracker:
    """Collects obligations while ``RangeArith`` evaluates an expression tree."""

    bits: int | None = None  # None: unbounded Ints; 64: signed 64-bit bit-vectors
    path: list[Any] = field(default_factory=list)
    obligations: list[Obligation] = field(default_factory=list)
    label: str = ""
    # Linear facts about each division's quotient and remainder (true wherever the divisor
    # and dividend obligations hold): handles for Z3 to bound sums without nonlinear search.
    facts: list[Any] = field(default_factory=list)

    def guard(self) -> Any:
        return z3.And(*self.path) if self.path else z3.BoolVal(True)

    def add(self, kind: str, op: str, value: Any, holds: Any = None) -> None:
        self.obligations.append(Obligation(kind, op, self.label, self.guard(), value, holds))


class Tracked:
    """A number whose every arithmetic result is recorded as a range obligation."""

    __slots__ = ("t", "tr")

    def __init__(self, term: Any, tracker: Tracker) -> None:
        self.t = term
        self.tr = tracker

    # -- helpers -----------------------------------------------------------------------

    def _lift(self, other: object) -> Any:
        if isinstance(other, Tracked):
            return other.t
        if isinstance(other, bool):
            raise TypeError("bool is not a number here")
        if isinstance(other, int):
            if self.tr.bits is None:
                return z3.IntVal(other)
            return z3.BitVecVal(other, self.tr.bits)
        return other

    def _binop(self, a: Any, b: Any, op: str) -> Tracked:
        tr = self.tr
        if op == "+":
            r = a + b
            chk = _bv_no_overflow(tr, op, a, b)
        elif op == "-":
            r = a - b
            chk = _bv_no_overflow(tr, op, a, b)
        else:
            r = a * b
            chk = _bv_no_overflow(tr, op, a, b)
        tr.add("range", op, r, chk)
        return Tracked(r, tr)

    def __add__(self, o: object) -> Tracked:
        return self._binop(self.t, self._lift(o), "+")

    def __radd__(self, o: object) -> Tracked:
        return self._binop(self._lift(o), self.t, "+")

    def __sub__(self, o: object) -> Tracked:
        return self._binop(self.t, self._lift(o), "-")

    def __rsub__(self, o: object) -> Tracked:
        return self._binop(self._lift(o), self.t, "-")

    def __mul__(self, o: object) -> Tracked:
        return self._binop(self.t, self._lift(o), "*")

    def __rmul__(self, o: object) -> Tracked:
        return self._binop(self._lift(o), self.t, "*")

    # Comparisons yield plain Z3 booleans (signed for bit-vectors, as in C++).
    def __lt__(self, o: object) -> Any:
        return self.t < self._lift(o)

    def __le__(self, o: object) -> Any:
        return self.t <= self._lift(o)

    def __gt__(self, o: object) -> Any:
        return self.t > self._lift(o)

    def __ge__(self, o: object) -> Any:
        return self.t >= self._lift(o)

    def __eq__(self, o: object) -> Any:
        return self.t == self._lift(o)

    def __ne__(self, o: object) -> Any:
        return self.t != self._lift(o)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Tracked({self.t})"


def _bv_no_overflow(tr: Tracker, op: str, a: Any, b: Any) -> Any:
    """For bit-vectors: the z3 predicate that ``a op b`` does not wrap (signed); else None."""
    if tr.bits is None:
        return None
    if op == "+":
        return z3.And(z3.BVAddNoOverflow(a, b, True), z3.BVAddNoUnderflow(a, b))
    if op == "-":
        return z3.And(z3.BVSubNoOverflow(a, b), z3.BVSubNoUnderflow(a, b, True))
    return z3.And(z3.BVMulNoOverflow(a, b, True), z3.BVMulNoUnderflow(a, b))


class RangeArith:
    """``Arith`` over ``Tracked`` numbers: records an obligation for every operation result."""

    def __init__(self, tracker: Tracker) -> None:
        self.tr = tracker

    def num(self, x: object) -> Tracked:
        if isinstance(x, Tracked):
            return x
        if isinstance(x, int) and not isinstance(x, bool):
            return Tracked(
                z3.IntVal(x) if self.tr.bits is None else z3.BitVecVal(x, self.tr.bits), self.tr
            )
        return Tracked(x, self.tr)

    def _division(self, a: object, b: object, op: str) -> Tracked:
        ta, tb = self.num(a), self.num(b)
        self.tr.add("divisor", op, tb.t, tb.t >= 1)
        self.tr.add("dividend", op, ta.t, ta.t >= 0)
        if self.tr.bits is None:
            r = ta.t / tb.t if op == "div" else ta.t % tb.t
            self.tr.add("range", op, r)
            q, m = ta.t / tb.t, ta.t % tb.t
            self.tr.facts.append(
                z3.Implies(
                    z3.And(ta.t >= 0, tb.t >= 1),
                    z3.And(q >= 0, q <= ta.t, m >= 0, m < tb.t, m <= ta.t),
                )
            )
        else:
            # C++ truncates: signed division and SRem (z3py's % on bit-vectors is bvsmod).
            r = ta.t / tb.t if op == "div" else z3.SRem(ta.t, tb.t)
            # INT64_MIN / -1 is the only wrapping division; the divisor obligation excludes it.
        return Tracked(r, self.tr)

    def div(self, a: object, b: object) -> Tracked:
        return self._division(a, b, "div")

    def mod(self, a: object, b: object) -> Tracked:
        return self._division(a, b, "mod")

    def min(self, a: object, b: object) -> Tracked:
        ta, tb = self.num(a), self.num(b)
        return Tracked(z3.If(ta.t <= tb.t, ta.t, tb.t), self.tr)

    def max(self, a: object, b: object) -> Tracked:
        ta, tb = self.num(a), self.num(b)
        return Tracked(z3.If(ta.t >= tb.t, ta.t, tb.t), self.tr)

    def cond(self, c: Any, then: Callable[[], Any], otherwise: Callable[[], Any]) -> Any:
        if _is_py(c):
            return then() if c else otherwise()
        self.tr.path.append(c)
        try:
            a = then()
        finally:
            self.tr.path.pop()
        self.tr.path.append(z3.Not(c))
        try:
            b = otherwise()
        finally:
            self.tr.path.pop()
        if isinstance(a, bool) and isinstance(b, bool) or _is_bool(a) or _is_bool(b):
            return z3.If(c, _as_bool(a), _as_bool(b))
        return Tracked(z3.If(c, self.num(a).t, self.num(b).t), self.tr)

    def either(self, a: Any, b: Any) -> Any:
        return z3.Or(_as_bool(a), _as_bool(b))


def _is_bool(x: object) -> bool:
    return isinstance(x, z3.BoolRef)


def _as_bool(x: object) -> Any:
    if isinstance(x, bool):
        return z3.BoolVal(x)
    return x


def untrack(x: object) -> Any:
    """The Z3 term behind a tracked number (or the value itself)."""
    return x.t if isinstance(x, Tracked) else x
