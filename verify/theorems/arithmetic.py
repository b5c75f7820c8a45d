"""Section 7.7: no overflow in the native arithmetic inside the limits the module enforces.

The range theorems: every public entry point of ``geometry.h`` (the mirror of
``spec/geometry.py``, ``int64_t`` intermediates) evaluated on tracked numbers, each
operation an obligation proved in Int-range form (``prover/obligations.py`` explains the
obligations and builds them), with a 64-bit bit-vector mirror searching for a wrap
alongside; the textbook round-up's int32 overflow as a witness; and
``sequential-fits-checks-agree`` (spec and native reject the same sequential queries).
"""

from __future__ import annotations

import time
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo

from ..z3arith import Z3, BVArith, RangeArith, Tracker
from .prover.obligations import (
    BV64_RLIMIT,
    I32,
    I64,
    bare,
    check_obligations,
    entry_points,
    holds_in,
    inputs,
    plain,
    range_proof,
)
from .prover.prover import Prover, Step, StepFailed
from .prover.query import CORE_FIRST
from .prover.symbols import after, ceil_lemma, charge_setup, every_kind, shape_lemma
from .prover.terms import model_values
from .prover.theorem import theorem


@theorem(
    "native-arithmetic-fits-int64",
    """Inside the limits the native module enforces (B, W in [1, 2^31-1]; A = 0 or a multiple
    m*B <= 2^31-1; a table with slots*B <= 2^31-1 and tail room in [0, B-1]; every count in
    [0, 2^63-1], as an int64 parameter holds; a frontier in [0, extent]; a query's or
    acquire's arithmetic evaluated only after its fits_int32 checks passed, as managers.h
    does), every intermediate value of every public closed form (fits_int32, extent,
    resume_pages, new_slots, tail_after, blocks_needed, blocks_needed_sequential and its
    second fits check, acquire's live(s, f) walk, reclaim_bound) fits int64, every divisor is
    >= 1 and every dividend >= 0. Unbounded, in Int-range form, branch by branch, proved
    compositionally (resume_count_below, live_count and blocks_needed each proved once on
    fresh arguments, with a contract their callers must meet).""",
    """The C++ arithmetic cannot overflow for any input the binding accepts: a malformed or
    huge count is rejected by a comparison, never wrapped into a wrong page count.""",
    cost=10,
    rlimit=85_000_000,
    refute_first=False,
)
def native_arithmetic_int64(p: Prover) -> None:
    p.core_first = CORE_FIRST
    for live in (True, False):
        range_proof(p, live, I64, "int64")
    if p.quick:
        p.note("bv64_mirror", "skipped (--quick)")
    else:
        p.note("bv64_mirror", bv64_search(p, BV64_RLIMIT))


@theorem(
    "closed-forms-fit-int32",
    """With every count at most 2^31-1 (and the same table and geometry limits as
    native-arithmetic-fits-int64), every intermediate of every public closed form fits int32
    (divisors >= 1, dividends >= 0), including geo.ceil_div(a, b) = a div b + [a mod b > 0],
    which equals ceil(a/b) (b*(q-1) < a <= b*q) for all a in [0, 2^31-1], b in
    [1, 2^31-1]. Unbounded, in Int-range form, proved compositionally as above.""",
    """A 32-bit port of the closed forms is safe once counts are limited to int32: the
    round-up never forms a + b - 1.""",
    cost=2,
    rlimit=4_900_000,
    refute_first=False,
)
def closed_forms_int32(p: Prover) -> None:
    p.core_first = CORE_FIRST
    a, b = z3.Ints("a b")
    tr = Tracker(label="ceil_div(a, b)")
    ar = RangeArith(tr)
    q = geo.ceil_div(ar.num(a), ar.num(b), ar)
    dom = [a >= 0, a <= I32, b >= 1, b <= I32]
    check_obligations(p, bare(dom), tr.obligations, "int32")
    p.prove("ceil_div(a, b) = ceil(a / b)", z3.And(b * (plain(q) - 1) < a, a <= b * plain(q)), dom)
    for live in (True, False):
        range_proof(p, live, I32, "int32")


def _textbook_ceil(a: Any, b: Any, ar: Any) -> Any:
    return ar.div(a + b - 1, b)


@theorem(
    "textbook-round-up-overflows-int32",
    """The textbook round-up (a + B - 1) / B is not safe in int32 inside those same limits
    (counts <= 2^31-1, a table that fits after the acquire): for new_slots = ceil((n - tail) /
    B), Z3 finds B, tail and n where the intermediate n - tail + B exceeds 2^31-1, and, in a
    32-bit bit-vector mirror of C++ (wrapping, truncating division), inputs where the
    textbook form returns a different, negative slot count than geo.ceil_div (e.g. B = 3,
    n = 2^31 - 2). This is why geometry.py rounds up as a div B + [a mod B > 0] (proved safe
    by closed-forms-fit-int32).""",
    """Documents the overflow livetail avoids; an engine porting the closed forms must not
    "simplify" the round-up back to the textbook form in 32 bits.""",
    expected="witness",
    rlimit=2_000_000,
)
def textbook_round_up(p: Prover) -> None:
    inp = inputs(False, I32)
    tr = Tracker(label="textbook new_slots")
    ar = RangeArith(tr)
    n, tail, B = ar.num(inp.n), ar.num(inp.tail), ar.num(inp.B)
    ar.cond(n > tail, lambda: _textbook_ceil(n - tail, B, ar), lambda: 0)
    fit = geo.fits_int32(inp.slots, inp.tail, inp.B, inp.n, Z3)
    ranges = [z3.Implies(ob.guard, holds_in(ob, "int32")) for ob in tr.obligations]
    p.refute(
        "Int-range: every intermediate of (n - tail + B - 1) / B fits int32",
        z3.And(*ranges),
        [*inp.hyps, fit],
        show={"n_minus_tail_plus_B": inp.n - inp.tail + inp.B},
    )
    a = inp.n - inp.tail
    found = p.refute(
        "Int-range: n - tail + B - 1 itself fits int32",
        z3.Implies(inp.n > inp.tail, a + inp.B - 1 <= I32),
        [*inp.hyps, fit, inp.B <= 8],
        show={"n_minus_tail_plus_B_minus_1": a + inp.B - 1},
    )
    if found:
        # The same inputs in a 32-bit bit-vector mirror of C++ (wrapping, truncating /).
        bv = BVArith(32)
        av = z3.BitVecVal(found["n"] - found["tail"], 32)
        bb = z3.BitVecVal(found["B"], 32)
        textbook = z3.simplify(_textbook_ceil(av, bb, bv)).as_signed_long()
        correct = z3.simplify(geo.ceil_div(av, bb, bv)).as_signed_long()
        exact = -(-(found["n"] - found["tail"]) // found["B"])
        p.note(
            "bv32_mirror",
            f"B = {found['B']}, n - tail = {found['n'] - found['tail']}: textbook "
            f"(a + B - 1) / B = {textbook}, geo.ceil_div = {correct}, ceil(a / B) = {exact}",
        )
        if textbook == exact or correct != exact:
            raise StepFailed(
                "unknown", "BV32 mirror", "the BV32 mirror does not confirm the witness"
            )


def bv64_search(p: Prover, budget: int) -> str:
    """The entry points in a signed 64-bit bit-vector mirror, as a counterexample search.

    One query per geometry case asks for inputs inside the limits where *some* operation
    wraps (BVAdd/Sub/MulNoOverflow, divisor >= 1, dividend >= 0 on the branch that runs); a
    model would be a real C++ overflow.  Bit-blasted 64-bit division rarely proves within
    its budget of resource units, so "no wrap found in the budget" is reported, not treated
    as a proof: the verdict is the Int-range proof's.
    """
    t0 = time.monotonic()
    outcome = []
    for live in (True, False):
        inp = inputs(live, I64, bits=64)
        tr = Tracker(bits=64)
        entry_points(inp, tr, BVArith(64))
        s = p._solver(limit=budget // 2)
        s.add(*inp.hyps, z3.Or(*[z3.And(ob.guard, z3.Not(ob.holds)) for ob in tr.obligations]))
        r = s.check()
        if r == z3.sat:
            values = model_values(s.model(), None)
            raise StepFailed(
                "counterexample", f"BV64 mirror [{inp.label}]", "BV64 mirror: a wrap", values
            )
        outcome.append(
            f"[{inp.label}] {len(tr.obligations)} operations: "
            + ("no wrap possible" if r == z3.unsat else "no wrap found within the budget")
        )
    p.steps.append(
        Step(
            "BV64 mirror counterexample search",
            "reported",
            time.monotonic() - t0,
            "; ".join(outcome),
        )
    )
    return "; ".join(outcome)


@theorem(
    "sequential-fits-checks-agree",
    """The spec checks the table limit of blocks_needed_for_sequential once, as
    fits_int32(slots, tail, B, first + extra); the native module checks fits_int32 for first
    and then for extra on the shape first leaves (managers.h), never forming first + extra.
    For every page size B >= 1, table shape and counts first, extra >= 0 the two checks
    decide the same. Unbounded.""",
    """The spec and the native module reject exactly the same sequential queries for
    exceeding the int32 table limit.""",
    rlimit=2_000_000,
)
def sequential_fits_checks_agree(p: Prover) -> None:
    g = every_kind()[2]
    hyps, slots, tail, first, extra = charge_setup(g)
    B = g.B
    ce, sh = ceil_lemma(p, g), shape_lemma(p, g)
    s1, t1 = after(g, slots, tail, first)
    e0 = geo.extent(slots, tail, B)
    spec_check = geo.fits_int32(slots, tail, B, first + extra, Z3)
    native_check = z3.And(
        geo.fits_int32(slots, tail, B, first, Z3), geo.fits_int32(s1, t1, B, extra, Z3)
    )
    p.prove(
        "fits(first + extra) = fits(first) and fits(shape after first, extra)",
        spec_check == native_check,
        [
            *hyps,
            ce(slots, tail, first, e0 + first),
            ce(s1, t1, extra, e0 + first + extra),
            ce(slots, tail, first + extra, e0 + first + extra),
            sh(slots, tail, first),
        ],
    )
