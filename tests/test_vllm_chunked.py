"""livetail.vllm on chunked local attention (Llama 4's layout): vLLM's
``ChunkedLocalAttentionSpec`` is livetail's kind ``chunked`` (semantics 13.2), with the hits of
vLLM's ``ChunkedLocalAttentionManager`` exactly (needs vllm and torch)."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

from livetail import vllm as adapter  # noqa: E402
from vllm.utils.hashing import sha256  # noqa: E402
from vllm.v1.core import kv_cache_planning  # noqa: E402
from vllm.v1.core.kv_cache_manager import KVCacheManager as VllmKVCacheManager  # noqa: E402
from vllm.v1.core.kv_cache_utils import init_none_hash  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
)
from vllm.v1.request import Request  # noqa: E402
from vllm_builders import request  # noqa: E402

B = 4
C = 8  # attention_chunk_size: two pages
init_none_hash(sha256)


def full() -> FullAttentionSpec:
    return FullAttentionSpec(block_size=B, num_kv_heads=1, head_size=1, dtype=torch.float32)


def chunked() -> ChunkedLocalAttentionSpec:
    return ChunkedLocalAttentionSpec(
        block_size=B, num_kv_heads=1, head_size=1, dtype=torch.float32, attention_chunk_size=C
    )


def config(*specs: object, num_blocks: int = 64) -> KVCacheConfig:
    groups = [KVCacheGroupSpec([f"layer{i}"], s) for i, s in enumerate(specs)]
    return KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)


def managers(*specs: object, num_blocks: int = 64) -> tuple[object, object]:
    kw = dict(max_model_len=256, scheduler_block_size=B, hash_block_size=B)
    return (
        adapter.KVCacheManager(config(*specs, num_blocks=num_blocks), **kw),
        VllmKVCacheManager(config(*specs, num_blocks=num_blocks), **kw),
    )


def prefill(m: object, r: Request) -> None:
    """The whole prompt in one chunk, its blocks cached, then the request finished."""
    blocks, hit, _ = m.get_computed_blocks(r)
    new = r.num_tokens - hit
    assert m.allocate_slots(r, new, hit, blocks if hit else None) is not None
    r.num_computed_tokens = r.num_tokens
    m.free(r)


def test_chunked_local_attention_is_the_chunked_kind():
    specs = adapter.group_specs(config(full(), chunked()))
    assert [(s.kind, s.block_size, s.attention_chunk_size, s.live_tail_alloc) for s in specs] == [
        ("full", B, None, False),
        ("chunked", B, C, False),
    ]
    with pytest.raises(ValueError, match="group 1 is not a sliding-window group"):
        adapter.group_specs(config(full(), chunked()), live_tail_groups=[1])


def test_promoted_chunked_layers_share_the_full_group_and_stay_full():
    # With the hybrid allocator off, vLLM promotes a chunked layer to FullAttentionSpec
    # (attention_chunk_size kept) and merges it with the full layers into one group, which
    # its FullAttentionManager serves: the group holds full-attention layers, so it keeps
    # every slot, and so does livetail's.
    layers = {"l0": full(), "l1": chunked(), "l2": chunked()}
    kv_cache_planning.unify_hybrid_kv_cache_specs(layers)
    merged = FullAttentionSpec.merge(list(layers.values()))
    assert type(merged) is FullAttentionSpec and merged.attention_chunk_size == C
    (spec,) = adapter.group_specs(config(merged))
    assert (spec.kind, spec.block_size, spec.attention_chunk_size) == ("full", B, None)


def _hit(m: object, tokens: list[int], rid: str) -> int:
    return int(m.get_computed_blocks(request(rid, tokens))[1])


@pytest.mark.parametrize("layout", ["chunked", "full+chunked"])
def test_hits_equal_vllms_chunked_local_attention_manager(layout: str) -> None:
    specs = [chunked()] if layout == "chunked" else [full(), chunked()]
    ours, theirs = managers(*specs)
    cached = list(range(1000, 1022))  # 22 tokens: pages 0-4 full, named
    for m in (ours, theirs):
        prefill(m, request("seed", cached))
    seen = []
    for n in range(1, 30):
        for shared in (0, 5, 10, 13, 16, 22):
            tokens = cached[:shared] + list(range(2000, 2000 + n - min(n, shared)))
            tokens = tokens[:n]
            got = _hit(ours, tokens, f"r{n}-{shared}")
            assert got == _hit(theirs, tokens, f"v{n}-{shared}"), (n, shared)
            seen.append((n, shared, got))
    by = {(n, s): h for n, s, h in seen}
    # Hand-derived from semantics 13.2 (B = 4, C = 8; a lookup stops at n - 1 tokens): a
    # boundary T needs the pages of [floor(T / 8) * 8, T), so a multiple of 8 needs none.
    # Chunked only: the seed itself resumed at 16 (no page needed) and computed, so named,
    # only the pages from token 16 on (page 4 whole). With a full group it hit nothing and
    # named pages 0-4.
    alone = layout == "chunked"
    assert by[(22, 22)] == 20  # page 4 named in both layouts
    assert by[(14, 13)] == (8 if alone else 12)  # T = 12 needs page 2
    assert by[(18, 0)] == (16 if alone else 0)
    assert by[(26, 10)] == (24 if alone else 8)  # tokens 8-9 only: page 2 is not shared


def test_admission_and_reclaim_follow_the_chunk():
    # One chunked group, 41-page pool (page 0 is null): a 40-token prompt in 8-token chunks.
    ours, theirs = managers(chunked(), num_blocks=11)
    for m in (ours, theirs):
        r = request("a", list(range(40)))
        done = 0
        held = []
        while done < 40:
            got = m.allocate_slots(r, 8)
            assert got is not None
            done += 8
            r.num_computed_tokens = done
            m.remove_skipped_blocks("a", done)
            held.append([b.block_id for b in m.get_blocks("a").blocks[0]])
        # After each chunk ends on a multiple of C the whole chunk is out of every later
        # window: every page below it is the null block (id 0), as vLLM frees them.
        assert [sum(1 for p in ids if p) for ids in held] == [0, 0, 0, 0, 0]
        assert [len(ids) for ids in held] == [2, 4, 6, 8, 10]
        m.free(r)
    # A chunk that ends inside a C-chunk keeps the pages of that C-chunk only.
    ours, theirs = managers(chunked(), num_blocks=11)
    for m in (ours, theirs):
        r = request("b", list(range(40)))
        assert m.allocate_slots(r, 14) is not None
        r.num_computed_tokens = 14
        m.remove_skipped_blocks("b", 14)
        ids = [b.block_id for b in m.get_blocks("b").blocks[0]]
        assert [p != 0 for p in ids] == [False, False, True, True]
        # 10 pages free before: the two reclaimed are back, two held.
        assert m.block_pool.get_num_free_blocks() == 8
    # Admission of the whole prompt (vLLM's full_sequence_must_fit) in chunks of at most K
    # tokens, reclaimed before each: the worst chunking straddles a C-chunk boundary, e.g.
    # [6, 14) with K = 8 holds the pages of tokens 0-15 (4 pages), which is also vLLM's cap
    # ceil((C + K) / B); with K = 12, [6, 18) holds those of tokens 0-19 (5 pages). The smallest
    # pool (page 0 is the null block) is the same on both managers, not 10 pages + 1.
    for k, pages in ((8, 4), (12, 5)):
        for cls in (adapter.KVCacheManager, VllmKVCacheManager):
            assert _smallest_admitting(cls, 40, k) == 1 + pages, (cls, k)


def _smallest_admitting(cls: type, n: int, k: int) -> int:
    for num_blocks in range(1, 32):
        m = cls(
            config(chunked(), num_blocks=num_blocks),
            max_model_len=256,
            scheduler_block_size=B,
            hash_block_size=B,
            max_in_flight_tokens=k,
        )
        if m.allocate_slots(request("c", list(range(n))), k, full_sequence_must_fit=True):
            return num_blocks
    raise AssertionError("no pool admits it")
