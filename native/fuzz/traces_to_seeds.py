"""Write the fuzz target's seed corpus: one input per trace in tests/traces, in the byte
encoding of native/fuzz/README.md (geometry mapped to the target's small set of page sizes
and windows, ops to the nearest call sequence the target decodes).

    python native/fuzz/traces_to_seeds.py [TRACES_DIR] [OUT_DIR]
"""

from __future__ import annotations

import json
import sys
from math import gcd
from pathlib import Path
from typing import Any

PAGE_SIZES = [1, 2, 3, 4, 8, 16]
KINDS = {"full": 0, "sliding": 1, "state": 3}
ACQUIRE, ADMIT, RECLAIM, FREE, GROUP, CACHE, MATCH, CLAIM_SAVED, BAD = 0, 1, 2, 3, 4, 5, 6, 7, 11
OFFLOAD, END_OFFLOAD, EVICT, COMPLETE_LOAD, HOST_BAD = 13, 14, 15, 16, 17
# host_bad calls of the trace format -> the target's host misuse cases (op HOST_BAD, a % 7)
HOST_BAD_CASES = {
    "complete-offload-foreign": 3,
    "complete-load-foreign": 4,
    "offload-past-extent": 5,
    "offload-without-host": 6,
}


def page_size_index(block_size: int) -> int:
    """The largest of the target's page sizes that does not exceed block_size."""
    return max(i for i, b in enumerate(PAGE_SIZES) if b <= max(1, block_size))


def token_byte(n: int, lcm: int) -> int:
    """A byte the target decodes to n tokens (small counts exactly, else an lcm multiple)."""
    if n < 64:
        return n
    return min(255, max(192, 191 + round(n / lcm)))


def encode(trace: dict[str, Any]) -> bytes:
    geometry = trace["geometry"]
    groups = geometry["groups"][:3]
    # Shape byte: groups - 1 in bits 0-1, the host pool's size (0: none) in bits 2-6.
    host = min(31, geometry["host_blocks"]) if geometry.get("host_blocks") else 0
    shape = len(groups) - 1 | host << 2
    out = bytearray([(min(32, max(2, geometry["num_blocks"])) - 2) % 31, shape])
    sizes = []
    for g in groups:
        kind = KINDS[g["kind"]] + (1 if g.get("live_tail_alloc") else 0)
        index = page_size_index(g["block_size"])
        sizes.append(PAGE_SIZES[index])
        out += bytes([kind | index << 2, (g.get("sliding_window", 1) - 1) % 40])
    lcm = 1
    for b in sizes:
        lcm = lcm * b // gcd(lcm, b)

    def op(code: int, request: int, a: int = 0, b: int = 0) -> None:
        out.extend([code, request % 3, a, b])

    doc = [0, 0, 0]  # each request's document (host traces: set by its claim)
    offloads: list[bool] = []  # the trace's offload plans, True while pending
    for o in trace["ops"]:
        r, kind = o.get("request", 0), o["op"]
        if kind == "host_compute":  # acquire, name, reclaim: one engine step
            op(ACQUIRE, r, token_byte(o["tokens"], lcm))
            op(CACHE, r, 0, doc[r % 3])
            op(RECLAIM, r)
        elif kind == "host_offload":  # at the request's extent; stays pending
            op(OFFLOAD, r)
            offloads.append(True)
        elif kind in ("host_complete_offload", "host_abort_offload"):
            k = len(offloads) - 1 - o["plan"]
            complete = kind == "host_complete_offload"
            if k < 0:
                continue
            if offloads[k]:  # the target counts pending plans only, from the latest
                op(END_OFFLOAD, 0, sum(offloads[k + 1 :]), 0 if complete else 1)
                offloads[k] = False
            else:  # a plan that ended: must throw
                op(HOST_BAD, 0, 0 if complete else 1)
        elif kind == "host_claim":
            doc[r % 3] = o["doc"] % 3
            op(MATCH, r, 128 | (o["tokens"] // lcm) % 64, o["doc"] % 3)
        elif kind == "host_complete_load":
            op(COMPLETE_LOAD, r)
        elif kind == "host_evict":
            op(EVICT, 0, min(255, o["tokens"]))
        elif kind == "host_free":
            op(FREE, r)
        elif kind == "host_bad":
            op(HOST_BAD, r, HOST_BAD_CASES[o["call"]])
        elif kind == "admit":
            between = 0x80 if o.get("reclaim_between") else 0
            op(ADMIT, r, token_byte(o["chunk"], lcm), min(7, o["reserve"]) | between)
        elif kind in ("acquire", "decode"):
            op(ACQUIRE, r, token_byte(o.get("tokens", 1), lcm))
        elif kind == "reclaim":
            op(RECLAIM, r)
        elif kind == "free":
            op(FREE, r)
        elif kind.startswith("group_"):
            what = {"group_acquire": 0, "group_reclaim": 1, "group_free": 2}[kind]
            op(GROUP, r, o["group"] | what << 4, token_byte(o.get("tokens", 0), lcm))
        elif kind == "cache":
            op(CACHE, r, 0, o["doc"] % 3)
        elif kind == "claim":
            between = o.get("between_request")
            a = 128 | (o["tokens"] // lcm) % 64
            if between is None:
                op(MATCH, r, a, o["doc"] % 3)
            else:  # match (kept), the acquire that may evict, then the kept match's claim
                op(MATCH, between, a, 0x80 | o["doc"] % 3)
                op(ACQUIRE, between, token_byte(o["between_tokens"], lcm))
                op(CLAIM_SAVED, r)
        elif kind == "bad":
            op(BAD, r, sum(o["call"].encode()) % 14)
    return bytes(out)


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parents[2]
    traces = Path(argv[1]) if len(argv) > 1 else root / "tests" / "traces"
    out = Path(argv[2]) if len(argv) > 2 else root / "native" / "fuzz" / "seeds"
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(traces.rglob("*.json")):
        name = "-".join(path.relative_to(traces).with_suffix("").parts) + ".bin"
        (out / name).write_bytes(encode(json.loads(path.read_text())))
        print(f"{path} -> {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
