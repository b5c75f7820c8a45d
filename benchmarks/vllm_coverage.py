#!/usr/bin/env python3
"""Which model families livetail.vllm serves at vLLM 0.33's defaults: a coverage table.

For each family the KV-cache groups are built as vLLM 0.33's model code builds them (spec
classes, block sizes, windows and head sizes from the models' public configs; the manager
reads only the class, block size, window and mode), then ``livetail.vllm.KVCacheManager``
is constructed for each configuration and driven through two chunked prefills sharing a
prompt (the second hits the first's pages), with:

- "prefix caching": vLLM's defaults (prefix caching on, chunked prefill);
- "no prefix caching": prefix caching off (Mamba hybrids then use cache mode "none");
- "EAGLE / MTP": prefix caching on, ``use_eagle`` (EAGLE's block drop) and 3 lookahead slots
  a step;
- "KV connector": prefix caching on, 16 tokens loaded from outside.

A cell is "accepted" when every call succeeds, else the feature livetail.vllm's
``NotImplementedError`` names. Needs vLLM 0.33 and torch (scripts/vllm_env.sh's venv):

    python benchmarks/vllm_coverage.py [--markdown]

README's table ("Under vLLM's scheduler") is this script's --markdown output
(tests/test_vllm_coverage.py checks it).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable

import torch
from livetail.vllm import KVCacheManager
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
)
from vllm.v1.request import Request

MAX_MODEL_LEN = 4096
BF16 = torch.bfloat16
NIE = "livetail.vllm does not support "


def full(kv_heads: int, head: int, block: int = 16) -> FullAttentionSpec:
    return FullAttentionSpec(block_size=block, num_kv_heads=kv_heads, head_size=head, dtype=BF16)


def swa(kv_heads: int, head: int, window: int, block: int = 16) -> SlidingWindowSpec:
    return SlidingWindowSpec(
        block_size=block, num_kv_heads=kv_heads, head_size=head, dtype=BF16, sliding_window=window
    )


def mla(block: int = 64, **kw: object) -> MLAAttentionSpec:
    # kv_lora_rank 512 + qk_rope_head_dim 64: one 576-wide latent per token.
    return MLAAttentionSpec(block_size=block, num_kv_heads=1, head_size=576, dtype=BF16, **kw)


def mamba(caching: bool, attn_block: int) -> MambaSpec:
    # vLLM (MambaModelConfig): prefix caching on -> cache mode "align", page = attention's
    # block size; off -> mode "none", one page of max_model_len tokens.
    return MambaSpec(
        block_size=attn_block if caching else MAX_MODEL_LEN,
        shapes=((1,),),
        dtypes=(BF16,),
        mamba_cache_mode="align" if caching else "none",
        # Their layers export prefill checkpoints (GatedDeltaNet, MambaMixer2 in vLLM 0.33).
        num_prefill_checkpoint_blocks=1 if caching else 0,
        prefill_checkpoint_alignment=attn_block if caching else None,
    )


# family -> (public sizes it is built from, its groups given whether prefix caching is on)
FAMILIES: dict[str, tuple[str, Callable[[bool], list[KVCacheSpec]]]] = {
    "Llama 3 (8B, 70B)": ("full: 8 KV heads x 128", lambda c: [full(8, 128)]),
    "Mistral 7B / Qwen3": ("full: 8 KV heads x 128", lambda c: [full(8, 128)]),
    "gpt-oss (20B, 120B)": (
        "full + sliding W=128: 8 KV heads x 64",
        lambda c: [full(8, 64), swa(8, 64, 128)],
    ),
    "Gemma 3 (27B)": (
        "full + sliding W=1024: 16 KV heads x 128",
        lambda c: [full(16, 128), swa(16, 128, 1024)],
    ),
    "DeepSeek V3 / R1": ("MLA, 576-wide latent, B=64", lambda c: [mla()]),
    "Kimi K2": ("MLA, 576-wide latent, B=64", lambda c: [mla()]),
    "DeepSeek-V4 (MLA + SWA MLA groups)": (
        "MLA B=256 + SlidingWindowMLASpec W=128 B=64",
        lambda c: [
            mla(block=256, model_version="deepseek_v4"),
            SlidingWindowMLASpec(
                block_size=64,
                num_kv_heads=1,
                head_size=512,
                dtype=BF16,
                sliding_window=128,
                model_version="deepseek_v4",
            ),
        ],
    ),
    "Llama 4 (Scout, Maverick)": (
        "full + chunked local C=8192: 8 KV heads x 128",
        lambda c: [
            full(8, 128),
            ChunkedLocalAttentionSpec(
                block_size=16, num_kv_heads=8, head_size=128, dtype=BF16, attention_chunk_size=8192
            ),
        ],
    ),
    "Qwen3-Next (80B-A3B)": (
        "full (2 KV heads x 256) + gated DeltaNet state",
        lambda c: [full(2, 256, block=64), mamba(c, 64)],
    ),
    "Nemotron-H": (
        "full (8 KV heads x 128) + Mamba2 state",
        lambda c: [full(8, 128, block=64), mamba(c, 64)],
    ),
}

COLUMNS = ("prefix caching", "no prefix caching", "EAGLE / MTP", "KV connector")


def _request(rid: str, tokens: list[int], block: int) -> Request:
    return Request(
        request_id=rid,
        prompt_token_ids=tokens,
        sampling_params=SamplingParams(max_tokens=4),
        pooling_params=None,
        block_hasher=get_request_block_hasher(block, sha256),
    )


def drive(specs: list[KVCacheSpec], column: str) -> None:
    """Two requests on one prompt, each prefilled in two chunks, then one decode step."""
    caching = column != "no prefix caching"
    eagle = column == "EAGLE / MTP"
    sizes = [s.block_size for s in specs]
    lcm = math.lcm(*sizes)
    base = math.gcd(*sizes)
    groups = [KVCacheGroupSpec([f"layer{g}"], s) for g, s in enumerate(specs)]
    config = KVCacheConfig(num_blocks=4096, kv_cache_tensors=[], kv_cache_groups=groups)
    m = KVCacheManager(
        config,
        max_model_len=MAX_MODEL_LEN,
        scheduler_block_size=lcm,
        hash_block_size=base,
        enable_caching=caching,
        use_eagle=eagle,
    )
    lookahead = 3 if eagle else 0
    n = min(3 * lcm + 5, MAX_MODEL_LEN - 8)
    tokens = list(range(n))
    for rid in ("a", "b"):
        m.new_step_starts()  # b runs steps after a's (a Mamba state waits a step: 13.5)
        r = _request(rid, tokens, base)
        blocks, hit, _ = m.get_computed_blocks(r)
        assert not (caching and rid == "b" and hit == 0), "the second request hits the first"
        # The connector loads 16 tokens past the local hit (the first request's are all
        # loaded: it has no hit), then half of the rest is computed.
        external = 16 if column == "KV connector" else 0
        first = max(1, (n - hit - external) // 2)
        if any(isinstance(s, MambaSpec) and s.mamba_cache_mode == "align" for s in specs):
            # vLLM's scheduler ends a Mamba "align" prefill chunk on a block boundary
            # (_mamba_block_aligned_split, from the computed and loaded tokens): the half,
            # cut back to a boundary, else all the rest.
            start = hit + external
            end = (start + first) // lcm * lcm
            first = end - start if end > start else n - start
        got = m.allocate_slots(
            r,
            first,
            num_new_computed_tokens=hit,
            new_computed_blocks=blocks if hit else None,
            num_lookahead_tokens=lookahead,
            num_external_computed_tokens=external,
        )
        assert got is not None, "the pool is large enough"
        r.num_computed_tokens = hit + external + first
        m.remove_skipped_blocks(rid, r.num_computed_tokens)
        rest = n - r.num_computed_tokens
        if rest:
            assert m.allocate_slots(r, rest, num_lookahead_tokens=lookahead) is not None
        r.num_computed_tokens = n
        r.append_output_token_ids(7)
        m.cache_blocks(r, n)
        assert m.allocate_slots(r, 1, num_lookahead_tokens=lookahead) is not None


def cell(specs: Callable[[bool], list[KVCacheSpec]], column: str) -> str:
    try:
        drive(specs(column != "no prefix caching"), column)
    except NotImplementedError as e:
        return str(e).removeprefix(NIE)
    return "accepted"


def table() -> list[tuple[str, ...]]:
    init_none_hash(sha256)
    return [
        (family, sizes, *(cell(specs, c) for c in COLUMNS))
        for family, (sizes, specs) in FAMILIES.items()
    ]


def markdown(rows: list[tuple[str, ...]]) -> str:
    header = ("family", "KV-cache groups (vLLM 0.33)", *COLUMNS)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print README's table")
    args = ap.parse_args(argv)
    rows = table()
    if args.markdown:
        print(markdown(rows))
    else:
        for r in rows:
            print(" | ".join(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
