"""The hole detector (README, "Catching a kernel that reads a hole"): poison the null page's
K/V entries with NaN. A hole points at page 0, so a kernel that reads a hole (a slot live
tail left unallocated, or one reclaim punched) puts NaN in its output; a kernel that keeps
to the contract never touches page 0 and its output stays finite, equal to a dense
reference computed without pages.

The kernel below is the CPU oracle: sliding-window attention of one query over keys
``[lo, t]``, gathered through the table's page ids (slot ``s`` covers tokens ``[s*B,
(s+1)*B)``), as a paged kernel does."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

B, W, A = 8, 12, 256  # conv-like live group of the README: live tail aligned to 256 tokens
D = 4  # head dimension
CHUNK = 1024


def kv_cache(num_blocks: int, poison: bool) -> tuple[np.ndarray, np.ndarray]:
    """K and V pages ``[num_blocks, B, D]``; with ``poison`` page 0 holds NaN (the recipe)."""
    k = np.zeros((num_blocks, B, D))
    v = np.zeros((num_blocks, B, D))
    if poison:
        k[0] = np.nan
        v[0] = np.nan
    return k, v


def write(
    k: np.ndarray,
    v: np.ndarray,
    page_ids: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    lo: int,
    hi: int,
) -> None:
    """The chunk's K/V of tokens [lo, hi) into their slots; hole slots are skipped (vLLM's
    slot mapping -1): nothing is ever written to page 0, so its poison stays."""
    for t in range(lo, hi):
        p = int(page_ids[t // B])
        if p != 0:
            k[p, t % B] = keys[t]
            v[p, t % B] = values[t]


def attend(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, page_ids: np.ndarray, t: int, window: int = W
) -> np.ndarray:
    """Query at position t over keys [max(0, t - window + 1), t], read through the pages."""
    pos = np.arange(max(0, t - window + 1), t + 1)
    pages = page_ids[pos // B].astype(np.int64)
    kk, vv = k[pages, pos % B], v[pages, pos % B]
    s = kk @ q / np.sqrt(D)
    w = np.exp(s - s.max())
    out: np.ndarray = (w / w.sum()) @ vv
    return out


def dense(q: np.ndarray, keys: np.ndarray, values: np.ndarray, t: int) -> np.ndarray:
    pos = np.arange(max(0, t - W + 1), t + 1)
    s = keys[pos] @ q / np.sqrt(D)
    w = np.exp(s - s.max())
    out: np.ndarray = (w / w.sum()) @ values[pos]
    return out


def check_no_hole_read(out: np.ndarray, what: str) -> np.ndarray:
    """What an engine's debug build runs after each forward with the poisoned cache."""
    if not np.isfinite(out).all():
        raise AssertionError(f"{what} read a hole (NaN from the poisoned null page)")
    return out


@pytest.fixture
def world(impl: ModuleType) -> tuple[ModuleType, object, object, object, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    keys = rng.standard_normal((CHUNK + 16, D))
    values = rng.standard_normal((CHUNK + 16, D))
    pool = impl.BlockPool(256)
    live = impl.SlidingWindowManager(B, W, A)
    t = impl.BlockTable()
    assert live.acquire(pool, t, CHUNK)  # one prefill chunk of 1024 tokens
    return impl, pool, live, t, keys, values


def test_the_chunk_has_holes_and_every_hole_points_at_page_0(world: tuple) -> None:
    _, _, _, t, _, _ = world
    ids = np.asarray(t.page_ids())
    real = [s for s in range(len(ids)) if ids[s] != 0]
    # Resume pages behind 256, 512, 768 (R = 2 slots each) and the live tail (tokens
    # 1013-1023: slots 126 and 127).
    assert real == [30, 31, 62, 63, 94, 95, 126, 127]
    assert len(ids) == 128


def test_a_correct_use_reads_no_hole_and_matches_the_dense_reference(world: tuple) -> None:
    impl, pool, live, t, keys, values = world
    k, v = kv_cache(pool.num_blocks, poison=True)
    write(k, v, np.asarray(t.page_ids()), keys, values, 0, CHUNK)
    rng = np.random.default_rng(1)
    # A later request resuming at boundary 512 (before any reclaim: a prefix hit claims the
    # named resume pages) reads tokens 501-511: slots 62 and 63, real.
    q = rng.standard_normal(D)
    out = check_no_hole_read(attend(q, k, v, np.asarray(t.page_ids()), 511), "resume at 512")
    np.testing.assert_allclose(out, dense(q, keys, values, 511), rtol=1e-12)
    # Decode steps after the chunk: each acquires its token, writes it, reads its window,
    # then reclaims what slid out.
    for pos in range(CHUNK, CHUNK + 16):
        assert live.acquire(pool, t, 1)
        ids = np.asarray(t.page_ids())
        write(k, v, ids, keys, values, pos, pos + 1)
        q = rng.standard_normal(D)
        out = check_no_hole_read(attend(q, k, v, ids, pos), f"decode at {pos}")
        np.testing.assert_allclose(out, dense(q, keys, values, pos), rtol=1e-12)
        live.reclaim_expired(pool, t, pos + 1)


def test_an_off_contract_kernel_that_reads_a_hole_fails_loudly(world: tuple) -> None:
    """A prefill kernel that writes the chunk into its pages and reads it back (the README
    table's "off" row) reads the chunk's slid-out slots: holes."""
    impl, pool, live, t, keys, values = world
    k, v = kv_cache(pool.num_blocks, poison=True)
    ids = np.asarray(t.page_ids())
    write(k, v, ids, keys, values, 0, CHUNK)
    q = np.ones(D)
    out = attend(q, k, v, ids, 600)  # tokens 589-600: slots 73-75, holes
    assert np.isnan(out).all()
    with pytest.raises(AssertionError, match="prefill at 600 read a hole"):
        check_no_hole_read(out, "prefill at 600")
    # A hole behind a window the contract allows reading is caught the same way: a kernel
    # that reads one slot too far back (window W + 1 at the resume boundary 512).
    out = attend(q, k, v, ids, 511, window=W + B)
    assert np.isnan(out).all()


def test_without_the_poison_the_same_off_contract_read_is_silently_wrong(world: tuple) -> None:
    """Why the detector: page 0 holds zeros (or another request's garbage) and the answer
    is finite and wrong."""
    impl, pool, live, t, keys, values = world
    k, v = kv_cache(pool.num_blocks, poison=False)
    ids = np.asarray(t.page_ids())
    write(k, v, ids, keys, values, 0, CHUNK)
    q = np.ones(D)
    out = attend(q, k, v, ids, 600)
    assert np.isfinite(out).all()
    assert not np.allclose(out, dense(q, keys, values, 600))


def test_a_reclaimed_slot_is_a_hole_too(world: tuple) -> None:
    """After reclaim_expired(f), the punched slots point at page 0: a kernel reading behind
    the window at f reads NaN."""
    impl, pool, live, t, keys, values = world
    k, v = kv_cache(pool.num_blocks, poison=True)
    write(k, v, np.asarray(t.page_ids()), keys, values, 0, CHUNK)
    assert live.reclaim_expired(pool, t, CHUNK) == 6  # the real slots below 1012 // 8 = 126
    ids = np.asarray(t.page_ids())
    q = np.ones(D)
    check_no_hole_read(attend(q, k, v, ids, CHUNK - 1), "decode at 1023")
    assert np.isnan(attend(q, k, v, ids, 511)).all()  # slots 62, 63 were punched
