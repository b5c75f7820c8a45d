"""Managers (semantics section 5): policy objects with no pool and no per-request state.

Each public method checks every argument first (raising and changing nothing), then acts.
Acquire walks the slot-by-slot definition (``geometry.live``); the queries use the O(1)
closed forms (``geometry.blocks_needed``); the differential test holds the two together.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from . import geometry as geo
from . import runs, slots
from ._args import bounded, count, instance
from .geometry import INT32_MAX
from .host import abort_load_on_free
from .pool import BlockPool
from .table import BlockTable


class _Manager:
    kind = ""
    check_runs = True
    """Check after every transition that the slots agree with the run description (the
    symbolic state the theorems execute). Tests of an oracle turn it off, so that only the
    oracle can see a wrong variant."""

    def __init__(self, block_size: int, sliding_window: int | None, alignment: int) -> None:
        self._B = bounded("block_size", block_size, 1)
        self._W = sliding_window
        self._A = alignment
        # The group the run description runs on: fixed for the manager's life.
        self._g = runs.Group(self._B, self._window(), self._A, self.kind != "full")

    # -- properties ------------------------------------------------------------------

    @property
    def block_size(self) -> int:
        return self._B

    @property
    def sliding_window(self) -> int | None:
        return self._W

    @property
    def live_alloc_alignment(self) -> int:
        return self._A

    def _window(self) -> int:
        # Full groups never consult the window (A = 0, no reclaim); 1 keeps the forms total.
        return 1 if self._W is None else self._W

    # -- checks (raise, change nothing) -----------------------------------------------

    def _check_table(self, table: object) -> BlockTable:
        t = instance("table", table, BlockTable)
        if t.is_bound and t.block_size != self._B:
            raise ValueError(
                f"table is bound to a group of block_size {t.block_size}, not {self._B}"
            )
        return t

    def _check_pool(self, pool: object, table: BlockTable) -> BlockPool:
        p = instance("pool", pool, BlockPool)
        if table.pool is not None and table.pool is not p:
            raise ValueError("table is bound to another pool")
        return p

    # The identity of the coordinator this manager is a group of (Coordinator sets it); None
    # for a manager made on its own.
    _owner: object | None = None

    def _check_owner(self, table: BlockTable) -> None:
        """A table a coordinator bound changes only through it or its own managers."""
        if table._coordinator is not None and table._coordinator is not self._owner:
            raise ValueError(
                "table is bound to a coordinator: act on it through that coordinator or its "
                "managers (coordinator.managers) until it is freed"
            )

    def _check_fits(self, table: BlockTable, name: str, n: int) -> None:
        if not geo.fits_int32(len(table.slots), table.tail_available, self._B, n):
            raise ValueError(f"{name}={n} would make the table span more than {INT32_MAX} tokens")

    def _extent(self, table: BlockTable) -> int:
        return int(geo.extent(len(table.slots), table.tail_available, self._B))

    def _check_frontier(self, table: BlockTable, f: object) -> int:
        v = count("num_computed_tokens", f)
        if v > self._extent(table):
            raise ValueError(
                f"num_computed_tokens={v} is past the table's extent ({self._extent(table)})"
            )
        return v

    def _validate_acquire(self, pool: object, table: object, num_tokens: object) -> int:
        t = self._check_table(table)
        self._check_pool(pool, t)
        self._check_owner(t)
        n = count("num_tokens", num_tokens)
        self._check_fits(t, "num_tokens", n)
        return n

    # -- acquire -----------------------------------------------------------------------

    def _is_live(self, s: int, f: int) -> bool:
        return bool(geo.live(s, f, self._window(), self._B, self._A))

    def _group(self) -> runs.Group:
        return self._g

    def _state(self, table: BlockTable) -> runs.TableState:
        """The table's run description (what livetail.verify executes symbolically)."""
        return runs.TableState(
            len(table.slots), table.tail_available, table.reclaim_floor, tuple(table.runs)
        )

    def _check_runs(self, table: BlockTable, lo: int, hi: int) -> None:
        """Slots [lo, hi) are real exactly where the run description says so."""
        if not self.check_runs or lo >= hi:
            return
        state, g = self._state(table), self._group()
        for s in range(lo, hi):
            if (table.slots[s] != 0) != bool(runs.slot_real(state, s, g)):
                raise AssertionError(f"slot {s} disagrees with the table's runs {state}")

    def _check_released(self, band: runs.TableState, lo: int, hi: int, n: int) -> None:
        """A reclaim of [lo, hi) released exactly the real pages the run description has there."""
        if self.check_runs and n != sum(runs.real_pages_in(band, lo, hi, self._group())):
            raise AssertionError(f"reclaim released {n} pages, its runs say otherwise")

    def acquire(self, pool: BlockPool, table: BlockTable, num_tokens: int) -> bool:
        """Extend the table by num_tokens; all-or-nothing on the pool."""
        n = self._validate_acquire(pool, table, num_tokens)
        return self._acquire(pool, table, n)

    def _acquire(self, pool: BlockPool, table: BlockTable, n: int) -> bool:
        """Acquire on validated arguments: the run description decides, the slots follow it."""
        if n == 0:
            return True
        g = self._group()
        step = runs.acquire(pool.num_free, self._state(table), n, g)
        if not step.ok:
            return False
        run = step.run
        real = [bool(runs.run_real(run, s, g)) for s in range(run.first, run.end)]
        if sum(real) != step.take:
            raise AssertionError(
                f"acquire placed {sum(real)} real slots, its run takes {step.take}"
            )
        pages = pool._allocate(step.take)
        assert pages is not None, "the run's take was checked against the free pages"
        it = iter(pages)
        table.slots.extend(next(it) if r else 0 for r in real)
        table.tail_available = step.table.tail
        if run.count > 0:
            table.runs.append(run)
        self._bind(pool, table)
        self._check_runs(table, run.first, run.end)
        return True

    def _bind(self, pool: BlockPool, table: BlockTable) -> None:
        table.pool = pool
        table.block_size = self._B

    # -- queries -----------------------------------------------------------------------

    def blocks_needed_for(self, table: BlockTable, num_tokens: int) -> int:
        """Exactly the pages acquire(num_tokens) would take: O(1)."""
        t = self._check_table(table)
        n = count("num_tokens", num_tokens)
        self._check_fits(t, "num_tokens", n)
        return int(
            geo.blocks_needed(len(t.slots), t.tail_available, n, self._window(), self._B, self._A)
        )

    def blocks_needed_for_sequential(
        self, table: BlockTable, first_tokens: int, extra_tokens: int
    ) -> int:
        """Pages acquire(first_tokens) then acquire(extra_tokens) take: the admission charge."""
        t = self._check_table(table)
        first = count("first_tokens", first_tokens)
        extra = count("extra_tokens", extra_tokens)
        # Both acquires together reach the same slot count as one of first + extra.
        self._check_fits(t, "first_tokens + extra_tokens", first + extra)
        return int(
            geo.blocks_needed_sequential(
                len(t.slots), t.tail_available, first, extra, self._window(), self._B, self._A
            )
        )

    def blocks_needed_for_prompt(
        self, table: BlockTable, num_tokens: int, max_chunk_tokens: int, decode_tokens: int
    ) -> int:
        """The whole-prompt charge (semantics 13.1): O(1), read-only.

        The most pages, beyond those the table holds once reclaimed at its extent, that it
        holds at once while it computes num_tokens more tokens in chunks of at most
        max_chunk_tokens (reclaiming at the computed frontier before each chunk), then
        acquires decode_tokens (reclaiming at the frontier first). Bounds every chunking's
        peak and equals some chunking's. A full group reclaims nothing: the pages of the
        whole num_tokens + decode_tokens.
        """
        t = self._check_table(table)
        n = count("num_tokens", num_tokens)
        C = bounded("max_chunk_tokens", max_chunk_tokens, 1, sys.maxsize)
        d = count("decode_tokens", decode_tokens)
        self._check_fits(t, "num_tokens + decode_tokens", n + d)
        return self._prompt(t, n, C, d)

    def _prompt(self, t: BlockTable, n: int, C: int, d: int) -> int:
        return int(
            geo.prompt_charge(
                self.kind, len(t.slots), t.tail_available, n, C, d, self._window(), self._B,
                self._A, self._chunk(),
            )
        )

    def _chunk(self) -> int:
        """A chunked group's attention_chunk_size (0 for the other kinds)."""
        return 0

    def prompt_after_claim(
        self, T: int, pages: list[int], host_pages: list[int], ref: Callable[[int], int],
        n: int, C: int, d: int,
    ) -> int:
        """This group's part of Coordinator.blocks_needed_for_prompt_after_claim: a claim of
        ``pages`` (and ``host_pages`` loaded) at a hit of T tokens, then the prompt's n
        tokens in chunks of at most C and d decode tokens; ``ref`` a page's holder count."""
        if not geo.fits_int32(0, 0, self._B, T + n + d):
            raise ValueError(
                f"num_tokens + decode_tokens = {n + d} past a hit of {T} would make a table "
                f"span more than {INT32_MAX} tokens"
            )
        taken = sum(1 for p in pages if p and slots.claim_takes(ref(p)))
        taken += sum(1 for h in host_pages if h)
        shared = [j for j, p in enumerate(pages) if p and not slots.claim_takes(ref(p))]
        return int(
            geo.prompt_charge_after_claim(
                self.kind, T, shared, taken, n, C, d, self._window(), self._B, self._A,
                self._chunk(),
            )
        )

    # -- reclaim and free ----------------------------------------------------------------

    def _validate_reclaim(self, pool: object, table: object, f: object) -> int:
        t = self._check_table(table)
        self._check_pool(pool, t)
        self._check_owner(t)
        if t.load is not None:
            # A loaded slot may be reclaimed only once it holds its content (section 10).
            raise ValueError("table has a pending load: complete_load before reclaiming")
        return self._check_frontier(t, f)

    def reclaim_expired(self, pool: BlockPool, table: BlockTable, num_computed_tokens: int) -> int:
        """Punch every real slot below slid_out(f); returns pages that re-entered the queue."""
        f = self._validate_reclaim(pool, table, num_computed_tokens)
        return self._reclaim(pool, table, f)

    def _reclaim_bound(self, table: BlockTable, f: int) -> int:
        return int(geo.reclaim_bound(f, len(table.slots), self._window(), self._B))

    def _reclaim(self, pool: BlockPool, table: BlockTable, f: int) -> int:
        b = self._reclaim_bound(table, f)
        lo, hi = runs.reclaim_band(table.reclaim_floor, b)
        # The band's pages from its top down (spec/slots.py), then every band slot a hole.
        released = slots.batch(
            table.slots, lo, hi, lambda s, p: bool(slots.punched(s, p, lo, hi)), descending=True
        )
        slots.apply(table.slots, lo, hi, lambda s, p: int(slots.reclaim_cell(s, p, lo, hi)))
        band = self._state(table)
        table.reclaim_floor = runs.floor_after(table.reclaim_floor, b)
        self._check_released(band, lo, hi, len(released))
        self._check_runs(table, lo, max(hi, table.reclaim_floor))
        return pool._release(released)

    def blocks_reclaimable_at(
        self, table: BlockTable, num_computed_tokens: int, count_uncached: bool = True
    ) -> int:
        """Pages reclaim_expired(f) would return to the free queue now."""
        t = self._check_table(table)
        f = self._check_frontier(t, num_computed_tokens)
        instance("count_uncached", count_uncached, bool)
        if t.pool is None:
            return 0
        lo, hi = runs.reclaim_band(t.reclaim_floor, self._reclaim_bound(t, f))
        pool = t.pool
        return sum(
            1
            for s in range(lo, hi)
            if slots.reclaimable_cell(
                s, t.slots[s], pool._ref[t.slots[s]], pool._is_cached(t.slots[s]),
                count_uncached, lo, hi,
            )
        )

    def _validate_free(self, pool: object, table: object) -> None:
        t = self._check_table(table)
        self._check_pool(pool, t)
        self._check_owner(t)
        if t.load is not None:
            # Only the coordinator can abort the request's load (section 10).
            raise ValueError("table has a pending load: free the request through its coordinator")

    def free(self, pool: BlockPool, table: BlockTable) -> None:
        """Release every page (last slot's page re-enters the queue first); empty the table."""
        self._validate_free(pool, table)
        self._free(pool, table)

    def _free(self, pool: BlockPool, table: BlockTable) -> None:
        if table.load is not None:
            abort_load_on_free(table.load)
        pages = slots.free_batch(table.slots)
        if self.check_runs and len(pages) != runs.real_pages(self._state(table), self._group()):
            raise AssertionError(f"free found {len(pages)} real pages, its runs say otherwise")
        pool._release(pages)
        table._reset()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(block_size={self._B})"


class FullAttentionManager(_Manager):
    """Every slot real; nothing is ever reclaimed."""

    kind = "full"

    def __init__(self, block_size: int) -> None:
        super().__init__(block_size, None, 0)

    def _reclaim(self, pool: BlockPool, table: BlockTable, f: int) -> int:
        return 0

    def blocks_reclaimable_at(
        self, table: BlockTable, num_computed_tokens: int, count_uncached: bool = True
    ) -> int:
        t = self._check_table(table)
        self._check_frontier(t, num_computed_tokens)
        instance("count_uncached", count_uncached, bool)
        return 0


class SlidingWindowManager(_Manager):
    """Window W; with live_alloc_alignment A > 0, live-tail allocation aligned to A."""

    kind = "sliding"

    def __init__(self, block_size: int, sliding_window: int, live_alloc_alignment: int = 0) -> None:
        B = bounded("block_size", block_size, 1)
        W = bounded("sliding_window", sliding_window, 1)
        A = bounded("live_alloc_alignment", live_alloc_alignment, 0)
        if A % B != 0:
            raise ValueError(f"live_alloc_alignment ({A}) must be a multiple of block_size ({B})")
        super().__init__(B, W, A)

    def __repr__(self) -> str:
        return (
            f"SlidingWindowManager(block_size={self._B}, sliding_window={self._W}, "
            f"live_alloc_alignment={self._A})"
        )


class StateManager(_Manager):
    """Conv/SSM state: a sliding group with W = 2 and no live tail.

    ``live_tail=True`` (section 13.5, vLLM's Mamba "align" mode): an acquire makes real
    only its last new slot, the running state at the frontier (``geometry.RUNNING``);
    with ``checkpoints=True`` also the slot one page behind it, the checkpoint
    (``geometry.CHECKPOINT``). Every other new slot is a hole.
    """

    kind = "state"

    def __init__(self, block_size: int, live_tail: bool = False, checkpoints: bool = False) -> None:
        instance("live_tail", live_tail, bool)
        instance("checkpoints", checkpoints, bool)
        if checkpoints and not live_tail:
            raise ValueError("checkpoints needs live_tail=True")
        A = (geo.CHECKPOINT if checkpoints else geo.RUNNING) if live_tail else 0
        super().__init__(block_size, 2, A)

    @property
    def live_tail(self) -> bool:
        return self._A < 0

    @property
    def checkpoints(self) -> bool:
        return self._A == geo.CHECKPOINT

    @property
    def live_alloc_alignment(self) -> int:
        return 0

    def __repr__(self) -> str:
        extra = (", live_tail=True" if self.live_tail else "") + (
            ", checkpoints=True" if self.checkpoints else ""
        )
        return f"StateManager(block_size={self._B}{extra})"


def chunk_size_of(kind: str, C: object, B: int) -> int | None:
    """A group spec's attention_chunk_size: required by a chunked group (a positive multiple of
    its block size B), refused by every other kind (ValueError)."""
    if kind != "chunked":
        if C is not None:
            raise ValueError(f"attention_chunk_size is only for chunked groups, not {kind!r}")
        return None
    if C is None:
        raise ValueError("a chunked group needs an attention_chunk_size")
    v = bounded("attention_chunk_size", C, 1)
    if v % B != 0:
        raise ValueError(f"attention_chunk_size ({v}) must be a multiple of block_size ({B})")
    return v


class ChunkedLocalAttentionManager(_Manager):
    """Chunked local attention (section 13.2): the query at t reads [floor(t/C)*C, t].

    Every slot an acquire creates is real (no live tail); reclaim at f releases the slots
    below floor(f/C)*C/B, which no later query reads.
    """

    kind = "chunked"

    def __init__(self, block_size: int, attention_chunk_size: int) -> None:
        B = bounded("block_size", block_size, 1)
        C = chunk_size_of("chunked", attention_chunk_size, B)
        assert C is not None
        self._C = C
        super().__init__(B, None, 0)
        self._g = runs.Group(B, 1, 0, True, C)

    @property
    def attention_chunk_size(self) -> int:
        return self._C

    def _reclaim_bound(self, table: BlockTable, f: int) -> int:
        return int(geo.chunked_reclaim_bound(f, len(table.slots), self._C, self._B))

    def _chunk(self) -> int:
        return self._C

    def __repr__(self) -> str:
        return (
            f"ChunkedLocalAttentionManager(block_size={self._B}, "
            f"attention_chunk_size={self._C})"
        )
