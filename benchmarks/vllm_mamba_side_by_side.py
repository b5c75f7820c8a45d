#!/usr/bin/env python3
"""vLLM 0.33's KVCacheManager and livetail's adapter, step by step, on Qwen3-Next's layout.

Qwen3-Next (80B-A3B) at vLLM 0.33's defaults with prefix caching on: one full-attention group
and one gated-DeltaNet state group in Mamba cache mode "align", both at the block size vLLM
picks so that an attention page holds a state (544 tokens: 2 KV heads x 256 in bf16 is 2 KiB
per token, a DeltaNet state of 32 x 128 x 128 plus its conv state is 1 072 KiB), the layers
exporting prefill checkpoints on a 544-token grid (``num_prefill_checkpoint_blocks=1``,
``prefill_checkpoint_alignment=544``), hashing at the block size, 8192-token steps.

The loop is benchmarks/side_by_side_driver.py's (vLLM's ``Scheduler.schedule`` /
``update_from_output`` calls) plus vLLM's Mamba "align" split: a prefill chunk that does not
reach the prompt's end is cut back to a multiple of the block size
(``Scheduler._mamba_block_aligned_split``). Per step it records the admitted requests and
their prefix-hit tokens, the preempted and running requests, and the pages pinned per group
during the forward and after the reclaim; two runs agree when every step's record is equal.

    python benchmarks/vllm_mamba_side_by_side.py          # the docs' table
    python benchmarks/vllm_mamba_side_by_side.py --ci     # tests/test_vllm_mamba_side_by_side.py
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import deque
from collections.abc import Sequence
from typing import Any

from side_by_side_driver import (
    ReqSpec,
    Run,
    StepRecord,
    Stream,
    _register,
    adopt_livetail_rules,
    pinned_per_group,
)

B = 544  # vLLM's attention block size for Qwen3-Next, the Mamba block size in "align" mode


def kv_cache_config(num_blocks: int, checkpoints: bool = True) -> Any:
    import torch
    from vllm.v1.kv_cache_interface import (
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
        MambaSpec,
    )

    full = FullAttentionSpec(block_size=B, num_kv_heads=2, head_size=256, dtype=torch.bfloat16)
    mamba = MambaSpec(
        block_size=B,
        shapes=((3, 8192), (32, 128, 128)),
        dtypes=(torch.bfloat16, torch.bfloat16),
        mamba_cache_mode="align",
        num_prefill_checkpoint_blocks=1 if checkpoints else 0,
        prefill_checkpoint_alignment=B if checkpoints else None,
    )
    groups = [KVCacheGroupSpec(["attn"], full), KVCacheGroupSpec(["linear_attn"], mamba)]
    return KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)


def make_manager(
    impl: str, num_blocks: int, stream: Stream, checkpoints: bool = True, rules: bool = False
) -> Any:
    _register()
    kwargs = dict(
        kv_cache_config=kv_cache_config(num_blocks, checkpoints),
        max_model_len=65_536,
        scheduler_block_size=B,
        hash_block_size=B,
        max_in_flight_tokens=stream.max_num_batched_tokens,
        enable_caching=True,
    )
    if impl == "vllm":
        from vllm.v1.core.kv_cache_manager import KVCacheManager as VllmManager

        manager = VllmManager(**kwargs)
        # "pinned-copy": a hit on a name several pages carry takes the one already in use
        # (docs/vllm_side_by_side.md); "reclaim-order" concerns sliding groups only.
        return adopt_livetail_rules(manager, ("pinned-copy",)) if rules else manager
    from livetail.vllm import KVCacheManager

    return KVCacheManager(**kwargs)


def make_requests(stream: Stream) -> dict[str, Any]:
    """vLLM requests for the stream, hashed at the block size (both groups' page size)."""
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher
    from vllm.v1.request import Request

    _register()
    hasher = get_request_block_hasher(B, sha256)
    out = {}
    for r in stream.requests:
        sp = SamplingParams(max_tokens=r.max_tokens, ignore_eos=True)
        out[r.rid] = Request(r.rid, list(r.prompt), sp, None, block_hasher=hasher)
    return out


def aligned_chunk(req: Any, start: int, n: int, max_tokens: int) -> int:
    """vLLM's Mamba "align" split: a chunk ending before the prompt's end ends on a block
    (sub-block only when a block is wider than the step's configured token limit)."""
    prefill_end = max(req.num_prompt_tokens, req.num_tokens - 1)
    end = start + n
    if start < prefill_end and end < prefill_end:
        aligned = end // B * B
        if aligned > start or B <= max_tokens:
            end = aligned
    return end - start


def run(manager: Any, stream: Stream, label: str, max_steps: int = 20_000) -> Run:
    """benchmarks/side_by_side_driver.py's run_stream with the "align" split."""
    from vllm.v1.request import RequestStatus

    reqs = make_requests(stream)
    by_arrival: dict[int, list[str]] = {}
    for r in stream.requests:
        by_arrival.setdefault(r.arrival, []).append(r.rid)
    last_arrival = max(by_arrival, default=0)
    total = manager.block_pool.get_num_free_blocks()
    waiting: deque[Any] = deque()
    running: list[Any] = []
    steps: list[StepRecord] = []
    finished, wedged_at = 0, None
    for t in range(max_steps):
        if finished == len(reqs):
            break
        manager.new_step_starts()
        waiting.extend(reqs[rid] for rid in by_arrival.get(t, ()))
        rec, budget, scheduled = StepRecord(), stream.max_num_batched_tokens, {}
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            start = req.num_computed_tokens
            n = min(req.num_tokens - start, budget)
            n = aligned_chunk(req, start, n, stream.max_num_batched_tokens)
            if n <= 0:
                i += 1
                continue
            while True:
                blocks = manager.allocate_slots(req, n, num_lookahead_tokens=0)
                if blocks is not None:
                    break
                victim = running.pop()
                budget += scheduled.pop(victim.request_id, 0)
                manager.free(victim)
                victim.status = RequestStatus.PREEMPTED
                victim.num_computed_tokens = 0
                victim.num_preemptions += 1
                waiting.appendleft(victim)
                rec.preempted.append(victim.request_id)
                if victim is req:
                    break
            if blocks is None:
                break
            scheduled[req.request_id] = n
            budget -= n
            i += 1
        if not rec.preempted:
            while waiting and budget > 0 and len(running) < stream.max_num_seqs:
                req = waiting[0]
                hit_blocks, hit, _ = manager.get_computed_blocks(req)
                n = min(req.num_tokens - hit, budget)
                n = aligned_chunk(req, hit, n, stream.max_num_batched_tokens)
                if n <= 0:
                    break
                blocks = manager.allocate_slots(
                    req,
                    n,
                    num_new_computed_tokens=hit,
                    new_computed_blocks=hit_blocks,
                    num_lookahead_tokens=0,
                    delay_cache_blocks=False,
                    full_sequence_must_fit=True,
                    has_scheduled_reqs=bool(running),
                )
                if blocks is None:
                    break
                waiting.popleft()
                req.status = RequestStatus.RUNNING
                req.num_computed_tokens = hit
                running.append(req)
                scheduled[req.request_id] = n
                budget -= n
                rec.admitted.append((req.request_id, hit))
        rec.running = [r.request_id for r in running]
        rec.pinned_forward = pinned_per_group(manager, running, 2)
        rec.pinned_total_forward = total - manager.block_pool.get_num_free_blocks()
        done = []
        for req in running:
            n = scheduled.get(req.request_id)
            if n is None:
                continue
            req.num_computed_tokens += n
            if req.num_computed_tokens >= req.num_tokens:
                req.append_output_token_ids(7)
                if req.num_output_tokens >= req.max_tokens:
                    done.append(req)
                    continue
            manager.cache_blocks(req, req.num_computed_tokens)
        for req in done:
            manager.free(req)
            req.status = RequestStatus.FINISHED_LENGTH_CAPPED
            running.remove(req)
            finished += 1
        for req in running:
            manager.remove_skipped_blocks(req.request_id, req.num_computed_tokens)
        rec.pinned_total_after = total - manager.block_pool.get_num_free_blocks()
        steps.append(rec)
        if not running and not scheduled and t >= last_arrival and waiting:
            wedged_at = t
            break
    return Run(label, steps, finished, wedged_at, len(reqs))


def shared_prefix_stream(
    name: str, seed: int, n: int, prefix_blocks: int, suffix: tuple[int, int], every: int
) -> Stream:
    """n requests, one every ``every`` steps: one of two shared prefixes plus a suffix."""
    rng = random.Random(seed)
    prefixes = [
        tuple(rng.randrange(1, 50_000) for _ in range(prefix_blocks * B)) for _ in range(2)
    ]
    reqs = []
    for i in range(n):
        tail = tuple(rng.randrange(1, 50_000) for _ in range(rng.randint(*suffix)))
        reqs.append(ReqSpec(f"r{i}", i * every, prefixes[i % 2] + tail, rng.randint(4, 40)))
    return Stream(name, reqs, 8192)


def streams(ci: bool) -> list[Stream]:
    if ci:
        return [shared_prefix_stream("shared prefix", 5, 10, 4, (1, 3000), 1)]
    return [
        shared_prefix_stream("shared prefix", 5, 48, 12, (1, 6000), 1),
        shared_prefix_stream("long prefix, few arrivals", 6, 16, 40, (100, 20_000), 3),
    ]


def pool_sizes(ci: bool) -> list[int]:
    return [60, 400] if ci else [60, 150, 1000]


def first_difference(a: Run, b: Run) -> str | None:
    for t, (x, y) in enumerate(zip(a.steps, b.steps)):
        if x.key() != y.key():
            return f"step {t}: vLLM {x.key()} adapter {y.key()}"
    if len(a.steps) != len(b.steps) or a.finished != b.finished:
        return f"vLLM ran {len(a.steps)} steps, the adapter {len(b.steps)}"
    return None


Row = tuple[str, int, Run, Run, str | None, str | None]


def rows(ci: bool) -> list[Row]:
    """Per stream and pool: vLLM's run, the adapter's, their first difference, and the first
    difference left once vLLM's manager takes livetail's pinned-copy rule."""
    out = []
    for stream in streams(ci):
        for nb in pool_sizes(ci):
            v = run(make_manager("vllm", nb, stream), stream, "vLLM")
            lt = run(make_manager("livetail", nb, stream), stream, "adapter")
            vr = run(make_manager("vllm", nb, stream, rules=True), stream, "vLLM, rule")
            out.append((stream.name, nb, v, lt, first_difference(v, lt), first_difference(vr, lt)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ci", action="store_true", help="the CI size")
    args = p.parse_args(argv)
    print(
        "| stream | pool | steps (vLLM / adapter) | hit tokens | peak pages | preemptions "
        "| every step equal | with vLLM on the pinned-copy rule |"
    )
    print("|---|---:|---|---|---|---|---|---|")
    for name, nb, v, lt, diff, diff_rule in rows(args.ci):
        print(
            f"| {name} | {nb} | {v.steps_text()} / {lt.steps_text()} | {v.hit_tokens} / "
            f"{lt.hit_tokens} | {v.peak_pages} / {lt.peak_pages} | {v.preemptions} / "
            f"{lt.preemptions} | {'yes' if diff is None else diff[:60]} "
            f"| {'yes' if diff_rule is None else diff_rule[:60]} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
