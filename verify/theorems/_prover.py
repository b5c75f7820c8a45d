"""The small proof language the theorems are written in.

A theorem's ``check`` function is a script of steps run by a ``Prover``:

- ``prove(name, claim, hyps)``: Z3 must show ``hyps => claim`` for every value of the free
  symbols (unsat of ``hyps and not claim``).  A model is a *counterexample*.  Before that,
  the prover checks that ``hyps`` are satisfiable, so a step can never pass vacuously.
- ``refute(name, claim, hyps)``: the same query, for a claim the theorem expects to be
  *false*; a model is the expected *witness*, and "no model" means the claim was proved.
- ``exhaust(name, search)``: a bounded theorem runs the spec's own classes over every
  small configuration; ``search`` returns the first failing configuration, or None.

Induction is done by hand (a base and a step, each its own query) and universally proved
lemmas are re-used by instantiating them on concrete terms (``lemma`` returns a function
that builds instances), as ``docs/theorems.md`` explains.

Every query is budgeted by Z3's deterministic resource limit (``rlimit``), never by wall
clock: a theorem has a budget of resource units for all its queries together, each query
may use what is left, and the units used are recorded per step and per theorem.  The same
theorem with the same seed then gives the same verdict on an idle and on a loaded machine.

Queries do not go to ``z3.Solver()``: its default strategy for nonlinear integer problems
(``qfnia``) races sub-solvers under wall-clock limits (``try_for``, 2 s and 3 s), so which
one answers, and the units used, depend on the machine's load (measured: the same theorem
used 1.4M units on one run and 5.4M on a loaded one).  ``solver()`` is that strategy with
the timed attempts left out; every limit left in it counts work, not time, so the unit
counts repeat exactly.  Each query is also decided in a fresh Z3 context, from its printed
SMT-LIB text (``Query``): the units then do not depend on the interpreter or on what other
theorem code built before, only on the formula.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3  # type: ignore[import-untyped]

from ._small import LEVELS, Unsupported, blaster, bounds, to_bv

Values = dict[str, Any]

SMALL = 64
"""Bound of the quick concrete search after an abstraction gave a spurious model."""
SMALL_SEARCH_RLIMIT = 5_000_000
"""Resource units of that search (it only looks for a counterexample: "none found" is fine)."""
CORE_FIRST = 20_000
"""Units the SMT core alone may spend on a query before the full strategy takes it: on every
query looking for a model (a vacuity check, an exhibit) and on every query of the range
theorems, which are linear or nearly so around 64-bit constants (the full strategy's
bit-blasting attempt spends millions of units on them before the core decides them)."""
DEFAULT_RLIMIT = 100_000_000
"""Budget of a theorem that does not set its own (``livetail rlimits`` measures them)."""
SMALL_DOMAIN = LEVELS[-1][0]  # the largest box searched
"""Refute before proving: before a step's unbounded query, every Int symbol of the step is
bounded to [-SMALL_DOMAIN, SMALL_DOMAIN] and Z3 looks for a counterexample there first."""
SHRINK_RLIMIT = 200_000
"""Most units one shrinking query (a smaller total size) may use."""


_SPENT = [0]
"""Resource units used by every query of this process so far (each in its own context)."""


def rlimit_count() -> int:
    """Z3 resource units used so far by this process's queries (monotone, deterministic)."""
    return _SPENT[0]


def _context_count(ctx: z3.Context) -> int:
    return int(z3.Solver(ctx=ctx).statistics().get_key_value("rlimit count"))


class Query:
    """A solver whose ``check`` decides the formula's SMT-LIB text in a fresh Z3 context.

    Z3's search depends on the ids of the terms it is given, and a context hands out ids in
    the order terms are made and recycles them when Python frees them.  Terms built in the
    process-wide context therefore get ids that depend on everything built before them and
    on the interpreter's memory management: measured, ``shift-invariance-by-alignment`` used
    11.3M units on CPython 3.11 and more than 100M on 3.10, with the same formulas.  Printed
    and parsed into a new context, the same formula gets the same ids on every interpreter
    and whatever other theorem code ran first, so the units (and the verdict) repeat.

    The subset of ``z3.Solver`` the theorems use: add, push, pop, check, model,
    reason_unknown.  A model is translated back to the main context.

    With ``core_first`` units, ``check`` first gives the formula to Z3's SMT core alone
    (``core()``) for at most that many units, and only if the core gives up, to
    ``solver()`` with what is left.  Both answers are Z3's own; the core finds models of
    hypotheses and decides small linear queries in a few hundred units, where the
    bit-blasting attempt of ``solver()`` first spends millions on 64-bit constants.
    """

    def __init__(
        self,
        rlimit: int,
        core_first: int = 0,
        strategy: Callable[[z3.Context], z3.Solver] | None = None,
    ) -> None:
        self.rlimit = rlimit
        self.core_first = core_first
        self.strategy = strategy  # decides alone when given (the small-domain searches)
        self.frames: list[list[Any]] = [[]]
        self._model: z3.ModelRef | None = None
        self._reason = ""

    def add(self, *formulas: Any) -> None:
        self.frames[-1].extend(formulas)

    def push(self) -> None:
        self.frames.append([])

    def pop(self) -> None:
        self.frames.pop()

    def sexpr(self) -> str:
        text = z3.Solver()
        for frame in self.frames:
            text.add(*frame)
        return str(text.sexpr())

    def check(self) -> Any:
        text = self.sexpr()
        if self.strategy is not None:
            return self._decide(self.strategy, text, self.rlimit)
        if self.core_first > 0:
            r = self._decide(core, text, min(self.core_first, self.rlimit))
            if r != z3.unknown or self.rlimit <= 1:
                return r
        return self._decide(solver, text, self.rlimit)

    def _decide(self, strategy: Callable[[z3.Context], z3.Solver], text: str, limit: int) -> Any:
        ctx = z3.Context()
        s = strategy(ctx)
        s.set("rlimit", limit)
        s.from_string(text)
        before = _context_count(ctx)
        r = s.check()
        used = _context_count(ctx) - before
        _SPENT[0] += used
        self._model = s.model().translate(z3.main_ctx()) if r == z3.sat else None
        self._reason = str(s.reason_unknown()) if r == z3.unknown else ""
        if r == z3.unknown and used >= limit:
            # Z3 reports a spent rlimit inside a tactic as "canceled".
            self._reason = f"resource limit of {limit} units reached ({self._reason})"
        self.rlimit = max(1, self.rlimit - used)
        return r  # a CheckSatResult compares equal across contexts

    def model(self) -> z3.ModelRef:
        if self._model is None:
            raise z3.Z3Exception("model is not available")
        return self._model

    def reason_unknown(self) -> str:
        return self._reason


def _smt(ctx: z3.Context | None) -> Any:
    """The tactic of Z3's SMT core after ``simplify``."""
    return z3.Then(z3.With("simplify", ctx=ctx, som=True), "smt", ctx=ctx)


def core(ctx: z3.Context | None = None) -> z3.Solver:
    """Z3's SMT core alone (what ``solver()`` falls back to after bit-blasting)."""
    return _smt(ctx).solver()


def solver(ctx: z3.Context | None = None) -> z3.Solver:
    """Z3's ``qfnia`` strategy without its wall-clock ``try_for`` attempts.

    The same preamble, then a bounded bit-blasting attempt (64-bit, 500 SAT conflicts; it
    finds models of nonlinear problems fast), then the SMT core with no limit but the
    caller's rlimit.  (The SMT core alone, ``z3.SimpleSolver``, also repeats its counts but
    finds some nonlinear counterexamples only after many minutes.)
    """

    def then(*ts: Any) -> Any:
        return z3.Then(*ts, ctx=ctx)

    def use(name: str, **params: Any) -> Any:
        return z3.With(name, ctx=ctx, **params)

    preamble = then(
        "simplify",
        "propagate-values",
        "solve-eqs",
        use("ctx-simplify", max_depth=30, max_steps=5_000_000),
        use("simplify", pull_cheap_ite=True, local_ctx=True, local_ctx_limit=10_000_000),
        "elim-uncnstr",
        "lia2card",
        "card2bv",
    )
    bv = {"flat": False, "hi_div0": True, "elim_and": True, "blast_distinct": True}
    blast = then(
        use("simplify", **bv),
        "propagate-values",
        use("simplify", local_ctx=True, local_ctx_limit=10_000_000, **bv),
        "max-bv-sharing",
        use("bit-blast", max_memory=100),
        use("sat", max_memory=100, max_conflicts=500),
    )
    bit_blasting = then(
        use("simplify", hoist_mul=True),
        use("nla2bv", nla2bv_max_bv_size=64),
        z3.OrElse(blast, "skip", ctx=ctx),
        "fail-if-undecided",
    )
    return then(preamble, z3.OrElse(bit_blasting, _smt(ctx), ctx=ctx)).solver()


class StepFailed(Exception):
    """A step ended the theorem: counterexample, unknown (incl. rlimit exhausted), or vacuous."""

    def __init__(self, verdict: str, step: str, message: str, values: Values | None = None):
        super().__init__(message)
        self.verdict = verdict
        self.step = step
        self.message = message
        self.values = values or {}


@dataclass
class Step:
    name: str
    result: str  # proved, proved-bounded, witness, counterexample, unknown, reported
    seconds: float
    detail: str = ""
    rlimit: int = 0  # Z3 resource units the step used

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "result": self.result,
            "seconds": round(self.seconds, 3),
            "rlimit": self.rlimit,
        }
        if self.detail:
            d["detail"] = self.detail
        return d


class StepLog(list[Step]):
    """A theorem's steps; each is stamped with the resource units used since the one before.

    Stamping on append covers steps recorded by theorem scripts themselves (one step for a
    batch of queries made on solvers from ``Prover._solver``).
    """

    def __init__(self) -> None:
        super().__init__()
        self.mark = rlimit_count()

    def append(self, step: Step) -> None:
        now = rlimit_count()
        step.rlimit, self.mark = now - self.mark, now
        super().append(step)


@dataclass
class Prover:
    """Runs a theorem's steps within a budget of Z3 resource units (``rlimit``).

    The budget covers every query the theorem makes, through the prover or through a solver
    from ``_solver()``; the runner's wall-clock kill is only a guard against a hung process.
    """

    rlimit: int = DEFAULT_RLIMIT  # resource units for all of the theorem's queries
    quick: bool = False  # livetail verify --quick: skip optional searches (never a proof)
    # Units of the SMT core's first attempt at every query (Query.core_first); sat-seeking
    # checks (vacuity, exhibit) use at least CORE_FIRST.
    core_first: int = 0
    steps: StepLog = field(default_factory=StepLog)
    witness: Values | None = None  # the model of the last successful refute step
    witnesses: list[tuple[str, Values]] = field(default_factory=list)
    refuted: bool | None = None  # None: no refute step; True: all found; False: one proved
    notes: dict[str, Any] = field(default_factory=dict)
    start: int = field(default_factory=rlimit_count)  # the context's count when it began
    # Refute before proving: each prove / prove_general step first searches the small domain
    # (every Int symbol in [-SMALL_DOMAIN, SMALL_DOMAIN]); a theorem whose counterexamples
    # can only be large (the range theorems: values near 2^31) may switch it off.
    small: bool = True
    # "both": each step searches the small domain, then proves; "small": a first pass that
    # only searches (every prove step's small domain, nothing unbounded); "prove": the second
    # pass, after a "small" pass found nothing (run_theorem runs the two passes).
    phase: str = "both"
    # The boxes searched, with their word widths and caps (_small.LEVELS, or QUICK_LEVELS).
    levels: tuple[tuple[int, int, int], ...] = LEVELS
    small_searches: int = 0
    small_units: int = 0  # resource units the small-domain searches and their shrinking used

    # -- solver plumbing ------------------------------------------------------------------

    @property
    def used(self) -> int:
        """Resource units used since the prover was made (every query of this theorem)."""
        return rlimit_count() - self.start

    def _solver(self, limit: int | None = None, core_first: int = 0) -> Query:
        """A ``solver()`` that may use what is left of the budget, at most ``limit`` units."""
        left = self.rlimit - self.used
        if left <= 0:
            raise StepFailed(
                "unknown",
                "(budget)",
                f"rlimit budget exhausted before this step: {self.used} of {self.rlimit} units",
            )
        return Query(
            min(left if limit is None else min(left, limit), 2**32 - 1),
            max(core_first, self.core_first),
        )

    def _check(self, hyps: Sequence[Any], goal: Any, core_first: int = 0) -> tuple[Any, Query]:
        s = self._solver(core_first=core_first)
        s.add(*hyps)
        s.add(goal)
        return s.check(), s

    def _unknown(self, s: Query) -> str:
        """Why z3 gave up, and the budget when that is the reason."""
        why = str(s.reason_unknown())
        if "resource" in why:
            why += f": {self.used} of the theorem's rlimit budget of {self.rlimit} units used"
        return why

    def _not_vacuous(self, name: str, claim: Any, hyps: Sequence[Any], t0: float) -> None:
        """Raise ``unknown`` if ``hyps`` are contradictory or an implication inside ``claim``
        has an antecedent that can never hold under them (the step would pass vacuously)."""
        r, _ = self._check(hyps, z3.BoolVal(True), CORE_FIRST)
        if r == z3.unsat:
            self.steps.append(Step(name, "unknown", time.monotonic() - t0, "vacuous hypotheses"))
            raise StepFailed("unknown", name, f"{name}: the hypotheses are contradictory")
        for a in antecedents(claim):
            r, _ = self._check(hyps, a, CORE_FIRST)
            if r == z3.unsat:
                self.steps.append(
                    Step(name, "unknown", time.monotonic() - t0, "vacuous antecedent")
                )
                raise StepFailed("unknown", name, f"{name}: an antecedent in the goal never holds")

    def refute_small(
        self, name: str, claim: Any, hyps: Sequence[Any], show: Mapping[str, Any] | None
    ) -> None:
        """Look for a counterexample with every Int symbol in [-SMALL_DOMAIN, SMALL_DOMAIN].

        The bounded formula is decided over bit-vectors (``_small``: bit-blasting finds a
        model with sizes of 1 in thousands of units, where the SMT core stalls on the
        nonlinear terms).  A candidate confirmed on the Int formula is shrunk (the least total
        of the symbols' absolute values, by halving) and ends the step as a
        ``counterexample``: a wrong transition with a small counterexample is refuted in a
        few units instead of leaving the unbounded query to spend the budget.  Nothing found,
        or not decided within the caps of ``_small.LEVELS`` (boxes [-1, 1] and [-4, 4]
        in turn), proves nothing: the unbounded query decides.
        """
        if not self.small or self.phase == "prove":
            return
        t0 = time.monotonic()
        formula = z3.And(*hyps, z3.Not(claim))
        xs = [v for v in free_constants(formula) if v.sort() == z3.IntSort()]
        if not xs:
            return
        before = rlimit_count()
        self.small_searches += 1
        try:
            for k, width, limit in self.levels:
                # A symbol the hypotheses and the box pin to one value is substituted
                # first (B >= 1 in [-1, 1] is 1): divisions by it then simplify away.
                ranges = bounds(hyps, xs, k)
                if any(lo > hi for lo, hi in ranges.values()):
                    continue
                fixed = [(x, z3.IntVal(ranges[str(x)][0])) for x in xs if _pinned(ranges[str(x)])]
                small = simplified(z3.substitute(formula, *fixed)) if fixed else formula
                free = [x for x in xs if not _pinned(ranges[str(x)])]
                try:
                    image, words = to_bv(small, free, width)
                except Unsupported:  # an unknown function: its models are no counterexamples
                    return
                box = [z3.And(w >= ranges[n][0], w <= ranges[n][1]) for n, w in words.items()]
                values = self._small_model(image, box, words, limit, small)
                if values is not None:
                    values = self._shrink(image, box, words, values, small)
                    values.update({str(x): v.as_long() for x, v in fixed})
                    break
            else:
                return
            model = self._int_model(formula, xs, values)
        finally:
            self.small_units += rlimit_count() - before
            self.notes["small_domain"] = {
                "bound": SMALL_DOMAIN,
                "searches": self.small_searches,
                "units": self.small_units,
            }
        found = model_values(model, show)
        detail = f"small domain [-{SMALL_DOMAIN}, {SMALL_DOMAIN}], shrunk: {render(found)}"
        self.steps.append(Step(name, "counterexample", time.monotonic() - t0, detail))
        raise StepFailed("counterexample", name, f"{name}: counterexample", found)

    def _small_model(
        self,
        image: Any,
        box: Sequence[Any],
        words: Mapping[str, Any],
        limit: int,
        formula: Any,
        extra: Sequence[Any] = (),
    ) -> dict[str, int] | None:
        """A model of the bit-vector image that the Int formula confirms, or None."""
        s = self._solver(limit=limit)
        s.strategy = blaster
        s.add(image, *box, *extra)
        if s.check() != z3.sat:
            return None
        m = s.model()
        values = {k: m.eval(w, model_completion=True).as_signed_long() for k, w in words.items()}
        consts = free_constants(formula)
        pairs = [(c, z3.IntVal(values[str(c)])) for c in consts if str(c) in values]
        return values if z3.is_true(z3.simplify(z3.substitute(formula, *pairs))) else None

    def _shrink(
        self,
        image: Any,
        box: Sequence[Any],
        words: Mapping[str, Any],
        values: dict[str, int],
        formula: Any,
    ) -> dict[str, int]:
        """A confirmed model with the least total size sum |x| found by halving."""
        size = z3.Sum([z3.If(w < 0, -w, w) for w in words.values()])
        lo, hi = 0, sum(abs(v) for v in values.values())
        while lo < hi:
            mid = (lo + hi) // 2
            smaller = self._small_model(image, box, words, SHRINK_RLIMIT, formula, [size <= mid])
            if smaller is None:
                lo = mid + 1  # none, or not decided: the halving stops at what it has
            else:
                values, hi = smaller, sum(abs(v) for v in smaller.values())
        return values

    def _int_model(self, formula: Any, xs: Sequence[Any], values: Mapping[str, int]) -> Any:
        """The Int model of the formula with every symbol at its value (for ``show`` terms)."""
        s = self._solver(limit=SHRINK_RLIMIT, core_first=SHRINK_RLIMIT)
        s.add(formula, *[x == values[str(x)] for x in xs])
        if s.check() != z3.sat:
            raise StepFailed("unknown", "(small domain)", "a confirmed model was not rebuilt")
        return s.model()

    # -- steps ----------------------------------------------------------------------------

    def prove(
        self,
        name: str,
        claim: Any,
        hyps: Sequence[Any] = (),
        show: Mapping[str, Any] | None = None,
        opaque: Sequence[Any] = (),
        searched: bool = False,
    ) -> None:
        """Prove ``hyps => claim`` for all values of the free symbols; raise on failure.

        Refute before proving: unless ``searched`` (the caller did it), the step first looks
        for a counterexample in the small domain (``refute_small``), on the formula itself.

        ``opaque`` terms are replaced by fresh constants everywhere first: the step is then
        proved for *every* value of those subterms, which is stronger and keeps Z3 from
        unfolding closed forms the argument does not need to look inside.
        """
        if self.phase == "small":
            self.refute_small(name, claim, list(hyps), show)
            return
        t0 = time.monotonic()
        original = (claim, list(hyps))
        if opaque:
            claim, hyps = abstract(claim, hyps, opaque)
        self._not_vacuous(name, claim, hyps, t0)
        if not searched:
            self.refute_small(name, original[0], original[1], show)
        r, s = self._check(hyps, z3.Not(claim))
        dt = time.monotonic() - t0
        if r == z3.unsat:
            self.steps.append(Step(name, "proved", dt))
            return
        if r == z3.sat:
            values = model_values(s.model(), show)
            if not confirmed(s.model(), *original):
                if not opaque:
                    self.steps.append(Step(name, "unknown", dt, "unconfirmed: " + render(values)))
                    raise StepFailed("unknown", name, f"{name}: model not confirmed", values)
                # The abstraction was too coarse: look for a small concrete counterexample,
                # then decide the concrete formula itself.
                self.steps.append(Step(name + " (abstracted)", "unknown", dt, "spurious model"))
                self._small_counterexample(name, original[0], original[1], show)
                return self.prove(name, original[0], original[1], show, searched=True)
            self.steps.append(Step(name, "counterexample", dt, render(values)))
            raise StepFailed("counterexample", name, f"{name}: counterexample", values)
        why = self._unknown(s)
        self.steps.append(Step(name, "unknown", dt, why))
        raise StepFailed("unknown", name, f"{name}: z3 returned unknown ({why})")

    def _small_counterexample(
        self, name: str, claim: Any, hyps: Sequence[Any], show: Mapping[str, Any] | None
    ) -> None:
        """Search every Int symbol in [-SMALL, SMALL] briefly; raise on a confirmed model."""
        t0 = time.monotonic()
        formula = z3.And(*hyps, z3.Not(claim))
        box = [
            z3.And(v >= -SMALL, v <= SMALL)
            for v in free_constants(formula)
            if v.sort() == z3.IntSort()
        ]
        s = self._solver(limit=SMALL_SEARCH_RLIMIT)
        s.add(formula, *box)
        if s.check() == z3.sat and confirmed(s.model(), claim, hyps):
            values = model_values(s.model(), show)
            dt = time.monotonic() - t0
            self.steps.append(Step(name, "counterexample", dt, render(values)))
            raise StepFailed("counterexample", name, f"{name}: counterexample", values)

    def prove_general(
        self,
        name: str,
        build: Callable[[], tuple[Any, Sequence[Any]]],
        over: Sequence[tuple[Any, str]],
        show: Mapping[str, Any] | None = None,
    ) -> None:
        """Prove ``build()``'s ``hyps => claim`` with each ``(module, function)`` of ``over``
        made an unknown function (so for every such function, the real one included).

        ``build`` is called twice, under the unknown functions and on the real ones; a model
        of the general query is checked on the real formula, and if it does not violate it,
        a small concrete search and then the real query decide (as for ``opaque``).
        """
        with contextlib.ExitStack() as stack:
            for module, attribute in over:
                stack.enter_context(uninterpreted(module, attribute))
            general, general_hyps = build()
        claim, hyps = build()
        if self.phase == "small":
            self.refute_small(name, claim, list(hyps), show)
            return
        t0 = time.monotonic()
        # Vacuity is checked on the general hypotheses: the real ones are no cheaper to decide.
        self._not_vacuous(name, general, general_hyps, t0)
        # The small domain is searched on the real functions (a model of the general query
        # is no counterexample until the real formula confirms it).
        self.refute_small(name, claim, list(hyps), show)
        r, s = self._check(general_hyps, z3.Not(general))
        dt = time.monotonic() - t0
        if r == z3.unsat:
            self.steps.append(
                Step(name, "proved", dt, "for every " + ", ".join(a for _, a in over))
            )
            return
        if r == z3.sat and confirmed(s.model(), claim, list(hyps)):
            values = model_values(s.model(), show)
            self.steps.append(Step(name, "counterexample", dt, render(values)))
            raise StepFailed("counterexample", name, f"{name}: counterexample", values)
        # The small domain was searched above: the real query decides.
        self.steps.append(Step(name + " (general)", "unknown", dt, "not decided in general"))
        self.prove(name, claim, hyps, show, searched=True)

    def refute(
        self,
        name: str,
        claim: Any,
        hyps: Sequence[Any] = (),
        show: Mapping[str, Any] | None = None,
    ) -> Values | None:
        """Look for values where ``hyps`` hold and ``claim`` fails (the expected witness)."""
        t0 = time.monotonic()
        r, s = self._check(hyps, z3.Not(claim))
        dt = time.monotonic() - t0
        if r == z3.sat:
            values = model_values(s.model(), show)
            if not confirmed(s.model(), claim, list(hyps)):
                self.steps.append(Step(name, "unknown", dt, "spurious: " + render(values)))
                raise StepFailed("unknown", name, f"{name}: witness not confirmed", values)
            self.steps.append(Step(name, "witness", dt, render(values)))
            self.witness = values
            self.witnesses.append((name, values))
            if self.refuted is None:
                self.refuted = True
            return values
        if r == z3.unsat:
            self.steps.append(Step(name, "proved", dt, "no witness exists"))
            self.refuted = False
            return None
        why = self._unknown(s)
        self.steps.append(Step(name, "unknown", dt, why))
        raise StepFailed("unknown", name, f"{name}: z3 returned unknown ({why})")

    def exhibit(
        self, name: str, hyps: Sequence[Any], show: Mapping[str, Any] | None = None
    ) -> Values:
        """Vacuity check: find values where ``hyps`` hold (e.g. a hole exists); fail if none."""
        if self.phase == "small":
            return {}
        t0 = time.monotonic()
        r, s = self._check(hyps, z3.BoolVal(True), CORE_FIRST)
        dt = time.monotonic() - t0
        if r == z3.sat:
            values = model_values(s.model(), show)
            self.steps.append(Step(name, "exhibited", dt, render(values)))
            return values
        verdict = "counterexample" if r == z3.unsat else "unknown"
        self.steps.append(Step(name, verdict, dt, "no instance: the theorem would be vacuous"))
        raise StepFailed(verdict, name, f"{name}: no instance exists")

    def exhaust(self, name: str, search: Callable[[], tuple[int, Values | None]]) -> None:
        """Run a bounded search; ``search`` returns (cases checked, first failure or None)."""
        t0 = time.monotonic()
        cases, failure = search()
        dt = time.monotonic() - t0
        if failure is None:
            self.steps.append(Step(name, "proved-bounded", dt, f"{cases} cases"))
            return
        self.steps.append(Step(name, "counterexample", dt, render(failure)))
        raise StepFailed("counterexample", name, f"{name}: counterexample", failure)

    def lemma(
        self,
        name: str,
        build: Callable[..., tuple[Any, ...]],
        arity: int,
        opaque: Callable[..., Sequence[Any]] | None = None,
    ) -> Callable[..., Any]:
        """Prove ``forall xs. hyps(xs) => claim(xs)`` over fresh Ints; return an instantiator.

        ``build(*xs)`` returns ``(hyps, claim)`` or ``(hyps, claim, facts)``, where ``facts``
        are instances of lemmas proved earlier: used by this proof, but true for every value,
        so an instance of this lemma does not have to re-establish them.  The instantiator,
        applied to terms, returns ``Implies(And(hyps), claim)`` on those terms: a fact that may
        be added to later queries because the lemma holds for every value of every symbol.
        """
        prefix = "".join(c if c.isalnum() else "_" for c in name.split(":")[0])
        xs = [z3.Int(f"{prefix}_{i}") for i in range(arity)]
        built = build(*xs)
        hyps, claim = built[0], built[1]
        facts = built[2] if len(built) > 2 else []
        self.prove(name, claim, [*hyps, *facts], opaque=opaque(*xs) if opaque else ())

        def instance(*terms: Any) -> Any:
            h, c = build(*terms)[:2]
            return z3.Implies(z3.And(*h), c) if h else c

        return instance

    def note(self, key: str, value: Any) -> None:
        """Extra information for the report (e.g. which obligations also fit int32)."""
        self.notes[key] = value


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


def _pinned(r: tuple[int, int]) -> bool:
    return r[0] == r[1]


def free_constants(e: Any) -> list[Any]:
    """The uninterpreted constants (the symbols) of a formula, each once."""
    seen: set[int] = set()
    out: dict[int, Any] = {}
    stack = [e]
    while stack:
        x = stack.pop()
        i = x.get_id()
        if i in seen:
            continue
        seen.add(i)
        if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out[i] = x
        else:
            stack.extend(x.children())
    return list(out.values())


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
