"""vLLM's KV-cache groups as livetail group specs, vLLM's block hashes as livetail keys, and
the one error for every vLLM feature the adapter refuses (with the record of what was hit).

``SPEC_KINDS`` is the one table from a vLLM spec class to a livetail group (as vLLM's
``register_all_kvcache_specs`` maps spec classes to managers): a new spec class is one line.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from vllm.v1.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    HiSparseHotSpec,
    HiSparseResidentSpec,
    KVCacheConfig,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    RSWASpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
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


# -- one function per livetail kind: (vLLM spec, group index, live tail?) -> GroupSpec ------

_Mapper = Callable[[KVCacheSpec, int, bool], livetail.GroupSpec]


def _not_sliding(g: int, live: bool) -> None:
    if live:
        raise ValueError(f"live_tail_groups: group {g} is not a sliding-window group")


def _full(spec: KVCacheSpec, g: int, live: bool) -> livetail.GroupSpec:
    """vLLM's FullAttentionManager: every token keeps its slot. A ``sliding_window`` or an
    ``attention_chunk_size`` on a full-attention spec (vLLM promotes sliding and chunked
    layers so when the hybrid allocator is off) is computed by the kernel only: vLLM puts
    those layers in one group with the full-attention layers, its manager allocates and keeps
    every token's slot, and so does this group (docs/decisions.md, "Chunked local
    attention"). ``non_causal`` changes the engine's scheduling policy only, not the layout."""
    assert isinstance(spec, FullAttentionSpec)
    _not_sliding(g, live)
    return livetail.GroupSpec("full", spec.block_size)


def _chunked(spec: KVCacheSpec, g: int, live: bool) -> livetail.GroupSpec:
    """vLLM's ChunkedLocalAttentionManager: livetail's kind ``chunked`` (semantics 13.2),
    whose hit and reclaim rules are that manager's."""
    assert isinstance(spec, ChunkedLocalAttentionSpec)
    _not_sliding(g, live)
    return livetail.GroupSpec(
        "chunked", spec.block_size, attention_chunk_size=spec.attention_chunk_size
    )


def _sink_full(spec: KVCacheSpec, g: int, live: bool) -> livetail.GroupSpec:
    """vLLM's SinkFullAttentionManager: a full-attention manager that checks the sink."""
    assert isinstance(spec, SinkFullAttentionSpec)
    sink = spec.sink_len
    if sink is None or sink <= 0 or sink % spec.block_size:
        raise ValueError(
            f"group {g}: sink_len {sink} must be a positive multiple of the block size "
            f"{spec.block_size}"
        )
    return _full(spec, g, live)


def _sliding(spec: KVCacheSpec, g: int, live: bool) -> livetail.GroupSpec:
    """vLLM's SlidingWindowManager. ``extra_retained_tokens`` E: vLLM skips (frees) the
    tokens below ``num_computed - W + 1 - E``, which is a window of W + E for reclaim; the
    group is a livetail sliding group of window W + E. Its hits need the pages of the last
    W + E - 1 tokens behind a boundary where vLLM needs W - 1: never a longer hit than
    vLLM's (docs/decisions.md)."""
    assert isinstance(spec, SlidingWindowSpec)
    if isinstance(spec, SlidingWindowMLASpec) and spec.bounded_replay:
        raise unsupported(
            f"bounded replay (group {g}: SlidingWindowMLASpec(bounded_replay=True) takes no "
            "part in prefix caching, and a hit must give it fresh pages for the window the "
            "engine replays; the core's claim only shares named pages)"
        )
    return livetail.GroupSpec(
        "sliding",
        spec.block_size,
        sliding_window=spec.sliding_window + spec.extra_retained_tokens,
        live_tail_alloc=live,
    )


def _state(spec: KVCacheSpec, g: int, live: bool) -> livetail.GroupSpec:
    """vLLM's MambaManager. Mode "none": one state page per request. Mode "align" (prefix
    caching): a state group with live tail (semantics 13.5), one real page per step for the
    running state, plus the checkpoint one page behind it when the layers export prefill
    checkpoints (``num_prefill_checkpoint_blocks``; vLLM writes one only where the
    checkpoint alignment divides the block size)."""
    assert isinstance(spec, MambaSpec)
    _not_sliding(g, live)
    if spec.mamba_cache_mode not in ("none", "align"):
        raise unsupported(f"Mamba cache mode {spec.mamba_cache_mode!r} (group {g})")
    if spec.mamba_cache_mode == "none":
        if spec.num_speculative_blocks or spec.num_prefill_checkpoint_blocks:
            raise unsupported(f"Mamba speculative or checkpoint blocks (group {g})")
        return livetail.GroupSpec("state", spec.block_size)
    if spec.num_speculative_blocks:
        raise unsupported(f'Mamba "align" mode with speculative blocks (group {g})')
    align = spec.prefill_checkpoint_alignment
    if spec.num_prefill_checkpoint_blocks == 0 or align is None:
        # The core has the group (live tail without checkpoints); not yet compared with
        # vLLM step by step, so refused: every model vLLM 0.33 ships exports checkpoints.
        raise unsupported(f'Mamba "align" mode without prefill checkpoint blocks (group {g})')
    if spec.block_size % align:
        raise unsupported(
            f'Mamba "align" mode with a prefill checkpoint alignment {align} that does not '
            f"divide the block size {spec.block_size} (group {g})"
        )
    return livetail.GroupSpec("state", spec.block_size, live_tail_alloc=True, checkpoints=True)


def _refused(feature: str) -> _Mapper:
    def refuse(spec: KVCacheSpec, g: int, live: bool) -> livetail.GroupSpec:
        raise unsupported(f"{feature} (group {g}: {type(spec).__name__})")

    return refuse


# vLLM spec class (exact type) -> its livetail group. A class not listed is refused by name.
SPEC_KINDS: dict[type[KVCacheSpec], _Mapper] = {
    FullAttentionSpec: _full,
    MLAAttentionSpec: _full,
    HiddenStateCacheSpec: _full,
    SinkFullAttentionSpec: _sink_full,
    SlidingWindowSpec: _sliding,
    SlidingWindowMLASpec: _sliding,
    MambaSpec: _state,
    ChunkedLocalAttentionSpec: _chunked,
    CrossAttentionSpec: _refused("cross attention (encoder-decoder models)"),
    EncoderOnlyAttentionSpec: _refused("encoder-only attention groups"),
    RSWASpec: _refused("reference sliding window (R-SWA: gap pages between prompt and window)"),
    CircularBufferSpec: _refused("circular-buffer groups (one ring page per request)"),
    HiSparseHotSpec: _refused("HiSparse groups"),
    HiSparseResidentSpec: _refused("HiSparse groups"),
}


def scheduler_spec(spec: KVCacheSpec) -> KVCacheSpec:
    """The spec vLLM's scheduler manages a group by: a ``UniformTypeKVCacheSpecs`` (every
    layer of one type) by its first layer's, as vLLM's generate_scheduler_kv_cache_config
    does before its manager is built."""
    if isinstance(spec, UniformTypeKVCacheSpecs):
        return spec.first_spec
    return spec


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
    groups = kv_cache_config.kv_cache_groups
    bad = sorted(live - set(range(len(groups))))
    if bad:
        raise ValueError(f"live_tail_groups: no group {bad[0]}")
    out: list[livetail.GroupSpec] = []
    for g, group in enumerate(groups):
        if getattr(group, "host_resident", False):
            raise unsupported(f"host-resident KV-cache groups (group {g})")
        if getattr(group, "role", "default") not in ("default", None):
            raise unsupported(f"KV-cache group role {group.role!r} (group {g})")
        spec = scheduler_spec(group.kv_cache_spec)
        mapper = SPEC_KINDS.get(type(spec))
        if mapper is None:
            raise unsupported(f"{type(spec).__name__} KV-cache groups (group {g})")
        out.append(mapper(spec, g, g in live))
    return out


# The environment variable that names the live-tail groups in the process that builds the
# manager (vLLM's engine core runs in its own process): comma-separated group indices.
LIVE_TAIL_GROUPS_ENV = "LIVETAIL_LIVE_TAIL_GROUPS"


def live_tail_groups_from_env() -> tuple[int, ...] | None:
    """The groups ``LIVETAIL_LIVE_TAIL_GROUPS`` names, None when it is unset or empty."""
    text = os.environ.get(LIVE_TAIL_GROUPS_ENV, "").strip()
    if not text:
        return None
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise ValueError(
            f"{LIVE_TAIL_GROUPS_ENV}={text!r}: expected comma-separated group indices"
        ) from None


def retention_alignment(kv_cache_config: KVCacheConfig, specs: Sequence[Any]) -> int | None:
    """The Coordinator's alignment (semantics 13.9) from vLLM's retention interval.

    vLLM's ``prefix_cache_retention_interval``: a positive value retains sliding-window and
    Mamba checkpoints every that many tokens: the alignment, when it is a multiple of the
    groups' lcm (else a named refusal: hits could not land on it). ``None`` (dense) and ``0``
    (vLLM keeps only its replay boundaries and shared-prefix junctions, which livetail does
    not track) give the lcm: the densest alignment, so never fewer hits than vLLM keeps.
    """
    interval = getattr(kv_cache_config, "prefix_cache_retention_interval", None)
    if not interval:
        return None
    lcm = 1
    for s in specs:
        lcm = lcm * s.block_size // math.gcd(lcm, s.block_size)
    if interval % lcm:
        raise unsupported(
            f"prefix_cache_retention_interval {interval} that is not a multiple of the "
            f"groups' lcm page size {lcm}"
        )
    return int(interval)


def drop_eagle_block(
    c: livetail.Coordinator, keys: list[bytes], match: livetail.PrefixMatch, lcm: int, per_key: int
) -> livetail.PrefixMatch:
    """vLLM's drop_eagle_block: match over the keys, then drop the last step of the hit.

    The step is the coordinator's alignment A (semantics 13.9: the lcm L of the page sizes,
    vLLM's scheduler block size, unless vLLM's retention interval sets a multiple of it), as
    hits land only on multiples of A: the hit is T - A for the greatest boundary T that both
    T and T - A are resumable at (semantics 13.3 with A for L). For a full group T's pages
    contain T - A's; for a sliding group that is the run of pages behind T - A plus the
    page(s) up to T: longer than a hit at T - A alone needs, as vLLM's SlidingWindowManager
    asks cdiv(W - 1, B) + 1 contiguous blocks and pops one.

    Each turn either returns or moves T down to the greatest resumable boundary below T - A,
    so it matches at most once per multiple of A below the first hit.
    """
    step = int(c.alignment)
    if step % lcm:
        raise ValueError(f"the coordinator's alignment {step} is not a multiple of the lcm {lcm}")
    t = int(match.num_tokens)
    while t > step:
        below = c.match_prefix(keys[: (t - step) // per_key])
        if int(below.num_tokens) == t - step:
            return below
        t = int(below.num_tokens)  # the greatest resumable boundary below t - A
    return c.match_prefix([])
