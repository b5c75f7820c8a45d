"""``PrefixIndex``: many engines' names in one hash table and presence matrix, and
``SequenceGap``."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from . import _native, _numpy
from ._decode import _events_of, _plan
from ._hashes import key_hashes
from ._layout import _ALL_TIERS, _MAX_GROUPS, GroupLayout, _as_layout, _Engine, _known

_FIRST_CHUNK = 512  # keys a query looks up first (then 4x more while some engine may go on)


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
        self._native = _native.NATIVE  # False: the numpy loops alone (tests compare both)

    # -- engines ---------------------------------------------------------------------------

    @property
    def engines(self) -> list[Hashable]:
        """Engine ids in the order the index first heard of them (``best`` breaks ties so)."""
        return list(self._engines)

    def add_engine(
        self,
        engine_id: Hashable,
        layout: Iterable[Any] | None = None,
        *,
        alignment: int | None = None,
    ) -> None:
        """Registers an engine, with its group layout if given (exact from the first batch).

        ``layout``: per group, ``(block_size, kv_cache_spec_kind, sliding_window)`` as
        ``livetail.events.group_layout(specs)`` gives, or the ``GroupSpec`` objects. With a
        layout, a stored event that disagrees with it, or names a group outside it, is a
        ``ValueError``. Registering a known engine again with a layout replaces its layout
        only if it agrees with the one learned so far.

        ``alignment``: the engine coordinator's ``alignment`` (semantics 13.9; for vLLM its
        ``prefix_cache_retention_interval``), which the event stream does not carry; needs
        ``layout`` and must be a positive multiple of its page sizes' lcm (``ValueError``
        otherwise, nothing changed). None: the lcm. Answers are then its multiples, as the
        engine's ``match_prefix`` returns.
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
        if alignment is not None:
            if groups is None:
                raise ValueError("alignment needs the engine's layout (to check it against)")
            if type(alignment) is not int or alignment < 1:
                raise ValueError(f"alignment must be an int >= 1, got {alignment!r}")
            lcm = 1
            for size, _, _ in groups:
                lcm = lcm * size // math.gcd(lcm, size)
            if alignment % lcm:
                raise ValueError(
                    f"alignment must be a multiple of the layout's lcm ({lcm}), got {alignment}"
                )
        eng = self._engines.get(engine_id)
        if eng is not None and groups is not None:
            if len(eng.groups) > len(groups):
                raise ValueError(f"layout: the engine already sent group {len(eng.groups) - 1}")
            for g, known in enumerate(eng.groups):
                # A chunked group learned from events has no chunk size yet: the layout's holds.
                learned = not _known(known) and known[:2] == groups[g][:2] if known else False
                if known is not None and known != groups[g] and not learned:
                    raise ValueError(f"layout[{g}]: differs from the learned {known}")
        if eng is None:
            eng = self._engines[engine_id] = _Engine(engine_id)
        if groups is not None:
            self._grow_groups(eng, len(groups))
            eng.groups = list(groups)
            eng.fixed = True
            eng.alignment = alignment
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

        Restarts (semantics 13.8): a publisher's batch 0 begins with ``AllBlocksCleared``. A
        ``seq`` of 0 from an engine already past it is the engine restarted when the batch
        begins with a clear of every tier (its names and gaps are dropped, its stream starts
        again from this batch, which is applied; a layout it had stays), and a batch seen
        before otherwise (skipped, False).
        """
        _hashable(engine_id)
        if seq is not None and (type(seq) is not int or seq < 0):
            raise ValueError(f"seq must be an int >= 0 or None, got {seq!r}")
        eng = self._engines.get(engine_id)
        expected = 0 if eng is None else eng.expected
        events: list[Any] | None = None
        restart = False
        if seq == 0 and expected > 0:
            events = _events_of(batch)
            restart = bool(events) and _clears_every_tier(events[0])
            if not restart:
                return False
        elif seq is not None and seq < expected:
            return False
        if seq is not None and seq > expected and not allow_gap:
            raise SequenceGap(engine_id, expected, seq)
        if events is None:
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
        if restart:  # the batch's first segment clears every tier: names go there
            eng.gaps.clear()
            eng.expected = 0
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

    def _lookup(self, h: np.ndarray) -> np.ndarray:
        """Row of each hash, 0 where the index has none."""
        if self._native:
            return _native.lookup(self._table, self._bits, h)
        return _numpy.lookup(self._table, self._bits, h)

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
            _native.place(self._table, self._bits, h, rows)
        else:
            _numpy.place(self._table, self._bits, h, rows)

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
        from .. import page_keys

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
        loops = _native.answer if self._native else _numpy.answer
        out.update(loops(self._table, self._bits, self._presence, h, ready, _FIRST_CHUNK))
        return out


def _best(answers: Mapping[Hashable, int]) -> tuple[Hashable, int] | None:
    best: tuple[Hashable, int] | None = None
    for e, t in answers.items():
        if best is None or t > best[1]:
            best = (e, t)
    return best


def _clears_every_tier(event: object) -> bool:
    """An ``AllBlocksCleared`` without a medium (vLLM's: every tier of the engine)."""
    return (
        isinstance(event, Mapping)
        and event.get("type") == "AllBlocksCleared"
        and event.get("medium") is None
    )


def _hashable(engine_id: object) -> None:
    try:
        hash(engine_id)
    except TypeError:
        raise TypeError(f"engine_id must be hashable, got {type(engine_id).__name__}") from None
