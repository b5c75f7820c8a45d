"""A serving workload on one pool, driven step by step with Coordinator.plan_step.

An engine-shaped loop over a fixed pool: requests share a long system prompt and differ in
a suffix, one arriving every few steps. Each step:

1. plan: `plan_step` over the running requests in priority order (oldest admission first),
   each asking for its next prefill chunk or one decode token. A top request that does not
   fit even with every other request preempted (`top_fits` False) is rejected.
2. apply: `apply_step` frees the preempted requests (they go back to the front of the
   waiting queue and come back later through their prefix hit) and acquires for the rest.
3. admit: waiting requests, in order, while the exact charge (`blocks_consumed_by_claim`
   plus the sequential charge of the first chunk and the decode reserve) fits what is left
   of `free_after`; every hit is claimed before any admitted request acquires its chunk.
   A request whose charge exceeds the whole (empty) pool is rejected.
4. forward, name full prompt pages (`cache_full_blocks`), reclaim, free finished requests.

The model is hybrid: a full-attention group, a sliding-window attention group and a short
conv group (window 4) whose live tail is switched off and on; the retention rule of the
pool (`BlockPool(retention=...)`) is switched off (every freed page appended, the earlier
order) and on.

    python benchmarks/workload.py                       # native module, default pools
    python benchmarks/workload.py --impl spec --requests 6 --num-blocks 900
    python benchmarks/workload.py --plot docs/workload_pinned.png --plot-pool 1800
    python benchmarks/workload.py --host 0 2 8          # host tier mode, pools 400 and 1200

Prints per pool and setting: steps to drain, preemptions, recomputed tokens (tokens
computed before a preemption that the re-admission's hit did not bring back), prefix hit
rate over first admissions, peak pinned pages, rejected requests; then, from the pool's
counters (`coordinator.stats()`): the hit rate over every `match_prefix` call (matched /
queried tokens), the named pages evicted, and each group's peak pinned pages.

Host tier mode (`--host FACTOR ...`, retention on): the coordinator also gets a host pool of
FACTOR times the device pool's pages (`HostPool(FACTOR * pool)`; 0 means `HostPool(1)`,
which has no usable page). After a prefill chunk is named, and before its reclaim, the
engine offloads the request's reachable pages (`plan_offload`, copy, `complete_offload`; a
`None` plan, the host pool short, skips that copy). A match may then be served partly from
the host: the claim returns a `LoadPlan`, whose copy completes (`complete_load`) after the
step's acquires, before the forward. The admission charge is unchanged:
`blocks_consumed_by_claim` (which counts a fresh device page per loaded slot) plus the
sequential charge. Prints steps, preemptions, recomputed tokens, hit rate, *host hit*
tokens (the tokens of every hit whose claim loaded pages from the host), the pages
*loaded* and the *short* offloads (`None` plans); then the peak of named host pages and,
per group, the pages named on the device, the pages offloaded and the peak of named host
pages. Every run checks that each plan completed, that loads landed in real slots, that
every claim took exactly its charge, and that both pools end with no pinned page.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
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
    tokens: list[int]  # the prompt, then (after a preemption) the tokens generated so far
    keys: list[bytes]
    decode_left: int
    prompt_len: int  # tokens to compute before decoding resumes
    tables: Any = None
    done: int = 0  # tokens computed
    lost: int = 0  # tokens computed before the last preemption
    admitted: bool = False  # admitted at least once


@dataclass
class HostResult:
    host_hit_tokens: int = 0  # tokens of the hits whose claim loaded pages from the host
    short: int = 0  # plan_offload calls that found the host pool short (None)
    offloads: int = 0  # offload plans completed
    loads: int = 0  # load plans completed
    peak_pages: int = 0  # named host pages, at their peak
    peak_by_group: list[int] = field(default_factory=list)  # named host pages per group
    named_by_group: list[int] = field(default_factory=list)  # device pages named, per group
    offloaded_by_group: list[int] = field(default_factory=list)  # pages offloaded, per group
    stats: dict[str, int] = field(default_factory=dict)  # host.stats() at the end


@dataclass
class Result:
    steps: int = 0
    preemptions: int = 0
    recomputed: int = 0
    hit_tokens: int = 0
    prompt_tokens: int = 0
    peak_pages: int = 0
    rejected: int = 0
    pinned: list[int] = field(default_factory=list)  # per step, after the step's acquires
    seconds: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)  # coordinator.stats() at the end
    peak_by_group: list[int] = field(default_factory=list)  # from stats()["pinned_pages"]
    host: HostResult | None = None  # with a host pool only

    @property
    def match_hit_rate(self) -> float:
        queried = self.stats.get("match_tokens_queried", 0)
        return self.stats.get("match_tokens_matched", 0) / queried if queried else 0.0

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def groups(lt: Any, live: bool) -> list[Any]:
    return [
        lt.GroupSpec("full", 64),
        lt.GroupSpec("sliding", 64, sliding_window=1024),
        lt.GroupSpec("sliding", 8, sliding_window=4, live_tail_alloc=live),
    ]


def run(
    lt: Any, w: Workload, live: bool, retention: bool, host_blocks: int | None = None
) -> Result:
    """One drain of the workload; with host_blocks, a host pool of that many pages too."""
    rng = random.Random(w.seed)
    pool = lt.BlockPool(w.num_blocks, retention=retention)
    host = None if host_blocks is None else lt.HostPool(host_blocks)
    specs = groups(lt, live)
    c = lt.Coordinator(specs, pool, host=host)
    lcm, base = c.lcm_block_size, c.base_block_size
    tier = HostTier(c, [s.block_size for s in specs]) if host is not None else None
    system = [rng.randrange(50_000) for _ in range(w.system_prompt)]
    arrivals: list[Request] = []
    for i in range(w.requests):
        prompt = system + [
            rng.randrange(50_000) for _ in range(rng.randint(w.suffix_min, w.suffix_max))
        ]
        arrivals.append(Request(i, prompt, lt.page_keys(prompt, base), w.decode, len(prompt)))
    waiting: list[Request] = []  # priority order: preempted requests first, by arrival
    running: list[Request] = []  # priority order: oldest admission first
    res = Result()
    t0 = time.perf_counter()

    def ask(r: Request) -> int:
        return min(w.chunk, r.prompt_len - r.done) if r.done < r.prompt_len else 1

    while arrivals or waiting or running:
        res.steps += 1
        while arrivals and arrivals[0].rid * w.arrival_gap < res.steps:
            waiting.append(arrivals.pop(0))
        # 1. plan, rejecting a top request that cannot fit even alone.
        while True:
            plan = c.plan_step([(r.tables, ask(r)) for r in running])
            if plan.top_fits:
                break
            c.free(running.pop(0).tables)
            res.rejected += 1
        # 2. apply: the preempted go back to the front of the waiting queue.
        c.apply_step(plan)
        preempted = running[plan.stepped :]
        running = running[: plan.stepped]
        for r in preempted:
            res.preemptions += 1
            r.lost = r.done
            # Recompute what it had: prompt plus generated tokens (named prompt pages may hit).
            r.tokens = r.tokens[: r.done]
            r.keys = lt.page_keys(r.tokens, base)
            r.prompt_len = len(r.tokens)
            r.tables, r.done = None, 0
        waiting = sorted(preempted + waiting, key=lambda q: q.rid)
        stepped = list(running)
        # 3. admit against free_after: claim every hit first, then acquire first chunks.
        budget = plan.free_after
        admitted: list[Request] = []
        while waiting:
            r = waiting[0]
            # Never claim the whole prompt: the last token must be computed to sample.
            usable = (r.prompt_len - 1) // lcm * lcm
            m = c.match_prefix(r.keys[: usable // base])
            fresh = c.new_tables()
            first = min(w.chunk, r.prompt_len - m.num_tokens)
            reserve = 1 if first == r.prompt_len - m.num_tokens else 0
            seq = c.blocks_needed_for_sequential(fresh, first, reserve)
            if seq > pool.num_blocks - 1:  # cannot fit even in an empty pool
                waiting.pop(0)
                res.rejected += 1
                continue
            charge = c.blocks_consumed_by_claim(m) + seq
            if charge > budget:
                break
            budget -= charge
            free_before = pool.num_free
            load = c.claim(fresh, m)
            assert free_before - pool.num_free == charge - seq, "a claim took other than its charge"
            if load is not None:
                assert tier is not None
                tier.claimed(fresh, load, m.num_tokens)
            r.tables, r.done = fresh, m.num_tokens
            if r.admitted:
                res.recomputed += max(0, r.lost - m.num_tokens)
            else:
                r.admitted = True
                res.hit_tokens += m.num_tokens
                res.prompt_tokens += r.prompt_len
            admitted.append(waiting.pop(0))
        for r in admitted:
            ok = c.acquire(r.tables, ask(r))
            assert ok, "an admission within its exact charge failed"
        if tier is not None:
            tier.complete_loads()  # every load lands before the forward that reads it
        running += admitted
        res.pinned.append(pool.num_pinned)
        res.peak_pages = max(res.peak_pages, pool.num_pinned)
        by_group = c.stats()["pinned_pages"]
        res.peak_by_group = [max(a, b) for a, b in zip(res.peak_by_group, by_group)] or by_group
        # 4. forward (stepped requests and the admitted ones' first chunks), name, reclaim.
        finished = []
        for r in stepped + admitted:
            n = ask(r) if r in stepped else min(w.chunk, r.prompt_len - r.done)
            r.done += n
            if r.done <= r.prompt_len:
                named = c.cache_full_blocks(r.tables, r.keys, r.done)
                if tier is not None:
                    tier.named(r.tables, r.done - n, r.done, named)
                    tier.offload(r.tables, r.done)  # copy the reachable pages before reclaim
            c.reclaim_expired(r.tables, r.done)
            if r.done > r.prompt_len:
                r.decode_left -= 1
                if r.decode_left == 0:
                    finished.append(r)
        for r in finished:
            c.free(r.tables)
            running.remove(r)
        if res.steps > 100_000:
            raise RuntimeError("the workload did not drain")
    res.seconds = time.perf_counter() - t0
    res.stats = c.stats()
    if tier is not None:
        res.host = tier.finish()
    return res


def ints(a: Any) -> list[int]:
    """A plan's int32 array (native) or list (spec) as Python ints."""
    return [int(x) for x in a]


class HostTier:
    """The engine's side of the host tier: copies, completions, and the checks on them.

    Offload: after a prefill chunk is named, plan_offload over the request's tables, copy,
    complete_offload; None (the host pool is short even after evicting its oldest names)
    skips the chunk's copy. Load: a claim's LoadPlan is copied and completed after the
    step's acquires, before the forward. A copy here cannot fail, so no plan is aborted;
    every plan must end completed, and the host pool must end with no pinned page.
    """

    def __init__(self, c: Any, block_sizes: list[int]) -> None:
        self.c = c
        self.host = c.host
        self.block_sizes = block_sizes
        g = len(block_sizes)
        self.res = HostResult(
            peak_by_group=[0] * g, named_by_group=[0] * g, offloaded_by_group=[0] * g
        )
        self.pending: list[Any] = []  # load plans claimed this step
        self.plans: list[Any] = []  # every plan, to check that each one ended
        self.owner: dict[int, int] = {}  # named host page -> its group
        self.host_named = [0] * len(block_sizes)  # named host pages per group
        self.copied = [0, 0]  # pages offloaded, pages loaded, by the plans

    def named(self, tables: Any, start: int, end: int, named: int) -> None:
        """Count, per group, the pages a chunk from start to end tokens named on the device.

        start is a multiple of every page size (a claimed boundary plus whole chunks), so
        the chunk named exactly the pages of the slots it filled that carry a name now
        (cache_full_blocks' count; sliding and state groups name only the slots a match can
        use, semantics 13.4).
        """
        total = 0
        pool = self.c.pool
        for g, (t, B) in enumerate(zip(tables, self.block_sizes)):
            ids = t.page_ids()
            k = sum(1 for p in ids[start // B : end // B] if p and pool.name(int(p)) is not None)
            self.res.named_by_group[g] += k
            total += k
        assert total == named, "the chunk named other pages than its real slots"

    def offload(self, tables: Any, num_tokens: int) -> None:
        plan = self.c.plan_offload(tables, num_tokens)
        if plan is None:
            self.res.short += 1
            return
        self.plans.append(plan)
        for hp in ints(plan.host_pages):  # the allocation evicted these pages' names
            g = self.owner.pop(hp, None)
            if g is not None:
                self.host_named[g] -= 1
        # (The engine copies plan.device_pages -> plan.host_pages here.)
        self.c.complete_offload(plan)
        self.res.offloads += 1
        self.copied[0] += plan.num_pages
        for g, hp in zip(ints(plan.groups), ints(plan.host_pages)):
            self.owner[hp] = g
            self.host_named[g] += 1
            self.res.offloaded_by_group[g] += 1
        assert len(self.owner) == self.host.num_cached, "host names and completed copies differ"
        self.res.peak_pages = max(self.res.peak_pages, self.host.num_cached)
        self.res.peak_by_group = [
            max(a, b) for a, b in zip(self.res.peak_by_group, self.host_named)
        ]

    def claimed(self, tables: Any, load: Any, hit: int) -> None:
        assert load.state == "pending"
        for g, j, dp in zip(ints(load.groups), ints(load.slots), ints(load.device_pages)):
            assert int(tables[g].page_ids()[j]) == dp != 0, "a load outside its real slot"
        self.pending.append(load)
        self.plans.append(load)
        self.res.host_hit_tokens += hit

    def complete_loads(self) -> None:
        for load in self.pending:
            # (The engine copies load.host_pages -> load.device_pages here.)
            cached = self.c.pool.num_cached
            self.c.complete_load(load)
            assert self.c.pool.num_cached - cached == load.num_pages, "a loaded page went unnamed"
            self.res.loads += 1
            self.copied[1] += load.num_pages
        self.pending.clear()
        assert self.host.num_pinned == 0, "a host page stayed pinned after its copy"

    def finish(self) -> HostResult:
        assert not self.pending and all(p.state == "completed" for p in self.plans)
        self.res.stats = self.host.stats()
        assert [self.res.stats["pages_offloaded"], self.res.stats["pages_loaded"]] == self.copied
        assert self.host.num_pinned == 0 and self.c.pool.num_pinned == 0
        return self.res


def plot(path: str, runs: dict[tuple[bool, bool], Result], num_blocks: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=100)
    for (live, retention), r in runs.items():
        label = f"live tail {'on' if live else 'off'}, retention {'on' if retention else 'off'}"
        ax.plot(range(1, len(r.pinned) + 1), r.pinned, label=label, linewidth=1)
    ax.set_xlabel("step")
    ax.set_ylabel("pinned pages")
    ax.set_title(f"benchmarks/workload.py, pool of {num_blocks} pages")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def host_table(lt: Any, w: Workload, pools: list[int], factors: list[int]) -> None:
    """Retention on, live tail off and on, a host pool of each factor times the device pool."""
    print("host tier: after every named prefill chunk its reachable pages are offloaded; hits")
    print("may come from the host (loaded before the forward); host = host pool pages")
    print(
        f"{'pool':>6} {'host':>6} {'live tail':<10}{'steps':>7}{'preempted':>10}"
        f"{'recomputed':>11}{'hit rate':>9}{'host hit':>9}{'loaded':>7}{'short':>6}{'seconds':>8}"
    )
    runs: list[tuple[int, int, bool, Result]] = []
    for nb in pools:
        w.num_blocks = nb
        for factor in factors:
            for live in (False, True):
                r = run(lt, w, live, True, factor * nb if factor else 1)
                h = r.host
                assert h is not None
                runs.append((nb, factor * nb, live, r))
                print(
                    f"{nb:>6} {factor * nb:>6} {'on' if live else 'off':<10}{r.steps:>7}"
                    f"{r.preemptions:>10}{r.recomputed:>11}{r.hit_rate:>9.1%}"
                    f"{h.host_hit_tokens:>9}{h.stats['pages_loaded']:>7}{h.short:>6}"
                    f"{r.seconds:>8.2f}"
                )
    print()
    print("host pages: named host pages at their peak; per group (full, sliding, conv): pages")
    print("named on the device, pages offloaded (reachable ones only), named host pages at peak")
    print(
        f"{'pool':>6} {'host':>6} {'live tail':<10}{'host peak':>10}  {'named on device':<20}"
        f"{'offloaded':<20}host peak"
    )
    for nb, hb, live, r in runs:
        h = r.host
        assert h is not None
        print(
            f"{nb:>6} {hb:>6} {'on' if live else 'off':<10}{h.peak_pages:>10}  "
            f"{' / '.join(map(str, h.named_by_group)):<20}"
            f"{' / '.join(map(str, h.offloaded_by_group)):<20}"
            f"{' / '.join(map(str, h.peak_by_group))}"
        )


DEFAULT_POOLS = [200, 300, 400, 1200, 1800, 3000]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--impl", choices=["native", "spec"], default="native")
    ap.add_argument("--requests", type=int, default=Workload.requests)
    ap.add_argument(
        "--num-blocks",
        type=int,
        nargs="+",
        help="pool sizes to run (default 200 300 400 1200 1800 3000; with --host 400 1200)",
    )
    ap.add_argument(
        "--host",
        type=int,
        nargs="+",
        metavar="FACTOR",
        help="host tier mode: a host pool of FACTOR times the device pool's pages (0: none)",
    )
    ap.add_argument("--plot", help="write a PNG of pinned pages over steps to this path")
    ap.add_argument("--plot-pool", type=int, default=1800, help="pool size of the plot")
    args = ap.parse_args()
    if args.plot:  # checked before the run, not after it
        if args.host:
            ap.error("--plot draws the device-only table; it does not combine with --host")
        if args.plot_pool not in (args.num_blocks or DEFAULT_POOLS):
            ap.error(f"--plot-pool {args.plot_pool} is not one of the pool sizes run")
        if importlib.util.find_spec("matplotlib") is None:
            ap.error("--plot needs matplotlib: pip install 'livetail[plot]'")
    lt = importlib.import_module("livetail" if args.impl == "native" else "livetail.spec")
    w = Workload(requests=args.requests)
    print(
        f"workload: {w.requests} requests, system prompt {w.system_prompt} tokens + suffix "
        f"{w.suffix_min}-{w.suffix_max}, one arrival every {w.arrival_gap} steps, chunk {w.chunk}, "
        f"decode {w.decode}; groups full B=64, sliding B=64 W=1024, conv B=8 W=4 ({args.impl})"
    )
    if args.host:
        host_table(lt, w, args.num_blocks or [400, 1200], args.host)
        return
    args.num_blocks = args.num_blocks or DEFAULT_POOLS
    print(
        f"{'pool':>6} {'live tail':<10}{'retention':<10}{'steps':>7}{'preempted':>10}"
        f"{'recomputed':>11}{'hit rate':>9}{'peak pages':>11}{'rejected':>9}{'seconds':>8}"
    )
    plotted: dict[tuple[bool, bool], Result] = {}
    counters: list[tuple[int, bool, bool, Result]] = []
    for nb in args.num_blocks:
        w.num_blocks = nb
        for live in (False, True):
            for retention in (False, True):
                r = run(lt, w, live, retention)
                counters.append((nb, live, retention, r))
                if nb == args.plot_pool:
                    plotted[(live, retention)] = r
                print(
                    f"{nb:>6} {'on' if live else 'off':<10}{'on' if retention else 'off':<10}"
                    f"{r.steps:>7}{r.preemptions:>10}{r.recomputed:>11}{r.hit_rate:>9.1%}"
                    f"{r.peak_pages:>11}{r.rejected:>9}{r.seconds:>8.2f}"
                )
    print()
    print("counters (coordinator.stats()): hit rate over every match_prefix call, named pages")
    print("evicted, names removed, and each group's peak pinned pages (full, sliding, conv)")
    print(
        f"{'pool':>6} {'live tail':<10}{'retention':<10}{'match hit':>10}{'evicted':>9}"
        f"{'removed':>9}  peak pages per group"
    )
    for nb, live, retention, r in counters:
        print(
            f"{nb:>6} {'on' if live else 'off':<10}{'on' if retention else 'off':<10}"
            f"{r.match_hit_rate:>10.1%}{r.stats['pages_evicted']:>9}{r.stats['names_removed']:>9}"
            f"  {' / '.join(map(str, r.peak_by_group))}"
        )
    if args.plot and plotted:
        plot(args.plot, plotted, args.plot_pool)


if __name__ == "__main__":
    main()
