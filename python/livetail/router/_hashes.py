"""64-bit hashes: of livetail's 32-byte keys (queries) and of block hashes off the wire."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _native


def key_hashes(keys: Sequence[bytes]) -> np.ndarray:
    """The 64-bit hashes (uint64) of 32-byte keys: each key's low 8 bytes, big-endian."""
    if _native.NATIVE:
        got = _native.key_hashes(keys)  # None: not all bytes of 32, see below
        if got is not None:
            return got
    if not isinstance(keys, (list, tuple)):
        raise TypeError("keys must be a list of 32-byte bytes")
    if not keys:
        return np.zeros(0, np.uint64)
    try:
        joined = b"".join(keys)
    except TypeError:
        raise TypeError("keys must be bytes objects") from None
    if len(joined) != 32 * len(keys) or min(map(len, keys)) != 32:
        raise ValueError("every key must be 32 bytes")
    return np.frombuffer(joined, ">u8").reshape(-1, 4)[:, 3].astype(np.uint64)


def _hash_array(hashes: list[Any]) -> np.ndarray:
    """Block hashes as they come off the wire (ints or bytes) -> uint64 low 64 bits."""
    if not hashes:
        return np.zeros(0, np.uint64)
    types = set(map(type, hashes))
    if types == {int}:
        return _int_hashes(hashes)
    if types == {bytes}:
        if set(map(len, hashes)) == {32}:
            return np.frombuffer(b"".join(hashes), ">u8").reshape(-1, 4)[:, 3].astype(np.uint64)
        if min(map(len, hashes)) == 0:
            raise ValueError("block_hashes: an empty bytes hash")
        return np.array([int.from_bytes(h[-8:], "big") for h in hashes], dtype=np.uint64)
    raise ValueError("block_hashes: every hash must be an int or bytes, one form per event")


def _int_hashes(hashes: list[int]) -> np.ndarray:
    try:
        # numpy < 2 wraps a negative int into uint64 instead of raising: check it first.
        if min(hashes) >= 0:
            return np.array(hashes, dtype=np.uint64)
    except OverflowError:
        pass
    raise ValueError("block_hashes: an integer hash outside [0, 2**64)")
