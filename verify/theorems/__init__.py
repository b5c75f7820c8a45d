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

from . import (
    arith,
    bounded,
    charges,
    closed_forms,
    host,
    hot_paths,
    plans,
    prefix,
    safety,
    slots,
    state,
    transitions,
)
from ._prover import DEFAULT_RLIMIT, Prover, Step, StepFailed, Values
from ._registry import EXPECTED, THEOREMS, VERDICTS, Theorem
from ._small import LEVELS, QUICK_LEVELS

# Report order: closed forms, charges, safety, the bounded runs of the spec, arithmetic,
# prefix caching, retention and step plans, the host tier.
_ORDER = [
    m.__name__
    for m in (
        closed_forms,
        transitions,
        state,
        slots,
        charges,
        safety,
        bounded,
        arith,
        hot_paths,
        prefix,
        plans,
        host,
    )
]
_sorted = sorted(THEOREMS.values(), key=lambda t: _ORDER.index(t.check.__module__))
THEOREMS.clear()
THEOREMS.update((t.name, t) for t in _sorted)

__all__ = [
    "DEFAULT_RLIMIT",
    "EXPECTED",
    "PROPERTY",
    "THEOREMS",
    "VERDICTS",
    "Theorem",
    "domain",
    "executed",
    "property_table",
    "readme_table",
    "run_theorem",
    "markdown",
]

# Which property of semantics section 7 each theorem establishes (and how far).
PROPERTY = {
    "resume-count-closed-form": "7.2 (closed form of the resume count)",
    "live-count-closed-form": "7.2 (live_count = slot-by-slot count)",
    "blocks-needed-equals-acquire": "7.2 (definitional; acquire shape)",
    "full-allocation-when-resume-covers-alignment": "7.4 (degenerate case)",
    "acquire-all-or-nothing": "7.1 (manager acquire)",
    "coordinator-acquire-all-or-nothing": "7.1 (coordinator acquire)",
    "admission-promise": "7.3 (sequential charge bounds the peak)",
    "acquire-places-holes-outside-every-window": "7.4 (acquire's placement)",
    "reclaim-exact-with-shared-pages": "7.5 (reclaim, with sharing and holes)",
    "conservation-inductive": "7.6 (free + pinned = N - 1, inductive; per-page: bounded)",
    "sequential-charge-exact": "7.3 (over the closed forms; partly definitional)",
    "sequential-fits-checks-agree": "7.7 (spec and native agree on the int32 check)",
    "sequential-charge-bounds-peak": "7.3 (definitional, over the closed forms)",
    "combined-charge-under-counts": "7.3 (the combined charge does not bound the peak)",
    "decode-reserve-exact": "7.3 (reserve >= 0; partly definitional)",
    "shift-invariance-by-alignment": "section 6 (charges on fresh tables)",
    "shift-by-non-multiple-fails": "section 6 (alignment is needed)",
    "live-tail-hole-never-read": "7.4 (safety, over live)",
    "live-tail-resume-pages-kept": "7.4 (resume pages, over live)",
    "live-tail-minimal": "7.4 (minimality, over live)",
    "reclaim-releases-only-expired": "7.5 (the reclaim bound)",
    "reclaim-slots-follow-runs": "7.5 and 7.6 per slot (the model's reclaim, slot by slot)",
    "reclaimable-counts-what-reclaim-frees": "7.5 (blocks_reclaimable_at, slot by slot)",
    "claim-places-matched-and-loaded-pages": "7.8 and 7.11 per slot (the claim's placement)",
    "offload-set-is-reachable-set": "7.11 (offload picks exactly the reachable slots)",
    "naming-reaches-every-resume-page": "7.8 (naming reaches every page a hit needs)",
    "step-plan-apply-never-fails": "7.10 (two requests, no page shared between them)",
    "events-replay-to-the-names": "7.12 (replay = names, inductive per name)",
    "acquire-all-or-nothing-bounded": "7.1 (bounded)",
    "sequential-charge-with-reclaims-bounded": "7.3 (bounded)",
    "reclaim-bounded": "7.5 and 7.6 per page (bounded)",
    "coordinator-acquire-iff-fits-bounded": "7.1 (bounded)",
    "native-arithmetic-fits-int64": "7.7",
    "closed-forms-fit-int32": "7.7",
    "native-hot-paths-fit-int64": "7.7 (every native hot-path expression)",
    "textbook-round-up-overflows-int32": "7.7 (why the round-up is written as it is)",
    "match-is-read-only-bounded": "7.8 (bounded)",
    "claim-takes-consumed-bounded": "7.8 (bounded)",
    "hit-admission-exact-bounded": "7.8 (bounded)",
    "live-tail-never-costs-a-hit-bounded": "7.8 (bounded)",
    "match-greatest-boundary-bounded": "7.8 (bounded)",
    "retention-bounded": "7.9 (bounded)",
    "step-plan-bounded": "7.10 (bounded)",
    "offload-is-reachable-set-bounded": "7.11 (offload copies the reachable pages, bounded)",
    "match-across-tiers-greatest-boundary-bounded": "7.11 (match across tiers, bounded)",
    "claim-with-loads-all-or-nothing-bounded": "7.11 (claim with loads, bounded)",
    "loads-land-in-real-slots-bounded": "7.11 (loads and the data oracle, bounded)",
    "offload-preserves-hits-bounded": "7.11 (offload then match across tiers, bounded)",
}


MODEL_CALLS = frozenset(
    {
        "acquire",
        "coordinator_acquire",
        "run_real",
        "claim_run",
        "slots.reclaim_cell",
        "slots.punched",
        "slots.reclaimable_cell",
        "slots.claim_cell",
        "slots.reachable",
        "slots.offered",
        "slots.takes_name",
        "plan_stepped",
        "slots.stores",
        "slots.removes",
    }
)
"""Transitions the model's own classes call to change state (a test checks this against
spec/): spec/runs.py functions by bare name, spec/slots.py ones as ``slots.<name>``.  The
others a theorem may execute (``reclaim``, ``free_table``, ``reclaimable``) are run-level
versions the model never calls: its reclaim_expired, free and blocks_reclaimable_at write
and count slot by slot through spec/slots.py's rules, which the slot theorems execute and
tie to the run description those run-level versions act on."""


def _qualified(function: str) -> str:
    return function if "." in function else f"runs.{function}"


def executed(th: Theorem) -> str:
    """The "executes" mark of a theorem: which transitions it runs on symbolic state, and
    whether the model calls them; a bounded theorem runs the model's classes on ints."""
    if th.bounded:
        return "model's classes, concrete runs"
    if not th.executes:
        return "closed forms only"
    called = [_qualified(f) for f in th.executes if f in MODEL_CALLS]
    parallel = [_qualified(f) for f in th.executes if f not in MODEL_CALLS]
    parts = []
    if called:
        parts.append(f"model's: {', '.join(called)}")
    if parallel:
        parts.append(f"parallel, not called by the model: {', '.join(parallel)}")
    return "; ".join(parts)


def domain(th: Theorem) -> str:
    """Unbounded, bounded (the bounds are in the statement) or witness (search bounds too)."""
    if th.bounded:
        return "bounded (bounds in the statement)"
    if th.expected == "witness":
        return "witness (search bounds in the statement)"
    return "unbounded"


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
                        f"{searched.small_searches} searches, every symbol in [-1, 1] then "
                        "[-4, 4]",
                    )
                )
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


def readme_table() -> str:
    """The README's table: theorem, domain, what it executes, section-7 property, guarantee."""
    lines = [
        "| theorem | domain | executes | establishes | what it guarantees an engine |",
        "|---|---|---|---|---|",
    ]
    for th in THEOREMS.values():
        dom = domain(th).split(" (")[0]
        lines.append(
            f"| `{th.name}` | {dom} | {executed(th)} | {PROPERTY[th.name]} | {th.guarantee} |"
        )
    return "\n".join(lines)


SECTION7 = {
    1: "all-or-nothing",
    2: "closed forms = slot-by-slot",
    3: "sequential charge bounds the peak",
    4: "live-tail safety and minimality",
    5: "reclaim",
    6: "conservation",
    7: "arithmetic",
    8: "prefix caching",
    9: "retention",
    10: "step plans",
    11: "host tier",
    12: "events",
}
NO_THEOREM: dict[int, str] = {}
"""Section-7 properties with no theorem, and what checks them instead."""


def properties(th: Theorem) -> list[int]:
    """The section-7 properties a theorem establishes (from PROPERTY: "7.N", "7.N and 7.M")."""
    import re

    return [int(n) for n in re.findall(r"7\.(\d+)", PROPERTY[th.name])]


def property_table() -> str:
    """docs/theorems.md's table: per section-7 property, each theorem, domain, executes."""
    lines = [
        "| property (section 7) | theorem | domain | executes |",
        "|---|---|---|---|",
    ]
    for k, title in SECTION7.items():
        rows = [th for th in THEOREMS.values() if k in properties(th)]
        if not rows:
            lines.append(f"| {k}. {title} | - | {NO_THEOREM[k]} | - |")
        for th in rows:
            dom = domain(th).split(" (")[0]
            lines.append(f"| {k}. {title} | `{th.name}` | {dom} | {executed(th)} |")
    return "\n".join(lines)


def markdown() -> str:
    """The theorem list in plain words (docs/theorems.md quotes this)."""
    lines = []
    for th in THEOREMS.values():
        kind = "bounded, exhaustive" if th.bounded else "Z3"
        exp = "expected: a witness" if th.expected == "witness" else "expected: proved"
        kills = f"; rejects variant(s) {', '.join(th.kills)}" if th.kills else ""
        lines.append(f"### `{th.name}`\n")
        lines.append(f"*{kind}; {exp}{kills}.*\n")
        lines.append(f"*Domain: {domain(th)}. Establishes: {PROPERTY[th.name]}.*\n")
        lines.append(f"{th.statement}\n")
        lines.append(f"**What it guarantees an engine.** {th.guarantee}\n")
    return "\n".join(lines)
