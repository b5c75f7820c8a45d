"""vLLM's KV-cache groups as livetail group specs, vLLM's block hashes as livetail keys, and
the one error for every vLLM feature the adapter refuses (with the record of what was hit).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from vllm.v1.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheSpec,
    MambaSpec,
    SlidingWindowSpec,
)

import livetail

KEY_BYTES = 32
# Prefix of the digest that turns a vLLM block hash of another length into a livetail key.
KEY_DERIVATION_PREFIX = b"livetail.vllm key\x00"


# What the managers built so far saw, for a test harness to read and clear: the group spec
# class names of every manager (one entry per manager) and every unsupported feature hit.
built_layouts: list[str] = []
unsupported_hits: list[str] = []


def unsupported(feature: str) -> NotImplementedError:
    """The one error the adapter raises for a vLLM feature it does not implement."""
    unsupported_hits.append(feature)
    return NotImplementedError(f"livetail.vllm does not support {feature}")


def layout_of(kv_cache_config: KVCacheConfig) -> str:
    """The groups' spec class names, joined by '+' (e.g. 'FullAttentionSpec')."""
    return "+".join(type(g.kv_cache_spec).__name__ for g in kv_cache_config.kv_cache_groups)


def key_of(block_hash: bytes) -> bytes:
    """The 32-byte livetail key of one vLLM block hash.

    vLLM's default hash (sha256) gives 32 bytes: used as is. Other algorithms
    (sha256_cbor_64bit, xxhash) give other lengths: the key is then SHA-256 over
    ``KEY_DERIVATION_PREFIX || hash``, which keeps the chain property (the hash already
    depends on every token before it) and is the same in every process.
    """
    if len(block_hash) == KEY_BYTES:
        return bytes(block_hash)
    return hashlib.sha256(KEY_DERIVATION_PREFIX + bytes(block_hash)).digest()


def _exact(spec: KVCacheSpec, cls: type) -> bool:
    return type(spec) is cls


def group_specs(
    kv_cache_config: KVCacheConfig, live_tail_groups: Iterable[int] = ()
) -> list[livetail.GroupSpec]:
    """livetail's group specs for vLLM's KV-cache groups; NotImplementedError for the rest.

    ``live_tail_groups``: indices of sliding-window groups whose kernels read the chunk
    being computed from activations, never from its pages (conv-style, or attention with a
    ragged + paged prefill). Only those get live-tail allocation; vLLM's standard attention
    writes the chunk into its pages and reads it back, so it must keep it off.
    """
    live = set(live_tail_groups)
    out: list[livetail.GroupSpec] = []
    for g, group in enumerate(kv_cache_config.kv_cache_groups):
        spec = group.kv_cache_spec
        name = type(spec).__name__
        if getattr(group, "is_eagle_group", False):
            raise unsupported(f"EAGLE draft-model KV-cache groups (group {g})")
        if getattr(group, "host_resident", False):
            raise unsupported(f"host-resident KV-cache groups (group {g})")
        if _exact(spec, FullAttentionSpec):
            if spec.attention_chunk_size is not None:
                raise unsupported(f"chunked local attention (group {g})")
            if spec.sliding_window is not None:
                raise unsupported(
                    f"sliding window computed in a full-attention group (group {g}, "
                    "hybrid allocator off)"
                )
            if getattr(spec, "non_causal", False):
                raise unsupported(f"non-causal attention (group {g})")
            if g in live:
                raise ValueError(f"live_tail_groups: group {g} is not a sliding-window group")
            out.append(livetail.GroupSpec("full", spec.block_size))
        elif _exact(spec, SlidingWindowSpec):
            if spec.extra_retained_tokens:
                raise unsupported(f"extra retained sliding-window tokens (group {g})")
            out.append(
                livetail.GroupSpec(
                    "sliding",
                    spec.block_size,
                    sliding_window=spec.sliding_window,
                    live_tail_alloc=g in live,
                )
            )
        elif _exact(spec, MambaSpec):
            if spec.mamba_cache_mode != "none":
                raise unsupported(f"Mamba cache mode {spec.mamba_cache_mode!r} (group {g})")
            if spec.num_speculative_blocks or spec.num_prefill_checkpoint_blocks:
                raise unsupported(f"Mamba speculative or checkpoint blocks (group {g})")
            if g in live:
                raise ValueError(f"live_tail_groups: group {g} is not a sliding-window group")
            out.append(livetail.GroupSpec("state", spec.block_size))
        else:
            raise unsupported(f"{name} KV-cache groups (group {g})")
    bad = sorted(live - set(range(len(out))))
    if bad:
        raise ValueError(f"live_tail_groups: no group {bad[0]}")
    return out
