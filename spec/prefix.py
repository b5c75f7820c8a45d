"""Prefix caching (semantics section 8): page keys and the result of a match."""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ._args import _is_bool, bounded

if TYPE_CHECKING:
    from .coordinator import Coordinator

KEY_BYTES = 32
TOKEN_MAX = 2**32 - 1

# A page's name: (group index, key of the page's last base page).
Name = tuple[int, bytes]


def _token(t: object) -> int:
    """A token id as an int: bool (numpy's too, which numpy < 2.3 lets index) is not one."""
    if _is_bool(t):
        raise TypeError(f"token ids must be integers, not {type(t).__name__}")
    return operator.index(t)  # type: ignore[arg-type]


def page_keys(tokens: Sequence[int], base_block_size: int, salt: bytes = b"") -> list[bytes]:
    """One 32-byte key per full base page: SHA-256(previous key || tokens as LE u32 || salt).

    Page 0 chains from an empty key; a partial last page gets no key.
    """
    base = bounded("base_block_size", base_block_size, 1)
    if not isinstance(salt, (bytes, bytearray, memoryview)):
        raise TypeError(f"salt must be bytes, not {type(salt).__name__}")
    salt = bytes(salt)
    toks = [_token(t) for t in tokens]
    for t in toks:
        if not 0 <= t <= TOKEN_MAX:
            raise ValueError(f"token ids must be in [0, {TOKEN_MAX}], got {t}")
    keys: list[bytes] = []
    prev = b""
    for j in range(len(toks) // base):
        page = b"".join(t.to_bytes(4, "little") for t in toks[j * base : (j + 1) * base])
        prev = hashlib.sha256(prev + page + salt).digest()
        keys.append(prev)
    return keys


def check_token_ids(token_ids: object, num_tokens: int) -> list[int]:
    """A request's token ids from position 0, at least num_tokens of them, each a uint32."""
    if isinstance(token_ids, (str, bytes, bytearray)) or not isinstance(token_ids, Iterable):
        raise TypeError(f"token_ids must be a sequence of ints, not {type(token_ids).__name__}")
    try:
        toks = [_token(t) for t in token_ids]
    except TypeError as e:
        raise TypeError(f"token_ids: {e}") from None
    for t in toks:
        if not 0 <= t <= TOKEN_MAX:
            raise ValueError(f"token_ids: token ids must be in [0, {TOKEN_MAX}], got {t}")
    if len(toks) < num_tokens:
        raise ValueError(
            f"token_ids holds {len(toks)} token ids, fewer than num_tokens={num_tokens}"
        )
    return toks


def check_keys(keys: object) -> list[bytes]:
    """Keys must be distinct 32-byte bytes objects (a chain guarantees both): a wrong type
    (not a list or tuple, an element not bytes) is a TypeError, a wrong length or a repeat a
    ValueError."""
    if not isinstance(keys, (list, tuple)):
        raise TypeError(f"keys must be a list or tuple of 32-byte bytes, not {type(keys).__name__}")
    out: list[bytes] = []
    for i, k in enumerate(keys):
        if not isinstance(k, bytes):
            raise TypeError(f"keys[{i}] must be a bytes object, not {type(k).__name__}")
        if len(k) != KEY_BYTES:
            raise ValueError(f"keys[{i}] must be a bytes object of length 32, got {len(k)}")
        out.append(k)
    if len(set(out)) != len(out):
        raise ValueError("keys must be pairwise distinct")
    return out


class PrefixMatch:
    """A read-only lookup result: num_tokens and, per group, a page id per slot (0 = hole)."""

    def __init__(
        self,
        coordinator: Coordinator,
        num_tokens: int,
        pages: list[list[int]],
        names: list[list[Name | None]],
        host_pages: list[list[int]] | None = None,
        parents: list[list[bytes | None]] | None = None,
    ) -> None:
        self._coordinator = coordinator
        self._num_tokens = num_tokens
        self._pages = pages
        # The name each present slot was matched under (device or host); None for holes.
        self._names = names
        # Section 10: per group, the host page of each slot served from the host, else 0.
        self._host_pages = host_pages if host_pages is not None else [[0] * len(p) for p in pages]
        # Per group, the key of slot j - 1 (for a loaded page's stored event), None at slot 0.
        self._parents = parents if parents is not None else [[None] * len(p) for p in pages]

    @property
    def num_tokens(self) -> int:
        return self._num_tokens

    @property
    def pages(self) -> list[list[int]]:
        return [list(p) for p in self._pages]

    @property
    def host_pages(self) -> list[list[int]]:
        """Per group, the host page of each slot served from the host tier, else 0."""
        return [list(p) for p in self._host_pages]

    def __repr__(self) -> str:
        real = sum(1 for g in self._pages for p in g if p)
        return f"PrefixMatch(num_tokens={self._num_tokens}, real_pages={real})"
