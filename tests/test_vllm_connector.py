"""livetail.vllm under a KV connector (docs/semantics.md 13.5, "KV connectors"): tokens loaded
from outside, deferred naming, no zeroing of loaded pages, the connector's lookup, cut-back
hits, bad blocks, and the block views connectors read. Where vLLM 0.33's own manager is the
reference, the same calls run on it too (needs vllm and torch; skipped elsewhere).
"""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

from livetail import vllm as adapter  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import sha256  # noqa: E402
from vllm.v1.core.kv_cache_manager import KVCacheManager as VllmKVCacheManager  # noqa: E402
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    SlidingWindowSpec,
)
from vllm.v1.request import Request  # noqa: E402

B = 4
init_none_hash(sha256)


def full(dtype: object = torch.float32) -> FullAttentionSpec:
    return FullAttentionSpec(block_size=B, num_kv_heads=1, head_size=1, dtype=dtype)


def swa(window: int = 4) -> SlidingWindowSpec:
    return SlidingWindowSpec(
        block_size=B, num_kv_heads=1, head_size=1, dtype=torch.float32, sliding_window=window
    )


def config(*specs: object, num_blocks: int = 20) -> KVCacheConfig:
    groups = [KVCacheGroupSpec([f"layer{i}"], s) for i, s in enumerate(specs)]
    return KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)


def managers(*specs: object, num_blocks: int = 20, **kw: object) -> list[object]:
    """livetail's manager and vLLM's, on the same groups."""
    return [
        cls(
            config(*specs, num_blocks=num_blocks),
            max_model_len=64,
            scheduler_block_size=B,
            hash_block_size=B,
            **kw,
        )
        for cls in (adapter.KVCacheManager, VllmKVCacheManager)
    ]


def request(rid: str, n: int, first: int = 0) -> Request:
    return Request(
        request_id=rid,
        prompt_token_ids=list(range(first, first + n)),
        sampling_params=SamplingParams(max_tokens=4),
        pooling_params=None,
        block_hasher=get_request_block_hasher(B, sha256),
    )


def named(m: object, rid: str) -> list[bool]:
    """Per block of the request's first group: does it carry a hash now?"""
    blocks = m.coordinator.single_type_managers[0].req_to_blocks[rid]
    return [b.block_hash is not None for b in blocks]


@pytest.mark.parametrize("delay", [False, True])
def test_loaded_tokens_get_pages_as_on_vllms_manager(delay):
    # 12 tokens loaded from outside, 5 to compute: the same pages, the same names.
    for m in managers(full()):
        r = request("a", 17)
        new = m.allocate_slots(r, 5, num_external_computed_tokens=12, delay_cache_blocks=delay)
        assert new.get_block_ids() == ([4, 5],)  # only the slots of the tokens to compute
        assert m.get_block_ids("a") == ([1, 2, 3, 4, 5],)
        assert m.block_pool.get_num_free_blocks() == 14
        assert named(m, "a") == ([False] * 5 if delay else [True] * 4 + [False])
        hit = m.get_computed_blocks(request("b", 17))[1]
        assert hit == (0 if delay else 16)


def test_deferred_names_are_given_when_the_load_lands():
    for m in managers(full()):
        r = request("a", 17)
        m.allocate_slots(r, 0, num_external_computed_tokens=16, delay_cache_blocks=True)
        assert m.get_computed_blocks(request("b", 17))[1] == 0
        r.num_computed_tokens = 16  # the scheduler, once the load has landed
        m.cache_blocks(r, 16)
        assert named(m, "a") == [True] * 4
        assert m.get_computed_blocks(request("b", 17))[1] == 16


def test_a_sliding_group_gets_pages_only_for_the_slots_its_window_reads():
    # W = 4, B = 4: after 16 loaded tokens the next query reads tokens 13..16, so slots 0-2 of
    # the sliding group are holes (the null block, id 0: what the connector skips), as vLLM's.
    lt, ref = managers(full(), swa())
    for m in (lt, ref):
        r = request("a", 17)
        m.allocate_slots(r, 1, num_external_computed_tokens=16)
        ids = m.get_block_ids("a")
        assert [p == 0 for p in ids[1]] == [True, True, True, False, False]
        assert len(set(ids[0] + ids[1][3:])) == 7
        assert m.block_pool.get_num_free_blocks() == 12
        blocks = m.get_blocks("a").blocks[1]
        assert [b.is_null for b in blocks] == [True, True, True, False, False]


def test_a_local_hit_and_loaded_tokens_together():
    for m in managers(full(), swa()):
        first = request("a", 13)
        m.allocate_slots(first, 13)
        first.num_computed_tokens = 13
        m.free(first)
        r = request("b", 29)
        blocks, hit, _ = m.get_computed_blocks(r)
        assert hit == 12
        new = m.allocate_slots(
            r, 1, num_new_computed_tokens=hit, new_computed_blocks=blocks,
            num_external_computed_tokens=16,
        )  # fmt: skip
        assert new is not None
        ids = m.get_block_ids("b")
        assert len(ids[0]) == 8 and 0 not in ids[0]
        # 28 tokens computed: the next query reads 25..28, slot 6 and on.
        assert [p == 0 for p in ids[1]] == [True] * 6 + [False] * 2
        assert m.block_pool.get_num_free_blocks() == 19 - 10


def test_the_charge_covers_the_loaded_slots_and_a_short_pool_changes_nothing():
    lt, ref = managers(full(), num_blocks=5)
    for m in (lt, ref):
        r = request("a", 17)
        assert m.allocate_slots(r, 1, num_external_computed_tokens=16) is None
        assert m.get_block_ids("a") == ([],)
        assert m.block_pool.get_num_free_blocks() == 4
        assert m.allocate_slots(request("b", 16), 0, num_external_computed_tokens=16) is not None
        assert m.block_pool.get_num_free_blocks() == 0


def test_reserved_blocks_and_the_whole_sequence_check_hold_back_pages():
    for m in managers(full(), num_blocks=9):
        r = request("a", 20)
        assert m.allocate_slots(r, 4, num_external_computed_tokens=8, reserved_blocks=6) is None
        assert m.allocate_slots(r, 4, num_external_computed_tokens=8, reserved_blocks=5) is not None
        r2 = request("b", 24, first=100)  # 6 pages, 5 free
        assert (
            m.allocate_slots(r2, 1, num_external_computed_tokens=4, full_sequence_must_fit=True)
            is None
        )
        assert m.block_pool.get_num_free_blocks() == 5


def test_loaded_pages_of_skipped_groups_are_not_zeroed():
    # Two precisions: vLLM zeroes new pages (needs_kv_cache_zeroing), so the adapter does.
    lt, ref = managers(full(), full(torch.float16))
    for m in (lt, ref):
        assert m.kv_cache_config.needs_kv_cache_zeroing
        r = request("a", 13)
        m.allocate_slots(
            r, 5, num_external_computed_tokens=8, delay_cache_blocks=True,
            skip_zeroing_group_ids=(1,),
        )  # fmt: skip
        ids = m.get_block_ids("a")
        zeroed = sorted(m.take_new_block_ids())
        # Group 0: every page; group 1: only the pages of the tokens to compute (slots 2-3).
        assert zeroed == sorted(ids[0] + ids[1][2:])
        assert m.take_new_block_ids() == []


def test_a_live_tail_group_over_loaded_tokens_keeps_every_slot_a_later_query_reads():
    # Live tail on the sliding group (W = 4, B = 4): loaded tokens are written by the
    # connector, never computed from activations, so the only rule is reclaim's: every slot
    # from slid_out(28) = 6 on is real, the ones below are holes; the chunk computed after
    # the load is a live-tail acquire (semantics 7.4).
    m = adapter.KVCacheManager(
        config(full(), swa()), max_model_len=64, scheduler_block_size=B, hash_block_size=B,
        live_tail_groups=(1,),
    )  # fmt: skip
    r = request("a", 37)
    assert m.allocate_slots(r, 8, num_external_computed_tokens=28) is not None
    ids = m.get_block_ids("a")
    assert [p != 0 for p in ids[1][:7]] == [False] * 6 + [True]
    assert len(ids[1]) == 9 and len(ids[0]) == 9
    # The chunk of 8 computed next (tokens 28..35): its last slot (8) holds the live tail.
    assert ids[1][8] != 0
    r.num_computed_tokens = 36
    m.remove_skipped_blocks("a", 36)
    assert [p != 0 for p in m.get_block_ids("a")[1]] == [False] * 8 + [True]


def test_the_connectors_lookup_is_get_computed_blocks_and_never_diverged():
    m = managers(full())[0]
    a = request("a", 13)
    m.allocate_slots(a, 13)
    b = request("b", 13)
    blocks, hit, boundary, diverged = m.get_computed_blocks_for_connector(b)
    assert (hit, boundary, diverged) == (12, 0, False)
    assert blocks.get_block_ids() == ([1, 2, 3],)


def test_a_cut_back_hit_is_adopted_at_the_shorter_boundary():
    for m in managers(full()):
        a = request("a", 13)
        m.allocate_slots(a, 13)
        m.free(a)
        b = request("b", 21)
        blocks, hit, _ = m.get_computed_blocks(b)
        assert hit == 12
        cut = m.truncate_computed_blocks(blocks, 8)
        assert cut.get_block_ids() == ([1, 2],)
        assert blocks.get_block_ids() == ([1, 2, 3],)  # pure slicing
        new = m.allocate_slots(
            b, 1, num_new_computed_tokens=8, new_computed_blocks=cut,
            num_external_computed_tokens=12,
        )  # fmt: skip
        assert new is not None
        assert m.get_block_ids("b")[0][:2] == [1, 2]
        assert len(m.get_block_ids("b")[0]) == 6


def test_truncation_off_a_page_boundary_is_a_value_error():
    m = managers(full())[0]
    a = request("a", 13)
    m.allocate_slots(a, 13)
    blocks, _, _ = m.get_computed_blocks(request("b", 13))
    with pytest.raises(ValueError, match="multiple of the page size"):
        m.truncate_computed_blocks(blocks, 6)
    with pytest.raises(ValueError, match="past the hit"):
        m.truncate_computed_blocks(blocks, 16)


def test_bad_connector_arguments_are_errors_and_change_nothing():
    m = managers(full())[0]
    r = request("a", 13)
    with pytest.raises(ValueError, match="no group 1"):
        m.allocate_slots(r, 1, num_external_computed_tokens=8, skip_zeroing_group_ids=(1,))
    with pytest.raises(TypeError, match="ints"):
        m.allocate_slots(r, 1, num_external_computed_tokens=8, skip_zeroing_group_ids=("0",))
    with pytest.raises(ValueError, match="non-negative"):
        m.allocate_slots(r, 1, num_external_computed_tokens=-4)
    assert m.get_block_ids("a") == ([],)
    assert m.block_pool.get_num_free_blocks() == 19


def test_loading_into_a_request_that_holds_pages_is_refused_by_name():
    m = managers(full())[0]
    r = request("a", 13)
    m.allocate_slots(r, 4)
    r.num_computed_tokens = 4
    with pytest.raises(NotImplementedError, match="holds blocks"):
        m.allocate_slots(r, 1, num_external_computed_tokens=4)
    assert m.get_block_ids("a") == ([1],)


def test_evicted_blocks_lose_their_hash_in_the_views():
    for m in managers(full()):
        r = request("a", 13)
        m.allocate_slots(r, 13)
        ids = m.get_block_ids("a")[0]
        assert all(m.block_pool.blocks[p].block_hash is not None for p in ids[:3])
        assert len(m.block_pool.cached_block_hash_to_block) == 3
        m.evict_blocks({ids[1], ids[2]})
        assert [m.block_pool.blocks[p].block_hash is None for p in ids[:3]] == [
            False,
            True,
            True,
        ]
        assert len(m.block_pool.cached_block_hash_to_block) == 1
        assert m.get_computed_blocks(request("b", 13))[1] == 4
