"""The theorem suite: every section-7 property, stated over the spec's own closed forms.

``THEOREMS`` maps each name to a ``Theorem`` (name, plain-words statement, what it
guarantees an engine, the formula script, expected verdict, the wrong variants it must
reject, its budget of Z3 resource units).  ``run_theorem`` evaluates one in the current
process; ``livetail.verify.runner`` runs each in a fresh process (Z3's results depend on
solver history), with a wall-clock kill only as a hang guard, which is how they should be
run.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from typing import Any

import z3  # type: ignore[import-untyped]

from . import arith, bounded, charges, closed_forms, hot_paths, prefix, safety
from ._prover import DEFAULT_RLIMIT, Prover, StepFailed, Values
from ._registry import EXPECTED, THEOREMS, VERDICTS, Theorem

# Report order: closed forms, charges, safety, the bounded runs of the spec, arithmetic,
# prefix caching.
_ORDER = [m.__name__ for m in (closed_forms, charges, safety, bounded, arith, hot_paths, prefix)]
_sorted = sorted(THEOREMS.values(), key=lambda t: _ORDER.index(t.check.__module__))
THEOREMS.clear()
THEOREMS.update((t.name, t) for t in _sorted)

__all__ = [
    "DEFAULT_RLIMIT",
    "EXPECTED",
    "THEOREMS",
    "VERDICTS",
    "Theorem",
    "run_theorem",
    "markdown",
]


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
    p = Prover(rlimit=budget, quick=quick)
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


def markdown() -> str:
    """The theorem list in plain words (docs/theorems.md quotes this)."""
    lines = []
    for th in THEOREMS.values():
        kind = "bounded, exhaustive" if th.bounded else "Z3"
        exp = "expected: a witness" if th.expected == "witness" else "expected: proved"
        kills = f"; rejects variant(s) {', '.join(th.kills)}" if th.kills else ""
        lines.append(f"### `{th.name}`\n")
        lines.append(f"*{kind}; {exp}{kills}.*\n")
        lines.append(f"{th.statement}\n")
        lines.append(f"**What it guarantees an engine.** {th.guarantee}\n")
    return "\n".join(lines)
