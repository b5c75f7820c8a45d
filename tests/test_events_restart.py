"""Semantics 13.8 over loopback ZMQ: a publisher's batch 0 begins with AllBlocksCleared, and
an index that knows the engine takes a batch 0 as a restart only when it begins with a
clear (names and gaps dropped, the batch applied), as a batch seen before otherwise. And
the publisher's bad input: an invalid port, specs that are not group specs, malformed
events, a publish after close."""

from __future__ import annotations

from typing import Any

import livetail
import msgpack
import pytest
from livetail.events import KVEventPublisher, encode_batch, replay_batches
from livetail.router import PrefixIndex

SPECS = [livetail.GroupSpec("full", 4)]
CLEAR = {"type": "AllBlocksCleared"}


def _key(i: int) -> bytes:
    return bytes([i]) * 32


def _hash(i: int) -> int:
    return int.from_bytes(bytes([i]) * 8, "big")


def _stored(*ids: int) -> tuple[Any, ...]:
    return ("stored", "GPU", 0, tuple(_key(i) for i in ids), None, 0)


def _events(payload: bytes) -> list[dict[str, Any]]:
    _, events, _ = msgpack.unpackb(payload, raw=False)
    return list(events)


def _publisher() -> KVEventPublisher:
    return KVEventPublisher("tcp://127.0.0.1:0", SPECS, replay_endpoint="tcp://127.0.0.1:0")


def test_batch_0_begins_with_a_clear_and_no_other_batch_gets_one() -> None:
    with _publisher() as pub:
        assert pub.replay_endpoint is not None
        assert pub.publish([_stored(1)]) == 0
        assert pub.publish([_stored(2)]) == 1
        assert pub.publish([]) == 2
        got = replay_batches(pub.replay_endpoint, 0)
    assert [s for s, _ in got] == [0, 1, 2]
    first, second, third = (_events(p) for _, p in got)
    assert [e["type"] for e in first] == ["AllBlocksCleared", "BlockStored"]
    assert first[0] == CLEAR and first[1]["block_hashes"] == [_hash(1)]
    assert [e["type"] for e in second] == ["BlockStored"]
    assert third == []


def test_a_batch_0_that_already_begins_with_a_clear_gets_no_second_one() -> None:
    with _publisher() as pub:
        assert pub.replay_endpoint is not None
        pub.publish([("cleared", "GPU", -1, (), None, None), _stored(3)])
        [(seq, payload)] = replay_batches(pub.replay_endpoint, 0)
    assert seq == 0
    assert [e["type"] for e in _events(payload)] == ["AllBlocksCleared", "BlockStored"]


def test_an_empty_batch_0_is_the_clear_alone() -> None:
    with _publisher() as pub:
        assert pub.replay_endpoint is not None
        pub.publish([])
        [(_, payload)] = replay_batches(pub.replay_endpoint, 0)
    assert _events(payload) == [CLEAR]


def _follow(index: PrefixIndex, pub: KVEventPublisher, start: int = 0) -> list[bool]:
    assert pub.replay_endpoint is not None
    return [index.apply("engine", p, s) for s, p in replay_batches(pub.replay_endpoint, start)]


def test_a_restarted_engine_over_loopback_replaces_what_the_index_held() -> None:
    index = PrefixIndex()
    with _publisher() as run1:
        run1.publish([_stored(1, 2)])
        run1.publish([_stored(3)])
        run1.publish([_stored(4)])
        assert _follow(index, run1) == [True, True, True]
    assert index.expected_sequence("engine") == 3
    assert sorted(h for _, h in index.names("engine")) == [_hash(i) for i in (1, 2, 3, 4)]
    # A loss recorded before the restart (applied past with allow_gap) goes with it.
    index.apply("engine", encode_batch([]), 5, allow_gap=True)
    assert index.gaps("engine") == [(3, 4)]
    # The engine restarts (a new process, a fresh pool, a new publisher from 0).
    coord = livetail.Coordinator(SPECS, livetail.BlockPool(16, events=True))
    tokens = list(range(1, 9))
    keys = livetail.page_keys(tokens, 4)
    with _publisher() as run2:
        ts = coord.new_tables()
        assert coord.acquire(ts, 8)
        coord.cache_full_blocks(ts, keys, 8)
        assert run2.publish(coord.pool.take_events()) == 0
        assert _follow(index, run2) == [True]
        assert index.expected_sequence("engine") == 1
        assert index.gaps("engine") == []
        want = {(0, int.from_bytes(k[-8:], "big")): {"GPU"} for k in keys}
        assert index.names("engine") == want
        assert index.match(tokens) == {"engine": 8}
        # The run goes on: batch 1 follows batch 0 as usual.
        coord.free(ts)
        assert coord.pool.reset_names()
        assert run2.publish(coord.pool.take_events()) == 1
        assert _follow(index, run2, 1) == [True]
        assert index.names("engine") == {}
        assert index.expected_sequence("engine") == 2


def test_a_batch_0_without_a_clear_from_a_known_engine_is_a_duplicate() -> None:
    index = PrefixIndex()
    stored = [[0.0, [dict(_map(i))], 0] for i in (1, 2, 3)]
    for seq, batch in enumerate(stored):
        assert index.apply("engine", batch, seq)
    before = index.names("engine")
    assert sorted(h for _, h in before) == [_hash(i) for i in (1, 2, 3)]
    # vLLM's own publisher does not begin batch 0 with a clear: a batch 0 again is one seen.
    assert index.apply("engine", [0.0, [_map(9)], 0], 0) is False
    assert index.apply("engine", encode_batch([_map(9)]), 0) is False
    # A clear that is not the first event does not make a restart either.
    assert index.apply("engine", [0.0, [_map(9), CLEAR], 0], 0) is False
    # A clear of one tier only is not a restart.
    assert index.apply("engine", [0.0, [dict(CLEAR, medium="GPU"), _map(9)], 0], 0) is False
    assert index.names("engine") == before
    assert index.expected_sequence("engine") == 3
    # Beginning with a clear it is the engine restarted.
    assert index.apply("engine", [0.0, [CLEAR, _map(9)], 0], 0) is True
    assert index.names("engine") == {(0, _hash(9)): {"GPU"}}
    assert index.expected_sequence("engine") == 1


def test_a_malformed_restart_batch_changes_nothing() -> None:
    index = PrefixIndex()
    index.apply("engine", [0.0, [_map(1)], 0], 0)
    index.apply("engine", [0.0, [_map(2)], 0], 1)
    before = index.names("engine")
    with pytest.raises(ValueError):
        index.apply("engine", [0.0, [CLEAR, {"type": "NoSuchEvent"}], 0], 0)
    assert index.names("engine") == before
    assert index.expected_sequence("engine") == 2


def test_a_new_engine_applies_batch_0_with_its_clear() -> None:
    index = PrefixIndex()
    assert index.apply("engine", [0.0, [CLEAR, _map(5)], 0], 0)
    assert index.names("engine") == {(0, _hash(5)): {"GPU"}}
    assert index.expected_sequence("engine") == 1


def _map(i: int) -> dict[str, Any]:
    return {
        "type": "BlockStored",
        "block_hashes": [_hash(i)],
        "parent_block_hash": None,
        "token_ids": [],
        "block_size": 4,
        "lora_id": None,
        "medium": "GPU",
        "lora_name": None,
    }


# -- the publisher's bad input --------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        ("tcp://127.0.0.1:99999", "endpoint: port 99999 of 'tcp://127.0.0.1:99999' is not in"),
        ("tcp://127.0.0.1:65536", "endpoint: port 65536 of 'tcp://127.0.0.1:65536' is not in"),
        ("tcp://127.0.0.1", "endpoint: 'tcp://127.0.0.1' has no port"),
        ("tcp://127.0.0.1:-1", "endpoint: 'tcp://127.0.0.1:-1' has no port"),
    ],
)
def test_an_invalid_port_is_refused_before_any_bind(endpoint: str, message: str) -> None:
    with pytest.raises(ValueError) as e:
        KVEventPublisher(endpoint, SPECS)
    assert str(e.value).startswith(message)
    with pytest.raises(ValueError, match="replay_endpoint: port 70000"):
        KVEventPublisher("tcp://127.0.0.1:0", SPECS, replay_endpoint="tcp://127.0.0.1:70000")


def test_the_highest_port_and_the_ephemeral_one_are_accepted() -> None:
    with KVEventPublisher("tcp://127.0.0.1:0", SPECS) as pub:
        assert pub.endpoint.startswith("tcp://127.0.0.1:")
        assert 0 < int(pub.endpoint.rsplit(":", 1)[1]) <= 65535


def test_an_endpoint_that_is_not_a_str_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="endpoint must be a str, not int"):
        KVEventPublisher(5557, SPECS)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ([1, 2], "specs[0] must be a GroupSpec, not int"),
        ([SPECS[0], "full"], "specs[1] must be a GroupSpec, not str"),
        (None, "specs must be a list of GroupSpec, not NoneType"),
        ("full", "specs must be a list of GroupSpec, not str"),
    ],
)
def test_specs_that_are_not_group_specs_are_a_type_error_naming_specs(
    specs: Any, message: str
) -> None:
    with pytest.raises(TypeError) as e:
        KVEventPublisher("tcp://127.0.0.1:0", specs)
    assert str(e.value) == message


@pytest.mark.parametrize(
    ("events", "error", "message"),
    [
        ([()], ValueError, "events[0] must be (kind, tier, group, keys, parent, first_slot["),
        ([_stored(1), ("stored",)], ValueError, "events[1] must be (kind, tier, group"),
        ([5], TypeError, "events[0] must be an event tuple, not int"),
        (None, TypeError, "events must be a list of event tuples, not NoneType"),
        ("stored", TypeError, "events must be a list of event tuples, not str"),
    ],
)
def test_malformed_events_are_refused_and_send_nothing(
    events: Any, error: type, message: str
) -> None:
    with _publisher() as pub:
        assert pub.replay_endpoint is not None
        with pytest.raises(error) as e:
            pub.publish(events)
        assert str(e.value).startswith(message)
        assert pub.next_sequence == 0
        assert replay_batches(pub.replay_endpoint, 0) == []


def test_publish_after_close_is_a_clear_error_and_close_twice_is_fine() -> None:
    pub = KVEventPublisher("tcp://127.0.0.1:0", SPECS)
    pub.publish([])
    pub.close()
    with pytest.raises(ValueError, match="^publisher is closed$"):
        pub.publish([_stored(1)])
    pub.close()
    assert pub.next_sequence == 1
