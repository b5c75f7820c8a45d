"""A cluster router in front of livetail engines: exact prefix routing on a hybrid model.

Three engines (livetail Coordinators: full attention B=16, sliding window B=16 W=128, a
state group B=16; small pools, so names are evicted; prefill chunks of 512, 1024 and 4096
tokens, and a state group keeps a snapshot only where a chunk ends) publish their KV
events; a router keeps ``livetail.router.PrefixIndex`` from those batches alone and sends
each request of a workload with shared system prompts to an engine. Three policies, same workload:

- exact: the engine whose ``match_prefix`` is longest, as the index answers it;
- round-robin: engines in turn;
- full-groups-only: the engine holding the longest run of full-attention blocks, what
  routers that index full-attention groups only do today.

Prints hit rate (tokens an engine reused / prompt tokens), recomputed tokens, and what
each router believed it would reuse. ``--plot out.png`` draws the same (needs matplotlib).

    python examples/router.py [--plot out.png]
"""

from __future__ import annotations

import argparse
import importlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import livetail
from livetail.events import encode_batch, group_layout, to_vllm_events
from livetail.router import PrefixIndex

SPECS = [
    ("full", 16, None),
    ("sliding", 16, 128),
    ("state", 16, None),
]
# Each engine's prefill chunk: a state group keeps a snapshot only where a chunk ends, so an
# engine that prefills in big chunks holds every full block of a prompt and few resumable
# boundaries.
CHUNKS = (512, 1024, 4096)
ENGINES, POOL_PAGES = len(CHUNKS), 1000
REQUESTS, SYSTEMS = 150, 8


@dataclass
class Engine:
    coord: livetail.Coordinator
    layout: list[tuple[int, str, int | None]]
    chunk: int
    seq: int = 0

    def batch(self) -> tuple[int, bytes]:
        """The events since the last batch, as the engine would publish them."""
        maps = to_vllm_events(self.coord.pool.take_events(), self.layout)
        seq, self.seq = self.seq, self.seq + 1
        return seq, encode_batch(maps, 0, ts=0.0)

    def serve(self, tokens: list[int]) -> int:
        """Runs one request (prefill in chunks, one decode token); returns the hit tokens."""
        c = self.coord
        keys = livetail.page_keys(tokens, c.base_block_size)
        usable = (len(tokens) - 1) // c.base_block_size  # the last token is always computed
        match = c.match_prefix(keys[:usable])
        tables = c.new_tables()
        c.claim(tables, match)
        done = match.num_tokens
        while done < len(tokens):
            n = min(self.chunk, len(tokens) - done)
            if not c.acquire(tables, n):
                raise RuntimeError("the pool is too small for one request")
            done += n
            c.cache_full_blocks(tables, keys, done, token_ids=tokens)
            c.reclaim_expired(tables, done)
        c.free(tables)
        return int(match.num_tokens)


def workload(seed: int = 3) -> list[list[int]]:
    """Requests: a system prompt (a few popular ones), then the user's own tokens."""
    rng = random.Random(seed)
    systems = [
        [rng.randrange(1, 32_000) for _ in range(rng.randrange(600, 2400))] for _ in range(SYSTEMS)
    ]
    weights = [1 / (i + 1) for i in range(SYSTEMS)]
    return [
        rng.choices(systems, weights)[0]
        + [rng.randrange(1, 32_000) for _ in range(rng.randrange(40, 400))]
        for _ in range(REQUESTS)
    ]


def full_only(batch: bytes) -> list[Any]:
    """A batch as a router that indexes full-attention groups only keeps it."""
    import msgpack  # type: ignore[import-untyped]

    ts, events, rank = msgpack.unpackb(batch, raw=False)
    keep = [
        e
        for e in events
        if e["type"] == "AllBlocksCleared" or e.get("group_idx") == 0  # group 0: full
    ]
    return [ts, keep, rank]


@dataclass
class Result:
    policy: str
    prompt_tokens: int = 0
    hit_tokens: int = 0
    claimed_tokens: int | None = None

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.prompt_tokens

    @property
    def recomputed(self) -> int:
        return self.prompt_tokens - self.hit_tokens


def run(policy: str, requests: Sequence[list[int]]) -> Result:
    engines = []
    for chunk in CHUNKS:
        specs = [livetail.GroupSpec(k, b, w) for k, b, w in SPECS]
        coord = livetail.Coordinator(specs, livetail.BlockPool(POOL_PAGES, events=True))
        engines.append(Engine(coord, group_layout(specs), chunk))
    exact, full = PrefixIndex(), PrefixIndex()
    for i, e in enumerate(engines):
        exact.add_engine(i, e.layout)
        full.add_engine(i, e.layout[:1])
    out = Result(policy, claimed_tokens=None if policy == "round-robin" else 0)
    served = [0] * ENGINES
    for r, tokens in enumerate(requests):
        usable = (len(tokens) - 1) // 16 * 16
        if policy == "round-robin":
            pick = r % ENGINES
        else:
            answers = (exact if policy == "exact" else full).match(tokens[:usable])
            best = max(answers.values())
            # Longest match; ties to the engine that served fewest requests.
            pick = min((i for i in range(ENGINES) if answers[i] == best), key=served.__getitem__)
            assert out.claimed_tokens is not None
            out.claimed_tokens += best
        served[pick] += 1
        out.prompt_tokens += len(tokens)
        out.hit_tokens += engines[pick].serve(tokens)
        seq, batch = engines[pick].batch()
        exact.apply(pick, batch, seq)
        full.apply(pick, full_only(batch), seq)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plot", metavar="PNG", help="also draw the table (needs matplotlib)")
    args = ap.parse_args()
    requests = workload()
    results = [run(p, requests) for p in ("exact", "round-robin", "full-groups-only")]
    print(f"{ENGINES} engines, {len(requests)} requests, {results[0].prompt_tokens} prompt tokens")
    print(f"{'policy':18s} {'hit rate':>8s} {'recomputed':>11s} {'router claimed':>15s}")
    for res in results:
        claimed = "-" if res.claimed_tokens is None else str(res.claimed_tokens)
        print(f"{res.policy:18s} {res.hit_rate:8.1%} {res.recomputed:11d} {claimed:>15s}")
    if args.plot:
        plot(results, args.plot)


def plot(results: list[Result], path: str) -> None:
    try:  # imported by name: the example type-checks with or without matplotlib
        importlib.import_module("matplotlib").use("Agg")
        plt: Any = importlib.import_module("matplotlib.pyplot")
    except ImportError:
        raise SystemExit("--plot needs matplotlib: pip install 'livetail[plot]'") from None
    names = [r.policy for r in results]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    left.bar(names, [100 * r.hit_rate for r in results], color="tab:blue")
    left.set_ylabel("hit rate (%)")
    right.bar(names, [r.recomputed for r in results], color="tab:orange")
    right.set_ylabel("recomputed tokens")
    for ax in (left, right):
        ax.tick_params(axis="x", labelrotation=15)
    fig.suptitle("routing a hybrid model (full + sliding W=128 + state, B=16)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
