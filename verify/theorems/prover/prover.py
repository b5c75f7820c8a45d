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

The queries and budgets are ``query.py``'s; the small-domain search is ``small.py``'s.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3  # type: ignore[import-untyped]

from .nodes import free_constants
from .query import (
    CORE_FIRST,
    DEFAULT_RLIMIT,
    SHRINK_RLIMIT,
    SMALL,
    SMALL_DOMAIN,
    SMALL_SEARCH_RLIMIT,
    Query,
    Values,
    rlimit_count,
)
from .small import LEVELS, Unsupported, array_blaster, blaster, bounds, int_array, to_bv
from .terms import (
    abstract,
    antecedents,
    confirmed,
    model_values,
    pinned,
    render,
    simplified,
    uninterpreted,
)


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
    # The boxes searched, with their word widths and caps (small.LEVELS, or QUICK_LEVELS).
    levels: tuple[tuple[int, int, int], ...] = LEVELS
    small_searches: int = 0
    small_units: int = 0  # resource units the small-domain searches and their shrinking used
    # The "small" pass records each step it searched (the formulas as built, the core_first
    # then set) so the "prove" pass can replay them instead of running the script again
    # (``replay``); any query of the script's own in the first pass makes it unreplayable.
    script: list[tuple[str, int, tuple[Any, ...]]] = field(default_factory=list)
    replayable: bool = True
    _searching: bool = False

    # -- solver plumbing ------------------------------------------------------------------

    @property
    def used(self) -> int:
        """Resource units used since the prover was made (every query of this theorem)."""
        return rlimit_count() - self.start

    def _solver(self, limit: int | None = None, core_first: int = 0) -> Query:
        """A ``solver()`` that may use what is left of the budget, at most ``limit`` units."""
        if self.phase == "small" and not self._searching:
            self.replayable = False  # a query of the script's own: the script must run again
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

        The bounded formula is decided over bit-vectors (``small.py``: bit-blasting finds a
        model with sizes of 1 in thousands of units, where the SMT core stalls on the
        nonlinear terms).  A candidate confirmed on the Int formula is shrunk (the least total
        of the symbols' absolute values, by halving) and ends the step as a
        ``counterexample``: a wrong transition with a small counterexample is refuted in a
        few units instead of leaving the unbounded query to spend the budget.  Nothing found,
        or not decided within the caps of ``small.LEVELS`` (boxes [-1, 1] and [-4, 4]
        in turn), proves nothing: the unbounded query decides.
        """
        if not self.small or self.phase == "prove":
            return
        self._searching = True
        try:
            self._refute_small(name, claim, hyps, show)
        finally:
            self._searching = False

    def _refute_small(
        self, name: str, claim: Any, hyps: Sequence[Any], show: Mapping[str, Any] | None
    ) -> None:
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
                fixed = [(x, z3.IntVal(ranges[str(x)][0])) for x in xs if pinned(ranges[str(x)])]
                small = simplified(z3.substitute(formula, *fixed)) if fixed else formula
                free = [x for x in xs if not pinned(ranges[str(x)])]
                self._arrays: dict[str, tuple[Any, Any]] = {}
                try:
                    image, words = to_bv(small, free, width, self._arrays)
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
        s.strategy = array_blaster if getattr(self, "_arrays", None) else blaster
        s.add(image, *box, *extra)
        if s.check() != z3.sat:
            return None
        m = s.model()
        values = {k: m.eval(w, model_completion=True).as_signed_long() for k, w in words.items()}
        consts = free_constants(formula)
        pairs = [(c, z3.IntVal(values[str(c)])) for c in consts if str(c) in values]
        # A Boolean symbol (a flag of the step) keeps its word's value too: the image holds
        # it as it is, so the model has it, and without it no candidate could be confirmed.
        pairs += [(c, m.eval(c, model_completion=True)) for c in consts if z3.is_bool(c)]
        # An array symbol takes its word array's value, read back as an Int array.
        arrays = {}
        for name, (int_arr, word_arr) in getattr(self, "_arrays", {}).items():
            value = int_array(m.eval(word_arr, model_completion=True), int_arr.sort())
            if value is None:
                return None
            arrays[name] = (int_arr, value)
        pairs += list(arrays.values())
        if not z3.is_true(z3.simplify(z3.substitute(formula, *pairs))):
            return None
        self._array_values = arrays
        return values

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
        s.add(*[a == v for a, v in getattr(self, "_array_values", {}).values()])
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
            self._record("prove", name, claim, list(hyps), show, tuple(opaque), searched)
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
            built = (name, general, list(general_hyps), claim, list(hyps), tuple(over), show)
            self._record("_prove_general", *built)
            self.refute_small(name, claim, list(hyps), show)
            return
        self._prove_general(name, general, general_hyps, claim, hyps, over, show)

    def _prove_general(
        self,
        name: str,
        general: Any,
        general_hyps: Sequence[Any],
        claim: Any,
        hyps: Sequence[Any],
        over: Sequence[tuple[Any, str]],
        show: Mapping[str, Any] | None,
    ) -> None:
        """``prove_general`` on the formulas ``build`` made (general, then real)."""
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
            self._record("exhibit", name, list(hyps), show)
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
        if self.phase == "small":
            self.replayable = False  # a search of the script's own runs in both passes
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

    def _record(self, method: str, *args: Any) -> None:
        self.script.append((method, self.core_first, args))

    def replay(self, script: Sequence[tuple[str, int, tuple[Any, ...]]]) -> None:
        """Run the steps a "small" pass recorded, in order, on the formulas it built.

        The second pass of ``run_theorem``: the same steps as running the script again
        (a script's formulas never depend on what a step returns, which in the first pass
        is nothing, or an empty exhibit), without building every formula a second time.
        """
        for method, core_first, args in script:
            self.core_first = core_first
            getattr(self, method)(*args)

    def note(self, key: str, value: Any) -> None:
        """Extra information for the report (e.g. which obligations also fit int32)."""
        self.notes[key] = value
