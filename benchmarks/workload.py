"""A serving workload with a shared system prompt, run with live tail on and off.

An engine-shaped scheduler over a fixed pool: requests arrive together, share a long
system prompt and differ in a suffix; each step admits waiting requests (prefix match,
then the exact charge: pages consumed by the claim plus the sequential charge of the
rest of the next chunk and the decode reserve), runs one prefill chunk or one decode
token per running request, names full pages after each chunk, reclaims, and frees
finished requests. The hybrid model has a full-attention group, a sliding-window
attention group and a short conv group (window 4); live tail is switched on and off for
the conv group only (attention groups always allocate fully).

    python benchmarks/workload.py            # native module
    python benchmarks/workload.py --impl spec

Prints, for each setting: peak pinned pages, the most requests running at once, the
prefix hit rate (prompt tokens served from the cache), the steps to drain the queue and
the conv group's peak pages.
"""

from __future__ import annotations

import argparse
import importlib
import random
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Workload:
    num_blocks: int = 1800
    requests: int = 64
    system_prompt: int = 4096
    suffix_min: int = 256
    suffix_max: int = 2048
    chunk: int = 2048
    decode: int = 128
    arrival_gap: int = 2  # steps between arrivals
    seed: int = 7


@dataclass
class Request:
    rid: int
    prompt: list[int]
    keys: list[bytes]
    decode_left: int
    tables: Any = None
    done: int = 0  # tokens computed
    hit: int = 0
    ends: list[int] = field(default_factory=list)


def groups(lt: Any, live: bool) -> list[Any]:
    return [
        lt.GroupSpec("full", 64),
        lt.GroupSpec("sliding", 64, sliding_window=1024),
        lt.GroupSpec("sliding", 8, sliding_window=4, live_tail_alloc=live),
    ]


def run(lt: Any, w: Workload, live: bool) -> dict[str, float]:
    rng = random.Random(w.seed)
    pool = lt.BlockPool(w.num_blocks)
    c = lt.Coordinator(groups(lt, live), pool)
    system = [rng.randrange(50_000) for _ in range(w.system_prompt)]
    waiting = []
    for i in range(w.requests):
        prompt = system + [
            rng.randrange(50_000) for _ in range(rng.randint(w.suffix_min, w.suffix_max))
        ]
        waiting.append(Request(i, prompt, lt.page_keys(prompt, c.base_block_size), w.decode))
    running: list[Request] = []
    peak = peak_conv = most_running = steps = 0
    hit_tokens = prompt_tokens = 0
    t0 = time.perf_counter()
    while waiting or running:
        steps += 1
        # Admission, first come first served: stop at the first request that does not fit.
        while waiting and waiting[0].rid * w.arrival_gap < steps:
            r = waiting[0]
            m = c.match_prefix(r.keys)
            # Never claim the whole prompt: the last token must be computed to sample.
            hit = min(m.num_tokens, (len(r.prompt) - 1) // c.lcm_block_size * c.lcm_block_size)
            if hit != m.num_tokens:
                m = c.match_prefix(r.keys[: hit // c.base_block_size])
            fresh = c.new_tables()
            rest = len(r.prompt) - m.num_tokens
            first = min(w.chunk, rest)
            reserve = 1 if first == rest else 0
            charge = c.blocks_consumed_by_claim(m) + c.blocks_needed_for_sequential(
                fresh, first, reserve
            )
            if charge > pool.num_free:
                break
            c.claim(fresh, m)
            r.tables, r.done, r.hit = fresh, m.num_tokens, m.num_tokens
            hit_tokens += m.num_tokens
            prompt_tokens += len(r.prompt)
            running.append(waiting.pop(0))
        most_running = max(most_running, len(running))
        finished = []
        for r in running:
            n = min(w.chunk, len(r.prompt) - r.done) if r.done < len(r.prompt) else 1
            if not c.acquire(r.tables, n):
                continue  # preempted for this step: no page for it now
            # The transient: pages pinned while the chunk is computed, before reclaim.
            peak = max(peak, pool.num_pinned)
            peak_conv = max(peak_conv, sum(q.tables[2].num_real_pages for q in running))
            r.done += n
            if r.done <= len(r.prompt):
                c.cache_full_blocks(r.tables, r.keys, r.done)
            c.reclaim_expired(r.tables, r.done)
            if r.done > len(r.prompt):
                r.decode_left -= 1
                if r.decode_left == 0:
                    finished.append(r)
        for r in finished:
            c.free(r.tables)
            running.remove(r)
    return {
        "peak_pages": peak,
        "peak_conv_pages": peak_conv,
        "most_running": most_running,
        "hit_rate": hit_tokens / prompt_tokens,
        "steps": steps,
        "seconds": time.perf_counter() - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--impl", choices=["native", "spec"], default="native")
    ap.add_argument("--requests", type=int, default=Workload.requests)
    ap.add_argument(
        "--num-blocks", type=int, nargs="+", default=[1200, 1800, 3000], help="pool sizes to run"
    )
    args = ap.parse_args()
    lt = importlib.import_module("livetail" if args.impl == "native" else "livetail.spec")
    w = Workload(requests=args.requests)
    print(
        f"workload: {w.requests} requests, system prompt {w.system_prompt} tokens + suffix "
        f"{w.suffix_min}-{w.suffix_max}, one arrival every {w.arrival_gap} steps, chunk {w.chunk}, "
        f"decode {w.decode}; groups full B=64, sliding B=64 W=1024, conv B=8 W=4 ({args.impl})"
    )
    print(
        f"{'pool':>6} {'conv live tail':<15}{'peak pages':>11}{'conv peak':>10}{'max running':>12}"
        f"{'hit rate':>9}{'steps':>7}{'seconds':>9}"
    )
    for nb in args.num_blocks:
        w.num_blocks = nb
        for live in (False, True):
            r = run(lt, w, live)
            print(
                f"{nb:>6} {'on' if live else 'off':<15}"
                f"{r['peak_pages']:>11}{r['peak_conv_pages']:>10}"
                f"{r['most_running']:>12}{r['hit_rate']:>9.1%}{r['steps']:>7}{r['seconds']:>9.2f}"
            )


if __name__ == "__main__":
    main()
