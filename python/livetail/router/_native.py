"""The index's loops in the native module (``livetail._core``, native/src/router.cpp).

``NATIVE`` is False where the native module does not import (a foreign-platform install):
the numpy loops of ``_numpy`` then give the same answers. ``lookup``, ``place`` and
``answer`` have the signatures of theirs.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from ._layout import INT32_MAX, _chunk, _Engine, _resume

try:
    from .. import _core

    NATIVE = True
except ImportError:  # a foreign-platform install: numpy alone gives the same answers
    NATIVE = False


def key_hashes(keys: Sequence[bytes]) -> np.ndarray | None:
    """``key_hashes`` for a list or tuple of 32-byte bytes objects, else None (numpy decides)."""
    got: np.ndarray | None = _core._router_key_hashes(keys)
    return got


def lookup(table: np.ndarray, bits: int, h: np.ndarray) -> np.ndarray:
    """Row of each hash, 0 where the table has none."""
    rows: np.ndarray = _core._router_lookup(table, bits, np.ascontiguousarray(h))
    return rows


def place(table: np.ndarray, bits: int, h: np.ndarray, rows: np.ndarray) -> None:
    """Puts distinct hashes the table lacks into free slots (linear probing)."""
    _core._router_place(table, bits, h, rows.astype(np.int32, copy=False))


def answer(
    table: np.ndarray,
    bits: int,
    presence: np.ndarray,
    h: np.ndarray,
    ready: list[_Engine],
    first_chunk: int,
) -> dict[Hashable, int]:
    """The greatest supported boundary of each engine in ``ready`` (engines of one base whose
    layout is known) for the key hashes ``h``: native probes and boundary search, every engine
    in one call per round (the rows checked once, one crossing into C++); keys are probed
    ``first_chunk`` first, then 4x more while some engine may go on.
    """
    n = len(h)
    todo = []
    out: dict[Hashable, int] = {}
    for e in ready:
        if e.align > INT32_MAX:
            out[e.id] = 0  # not even one boundary fits in 2**31 - 1 tokens
            continue
        if e.rules is None:
            e.rules = np.array(
                [(lay[0], _resume(lay), c, _chunk(lay)) for lay, c in zip(e.groups, e.cols) if lay],
                np.int64,
            ).reshape(-1, 4)
        todo.append(e)
    # As in the numpy loops: keys in growing chunks while some engine's full groups hold
    # every slot so far (an engine without a full group may match anywhere: all keys). An
    # engine whose full groups miss a slot has its final answer.
    has_full = all(any(lay is not None and lay[1] == "full" for lay in e.groups) for e in todo)
    c = min(n, first_chunk) if has_full else n
    h = np.ascontiguousarray(h)
    rows = _core._router_lookup(table, bits, h[:c])
    while todo:
        going = []
        rules = np.concatenate([e.rules for e in todo])
        ends = np.cumsum([len(e.rules) for e in todo], dtype=np.int64)
        aligns = np.array([e.align for e in todo], np.int64)
        got = _core._router_longest_many(presence, rows, todo[0].base, aligns, rules, ends)
        for e, (t, through) in zip(todo, got):
            out[e.id] = t
            if through and c < n:
                going.append(e)
        if not going:
            break
        nxt = min(n, 4 * c)
        rows = np.concatenate((rows, _core._router_lookup(table, bits, h[c:nxt])))
        c, todo = nxt, going
    return out
