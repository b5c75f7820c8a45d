"""Chunked local attention (semantics section 13.2) on both implementations: exact values.

B = 16, C = 64 throughout: the query at position t reads [floor(t / 64) * 64, t], so after f
tokens the slots below floor(f / 64) * 4 are read by no later query, and a boundary T resumes
from the slots of [floor(T / 64) * 64, T), i.e. (T / 16) mod 4 slots.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

B, C = 16, 64


def pages(a: Any) -> list[int]:
    return [int(x) for x in a]


def chunked(impl: ModuleType, *extra: Any, num_blocks: int = 100, host: Any = None) -> Any:
    specs = [impl.GroupSpec("chunked", B, attention_chunk_size=C), *extra]
    return impl.Coordinator(specs, impl.BlockPool(num_blocks), host)


def keys_of(impl: ModuleType, n: int, doc: int = 0) -> list[bytes]:
    return impl.page_keys([doc * 100_000 + i for i in range(n)], B)


# --- the group spec and the manager ------------------------------------------------------


def test_spec_and_manager_carry_the_chunk_size(impl: ModuleType) -> None:
    s = impl.GroupSpec("chunked", B, attention_chunk_size=C)
    assert (s.kind, s.block_size, s.attention_chunk_size) == ("chunked", 16, 64)
    assert s.sliding_window is None and s.live_tail_alloc is False
    assert impl.GroupSpec("full", B).attention_chunk_size is None
    m = impl.ChunkedLocalAttentionManager(B, C)
    assert (m.kind, m.block_size, m.attention_chunk_size, m.sliding_window) == (
        "chunked", 16, 64, None,
    )
    assert m.live_alloc_alignment == 0
    c = chunked(impl)
    assert c.managers[0].attention_chunk_size == 64
    assert repr(c.managers[0]) == (
        "ChunkedLocalAttentionManager(block_size=16, attention_chunk_size=64)"
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": "chunked", "block_size": 16},  # no chunk size
        {"kind": "chunked", "block_size": 16, "attention_chunk_size": 24},  # not a multiple of B
        {"kind": "chunked", "block_size": 16, "attention_chunk_size": 0},
        {"kind": "chunked", "block_size": 16, "attention_chunk_size": -64},
        {"kind": "chunked", "block_size": 16, "attention_chunk_size": 64, "sliding_window": 8},
        {"kind": "chunked", "block_size": 16, "attention_chunk_size": 64, "live_tail_alloc": True},
        {"kind": "sliding", "block_size": 16, "sliding_window": 8, "attention_chunk_size": 64},
        {"kind": "full", "block_size": 16, "attention_chunk_size": 64},
        {"kind": "state", "block_size": 16, "attention_chunk_size": 64},
    ],
)
def test_bad_group_specs_raise_value_error(impl: ModuleType, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        impl.GroupSpec(**kwargs)


def test_live_tail_is_refused_by_name(impl: ModuleType) -> None:
    with pytest.raises(ValueError, match="live_tail_alloc"):
        impl.GroupSpec("chunked", B, attention_chunk_size=C, live_tail_alloc=True)


@pytest.mark.parametrize("args", [(16, 24), (16, 0), (0, 64), (16, 2**31)])
def test_bad_managers_raise_value_error(impl: ModuleType, args: tuple[int, int]) -> None:
    with pytest.raises(ValueError):
        impl.ChunkedLocalAttentionManager(*args)


def test_a_non_integer_chunk_size_is_a_type_error(impl: ModuleType) -> None:
    with pytest.raises(TypeError):
        impl.GroupSpec("chunked", B, attention_chunk_size=64.0)
    with pytest.raises(TypeError):
        impl.GroupSpec("chunked", B, attention_chunk_size=True)


# --- acquire, the charges, reclaim ---------------------------------------------------------


def test_a_200_token_prefill_allocates_every_slot(impl: ModuleType) -> None:
    c = chunked(impl)
    t = c.new_tables()
    assert c.blocks_needed_for(t, 200) == 13
    assert c.blocks_needed_for_sequential(t, 200, 9) == 14  # 8 tokens of tail room, then 1 page
    assert c.blocks_needed_for_sequential(t, 192, 8) == c.blocks_needed_for(t, 200) == 13
    assert c.acquire(t, 200)
    assert pages(t[0].page_ids()) == list(range(1, 14))
    assert t[0].tail_available == 8 and c.pool.num_free == 99 - 13


def test_reclaim_at_200_releases_slots_0_to_11(impl: ModuleType) -> None:
    c = chunked(impl)
    t = c.new_tables()
    assert c.acquire(t, 200)
    m = c.managers[0]
    assert m.blocks_reclaimable_at(t[0], 200) == 12  # floor(200 / 64) * 64 / 16 = 12
    assert m.blocks_reclaimable_at(t[0], 191) == 8  # 128 / 16
    assert m.blocks_reclaimable_at(t[0], 63) == 0
    assert m.blocks_reclaimable_at(t[0], 64) == 4
    assert c.reclaim_expired(t, 200) == 12
    assert pages(t[0].page_ids()) == [0] * 12 + [13]
    assert t[0].reclaim_floor == 12
    assert c.reclaim_expired(t, 200) == 0  # each slot scanned once
    # Unnamed released pages are the queue's head (section 2), slot 11's first.
    assert pages(c.pool.free_queue())[:12] == list(range(12, 0, -1))


def test_reclaim_in_steps_follows_the_chunk_start(impl: ModuleType) -> None:
    c = chunked(impl)
    t = c.new_tables()
    assert c.acquire(t, 200)
    assert c.reclaim_expired(t, 127) == 4  # chunk start 64: slots 0..3
    assert c.reclaim_expired(t, 128) == 4  # chunk start 128: slots 4..7
    assert c.reclaim_expired(t, 191) == 0
    assert c.reclaim_expired(t, 192) == 4
    assert t[0].reclaim_floor == 12


def test_decode_past_a_chunk_boundary_keeps_only_the_current_chunk(impl: ModuleType) -> None:
    c = chunked(impl)
    t = c.new_tables()
    assert c.acquire(t, 255)
    assert c.reclaim_expired(t, 255) == 12
    assert c.acquire(t, 1)  # token 255: tail room, no page
    assert c.acquire(t, 1)  # token 256 opens slot 16
    assert c.reclaim_expired(t, 256) == 4  # slots 12..15: chunk 192..255 is out of every window
    assert [int(p) != 0 for p in t[0].page_ids()] == [False] * 16 + [True]


# --- prefix caching -------------------------------------------------------------------------


def test_match_lands_on_the_greatest_supported_boundary(impl: ModuleType) -> None:
    c = chunked(impl)
    t = c.new_tables()
    k = keys_of(impl, 200)
    assert c.acquire(t, 200)
    # Slots 0..8 are full (150 // 16 = 9); sparse naming (section 13.4) names the 7 a match
    # can use: not 3 and 7, which end on a multiple of C (no boundary reads them).
    assert c.cache_full_blocks(t, k, 150) == 7
    ids = pages(t[0].page_ids())
    # T = 160 needs slots 8 and 9 (chunk start 128); slot 9 is unnamed, so 144 (slot 8 only).
    m = c.match_prefix(k[:10])
    assert m.num_tokens == 144
    assert pages(m.pages[0]) == [0] * 8 + [ids[8]]
    # T = 192 is a multiple of C: a request resuming there reads no earlier key.
    m = c.match_prefix(k[:12])
    assert m.num_tokens == 192 and pages(m.pages[0]) == [0] * 12
    assert c.cache_full_blocks(t, k, 200) == 2  # slots 9 and 10 (11 ends on 192)
    m = c.match_prefix(k[:11])  # T = 176: slots 8..10
    assert m.num_tokens == 176
    assert pages(m.pages[0]) == [0] * 8 + ids[8:11]


def test_a_hybrid_match_needs_the_chunk_behind_the_boundary(impl: ModuleType) -> None:
    c = chunked(impl, impl.GroupSpec("full", B))
    t = c.new_tables()
    k = keys_of(impl, 200)
    assert c.acquire(t, 200)
    assert c.cache_full_blocks(t, k, 200) == 12 + 9  # the chunked group: j mod 4 != 3
    chunk_ids = pages(t[0].page_ids())
    assert c.reclaim_expired(t, 200) == 12  # named pages keep their names in the queue
    m = c.match_prefix(k[:11])
    assert m.num_tokens == 176
    assert pages(m.pages[0]) == [0] * 8 + chunk_ids[8:11]
    assert pages(m.pages[1]) == pages(t[1].page_ids())[:11]
    assert c.blocks_consumed_by_claim(m) == 3  # the three reclaimed chunked pages are free
    fresh = c.new_tables()
    free_before = c.pool.num_free
    assert c.claim(fresh, m) is None
    assert c.pool.num_free == free_before - 3
    assert pages(fresh[0].page_ids()) == [0] * 8 + chunk_ids[8:11]
    assert fresh[0].reclaim_floor == 8  # the holes below the chunk start are never rescanned
    assert fresh[1].reclaim_floor == 0
    # The claimed table reclaims from its floor on: at 192 the three claimed slots (held by
    # this request alone: the first one reclaimed them) and the new slot 11 go.
    assert c.acquire(fresh, 16)
    assert c.reclaim_expired(fresh, 192) == 4
    assert pages(fresh[0].page_ids())[:11] == [0] * 11


def test_the_full_group_decides_when_its_prefix_is_shorter(impl: ModuleType) -> None:
    c = chunked(impl, impl.GroupSpec("full", B))
    t = c.new_tables()
    k = keys_of(impl, 200)
    assert c.acquire(t, 200)
    assert c.cache_full_blocks(t, k, 70) == 4 + 3  # chunked: slots 0..2
    # T = 64: the full group has slots 0..3, the chunked group needs none.
    assert c.match_prefix(k).num_tokens == 64


# --- host tier: only the slots a match can use are offloaded ------------------------------------


def test_offload_takes_the_slots_behind_each_boundary_inside_its_chunk(impl: ModuleType) -> None:
    c = chunked(impl, host=impl.HostPool(50))
    t = c.new_tables()
    k = keys_of(impl, 200)
    assert c.acquire(t, 200)
    assert c.cache_full_blocks(t, k, 200) == 9  # sparse naming: the reachable slots only
    plan = c.plan_offload(t, 200)
    assert plan is not None
    # Slot j serves the boundary j + 1 only if it lies in that boundary's chunk: j mod 4 != 3
    # (slots 3, 7, 11 end on a multiple of C, where a match needs nothing).
    ids = pages(t[0].page_ids())
    assert [int(p) for p in plan.device_pages] == [
        ids[j] for j in (0, 1, 2, 4, 5, 6, 8, 9, 10)
    ]
    c.complete_offload(plan)


def test_an_all_chunked_layout_matches_a_multiple_of_c_with_no_page(impl: ModuleType) -> None:
    c = chunked(impl)
    m = c.match_prefix(keys_of(impl, 200, doc=7))  # nothing was ever named
    assert m.num_tokens == 192 and pages(m.pages[0]) == [0] * 12
    assert c.blocks_consumed_by_claim(m) == 0


# --- the router index -------------------------------------------------------------------------


def _stored(hashes: list[int], group: int, size: int, kind: str) -> dict[str, Any]:
    return {
        "type": "BlockStored",
        "block_hashes": hashes,
        "block_size": size,
        "medium": "GPU",
        "group_idx": group,
        "kv_cache_spec_kind": kind,
        "kv_cache_spec_sliding_window": None,  # vLLM's events carry no chunk size
    }


@pytest.mark.parametrize("native", [True, False])
def test_the_router_answers_a_chunked_engine_once_its_chunk_size_is_known(native: bool) -> None:
    import numpy as np
    from livetail.router import PrefixIndex

    hashes = list(range(1, 13))  # 12 slots of B = 16 (base 16)
    keys = np.array(hashes, np.uint64)
    events = [
        _stored(hashes, 0, 16, "full_attention"),
        _stored(hashes[8:11], 1, 16, "chunked_local_attention"),  # slots 8..10
    ]
    learned, registered = PrefixIndex(), PrefixIndex()
    learned._native = registered._native = native
    registered.add_engine("e", [(16, "full_attention", None), (16, "chunked_local_attention", 64)])
    for index in (learned, registered):
        assert index.apply("e", [0.0, events, 0]) is True
    assert learned.match_keys(keys[:11].copy()).get("e", 0) == 0  # chunk size unknown: no answer
    # Registered: 11 keys reach T = 176, whose chunk [128, 176) is slots 8..10: all named.
    assert registered.match_keys(keys[:11].copy()) == {"e": 176}
    assert registered.match_keys(keys[:10].copy()) == {"e": 160}
    assert registered.match_keys(keys) == {"e": 192}  # a multiple of C: no chunked slot
    with pytest.raises(ValueError, match="attention_chunk_size"):
        PrefixIndex().add_engine("x", [(16, "chunked_local_attention", 24)])
