"""The whole-prompt charge (semantics 13.1) against walks of real tables on a pool.

``blocks_needed_for_prompt`` is a closed form over a fixed set of candidate frontiers; these
tests hold it to (1) the pages a table really holds after reclaim_expired(f) then
acquire(F - f), (2) the peak of every chunking of small prompts, walked chunk by chunk, and
(3) the greatest held value over every (f, F) a chunking can reach, on a larger grid.
"""

from __future__ import annotations

import itertools
from types import ModuleType

import pytest
from livetail import spec
from livetail.spec import geometry as geo


def _manager(impl: ModuleType, kind: str, B: int, W: int, A: int) -> object:
    if kind == "full":
        return impl.FullAttentionManager(B)
    if kind == "state":
        return impl.StateManager(B)
    return impl.SlidingWindowManager(B, W, A)


def _start(impl: ModuleType, mgr: object, e: int, pages: int = 4096) -> tuple[object, object]:
    """A pool and a table of extent e, reclaimed at e (what the charge counts from)."""
    pool, table = impl.BlockPool(pages), impl.BlockTable()
    assert mgr.acquire(pool, table, e)  # type: ignore[attr-defined]
    mgr.reclaim_expired(pool, table, e)  # type: ignore[attr-defined]
    return pool, table


def _chunked_peak(impl: ModuleType, mgr: object, e: int, chunks: list[int], decode: int) -> int:
    """Pages taken from the pool at the worst moment of this chunking, then the decode."""
    pool, table = _start(impl, mgr, e)
    free0 = pool.num_free  # type: ignore[attr-defined]
    f, peak = e, 0
    for size in [*chunks, decode]:
        if size == 0:
            continue
        mgr.reclaim_expired(pool, table, f)  # type: ignore[attr-defined]
        assert mgr.acquire(pool, table, size)  # type: ignore[attr-defined]
        peak = max(peak, free0 - pool.num_free)  # type: ignore[attr-defined]
        f += size
    return peak


def _compositions(n: int, C: int) -> list[list[int]]:
    if n == 0:
        return [[]]
    return [[k, *rest] for k in range(1, min(C, n) + 1) for rest in _compositions(n - k, C)]


KINDS = [("full", 0), ("state", 0), ("sliding", 0), ("sliding", 1), ("sliding", 2)]


@pytest.mark.parametrize(("kind", "m"), KINDS)
def test_charge_is_the_peak_of_the_worst_chunking_walked(impl: ModuleType, kind: str, m: int) -> None:
    """Every chunking of n <= 6 tokens in chunks of 1..C, walked on real tables: the charge
    bounds every one's peak and equals the worst one's."""
    for B, W in itertools.product((1, 2, 3), (1, 2, 3, 5)):
        A = m * B
        mgr = _manager(impl, kind, B, W, A)
        for e, n, C, d in itertools.product((0, B + 1), range(0, 7), (1, 2, 5), (0, 2)):
            worst = max(_chunked_peak(impl, mgr, e, ch, d) for ch in _compositions(n, C))
            _, table = _start(impl, mgr, e)
            got = mgr.blocks_needed_for_prompt(table, n, C, d)  # type: ignore[attr-defined]
            assert got == worst, (kind, B, W, A, e, n, C, d)


def test_held_after_chunk_is_what_the_table_holds(impl: ModuleType) -> None:
    for B, W, m in itertools.product((1, 2, 4), (1, 2, 3, 5, 9), (0, 1, 2, 3)):
        A = m * B
        mgr = impl.SlidingWindowManager(B, W, A)
        for e in (0, 1, B + 1):
            for f in range(e, e + 14):
                for F in range(f + 1, f + 12):
                    pool, table = _start(impl, mgr, e)
                    assert mgr.acquire(pool, table, f - e)
                    mgr.reclaim_expired(pool, table, f)
                    assert mgr.acquire(pool, table, F - f)
                    real = sum(1 for p in table.page_ids() if p)
                    assert real == geo.held_after_chunk(f, F, W, B, A), (B, W, A, e, f, F)
