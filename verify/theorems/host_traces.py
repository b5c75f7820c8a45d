"""Traces of ``host_*`` ops (``verify/trace.py``) for the host slot theorems' counterexamples.

A counterexample of a theorem that executes a host-tier rule on symbolic state is realised
as a short host round trip on a coordinator the values describe: request 0 computes a
prompt (acquire, name, reclaim), offloads it, and, for a claim or a load, is freed, the
device names are evicted and the prompt comes back through a claim with loads.  The host
machine's data oracle (``verify/machine/host.py``) then sees what the rule broke.  Each trace
is run on the spec as it is now (under the variant, when there is one) and kept only if it
fails there; ``livetail replay TRACE --variant NAME`` reproduces it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..trace import make_trace
from .prover.traces import KIND_OF_LABEL, ORIGIN, groups_for, observed

Builder = Callable[[str, Sequence[tuple[str, Any]], "str | None"], list[dict[str, Any]]]


def _failing(
    groups: Sequence[Mapping[str, Any]],
    tokens: int,
    ops: list[dict[str, Any]],
    step: str,
    values: Mapping[str, Any],
    theorem: str,
    variant: str | None,
) -> dict[str, Any] | None:
    """The trace of ``ops``, if the spec as it is now fails it; pools sized for ``tokens``."""
    from ..machine import implementations, run_trace

    pages = _pages(groups, tokens)
    trace = make_trace(
        list(groups),
        1 + pages,
        3,
        ops,
        title=f"{theorem} counterexample: {step}",
        origin=ORIGIN,
        variant=variant,
        observed=observed(theorem, ops, f"counterexample of {step}", values),
        host_blocks=1 + pages,
    )
    world, _ = run_trace(trace, implementations("spec"))
    return trace if world.failure is not None else None


def _pages(groups: Sequence[Mapping[str, Any]], tokens: int) -> int:
    """Device and host pool size: room for a few requests of `tokens` tokens."""
    return 2 * len(groups) * (tokens + 4)


def _round_trip(groups: Sequence[Mapping[str, Any]], tokens: int, end: str) -> list[dict[str, Any]]:
    """Request 0 computes and offloads `tokens`; then the plan ends as `end` says.  For a
    load, request 0 is freed and another request's allocation takes every free device page
    (evicting every device name) before the prompt comes back through a claim with loads."""
    evict = _pages(groups, tokens) * max(int(g["block_size"]) for g in groups)
    ops: list[dict[str, Any]] = [
        {"op": "host_compute", "request": 0, "tokens": tokens},
        {"op": "host_offload", "request": 0, "tokens": tokens},
    ]
    if end == "abort offload":
        return [*ops, {"op": "host_abort_offload", "plan": 0}]
    ops.append({"op": "host_complete_offload", "plan": 0})
    if end == "complete offload":
        return ops
    ops += [
        {"op": "host_free", "request": 0},
        {"op": "host_evict", "tokens": evict},
        {"op": "host_claim", "request": 0, "doc": 0, "tokens": tokens},
    ]
    if end == "abort load":
        return [*ops, {"op": "host_free", "request": 0}]
    # The load completes; then another request's allocation reuses every free device page.
    return [*ops, {"op": "host_complete_load", "request": 0}, {"op": "host_evict", "tokens": evict}]


def _builder(realise: Callable[[str, Mapping[str, Any], str | None], Any]) -> Builder:
    """The ``trace=`` builder: a trace for each counterexample step ``realise`` maps to ops."""

    def attempt(step: str, values: Mapping[str, Any], variant: str | None) -> Any:
        try:
            return realise(step, values, variant)
        except Exception:  # the values do not map onto ops the spec accepts
            return None

    def build(
        verdict: str, found: Sequence[tuple[str, Any]], variant: str | None
    ) -> list[dict[str, Any]]:
        made = [attempt(s, v, variant) for s, v in found] if verdict == "counterexample" else []
        return [t for t in made if t is not None]

    return build


def plan_end_traces(theorem: str) -> Builder:
    """copy-plans-name-their-pages: a round trip of k full pages ending as the step says."""

    def realise(step: str, values: Mapping[str, Any], variant: str | None) -> Any:
        end = step[1 : step.index("]")]
        k = min(max(int(values.get("k", 1)), 1), 6)
        groups = [{"kind": "full", "block_size": 2}]
        return _failing(
            groups, 2 * k, _round_trip(groups, 2 * k, end), step, values, theorem, variant
        )

    return _builder(realise)


def _geometry(step: str, values: Mapping[str, Any]) -> tuple[list[dict[str, Any]], int, int]:
    """The groups a step's group kind and values give, their page size and lcm in pages."""
    kind = next(k for label, k in KIND_OF_LABEL if step.startswith(label))
    B = int(values["B"])
    q = int(values.get("q", values.get("m", 1)))
    if B < 1 or q < 1 or B * q > 64:
        raise ValueError("no small coordinator for these values")
    v = {"group": kind, "B": B, "W": int(values.get("W", 2 if kind == "state" else 1))}
    groups = groups_for({**v, "m": 1})
    if kind == "live":
        groups = groups_for({**v, "m": q})
    elif q > 1:
        groups.append({"kind": "full", "block_size": q * B})
    return groups, B, q


def offload_set_traces(theorem: str) -> Builder:
    """offload-set-is-reachable-set: compute up to the first boundary above slot j, offload."""

    def realise(step: str, values: Mapping[str, Any], variant: str | None) -> Any:
        groups, B, q = _geometry(step, values)
        j = max(int(values.get("j", 0)), 0)
        n = (j // q + 1) * q * B
        ops = [
            {"op": "host_compute", "request": 0, "tokens": n},
            {"op": "host_offload", "request": 0, "tokens": n},
        ]
        return _failing(groups, n, ops, step, values, theorem, variant)

    return _builder(realise)


def claim_slot_traces(theorem: str) -> Builder:
    """claim-places-matched-and-loaded-pages: b slots served from the host, then loaded."""

    def realise(step: str, values: Mapping[str, Any], variant: str | None) -> Any:
        groups, B, q = _geometry(step, values)
        b = max(int(values.get("b", 1)), 1)
        n = -(-b // q) * q * B  # the first lcm boundary at or above b slots
        return _failing(
            groups, n, _round_trip(groups, n, "complete load"), step, values, theorem, variant
        )

    return _builder(realise)
