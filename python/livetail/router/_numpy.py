"""The index's loops in numpy: the reference the native ones (``_native``) are tested
against, and what runs where the native module does not import. ``lookup``, ``place`` and
``answer`` have the signatures of the native ones."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from ._layout import INT32_MAX, GroupLayout, _chunk, _Engine, _resume

_MUL = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing spreads structured hash values
_TAIL = 32  # probe sequences left below this many go one by one


def _slots(h: np.ndarray, bits: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        return ((h * _MUL) >> np.uint64(64 - bits)).astype(np.intp)


def lookup(table: np.ndarray, bits: int, h: np.ndarray) -> np.ndarray:
    """Row of each hash, 0 where the table has none."""
    out = np.zeros(len(h), np.int32)
    if not len(h):
        return out
    mask = (1 << bits) - 1
    pos = _slots(h, bits)
    idx = np.arange(len(h))
    tab = table
    while len(idx) > _TAIL:
        pair = tab[pos]
        rows = pair[:, 1]
        occupied = rows != 0
        hit = occupied & (pair[:, 0] == h)
        out[idx[hit]] = rows[hit]
        go = occupied & ~hit
        idx, pos = idx[go], (pos[go] + 1) & mask
        h = h[go]
    # The few long probe sequences left: one by one (a numpy round costs more).
    for i, p, key in zip(idx.tolist(), pos.tolist(), h.tolist()):
        while True:
            r = int(tab[p, 1])
            if r == 0:
                break
            if int(tab[p, 0]) == key:
                out[i] = r
                break
            p = (p + 1) & mask
    return out


def place(table: np.ndarray, bits: int, h: np.ndarray, rows: np.ndarray) -> None:
    """Puts distinct hashes the table lacks into free slots (linear probing)."""
    mask = (1 << bits) - 1
    pos = _slots(h, bits)
    tab = table
    while len(h) > _TAIL:
        cand = np.flatnonzero(tab[pos, 1] == 0)
        won = np.zeros(len(h), bool)
        if len(cand):
            _, first = np.unique(pos[cand], return_index=True)  # one winner per slot
            w = cand[first]
            tab[pos[w], 0] = h[w]
            tab[pos[w], 1] = rows[w]
            won[w] = True
        go = ~won
        h, rows, pos = h[go], rows[go], (pos[go] + 1) & mask
    for key, row, p in zip(h.tolist(), rows.tolist(), pos.tolist()):
        while tab[p, 1] != 0:
            p = (p + 1) & mask
        tab[p, 0] = key
        tab[p, 1] = row


def answer(
    table: np.ndarray,
    bits: int,
    presence: np.ndarray,
    h: np.ndarray,
    ready: list[_Engine],
    first_chunk: int,
) -> dict[Hashable, int]:
    """The greatest supported boundary of each engine in ``ready`` (engines of one base whose
    layout is known) for the key hashes ``h``; engines of one layout and alignment at once."""
    # Keys are looked up in growing chunks while some engine's full groups still hold
    # every slot so far: past the first slot that each engine's full groups miss, no
    # answer can grow. (An engine without a full group may match anywhere: all keys.)
    n = len(h)
    fulls = [_full_cols(e) for e in ready]
    c = n if any(f is None for f in fulls) else min(n, first_chunk)
    rows = lookup(table, bits, h[:c])
    while c < n and _may_extend(presence, fulls, rows):
        nxt = min(n, 4 * c)
        rows = np.concatenate((rows, lookup(table, bits, h[c:nxt])))
        c = nxt
    # One gather for every column: present[i, c] is key i's tier bits in column c.
    present = presence[rows]
    same: dict[tuple[tuple[GroupLayout | None, ...], int], list[_Engine]] = {}
    for e in ready:  # one layout and one alignment (the boundary step) per call
        same.setdefault((tuple(e.groups), e.align), []).append(e)
    out: dict[Hashable, int] = {}
    for es in same.values():
        got = _answers(es[0], [e.cols for e in es], present, c)
        out.update(zip((e.id for e in es), got))
    return out


def _may_extend(
    presence: np.ndarray, fulls: list[list[tuple[int, int]] | None], rows: np.ndarray
) -> bool:
    """Whether some engine's full groups hold every slot the looked-up keys cover."""
    present = presence[rows]
    for full in fulls:
        assert full is not None
        if all(c >= 0 and present[k - 1 :: k, c].all() for k, c in full):
            return True
    return False


def _full_cols(eng: _Engine) -> list[tuple[int, int]] | None:
    """(keys per slot, column) of each full group; None if the engine has none."""
    out = []
    for layout, c in zip(eng.groups, eng.cols):
        if layout is not None and layout[1] == "full":
            out.append((layout[0] // eng.base, c))
    return out or None


def _answers(eng: _Engine, cols: list[list[int]], present: np.ndarray, n: int) -> list[int]:
    """Section 8's greatest supported boundary for engines of ``eng``'s layout, at once.

    ``cols``: per engine, its presence column per group; ``present``: the tier bits of the
    query's keys (rows) in every column.
    """
    base, L = eng.base, eng.align
    E = len(cols)
    M = np.full(E, min(n * base, INT32_MAX) // L, np.int64)  # boundaries T = m * L, m <= M
    partial: list[tuple[np.ndarray, int, int]] = []
    # Full groups first: their support is monotone and caps every engine's candidates.
    groups = [(g, lay) for g, lay in enumerate(eng.groups) if lay is not None]
    for g, layout in sorted(groups, key=lambda gl: gl[1][1] != "full"):
        size, R = layout[0], _resume(layout)
        chunk = _chunk(layout)  # a chunked group (section 13.2): its need varies per boundary
        if R == 0 and not chunk:
            continue  # W = 1: every boundary, no page
        col = np.array([c[g] for c in cols], np.intp)
        if not chunk:
            M[col < 0] = 0  # a group that never named a page supports no boundary above 0
        limit = int(M.max()) * L // size
        if limit == 0:
            return [0] * E
        k = size // base
        # (engine, slot), contiguous per engine: numpy's inner loops run along the slots.
        mine = present[k - 1 :: k][:limit][:, np.maximum(col, 0)]
        slots = np.ascontiguousarray((mine != 0).T)
        if chunk:
            slots[col < 0] = False  # never named a page: only multiples of C are supported
            partial.append((slots, size, -chunk))
        elif R < 0:
            first = np.where(slots.all(axis=1), limit, np.argmin(slots, axis=1))
            M = np.minimum(M, first * size // L)
        else:
            partial.append((slots, size, R))
    top = int(M.max())
    if top == 0:
        return [0] * E
    if not partial:
        return [int(x) * L for x in M.tolist()]
    ok = np.arange(1, top + 1)[None, :] <= M[:, None]  # (engine, boundary m - 1)
    for slots, size, R in partial:
        step = L // size  # slots per boundary: boundary m ends at slot b = m * step
        # cum[:, j]: present slots below j. The window [max(0, b - R), b) is whole if it
        # counts min(b, R) present slots.
        cum = np.zeros((E, step * top + 1), np.int32)
        np.cumsum(slots[:, : step * top], axis=1, dtype=np.int32, out=cum[:, 1:])
        if R < 0:  # a chunked group of -R slots per chunk: [b - b mod -R, b) whole
            bs = np.arange(1, top + 1) * step
            lo = bs // -R * -R
            ok &= cum[:, bs] - cum[:, lo] == bs - lo
            continue
        at_b = cum[:, step::step]
        low = np.zeros_like(at_b)
        i0 = -(-R // step) - 1  # first boundary index with b >= R
        if i0 < top:
            low[:, i0:] = cum[:, step * (i0 + 1) - R :: step][:, : top - i0]
        need = np.minimum(np.arange(1, top + 1) * step, R)
        ok &= at_b - low == need
    last = top - np.argmax(ok[:, ::-1], axis=1)
    return [int(x) * L for x in np.where(ok.any(axis=1), last, 0).tolist()]
