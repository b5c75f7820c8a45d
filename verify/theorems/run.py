"""Evaluate one theorem in the current process: refute first, then prove, within its budget.

``livetail.verify.runner`` runs each theorem in a fresh process through ``run_theorem``
(Z3's results depend on solver history), with a wall-clock kill only as a hang guard, which
is how they should be run.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from typing import Any

import z3  # type: ignore[import-untyped]

from .prover.prover import Prover, Step, StepFailed
from .prover.query import Values
from .prover.small import LEVELS, QUICK_LEVELS
from .registry import THEOREMS


def run_theorem(
    name: str,
    *,
    seed: int = 0,
    variant: str | None = None,
    rlimit: int | None = None,
    quick: bool = False,
) -> dict[str, Any]:
    """Evaluate theorem ``name`` (under wrong variant ``variant`` if given); a JSON-able dict.

    ``rlimit`` overrides the theorem's budget of Z3 resource units (``livetail rlimits``
    measures with a large one).  Keys: name, verdict, expected, seconds, rlimit_used,
    rlimit_budget, statement, bounded, variant, steps, values (the last witness or the
    counterexample), witnesses (every witness or counterexample with its step), message,
    notes, traces (trace dicts, not yet written).
    """
    th = THEOREMS[name]
    z3.set_param("smt.random_seed", seed)
    z3.set_param("sat.random_seed", seed)
    t0 = time.monotonic()
    budget = th.budget if rlimit is None else rlimit
    # Refute, then prove: a first pass over the script searches every step's small domain
    # and stops at the first counterexample; only when it finds none does the second pass
    # make the unbounded queries (witness and bounded theorems have one pass).
    # --quick searches small only in the theorems that claim a variant (their kills must be
    # counterexamples, and the tests check them in quick mode), with lower caps; the others
    # go straight to their unbounded proofs, which is all a quick run asks of them.
    small = not quick or bool(th.kills)
    levels = QUICK_LEVELS if quick else LEVELS
    two_passes = small and th.refute_first and th.expected == "proved" and not th.bounded
    p = Prover(
        rlimit=budget,
        quick=quick,
        phase="small" if two_passes else "both",
        small=small,
        levels=levels,
    )
    values: Values = {}
    found: list[tuple[str, Values]] = []
    message = ""
    if variant is None:
        ctx: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    else:
        from ..variants import applied

        ctx = applied(variant)
    traces: list[dict[str, Any]] = []
    with ctx:
        try:
            th.check(p)
            if p.phase == "small":
                searched = p
                # Steps the script logged itself, or queries it made, would be made twice
                # by running it again: replay only a script of prover steps.
                replay = searched.replayable and not searched.steps
                p = Prover(
                    rlimit=budget, quick=quick, phase="prove", start=searched.start, levels=levels
                )
                p.small_searches, p.small_units = searched.small_searches, searched.small_units
                p.notes = searched.notes
                # The first pass is one step of the log, so the steps' units add up.
                p.steps = searched.steps
                p.steps.append(
                    Step(
                        "small domain of every step",
                        "no counterexample",
                        time.monotonic() - t0,
                        f"{searched.small_searches} searches, every symbol in "
                        + " then ".join(f"[-{k}, {k}]" for k, _, _ in levels),
                    )
                )
                if replay:
                    p.replay(searched.script)  # the same steps on the formulas it built
                else:
                    th.check(p)
            if p.refuted is None or p.refuted is False:
                verdict = "proved"
                if p.refuted is False:
                    message = "no witness: the claim the theorem expects to fail holds"
            else:
                verdict = "witness"
                found = list(p.witnesses)
                values = dict(found[-1][1])
        except StepFailed as e:
            verdict = e.verdict
            values = e.values
            message = e.message
            if verdict == "counterexample":
                found = [(e.step, e.values)]
        except Exception as e:  # a bug in a theorem script is a failure, not a crash
            verdict = "unknown"
            message = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}"
        if th.trace is not None and found and verdict in ("witness", "counterexample"):
            try:
                traces = th.trace(verdict, found, variant)
            except Exception as e:
                message += f" (trace not built: {type(e).__name__}: {e})"
    return {
        "name": name,
        "verdict": verdict,
        "expected": th.expected,
        "seconds": round(time.monotonic() - t0, 3),
        "rlimit_used": p.used,
        "rlimit_budget": budget,
        "statement": th.statement,
        "bounded": th.bounded,
        "variant": variant,
        "steps": [s.to_json() for s in p.steps],
        "values": values,
        "witnesses": [{"step": step, "values": v} for step, v in found],
        "message": message,
        "notes": p.notes,
        "traces": traces,
    }
