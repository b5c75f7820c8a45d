"""Semantics section 7 item 12: replaying the event stream from the start reproduces exactly
the set of names the pool holds, after every operation; spec and native emit the same stream.

Hypothesis drives an engine-like life cycle (match, claim, chunked acquire, naming, reclaim,
free) over a small pool so that names are stored, shared, evicted and stored again, and
section 12's evict_names (removed events) and reset_names (cleared events) in between.
"""

from __future__ import annotations

from typing import Any

import livetail
import livetail.spec as spec
from hypothesis import given
from hypothesis import strategies as st
from livetail.verify.events import EventReplay

LAYOUTS = [
    [("full", 4, None, False)],
    [("full", 8, None, False), ("sliding", 4, 6, True)],
    [("full", 8, None, False), ("sliding", 4, 5, False), ("state", 8, None, False)],
]

op = st.one_of(
    st.tuples(st.just("start"), st.integers(0, 3), st.integers(1, 64), st.integers(1, 24)),
    st.tuples(st.just("free"), st.integers(0, 3), st.just(0), st.just(0)),
    st.tuples(st.just("evict"), st.just(0), st.integers(0, 63), st.integers(0, 6)),
    st.tuples(st.just("reset"), st.just(0), st.just(0), st.just(0)),
)


def prompt(doc: int, n: int) -> list[int]:
    return [(doc * 7919 + i * 31) % 1000 for i in range(n)]


class Engine:
    """One implementation: a coordinator and up to four live requests."""

    def __init__(self, mod: Any, layout: list[tuple[str, int, int | None, bool]], pages: int):
        specs = [mod.GroupSpec(k, b, w, live_tail_alloc=lt) for k, b, w, lt in layout]
        self.c = mod.Coordinator(specs, mod.BlockPool(pages, events=True))
        self.live: dict[int, Any] = {}

    def start(self, slot: int, doc: int, n: int, chunk: int) -> None:
        self.free(slot)
        tokens = prompt(doc, n)
        keys = livetail.page_keys(tokens, self.c.base_block_size)
        ts = self.c.new_tables()
        match = self.c.match_prefix(keys)
        self.c.claim(ts, match)
        done = match.num_tokens
        self.live[slot] = ts
        while done < n:
            k = min(chunk, n - done)
            if not self.c.acquire(ts, k):
                return  # the pool is short: the request keeps what it has
            done += k
            self.c.cache_full_blocks(ts, keys, done)
            self.c.reclaim_expired(ts, done)

    def evict(self, first: int, count: int) -> int:
        """evict_names on `count` consecutive page ids from `first` (wrapping past page 0)."""
        n = self.c.pool.num_blocks - 1
        return int(self.c.pool.evict_names([1 + (first + i) % n for i in range(count)]))

    def free(self, slot: int) -> None:
        ts = self.live.pop(slot, None)
        if ts is not None:
            self.c.free(ts)


@given(
    layout=st.sampled_from(range(len(LAYOUTS))),
    pages=st.integers(6, 40),
    ops=st.lists(op, min_size=1, max_size=25),
)
def test_replaying_the_stream_reproduces_the_pools_names_after_every_op(
    layout: int, pages: int, ops: list[tuple[str, int, int, int]]
) -> None:
    native = Engine(livetail, LAYOUTS[layout], pages)
    model = Engine(spec, LAYOUTS[layout], pages)
    replay = EventReplay()
    for kind, slot, a, b in ops:
        answers = []
        for e in (native, model):
            if kind == "start":
                e.start(slot, a % 3, a, b)
            elif kind == "evict":
                answers.append(e.evict(a, b))
            elif kind == "reset":
                answers.append(e.c.pool.reset_names())
            else:
                e.free(slot)
        assert answers[:1] == answers[1:]
        events = native.c.pool.take_events()
        assert events == model.c.pool.take_events()
        replay.apply(events)
        assert replay.errors == []
        assert replay.names == set(model.c.pool._pages_named)
        assert len(replay.names) == native.c.stats()["num_names"]
        assert native.c.stats() == model.c.stats()
