"""Turn a theorem's witness or counterexample into a replayable trace (``verify/trace.py``).

A live-tail group's alignment is the coordinator's lcm, so a geometry with ``m = A / B > 1``
gets a second group, a full group of page size ``A``, which fixes the lcm; it charges the
same for the combined and the sequential query, so every difference the trace shows is the
live-tail group's.  Pool sizes are chosen with the spec so the trace makes its point (e.g.
exactly the combined charge free: the sequential charge defers, the combined one would not).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from livetail import spec

from ...trace import make_trace

ORIGIN = "z3"


def live_groups(B: int, W: int, m: int) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = [
        {"kind": "sliding", "block_size": B, "sliding_window": W, "live_tail_alloc": True}
    ]
    if m > 1:
        groups.append({"kind": "full", "block_size": m * B})
    return groups


def groups_for(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The coordinator groups that realise a symbolic geometry's values (key "group")."""
    kind = values.get("group", "live")
    B = int(values["B"])
    if kind == "live":
        return live_groups(B, int(values["W"]), int(values.get("m", 1)))
    if kind == "sliding":
        return [{"kind": "sliding", "block_size": B, "sliding_window": int(values["W"])}]
    return [{"kind": str(kind), "block_size": B}]


def spec_coordinator(groups: Sequence[Mapping[str, Any]], num_blocks: int) -> Any:
    """A spec coordinator of ``groups`` (the trace format's group dicts), ``num_blocks`` pages."""
    specs = [
        spec.GroupSpec(
            g["kind"], g["block_size"], g.get("sliding_window"), g.get("live_tail_alloc", False)
        )
        for g in groups
    ]
    return spec.Coordinator(specs, spec.BlockPool(num_blocks))


def observed(
    theorem: str, ops: Sequence[Any], summary: str, values: Mapping[str, Any], **extra: Any
) -> dict[str, Any]:
    """The trace's ``observed`` record (docs/traces.md) for a Z3 or bounded finding."""
    return {
        "step": len(ops) - 1,
        "properties": [],
        "failures": [summary],
        "theorem": theorem,
        "values": dict(values),
        **extra,
    }


def charge_trace(
    values: Mapping[str, Any],
    title: str,
    theorem: str,
    variant: str | None,
) -> dict[str, Any]:
    """Admission of `first` then `extra` tokens after a prefix that gives the table's shape.

    Needs values B, W, m, first, extra and optionally slots, tail (default a fresh table).
    The pool has exactly the combined charge free at admission time.
    """
    B = int(values["B"])
    slots, tail = int(values.get("slots", 0)), int(values.get("tail", 0))
    first, extra = int(values["first"]), int(values["extra"])
    prefix = slots * B - tail
    groups = groups_for(values)
    big = 1 + 4 * len(groups) * (slots + first + extra + 4)  # more than any take here
    coord = spec_coordinator(groups, big)
    tables = coord.new_tables()
    ops: list[dict[str, Any]] = []
    if prefix > 0:
        ops.append({"op": "acquire", "request": 0, "tokens": prefix})
        coord.acquire(tables, prefix)
    pinned = coord.pool.num_pinned
    combined = coord.blocks_needed_for(tables, first + extra)
    sequential = coord.blocks_needed_for_sequential(tables, first, extra)
    ops.append({"op": "admit", "request": 0, "chunk": first, "reserve": extra})
    return make_trace(
        groups,
        1 + pinned + min(combined, sequential),
        1,
        ops,
        title=title,
        origin=ORIGIN,
        variant=variant,
        observed=observed(
            theorem,
            ops,
            f"combined charge {combined}, sequential charge {sequential}, "
            f"{min(combined, sequential)} pages free at admission",
            values,
            combined_charge=combined,
            sequential_charge=sequential,
        ),
    )


def shift_trace(
    values: Mapping[str, Any], title: str, theorem: str, variant: str | None
) -> dict[str, Any]:
    """Request 0 acquires k tokens fresh; request 1 the same k after `slots` full pages."""
    B, W, m = int(values["B"]), int(values["W"]), int(values["m"])
    slots, k = int(values["slots"]), int(values["k"])
    groups = live_groups(B, W, m)
    coord = spec_coordinator(groups, 1 + 4 * len(groups) * (slots + k + 4))
    fresh, shifted = coord.new_tables(), coord.new_tables()
    fresh_need = coord.managers[0].blocks_needed_for(fresh[0], k)
    coord.acquire(shifted, slots * B)
    shifted_need = coord.managers[0].blocks_needed_for(shifted[0], k)
    ops = [
        {"op": "group_acquire", "request": 0, "group": 0, "tokens": k},
        {"op": "group_acquire", "request": 1, "group": 0, "tokens": slots * B},
        {"op": "group_acquire", "request": 1, "group": 0, "tokens": k},
    ]
    return make_trace(
        groups,
        1 + 2 * (slots + k + 2),
        2,
        ops,
        title=title,
        origin=ORIGIN,
        variant=variant,
        observed=observed(
            theorem,
            ops,
            f"acquire({k}) takes {fresh_need} page(s) on a fresh table and {shifted_need} "
            f"after {slots} full pages",
            values,
            fresh_table_take=fresh_need,
            shifted_table_take=shifted_need,
        ),
    )


def ops_trace(
    groups: Sequence[Mapping[str, Any]],
    num_blocks: int,
    num_requests: int,
    ops: Sequence[Mapping[str, Any]],
    title: str,
    theorem: str,
    variant: str | None,
    values: Mapping[str, Any],
    summary: str | None = None,
    alignment: int | None = None,
) -> dict[str, Any]:
    """A failing run already expressed as trace ops (a bounded theorem's, or a counterexample
    built into ops); ``summary`` says what failed (default: the values' problem, or the title);
    ``alignment``: the coordinator's (None: the lcm)."""
    return make_trace(
        list(groups),
        num_blocks,
        num_requests,
        list(ops),
        title=title,
        origin=ORIGIN,
        variant=variant,
        observed=observed(theorem, ops, summary or str(values.get("problem", title)), values),
        alignment=alignment,
    )


# --- counterexamples of the theorems that execute transitions -----------------------------

KIND_OF_LABEL = (
    ("[live-tail", "live"),
    ("[full]", "full"),
    ("[state", "state"),
    ("[sliding", "sliding"),
)
"""A step's group kind, from the label its name starts with (``symbols.Geometry.label``)."""

ALIASES = {
    "slots": r"slots|take_s_\w+|ch_s_\w+",
    "tail": r"tail|take_t_\w+|ch_t_\w+",
    "n": r"n|take_n_\w+",
    "F": r"F|take_F_\w+|ch_F_\w+",
    "first": r"first|ch_first_\w+",
    "extra": r"extra|ch_extra_\w+",
    "f": r"f",
}
"""Where a table shape, a count, the free pages and a frontier are found in a step's values
(the theorem's own symbols, or a lemma's, named by position)."""


def geometry_of(
    step: str, values: Mapping[str, Any], kind: str | None = None
) -> dict[str, Any] | None:
    """Group kind, B, W and m of a counterexample (``groups_for``'s values), or None.

    The kind comes from the step's label, else ``kind`` (a theorem about one kind)."""
    kind = next((k for label, k in KIND_OF_LABEL if step.startswith(label)), kind)
    if kind is None or "B" not in values:
        return None
    out: dict[str, Any] = {"group": kind, "B": int(values["B"])}
    out["W"] = int(values.get("W", 2 if kind == "state" else 1))
    out["m"] = int(values.get("m", 1))
    return out


def _normalised(
    step: str, values: Mapping[str, Any], kind: str | None = None
) -> dict[str, int] | None:
    """The op-level values of a counterexample: group kind, geometry, shape, counts."""
    import re

    out = geometry_of(step, values, kind)
    if out is None:
        return None
    for key, pattern in ALIASES.items():
        hit = [v for k, v in values.items() if re.fullmatch(pattern, k) and isinstance(v, int)]
        if hit:
            out[key] = int(hit[0])
    if "count0" in values and "count1" in values:
        out["slots"] = int(values["count0"]) + int(values["count1"])
    return out


def transition_trace(
    step: str,
    values: Mapping[str, Any],
    theorem: str,
    variant: str | None,
    kind: str | None = None,
) -> dict[str, Any] | None:
    """A one-request trace that realises a counterexample of an executed transition, or None.

    The table is built by one acquire of its extent (the runs of the symbolic state merge
    into one: the trace is kept only if it still fails), then the step's operation runs:
    acquire(n), or acquire(first), reclaim(f), acquire(extra), or reclaim(f) twice, with
    exactly F free pages when the values give F.  The trace is run on the spec as it is now
    (under the variant, when there is one) and returned only if it fails there.
    """
    try:
        return _transition_trace(step, values, theorem, variant, kind)
    except Exception:  # the values do not map onto ops the spec accepts
        return None


def _transition_trace(
    step: str, values: Mapping[str, Any], theorem: str, variant: str | None, kind: str | None
) -> dict[str, Any] | None:
    v = _normalised(step, values, kind)
    if v is None or v["B"] < 1 or v["W"] < 1 or v["m"] < 1:
        return None
    B, slots, tail = v["B"], v.get("slots", 0), v.get("tail", 0)
    prefix = slots * B - tail
    if prefix < 0 or tail < 0 or tail >= B or any(v.get(k, 0) < 0 for k in ALIASES):
        return None
    groups = groups_for(v)
    ops: list[dict[str, Any]] = []
    if prefix > 0:
        ops.append({"op": "group_acquire", "request": 0, "group": 0, "tokens": prefix})
    if "first" in v and "extra" in v:
        ops.append({"op": "group_acquire", "request": 0, "group": 0, "tokens": v["first"]})
        if "f" in v and v["f"] <= prefix + v["first"]:
            ops.append({"op": "group_reclaim", "request": 0, "group": 0, "frontier": v["f"]})
        ops.append({"op": "group_acquire", "request": 0, "group": 0, "tokens": v["extra"]})
    elif "n" in v:
        ops.append({"op": "group_acquire", "request": 0, "group": 0, "tokens": v["n"]})
    elif "f" in v and v["f"] <= prefix:
        reclaim = {"op": "group_reclaim", "request": 0, "group": 0, "frontier": v["f"]}
        ops += [reclaim, dict(reclaim)]
    if not ops:
        return None
    pinned = 0
    if prefix > 0:
        coord = spec_coordinator(groups, 1 + 4 * (slots + 4))
        tables = coord.new_tables()
        coord.managers[0].acquire(coord.pool, tables[0], prefix)
        pinned = coord.pool.num_pinned
    free = v.get("F", 4 * (slots + v.get("n", 0) + v.get("first", 0) + v.get("extra", 0) + 4))
    title, summary = f"{theorem} counterexample: {step}", f"counterexample of {step}"
    trace = ops_trace(groups, 1 + pinned + free, 1, ops, title, theorem, variant, values, summary)
    return trace if fails_on_spec(trace) else None


def fails_on_spec(trace: dict[str, Any]) -> bool:
    """Does the trace fail on the spec as it is now (under its variant, when patched)?"""
    from ...machine import implementations, run_trace

    world, _ = run_trace(trace, implementations("spec"))
    return world.failure is not None


def transition_traces(theorem: str, kind: str | None = None) -> Any:
    """The ``trace=`` builder of a theorem that executes transitions (counterexamples only);
    ``kind``: the group kind of a theorem whose steps carry no kind label."""

    def build(
        verdict: str, found: Sequence[tuple[str, Any]], variant: str | None
    ) -> list[dict[str, Any]]:
        if verdict != "counterexample":
            return []
        out = []
        for step, values in found:
            tr = transition_trace(step, values, theorem, variant, kind)
            if tr is not None:
                out.append(tr)
        return out

    return build
