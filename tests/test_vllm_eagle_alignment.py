"""EAGLE's block drop under a retention interval above the lcm (semantics 13.3 and 13.9): the
hit steps down by the coordinator's alignment (needs vllm and torch)."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

from livetail import vllm as adapter  # noqa: E402
from vllm.utils.hashing import sha256  # noqa: E402
from vllm.v1.core.kv_cache_utils import init_none_hash  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    SlidingWindowSpec,
)
from vllm_builders import request  # noqa: E402

B = 4
A = 8  # prefix_cache_retention_interval: two pages, the lcm is one
ATTN = dict(num_kv_heads=1, head_size=1, dtype=torch.float32)
init_none_hash(sha256)


def manager(*specs: object, use_eagle: bool, interval: int | None = A) -> adapter.KVCacheManager:
    groups = [KVCacheGroupSpec([f"layer{i}"], s) for i, s in enumerate(specs)]
    cfg = KVCacheConfig(num_blocks=41, kv_cache_tensors=[], kv_cache_groups=groups)
    cfg.prefix_cache_retention_interval = interval
    return adapter.KVCacheManager(
        cfg, max_model_len=64, scheduler_block_size=B, hash_block_size=B, use_eagle=use_eagle
    )


def hit(m: adapter.KVCacheManager, evict: tuple[int, ...] = ()) -> int:
    """A second request's hit on a 33-token prompt the first computed, with the first's pages
    of the given slots of the last group evicted (a lookup reads at most 32 tokens: 8 keys)."""
    tokens = list(range(33))
    assert m.allocate_slots(request("a", tokens), 33) is not None
    ids = m.get_block_ids("a")[-1]
    m.evict_blocks({ids[j] for j in evict})
    return int(m.get_computed_blocks(request("b", tokens))[1])


FULL = FullAttentionSpec(block_size=B, **ATTN)  # type: ignore[arg-type]
SWA = SlidingWindowSpec(block_size=B, sliding_window=5, **ATTN)  # type: ignore[arg-type]


def test_the_drop_is_one_alignment_step_on_a_full_group():
    assert manager(FULL, use_eagle=False).livetail_coordinator.alignment == A
    # Boundaries are multiples of 8: 32 without EAGLE; with it T = 32 and T - 8 = 24 both
    # resumable, so 24 (a step of the lcm, 28, is no boundary of this coordinator).
    assert hit(manager(FULL, use_eagle=False)) == 32
    assert hit(manager(FULL, use_eagle=True)) == 24
    # Slot 5 (tokens 20-23) gone: 24 and 32 are not resumable, 16 is; T = 16, T - 8 = 8.
    assert hit(manager(FULL, use_eagle=False), (5,)) == 16
    assert hit(manager(FULL, use_eagle=True), (5,)) == 8
    # The lcm alignment keeps the one-page drop (32 - 4).
    assert hit(manager(FULL, use_eagle=True, interval=None)) == 28


def test_the_drop_skips_a_boundary_whose_sliding_resume_page_is_gone():
    # Sliding W = 5 needs the R = 1 slot behind a boundary; under alignment 8 only slots 1,
    # 3, 5 and 7 are named (semantics 13.4). All present: T = 32, T - 8 = 24 -> 24.
    assert hit(manager(FULL, SWA, use_eagle=True)) == 24
    # Slot 5 gone: 24 is not resumable. Without EAGLE 32 still is (slot 7); with it T = 32
    # fails (24 is not resumable), T = 24 is not resumable, T = 16 and 8 are: 8.
    assert hit(manager(FULL, SWA, use_eagle=False), (5,)) == 32
    assert hit(manager(FULL, SWA, use_eagle=True), (5,)) == 8
    # Slot 7 gone: 32 is not resumable; T = 24 and 16 are: 16.
    assert hit(manager(FULL, SWA, use_eagle=True), (7,)) == 16
