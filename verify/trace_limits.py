"""The sizes a trace may hold, checked before ``livetail replay`` runs anything.

Two kinds of limit (docs/traces.md, "Limits"):

* what the API accepts: every count and size fits the int32 limit, the groups are ones
  ``GroupSpec`` and ``Coordinator`` accept (checked by building them on the spec), token
  ids of a document fit 32 bits, indices name a request, a group, a bad call that exists;
* what replay can run in bounded time and memory: pools of at most ``MAX_POOL`` pages,
  tables that together never span more than ``MAX_SLOTS`` slots (an upper bound computed
  from the ops alone, ignoring shortfalls), and a step cost (slots and the lcm's slots that
  the oracle walks) times the number of ops of at most ``MAX_WORK``.

A trace outside them is a usage error (exit 2), never a run that exhausts the machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .machine.bad_calls import BAD_CALLS
from .machine.plan import BAD_PLANS
from .trace import HOST_BAD_CALLS, TraceError, trace_geometry

INT32_MAX = 2**31 - 1
TOKEN_ID_MAX = 2**32 - 1  # page_keys takes token ids as uint32
DOC_STRIDE = 1_000_003  # doc_tokens: token i of document d is DOC_STRIDE * (d + 1) + i
MAX_POOL = 2**22  # pages per pool (device or host): about 0.5 GB for both sides at this size
MAX_SLOTS = 2**20  # slots of every table together, at any step
MAX_LCM_SLOTS = 2**16  # lcm // B per group: the closed-form queries walk that many slots
MAX_REQUESTS = 64
MAX_GROUPS = 16
MAX_OPS = 2**16
MAX_WORK = 2**26  # ops times the slots each step reads and walks
MAX_EVICT = 2**16  # host_evict tries every count down from its tokens


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def check_limits(trace: Mapping[str, Any]) -> None:
    """Raise TraceError when a parsed trace holds a size outside the limits above."""
    geo = trace_geometry(trace)
    for name, v in (("num_blocks", geo.num_blocks), ("host_blocks", geo.host_blocks)):
        if v is not None and v > INT32_MAX:
            raise TraceError(f"geometry.{name}={v} is past the int32 limit {INT32_MAX}")
        if v is not None and v > MAX_POOL:
            raise TraceError(
                f"geometry.{name}={v}: replay runs pools of at most {MAX_POOL} pages "
                f"(this trace's tables span at most {_slots_needed(trace)} slots)"
            )
    if geo.num_requests > MAX_REQUESTS:
        raise TraceError(f"geometry.num_requests={geo.num_requests}: at most {MAX_REQUESTS}")
    if len(geo.groups) > MAX_GROUPS:
        raise TraceError(f"geometry.groups has {len(geo.groups)} groups: at most {MAX_GROUPS}")
    _check_api_geometry(trace)
    lcm = geo.lcm
    for i, g in enumerate(geo.groups):
        if lcm // g.block_size > MAX_LCM_SLOTS:
            raise TraceError(
                f"geometry.groups[{i}]: lcm {lcm} of the page sizes spans {lcm // g.block_size} "
                f"slots of block_size {g.block_size}; replay walks at most {MAX_LCM_SLOTS}"
            )
    ops = trace["ops"]
    if len(ops) > MAX_OPS:
        raise TraceError(f"the trace has {len(ops)} ops: replay runs at most {MAX_OPS}")
    for i, op in enumerate(ops):
        _check_op(i, op, trace)
    slots = _slots_needed(trace)
    if slots > MAX_SLOTS:
        raise TraceError(
            f"the ops can make the tables span {slots} slots together: replay runs at most "
            f"{MAX_SLOTS}"
        )
    per_step = slots + sum(lcm // g.block_size for g in geo.groups) * 4 + geo.num_requests
    if per_step * len(ops) > MAX_WORK:
        raise TraceError(
            f"{len(ops)} ops over tables of up to {slots} slots: replay runs at most "
            f"{MAX_WORK} slot visits"
        )


def _check_api_geometry(trace: Mapping[str, Any]) -> None:
    """Build the groups on the spec: what its constructors reject, replay rejects."""
    from livetail import spec

    geo = trace_geometry(trace)
    try:
        specs = [
            spec.GroupSpec(
                g.kind, g.block_size, g.sliding_window, g.live_tail_alloc,
                attention_chunk_size=g.attention_chunk_size, checkpoints=g.checkpoints,
            )
            for g in geo.groups
        ]
        host = spec.HostPool(1) if geo.host_blocks is not None else None
        spec.Coordinator(specs, spec.BlockPool(1), host)
    except (TypeError, ValueError) as e:
        raise TraceError(f"geometry is not one the API accepts: {e}") from None


def _check_op(i: int, op: Mapping[str, Any], trace: Mapping[str, Any]) -> None:
    where = f"ops[{i}]"
    geo = trace_geometry(trace)
    for f, v in op.items():
        if isinstance(v, int) and not isinstance(v, bool) and v > INT32_MAX:
            raise TraceError(f"{where}.{f}={v} is past the int32 limit {INT32_MAX}")
    kind = op["op"]
    if "doc" in op:
        tokens = op.get("tokens", 0)
        if DOC_STRIDE * (op["doc"] + 1) + tokens > TOKEN_ID_MAX:
            raise TraceError(
                f"{where}.doc={op['doc']}: its token ids pass {TOKEN_ID_MAX} (page_keys takes "
                "uint32 token ids)"
            )
    if kind == "bad" and op["call"] not in BAD_CALLS:
        raise TraceError(f"{where}.call must be one of {sorted(BAD_CALLS)}, got {op['call']!r}")
    if kind == "host_bad" and op["call"] not in HOST_BAD_CALLS:
        raise TraceError(f"{where}.call must be one of {list(HOST_BAD_CALLS)}")
    if kind == "bad" and op["group"] >= len(geo.groups):
        raise TraceError(f"{where}.group={op['group']}: the trace has {len(geo.groups)} group(s)")
    if kind == "plan" and op.get("bad", 0) not in (0, *BAD_PLANS):
        raise TraceError(f"{where}.bad must be one of {[0, *BAD_PLANS]}, got {op['bad']}")
    if kind == "host_evict" and op["tokens"] > MAX_EVICT:
        raise TraceError(f"{where}.tokens={op['tokens']}: host_evict takes at most {MAX_EVICT}")
    if "doc" in op and op["tokens"] // geo.base > MAX_SLOTS:  # one key per base page
        raise TraceError(f"{where}.tokens={op['tokens']}: more than {MAX_SLOTS} keys")


def _slots_needed(trace: Mapping[str, Any]) -> int:
    """An upper bound on the slots all tables span together at any step, from the ops alone.

    Every acquire is assumed to succeed (a shortfall only lowers the real figure), an
    extent never passes the int32 limit (an acquire past it raises), a free empties.
    """
    geo = trace_geometry(trace)
    sizes = [g.block_size for g in geo.groups]
    ext = [[0] * len(sizes) for _ in range(geo.num_requests)]

    def grow(r: int, n: int, groups: range | list[int] | None = None) -> None:
        for g in groups if groups is not None else range(len(sizes)):
            ext[r][g] = min(ext[r][g] + n, INT32_MAX)

    def total() -> int:
        return sum(_ceil(e, b) for row in ext for e, b in zip(row, sizes))

    peak = 0
    for op in trace["ops"]:
        kind, r = op["op"], op.get("request", 0)
        transient = 0
        if kind == "admit":
            grow(r, op["chunk"] + op["reserve"])
        elif kind in ("acquire", "host_compute", "host_claim", "claim"):
            grow(r, op["tokens"])
        elif kind == "decode":
            grow(r, 1)
        elif kind == "group_acquire":
            grow(r, op["tokens"], [op["group"]])
        elif kind in ("free", "host_free"):
            ext[r] = [0] * len(sizes)
        elif kind == "group_free":
            ext[r][op["group"]] = 0
        elif kind == "plan":
            for q in range(geo.num_requests):
                if op["mask"] >> q & 1:
                    grow(q, op["tokens"])
        elif kind == "host_evict":
            transient = sum(_ceil(op["tokens"], b) for b in sizes)
        if "between_request" in op:
            grow(op["between_request"], op["between_tokens"])
        peak = max(peak, total() + transient)
    return peak
