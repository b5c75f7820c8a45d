"""Host tier figures (semantics section 10): python benchmarks/bench_host.py [--impl native|spec]

A 32 Ki-token request on three groups (full B=16; sliding B=8 W=12 live tail; state B=16),
computed in 2048-token chunks as an engine does (acquire, name, reclaim). Prints the median
time of:

- plan_offload of the whole request (then aborted, so every run plans the same copies),
  next to cache_full_blocks over the same 32 Ki tokens on a fresh request (the device-only
  pass over the same slots);
- match_prefix + claim with every page served from the host (a LoadPlan; the request is
  freed after each run, which aborts the load), next to match_prefix + claim of the same
  prefix from device pages.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from collections.abc import Callable
from typing import Any

TOKENS = 32 * 1024
CHUNK = 2048
RUNS = 15


def setup(lt: Any) -> tuple[Any, Any, list[bytes]]:
    specs = [
        lt.GroupSpec("full", 16),
        lt.GroupSpec("sliding", 8, sliding_window=12, live_tail_alloc=True),
        lt.GroupSpec("state", 16),
    ]
    pool = lt.BlockPool(32768)
    c = lt.Coordinator(specs, pool, lt.HostPool(8192))
    return c, pool, lt.page_keys(list(range(TOKENS)), c.base_block_size)


def compute(c: Any, keys: list[bytes]) -> list[Any]:
    ts = c.new_tables()
    done = 0
    while done < TOKENS:
        assert c.acquire(ts, CHUNK)
        done += CHUNK
        c.cache_full_blocks(ts, keys, done)
        c.reclaim_expired(ts, done)
    return ts


def median_us(run: Callable[[], float]) -> float:
    run()  # warm-up
    return statistics.median(run() for _ in range(RUNS)) / 1000


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter_ns()
    fn()
    return float(time.perf_counter_ns() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--impl", choices=["native", "spec"], default="native")
    impl = ap.parse_args().impl
    lt = importlib.import_module("livetail" if impl == "native" else "livetail.spec")
    c, pool, keys = setup(lt)
    ts = compute(c, keys)

    def offload() -> float:
        holder: list[Any] = []
        t = timed(lambda: holder.append(c.plan_offload(ts, TOKENS)))
        plan = holder[0]
        c.abort_offload(plan)
        return t

    offload_us = median_us(offload)
    pages = c.plan_offload(ts, TOKENS)
    num_pages = pages.num_pages

    def naming() -> float:
        fresh = c.new_tables()
        assert c.acquire(fresh, TOKENS)
        t = timed(lambda: c.cache_full_blocks(fresh, keys, TOKENS))
        c.free(fresh)
        return t

    # Device-only match + claim: the request's names are on the device.
    def claim() -> float:
        d = c.new_tables()
        t = timed(lambda: c.claim(d, c.match_prefix(keys)))
        c.free(d)
        return t

    device_claim_us = median_us(claim)
    c.complete_offload(pages)
    c.free(ts)
    naming_us = median_us(naming)
    scratch = c.new_tables()  # evict every device name: the hit now comes from the host
    for n in (1024, 64, 1):
        while c.acquire(scratch, n):
            pass
    c.free(scratch)
    m = c.match_prefix(keys)
    loads = sum(int(x != 0) for hp in m.host_pages for x in hp)
    host_claim_us = median_us(claim)
    print(f"impl {impl}: 32 Ki tokens, three groups, {num_pages} reachable pages offloaded")
    print(f"plan_offload                           {offload_us:10.1f} us")
    print(f"cache_full_blocks (device-only pass)   {naming_us:10.1f} us")
    print(f"match_prefix + claim, {loads} host loads  {host_claim_us:10.1f} us")
    print(f"match_prefix + claim, device pages     {device_claim_us:10.1f} us")


if __name__ == "__main__":
    main()
