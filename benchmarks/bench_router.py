"""livetail.router.PrefixIndex: events applied per second, query time, memory per name.

    python benchmarks/bench_router.py [--names 1000000] [--engines 8] [--repeat 31]

Prints, each the median of --repeat runs (min in brackets):
- events applied: keys per second for batches of stored then removed events (8 events of
  32 keys per batch, groups full B=16, sliding B=16 W=128, state B=16), given the decoded
  batch ``[ts, events, rank]`` and given the msgpack payload;
- a query of a 131072-token prompt (8192 keys) against --engines engines holding 1/8 ..
  8/8 of it on every group, among --names other names: ``match_keys`` given the 32-byte
  keys and given their 64-bit hashes, then for a prompt that shares only its first 4096
  tokens with them (the lookups stop early), and apart from it the hashing (``page_keys``)
  and the key-to-hash conversion; the one-engine query again on the numpy loops alone (the
  index's fallback without the native module);
- memory per name (tracemalloc): the index's allocations divided by the names it holds,
  for one engine naming --names hashes in a full group, then in all three groups;
- with --instructions, the native part of that query counted under callgrind (instructions,
  the same on an idle and on a loaded machine; benchmarks/instructions.py builds
  native/bench/hot.cpp): the rows of 8192 key hashes, and the 8 engines' boundaries in one
  call (what match_keys makes per round) and in one call per engine (what it made before).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import livetail
from livetail.events import encode_batch, group_layout, to_vllm_events
from livetail.router import PrefixIndex, key_hashes

SPECS = [
    livetail.GroupSpec("full", 16),
    livetail.GroupSpec("sliding", 16, 128),
    livetail.GroupSpec("state", 16),
]
LAYOUT = group_layout(SPECS)


def stored(group: int, keys: list[bytes]) -> dict[str, Any]:
    """A stored event of the group's keys, as livetail's publisher encodes it."""
    return to_vllm_events([("stored", "GPU", group, tuple(keys), None, 0)], LAYOUT)[0]


def removed(group: int, keys: list[bytes]) -> dict[str, Any]:
    return to_vllm_events([("removed", "GPU", group, tuple(keys), None, None)], LAYOUT)[0]


def random_keys(rng: random.Random, n: int) -> list[bytes]:
    return [rng.getrandbits(256).to_bytes(32, "big") for _ in range(n)]


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs), min(runs)


def fill(index: PrefixIndex, engine: str, hashes: list[bytes], per_event: int = 1024) -> None:
    for i in range(0, len(hashes), per_event):
        index.apply(engine, [0.0, [stored(0, hashes[i : i + per_event])], 0])


def bench_apply(names: int, repeat: int, rng: random.Random) -> None:
    per_event, per_batch = 32, 8
    keys = per_event * per_batch * 64  # 64 batches of stores, then 64 of removals
    print(f"events applied ({per_batch} events x {per_event} keys per batch, {names} names held)")
    for form in ("decoded", "msgpack"):
        rates = []
        for _ in range(max(3, repeat // 6)):
            index = PrefixIndex()
            index.add_engine("e", LAYOUT)
            fill(index, "other", random_keys(rng, names))
            hs = random_keys(rng, keys)
            batches: list[Any] = []
            for op in (stored, removed):
                for b in range(0, keys, per_event * per_batch):
                    evs = [
                        op(j % 3, hs[b + j * per_event : b + (j + 1) * per_event])
                        for j in range(per_batch)
                    ]
                    batches.append(
                        encode_batch(evs, 0, 0.0) if form == "msgpack" else [0.0, evs, 0]
                    )
            t = time.perf_counter()
            for batch in batches:
                index.apply("e", batch)
            rates.append(2 * keys / (time.perf_counter() - t))
        print(
            f"  {form:8s} {statistics.median(rates) / 1e6:6.2f} M keys/s "
            f"[max {max(rates) / 1e6:.2f}]"
        )


def bench_query(names: int, engines: int, repeat: int, rng: random.Random) -> None:
    tokens = [rng.randrange(1, 150_000) for _ in range(128 * 1024)]
    index = PrefixIndex()
    med, low = timed(lambda: livetail.page_keys(tokens, 16), repeat)
    keys = livetail.page_keys(tokens, 16)
    hs = keys
    for e in range(engines):
        index.add_engine(e, LAYOUT)
        n = len(hs) * (e + 1) // engines
        index.apply(e, [0.0, [stored(g, hs[:n]) for g in range(3)], 0])
    fill(index, "other", random_keys(rng, names))
    want = {e: 128 * 1024 * (e + 1) // engines // 16 * 16 for e in range(engines)}
    assert {e: t for e, t in index.match_keys(keys).items() if e != "other"} == want
    h = key_hashes(keys)
    print(f"query: 131072 tokens (8192 keys), {engines} engines, {names} other names")
    print(f"  page_keys(tokens, 16)        {med * 1e6:8.0f} us [{low * 1e6:.0f}]")
    med, low = timed(lambda: key_hashes(keys), repeat)
    print(f"  key_hashes(keys)             {med * 1e6:8.0f} us [{low * 1e6:.0f}]")
    med, low = timed(lambda: index.match_keys(keys), repeat)
    print(f"  match_keys(keys)             {med * 1e6:8.0f} us [{low * 1e6:.0f}]")
    med, low = timed(lambda: index.match_keys(h), repeat)
    print(f"  match_keys(hashes)           {med * 1e6:8.0f} us [{low * 1e6:.0f}]")
    # A prompt sharing only its first 4096 tokens with what the engines hold: lookups stop
    # after the first chunk of keys.
    rest = [rng.randrange(1, 150_000) for _ in range(len(tokens) - 4096)]
    h2 = key_hashes(livetail.page_keys(tokens[:4096] + rest, 16))
    assert {e: t for e, t in index.match_keys(h2).items() if e != "other"} == {
        e: min(4096, t) for e, t in want.items()
    }
    med, low = timed(lambda: index.match_keys(h2), repeat)
    print(f"  the same, 4096 tokens shared {med * 1e6:8.0f} us [{low * 1e6:.0f}]")
    one = PrefixIndex()
    one.add_engine(0, LAYOUT)
    one.apply(0, [0.0, [stored(g, hs) for g in range(3)], 0])
    fill(one, "other", random_keys(rng, names))
    one.remove_engine("other")
    med, low = timed(lambda: one.match_keys(h), repeat)
    print(f"  match_keys(hashes), 1 engine {med * 1e6:8.0f} us [{low * 1e6:.0f}]")
    one._native = False  # the numpy loops the index falls back on without livetail._core
    assert one.match_keys(h) == {0: 128 * 1024}
    med, low = timed(lambda: one.match_keys(h), repeat)
    print(f"  the same on the numpy loops  {med * 1e6:8.0f} us [{low * 1e6:.0f}]")


def bench_memory(names: int, rng: random.Random) -> None:
    hs = random_keys(rng, names)
    for layout in ([LAYOUT[0]], LAYOUT):
        tracemalloc.start()
        index = PrefixIndex()
        index.add_engine("e", layout)
        for g in range(len(layout)):
            for i in range(0, names, 1024):
                index.apply("e", [0.0, [stored(g, hs[i : i + 1024])], 0])
        used = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        held = len(layout) * names
        print(
            f"memory: {held} names ({names} hashes x {len(layout)} groups): "
            f"{used / held:.1f} bytes per name"
        )
        del index


def bench_instructions() -> None:
    """The router rows of benchmarks/instructions.py (callgrind), beside their times."""
    import importlib.util
    import tempfile
    from pathlib import Path

    path = Path(__file__).resolve().parent / "instructions.py"
    spec = importlib.util.spec_from_file_location("instructions", path)
    assert spec is not None and spec.loader is not None
    ins = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ins)
    with tempfile.TemporaryDirectory() as tmp:
        binary = ins.build(ins.ROOT, Path(tmp) / "hot")
        counts = ins.count(binary)
        ns = ins.times(binary, 11)
    print("native part of the query (native/bench/hot.cpp: 8192 keys, 2**17 names, 8 engines)")
    for name, label in (
        ("router.lookup_8192", "rows of 8192 key hashes"),
        ("router.longest_8_engines", "8 engines' boundaries, one call"),
        ("router.longest_8_engines_each", "the same, one call per engine"),
    ):
        print(f"  {label:34s} {counts[name] / 1e6:6.2f} M instructions {ns[name] / 1e3:8.0f} us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--names", type=int, default=1_000_000)
    ap.add_argument("--engines", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=31)
    ap.add_argument("--instructions", action="store_true", help="also count under callgrind")
    args = ap.parse_args()
    rng = random.Random(7)
    bench_apply(args.names, args.repeat, rng)
    bench_query(args.names, args.engines, args.repeat, rng)
    bench_memory(args.names, rng)
    if args.instructions:
        bench_instructions()


if __name__ == "__main__":
    main()
