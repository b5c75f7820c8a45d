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

from ..trace import make_trace

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


def _coordinator(groups: Sequence[Mapping[str, Any]], num_blocks: int) -> Any:
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
    coord = _coordinator(groups, big)
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
    coord = _coordinator(groups, 1 + 4 * len(groups) * (slots + k + 4))
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
) -> dict[str, Any]:
    """A bounded theorem's failing run, already expressed as trace ops."""
    return make_trace(
        list(groups),
        num_blocks,
        num_requests,
        list(ops),
        title=title,
        origin=ORIGIN,
        variant=variant,
        observed=observed(theorem, ops, str(values.get("problem", title)), values),
    )
