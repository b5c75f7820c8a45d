"""Write the fuzz target's seed corpus: one input per trace in tests/traces, in the byte
encoding of native/fuzz/README.md (geometry mapped to the target's small set of page sizes
and windows, ops to the nearest call sequence the target decodes), plus one seed per usage
error the target checks and one of the full 256 calls (``extra_seeds``).

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


# A geometry for the seeds below: 20 usable pages, a host pool of 8, full B=4 and sliding
# B=2 W=5 with live tail (the header bytes of native/fuzz/README.md).
SEED_HEADER = bytes([19, 1 | 8 << 2, 0 | 3 << 2, 0, 2 | 1 << 2, 4])
BAD_CASES = 14  # op BAD: World::bad_call(a % 14), every usage error of the core
HOST_BAD_CASE_COUNT = 7  # op HOST_BAD: World::host_misuse(a % 7)
MAX_CALLS = 256  # the target reads at most this many calls


def _calls(*calls: tuple[int, int, int, int]) -> bytes:
    return b"".join(bytes(c) for c in calls)


# A request with named, offloaded and evicted pages, a load pending and one ended: every
# usage error below then has a state that reaches its check.
_HISTORY = _calls(
    (ACQUIRE, 0, 20, 0),
    (CACHE, 0, 0, 0),
    (OFFLOAD, 0, 0, 1),  # completed at once
    (OFFLOAD, 0, 0, 0),  # stays pending
    (END_OFFLOAD, 0, 0, 1),  # aborted: an ended plan
    (FREE, 0, 0, 0),
    (EVICT, 0, 20, 0),
    (MATCH, 1, 0, 0x40),  # a claim with loads, completed at once
    (ACQUIRE, 2, 6, 0),
)


def extra_seeds() -> dict[str, bytes]:
    """Seeds no trace gives: one per usage error the core checks, and the longest input.

    Live fuzzing reaches the usage errors only by chance; a kept seed makes every run (and
    ctest's replay) start from each. The long seed holds the full 256 calls: many
    evictions and offload/load cycles, a history the length control would not grow to.
    """
    out = {}
    for k in range(BAD_CASES):
        out[f"usage-error-{k:02d}.bin"] = SEED_HEADER + _HISTORY + _calls((BAD, 2, k, 0))
    for k in range(HOST_BAD_CASE_COUNT):
        out[f"host-usage-error-{k}.bin"] = SEED_HEADER + _HISTORY + _calls((HOST_BAD, 2, k, 0))
    cycle = [
        (ACQUIRE, 0, 9, 0),
        (CACHE, 0, 0, 0),
        (OFFLOAD, 0, 0, 1),
        (ADMIT, 1, 5, 3),
        (8, 0, 0, 0),  # decode_step over the three requests
        (RECLAIM, 1, 0, 0),
        (EVICT, 0, 12, 0),
        (MATCH, 2, 0, 0x41),
        (COMPLETE_LOAD, 2, 0, 0),
        (12, 0, 1, 3),  # plan_step and apply_step
        (FREE, 0, 0, 0),
        (FREE, 2, 0, 0),
        (BAD, 1, 0, 0),
        (ACQUIRE, 1, 200, 0),
        (FREE, 1, 0, 0),
        (HOST_BAD, 0, 6, 0),
    ]
    calls = [cycle[i % len(cycle)] for i in range(MAX_CALLS)]
    out["long-history-256-calls.bin"] = SEED_HEADER + _calls(*calls)
    return out


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parents[2]
    traces = Path(argv[1]) if len(argv) > 1 else root / "tests" / "traces"
    out = Path(argv[2]) if len(argv) > 2 else root / "native" / "fuzz" / "seeds"
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(traces.rglob("*.json")):
        name = "-".join(path.relative_to(traces).with_suffix("").parts) + ".bin"
        (out / name).write_bytes(encode(json.loads(path.read_text())))
        print(f"{path} -> {out / name}")
    for name, data in extra_seeds().items():
        (out / name).write_bytes(data)
        print(f"(usage errors, long history) -> {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
