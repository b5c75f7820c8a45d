"""Queries and their budgets: how a formula is decided, in Z3 resource units.

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

from collections.abc import Callable
from typing import Any

import z3  # type: ignore[import-untyped]

from .small import LEVELS

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
