"""Publish a pool's events in the wire format of vLLM's KV events, for cluster routers.

Prefix-aware routers (llm-d's KV-cache indexer, Dynamo's KV router) learn which engine
holds which prefix from the KV events every engine publishes. ``KVEventPublisher`` sends
livetail's events (``BlockPool(..., events=True)``, ``pool.take_events()``) in the encoding
of vLLM's ``vllm/distributed/kv_events.py`` (map-encoded events, vLLM PR #42892):

- ZMQ PUB, one multipart message per batch: ``[topic, sequence, payload]``, the sequence an
  8-byte big-endian counter from 0 (a subscriber detects dropped messages by a gap);
- payload: the msgpack array ``[timestamp, events, data_parallel_rank]``;
- each event a msgpack map whose ``"type"`` is the event class name, fields in vLLM's order
  (fields equal to their default ``None`` are omitted, as msgspec's ``omit_defaults`` does):
  ``BlockStored``: block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
  lora_name, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window;
  ``BlockRemoved``: block_hashes, medium, group_idx; ``AllBlocksCleared``: no field.

Block hashes are vLLM's ``ExternalBlockHash`` in its default form (an ``int``: the key's last
8 bytes, big-endian, unsigned) or, with ``int_block_hashes=False``, the 32-byte keys.

Needs the ``events`` extra (``pip install livetail[events]``: pyzmq, msgpack);
``encode_batch`` needs msgpack only.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "KIND_NAMES",
    "KVEventPublisher",
    "block_hash",
    "encode_batch",
    "group_layout",
    "to_vllm_events",
]

# livetail group kind -> vLLM's KVCacheSpecKind value.
KIND_NAMES = {"full": "full_attention", "sliding": "sliding_window", "state": "mamba"}

# One group as vLLM describes it: (block_size, kv_cache_spec_kind, sliding window or None).
GroupInfo = tuple[int, str, "int | None"]


def group_layout(specs: Iterable[Any]) -> list[GroupInfo]:
    """(block_size, kind name, sliding window) per group of a coordinator's ``specs``."""
    out: list[GroupInfo] = []
    for s in specs:
        kind = s.kind
        if kind not in KIND_NAMES:
            raise ValueError(f"specs: unknown group kind {kind!r}")
        window = s.sliding_window if kind == "sliding" else None
        out.append((int(s.block_size), KIND_NAMES[kind], window))
    return out


def block_hash(key: bytes, int_block_hashes: bool = True) -> int | bytes:
    """A key as vLLM's ExternalBlockHash: the low 64 bits of its big-endian value, or itself."""
    if not isinstance(key, bytes) or len(key) != 32:
        raise ValueError("key must be 32 bytes")
    return int.from_bytes(key[-8:], "big") if int_block_hashes else key


def to_vllm_events(
    events: Iterable[Sequence[Any]],
    layout: Sequence[GroupInfo],
    *,
    token_ids: Sequence[int] | None = None,
    int_block_hashes: bool = True,
    lora_name: str | None = None,
) -> list[dict[str, Any]]:
    """livetail events (kind, tier, group, keys, parent, first_slot, token_ids) as vLLM
    event maps (6-tuples without ``token_ids`` are accepted too).

    A stored event's own ``token_ids`` (the names carried them: ``cache_full_blocks(...,
    token_ids=...)``) are sent as they are. For a stored event without tokens, ``token_ids``
    here is the prompt whose naming produced the events, if the engine has it at hand: the
    event then carries the tokens of its slots (``first_slot * block_size`` on,
    ``block_size`` per key). Without either, ``token_ids`` is sent empty.
    """
    out: list[dict[str, Any]] = []
    for ev in events:
        kind, tier, group = ev[0], ev[1], ev[2]
        if kind == "cleared":
            out.append({"type": "AllBlocksCleared"})
            continue
        if not isinstance(group, int) or not 0 <= group < len(layout):
            raise ValueError(f"events: group {group!r} is not in the layout")
        keys = ev[3]
        hashes = [block_hash(k, int_block_hashes) for k in keys]
        if kind == "removed":
            out.append(
                {"type": "BlockRemoved", "block_hashes": hashes, "medium": tier, "group_idx": group}
            )
            continue
        if kind != "stored":
            raise ValueError(f"events: unknown kind {kind!r}")
        parent, first = ev[4], ev[5]
        size, spec_kind, window = layout[group]
        own = ev[6] if len(ev) > 6 else ()
        tokens: list[int] = [int(t) for t in own]
        if not tokens and token_ids is not None:
            lo, hi = first * size, (first + len(keys)) * size
            if hi > len(token_ids):
                raise ValueError(f"token_ids: {len(token_ids)} tokens, the event needs {hi}")
            tokens = [int(t) for t in token_ids[lo:hi]]
        m: dict[str, Any] = {
            "type": "BlockStored",
            "block_hashes": hashes,
            "parent_block_hash": None if parent is None else block_hash(parent, int_block_hashes),
            "token_ids": tokens,
            "block_size": size,
            "lora_id": None,
            "medium": tier,
            "lora_name": lora_name,
            "group_idx": group,
            "kv_cache_spec_kind": spec_kind,
        }
        if window is not None:
            m["kv_cache_spec_sliding_window"] = window
        out.append(m)
    return out


def encode_batch(
    events: Sequence[Mapping[str, Any]], data_parallel_rank: int = 0, ts: float | None = None
) -> bytes:
    """The msgpack payload ``[ts, events, data_parallel_rank]`` of one batch."""
    import msgpack  # type: ignore[import-untyped]

    stamp = time.time() if ts is None else float(ts)
    payload: bytes = msgpack.packb([stamp, list(events), data_parallel_rank], use_bin_type=True)
    return payload


class KVEventPublisher:
    """A ZMQ PUB socket that sends each ``publish`` call as one batch, in call order.

    ``endpoint``: an address to bind (``tcp://*:5557``, ``tcp://127.0.0.1:0`` for an
    ephemeral port: read ``endpoint`` afterwards). ``specs``: the coordinator's group specs
    (block size, kind and window of each group go into every stored event). Sending is
    synchronous, in the caller's thread.
    """

    def __init__(
        self,
        endpoint: str,
        specs: Iterable[Any],
        *,
        topic: str = "",
        data_parallel_rank: int = 0,
        int_block_hashes: bool = True,
        lora_name: str | None = None,
        hwm: int = 100_000,
    ) -> None:
        import zmq

        self._layout = group_layout(specs)
        self._topic = topic.encode("utf-8")
        self._rank = data_parallel_rank
        self._int = int_block_hashes
        self._lora = lora_name
        self._seq = 0
        self._sock: Any = zmq.Context.instance().socket(zmq.PUB)
        self._sock.set_hwm(hwm)
        self._sock.bind(endpoint)
        self.endpoint: str = self._sock.getsockopt_string(zmq.LAST_ENDPOINT)

    @property
    def next_sequence(self) -> int:
        """The sequence number the next batch will carry."""
        return self._seq

    def publish(
        self,
        events: Iterable[Sequence[Any]],
        *,
        token_ids: Sequence[int] | None = None,
        ts: float | None = None,
    ) -> int:
        """Sends the events as one batch; returns its sequence number."""
        maps = to_vllm_events(
            events,
            self._layout,
            token_ids=token_ids,
            int_block_hashes=self._int,
            lora_name=self._lora,
        )
        payload = encode_batch(maps, self._rank, ts)
        seq = self._seq
        self._sock.send_multipart([self._topic, seq.to_bytes(8, "big"), payload])
        self._seq += 1
        return seq

    def close(self) -> None:
        self._sock.close(linger=0)

    def __enter__(self) -> KVEventPublisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
