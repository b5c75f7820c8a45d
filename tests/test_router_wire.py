"""Replay over a real loopback socket (vLLM's protocol) and the index behind it.

The publisher keeps its last batches behind a ZMQ ROUTER socket; a subscriber that joins
late, or loses a batch, sees the gap in the sequence numbers, replays from the first batch
it lacks, and ends with the same index as a subscriber that saw every batch.
"""

from __future__ import annotations

import random
import time
from typing import Any

import livetail
import livetail.spec as spec
import msgpack
import pytest
import zmq
from livetail.events import END_SEQ, KVEventPublisher, encode_batch, replay_batches
from livetail.router import PrefixIndex, SequenceGap

LAYOUT = [("full", 16, None, False), ("sliding", 4, 8, True), ("state", 16, None, False)]


def subscribe(endpoint: str, topic: bytes = b"") -> Any:
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.set_hwm(100_000)
    sub.setsockopt(zmq.SUBSCRIBE, topic)
    sub.connect(endpoint)
    return sub


def test_a_replay_is_every_kept_batch_from_the_start_then_the_end_marker() -> None:
    specs = [livetail.GroupSpec("full", 4)]
    with KVEventPublisher(
        "tcp://127.0.0.1:0", specs, topic="kv", replay_endpoint="tcp://127.0.0.1:0"
    ) as pub:
        assert pub.replay_endpoint is not None
        for i in range(5):
            pub.publish([("stored", "GPU", 0, (bytes([i]) * 32,), None, i)], ts=float(i))
        dealer = zmq.Context.instance().socket(zmq.DEALER)
        try:
            dealer.connect(pub.replay_endpoint)
            dealer.send_multipart([b"", (2).to_bytes(8, "big")])
            frames = []
            while True:
                assert dealer.poll(10_000), "no reply from the replay socket"
                f = dealer.recv_multipart()
                frames.append(f)
                if f[2] == END_SEQ:
                    break
        finally:
            dealer.close(linger=0)
    assert END_SEQ == b"\xff" * 8
    assert frames[-1] == [b"", b"", b"\xff" * 8, b""]
    assert [f[:3] for f in frames[:-1]] == [[b"", b"kv", s.to_bytes(8, "big")] for s in (2, 3, 4)]
    for s, f in zip((2, 3, 4), frames):
        ts, events, rank = msgpack.unpackb(f[3], raw=False)
        assert (ts, rank) == (float(s), 0)
        assert events[0]["block_hashes"] == [int.from_bytes(bytes([s]) * 8, "big")]


def test_a_request_older_than_the_buffer_gets_what_the_buffer_has_and_shows_the_loss() -> None:
    specs = [livetail.GroupSpec("full", 4)]
    with KVEventPublisher(
        "tcp://127.0.0.1:0", specs, replay_endpoint="tcp://127.0.0.1:0", buffer_steps=3
    ) as pub:
        assert pub.replay_endpoint is not None
        for i in range(6):
            pub.publish([("stored", "GPU", 0, (bytes([i + 1]) * 32,), None, i)])
        got = replay_batches(pub.replay_endpoint, 0)
        assert [s for s, _ in got] == [3, 4, 5]  # the first is past 0: batches 0-2 are lost
        index = PrefixIndex()
        with pytest.raises(SequenceGap) as gap:
            index.apply("e", got[0][1], got[0][0])
        assert (gap.value.expected, gap.value.received) == (0, 3)
        for s, payload in got:
            assert index.apply("e", payload, s, allow_gap=True)
        assert index.gaps("e") == [(0, 2)]
        assert index.expected_sequence("e") == 6
        assert sorted(h for _, h in index.names("e")) == [
            int.from_bytes(bytes([i + 1]) * 8, "big") for i in (3, 4, 5)
        ]
        # Nothing newer than the stream: only the end marker.
        assert replay_batches(pub.replay_endpoint, 6) == []
        with pytest.raises(ValueError, match="start"):
            replay_batches(pub.replay_endpoint, -1)


def test_the_buffer_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="buffer_steps"):
        KVEventPublisher("tcp://127.0.0.1:0", [livetail.GroupSpec("full", 4)], buffer_steps=0)


class Follower:
    """A router's subscriber: applies the stream, replays from the first batch it lacks."""

    def __init__(self, pub: KVEventPublisher) -> None:
        assert pub.replay_endpoint is not None
        self.replay = pub.replay_endpoint
        self.sub = subscribe(pub.endpoint)
        self.index = PrefixIndex()
        self.gaps = 0
        self.drop_next = False

    def pump(self, timeout_ms: int) -> int:
        """Handles every message that arrives within timeout_ms; returns how many."""
        n = 0
        while self.sub.poll(timeout_ms):
            _, seq_bytes, payload = self.sub.recv_multipart()
            n += 1
            if self.drop_next:  # lost on the way
                self.drop_next = False
                continue
            self.take(int.from_bytes(seq_bytes, "big"), payload)
            timeout_ms = 50
        return n

    def take(self, seq: int, payload: bytes) -> None:
        try:
            self.index.apply("engine", payload, seq)
        except SequenceGap as gap:
            self.gaps += 1
            for s, p in replay_batches(self.replay, gap.expected):
                self.index.apply("engine", p, s, allow_gap=True)
            assert self.index.apply("engine", payload, seq) is False  # the replay had it

    def close(self) -> None:
        self.sub.close(linger=0)


def test_a_late_subscriber_that_also_loses_a_batch_replays_to_the_same_index() -> None:
    rng = random.Random(5)
    specs = [livetail.GroupSpec(k, b, w, live_tail_alloc=lt) for k, b, w, lt in LAYOUT]
    model_specs = [spec.GroupSpec(k, b, w, live_tail_alloc=lt) for k, b, w, lt in LAYOUT]
    coord = livetail.Coordinator(specs, livetail.BlockPool(48, events=True))
    model = spec.Coordinator(model_specs, spec.BlockPool(48, events=True))
    systems = [[rng.randrange(1, 50_000) for _ in range(64)] for _ in range(3)]
    prompts = [rng.choice(systems) + [rng.randrange(50_000) for _ in range(40)] for _ in range(30)]
    with KVEventPublisher(
        "tcp://127.0.0.1:0", coord.specs, replay_endpoint="tcp://127.0.0.1:0"
    ) as pub:
        early = Follower(pub)
        late: Follower | None = None
        try:
            # The early subscriber is live before the first batch that names anything.
            deadline = time.monotonic() + 20
            while not early.pump(100):
                assert time.monotonic() < deadline, "the subscription did not come up"
                pub.publish([])
            handshake_gaps = early.gaps  # empty batches sent before its first message
            for i, tokens in enumerate(prompts):
                keys = livetail.page_keys(tokens, coord.base_block_size)
                for c in (coord, model):
                    ts = c.new_tables()
                    m = c.match_prefix(keys)
                    c.claim(ts, m)
                    done = m.num_tokens
                    while done < len(tokens):
                        k = min(32, len(tokens) - done)
                        assert c.acquire(ts, k)
                        done += k
                        c.cache_full_blocks(ts, keys, done)
                        c.reclaim_expired(ts, done)
                    c.free(ts)
                events = coord.pool.take_events()
                assert events == model.pool.take_events()
                pub.publish(events, token_ids=tokens)
                early.pump(20)
                if i == 10:
                    late = Follower(pub)  # joins with ten batches and more already sent
                if late is not None:
                    late.drop_next = late.drop_next or i == 20
                    late.pump(20)
            assert late is not None
            # The stream's end: empty batches until the late subscriber has the last one.
            while late.index.expected_sequence("engine") < pub.next_sequence:
                pub.publish([])
                late.pump(100)
                early.pump(20)
            early.pump(100)
            assert early.gaps == handshake_gaps <= 1  # it saw every batch that names anything
            assert late.gaps >= 2  # the late join and the lost batch
            assert late.index.gaps("engine") == [] == early.index.gaps("engine")
            assert late.index.names("engine") == early.index.names("engine")
            assert len(early.index.names("engine")) == coord.pool.stats()["num_names"]
            assert coord.stats()["names_removed"] > 0  # evictions went over the wire too
            for tokens in prompts[:10] + systems:
                want = coord.match_prefix(livetail.page_keys(tokens, 4)).num_tokens
                assert late.index.match(tokens) == early.index.match(tokens) == {"engine": want}
        finally:
            early.close()
            if late is not None:
                late.close()


def test_a_cleared_event_drops_the_engines_names_and_its_recorded_gaps() -> None:
    key = bytes(range(32))
    stored = {
        "type": "BlockStored",
        "block_hashes": [1, 2],
        "parent_block_hash": None,
        "token_ids": [],
        "block_size": 4,
        "lora_id": None,
        "medium": "CPU",
        "lora_name": None,
    }
    index = PrefixIndex()
    index.apply("e", encode_batch([stored]), 0)
    index.apply("e", [0.0, [dict(stored, block_hashes=[key], medium="GPU")], 0], 3, allow_gap=True)
    assert index.gaps("e") == [(1, 2)]
    assert index.names("e") == {
        (0, 1): {"CPU"},
        (0, 2): {"CPU"},
        (0, int.from_bytes(key[-8:], "big")): {"GPU"},
    }
    index.apply("e", [0.0, [{"type": "AllBlocksCleared"}, stored], 0], 4)
    assert index.gaps("e") == []
    assert index.names("e") == {(0, 1): {"CPU"}, (0, 2): {"CPU"}}


def test_a_reset_goes_out_as_all_blocks_cleared_and_empties_the_routers_view() -> None:
    specs = [livetail.GroupSpec(k, b, w, live_tail_alloc=lt) for k, b, w, lt in LAYOUT]
    coord = livetail.Coordinator(specs, livetail.BlockPool(64, events=True))
    tokens = list(range(1, 97))
    keys = livetail.page_keys(tokens, coord.base_block_size)
    with KVEventPublisher(
        "tcp://127.0.0.1:0", coord.specs, replay_endpoint="tcp://127.0.0.1:0"
    ) as pub:
        router = Follower(pub)
        try:
            ts = coord.new_tables()
            assert coord.acquire(ts, 96)
            coord.cache_full_blocks(ts, keys, 96)
            coord.free(ts)
            pub.publish(coord.pool.take_events())
            assert coord.pool.reset_names()
            pub.publish(coord.pool.take_events())
            deadline = time.monotonic() + 20
            while router.index.expected_sequence("engine") < pub.next_sequence:
                assert time.monotonic() < deadline, "the batches did not arrive"
                pub.publish([])  # a late subscription sees a gap and replays
                router.pump(100)
            frames = replay_batches(router.replay, 1)
            assert frames[0][0] == 1
            _, events, _ = msgpack.unpackb(frames[0][1], raw=False)
            assert events == [{"type": "AllBlocksCleared"}]
            assert router.index.names("engine") == {}
            assert router.index.match(tokens) == {"engine": 0}
            assert coord.match_prefix(keys).num_tokens == 0
        finally:
            router.close()


def test_the_default_publish_carries_block_size_tokens_per_key() -> None:
    specs = [livetail.GroupSpec(k, b, w, live_tail_alloc=lt) for k, b, w, lt in LAYOUT]
    coord = livetail.Coordinator(specs, livetail.BlockPool(64, events=True))
    tokens = [(7 * i) % 1000 + 1 for i in range(100)]
    keys = livetail.page_keys(tokens, coord.base_block_size)
    with KVEventPublisher("tcp://127.0.0.1:0", coord.specs) as pub:
        sub = subscribe(pub.endpoint)
        try:
            deadline = time.monotonic() + 20
            while not sub.poll(100):  # the subscription comes up
                assert time.monotonic() < deadline, "the subscription did not come up"
                pub.publish([])
            while sub.poll(100):
                sub.recv_multipart()
            ts = coord.new_tables()
            assert coord.acquire(ts, 64)
            coord.cache_full_blocks(ts, keys, 64, token_ids=tokens)
            assert coord.acquire(ts, 36)
            coord.cache_full_blocks(ts, keys, 100, token_ids=tokens)
            seq = pub.publish(coord.pool.take_events())
            assert sub.poll(10_000)
            _, seq_bytes, payload = sub.recv_multipart()
        finally:
            sub.close(linger=0)
    assert int.from_bytes(seq_bytes, "big") == seq
    _, events, _ = msgpack.unpackb(payload, raw=False)
    stored = [e for e in events if e["type"] == "BlockStored"]
    assert {e["group_idx"] for e in stored} == {0, 1, 2}
    slots: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for e in stored:
        size = e["block_size"]
        assert len(e["token_ids"]) == len(e["block_hashes"]) * size
        for i, h in enumerate(e["block_hashes"]):
            j = next(j for j in range(len(keys)) if int.from_bytes(keys[j][-8:], "big") == h)
            slot = (j + 1) * coord.base_block_size // size - 1
            mine = e["token_ids"][i * size : (i + 1) * size]
            assert mine == tokens[slot * size : (slot + 1) * size]
            slots[e["group_idx"]].append(slot)
    # Full: slots 0-5 (96 tokens); the state group: the slot ending at 64 tokens (the first
    # chunk's end; 100 is no multiple of 16); the live-tail sliding group: what it kept.
    assert sorted(slots[0]) == [0, 1, 2, 3, 4, 5]
    assert sorted(slots[2]) == [3]
    assert slots[1] and all(0 <= s < 25 for s in slots[1])
