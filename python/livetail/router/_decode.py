"""Event batches (vLLM's KV-event encoding) checked and turned into per-key arrays."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ._hashes import _hash_array, _int_hashes
from ._layout import _ALL_TIERS, _MAX_GROUPS, _TIER_BITS, GroupLayout, _as_layout

# Layouts of stored events seen before, by (block_size, kind, window) of exact types int,
# str, int or None: a batch's events mostly repeat a few, and _as_layout costs per event.
_SEEN_LAYOUTS: dict[tuple[int, str, int | None], GroupLayout] = {}


def _events_of(batch: object) -> list[Any]:
    if isinstance(batch, (bytes, bytearray, memoryview)):
        import msgpack  # type: ignore[import-untyped]

        try:
            batch = msgpack.unpackb(batch, raw=False, strict_map_key=False)
        except Exception as e:  # msgpack's errors have no common base but Exception
            raise ValueError(f"batch: not a msgpack payload ({e})") from None
    if not isinstance(batch, (list, tuple)) or len(batch) not in (2, 3):
        raise ValueError("batch must be [ts, events, data_parallel_rank]")
    events = batch[1]
    if not isinstance(events, (list, tuple)):
        raise ValueError("batch: events must be a list")
    return list(events)


# One run of events between clears: (tiers cleared before it or None, hashes, groups, tier
# bits, stored?) with one entry per key, the set of its groups, and (tier bit, stored?) if
# every event has the same (the usual batch), else None.
_Segment = tuple[
    "int | None",
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    set[int],
    "tuple[int, bool] | None",
]


def _plan(events: list[Any], layout: list[GroupLayout | None], fixed: bool) -> list[_Segment]:
    """Validates a batch and turns it into per-key arrays; learns layouts into ``layout``."""
    segments: list[_Segment] = []
    clear: int | None = None
    hashes: list[np.ndarray] = []
    ints: list[int] = []  # integer hashes of the events since the last array: one conversion
    meta: list[tuple[int, int, bool, int]] = []  # (group, tier bit, stored?, keys)

    def flush() -> None:
        if ints:
            hashes.append(_int_hashes(ints))
            ints.clear()

    def close() -> None:
        flush()
        if meta or clear is not None:
            counts = [m[3] for m in meta]
            h = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
            kinds = {(m[1], m[2]) for m in meta}
            segments.append(
                (
                    clear,
                    h,
                    np.repeat(np.array([m[0] for m in meta], np.int64), counts),
                    np.repeat(np.array([m[1] for m in meta], np.uint8), counts),
                    np.repeat(np.array([m[2] for m in meta], bool), counts),
                    {m[0] for m in meta},
                    kinds.pop() if len(kinds) == 1 else None,
                )
            )

    for i, ev in enumerate(events):
        if type(ev) is not dict and not isinstance(ev, Mapping):
            raise ValueError(f"events[{i}]: an event must be a map (vLLM's map encoding)")
        kind = ev.get("type")
        if kind == "AllBlocksCleared":
            close()
            medium = ev.get("medium")
            # vLLM's AllBlocksCleared has no medium: it clears every tier of the engine.
            clear = _ALL_TIERS if medium is None else _TIER_BITS.get(medium, 0)
            hashes, meta = [], []
            continue
        if kind not in ("BlockStored", "BlockRemoved"):
            raise ValueError(f"events[{i}]: unknown event type {kind!r}")
        hs = ev.get("block_hashes")
        if not isinstance(hs, list):
            raise ValueError(f"events[{i}]: block_hashes must be a list")
        g = ev.get("group_idx")
        g = 0 if g is None else g
        if type(g) is not int or not 0 <= g < _MAX_GROUPS:
            raise ValueError(f"events[{i}]: group_idx must be an int in [0, {_MAX_GROUPS})")
        if fixed and g >= len(layout):
            raise ValueError(f"events[{i}]: group {g} is outside the engine's layout")
        medium = ev.get("medium")
        if not (medium is None or isinstance(medium, str)):
            raise ValueError(f"events[{i}]: medium must be a string or None")
        bit = _TIER_BITS.get(medium, 0)
        if kind == "BlockStored":
            kind_name = ev.get("kv_cache_spec_kind")
            spec = (
                ev.get("block_size"),
                "full_attention" if kind_name is None else kind_name,
                ev.get("kv_cache_spec_sliding_window"),
            )
            usual = (
                type(spec[0]) is int
                and type(spec[1]) is str
                and (spec[2] is None or type(spec[2]) is int)
            )
            seen = _SEEN_LAYOUTS.get(spec) if usual else None  # type: ignore[arg-type]
            if seen is None:
                seen = _as_layout(spec, f"events[{i}]")
                if usual and len(_SEEN_LAYOUTS) < 4096:
                    _SEEN_LAYOUTS[spec] = seen  # type: ignore[index]
            got = seen
            while len(layout) <= g:
                layout.append(None)
            known = layout[g]
            if known is None:
                layout[g] = got
            elif got[1] == "chunked" and got[2] is None and known[:2] == got[:2]:
                pass  # vLLM's events carry no chunk size: the registered one stands
            elif known != got:
                raise ValueError(f"events[{i}]: group {g} is {got}, known as {known}")
        if bit and hs and set(map(type, hs)) == {int}:
            ints.extend(hs)  # converted (and range-checked) with the segment's other ints
        else:
            arr = _hash_array(hs)
            if bit == 0 or not len(arr):
                continue  # a tier that does not count (section 10), or nothing named
            flush()
            hashes.append(arr)
        while len(layout) <= g:
            layout.append(None)
        meta.append((g, bit, kind == "BlockStored", len(hs)))
    close()
    return segments
