"""livetail.router.PrefixIndex answers what each engine's own match_prefix answers.

Several engines (native and spec coordinators, hybrid layouts with live tail on and off,
small device pools so that names are evicted, optional host pools with offloads, loads
completed, deferred and aborted) run requests on prompts that share system prompts. After
every operation (resets of both tiers and evictions of given pages included) the engine's
events go over the wire encoding (msgpack payload or decoded batch, integer or 32-byte
hashes) into one index, and for every probe prompt and engine the
index's answer must equal ``coordinator.match_prefix(page_keys(prompt, base)).num_tokens``,
and an index on the numpy loops alone (no native probes) must answer the same.
"""

from __future__ import annotations

from typing import Any

import livetail
import livetail.router._index as router_index
import livetail.spec as spec
import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st
from livetail.events import encode_batch, group_layout, to_vllm_events
from livetail.router import PrefixIndex

# (kind, block size, window, live tail) per group.
LAYOUTS = [
    [("full", 4, None, False), ("sliding", 4, 9, True), ("state", 8, None, False)],
    [("full", 8, None, False), ("sliding", 4, 6, False)],
    [("full", 4, None, False), ("sliding", 4, 5, True), ("sliding", 8, 12, False)],
    [("sliding", 4, 1, True), ("full", 8, None, False)],
    [("state", 4, None, False), ("sliding", 8, 13, True)],
    [("full", 4, None, False)],
    # Chunked local attention (section 13.2): the third field is its chunk size C.
    [("full", 4, None, False), ("chunked", 4, 16, False)],
    [("chunked", 8, 24, False), ("sliding", 4, 6, True), ("full", 8, None, False)],
]
SYSTEMS = 3


def prompt(system: int, doc: int, n: int) -> list[int]:
    """A shared 24-token system prompt, then the document's own tokens."""
    head = [(system * 131 + i * 7) % 997 + 1 for i in range(24)]
    tail = [(doc * 7919 + i * 31) % 1000 for i in range(max(0, n - 24))]
    return (head + tail)[:n]


PROBES = [prompt(s, d, n) for s in range(SYSTEMS) for d, n in ((0, 40), (1, 64), (2, 20))]


class Engine:
    """One coordinator (native or spec), its live requests and its event stream."""

    def __init__(
        self,
        mod: Any,
        layout: int,
        pages: int,
        host: int,
        int_hashes: bool,
        wire: str,
        align: int = 1,
    ) -> None:
        specs = [
            mod.GroupSpec(k, b, attention_chunk_size=w)
            if k == "chunked"
            else mod.GroupSpec(k, b, w, live_tail_alloc=lt)
            for k, b, w, lt in LAYOUTS[layout]
        ]
        host_pool = mod.HostPool(host, events=True) if host else None
        pool = mod.BlockPool(pages, events=True)
        lcm = mod.Coordinator(specs, pool).lcm_block_size
        # align lcms: the coordinator's alignment (semantics 13.9), told to the index.
        self.alignment = None if align == 1 else align * lcm
        self.c = mod.Coordinator(specs, pool, host_pool, alignment=self.alignment)
        # vLLM's events carry no chunk size: a layout given up front does.
        self.layout = [
            (b, k, s.attention_chunk_size if k == "chunked_local_attention" else w)
            for (b, k, w), s in zip(group_layout(specs), specs)
        ]
        self.int_hashes = int_hashes
        self.wire = wire
        self.live: dict[int, tuple[Any, int]] = {}  # slot -> (tables, tokens computed)
        self.loads: dict[int, Any] = {}  # slot -> pending LoadPlan
        self.seq = 0

    def start(
        self, slot: int, system: int, doc: int, n: int, chunk: int, defer: bool, offload: int
    ) -> None:
        """Match, claim (loads completed or left pending), compute in chunks, then offload
        (offload: 0 no, 1 complete, 2 abort)."""
        self.free(slot)
        tokens = prompt(system, doc, n)
        keys = livetail.page_keys(tokens, self.c.base_block_size)
        ts = self.c.new_tables()
        match = self.c.match_prefix(keys)
        if self.c.blocks_consumed_by_claim(match) > self.c.pool.num_free:
            return
        load = self.c.claim(ts, match)
        done = match.num_tokens
        self.live[slot] = (ts, done)
        if load is not None:
            if defer:
                self.loads[slot] = load  # computed later, or aborted by a free
                return
            self.c.complete_load(load)
        while done < n:
            k = min(chunk, n - done)
            if not self.c.acquire(ts, k):
                break  # the pool is short: the request keeps what it has
            done += k
            self.c.cache_full_blocks(ts, keys, done, token_ids=tokens)
            self.c.reclaim_expired(ts, done)
        self.live[slot] = (ts, done)
        if offload and self.c.host is not None:
            plan = self.c.plan_offload(ts, done)
            if plan is not None:
                (self.c.complete_offload if offload == 1 else self.c.abort_offload)(plan)

    def finish_load(self, which: int) -> None:
        if not self.loads:
            return
        load = self.loads.pop(sorted(self.loads)[which % len(self.loads)])
        if load is not None:
            self.c.complete_load(load)

    def offload(self, which: int, complete: bool) -> None:
        ready = sorted(s for s in self.live if s not in self.loads)
        if self.c.host is None or not ready:
            return
        ts, done = self.live[ready[which % len(ready)]]
        plan = self.c.plan_offload(ts, done)
        if plan is not None:
            (self.c.complete_offload if complete else self.c.abort_offload)(plan)

    def reset(self) -> None:
        """The engine's prefix-cache reset, drained first (nothing pinned), both tiers at once."""
        for slot in list(self.live):
            self.free(slot)
        assert self.c.pool.reset_names()
        if self.c.host is not None:
            assert self.c.host.reset_names()

    def evict(self, first: int, n: int) -> None:
        """Names of pages first .. first + n - 1 dropped (their content went bad)."""
        top = self.c.pool.num_blocks
        self.c.pool.evict_names([p for p in range(first, first + n) if 1 <= p < top])

    def free(self, slot: int) -> None:
        self.loads.pop(slot, None)  # freeing aborts a pending load
        entry = self.live.pop(slot, None)
        if entry is not None:
            self.c.free(entry[0])

    def batch(self) -> tuple[int, Any]:
        """This operation's events as one batch: (sequence number, payload)."""
        events = list(self.c.pool.take_events())
        if self.c.host is not None:
            events += list(self.c.host.take_events())
        maps = to_vllm_events(events, self.layout, int_block_hashes=self.int_hashes)
        for m in maps:  # names carry their tokens, on the host tier too
            if m["type"] == "BlockStored":
                assert len(m["token_ids"]) == len(m["block_hashes"]) * m["block_size"]
        payload = encode_batch(maps, 0, ts=0.0)
        seq, self.seq = self.seq, self.seq + 1
        if self.wire == "decoded":
            return seq, msgpack.unpackb(payload, raw=False)
        return seq, payload


engine_setup = st.tuples(
    st.sampled_from([livetail, spec]),
    st.integers(0, len(LAYOUTS) - 1),
    st.integers(4, 30),  # device pages: small, so names are evicted
    st.sampled_from([0, 0, 4, 12, 40]),  # host pages (0: no host tier)
    st.booleans(),  # integer hashes (else 32-byte)
    st.sampled_from(["payload", "decoded"]),
    st.booleans(),  # layout given up front (else learned from the events)
    st.sampled_from([1, 1, 2]),  # alignment in lcms, given with an up-front layout
)
start = st.tuples(
    st.just("start"),
    st.integers(0, 2),  # engine
    st.integers(0, 2),  # request slot
    st.tuples(
        st.integers(0, SYSTEMS - 1),  # system prompt
        st.integers(0, 2),  # document
        st.integers(1, 72),  # prompt tokens
        st.integers(1, 24),  # chunk
        st.booleans(),  # leave a load pending
        st.sampled_from([0, 1, 1, 2]),  # then offload: no, complete, abort
    ),
)
op = st.one_of(
    start,
    start,
    start,
    st.tuples(st.just("free"), st.integers(0, 2), st.integers(0, 2), st.just(())),
    st.tuples(st.just("offload"), st.integers(0, 2), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("load"), st.integers(0, 2), st.integers(0, 2), st.just(())),
    st.tuples(st.just("reset"), st.integers(0, 2), st.just(0), st.just(())),
    st.tuples(st.just("evict"), st.integers(0, 2), st.integers(1, 20), st.integers(1, 4)),
)


def expected(e: Engine, tokens: list[int]) -> int:
    return int(e.c.match_prefix(livetail.page_keys(tokens, e.c.base_block_size)).num_tokens)


@settings(max_examples=150)
@given(
    setups=st.lists(engine_setup, min_size=2, max_size=3), ops=st.lists(op, min_size=5, max_size=40)
)
def test_the_index_answers_every_engines_match_prefix_after_every_batch(
    setups: list[tuple[Any, int, int, int, bool, str, bool, int]], ops: list[tuple[Any, ...]]
) -> None:
    # Queries look keys up in chunks from 1 key on: the early stop is exercised too.
    first, router_index._FIRST_CHUNK = router_index._FIRST_CHUNK, 1
    try:
        run(setups, ops)
    finally:
        router_index._FIRST_CHUNK = first


def run(
    setups: list[tuple[Any, int, int, int, bool, str, bool, int]], ops: list[tuple[Any, ...]]
) -> None:
    # An index learns an alignment only with the layout (the events do not carry it).
    engines = [Engine(*s[:6], align=s[7] if s[6] else 1) for s in setups]
    index = PrefixIndex()
    numpy_only = PrefixIndex()  # the same stream on the numpy loops: the same answers
    numpy_only._native = False
    for i, (e, s) in enumerate(zip(engines, setups)):
        if s[6]:
            index.add_engine(i, e.layout, alignment=e.alignment)
            numpy_only.add_engine(i, e.layout, alignment=e.alignment)
    for kind, which, slot, arg in ops:
        i = which % len(engines)
        e = engines[i]
        if kind == "start":
            e.start(slot, *arg)
        elif kind == "free":
            e.free(slot)
        elif kind == "offload":
            e.offload(slot, arg)
        elif kind == "reset":
            e.reset()
        elif kind == "evict":
            e.evict(slot, arg)
        else:
            e.finish_load(slot)
        seq, batch = e.batch()
        assert index.apply(i, batch, seq) is True
        assert numpy_only.apply(i, batch, seq) is True
        for tokens in PROBES:
            got = index.match(tokens)
            assert numpy_only.match(tokens) == got
            for j, other in enumerate(engines):
                # A learned layout is exact once every group has been heard from.
                if setups[j][6] or (j in index.engines and index.layout(j) == _rules(other)):
                    assert got.get(j, 0) == expected(other, tokens), (j, tokens)
    for j, other in enumerate(engines):
        if j in index.engines:
            assert index.gaps(j) == []
            assert_names(index, j, other)


def _rules(e: Engine) -> list[tuple[int, str, int | None]]:
    rule = {
        "full_attention": "full",
        "sliding_window": "sliding",
        "mamba": "state",
        "chunked_local_attention": "chunked",
    }
    return [(b, rule[k], w) for b, k, w in e.layout]


def assert_names(index: PrefixIndex, j: int, e: Engine) -> None:
    """The index holds the engine's names per tier: as sets (spec), as counts (native)."""
    names = index.names(j)
    pools = [("GPU", e.c.pool)] + ([("CPU", e.c.host)] if e.c.host is not None else [])
    for tier, pool in pools:
        mine = {n for n, tiers in names.items() if tier in tiers}
        held = getattr(pool, "_pages_named", None)
        if held is None:
            assert len(mine) == pool.stats()["num_names"]
        else:
            assert mine == {(g, int.from_bytes(k[-8:], "big")) for g, k in held}
