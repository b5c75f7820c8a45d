"""The C++ benchmark's operations, called from Python: python benchmarks/bench_python.py

Prints ns per operation, median of repeated runs, pool of 2**20 pages. A single call from
Python pays ~50-100 ns of binding overhead; the batched entry points (page_ids_batch,
Coordinator.decode_step) show the per-request cost when many requests share one call.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import livetail
from livetail import (
    BlockPool,
    BlockTable,
    Coordinator,
    FullAttentionManager,
    GroupSpec,
    SlidingWindowManager,
)

POOL = 2**20
RUNS = 21


def report(name: str, ns: float) -> None:
    print(f"{name:<70} {ns:12.1f} ns")


def median_ns(run: Callable[[], float], runs: int = RUNS) -> float:
    run()  # warm-up
    return statistics.median(run() for _ in range(runs))


def warm(pool: BlockPool) -> None:
    """Touch every page once, as a pool in service has (see native/bench/bench.cpp)."""
    m, t = FullAttentionManager(1), BlockTable()
    m.acquire(pool, t, pool.num_free)
    m.free(pool, t)


def needed_for(tokens: int) -> None:
    m, t = SlidingWindowManager(8, 12, 256), BlockTable()
    f = m.blocks_needed_for

    def run() -> float:
        n = 10000
        t0 = time.perf_counter_ns()
        for _ in range(n):
            f(t, tokens)
        return (time.perf_counter_ns() - t0) / n

    report(f"blocks_needed_for live B=8 W=12 A=256, {tokens} tokens", median_ns(run))


def acquire_and_free(acquire_name: str, free_name: str | None, m: object, tokens: int) -> None:
    pool = BlockPool(POOL)
    warm(pool)
    tables = [BlockTable() for _ in range(64)]
    acq, fre = [], []
    for r in range(RUNS + 1):
        t0 = time.perf_counter_ns()
        for t in tables:
            m.acquire(pool, t, tokens)  # type: ignore[attr-defined]
        t1 = time.perf_counter_ns()
        for t in tables:
            m.free(pool, t)  # type: ignore[attr-defined]
        t2 = time.perf_counter_ns()
        if r:
            acq.append((t1 - t0) / len(tables))
            fre.append((t2 - t1) / len(tables))
    report(acquire_name, statistics.median(acq))
    if free_name:
        report(free_name, statistics.median(fre))


def specs() -> list[GroupSpec]:
    return [
        GroupSpec("full", 256),
        GroupSpec("sliding", 128, sliding_window=511),
        GroupSpec("sliding", 8, sliding_window=12, live_tail_alloc=True),
    ]


def prefix_caching() -> None:
    """Page keys, naming, matching and claiming a 32 Ki-token prompt (three groups, base 8)."""
    import numpy as np

    tokens, chunk, prompts = 32768, 2048, 40
    rng = np.random.default_rng(7)
    arrays = [rng.integers(0, 50000, tokens, dtype=np.uint32) for _ in range(prompts)]
    lists = [a.tolist() for a in arrays[:RUNS]]
    t = []
    keys = []
    for a in arrays:
        t0 = time.perf_counter_ns()
        keys.append(livetail.page_keys(a, 8))
        t.append(time.perf_counter_ns() - t0)
    report("page_keys of 32 Ki tokens (uint32 array), base 8", statistics.median(t))
    t = []
    for lst in lists:
        t0 = time.perf_counter_ns()
        livetail.page_keys(lst, 8)
        t.append(time.perf_counter_ns() - t0)
    report("page_keys of 32 Ki tokens (list of int), base 8", statistics.median(t))

    pool = BlockPool(POOL)
    warm(pool)
    c = Coordinator(specs(), pool)
    ts, claimed = c.new_tables(), c.new_tables()
    chunked, whole, hit, miss, consumed, claim = [], [], [], [], [], []
    for r, ks in enumerate(keys):
        ns = 0
        for done in range(chunk, tokens + 1, chunk):
            c.acquire(ts, chunk)
            t0 = time.perf_counter_ns()
            c.cache_full_blocks(ts, ks, done)
            ns += time.perf_counter_ns() - t0
            c.reclaim_expired(ts, done)
        chunked.append(ns)
        t0 = time.perf_counter_ns()
        m = c.match_prefix(ks)
        hit.append(time.perf_counter_ns() - t0)
        assert m.num_tokens == tokens
        c.free(ts)
        t0 = time.perf_counter_ns()
        c.blocks_consumed_by_claim(m)
        consumed.append(time.perf_counter_ns() - t0)
        t0 = time.perf_counter_ns()
        c.claim(claimed, m)
        claim.append(time.perf_counter_ns() - t0)
        c.free(claimed)
        if r + 1 < len(keys):
            t0 = time.perf_counter_ns()
            c.match_prefix(keys[r + 1])
            miss.append(time.perf_counter_ns() - t0)
        other = [bytes([k[0] ^ 1]) + k[1:] for k in ks]  # another prompt: all names new
        c.acquire(ts, tokens)
        t0 = time.perf_counter_ns()
        c.cache_full_blocks(ts, other, tokens)
        whole.append(time.perf_counter_ns() - t0)
        c.free(ts)
    report(
        "cache_full_blocks, 32 Ki prompt in 16 chunks of 2048, all 16 calls",
        statistics.median(chunked),
    )
    report("cache_full_blocks, 32 Ki tokens acquired at once, one call", statistics.median(whole))
    report("match_prefix, 32 Ki prompt, hit of 32768 tokens (134 pages)", statistics.median(hit))
    report("match_prefix, 32 Ki prompt, miss", statistics.median(miss))
    report("blocks_consumed_by_claim of that match", statistics.median(consumed))
    report("claim of that match (134 free pages leave the queue)", statistics.median(claim))


def step_plan() -> None:
    """plan_step + apply_step for 256 decoding requests (three groups, 8192 tokens each)."""
    pool = BlockPool(POOL)
    warm(pool)
    c = Coordinator(specs(), pool)
    batch = [c.new_tables() for _ in range(256)]
    requests = [(ts, 1) for ts in batch]
    plans: list[float] = []

    def run() -> float:
        for ts in batch:
            c.free(ts)
            c.acquire(ts, 8192)
        steps, total, planning = 20, 0, 0
        for _ in range(steps):
            t0 = time.perf_counter_ns()
            plan = c.plan_step(requests)
            t1 = time.perf_counter_ns()
            c.apply_step(plan)
            total += time.perf_counter_ns() - t0
            planning += t1 - t0
        plans.append(planning / steps)
        return total / steps

    report("three-group plan_step + apply_step, 256 decoding requests, per step", median_ns(run))
    report("  of which plan_step", statistics.median(plans))


def main() -> None:
    print(
        f"livetail {livetail.__version__} from Python, pool of 2**20 pages, median of {RUNS} runs"
    )
    for tokens in (8192, 131072, 1 << 20):
        needed_for(tokens)

    acquire_and_free(
        "acquire 8192 live-tail B=8 W=12 A=256 (64 real pages)",
        "free of that live-tail table",
        SlidingWindowManager(8, 12, 256),
        8192,
    )
    acquire_and_free(
        "acquire 8192 plain sliding B=8 W=12 (1024 real pages)",
        None,
        SlidingWindowManager(8, 12),
        8192,
    )
    acquire_and_free("acquire 8192 full B=256 (32 pages)", None, FullAttentionManager(256), 8192)

    pool = BlockPool(POOL)
    warm(pool)
    m, t = SlidingWindowManager(8, 12, 256), BlockTable()

    def decode() -> float:
        m.free(pool, t)
        m.acquire(pool, t, 8192)
        acquire, reclaim = m.acquire, m.reclaim_expired
        n = 2000
        t0 = time.perf_counter_ns()
        for f in range(8192, 8192 + n):
            acquire(pool, t, 1)
            reclaim(pool, t, f)
        return (time.perf_counter_ns() - t0) / n

    report("decode step live-tail (acquire 1 + reclaim), two calls", median_ns(decode))

    c = Coordinator(specs(), pool)
    requests = [c.new_tables() for _ in range(64)]
    acq, fre = [], []
    for r in range(RUNS + 1):
        t0 = time.perf_counter_ns()
        for ts in requests:
            c.acquire(ts, 8192)
        t1 = time.perf_counter_ns()
        for ts in requests:
            c.free(ts)
        t2 = time.perf_counter_ns()
        if r:
            acq.append((t1 - t0) / len(requests))
            fre.append((t2 - t1) / len(requests))
    report(
        "three-group coordinator acquire 8192 {full 256; sliding 128; live 8}",
        statistics.median(acq),
    )
    report("three-group coordinator free of that request", statistics.median(fre))

    ts = c.new_tables()

    def decode3() -> float:
        c.free(ts)
        c.acquire(ts, 8192)
        acquire, reclaim = c.acquire, c.reclaim_expired
        n = 2000
        t0 = time.perf_counter_ns()
        for f in range(8192, 8192 + n):
            acquire(ts, 1)
            reclaim(ts, f)
        return (time.perf_counter_ns() - t0) / n

    report("three-group decode step (acquire 1 + reclaim), two calls", median_ns(decode3))

    batch = [c.new_tables() for _ in range(256)]

    def decode_batch() -> float:
        for r in batch:
            c.free(r)
            c.acquire(r, 8192)
        steps = 20
        total = 0
        for i in range(steps):
            fronts = [8192 + i] * len(batch)
            t0 = time.perf_counter_ns()
            c.decode_step(batch, fronts)
            total += time.perf_counter_ns() - t0
        return total / (steps * len(batch))

    report("three-group decode_step, batch of 256 requests, per request", median_ns(decode_batch))

    def decode_singles() -> float:
        for r in batch:
            c.free(r)
            c.acquire(r, 8192)
        acquire, reclaim = c.acquire, c.reclaim_expired
        steps = 20
        t0 = time.perf_counter_ns()
        for i in range(steps):
            f = 8192 + i
            for r in batch:
                acquire(r, 1)
                reclaim(r, f)
        return (time.perf_counter_ns() - t0) / (steps * len(batch))

    report(
        "three-group decode, 256 requests by single calls, per request", median_ns(decode_singles)
    )

    sw = SlidingWindowManager(8, 12)
    big = BlockTable()
    sw.acquire(pool, big, 8192)

    def export() -> float:
        n = 10000
        page_ids = big.page_ids
        t0 = time.perf_counter_ns()
        for _ in range(n):
            page_ids()
        return (time.perf_counter_ns() - t0) / n

    report("copy 1024 page ids out (BlockTable.page_ids)", median_ns(export))

    rows = [BlockTable() for _ in range(256)]
    for row in rows:
        sw.acquire(pool, row, 8192)

    def export_batch() -> float:
        n = 50
        t0 = time.perf_counter_ns()
        for _ in range(n):
            livetail.page_ids_batch(rows)
        return (time.perf_counter_ns() - t0) / (n * len(rows))

    report("page_ids_batch of 256 tables x 1024 ids, per table", median_ns(export_batch))

    loop = []
    for _ in range(5):
        m.free(pool, t)
        m.acquire(pool, t, 8192)
        acquire, reclaim = m.acquire, m.reclaim_expired
        t0 = time.perf_counter_ns()
        for f in range(8192, 8192 + 100000):
            acquire(pool, t, 1)
            reclaim(pool, t, f)
        loop.append(time.perf_counter_ns() - t0)
    total = statistics.median(loop)
    report("100000-step decode loop live-tail, total", total)
    report("100000-step decode loop live-tail, per step", total / 100000)

    step_plan()
    prefix_caching()


if __name__ == "__main__":
    main()
