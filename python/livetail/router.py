"""A cluster router's prefix index for hybrid models, fed only by KV event batches.

``PrefixIndex`` keeps, for many engines, the names each engine's pools hold, learned from
the event batches the engines publish (vLLM's KV-event encoding, ``livetail.events``), and
answers for a prompt, per engine, the ``num_tokens`` that engine's
``coordinator.match_prefix(keys)`` would return (semantics sections 8 and 10):

- a boundary ``T`` is a multiple of the lcm of the engine's block sizes, at most
  ``len(keys) * base``, and counts only if every group supports it: a full group needs a
  name on every slot below ``b = T / B``, a sliding group the slots ``[max(0, b - R), b)``
  with ``R = ceil((W - 1) / B)`` (``W = 1``: no slot at all), a state group the slot
  ``b - 1``;
- a slot is present if its name is on the device (``"GPU"``) or the host (``"CPU"``) tier;
- the answer is the greatest supported boundary; sliding and state support is not
  monotone in ``T``, so every boundary is looked at, not only up to the first miss.

Names are indexed by the low 64 bits of the block hash, the form of vLLM's default integer
``ExternalBlockHash``; 32-byte hashes (``int_block_hashes=False``) are reduced to the same
64 bits, so both forms index alike and match the keys of ``livetail.page_keys``.

The index is numpy arrays: an open-addressing hash table of 64-bit hashes to rows, and a
presence matrix (row, engine group) of tier bits. The two hot loops, probing the table and
searching one engine's greatest boundary, run in the native module (``livetail._core``,
native/src/router.cpp) when it imports, else in numpy (the same answers; tests compare them).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

try:
    from . import _core

    _NATIVE = True
except ImportError:  # a foreign-platform install: numpy alone gives the same answers
    _NATIVE = False

__all__ = ["GROUP_KINDS", "PrefixIndex", "SequenceGap", "key_hashes"]

INT32_MAX = 2**31 - 1

# vLLM's kv_cache_spec_kind values -> the rule of section 8 they follow.
GROUP_KINDS = {
    "full_attention": "full",
    "mla_attention": "full",
    "sliding_window": "sliding",
    "sliding_window_mla": "sliding",
    "mamba": "state",
}
# Tiers that count (section 10), as bits of the presence matrix. A missing medium (events
# of engines older than the field) is the device.
_TIER_BITS = {"GPU": 1, "CPU": 2, None: 1}
_ALL_TIERS = 3
_MUL = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing spreads structured hash values
_MAX_GROUPS = 1024
_TAIL = 32  # probe sequences left below this many go one by one
_FIRST_CHUNK = 512  # keys a query looks up first (then 4x more while some engine may go on)

# One group's layout: (block_size, kind, sliding window or None), kind as in GROUP_KINDS.
GroupLayout = tuple[int, str, "int | None"]


class SequenceGap(Exception):
    """A batch arrived whose sequence number is past the one expected: batches were lost.

    Nothing was applied. Replay from ``expected`` (the publisher's replay endpoint returns
    every batch it still has from there on, this one included) and apply those.
    """

    def __init__(self, engine_id: Hashable, expected: int, received: int) -> None:
        super().__init__(
            f"engine {engine_id!r}: expected batch {expected}, received {received} "
            f"({received - expected} lost)"
        )
        self.engine_id = engine_id
        self.expected = expected
        self.received = received


def key_hashes(keys: Sequence[bytes]) -> np.ndarray:
    """The 64-bit hashes (uint64) of 32-byte keys: each key's low 8 bytes, big-endian."""
    if _NATIVE:
        got = _core._router_key_hashes(keys)  # None: not all bytes of 32, see below
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


# Layouts of stored events seen before, by (block_size, kind, window) of exact types int,
# str, int or None: a batch's events mostly repeat a few, and _as_layout costs per event.
_SEEN_LAYOUTS: dict[tuple[int, str, int | None], GroupLayout] = {}


def _as_layout(group: object, where: str) -> GroupLayout:
    """(block_size, kind, window) from a tuple of livetail.events.group_layout or a GroupSpec."""
    if hasattr(group, "block_size") and hasattr(group, "kind"):
        kind = {"full": "full_attention", "sliding": "sliding_window", "state": "mamba"}.get(
            group.kind, group.kind
        )
        window = getattr(group, "sliding_window", None)
        group = (group.block_size, kind, window)
    if not isinstance(group, (tuple, list)) or len(group) != 3:
        raise TypeError(f"{where} must be (block_size, kind, sliding_window) or a GroupSpec")
    size, kind, window = group
    if type(size) is not int or size < 1:
        raise ValueError(f"{where}: block_size must be an int >= 1, got {size!r}")
    if kind not in GROUP_KINDS:
        raise ValueError(f"{where}: unknown kv_cache_spec_kind {kind!r}")
    rule = GROUP_KINDS[kind]
    if rule == "sliding":
        if type(window) is not int or window < 1:
            raise ValueError(
                f"{where}: a sliding group needs a sliding window >= 1, got {window!r}"
            )
        return (size, rule, window)
    return (size, rule, None)


def _resume(layout: GroupLayout) -> int:
    """Slots behind a boundary the group needs: -1 (every slot) for full groups."""
    size, rule, window = layout
    if rule == "full":
        return -1
    if rule == "state":
        return 1
    assert window is not None
    return (window - 1 + size - 1) // size


class _Engine:
    __slots__ = (
        "id", "groups", "cols", "expected", "gaps", "fixed", "base", "lcm", "ready", "rules"
    )

    def __init__(self, engine_id: Hashable) -> None:
        self.id = engine_id
        self.groups: list[GroupLayout | None] = []  # per group index, None while unknown
        self.cols: list[int] = []  # column of the presence matrix per group, -1 none yet
        self.expected = 0  # next sequence number
        self.gaps: list[tuple[int, int]] = []  # lost batches not recovered since a clear
        self.fixed = False  # layout given up front: events may not add groups
        self.base = 0
        self.lcm = 0
        self.ready = False  # every group's layout known
        self.rules: np.ndarray | None = None  # (block size, resume, column) per group, cached

    def relayout(self) -> None:
        self.rules = None
        known = [g for g in self.groups if g is not None]
        self.ready = bool(known) and len(known) == len(self.groups)
        base, lcm = 0, 1
        for size, _, _ in known:
            base = math.gcd(base, size)
            lcm = lcm * size // math.gcd(lcm, size)
        self.base, self.lcm = base, lcm


class PrefixIndex:
    """Names of many engines' pools, learned from their KV event batches; exact matches.

    ``engine_id``: any hashable naming one event stream (one engine, one data-parallel
    rank). Layouts are learned from stored events (``block_size``, ``kv_cache_spec_kind``,
    ``kv_cache_spec_sliding_window``, ``group_idx``) or given up front with ``add_engine``.
    """

    def __init__(self) -> None:
        self._engines: dict[Hashable, _Engine] = {}
        # Hash table: slot -> (64-bit hash, row); row 0 = empty slot. Load <= 1/2.
        self._bits = 10
        # (hash, row) pairs side by side: a probe touches one cache line.
        self._table = np.zeros((1 << self._bits, 2), np.uint64)
        self._used = 0  # occupied slots
        # Rows: row 0 is the null row (never present anywhere); rows 1 .. _nrows-1 in use.
        self._nrows = 1
        self._row_hash = np.zeros(1024, np.uint64)
        self._presence = np.zeros((1024, 8), np.uint8)  # tier bits per (row, column)
        self._free_cols: list[int] = list(range(7, -1, -1))
        self._native = _NATIVE  # False: the numpy loops alone (tests compare both)

    # -- engines ---------------------------------------------------------------------------

    @property
    def engines(self) -> list[Hashable]:
        """Engine ids in the order the index first heard of them (``best`` breaks ties so)."""
        return list(self._engines)

    def add_engine(self, engine_id: Hashable, layout: Iterable[Any] | None = None) -> None:
        """Registers an engine, with its group layout if given (exact from the first batch).

        ``layout``: per group, ``(block_size, kv_cache_spec_kind, sliding_window)`` as
        ``livetail.events.group_layout(specs)`` gives, or the ``GroupSpec`` objects. With a
        layout, a stored event that disagrees with it, or names a group outside it, is a
        ``ValueError``. Registering a known engine again with a layout replaces its layout
        only if it agrees with the one learned so far.
        """
        _hashable(engine_id)
        groups = None
        if layout is not None:
            if isinstance(layout, (str, bytes)):
                raise TypeError("layout must be a list of groups")
            groups = [_as_layout(g, f"layout[{i}]") for i, g in enumerate(layout)]
            if not groups:
                raise ValueError("layout must have at least one group")
            if len(groups) > _MAX_GROUPS:
                raise ValueError(f"layout: at most {_MAX_GROUPS} groups")
        eng = self._engines.get(engine_id)
        if eng is not None and groups is not None:
            if len(eng.groups) > len(groups):
                raise ValueError(f"layout: the engine already sent group {len(eng.groups) - 1}")
            for g, known in enumerate(eng.groups):
                if known is not None and known != groups[g]:
                    raise ValueError(f"layout[{g}]: differs from the learned {known}")
        if eng is None:
            eng = self._engines[engine_id] = _Engine(engine_id)
        if groups is not None:
            self._grow_groups(eng, len(groups))
            eng.groups = list(groups)
            eng.fixed = True
            eng.relayout()

    def remove_engine(self, engine_id: Hashable) -> None:
        """Forgets an engine, its names and its stream position (for a restarted engine)."""
        eng = self._engine(engine_id)
        for c in eng.cols:
            if c >= 0:
                self._presence[:, c] = 0
                self._free_cols.append(c)
        del self._engines[engine_id]

    def layout(self, engine_id: Hashable) -> list[GroupLayout | None]:
        """Per group index, (block_size, rule, window), rule full/sliding/state; None: unknown."""
        return list(self._engine(engine_id).groups)

    def expected_sequence(self, engine_id: Hashable) -> int:
        """The sequence number the engine's next batch must carry (0 for a new engine)."""
        eng = self._engines.get(engine_id)
        return 0 if eng is None else eng.expected

    def gaps(self, engine_id: Hashable) -> list[tuple[int, int]]:
        """(first, last) sequence numbers lost and applied past with ``allow_gap``.

        Empty: the index holds exactly the names the engine's stream says (since its start
        or its last ``AllBlocksCleared``, which makes earlier losses irrelevant).
        """
        return list(self._engine(engine_id).gaps)

    def names(self, engine_id: Hashable) -> dict[tuple[int, int], set[str]]:
        """(group, 64-bit hash) -> tiers holding it, for one engine (a scan: tests, debugging)."""
        eng = self._engine(engine_id)
        out: dict[tuple[int, int], set[str]] = {}
        for g, c in enumerate(eng.cols):
            if c < 0:
                continue
            col = self._presence[: self._nrows, c]
            for r in np.flatnonzero(col):
                bits = int(col[r])
                tiers = {t for t, b in (("GPU", 1), ("CPU", 2)) if bits & b}
                out[(g, int(self._row_hash[r]))] = tiers
        return out

    def _engine(self, engine_id: Hashable) -> _Engine:
        _hashable(engine_id)
        eng = self._engines.get(engine_id)
        if eng is None:
            raise KeyError(f"engine {engine_id!r} is not known to the index")
        return eng

    def _grow_groups(self, eng: _Engine, n: int) -> None:
        while len(eng.groups) < n:
            eng.groups.append(None)
            eng.cols.append(-1)

    def _column(self, eng: _Engine, g: int) -> int:
        c = eng.cols[g]
        if c < 0:
            if not self._free_cols:
                old = self._presence
                grown = np.zeros((old.shape[0], old.shape[1] * 2), np.uint8)
                grown[:, : old.shape[1]] = old
                self._presence = grown
                self._free_cols = list(range(grown.shape[1] - 1, old.shape[1] - 1, -1))
            c = eng.cols[g] = self._free_cols.pop()
            eng.rules = None
        return c

    # -- events ----------------------------------------------------------------------------

    def apply(
        self,
        engine_id: Hashable,
        batch: bytes | bytearray | memoryview | Sequence[Any],
        seq: int | None = None,
        *,
        allow_gap: bool = False,
    ) -> bool:
        """Applies one batch of the engine's stream; False if it was already applied.

        ``batch``: the msgpack payload (needs msgpack) or the decoded ``[ts, events, rank]``
        (``rank`` may be missing, as msgspec omits a ``None`` rank). ``seq``: the batch's
        sequence number (the stream's second frame), or None to apply it without stream
        checks. A ``seq`` below the expected one is a batch seen before (a replay overlaps
        the live stream): skipped, False. Above it, batches were lost: ``SequenceGap`` is
        raised and nothing changes, unless ``allow_gap`` (the lost range is then recorded in
        ``gaps``). A malformed batch is a ``ValueError`` (``TypeError`` for a wrong type)
        and changes nothing.
        """
        _hashable(engine_id)
        if seq is not None and (type(seq) is not int or seq < 0):
            raise ValueError(f"seq must be an int >= 0 or None, got {seq!r}")
        eng = self._engines.get(engine_id)
        expected = 0 if eng is None else eng.expected
        if seq is not None and seq < expected:
            return False
        if seq is not None and seq > expected and not allow_gap:
            raise SequenceGap(engine_id, expected, seq)
        events = _events_of(batch)
        layout = list(eng.groups) if eng is not None else []
        fixed = eng is not None and eng.fixed
        segments = _plan(events, layout, fixed)
        # Valid: commit.
        if eng is None:
            eng = self._engines[engine_id] = _Engine(engine_id)
        if len(layout) > len(eng.groups) or layout != eng.groups:
            self._grow_groups(eng, len(layout))
            eng.groups = layout
            eng.relayout()
        if seq is not None:
            if seq > eng.expected:
                eng.gaps.append((eng.expected, seq - 1))
            eng.expected = seq + 1
        for clear, hashes, groups, bits, stores, group_set, uniform in segments:
            if clear is not None:
                self._clear(eng, clear)
            if len(hashes):
                self._apply_keys(eng, hashes, groups, bits, stores, group_set, uniform)
        return True

    def _clear(self, eng: _Engine, bits: int) -> None:
        keep = np.uint8(_ALL_TIERS & ~bits)
        for c in eng.cols:
            if c >= 0:
                self._presence[: self._nrows, c] &= keep
        if bits == _ALL_TIERS:
            eng.gaps.clear()

    def _apply_keys(
        self,
        eng: _Engine,
        hashes: np.ndarray,
        groups: np.ndarray,
        bits: np.ndarray,
        stores: np.ndarray,
        group_set: set[int],
        uniform: tuple[int, bool] | None,
    ) -> None:
        for g in group_set:
            self._column(eng, g)
        cols = np.asarray(eng.cols, np.int64)[groups]
        if (self._used + len(hashes)) * 2 > (1 << self._bits):
            self._rebuild(len(hashes))  # before any lookup: it renumbers rows
        rows = self._lookup(hashes)
        missing = rows == 0
        if uniform is not None:
            # The usual batch: every event of one kind on one tier. Removals only clear
            # bits, so the null row 0 (names never stored) stays empty.
            bit, stored = uniform
            if stored and missing.any():
                new, inverse = np.unique(hashes[missing], return_inverse=True)
                rows[missing] = self._insert(new) + inverse.reshape(-1)
            width = self._presence.shape[1]  # after _insert, which may grow the matrix
            flat = self._presence.reshape(-1)
            idx = rows.astype(np.int64) * width + cols
            if stored:
                flat[idx] |= np.uint8(bit)
            else:
                flat[idx] &= np.uint8(_ALL_TIERS & ~bit)
            return
        if (missing & stores).any():
            new = np.unique(hashes[missing & stores])
            first = self._insert(new)
            # Every entry of a new hash gets its row, removals after the store included.
            cand = hashes[missing]
            at = np.minimum(np.searchsorted(new, cand), len(new) - 1)
            got = rows[missing]
            hit = new[at] == cand
            got[hit] = first + at[hit]
            rows[missing] = got
        width = self._presence.shape[1]
        flat = self._presence.reshape(-1)
        idx = rows.astype(np.int64) * width + cols
        b, s = bits, stores
        if s.any() and not s.all():
            # Stores and removals mixed: the last event on each (row, column, tier) decides.
            # (Within one kind a cell written twice gets the same value: no need.)
            cell = idx * 4 + b
            _, last_rev = np.unique(cell[::-1], return_index=True)
            last = len(cell) - 1 - last_rev
            idx, b, s = idx[last], b[last], s[last]
        # One pass per tier: within one, every cell occurs once (fancy |= keeps one write).
        for bit in (1, 2):
            mine = b == bit
            flat[idx[mine & s]] |= np.uint8(bit)
            flat[idx[mine & ~s]] &= np.uint8(_ALL_TIERS & ~bit)

    # -- hash table ------------------------------------------------------------------------

    def _slots(self, h: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return ((h * _MUL) >> np.uint64(64 - self._bits)).astype(np.intp)

    def _lookup(self, h: np.ndarray) -> np.ndarray:
        """Row of each hash, 0 where the index has none."""
        if self._native:
            return _core._router_lookup(self._table, self._bits, np.ascontiguousarray(h))
        out = np.zeros(len(h), np.int32)
        if not len(h):
            return out
        mask = (1 << self._bits) - 1
        pos = self._slots(h)
        idx = np.arange(len(h))
        tab = self._table
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

    def _insert(self, h: np.ndarray) -> int:
        """Adds distinct hashes the table does not hold; they get rows first, first + 1, ..."""
        n = len(h)
        if self._nrows + n > len(self._row_hash):
            cap = max(2 * len(self._row_hash), self._nrows + n)
            self._row_hash = np.resize(self._row_hash, cap)
            grown = np.zeros((cap, self._presence.shape[1]), np.uint8)
            grown[: self._nrows] = self._presence[: self._nrows]
            self._presence = grown
        rows = np.arange(self._nrows, self._nrows + n, dtype=np.int32)
        self._row_hash[self._nrows : self._nrows + n] = h
        self._nrows += n
        self._place(h, rows)
        self._used += n
        return int(rows[0])

    def _place(self, h: np.ndarray, rows: np.ndarray) -> None:
        """Puts distinct hashes the table lacks into free slots (linear probing)."""
        if self._native:
            _core._router_place(self._table, self._bits, h, rows.astype(np.int32, copy=False))
            return
        mask = (1 << self._bits) - 1
        pos = self._slots(h)
        tab = self._table
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

    def _rebuild(self, extra: int) -> None:
        """Drops rows no engine holds any more, then rehashes into a table with room."""
        live = self._presence[1 : self._nrows].any(axis=1)
        keep = np.concatenate(([0], 1 + np.flatnonzero(live)))
        self._presence = np.ascontiguousarray(self._presence[keep])
        self._row_hash = self._row_hash[keep]
        self._nrows = len(keep)
        need = 4 * (self._nrows + extra)
        bits = 10
        while (1 << bits) < need:
            bits += 1
        self._bits = bits
        self._table = np.zeros((1 << bits, 2), np.uint64)
        self._used = 0
        if self._nrows > 1:
            self._place(self._row_hash[1:].copy(), np.arange(1, self._nrows, dtype=np.int32))
            self._used = self._nrows - 1

    # -- queries ---------------------------------------------------------------------------

    def match(self, tokens: Sequence[int], salt: bytes = b"") -> dict[Hashable, int]:
        """Per engine, the ``num_tokens`` its ``match_prefix(page_keys(tokens, base, salt))``
        returns. Keys are computed once per distinct base block size among the engines."""
        from . import page_keys

        out: dict[Hashable, int] = {}
        bases = sorted({e.base for e in self._engines.values() if e.base})
        by_base = {b: key_hashes(page_keys(tokens, b, salt)) for b in bases}
        for eng in self._engines.values():
            out[eng.id] = 0
        for b, h in by_base.items():
            out.update(self._answer(h, b))
        return out

    def match_keys(
        self, keys: Sequence[bytes] | np.ndarray, base_block_size: int | None = None
    ) -> dict[Hashable, int]:
        """Per engine of base block size ``base_block_size``, its ``match_prefix(keys)``.

        ``keys``: ``livetail.page_keys(tokens, base)`` (32-byte keys) or their 64-bit hashes
        (``key_hashes(keys)``, a uint64 array): compute them once, query every engine.
        ``base_block_size`` None: every known engine must share one base (else ValueError).
        Engines whose layout is not known at all are answered 0.
        """
        h = keys if isinstance(keys, np.ndarray) else key_hashes(keys)
        if isinstance(keys, np.ndarray) and (keys.dtype != np.uint64 or keys.ndim != 1):
            raise TypeError("keys as an array must be a 1-D uint64 array of key hashes")
        if base_block_size is None:
            bases = {e.base for e in self._engines.values() if e.base}
            if len(bases) > 1:
                raise ValueError(
                    f"base_block_size: the engines have several bases {sorted(bases)}; say which"
                )
            base = bases.pop() if bases else 0
        else:
            if type(base_block_size) is not int or base_block_size < 1:
                raise ValueError(f"base_block_size must be an int >= 1, got {base_block_size!r}")
            base = base_block_size
        out = {e.id: 0 for e in self._engines.values() if e.base in (0, base)}
        if base:
            out.update(self._answer(h, base))
        return out

    def best(self, tokens: Sequence[int], salt: bytes = b"") -> tuple[Hashable, int] | None:
        """(engine, num_tokens) with the longest match; ties go to the engine known first."""
        return _best(self.match(tokens, salt))

    def best_keys(
        self, keys: Sequence[bytes] | np.ndarray, base_block_size: int | None = None
    ) -> tuple[Hashable, int] | None:
        """``best`` for precomputed keys (see ``match_keys``)."""
        return _best(self.match_keys(keys, base_block_size))

    def _answer(self, h: np.ndarray, base: int) -> dict[Hashable, int]:
        engines = [e for e in self._engines.values() if e.base == base]
        out: dict[Hashable, int] = {e.id: 0 for e in engines}
        ready = [e for e in engines if e.ready]  # a group of unknown layout: 0 is all that is safe
        if not ready or not len(h):
            return out
        if self._native:
            out.update(self._answer_native(h, ready))
            return out
        # Keys are looked up in growing chunks while some engine's full groups still hold
        # every slot so far: past the first slot that each engine's full groups miss, no
        # answer can grow. (An engine without a full group may match anywhere: all keys.)
        n = len(h)
        fulls = [_full_cols(e) for e in ready]
        c = n if any(f is None for f in fulls) else min(n, _FIRST_CHUNK)
        rows = self._lookup(h[:c])
        while c < n and self._may_extend(fulls, rows, base):
            nxt = min(n, 4 * c)
            rows = np.concatenate((rows, self._lookup(h[c:nxt])))
            c = nxt
        # One gather for every column: present[i, c] is key i's tier bits in column c.
        present = self._presence[rows]
        same: dict[tuple[GroupLayout | None, ...], list[_Engine]] = {}
        for e in ready:
            same.setdefault(tuple(e.groups), []).append(e)
        for es in same.values():
            got = _answers(es[0], [e.cols for e in es], present, c)
            out.update(zip((e.id for e in es), got))
        return out

    def _answer_native(self, h: np.ndarray, ready: list[_Engine]) -> dict[Hashable, int]:
        """``_answer`` with the native probes and boundary search, one engine at a time."""
        n = len(h)
        todo = []
        out: dict[Hashable, int] = {}
        for e in ready:
            if e.lcm > INT32_MAX:
                out[e.id] = 0  # not even one boundary fits in 2**31 - 1 tokens
                continue
            if e.rules is None:
                e.rules = np.array(
                    [(lay[0], _resume(lay), c) for lay, c in zip(e.groups, e.cols) if lay],
                    np.int64,
                ).reshape(-1, 3)
            todo.append(e)
        # As in _answer: keys in growing chunks while some engine's full groups hold every
        # slot so far (an engine without a full group may match anywhere: all keys). An
        # engine whose full groups miss a slot has its final answer.
        has_full = all(any(lay is not None and lay[1] == "full" for lay in e.groups) for e in todo)
        c = min(n, _FIRST_CHUNK) if has_full else n
        h = np.ascontiguousarray(h)
        rows = _core._router_lookup(self._table, self._bits, h[:c])
        while todo:
            going = []
            for e in todo:
                t, through = _core._router_longest(self._presence, rows, e.base, e.lcm, e.rules)
                out[e.id] = t
                if through and c < n:
                    going.append(e)
            if not going:
                break
            nxt = min(n, 4 * c)
            rows = np.concatenate((rows, _core._router_lookup(self._table, self._bits, h[c:nxt])))
            c, todo = nxt, going
        return out

    def _may_extend(
        self, fulls: list[list[tuple[int, int]] | None], rows: np.ndarray, base: int
    ) -> bool:
        """Whether some engine's full groups hold every slot the looked-up keys cover."""
        present = self._presence[rows]
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
    base, L = eng.base, eng.lcm
    E = len(cols)
    M = np.full(E, min(n * base, INT32_MAX) // L, np.int64)  # boundaries T = m * L, m <= M
    partial: list[tuple[np.ndarray, int, int]] = []
    # Full groups first: their support is monotone and caps every engine's candidates.
    groups = [(g, lay) for g, lay in enumerate(eng.groups) if lay is not None]
    for g, layout in sorted(groups, key=lambda gl: gl[1][1] != "full"):
        size, R = layout[0], _resume(layout)
        if R == 0:
            continue  # W = 1: every boundary, no page
        col = np.array([c[g] for c in cols], np.intp)
        M[col < 0] = 0  # a group that never named a page supports no boundary above 0
        limit = int(M.max()) * L // size
        if limit == 0:
            return [0] * E
        k = size // base
        # (engine, slot), contiguous per engine: numpy's inner loops run along the slots.
        mine = present[k - 1 :: k][:limit][:, np.maximum(col, 0)]
        slots = np.ascontiguousarray((mine != 0).T)
        if R < 0:
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
        at_b = cum[:, step::step]
        low = np.zeros_like(at_b)
        i0 = -(-R // step) - 1  # first boundary index with b >= R
        if i0 < top:
            low[:, i0:] = cum[:, step * (i0 + 1) - R :: step][:, : top - i0]
        need = np.minimum(np.arange(1, top + 1) * step, R)
        ok &= at_b - low == need
    last = top - np.argmax(ok[:, ::-1], axis=1)
    return [int(x) * L for x in np.where(ok.any(axis=1), last, 0).tolist()]


def _best(answers: Mapping[Hashable, int]) -> tuple[Hashable, int] | None:
    best: tuple[Hashable, int] | None = None
    for e, t in answers.items():
        if best is None or t > best[1]:
            best = (e, t)
    return best


def _hashable(engine_id: object) -> None:
    try:
        hash(engine_id)
    except TypeError:
        raise TypeError(f"engine_id must be hashable, got {type(engine_id).__name__}") from None


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
