"""livetail.vllm under speculative decoding (semantics 13.3) and the spec-class table, beside
vLLM 0.33's own KVCacheManager where it has the same rule (needs vllm and torch)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

from livetail import vllm as adapter  # noqa: E402
from vllm.utils.hashing import sha256  # noqa: E402
from vllm.v1.core.kv_cache_manager import KVCacheManager as VllmManager  # noqa: E402
from vllm.v1.core.kv_cache_utils import init_none_hash  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    MLAAttentionSpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
)
from vllm_builders import request  # noqa: E402

B = 4
init_none_hash(sha256)
ATTN = dict(num_kv_heads=1, head_size=1, dtype=torch.float32)


def full(**kw: object) -> FullAttentionSpec:
    return FullAttentionSpec(block_size=B, **ATTN, **kw)  # type: ignore[arg-type]


def swa(window: int, extra: int = 0) -> SlidingWindowSpec:
    return SlidingWindowSpec(
        block_size=B, sliding_window=window, extra_retained_tokens=extra, **ATTN
    )


def config(*specs: object, num_blocks: int = 41) -> KVCacheConfig:
    groups = [KVCacheGroupSpec([f"layer{i}"], s) for i, s in enumerate(specs)]
    return KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)


def build(cls: type, *specs: object, num_blocks: int = 41, **kw: object):
    return cls(
        config(*specs, num_blocks=num_blocks),
        max_model_len=64,
        scheduler_block_size=B,
        hash_block_size=B,
        **kw,
    )


# -- the spec-class table ---------------------------------------------------------------


def kinds(*specs: object) -> list[tuple[str, int | None]]:
    return [(s.kind, s.sliding_window) for s in adapter.group_specs(config(*specs))]


def test_the_table_maps_each_class_as_vllms_registry_picks_its_manager():
    mla = MLAAttentionSpec(block_size=B, num_kv_heads=1, head_size=8, dtype=torch.float32)
    hidden = HiddenStateCacheSpec(block_size=B, num_kv_heads=1, head_size=8, dtype=torch.float32)
    sink = SinkFullAttentionSpec(block_size=B, sink_len=2 * B, **ATTN)
    swmla = SlidingWindowMLASpec(
        block_size=B, sliding_window=8, num_kv_heads=1, head_size=8, dtype=torch.float32
    )
    assert kinds(mla, hidden, sink, swmla) == [
        ("full", None),
        ("full", None),
        ("full", None),
        ("sliding", 8),
    ]
    # The hybrid allocator off: a sliding window computed in a full-attention group keeps
    # every token's slot, as vLLM's FullAttentionManager does.
    assert kinds(full(sliding_window=8)) == [("full", None)]
    # extra_retained_tokens E: a window of W + E.
    assert kinds(swa(8, extra=3)) == [("sliding", 11)]
    # UniformTypeKVCacheSpecs: its first layer's spec, as vLLM's scheduler config has it.
    uniform = UniformTypeKVCacheSpecs(block_size=B, kv_cache_specs={"a": swa(8), "b": swa(8)})
    assert kinds(uniform) == [("sliding", 8)]


def test_the_table_refuses_by_name_what_no_livetail_kind_mirrors():
    bounded = SlidingWindowMLASpec(
        block_size=B,
        sliding_window=8,
        num_kv_heads=1,
        head_size=8,
        dtype=torch.float32,
        bounded_replay=True,
    )
    with pytest.raises(NotImplementedError, match="bounded replay"):
        adapter.group_specs(config(bounded))
    # vLLM's promoted chunked layers share the full-attention group: full, as in vLLM.
    assert kinds(full(attention_chunk_size=8)) == [("full", None)]
    with pytest.raises(ValueError, match="sink_len 3 must be a positive multiple"):
        adapter.group_specs(config(SinkFullAttentionSpec(block_size=B, sink_len=3, **ATTN)))


@pytest.mark.parametrize("extra", [0, 1, 3, 6])
def test_extra_retained_tokens_reclaim_exactly_as_vllms_sliding_manager(extra: int):
    # vLLM skips the tokens below num_computed - W + 1 - E: a window of W + E reclaims the same.
    mine = build(adapter.KVCacheManager, full(), swa(5, extra))
    ref = build(VllmManager, full(), swa(5, extra))
    for m in (mine, ref):
        m.allocate_slots(request("a", list(range(33))), 32)
    for done in range(1, 33):
        for m in (mine, ref):
            m.remove_skipped_blocks("a", done)
        holes = [[p == 0 for p in m.get_block_ids("a")[1]] for m in (mine, ref)]
        assert holes[0] == holes[1], done


# -- lookahead slots ----------------------------------------------------------------------


def test_lookahead_slots_are_acquired_capped_and_never_counted_twice():
    m = build(adapter.KVCacheManager, full(), num_blocks=22)
    r = request("a", list(range(10)))
    assert m.allocate_slots(r, 10, num_lookahead_tokens=3).get_block_ids() == ([1, 2, 3, 4],)
    # Only verified tokens are named: 2 full pages of the 10-token prompt, not the drafts'.
    assert [m.pool.name(p) is not None for p in (1, 2, 3, 4)] == [True, True, False, False]
    free = m.block_pool.get_num_free_blocks()
    r.num_computed_tokens = 10
    r.append_output_token_ids(10)
    assert m.allocate_slots(r, 1, num_lookahead_tokens=3).get_block_ids() == ([],)
    # Two drafts accepted, one rejected: the next step's slots reuse the rejected one's.
    r.num_computed_tokens = 12
    r.append_output_token_ids([11, 12])
    assert m.allocate_slots(r, 1, num_lookahead_tokens=3).get_block_ids() == ([],)
    assert m.block_pool.get_num_free_blocks() == free
    r.num_computed_tokens = 13
    r.append_output_token_ids(13)
    assert m.allocate_slots(r, 1, num_lookahead_tokens=3).get_block_ids() == ([5],)
    assert m.block_pool.get_num_free_blocks() == free - 1
    # Capped at max_model_len (64 tokens = 16 pages), as vLLM caps it.
    long = request("b", list(range(60)))
    assert len(m.allocate_slots(long, 60, num_lookahead_tokens=8).get_block_ids()[0]) == 16


def test_lookahead_acquires_as_many_pages_as_vllms_manager():
    mine = build(adapter.KVCacheManager, full(), swa(5))
    ref = build(VllmManager, full(), swa(5))
    for m in (mine, ref):
        r = request("a", list(range(9)))
        m.allocate_slots(r, 9, num_lookahead_tokens=4)
        r.num_computed_tokens = 9
        r.append_output_token_ids(9)
        m.allocate_slots(r, 1, num_lookahead_tokens=4)
    assert mine.block_pool.get_num_free_blocks() == ref.block_pool.get_num_free_blocks()
    assert [len(x) for x in mine.get_block_ids("a")] == [len(x) for x in ref.get_block_ids("a")]


def test_live_tail_with_speculation_is_refused_by_name():
    with pytest.raises(NotImplementedError, match=r"live tail .* speculative decoding \(use_eagle"):
        build(adapter.KVCacheManager, full(), swa(8), use_eagle=True, live_tail_groups=[1])
    m = build(adapter.KVCacheManager, full(), swa(8), live_tail_groups=[1])
    with pytest.raises(NotImplementedError, match=r"speculative decoding \(num_lookahead_tokens"):
        m.allocate_slots(request("a", list(range(8))), 8, num_lookahead_tokens=2)
    assert m.block_pool.get_num_free_blocks() == 40


# -- EAGLE's block drop, beside vLLM's --------------------------------------------------


def hits(cls: type, specs: tuple, evict: tuple[int, ...], use_eagle: bool) -> int:
    """Hit of a second request for a 17-token prompt the first computed, with the first's
    pages of the given slots of the last group evicted."""
    m = build(cls, *specs, use_eagle=use_eagle)
    tokens = list(range(17))
    m.allocate_slots(request("a", tokens), 17)
    ids = m.get_block_ids("a")[-1]
    m.evict_blocks({ids[j] for j in evict})
    _, n, _ = m.get_computed_blocks(request("b", tokens))
    return n


def test_eagle_drop_on_a_full_group_drops_one_page():
    assert hits(adapter.KVCacheManager, (full(),), (), False) == 16
    assert hits(adapter.KVCacheManager, (full(),), (), True) == 12
    assert hits(adapter.KVCacheManager, (full(),), (2,), True) == 4


@pytest.mark.parametrize("window", [2, 5, 8, 9])
@pytest.mark.parametrize("use_eagle", [False, True])
def test_hits_with_and_without_eagle_equal_vllms_on_full_plus_sliding(window, use_eagle):
    specs = (full(), swa(window))
    for k in range(4):
        for evict in itertools.combinations(range(4), k):
            mine = hits(adapter.KVCacheManager, specs, evict, use_eagle)
            assert mine == hits(VllmManager, specs, evict, use_eagle), evict


@pytest.mark.parametrize("extra", [1, 3, 6])
def test_extra_retained_tokens_hits_are_never_longer_than_vllms(extra: int):
    specs = (full(), swa(5, extra))
    shorter = 0
    for k in range(4):
        for evict in itertools.combinations(range(4), k):
            mine = hits(adapter.KVCacheManager, specs, evict, False)
            ref = hits(VllmManager, specs, evict, False)
            assert mine <= ref, evict
            shorter += mine < ref
    # The window of W + E asks more pages behind a boundary: some patterns hit shorter.
    assert shorter > 0


def test_prefill_lookahead_holds_back_the_reprefillable_tokens_names():
    m = build(adapter.KVCacheManager, full(), use_eagle=True, num_prefill_lookahead=3)
    assert m.coordinator.num_reprefillable_tokens == 2
    m.allocate_slots(request("a", list(range(13))), 10)
    # 10 computed, the last 2 may be re-prefilled: 8 named tokens = 2 pages, as vLLM names.
    ref = build(VllmManager, full(), use_eagle=True, num_prefill_lookahead=3)
    ref.allocate_slots(request("a", list(range(13))), 10)
    named = [m.pool.name(p) is not None for p in m.get_block_ids("a")[0]]
    assert named == [True, True, False]
    assert ref.coordinator.get_num_cacheable_tokens(10, 0) == 8
    with pytest.raises(ValueError, match="scheduler_block_size"):
        build(adapter.KVCacheManager, full(), use_eagle=True, num_prefill_lookahead=5)


def test_block_pool_view_carries_the_hash_block_size_and_looks_pages_up_by_hash():
    m = build(adapter.KVCacheManager, full(), swa(5))
    assert m.block_pool.hash_block_size == B
    r = request("a", list(range(9)))
    m.allocate_slots(r, 9)
    ids = m.get_block_ids("a")
    pool = m.coordinator.single_type_managers[1].block_pool
    assert pool is m.block_pool
    found = pool.get_cached_block(r.block_hashes[1], [0, 1])
    assert [b.block_id for b in found] == [ids[0][1], ids[1][1]]
    m.evict_blocks({ids[1][1]})
    assert pool.get_cached_block(r.block_hashes[1], [0, 1]) is None
    assert [b.block_id for b in pool.get_cached_block(r.block_hashes[1], [0])] == [ids[0][1]]
    assert pool.get_cached_block(b"\0" * 32, [0]) is None


# -- live_tail_groups across the engine-core process boundary ----------------------------


def test_live_tail_groups_reach_another_process_through_the_environment():
    code = (
        "import torch\n"
        "from livetail.vllm import KVCacheManager\n"
        "from vllm.v1.kv_cache_interface import *\n"
        "a = dict(block_size=4, num_kv_heads=1, head_size=1, dtype=torch.float32)\n"
        "g = [KVCacheGroupSpec(['f'], FullAttentionSpec(**a)),\n"
        "     KVCacheGroupSpec(['s'], SlidingWindowSpec(sliding_window=8, **a))]\n"
        "c = KVCacheConfig(num_blocks=9, kv_cache_tensors=[], kv_cache_groups=g)\n"
        "m = KVCacheManager(c, max_model_len=64, scheduler_block_size=4, hash_block_size=4)\n"
        "print([s.live_tail_alloc for s in m.specs])\n"
    )

    def run(value: str | None) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ)
        env.pop("LIVETAIL_LIVE_TAIL_GROUPS", None)
        if value is not None:
            env["LIVETAIL_LIVE_TAIL_GROUPS"] = value
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)

    assert run("1").stdout.strip() == "[False, True]"
    assert run(None).stdout.strip() == "[False, False]"
    bad = run("0")
    assert bad.returncode != 0 and "group 0 is not a sliding-window group" in bad.stderr
    assert "expected comma-separated group indices" in run("x").stderr
