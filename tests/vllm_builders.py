"""Builders shared by the tests of livetail.vllm: vLLM 0.33 specs, configs, managers and
requests at a small page size (imported only by tests that have skipped without vLLM)."""

from __future__ import annotations

from typing import Any

import torch
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    SlidingWindowSpec,
)
from vllm.v1.request import Request

B = 4
ATTN: dict[str, Any] = dict(num_kv_heads=1, head_size=1, dtype=torch.float32)
init_none_hash(sha256)


def full(block_size: int = B, **kw: Any) -> FullAttentionSpec:
    return FullAttentionSpec(block_size=block_size, **ATTN, **kw)


def swa(window: int, extra: int = 0, block_size: int = B) -> SlidingWindowSpec:
    return SlidingWindowSpec(
        block_size=block_size, sliding_window=window, extra_retained_tokens=extra, **ATTN
    )


def config(*specs: Any, num_blocks: int = 41) -> KVCacheConfig:
    groups = [KVCacheGroupSpec([f"layer{i}"], s) for i, s in enumerate(specs)]
    return KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)


def build(cls: type, *specs: Any, num_blocks: int = 41, block_size: int = B, **kw: Any) -> Any:
    """A manager of class ``cls`` (vLLM's or the adapter's) over ``specs``."""
    kw.setdefault("scheduler_block_size", block_size)
    kw.setdefault("hash_block_size", block_size)
    return cls(config(*specs, num_blocks=num_blocks), max_model_len=64, **kw)


def request(rid: str, tokens: list[int], block_size: int = B, **kw: Any) -> Request:
    return Request(
        request_id=rid,
        prompt_token_ids=tokens,
        sampling_params=SamplingParams(max_tokens=4, **kw),
        pooling_params=None,
        block_hasher=get_request_block_hasher(block_size, sha256),
    )
