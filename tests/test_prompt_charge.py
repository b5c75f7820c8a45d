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
    if kind == "chunked":  # W counts pages per chunk of attention here
        return impl.ChunkedLocalAttentionManager(B, W * B)
    return impl.SlidingWindowManager(B, W, A)


def _start(impl: ModuleType, mgr: object, e: int, pages: int = 128) -> tuple[object, object]:
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


KINDS = [("full", 0), ("state", 0), ("sliding", 0), ("sliding", 1), ("sliding", 2), ("chunked", 0)]


@pytest.mark.parametrize(("kind", "m"), KINDS)
def test_charge_is_the_peak_of_the_worst_chunking_walked(
    impl: ModuleType, kind: str, m: int
) -> None:
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
        for e in (0, B + 1):
            for f in range(e, e + 10):
                for F in range(f + 1, f + 9):
                    pool, table = _start(impl, mgr, e)
                    assert mgr.acquire(pool, table, f - e)
                    mgr.reclaim_expired(pool, table, f)
                    assert mgr.acquire(pool, table, F - f)
                    real = sum(1 for p in table.page_ids() if p)
                    assert real == geo.held_after_chunk(f, F, W, B, A), (B, W, A, e, f, F)


def _pair_max(B: int, W: int, A: int, e: int, n: int, C: int, d: int) -> int:
    """The greatest held(f, F) over every (f, F) a chunking reaches, and the decode, minus
    what the table holds at e: the definition, by enumeration."""
    N, best = e + n, 0
    for f in range(e, N):
        for F in range(f + 1, min(f + C, N) + 1):
            best = max(best, geo.held_after_chunk(f, F, W, B, A))
    if d:
        best = max(best, geo.held_after_chunk(N, N + d, W, B, A))
    return max(0, best - (geo.ceil_div(e, B) - geo.slid_out(e, W, B)))


@pytest.mark.parametrize("B", range(1, 9))
def test_closed_form_is_the_greatest_held_over_every_reachable_chunk(B: int) -> None:
    """B 1..8, windows below, at and above a page up to 24, A in {0, B, 2B, 3B, 5B}, starting
    extents up to a few pages, n <= 40, C <= 12, decode <= 3: exactly the enumeration."""
    for W in sorted({1, 2, 3, B - 1, B, B + 1, 2 * B + 1, 3 * B + 2, 13, 24} - {0}):
        for A in (0, B, 2 * B, 3 * B, 5 * B):
            for e in (0, 1, B + 2, 3 * B):
                slots, tail = geo.ceil_div(e, B), geo.ceil_div(e, B) * B - e
                for n, C in itertools.product(range(0, 41, 3), (1, 2, 3, 5, 8, 12)):
                    for d in (0, 1, 3):
                        got = geo.blocks_needed_prompt(slots, tail, n, C, d, W, B, A)
                        want = _pair_max(B, W, A, e, n, C, d)
                        assert got == want, dict(B=B, W=W, A=A, e=e, n=n, C=C, d=d)


def test_sliding_without_live_tail_never_exceeds_vllms_cap_or_the_whole_prompt() -> None:
    for B, W, C in itertools.product((1, 3, 16), (1, 2, 7, 128), (1, 5, 64, 512)):
        cap = geo.ceil_div(W - 1 + C, B) + 1
        for n in (0, 1, C, 3 * C + 1, 3000):
            got = geo.blocks_needed_prompt(0, 0, n, C, 0, W, B, 0)
            assert got <= min(cap, geo.ceil_div(n, B)), (B, W, C, n)


def test_gpt_oss_prompt_charge_is_vllms_cap(impl: ModuleType) -> None:
    """Full + sliding W=128, B=16, a 3000-token prompt in 512-token chunks."""
    pool = impl.BlockPool(300)
    c = impl.Coordinator(
        [impl.GroupSpec("full", 16), impl.GroupSpec("sliding", 16, sliding_window=128)], pool
    )
    tables = c.new_tables()
    # full: ceil(3000/16) = 188; sliding: ceil((127 + 512) / 16) + 1 = 41.
    assert c.blocks_needed_for_prompt(tables, 3000, 512, 0) == 188 + 41
    assert c.blocks_needed_for_prompt(tables, 3000, 512, 9) == 189 + 41
    # A prompt of one chunk holds no more than its pages.
    assert c.blocks_needed_for_prompt(tables, 100, 512, 0) == 7 + 7


def test_live_tail_charge_is_below_the_non_live_one() -> None:
    # B = 8, W = 12, A = 256 (the semantics' reference geometry), 8192-token chunks.
    live = geo.blocks_needed_prompt(0, 0, 100_000, 8192, 1, 12, 8, 256)
    plain = geo.blocks_needed_prompt(0, 0, 100_000, 8192, 1, 12, 8, 0)
    assert plain == geo.ceil_div(11 + 8192, 8) + 1 == 1027
    # The worst chunk holds 3 window pages behind its start, 2 resume pages per 256 tokens
    # of its 8192 (64) and 3 window pages at its end.
    assert live == 3 + 64 + 3


def test_prompt_charge_arguments(impl: ModuleType) -> None:
    pool = impl.BlockPool(8)
    c = impl.Coordinator([impl.GroupSpec("sliding", 4, sliding_window=5)], pool)
    tables = c.new_tables()
    mgr = impl.SlidingWindowManager(4, 5)
    for bad, err in ((-1, ValueError), (True, TypeError), (1.5, TypeError)):
        with pytest.raises(err):
            c.blocks_needed_for_prompt(tables, bad, 4, 0)
        with pytest.raises(err):
            c.blocks_needed_for_prompt(tables, 4, 4, bad)
        with pytest.raises(err):
            mgr.blocks_needed_for_prompt(tables[0], bad, 4, 0)
    for chunk in (0, -1):
        with pytest.raises(ValueError):
            c.blocks_needed_for_prompt(tables, 4, chunk, 0)
        with pytest.raises(ValueError):
            mgr.blocks_needed_for_prompt(tables[0], 4, chunk, 0)
    with pytest.raises(ValueError):  # past the int32 limit of the table it reasons about
        c.blocks_needed_for_prompt(tables, 2**31 - 4, 4, 8)
    with pytest.raises(ValueError):  # one table per group
        c.blocks_needed_for_prompt([*tables, impl.BlockTable()], 4, 4, 0)
    other = impl.Coordinator([impl.GroupSpec("sliding", 4, sliding_window=5)], impl.BlockPool(8))
    theirs = other.new_tables()
    assert other.acquire(theirs, 4)
    with pytest.raises(ValueError):  # a table of another coordinator
        c.blocks_needed_for_prompt(theirs, 4, 4, 0)
    assert pool.num_free == 7  # read-only
    assert c.blocks_needed_for_prompt(tables, 0, 4, 0) == 0


def test_native_equals_spec_on_random_geometries() -> None:
    import livetail
    from hypothesis import given
    from hypothesis import strategies as st

    @given(
        st.integers(1, 64), st.integers(1, 600), st.integers(0, 8), st.integers(0, 2000),
        st.integers(0, 5000), st.integers(1, 3000), st.integers(0, 40),
    )
    def check(B: int, W: int, m: int, e: int, n: int, C: int, d: int) -> None:
        for cls, args in (
            ("SlidingWindowManager", (B, W, m * B)),
            ("StateManager", (B,)),
            ("FullAttentionManager", (B,)),
        ):
            pools = [impl.BlockPool(1 << 14) for impl in (livetail, spec)]
            out = []
            for impl, pool in zip((livetail, spec), pools):
                mgr, table = getattr(impl, cls)(*args), impl.BlockTable()
                if mgr.blocks_needed_for(table, e) < pool.num_free:
                    assert mgr.acquire(pool, table, e)
                    mgr.reclaim_expired(pool, table, e)
                out.append(mgr.blocks_needed_for_prompt(table, n, C, d))
            assert out[0] == out[1], (cls, args, e, n, C, d)

    check()


def _claimed(impl: ModuleType) -> tuple[object, object, object]:
    """A request whose 24-token prefix was claimed from an earlier request's named pages
    (then freed, so no page is shared): groups sliding B=2 W=5 live tail, full B=8 (A=8)."""
    pool = impl.BlockPool(512)
    c = impl.Coordinator(
        [
            impl.GroupSpec("sliding", 2, sliding_window=5, live_tail_alloc=True),
            impl.GroupSpec("full", 8),
        ],
        pool,
    )
    keys = impl.page_keys(list(range(24)), 2)
    first = c.new_tables()
    for f in range(0, 24, 8):
        c.reclaim_expired(first, f)
        assert c.acquire(first, 8)
        c.cache_full_blocks(first, keys, f + 8)
    c.free(first)
    match = c.match_prefix(keys)
    assert match.num_tokens == 24
    tables = c.new_tables()
    c.claim(tables, match)
    return pool, c, tables


def test_charge_on_a_claimed_table_is_the_worst_chunking_walked(impl: ModuleType) -> None:
    for n, C, d in itertools.product(range(0, 7), (1, 2, 3, 5), (0, 1)):
        worst = 0
        for chunks in _compositions(n, C):
            pool, c, tables = _claimed(impl)
            free0, f = pool.num_free, 24  # type: ignore[attr-defined]
            for size in [*chunks, d]:
                if size:
                    c.reclaim_expired(tables, f)  # type: ignore[attr-defined]
                    assert c.acquire(tables, size)  # type: ignore[attr-defined]
                    worst = max(worst, free0 - pool.num_free)  # type: ignore[attr-defined]
                    f += size
        _, c, tables = _claimed(impl)
        assert c.blocks_needed_for_prompt(tables, n, C, d) == worst, (n, C, d)  # type: ignore[attr-defined]


# --- with a prefix hit: the charge counted before the claim -------------------------------

# (name, group specs): every kind, live tail on and off, two groups of different page sizes.
HIT_LAYOUTS = [
    ("sliding-live+full", [("sliding", 2, 5, True), ("full", 8, None, False)]),
    ("sliding+full", [("sliding", 2, 5, False), ("full", 4, None, False)]),
    ("sliding-w9", [("sliding", 4, 9, False)]),
    ("state+full", [("state", 4, None, False), ("full", 8, None, False)]),
    ("chunked", [("chunked", 2, 8, False)]),
]


def _hit(impl: ModuleType, specs: list[tuple], first_past: int | None) -> tuple[object, ...]:
    """A request whose 24-token prefix an earlier request named: the earlier one freed
    (first_past None: every claimed page comes off the free queue) or still running at
    frontier 24 + first_past, reclaimed there (its pages still in the window are shared)."""
    pool = impl.BlockPool(512)
    groups = []
    for kind, B, W, live in specs:
        if kind == "chunked":
            groups.append(impl.GroupSpec(kind, B, attention_chunk_size=W))
        elif kind == "sliding":
            groups.append(impl.GroupSpec(kind, B, sliding_window=W, live_tail_alloc=live))
        else:
            groups.append(impl.GroupSpec(kind, B))
    c = impl.Coordinator(groups, pool)
    keys = impl.page_keys(list(range(24)), min(B for _, B, _, _ in specs))
    first = c.new_tables()
    for f in range(0, 24, 8):
        c.reclaim_expired(first, f)
        assert c.acquire(first, 8)
        c.cache_full_blocks(first, keys, f + 8)
    if first_past is None:
        c.free(first)
    elif first_past:
        assert c.acquire(first, first_past)
        c.reclaim_expired(first, 24 + first_past)
    match = c.match_prefix(keys)
    assert match.num_tokens == 24
    held = set() if first_past is None else {p for t in first for p in t.page_ids() if p}
    return pool, c, match, held


@pytest.mark.parametrize(("name", "specs"), HIT_LAYOUTS, ids=[n for n, _ in HIT_LAYOUTS])
@pytest.mark.parametrize("first_past", [None, 0, 2, 3, 6])
def test_charge_after_a_claim_is_the_worst_chunking_walked(
    impl: ModuleType, name: str, specs: list[tuple], first_past: int | None
) -> None:
    """Per group, the most free pages it takes at once (the pages its table holds that the
    earlier request does not), from before the claim, over every chunking of n <= 6 tokens
    (then the decode), walked on real tables: the charge is their sum, and bounds the pool's
    own worst drop (equal to it with one group). Claimed pages the earlier request still
    holds give nothing back when reclaimed."""
    for n, C, d in itertools.product(range(0, 7), (1, 2, 5), (0, 2)):
        per_group, pool_worst = [0] * len(specs), 0
        for chunks in _compositions(n, C):
            pool, c, match, held = _hit(impl, specs, first_past)
            free0, f = pool.num_free, 24  # type: ignore[attr-defined]
            tables = c.new_tables()  # type: ignore[attr-defined]
            c.claim(tables, match)  # type: ignore[attr-defined]
            for size in [0, *chunks, d]:
                if size:
                    c.reclaim_expired(tables, f)  # type: ignore[attr-defined]
                    assert c.acquire(tables, size)  # type: ignore[attr-defined]
                    f += size
                pool_worst = max(pool_worst, free0 - pool.num_free)  # type: ignore[attr-defined]
                for g, t in enumerate(tables):
                    took = sum(1 for p in t.page_ids() if p and p not in held)
                    per_group[g] = max(per_group[g], took)
        _, c, match, _ = _hit(impl, specs, first_past)
        got = c.blocks_needed_for_prompt_after_claim(match, n, C, d)  # type: ignore[attr-defined]
        assert got == sum(per_group) >= pool_worst, (name, first_past, n, C, d, per_group)
        if len(specs) == 1:
            assert got == pool_worst


def test_charge_after_a_claim_is_below_the_claim_plus_fresh_tables(impl: ModuleType) -> None:
    """The composition it replaces (the claim's pages held to the end, the rest charged on
    fresh tables) over-counts the claimed pages reclaim gives back before the peak."""
    pool, c, match, _ = _hit(impl, HIT_LAYOUTS[0][1], None)
    fresh = c.new_tables()  # type: ignore[attr-defined]
    old = c.blocks_consumed_by_claim(match) + c.blocks_needed_for_prompt(  # type: ignore[attr-defined]
        fresh, 40, 16, 0
    )
    new = c.blocks_needed_for_prompt_after_claim(match, 40, 16, 0)  # type: ignore[attr-defined]
    # Sliding B=2 W=5 live tail (A=8): the claim takes slots 10, 11; the worst chunk from 24
    # holds them, 16 tokens with 2 resume pages per 8 and the window: the fresh-table charge
    # adds the two claimed pages again. Full B=8: 3 claimed pages + 5 new, in both.
    assert (old, new) == (19, 17)
    assert pool.num_free == 511  # type: ignore[attr-defined]  # read-only


def test_charge_after_a_claim_arguments(impl: ModuleType) -> None:
    pool, c, match, _ = _hit(impl, HIT_LAYOUTS[0][1], None)
    for bad, err in ((-1, ValueError), (True, TypeError), (1.5, TypeError)):
        with pytest.raises(err):
            c.blocks_needed_for_prompt_after_claim(match, bad, 4, 0)  # type: ignore[attr-defined]
        with pytest.raises(err):
            c.blocks_needed_for_prompt_after_claim(match, 4, 4, bad)  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        c.blocks_needed_for_prompt_after_claim(match, 4, 0, 0)  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        c.blocks_needed_for_prompt_after_claim([], 4, 4, 0)  # type: ignore[attr-defined]
    with pytest.raises(ValueError):  # past the int32 limit of the tables it reasons about
        c.blocks_needed_for_prompt_after_claim(match, 2**31 - 30, 4, 8)  # type: ignore[attr-defined]
    _, other, theirs, _ = _hit(impl, HIT_LAYOUTS[0][1], None)
    with pytest.raises(ValueError):  # a match of another coordinator
        c.blocks_needed_for_prompt_after_claim(theirs, 4, 4, 0)  # type: ignore[attr-defined]
    assert pool.num_free == 511  # type: ignore[attr-defined]
