"""The admission table: the smallest pool that admits a prompt, vLLM's manager vs livetail's.

For each layout and prompt length, both managers are built from the same KVCacheConfig with
vLLM's scheduler settings (max_num_batched_tokens = max_in_flight_tokens = 8192), and the
first 8192-token chunk is offered with full_sequence_must_fit=True (vLLM's default
admission check, which charges the whole prompt). A binary search over num_blocks finds
the fewest blocks (page 0, the null block, included) with which each admits it.

    python benchmarks/admission_table.py        (needs vllm and torch; docs/vllm_side_by_side.md)

DeepSeek-V4 runs on the specs vLLM 0.33 builds for it (``side_by_side_driver.dsv4_specs``),
with live tail off and on for its two compressor-state groups.
"""

from __future__ import annotations

import functools

import torch
from livetail import vllm as adapter
from side_by_side_driver import dsv4_specs
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_manager import KVCacheManager as VllmKVCacheManager
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    SlidingWindowSpec,
)
from vllm.v1.request import Request

STEP = 8192  # max_num_batched_tokens, one batch in flight
MAX_MODEL_LEN = 131072
PROMPTS = (3000, 32768, 100000)
init_none_hash(sha256)


def _full(B: int) -> FullAttentionSpec:
    return FullAttentionSpec(block_size=B, num_kv_heads=1, head_size=1, dtype=torch.float32)


def _sliding(B: int, W: int) -> SlidingWindowSpec:
    return SlidingWindowSpec(
        block_size=B, num_kv_heads=1, head_size=1, dtype=torch.float32, sliding_window=W
    )


# name -> (group specs, live-tail group indices for livetail's manager, scheduler block
# size, hash block size)
LAYOUTS: dict[str, tuple[list[object], tuple[int, ...], int, int]] = {
    "gpt-oss (full + sliding W=128, B=16)": ([_full(16), _sliding(16, 128)], (), 16, 16),
    "Gemma 3 27B (full + 5 x sliding W=1024, B=16)": (
        [_full(16), *[_sliding(16, 1024) for _ in range(5)]],
        (),
        16,
        16,
    ),
    "full B=256 + live-tail sliding W=4, B=16 (A=256)": (
        [_full(256), _sliding(16, 4)],
        (1,),
        16,
        16,
    ),
    "the same, live tail off": ([_full(256), _sliding(16, 4)], (), 16, 16),
    "DeepSeek-V4 (vLLM's specs), live tail off": (dsv4_specs(), (), 256, 4),
    "DeepSeek-V4, live tail on the compressor states": (dsv4_specs(), (3, 4), 256, 4),
}


def _config(specs: list[object], num_blocks: int) -> KVCacheConfig:
    groups = [KVCacheGroupSpec([f"layer{i}"], s) for i, s in enumerate(specs)]  # type: ignore[arg-type]
    return KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)


def _admits(make: object, specs: list[object], num_blocks: int, n: int, hb: int) -> bool:
    m = make(_config(specs, num_blocks))  # type: ignore[operator]
    r = Request(
        request_id="r",
        prompt_token_ids=list(range(n)),
        sampling_params=SamplingParams(max_tokens=1),
        pooling_params=None,
        block_hasher=get_request_block_hasher(hb, sha256),
    )
    return m.allocate_slots(r, min(n, STEP), full_sequence_must_fit=True) is not None


def smallest(make: object, specs: list[object], n: int, hb: int) -> int:
    lo, hi = 1, 1 << 17
    while lo < hi:
        mid = (lo + hi) // 2
        if _admits(make, specs, mid, n, hb):
            hi = mid
        else:
            lo = mid + 1
    return lo


def row(name: str, n: int) -> tuple[int | str, int]:
    """(vLLM's smallest admitting pool, or its refusal; livetail's) for one layout and prompt."""
    specs, live, sb, hb = LAYOUTS[name]
    kw = dict(
        max_model_len=MAX_MODEL_LEN,
        max_in_flight_tokens=STEP,
        scheduler_block_size=sb,
        hash_block_size=hb,
    )
    vllm_make = functools.partial(VllmKVCacheManager, **kw)
    ours_make = functools.partial(adapter.KVCacheManager, live_tail_groups=live, **kw)
    try:
        theirs: int | str = smallest(vllm_make, specs, n, hb)
    except Exception as exc:  # vLLM refuses the layout: say so
        theirs = f"refused ({type(exc).__name__})"
    return theirs, smallest(ours_make, specs, n, hb)


def main() -> None:
    print("| layout | prompt | vLLM 0.33 | livetail | saved |")
    print("|---|---:|---:|---:|---:|")
    for name in LAYOUTS:
        for n in PROMPTS:
            theirs, ours = row(name, n)
            saved = f"{theirs - ours}" if isinstance(theirs, int) else "-"
            print(f"| {name} | {n} | {theirs} | {ours} | {saved} |", flush=True)


if __name__ == "__main__":
    main()
