"""Replay cost against pool size: python benchmarks/bench_replay.py [--sizes 16 20 22]

Writes the same honest 6-step trace (admit, decode, acquire, reclaim, two frees on a full
B=256 group and a live-tail sliding B=8 W=12 group) with pools of 2**k pages, replays each
with `livetail replay --quiet` in a fresh process, and prints the wall time and the peak
resident memory of each run.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OPS = [
    {"op": "admit", "request": 0, "chunk": 17, "reserve": 2},
    {"op": "decode", "request": 0},
    {"op": "acquire", "request": 1, "tokens": 300},
    {"op": "reclaim", "request": 0, "frontier": 20},
    {"op": "free", "request": 0},
    {"op": "free", "request": 1},
]
GROUPS = [
    {"kind": "full", "block_size": 256},
    {"kind": "sliding", "block_size": 8, "sliding_window": 12, "live_tail_alloc": True},
]


def trace(num_blocks: int) -> dict[str, object]:
    return {
        "format": "livetail-trace",
        "version": 1,
        "title": f"honest 6 steps, pool of {num_blocks} pages",
        "origin": "manual",
        "variant": None,
        "geometry": {"groups": GROUPS, "num_blocks": num_blocks, "num_requests": 2},
        "observed": None,
        "ops": OPS,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[16, 20, 22], help="log2 pool sizes")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for k in args.sizes:
            path = Path(d) / f"pool-{k}.json"
            path.write_text(json.dumps(trace(2**k)))
            t0 = time.perf_counter()
            run = subprocess.run(
                [sys.executable, "-m", "livetail.verify", "replay", str(path), "--quiet"],
                capture_output=True,
                text=True,
            )
            seconds = time.perf_counter() - t0
            rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            print(
                f"pool 2**{k:<2} pages  {seconds:6.2f} s  exit {run.returncode}  "
                f"peak RSS so far {rss:6.0f} MB"
            )


if __name__ == "__main__":
    main()
