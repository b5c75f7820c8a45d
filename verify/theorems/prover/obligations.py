"""Arithmetic obligations of section 7.7: the native entry points, evaluated on tracked numbers.

``native/include/livetail/geometry.h`` mirrors ``spec/geometry.py`` expression for
expression with ``int64_t`` intermediates.  Each public entry point's expression tree is
evaluated on ``Tracked`` numbers (``verify/z3arith.py``): every ``+ - * div mod`` result is
an obligation "fits the machine integer" guarded by its branch condition, plus "divisor >= 1"
and "dividend >= 0" for every division (where C++'s ``/``, ``%`` and the shift/mask fast
path for powers of two agree with floor division).  Obligations are proved in Int-range form
(unbounded Ints with explicit bounds), which Z3 decides; a signed 64-bit bit-vector mirror
(``bvsdiv``, ``SRem``) is run as a counterexample search alongside.

The theorems that discharge these obligations are in ``arithmetic.py`` and ``hot_paths.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo

from ...z3arith import Z3, Obligation, RangeArith, Tracked, Tracker
from .prover import Prover, Step, StepFailed
from .symbols import Geometry, count_bounds_lemma, needed_bounds_lemma
from .terms import model_values

I32 = 2**31 - 1
I64 = 2**63 - 1
BV64_RLIMIT = 40_000_000
"""Z3 resource units the bit-vector mirror may search for a wrap (Int-range form gives the
verdict)."""
RANGES = {"int64": (-(2**63), I64), "int32": (-(2**31), I32)}


@dataclass
class Inputs:
    """Symbolic inputs of every public entry point, and the limits the module enforces."""

    B: Any
    W: Any
    A: Any
    slots: Any
    tail: Any
    n: Any
    first: Any
    extra: Any
    f: Any
    s: Any
    hyps: list[Any]
    label: str
    m: Any = None
    geo_hyps: tuple[Any, ...] = ()  # the geometry's own limits (B, W, m)


def inputs(live: bool, count_max: int, bits: int | None = None) -> Inputs:
    """B, W in [1, 2^31-1]; A = 0 or m*B <= 2^31-1; slots*B <= 2^31-1; tail in [0, B-1]
    (0 when empty); counts in [0, count_max]; frontier in [0, extent]."""

    def var(name: str) -> Any:
        return z3.Int(name) if bits is None else z3.BitVec(name, bits)

    B, W, m, slots, tail, n, first, extra, f, s = (
        var(x) for x in ["B", "W", "m", "slots", "tail", "n", "first", "extra", "f", "s"]
    )
    hyps = [B >= 1, B <= I32, W >= 1, W <= I32, slots >= 0, tail >= 0, tail <= B - 1]
    hyps += [z3.Implies(slots == 0, tail == 0), n >= 0, first >= 0, extra >= 0, f >= 0]
    hyps += [n <= count_max, first <= count_max, extra <= count_max]
    if bits is None:
        hyps.append(slots * B <= I32)
        hyps.append(f <= slots * B - tail)
    else:
        # slots <= I32 / B, written without a wrapping product.
        hyps.append(slots <= z3.BitVecVal(I32, bits) / B)
        hyps.append(f <= slots * B - tail)
    A: Any = 0
    geo_hyps = [B >= 1, B <= I32, W >= 1, W <= I32]
    if live:
        more = [m >= 1, m <= I32] + ([m * B <= I32] if bits is None else [m <= I32 / B])
        hyps += more
        geo_hyps += more
        A = m * B
    return Inputs(
        B,
        W,
        A,
        slots,
        tail,
        n,
        first,
        extra,
        f,
        s,
        hyps,
        "A = m*B" if live else "A = 0",
        m if live else z3.IntVal(1),
        tuple(geo_hyps),
    )


def bare(hyps: list[Any]) -> Inputs:
    """Inputs holding only hypotheses (for a standalone obligation check)."""
    return Inputs(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, hyps, "ceil_div")


def plain(x: Any) -> Any:
    return x.t if isinstance(x, Tracked) else x


def entry_points(inp: Inputs, tr: Tracker, pa: Any = Z3) -> None:
    """Evaluate every public expression tree on tracked inputs.

    Preconditions (the checks managers.h runs first) are pushed as path conditions, so an
    obligation is only required where the native code actually computes it.
    """
    ar = RangeArith(tr)
    B, W, slots, tail = (ar.num(x) for x in (inp.B, inp.W, inp.slots, inp.tail))
    n, first, extra, f, s = (ar.num(x) for x in (inp.n, inp.first, inp.extra, inp.f, inp.s))
    A = inp.A if isinstance(inp.A, int) else Tracked(inp.A, tr)  # an input, not computed

    def fits(sl: Any, tl: Any, k: Any) -> Any:
        return geo.fits_int32(sl, tl, inp.B, k, pa)

    def under(label: str, conds: list[Any], run: Callable[[], Any]) -> None:
        tr.label = label
        tr.path.extend(conds)
        try:
            run()
        finally:
            del tr.path[len(tr.path) - len(conds) :]

    under("fits_int32(slots, tail, B, n)", [], lambda: geo.fits_int32(slots, tail, B, n, ar))
    fit_n = fits(inp.slots, inp.tail, inp.n)
    under("extent(slots, tail, B)", [], lambda: geo.extent(slots, tail, B))
    under("resume_pages(W, B)", [], lambda: geo.resume_pages(W, B, ar))
    under("new_slots(tail, B, n)", [fit_n], lambda: geo.new_slots(tail, B, n, ar))
    under("tail_after(tail, B, n)", [fit_n], lambda: geo.tail_after(tail, B, n, ar))
    under(
        "blocks_needed(slots, tail, n, W, B, A)",
        [fit_n],
        lambda: geo.blocks_needed(slots, tail, n, W, B, A, ar),
    )
    # acquire's slot walk: live(s, extent + n) for every new slot s.
    new = geo.new_slots(inp.tail, inp.B, inp.n, pa)
    in_walk = [fit_n, inp.n > inp.tail, inp.s >= inp.slots, inp.s < inp.slots + new]
    under(
        "acquire: live(s, extent + n) over the new slots",
        in_walk,
        lambda: geo.live(s, geo.extent(slots, tail, B) + n, W, B, A, ar),
    )
    # The sequential query checks both acquires' shapes first (managers.h).
    s1 = inp.slots + geo.new_slots(inp.tail, inp.B, inp.first, pa)
    t1 = geo.tail_after(inp.tail, inp.B, inp.first, pa)
    fit_first = fits(inp.slots, inp.tail, inp.first)
    under(
        "fits_int32(shape after first, extra)",
        [fit_first],
        lambda: geo.fits_int32(
            slots + geo.new_slots(tail, B, first, ar),
            geo.tail_after(tail, B, first, ar),
            B,
            extra,
            ar,
        ),
    )
    under(
        "blocks_needed_sequential(slots, tail, first, extra, W, B, A)",
        [fit_first, fits(s1, t1, inp.extra)],
        lambda: geo.blocks_needed_sequential(slots, tail, first, extra, W, B, A, ar),
    )
    under("reclaim_bound(f, slots, W, B)", [], lambda: geo.reclaim_bound(f, slots, W, B, ar))
    # A chunked group's bound (section 13.2): C a positive multiple of B at most 2**31 - 1,
    # here m * B with the live inputs' m (B itself without them).
    C = B if isinstance(inp.A, int) else A
    under(
        "chunked_reclaim_bound(f, slots, C, B)",
        [],
        lambda: geo.chunked_reclaim_bound(f, slots, C, B, ar),
    )


def holds_in(ob: Obligation, width: str) -> Any:
    if ob.holds is not None:
        return ob.holds
    lo, hi = RANGES[width]
    return z3.And(ob.value >= lo, ob.value <= hi)


def check_obligations(
    p: Prover,
    inp: Inputs,
    obligations: list[Obligation],
    width: str,
    facts: Sequence[Any] = (),
) -> None:
    """Prove every obligation at `width`; raise on the first that fails.

    One query asks for any obligation to fail (the disjunction of ``guard and not holds``,
    each distinct obligation once); unsat proves them all.  Otherwise each is decided on its
    own, so a failure names its obligation and its model (and a batch Z3 could not decide
    may still be proved piece by piece).
    """
    todo: list[tuple[str, Obligation, Any]] = []
    seen: set[tuple[int, int]] = set()
    counters: dict[str, int] = {}
    for ob in obligations:
        i = counters[ob.label] = counters.get(ob.label, -1) + 1
        holds = holds_in(ob, width)
        key = ob.guard.get_id(), holds.get_id()
        if key not in seen:  # the same guard and claim (a subterm the tree evaluates twice)
            seen.add(key)
            todo.append((f"{ob.label}: {ob.kind} of '{ob.op}' #{i}", ob, holds))
    if not todo:
        return
    s = p._solver()
    s.add(*inp.hyps, *facts, z3.Or(*[z3.And(ob.guard, z3.Not(h)) for _, ob, h in todo]))
    if s.check() == z3.unsat:
        return
    for what, ob, holds in todo:
        s = p._solver()
        s.add(*inp.hyps, *facts, ob.guard, z3.Not(holds))
        r = s.check()
        if r == z3.unsat:
            continue
        step = f"{width} [{inp.label}] {what}"
        p.steps.append(Step(step, "counterexample" if r == z3.sat else "unknown", 0.0))
        if r == z3.sat:
            values = model_values(s.model(), {"value": ob.value})
            raise StepFailed("counterexample", step, f"{what} does not fit {width}", values)
        raise StepFailed("unknown", step, f"{what}: z3 returned {r}")


# --- contracts: compositional range proofs -------------------------------------------------


@dataclass(frozen=True)
class Contract:
    """A geometry function proved once on fresh arguments, then used by its callers.

    ``k`` leading arguments are the function's own (the rest are the geometry W, B, A and the
    arith).  Callers must establish ``pre`` (a recorded obligation); in return they get the
    result term (evaluated with plain Z3 arithmetic) and the fact ``post``.
    """

    fn: str
    k: int
    pre: Callable[..., list[Any]]
    post: Callable[..., Any]  # (result, *args) -> z3 Bool, proved or cited


class Contracts:
    """Patch the contracted geometry functions while a RangeArith evaluation runs."""

    def __init__(self, contracts: Sequence[Contract]) -> None:
        self.contracts = list(contracts)
        self.originals: dict[str, Callable[..., Any]] = {}

    def __enter__(self) -> Contracts:
        for c in self.contracts:
            original = getattr(geo, c.fn)
            self.originals[c.fn] = original
            setattr(geo, c.fn, self._wrapper(c, original))
        return self

    def __exit__(self, *exc: object) -> None:
        for name, fn in self.originals.items():
            setattr(geo, name, fn)

    def _wrapper(self, c: Contract, original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            ar = args[-1] if args else None
            if not isinstance(ar, RangeArith):
                return original(*args)
            tr = ar.tr
            terms = [plain(a) for a in args[:-1]]
            own = terms[: c.k]
            pre = c.pre(*own)
            tr.add("pre", c.fn, z3.BoolVal(True), z3.And(*pre))
            result = original(*terms, Z3)
            tr.facts.append(z3.Implies(z3.And(*pre), c.post(result, *own)))
            return Tracked(result, tr)

        return call


def contracts(inp: Inputs, lim: int) -> list[Contract]:
    """The contracts of the inner closed forms, for counts up to `lim`."""
    B = inp.B
    return [
        Contract(
            "resume_count_below",
            3,
            lambda x, m, kept: [x >= 0, x <= lim, m >= 1, m <= lim, kept >= 0, kept <= m],
            lambda r, x, m, kept: z3.And(r >= 0, r <= x),
        ),
        Contract(
            "live_count",
            3,
            lambda first, new, f: [first >= 0, new >= 0, f >= 0, first + new <= lim, f <= lim],
            lambda r, first, new, f: z3.And(r >= 0, r <= new),
        ),
        Contract(
            "blocks_needed",
            3,
            lambda slots, tail, n: [
                slots >= 0,
                tail >= 0,
                tail <= B - 1,
                z3.Implies(slots == 0, tail == 0),
                slots * B <= I32,
                n >= 0,
                n <= lim,
                geo.fits_int32(slots, tail, B, n, Z3),
            ],
            lambda r, slots, tail, n: z3.And(r >= 0, r <= geo.new_slots(tail, B, n, Z3)),
        ),
    ]


def _check(
    p: Prover, inp: Inputs, tr: Tracker, width: str, what: str, extra: Sequence[Any] = ()
) -> None:
    t0 = time.monotonic()
    check_obligations(p, inp, tr.obligations, width, facts=[*tr.facts, *extra])
    p.steps.append(
        Step(
            f"[{inp.label}] {what}: {len(tr.obligations)} obligations fit {width}",
            "proved",
            time.monotonic() - t0,
        )
    )


def fits_facts(p: Prover, inp: Inputs) -> list[Any]:
    """What a passed fits_int32 check guarantees, proved once and reused as facts."""
    B = inp.B
    fit_first = geo.fits_int32(inp.slots, inp.tail, B, inp.first, Z3)
    out = []
    for k, what in ((inp.n, "n"), (inp.first, "first")):
        new = geo.new_slots(inp.tail, B, k, Z3)
        fact = z3.Implies(
            geo.fits_int32(inp.slots, inp.tail, B, k, Z3),
            z3.And(
                new >= 0,
                inp.slots + new <= I32,
                (inp.slots + new) * B <= I32,
                geo.extent(inp.slots, inp.tail, B) + k <= I32,
            ),
        )
        p.prove(
            f"[{inp.label}] fits_int32(slots, tail, B, {what}) bounds the new shape", fact, inp.hyps
        )
        out.append(fact)
    s1 = inp.slots + geo.new_slots(inp.tail, B, inp.first, Z3)
    t1 = geo.tail_after(inp.tail, B, inp.first, Z3)
    new2 = geo.new_slots(t1, B, inp.extra, Z3)
    fact = z3.Implies(
        z3.And(fit_first, geo.fits_int32(s1, t1, B, inp.extra, Z3)),
        z3.And(
            t1 >= 0,
            t1 <= B - 1,
            new2 >= 0,
            s1 + new2 <= I32,
            geo.extent(s1, t1, B) + inp.extra <= I32,
        ),
    )
    p.prove(f"[{inp.label}] both fits checks bound the shape after first and extra", fact, inp.hyps)
    out.append(fact)
    return out


def range_proof(p: Prover, live: bool, lim: int, width: str) -> None:
    """Contracts first (inner functions on fresh arguments), then every entry point."""
    inp = inputs(live, lim)
    kind = "live" if live else "sliding"
    g = Geometry(inp.B, inp.W, inp.A, inp.m, tuple(inp.geo_hyps), inp.label, kind)
    count_bounds = count_bounds_lemma(p, g)
    # Posts of these two contracts are the induction lemmas' conclusions.
    cited = {"live_count": count_bounds, "blocks_needed": needed_bounds_lemma(p, g, count_bounds)}
    cs = contracts(inp, lim)
    for i, c in enumerate(cs):
        # The function's body on fresh arguments, with the contracts before it in force.
        xs = [z3.Int(f"{c.fn}_{j}") for j in range(c.k)]
        tr = Tracker(label=f"{c.fn} (contract)")
        ar = RangeArith(tr)
        tr.path.extend(c.pre(*xs))
        geo_args = []
        if c.fn != "resume_count_below":
            A = inp.A if isinstance(inp.A, int) else Tracked(inp.A, tr)
            geo_args = [ar.num(inp.W), ar.num(inp.B), A]
        with Contracts(cs[:i]):
            result = getattr(geo, c.fn)(*[ar.num(x) for x in xs], *geo_args, ar)
        _check(p, inp, tr, width, f"contract body of {c.fn}")
        post = c.post(plain(result), *xs)
        facts = [cited[c.fn](*xs)] if c.fn in cited else []
        p.prove(f"[{inp.label}] contract post of {c.fn}", post, [*inp.hyps, *c.pre(*xs), *facts])
    tr = Tracker()
    with Contracts(cs):
        entry_points(inp, tr)
    _check(p, inp, tr, width, "entry points", fits_facts(p, inp))
