"""Counterexample traces: a small JSON file that replays one run step by step.

A trace holds the geometry (group specs, pool size, number of requests), the operation
sequence, and what was observed when it was recorded.  ``docs/traces.md`` documents the
format; this module is its single implementation (pure Python, no third-party import), so
the Z3 side can turn a witness into a trace and the differential machine can turn a
shrunk failure into one.

Format version 1::

    {"format": "livetail-trace", "version": 1,
     "title": "...", "origin": "differential", "variant": null,
     "geometry": {"groups": [{"kind": "sliding", "block_size": 8,
                              "sliding_window": 12, "live_tail_alloc": true}],
                  "num_blocks": 16, "num_requests": 1},
     "ops": [{"op": "admit", "request": 0, "chunk": 17, "reserve": 2}],
     "observed": null}
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

FORMAT = "livetail-trace"
VERSION = 1
DEFAULT_TRACES_DIR = Path(".livetail") / "traces"

Op = dict[str, Any]

KINDS = ("full", "sliding", "state", "chunked")

# Every operation a trace may hold: its name and its required fields (integers, except
# ``call``), then optional fields.  The machine in ``verify/machine/`` gives them meaning.
# New op kinds may be added within a version; changing what an op means bumps VERSION.
OP_FIELDS: dict[str, tuple[str, ...]] = {
    "admit": ("request", "chunk", "reserve"),
    "acquire": ("request", "tokens"),
    "decode": ("request",),
    "reclaim": ("request", "frontier"),
    "free": ("request",),
    "group_acquire": ("request", "group", "tokens"),
    "group_reclaim": ("request", "group", "frontier"),
    "group_free": ("request", "group"),
    "bad": ("call", "request", "group"),
    # Prefix caching (semantics section 8); `doc` picks the request's token stream.
    "cache": ("request", "doc", "tokens"),
    "claim": ("request", "doc", "tokens"),
    # Step plans (semantics section 9, verify/machine/plan.py).
    "plan": ("mask", "first", "tokens"),
    # Section 12: drop every device name; drop the names of the listed device page ids (a
    # list field, see INT_LIST_FIELDS); detach a request's references into a handle; release
    # the `handle`-th handle detached so far (counted from 0 over the whole trace).
    "reset_names": (),
    "evict_names": (),
    "detach": ("request",),
    "release_detached": ("handle",),
    # Section 13.6: fork request `request`'s tables into request `into` (whose tables must be
    # fresh), and give a request its own copy of every tail page it shares.
    "fork": ("request", "into"),
    "copy_tail": ("request",),
}

# Host-tier ops (semantics section 10, verify/machine/host.py): a trace whose geometry has
# ``host_blocks`` holds these and nothing else; any other trace none of them.
HOST_OP_FIELDS: dict[str, tuple[str, ...]] = {
    "host_compute": ("request", "tokens"),
    "host_offload": ("request", "tokens"),
    "host_complete_offload": ("plan",),
    "host_abort_offload": ("plan",),
    "host_claim": ("request", "doc", "tokens"),
    "host_complete_load": ("request",),
    "host_evict": ("tokens",),
    "host_free": ("request",),
    "host_bad": ("call", "request"),
}
OP_FIELDS.update(HOST_OP_FIELDS)
HOST_BAD_CALLS = (
    "offload-without-host",
    "complete-offload-foreign",
    "complete-load-foreign",
    "offload-past-extent",
)
OPTIONAL_BOOL_FIELDS: dict[str, tuple[str, ...]] = {
    "admit": ("reclaim_between",),
    # cache: pass the document's token ids with the keys (section 12).
    "cache": ("with_tokens",),
}
# Required fields that hold a list of non-negative integers.
INT_LIST_FIELDS: dict[str, tuple[str, ...]] = {"evict_names": ("pages",)}
OPTIONAL_INT_FIELDS: dict[str, tuple[str, ...]] = {
    "claim": ("between_request", "between_tokens"),
    "plan": ("between_request", "between_tokens", "bad"),
    # Section 13.7: a partial write-back of at most max_pages host pages.
    "host_offload": ("max_pages",),
}


class TraceError(ValueError):
    """A trace file or trace dict that does not follow the documented format."""


@dataclass(frozen=True)
class GroupGeometry:
    """One group spec as plain data (the arguments of ``GroupSpec``)."""

    kind: str
    block_size: int
    sliding_window: int | None = None
    live_tail_alloc: bool = False
    attention_chunk_size: int | None = None  # chunked groups only (section 13.2)
    checkpoints: bool = False  # live-tail state groups only (section 13.5)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "block_size": self.block_size}
        if self.sliding_window is not None:
            d["sliding_window"] = self.sliding_window
        if self.live_tail_alloc:
            d["live_tail_alloc"] = True
        if self.attention_chunk_size is not None:
            d["attention_chunk_size"] = self.attention_chunk_size
        if self.checkpoints:
            d["checkpoints"] = True
        return d

    def describe(self) -> str:
        if self.kind == "sliding":
            live = " live" if self.live_tail_alloc else ""
            return f"sliding B={self.block_size} W={self.sliding_window}{live}"
        if self.kind == "chunked":
            return f"chunked B={self.block_size} C={self.attention_chunk_size}"
        if self.kind == "state" and self.live_tail_alloc:
            ck = " checkpoints" if self.checkpoints else ""
            return f"state B={self.block_size} live{ck}"
        return f"{self.kind} B={self.block_size}"


@dataclass(frozen=True)
class Geometry:
    """What a trace runs on: the groups of one coordinator, the pool size, the requests."""

    groups: tuple[GroupGeometry, ...]
    num_blocks: int
    num_requests: int
    host_blocks: int | None = None  # the HostPool's size: a host-tier trace
    alignment: int | None = None  # the coordinator's alignment (semantics 13.9); None: the lcm

    @property
    def base(self) -> int:
        """gcd of the page sizes: the prefix-cache key granularity."""
        out = 0
        for g in self.groups:
            out = math.gcd(out, g.block_size)
        return out

    @property
    def lcm(self) -> int:
        out = 1
        for g in self.groups:
            out = out * g.block_size // math.gcd(out, g.block_size)
        return out

    @property
    def align(self) -> int:
        """The coordinator's alignment: prefix hits land on its multiples (the lcm by default)."""
        return self.lcm if self.alignment is None else self.alignment

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "groups": [g.to_dict() for g in self.groups],
            "num_blocks": self.num_blocks,
            "num_requests": self.num_requests,
        }
        if self.host_blocks is not None:
            d["host_blocks"] = self.host_blocks
        if self.alignment is not None:
            d["alignment"] = self.alignment
        return d

    def describe(self) -> str:
        groups = "; ".join(f"g{i} {g.describe()}" for i, g in enumerate(self.groups))
        host = (
            ""
            if self.host_blocks is None
            else f" | host pool {self.host_blocks} pages ({self.host_blocks - 1} usable)"
        )
        return (
            f"{groups} | lcm {self.lcm}"
            + ("" if self.alignment is None else f" | alignment {self.alignment}")
            + f" | pool {self.num_blocks} pages "
            f"({self.num_blocks - 1} usable){host} | {self.num_requests} request(s)"
        )


# --- validation ---------------------------------------------------------------------


def _int(where: str, value: object, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceError(f"{where} must be an integer, got {value!r}")
    if value < low:
        raise TraceError(f"{where} must be >= {low}, got {value}")
    return value


_GROUP_FIELDS = (
    "kind", "block_size", "sliding_window", "live_tail_alloc", "attention_chunk_size",
    "checkpoints",
)


def _group_from(where: str, value: object) -> GroupGeometry:
    """A group spec from a dict (or any object with kind/block_size/... attributes)."""
    if isinstance(value, GroupGeometry):
        return value
    if isinstance(value, Mapping):
        d: Mapping[str, Any] = value
    else:
        d = {
            k: getattr(value, k)
            for k in _GROUP_FIELDS
            if hasattr(value, k)
        }
    unknown = set(d) - set(_GROUP_FIELDS)
    if unknown:
        raise TraceError(f"{where} has unknown field(s) {sorted(unknown)}")
    kind = d.get("kind")
    if kind not in KINDS:
        raise TraceError(f"{where}.kind must be one of {KINDS}, got {kind!r}")
    block_size = _int(f"{where}.block_size", d.get("block_size"), 1)
    window = d.get("sliding_window")
    live = d.get("live_tail_alloc", False)
    if not isinstance(live, bool):
        raise TraceError(f"{where}.live_tail_alloc must be true or false, got {live!r}")
    if kind == "sliding":
        window = _int(f"{where}.sliding_window", window, 1)
    elif window is not None:
        raise TraceError(f"{where}: only a sliding group has a sliding_window")
    elif live and kind != "state":
        raise TraceError(f"{where}: only a sliding or state group has live_tail_alloc")
    checkpoints = d.get("checkpoints", False)
    if not isinstance(checkpoints, bool):
        raise TraceError(f"{where}.checkpoints must be true or false, got {checkpoints!r}")
    if checkpoints and not (kind == "state" and live):
        raise TraceError(f"{where}: only a state group with live_tail_alloc has checkpoints")
    chunk = d.get("attention_chunk_size")
    if kind == "chunked":
        chunk = _int(f"{where}.attention_chunk_size", chunk, 1)
        if chunk % block_size != 0:
            raise TraceError(f"{where}.attention_chunk_size must be a multiple of block_size")
    elif chunk is not None:
        raise TraceError(f"{where}: only a chunked group has an attention_chunk_size")
    return GroupGeometry(str(kind), block_size, window, live, chunk, checkpoints)


def geometry_from(
    groups: Sequence[object],
    num_blocks: int,
    num_requests: int,
    host_blocks: int | None = None,
    alignment: int | None = None,
) -> Geometry:
    """Validated geometry from plain values (raises TraceError)."""
    if isinstance(groups, (str, bytes)) or not isinstance(groups, Sequence) or not groups:
        raise TraceError("geometry.groups must be a non-empty list of group specs")
    gs = tuple(_group_from(f"geometry.groups[{i}]", g) for i, g in enumerate(groups))
    out = Geometry(
        gs,
        _int("geometry.num_blocks", num_blocks, 1),
        _int("geometry.num_requests", num_requests, 1),
        None if host_blocks is None else _int("geometry.host_blocks", host_blocks, 1),
    )
    if alignment is None:
        return out
    align = _int("geometry.alignment", alignment, 1)
    if align % out.lcm or align > 2**31 - 1:
        raise TraceError(
            f"geometry.alignment must be a multiple of the lcm of the page sizes ({out.lcm}) "
            f"up to 2**31 - 1, got {align}"
        )
    return replace(out, alignment=align)


def validate_op(index: int, op: object, geometry: Geometry) -> Op:
    """One operation, checked against the op table and the geometry (raises TraceError)."""
    where = f"ops[{index}]"
    if not isinstance(op, Mapping):
        raise TraceError(f"{where} must be an object, got {op!r}")
    name = op.get("op")
    if not isinstance(name, str) or name not in OP_FIELDS:
        raise TraceError(f"{where}.op must be one of {sorted(OP_FIELDS)}, got {name!r}")
    host = geometry.host_blocks is not None
    if host and name not in HOST_OP_FIELDS:
        raise TraceError(
            f"{where}.op {name!r} is not a host-tier op; a trace with geometry.host_blocks "
            f"holds only {sorted(HOST_OP_FIELDS)}"
        )
    if not host and name in HOST_OP_FIELDS:
        raise TraceError(f"{where}.op {name!r} is a host-tier op: it needs geometry.host_blocks")
    fields = OP_FIELDS[name]
    optional = OPTIONAL_BOOL_FIELDS.get(name, ())
    optional_ints = OPTIONAL_INT_FIELDS.get(name, ())
    lists = INT_LIST_FIELDS.get(name, ())
    unknown = set(op) - {"op", *fields, *optional, *optional_ints, *lists}
    if unknown:
        raise TraceError(f"{where} ({name}) has unknown field(s) {sorted(unknown)}")
    out: Op = {"op": name}
    for f in fields:
        if f not in op:
            raise TraceError(f"{where} ({name}) is missing field {f!r}")
        if f == "call":
            if not isinstance(op[f], str):
                raise TraceError(f"{where}.call must be a string, got {op[f]!r}")
            if name == "host_bad" and op[f] not in HOST_BAD_CALLS:
                raise TraceError(
                    f"{where}.call must be one of {list(HOST_BAD_CALLS)}, got {op[f]!r}"
                )
            out[f] = op[f]
        else:
            out[f] = _int(f"{where}.{f}", op[f])
    for f in optional:
        if f in op:
            if not isinstance(op[f], bool):
                raise TraceError(f"{where}.{f} must be true or false, got {op[f]!r}")
            out[f] = op[f]
    for f in optional_ints:
        if f in op:
            out[f] = _int(f"{where}.{f}", op[f])
    for f in lists:
        if f not in op:
            raise TraceError(f"{where} ({name}) is missing field {f!r}")
        if not isinstance(op[f], list):
            raise TraceError(f"{where}.{f} must be a list of integers, got {op[f]!r}")
        out[f] = [_int(f"{where}.{f}[{i}]", v) for i, v in enumerate(op[f])]
    if ("between_request" in out) != ("between_tokens" in out):
        raise TraceError(f"{where}: between_request and between_tokens go together")
    if out.get("between_request", 0) >= geometry.num_requests:
        raise TraceError(
            f"{where}.between_request={out['between_request']} but the trace has "
            f"{geometry.num_requests} request(s)"
        )
    if out.get("request", 0) >= geometry.num_requests:
        raise TraceError(
            f"{where}.request={out['request']} but the trace has {geometry.num_requests} request(s)"
        )
    if out.get("group", 0) >= len(geometry.groups):
        raise TraceError(
            f"{where}.group={out['group']} but the trace has {len(geometry.groups)} group(s)"
        )
    return out


# --- public helpers -----------------------------------------------------------------


def make_trace(
    groups: Sequence[object],
    num_blocks: int,
    num_requests: int,
    ops: Sequence[Mapping[str, Any]],
    title: str,
    origin: str,
    variant: str | None = None,
    observed: Mapping[str, Any] | None = None,
    host_blocks: int | None = None,
    alignment: int | None = None,
) -> dict[str, Any]:
    """A validated trace dict, ready for ``write_trace``.

    ``groups`` are dicts with ``kind``, ``block_size`` and, for sliding groups,
    ``sliding_window`` and optionally ``live_tail_alloc`` (``GroupSpec`` objects work too).
    ``origin`` says who produced it (``"differential"``, ``"z3"``, ``"manual"``...);
    ``variant`` names the wrong spec variant it was recorded against, if any.
    ``host_blocks`` (the host pool's size) makes it a host-tier trace of ``host_*`` ops.
    ``alignment``: the coordinator's (semantics 13.9); None, the lcm of the page sizes.
    """
    geometry = geometry_from(groups, num_blocks, num_requests, host_blocks, alignment)
    if not isinstance(title, str) or not isinstance(origin, str):
        raise TraceError("title and origin must be strings")
    if variant is not None and not isinstance(variant, str):
        raise TraceError(f"variant must be a string or None, got {variant!r}")
    checked = [validate_op(i, op, geometry) for i, op in enumerate(ops)]
    if not checked:
        raise TraceError("a trace needs at least one op")
    return {
        "format": FORMAT,
        "version": VERSION,
        "title": title,
        "origin": origin,
        "variant": variant,
        "geometry": geometry.to_dict(),
        "ops": checked,
        "observed": None if observed is None else json.loads(json.dumps(dict(observed))),
    }


def parse_trace(data: object) -> dict[str, Any]:
    """Check a decoded trace (format, version, geometry, ops); returns a normalised copy."""
    if not isinstance(data, Mapping):
        raise TraceError("a trace must be a JSON object")
    if data.get("format") != FORMAT:
        raise TraceError(f"not a livetail trace: format is {data.get('format')!r}, not {FORMAT!r}")
    version = data.get("version")
    if version != VERSION:
        raise TraceError(
            f"trace format version {version!r} is not supported (this livetail reads {VERSION})"
        )
    geometry = data.get("geometry")
    if not isinstance(geometry, Mapping):
        raise TraceError("geometry must be an object")
    unknown = set(geometry) - {"groups", "num_blocks", "num_requests", "host_blocks", "alignment"}
    if unknown:
        raise TraceError(f"geometry has unknown field(s) {sorted(unknown)}")
    ops = data.get("ops")
    if not isinstance(ops, list):
        raise TraceError("ops must be a list")
    observed = data.get("observed")
    if observed is not None and not isinstance(observed, Mapping):
        raise TraceError("observed must be an object or null")
    return make_trace(
        geometry.get("groups", []),
        _int("geometry.num_blocks", geometry.get("num_blocks"), 1),
        _int("geometry.num_requests", geometry.get("num_requests"), 1),
        ops,
        title=data.get("title", ""),
        origin=data.get("origin", ""),
        variant=data.get("variant"),
        observed=observed,
        host_blocks=geometry.get("host_blocks"),
        alignment=geometry.get("alignment"),
    )


def trace_geometry(trace: Mapping[str, Any]) -> Geometry:
    g = trace["geometry"]
    return geometry_from(
        g["groups"], g["num_blocks"], g["num_requests"], g.get("host_blocks"), g.get("alignment")
    )


def load_trace(path: Path | str) -> dict[str, Any]:
    """Read and validate a trace file; TraceError names what is wrong."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise TraceError(f"cannot read trace {p}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise TraceError(f"{p} is not UTF-8 text: {e}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:  # bad JSON, an integer too long, deep nesting
        raise TraceError(f"{p} is not valid JSON: {e}") from None
    try:
        return parse_trace(data)
    except TraceError as e:
        raise TraceError(f"{p}: {e}") from None
    except RecursionError:  # `observed` nested past what a copy can walk
        raise TraceError(f"{p}: nested too deeply") from None


def trace_digest(trace: Mapping[str, Any]) -> str:
    """Short content hash of what a trace runs (geometry, ops, variant): names its file."""
    key = json.dumps(
        {"geometry": trace["geometry"], "ops": trace["ops"], "variant": trace.get("variant")},
        sort_keys=True,
    )
    return hashlib.sha256(key.encode()).hexdigest()[:10]


def dumps_trace(trace: Mapping[str, Any]) -> str:
    """Stable, diff-friendly JSON: one op per line."""
    head = {k: v for k, v in trace.items() if k != "ops"}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"  {json.dumps(k)}: {json.dumps(v, sort_keys=False)},")
    ops = ",\n".join(f"    {json.dumps(op)}" for op in trace["ops"])
    lines.append(f'  "ops": [\n{ops}\n  ]')
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_trace(trace: Mapping[str, Any], traces_dir: Path | str = DEFAULT_TRACES_DIR) -> Path:
    """Validate and write a trace as ``<origin>-<variant|spec>-<digest>.json``; returns the path.

    The same run written twice lands in the same file.
    """
    checked = parse_trace(trace)
    d = Path(traces_dir)
    d.mkdir(parents=True, exist_ok=True)
    origin = "".join(c if c.isalnum() else "_" for c in checked["origin"]) or "trace"
    variant = checked["variant"] or "spec"
    path = d / f"{origin}-{variant}-{trace_digest(checked)}.json"
    path.write_text(dumps_trace(checked), encoding="utf-8")
    return path
