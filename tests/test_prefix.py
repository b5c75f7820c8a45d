"""Prefix caching (semantics section 8) on both implementations."""

from __future__ import annotations

import hashlib
import struct
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


def as_list(a: Any) -> list[int]:
    return [int(x) for x in a]


def state(c: Any, tables: list[Any]) -> tuple[Any, ...]:
    pool = c.pool
    return (
        as_list(pool.free_queue()),
        as_list(pool.ref_counts()),
        pool.num_cached,
        pool.num_cached_free,
        [(as_list(t.page_ids()), t.tail_available, t.reclaim_floor, t.is_bound) for t in tables],
    )


def three_groups(impl: ModuleType, num_blocks: int = 400) -> Any:
    return impl.Coordinator(
        [
            impl.GroupSpec("full", 16),
            impl.GroupSpec("sliding", 8, sliding_window=12, live_tail_alloc=True),
            impl.GroupSpec("state", 16),
        ],
        impl.BlockPool(num_blocks),
    )


def run_chunks(c: Any, tables: list[Any], keys: list[bytes], chunks: list[int]) -> list[int]:
    """Acquire, name, reclaim per chunk, as an engine does; returns the chunk ends."""
    done = 0
    ends = []
    for chunk in chunks:
        assert c.acquire(tables, chunk)
        done += chunk
        c.cache_full_blocks(tables, keys, done)
        c.reclaim_expired(tables, done)
        ends.append(done)
    return ends


def test_page_keys_chain_sha256_over_le_uint32_tokens_and_salt(impl: ModuleType) -> None:
    keys = impl.page_keys([1, 2, 3, 4, 5, 6, 7], 3, salt=b"tenant")
    k0 = hashlib.sha256(struct.pack("<3I", 1, 2, 3) + b"tenant").digest()
    k1 = hashlib.sha256(k0 + struct.pack("<3I", 4, 5, 6) + b"tenant").digest()
    assert keys == [k0, k1]


def test_page_keys_rejects_token_ids_outside_uint32(impl: ModuleType) -> None:
    with pytest.raises(ValueError):
        impl.page_keys([0, 2**32], 1)
    with pytest.raises(ValueError):
        impl.page_keys([-1], 1)
    assert len(impl.page_keys([2**32 - 1], 1)) == 1


def test_match_on_an_empty_pool_finds_nothing_and_changes_nothing(impl: ModuleType) -> None:
    c = three_groups(impl)
    keys = impl.page_keys(list(range(256)), c.base_block_size)
    before = state(c, [])
    m = c.match_prefix(keys)
    assert m.num_tokens == 0
    assert [as_list(p) for p in m.pages] == [[], [], []]
    assert c.blocks_consumed_by_claim(m) == 0
    assert state(c, []) == before


def test_state_group_hits_only_at_named_chunk_ends(impl: ModuleType) -> None:
    c = three_groups(impl)
    keys = impl.page_keys(list(range(1000)), c.base_block_size)
    ts = c.new_tables()
    # Chunk ends 100, 160, 256, 456: the state group can resume only at 160 and 256.
    run_chunks(c, ts, keys, [100, 60, 96, 200])
    m = c.match_prefix(keys)
    assert m.num_tokens == 256
    full, sliding, st_ = (as_list(p) for p in m.pages)
    assert len(full) == 16 and all(full)
    # Sliding B=8, W=12: R = 2 resume pages behind slot 32; the rest are holes.
    assert len(sliding) == 32 and [j for j, p in enumerate(sliding) if p] == [30, 31]
    assert len(st_) == 16 and [j for j, p in enumerate(st_) if p] == [15]
    # The full pages are still in use; the sliding resume pages and the state snapshot were
    # reclaimed once the request passed 456 tokens but kept their names in the free queue.
    assert c.blocks_consumed_by_claim(m) == 2 + 1


def test_claim_shares_pages_and_sets_floor_below_resume_pages(impl: ModuleType) -> None:
    c = three_groups(impl)
    keys = impl.page_keys(list(range(1000)), c.base_block_size)
    first = c.new_tables()
    run_chunks(c, first, keys, [100, 60, 96, 200])
    c.free(first)
    m = c.match_prefix(keys)
    assert m.num_tokens == 256
    consumed = c.blocks_consumed_by_claim(m)
    assert consumed == 16 + 2 + 1
    free_before = c.pool.num_free
    second = c.new_tables()
    c.claim(second, m)
    assert free_before - c.pool.num_free == consumed
    assert [len(t) for t in second] == [16, 32, 16]
    assert [t.reclaim_floor for t in second] == [0, 30, 15]
    assert [t.tail_available for t in second] == [0, 0, 0]
    assert all(t.is_bound for t in second)
    for g, t in enumerate(second):
        assert as_list(t.page_ids()) == as_list(m.pages[g])


def test_claimed_pages_are_shared_and_released_only_by_their_last_holder(impl: ModuleType) -> None:
    c = three_groups(impl)
    keys = impl.page_keys(list(range(512)), c.base_block_size)
    first = c.new_tables()
    run_chunks(c, first, keys, [256])
    m = c.match_prefix(keys)
    assert m.num_tokens == 256
    second = c.new_tables()
    c.claim(second, m)
    page = as_list(second[0].page_ids())[0]
    assert c.pool.ref_count(page) == 2
    c.free(first)
    assert c.pool.ref_count(page) == 1
    free_before = c.pool.num_free
    c.free(second)
    assert c.pool.ref_count(page) == 0
    assert c.pool.num_free - free_before == 16 + 2 + 1


def test_eviction_drops_the_oldest_free_name_and_makes_the_match_stale(impl: ModuleType) -> None:
    c = three_groups(impl, num_blocks=80)
    keys = impl.page_keys(list(range(256)), c.base_block_size)
    first = c.new_tables()
    run_chunks(c, first, keys, [256])
    c.free(first)
    m = c.match_prefix(keys)
    assert m.num_tokens == 256
    assert c.pool.num_cached == c.pool.num_cached_free == 16 + 32 + 1
    # Taking every free page pops every named one: all names are gone.
    hog = impl.BlockTable()
    assert impl.FullAttentionManager(1).acquire(c.pool, hog, c.pool.num_free)
    assert c.pool.num_cached == 0
    before = state(c, [hog])
    fresh = c.new_tables()
    with pytest.raises(ValueError):
        c.claim(fresh, m)
    with pytest.raises(ValueError):
        c.blocks_consumed_by_claim(m)
    assert state(c, [hog]) == before
    assert not any(t.is_bound for t in fresh)
    assert c.match_prefix(keys).num_tokens == 0


def test_claim_into_tables_that_are_not_fresh_raises_and_changes_nothing(impl: ModuleType) -> None:
    c = three_groups(impl)
    keys = impl.page_keys(list(range(256)), c.base_block_size)
    first = c.new_tables()
    run_chunks(c, first, keys, [256])
    m = c.match_prefix(keys)
    busy = c.new_tables()
    assert c.acquire(busy, 16)
    before = state(c, first + busy)
    with pytest.raises(ValueError):
        c.claim(busy, m)
    assert state(c, first + busy) == before


def test_match_from_another_coordinator_is_rejected(impl: ModuleType) -> None:
    c = three_groups(impl)
    d = three_groups(impl)
    keys = impl.page_keys(list(range(256)), c.base_block_size)
    m = d.match_prefix(keys)
    with pytest.raises(ValueError):
        c.claim(c.new_tables(), m)


@pytest.mark.parametrize(
    ("keys", "error"),
    [
        ([b"x" * 31], ValueError),
        ([b"x" * 32, b"x" * 32], ValueError),
        (["not bytes but thirty-two chars!!"], TypeError),  # a wrong type (README)
    ],
)
def test_bad_keys_raise_value_error(impl: ModuleType, keys: list[Any], error: type) -> None:
    c = three_groups(impl)
    with pytest.raises(error):
        c.match_prefix(keys)
    ts = c.new_tables()
    assert c.acquire(ts, 64)
    with pytest.raises(error):
        c.cache_full_blocks(ts, keys, 32)


def test_cache_full_blocks_past_extent_raises_and_names_nothing(impl: ModuleType) -> None:
    c = three_groups(impl)
    keys = impl.page_keys(list(range(256)), c.base_block_size)
    ts = c.new_tables()
    assert c.acquire(ts, 64)
    with pytest.raises(ValueError):
        c.cache_full_blocks(ts, keys, 65)
    assert c.pool.num_cached == 0


def test_cache_full_blocks_is_idempotent_and_counts_new_names(impl: ModuleType) -> None:
    c = three_groups(impl)
    keys = impl.page_keys(list(range(256)), c.base_block_size)
    ts = c.new_tables()
    assert c.acquire(ts, 64)
    # full: 4 pages; sliding B=8 live at f=64: slots 6, 7 (window) + resume slots 0, 1? no:
    # m = 2, R = 2 >= m, so every sliding slot is live: 8 pages; state at 64: slot 3.
    assert c.cache_full_blocks(ts, keys, 64) == 4 + 8 + 1
    assert c.cache_full_blocks(ts, keys, 64) == 0
    assert c.pool.num_cached == 13


def test_reclaimable_uncached_counts_only_named_pages(impl: ModuleType) -> None:
    pool = impl.BlockPool(100)
    c = impl.Coordinator([impl.GroupSpec("sliding", 4, sliding_window=4)], pool)
    keys = impl.page_keys(list(range(64)), c.base_block_size)
    ts = c.new_tables()
    assert c.acquire(ts, 40)
    c.cache_full_blocks(ts, keys, 20)
    m = c.managers[0]
    assert m.blocks_reclaimable_at(ts[0], 40, count_uncached=True) == 9
    assert m.blocks_reclaimable_at(ts[0], 40, count_uncached=False) == 5
    assert m.reclaim_expired(pool, ts[0], 40) == 9
    assert pool.num_cached_free == 5


@settings(max_examples=60)
@given(
    data=st.data(),
    live=st.booleans(),
    window=st.integers(1, 40),
    sizes=st.sampled_from([(4, 8), (8, 8), (2, 6), (4, 4, 12)]),
    with_state=st.booleans(),
)
def test_live_tail_never_costs_a_hit(
    data: st.DataObject, live: bool, window: int, sizes: tuple[int, ...], with_state: bool
) -> None:
    """Property 8: the match after chunked prefill equals the full-allocation answer."""
    import livetail.spec as impl

    specs = [impl.GroupSpec("full", sizes[0]), impl.GroupSpec("sliding", sizes[1], window, live)]
    if with_state or len(sizes) > 2:
        specs.append(impl.GroupSpec("state", sizes[-1]))
    c = impl.Coordinator(specs, impl.BlockPool(2000))
    n_tokens = data.draw(st.integers(0, 300))
    chunks: list[int] = []
    while sum(chunks) < n_tokens:
        chunks.append(data.draw(st.integers(1, n_tokens - sum(chunks))))
    prompt = data.draw(st.integers(0, 320))
    keys = impl.page_keys(list(range(prompt)), c.base_block_size)
    ends = run_chunks(c, c.new_tables(), keys, chunks)
    limit = min(n_tokens, len(keys) * c.base_block_size)
    has_state = any(s.kind == "state" for s in specs)
    expected = max(
        (
            T
            for T in range(c.lcm_block_size, limit + 1, c.lcm_block_size)
            if not has_state or T in ends
        ),
        default=0,
    )
    assert c.match_prefix(keys).num_tokens == expected


def test_match_never_claims_past_the_int32_table_limit(impl: ModuleType) -> None:
    # W=1 needs no page to resume, so every boundary is supported; the claim must still
    # leave a table spanning at most 2**31 - 1 tokens.
    big = 2**30
    c = impl.Coordinator([impl.GroupSpec("sliding", big, sliding_window=1)], impl.BlockPool(4))
    keys = [bytes([i]) * 32 for i in range(3)]
    m = c.match_prefix(keys)
    assert m.num_tokens == big
    assert c.blocks_consumed_by_claim(m) == 0
    ts = c.new_tables()
    c.claim(ts, m)
    assert len(ts[0]) == 1
    assert ts[0].extent == big
    assert as_list(ts[0].page_ids()) == [0]
