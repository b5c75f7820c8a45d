"""The differential machine's oracle, written from ``semantics.md`` alone.

Sections 2-5 slot by slot (which slots are live, the shape after an acquire, the pages an
acquire takes, the reclaim bound) and the prefix-cache keys of section 8 the machine computes
once for every implementation.  It never calls the spec, so a wrong spec variant cannot bend
it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ..trace import GroupGeometry

# --- the oracle: semantics.md sections 2-5, independent of the spec --------------------


@dataclass(frozen=True)
class GroupRule:
    """What the oracle needs of a group: kind, B, W (None: never reclaims), A."""

    kind: str
    B: int
    W: int | None
    A: int
    C: int | None = None  # a chunked group's chunk size (section 13.2)
    # A live-tail state group (section 13.5): 1 real slot per acquire, 2 with checkpoints.
    state_live: int = 0

    @staticmethod
    def of(g: GroupGeometry, align: int) -> GroupRule:
        if g.kind == "full":
            return GroupRule("full", g.block_size, None, 0)
        if g.kind == "state":
            live = (2 if g.checkpoints else 1) if g.live_tail_alloc else 0
            return GroupRule("state", g.block_size, 2, 0, None, live)
        if g.kind == "chunked":
            # W = 1 only marks a reclaiming group; the chunk size C decides the reads.
            return GroupRule("chunked", g.block_size, 1, 0, g.attention_chunk_size)
        return GroupRule(
            "sliding", g.block_size, g.sliding_window, align if g.live_tail_alloc else 0
        )


def oracle_slid_out(f: int, W: int, B: int) -> int:
    d = f - W + 1
    return d // B if d > 0 else 0


def oracle_live(s: int, f: int, g: GroupRule) -> bool:
    """Section 4, word for word: real if not live-tail, in the window at f, or a resume slot.
    Section 13.5 for a live-tail state group: only the slot holding token f - 1 (the running
    state), and with checkpoints the slot before it."""
    if g.state_live:
        return s >= (f - 1) // g.B - (g.state_live - 1)
    if g.A == 0 or g.W is None:
        return True
    if s >= oracle_slid_out(f, g.W, g.B):
        return True
    m = g.A // g.B
    R = -(-(g.W - 1) // g.B)
    return s % m >= m - R


@dataclass(frozen=True)
class Shape:
    slots: int
    tail: int


def oracle_after(shape: Shape, n: int, B: int) -> Shape:
    """The table shape after acquire(n) (section 5, steps 1, 2 and 4)."""
    if n <= shape.tail:
        return Shape(shape.slots, shape.tail - n)
    over = n - shape.tail
    new = -(-over // B)
    return Shape(shape.slots + new, 0 if over % B == 0 else B - over % B)


def oracle_take(shape: Shape, n: int, g: GroupRule) -> int:
    """Pages acquire(n) takes, slot by slot."""
    if n <= shape.tail:
        return 0
    after = oracle_after(shape, n, g.B)
    f = shape.slots * g.B - shape.tail + n
    return sum(1 for s in range(shape.slots, after.slots) if oracle_live(s, f, g))


def oracle_sequential(shape: Shape, first: int, extra: int, g: GroupRule) -> int:
    return oracle_take(shape, first, g) + oracle_take(oracle_after(shape, first, g.B), extra, g)


def oracle_bound(f: int, slots: int, g: GroupRule) -> int:
    """Reclaim bound b = min(slid_out(f), slots); 0 for full groups (nothing reclaimed)."""
    if g.W is None:
        return 0
    if g.C is not None:  # section 13.2: the query at f reads from floor(f / C) * C on
        return min((f // g.C * g.C) // g.B, slots)
    return min(oracle_slid_out(f, g.W, g.B), slots)


# --- prefix-cache keys (semantics section 8), computed here for every side alike ------------

SHARED_PREFIX = 24
"""Token positions every document shares, so documents also match each other partly."""


def doc_tokens(doc: int, n: int) -> list[int]:
    """The first n token ids of document `doc` (a request's prompt)."""
    return [i if i < SHARED_PREFIX else 1_000_003 * (doc + 1) + i for i in range(n)]


_KEYS: dict[tuple[int, int], list[bytes]] = {}


def doc_keys(doc: int, n: int, base: int) -> list[bytes]:
    """One key per full base page of the document's first n tokens: the standard chain,
    SHA-256(previous key || token ids as little-endian uint32), page 0 from an empty key."""
    keys = _KEYS.setdefault((doc, base), [])
    toks = doc_tokens(doc, (n // base) * base)
    while len(keys) < n // base:
        j = len(keys)
        page = b"".join(t.to_bytes(4, "little") for t in toks[j * base : (j + 1) * base])
        keys.append(hashlib.sha256((keys[-1] if keys else b"") + page).digest())
    return keys[: n // base]
