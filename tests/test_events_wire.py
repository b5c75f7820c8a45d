"""livetail.events on the wire: vLLM's KV-event encoding, read by a subscriber of our own.

The decoder below is written from vLLM's schema (vllm/distributed/kv_events.py, map-encoded
events): it checks the frames, the batch array, every event's tag, fields and their order,
and rebuilds a router's index of (group, block hash) from the stream.
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
from livetail.events import KVEventPublisher, block_hash, encode_batch, to_vllm_events

# vLLM's field order per event class; a trailing field equal to its default is omitted.
STORED_FIELDS = [
    "block_hashes",
    "parent_block_hash",
    "token_ids",
    "block_size",
    "lora_id",
    "medium",
    "lora_name",
    "extra_keys",
    "group_idx",
    "kv_cache_spec_kind",
    "kv_cache_spec_sliding_window",
]
STORED_REQUIRED = STORED_FIELDS[:7]
REMOVED_FIELDS = ["block_hashes", "medium", "group_idx"]
REMOVED_REQUIRED = REMOVED_FIELDS[:2]


class Decoded:
    def __init__(self, seq: int, ts: float, events: list[dict[str, Any]], rank: int) -> None:
        self.seq, self.ts, self.events, self.rank = seq, ts, events, rank


def decode(frames: list[bytes], topic: bytes) -> Decoded:
    """One multipart message: [topic, 8-byte big-endian sequence, msgpack batch]."""
    assert len(frames) == 3
    assert frames[0] == topic
    assert len(frames[1]) == 8
    seq = int.from_bytes(frames[1], "big")
    batch = msgpack.unpackb(frames[2], raw=False)
    assert isinstance(batch, list) and len(batch) == 3  # [ts, events, data_parallel_rank]
    ts, events, rank = batch
    assert isinstance(ts, float) and isinstance(events, list)
    for ev in events:
        assert isinstance(ev, dict)
        fields = list(ev)
        assert fields[0] == "type"
        if ev["type"] == "BlockStored":
            order, required = STORED_FIELDS, STORED_REQUIRED
        elif ev["type"] == "BlockRemoved":
            order, required = REMOVED_FIELDS, REMOVED_REQUIRED
        else:
            assert ev["type"] == "AllBlocksCleared"
            order, required = [], []
        rest = fields[1:]
        assert set(required) <= set(rest), ev
        assert rest == [f for f in order if f in rest], f"field order {rest}"
    return Decoded(seq, ts, events, rank)


class RouterIndex:
    """What a prefix-aware router keeps per engine: the (group, hash) pairs it holds."""

    def __init__(self) -> None:
        self.names: set[tuple[int, int]] = set()
        self.last_seq: int | None = None
        self.gaps: list[tuple[int, int]] = []  # (first missing, last missing)

    def apply(self, msg: Decoded) -> None:
        if self.last_seq is not None and msg.seq != self.last_seq + 1:
            self.gaps.append((self.last_seq + 1, msg.seq - 1))
        self.last_seq = msg.seq
        for ev in msg.events:
            if ev["type"] == "BlockStored":
                assert ev["medium"] == "GPU"
                assert len(ev["token_ids"]) in (0, len(ev["block_hashes"]) * ev["block_size"])
                self.names.update((ev["group_idx"], h) for h in ev["block_hashes"])
            elif ev["type"] == "BlockRemoved":
                self.names.difference_update((ev["group_idx"], h) for h in ev["block_hashes"])
            else:
                self.names.clear()


def spec_names(pool: spec.BlockPool) -> set[tuple[int, int]]:
    return {(g, int(block_hash(k))) for g, k in pool._pages_named}


def test_a_stored_event_is_a_vllm_block_stored_map_in_field_order() -> None:
    key, parent = bytes(range(32)), bytes(range(1, 33))
    layout = [(16, "full_attention", None), (4, "sliding_window", 8)]
    events = [
        ("stored", "GPU", 1, (key,), parent, 2),
        ("removed", "GPU", 0, (key,), None, None),
        ("cleared", "GPU", None, (), None, None),
    ]
    maps = to_vllm_events(events, layout, token_ids=list(range(100, 112)))
    payload = msgpack.unpackb(encode_batch(maps, 3, ts=1.5), raw=False)
    assert payload == [
        1.5,
        [
            {
                "type": "BlockStored",
                "block_hashes": [int.from_bytes(key[-8:], "big")],
                "parent_block_hash": int.from_bytes(parent[-8:], "big"),
                "token_ids": [108, 109, 110, 111],
                "block_size": 4,
                "lora_id": None,
                "medium": "GPU",
                "lora_name": None,
                "group_idx": 1,
                "kv_cache_spec_kind": "sliding_window",
                "kv_cache_spec_sliding_window": 8,
            },
            {
                "type": "BlockRemoved",
                "block_hashes": [0x18191A1B1C1D1E1F],
                "medium": "GPU",
                "group_idx": 0,
            },
            {"type": "AllBlocksCleared"},
        ],
        3,
    ]
    assert list(payload[1][0]) == ["type", *STORED_FIELDS[:7], *STORED_FIELDS[8:]]


def test_full_keys_are_sent_as_bytes_when_int_hashes_are_off() -> None:
    key = bytes(range(32))
    maps = to_vllm_events(
        [("stored", "GPU", 0, (key,), None, 0)], [(16, "mamba", None)], int_block_hashes=False
    )
    assert maps[0]["block_hashes"] == [key]
    assert maps[0]["token_ids"] == []
    assert "kv_cache_spec_sliding_window" not in maps[0]


def test_too_few_token_ids_for_a_stored_event_is_an_error() -> None:
    with pytest.raises(ValueError, match="token_ids"):
        to_vllm_events(
            [("stored", "GPU", 0, (bytes(32),), None, 1)],
            [(4, "full_attention", None)],
            token_ids=[1, 2, 3, 4],
        )


def subscribe(endpoint: str, topic: bytes) -> zmq.Socket:
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.set_hwm(100_000)
    sub.setsockopt(zmq.SUBSCRIBE, topic)
    sub.connect(endpoint)
    return sub


def receive(sub: zmq.Socket, topic: bytes, timeout_ms: int = 10_000) -> Decoded:
    assert sub.poll(timeout_ms), "no message from the publisher in time"
    return decode(sub.recv_multipart(), topic)


def handshake(pub: KVEventPublisher, sub: zmq.Socket, topic: bytes) -> RouterIndex:
    """Empty batches until the subscription is live (bounded); the index starts there."""
    index = RouterIndex()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pub.publish([])
        if sub.poll(100):
            index.apply(decode(sub.recv_multipart(), topic))
            while sub.poll(100):  # handshake batches still on the way
                index.apply(decode(sub.recv_multipart(), topic))
            return index
    raise AssertionError("the subscription did not come up within 20 s")


def test_a_dropped_message_shows_as_a_gap_in_the_sequence() -> None:
    topic = b"kv"
    with KVEventPublisher("tcp://127.0.0.1:0", [livetail.GroupSpec("full", 4)], topic="kv") as pub:
        sub = subscribe(pub.endpoint, topic)
        try:
            index = handshake(pub, sub, topic)
            first = pub.next_sequence
            for _ in range(3):
                pub.publish([])
            index.apply(receive(sub, topic))
            receive(sub, topic)  # lost on the way to the router
            index.apply(receive(sub, topic))
            assert index.gaps == [(first + 1, first + 1)]
        finally:
            sub.close(linger=0)


def test_a_router_rebuilds_the_pools_names_from_the_wire() -> None:
    """An engine-like workload over a real loopback socket: shared prompts, hits, eviction."""
    rng = random.Random(11)
    topic = b"kv-events"
    layouts = [("full", 16, None, False), ("sliding", 4, 8, True)]
    sides = []
    for mod in (livetail, spec):
        specs = [mod.GroupSpec(k, b, w, live_tail_alloc=lt) for k, b, w, lt in layouts]
        sides.append(mod.Coordinator(specs, mod.BlockPool(40, events=True)))
    native, model = sides
    systems = [[rng.randrange(50_000) for _ in range(64)] for _ in range(3)]
    with KVEventPublisher("tcp://127.0.0.1:0", native.specs, topic="kv-events") as pub:
        sub = subscribe(pub.endpoint, topic)
        try:
            index = handshake(pub, sub, topic)
            hits = 0
            for req in range(40):
                prompt = rng.choice(systems) + [
                    rng.randrange(50_000) for _ in range(rng.randrange(8, 80))
                ]
                keys = livetail.page_keys(prompt, 4)
                for c in sides:
                    ts = c.new_tables()
                    match = c.match_prefix(keys)
                    c.claim(ts, match)
                    done = match.num_tokens
                    hits += done if c is native else 0
                    while done < len(prompt):
                        n = min(32, len(prompt) - done)
                        assert c.acquire(ts, n)
                        done += n
                        c.cache_full_blocks(ts, keys, done)
                        c.reclaim_expired(ts, done)
                    c.free(ts)
                events = native.pool.take_events()
                assert events == model.pool.take_events()
                pub.publish(events, token_ids=prompt)
                index.apply(receive(sub, topic))
                if req % 10 == 9:  # checkpoint
                    assert index.names == spec_names(model.pool)
            st = native.stats()
            assert st["names_removed"] > 0 and hits > 0  # the workload evicted and hit
            assert index.names == spec_names(model.pool)
            assert len(index.names) == st["num_names"]
            assert index.gaps == []
        finally:
            sub.close(linger=0)


@pytest.mark.parametrize("missing", ["zmq", "msgpack"])
def test_publisher_without_the_events_extra_says_how_to_install_it(
    missing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(__import__("sys").modules, missing, None)  # as if not installed
    package = {"zmq": "pyzmq"}.get(missing, missing)
    with pytest.raises(ImportError, match=rf"needs {package} .*pip install 'livetail\[events\]'"):
        KVEventPublisher("tcp://127.0.0.1:0", [spec.GroupSpec("full", 4)])
    if missing == "msgpack":
        with pytest.raises(ImportError, match=r"pip install 'livetail\[events\]'"):
            encode_batch([])
