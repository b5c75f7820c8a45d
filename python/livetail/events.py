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

A publisher's first batch (sequence 0) begins with ``AllBlocksCleared`` (semantics 13.8): a
router that knows the engine from an earlier run of it sees the restart (sequence 0 again,
beginning with a clear) and drops what it held, where a batch 0 without a clear is one it
has seen (a replay that overlaps).

Block hashes are vLLM's ``ExternalBlockHash`` in its default form (an ``int``: the key's last
8 bytes, big-endian, unsigned) or, with ``int_block_hashes=False``, the 32-byte keys.

Replay (vLLM's protocol): with ``replay_endpoint``, the publisher keeps its last
``buffer_steps`` batches and serves them from a ZMQ ROUTER socket. A subscriber that saw a
gap in the sequence sends ``[b"", start as 8-byte big-endian]`` from a DEALER socket (a REQ
socket adds the empty frame itself) and receives ``[b"", topic, sequence, payload]`` for
every kept batch whose sequence is ``>= start``, in order, then the end marker
``[b"", b"", END_SEQ, b""]`` (``END_SEQ``: -1 as a signed 8-byte big-endian integer).
``replay_batches`` is such a subscriber. A request older than the buffer gets what the
buffer has: the first batch returned then has a sequence greater than ``start``, which is
how the subscriber tells that batches are lost for good.

Needs the ``events`` extra (``pip install livetail[events]``: pyzmq, msgpack);
``encode_batch`` needs msgpack only.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "END_SEQ",
    "KIND_NAMES",
    "KVEventPublisher",
    "block_hash",
    "encode_batch",
    "group_layout",
    "replay_batches",
    "to_vllm_events",
]


def _extra(module: str) -> Any:
    """A module of the ``events`` extra; an ImportError that says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        package = {"zmq": "pyzmq"}.get(module, module)
        raise ImportError(
            f"livetail.events needs {package} ({e}): pip install 'livetail[events]'",
            name=module,
        ) from e


# The replay's end marker in the sequence frame: -1 as a signed 8-byte big-endian integer.
END_SEQ = (-1).to_bytes(8, "big", signed=True)

# livetail group kind -> vLLM's KVCacheSpecKind value.
KIND_NAMES = {
    "full": "full_attention",
    "sliding": "sliding_window",
    "state": "mamba",
    "chunked": "chunked_local_attention",  # as vLLM, its events carry no chunk size
}

# One group as vLLM describes it: (block_size, kv_cache_spec_kind, sliding window or None).
GroupInfo = tuple[int, str, "int | None"]


def group_layout(specs: Iterable[Any]) -> list[GroupInfo]:
    """(block_size, kind name, sliding window) per group of a coordinator's ``specs``.

    TypeError naming ``specs`` (or the element) for anything but a sequence of group specs
    (objects with ``kind``, ``block_size`` and ``sliding_window``: ``GroupSpec``)."""
    if isinstance(specs, (str, bytes)) or not isinstance(specs, Iterable):
        raise TypeError(f"specs must be a list of GroupSpec, not {type(specs).__name__}")
    out: list[GroupInfo] = []
    for i, s in enumerate(specs):
        if not all(hasattr(s, a) for a in ("kind", "block_size", "sliding_window")):
            raise TypeError(f"specs[{i}] must be a GroupSpec, not {type(s).__name__}")
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
    if isinstance(events, (str, bytes)) or not isinstance(events, Iterable):
        raise TypeError(f"events must be a list of event tuples, not {type(events).__name__}")
    out: list[dict[str, Any]] = []
    for i, ev in enumerate(events):
        if not isinstance(ev, (tuple, list)):
            raise TypeError(f"events[{i}] must be an event tuple, not {type(ev).__name__}")
        if len(ev) not in (6, 7):
            raise ValueError(
                f"events[{i}] must be (kind, tier, group, keys, parent, first_slot[, "
                f"token_ids]), got {len(ev)} field(s)"
            )
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
    msgpack = _extra("msgpack")
    stamp = time.time() if ts is None else float(ts)
    payload: bytes = msgpack.packb([stamp, list(events), data_parallel_rank], use_bin_type=True)
    return payload


def _check_endpoint(name: str, endpoint: object) -> str:
    """A ZMQ address to bind; a TCP port outside [0, 65535] is a ValueError (libzmq would
    silently bind the port modulo 65536)."""
    if not isinstance(endpoint, str):
        raise TypeError(f"{name} must be a str, not {type(endpoint).__name__}")
    if endpoint.startswith("tcp://"):
        _, sep, port = endpoint[len("tcp://") :].rpartition(":")
        if not sep or not (port == "*" or (port.isdigit() and port.isascii())):
            raise ValueError(f"{name}: {endpoint!r} has no port (tcp://HOST:PORT, PORT or *)")
        if port != "*" and not 0 <= int(port) <= 65535:
            raise ValueError(f"{name}: port {port} of {endpoint!r} is not in [0, 65535]")
    return endpoint


class KVEventPublisher:
    """A ZMQ PUB socket that sends each ``publish`` call as one batch, in call order.

    ``endpoint``: an address to bind (``tcp://*:5557``, ``tcp://127.0.0.1:0`` for an
    ephemeral port: read ``endpoint`` afterwards). ``specs``: the coordinator's group specs
    (block size, kind and window of each group go into every stored event). Sending is
    synchronous, in the caller's thread.

    ``replay_endpoint``: an address to bind a ROUTER socket that serves the last
    ``buffer_steps`` batches by sequence number (vLLM's replay protocol, module docstring;
    read ``replay_endpoint`` afterwards for the bound address). A daemon thread answers the
    requests; ``close`` stops it.

    The first batch (sequence 0) begins with ``AllBlocksCleared``, added if the events do
    not begin with a clear: a restarted engine is visible to routers (semantics 13.8).
    ``publish`` after ``close`` is a ``ValueError``.
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
        replay_endpoint: str | None = None,
        buffer_steps: int = 10_000,
    ) -> None:
        zmq = _extra("zmq")
        _extra("msgpack")  # every publish encodes: missing, say so now, not at the first batch
        if type(buffer_steps) is not int or buffer_steps < 1:
            raise ValueError(f"buffer_steps must be an int >= 1, got {buffer_steps!r}")
        _check_endpoint("endpoint", endpoint)
        if replay_endpoint is not None:
            _check_endpoint("replay_endpoint", replay_endpoint)
        self._layout = group_layout(specs)
        self._closed = False
        self._topic = topic.encode("utf-8")
        self._rank = data_parallel_rank
        self._int = int_block_hashes
        self._lora = lora_name
        self._seq = 0
        ctx: Any = zmq.Context.instance()
        self._sock: Any = ctx.socket(zmq.PUB)
        self._sock.set_hwm(hwm)
        self._sock.bind(endpoint)
        self.endpoint: str = self._sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self._buffer: deque[tuple[int, bytes]] = deque(maxlen=buffer_steps)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._replay: Any = None
        self.replay_endpoint: str | None = None
        if replay_endpoint is not None:
            self._replay = ctx.socket(zmq.ROUTER)
            # Room for a whole replay and its end marker per waiting subscriber.
            self._replay.setsockopt(zmq.SNDHWM, 2 * (buffer_steps + 1))
            try:
                self._replay.bind(replay_endpoint)
            except zmq.ZMQError:
                self._replay.close(linger=0)
                self._sock.close(linger=0)
                raise
            self.replay_endpoint = self._replay.getsockopt_string(zmq.LAST_ENDPOINT)
            self._thread = threading.Thread(
                target=self._serve_replays, name="livetail-kv-replay", daemon=True
            )
            self._thread.start()

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
        """Sends the events as one batch; returns its sequence number.

        Batch 0 begins with ``AllBlocksCleared`` (added unless the events begin with a
        clear). Malformed events are a ``TypeError`` or ``ValueError`` and send nothing; a
        closed publisher is a ``ValueError``.
        """
        if self._closed:
            raise ValueError("publisher is closed")
        maps = to_vllm_events(
            events,
            self._layout,
            token_ids=token_ids,
            int_block_hashes=self._int,
            lora_name=self._lora,
        )
        seq = self._seq
        if seq == 0 and not (maps and maps[0]["type"] == "AllBlocksCleared"):
            maps.insert(0, {"type": "AllBlocksCleared"})  # a restart shows (13.8)
        payload = encode_batch(maps, self._rank, ts)
        self._sock.send_multipart([self._topic, seq.to_bytes(8, "big"), payload])
        self._seq += 1
        if self._replay is not None:
            with self._lock:
                self._buffer.append((seq, payload))
        return seq

    def _serve_replays(self) -> None:
        sock = self._replay
        while not self._stop.is_set():
            if not sock.poll(50):
                continue
            frames = sock.recv_multipart()
            if len(frames) != 3:
                continue  # not [identity, b"", start]: ignored, as vLLM's publisher does
            ident, _, start_bytes = frames
            start = int.from_bytes(start_bytes, "big")
            with self._lock:
                kept = [(s, p) for s, p in self._buffer if s >= start]
            for s, p in kept:
                sock.send_multipart([ident, b"", self._topic, s.to_bytes(8, "big"), p])
            sock.send_multipart([ident, b"", b"", END_SEQ, b""])

    def close(self) -> None:
        """Stops the replay thread and closes the sockets; a second close does nothing."""
        self._closed = True
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self._replay is not None:
            self._replay.close(linger=0)
            self._replay = None
        self._sock.close(linger=0)

    def __enter__(self) -> KVEventPublisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def replay_batches(
    replay_endpoint: str, start: int, *, timeout: float = 10.0
) -> list[tuple[int, bytes]]:
    """Asks a publisher's replay endpoint for its kept batches from ``start`` on.

    Returns ``(sequence, msgpack payload)`` pairs in order, up to the end marker. If the
    first sequence is greater than ``start`` (or the list is empty while the live stream is
    past ``start``), the batches in between are no longer kept. ``TimeoutError`` if the
    end marker does not come within ``timeout`` seconds.
    """
    zmq = _extra("zmq")

    if type(start) is not int or not 0 <= start < 2**63:
        raise ValueError(f"start must be an int in [0, 2**63), got {start!r}")
    sock: Any = zmq.Context.instance().socket(zmq.DEALER)
    try:
        sock.connect(replay_endpoint)
        sock.send_multipart([b"", start.to_bytes(8, "big")])
        deadline = time.monotonic() + timeout
        out: list[tuple[int, bytes]] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not sock.poll(int(left * 1000) + 1):
                raise TimeoutError(f"no end of replay from {replay_endpoint} in {timeout} s")
            frames = sock.recv_multipart()
            if len(frames) != 4 or frames[0] != b"":
                raise ValueError(f"replay: unexpected reply of {len(frames)} frames")
            if frames[2] == END_SEQ and frames[3] == b"":
                return out
            out.append((int.from_bytes(frames[2], "big"), frames[3]))
    finally:
        sock.close(linger=0)
