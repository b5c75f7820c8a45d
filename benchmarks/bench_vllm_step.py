#!/usr/bin/env python3
"""vLLM 0.33's scheduler step on vLLM's KVCacheManager and on livetail's adapter.

One step is ``Scheduler.schedule()`` plus ``update_from_output()`` with a fake
``ModelRunnerOutput`` (one sampled token per request that finished its prompt, as vLLM's own
scheduler tests build it). Both schedulers run the same trace in the same process: N
requests (shared 512-token prefix plus a 64-512-token suffix, prefix caching on, chunked
prefill, 8192-token steps) are admitted and prefilled, then ``--steps`` decode steps with N
requests running are timed, alternating the two schedulers step by step so that a busy
machine slows both alike. A second pass wraps every method of the KV-cache manager (and its
block pool view) with a timer: the manager's share of the step.

Layout: full attention B=16 + sliding window W=128 B=16 (``--layout full``: one full group).

    python benchmarks/bench_vllm_step.py                      # N = 64 and 256
    python benchmarks/bench_vllm_step.py --only vllm --running 256 --steps 20   # one side

Instruction counts (independent of machine load): ``--callgrind`` builds a two-function C
helper (needs a C compiler and valgrind's ``callgrind.h``) that starts callgrind's
instrumentation just before the measured steps and stops it just after, so a run started
with instrumentation off counts exactly those steps; run one side at a time:

    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=/dev/null \\
        python benchmarks/bench_vllm_step.py --only livetail --running 256 --steps 20 --callgrind

callgrind prints the count as ``Collected : N`` when the process exits.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

# Public architecture fields of facebook/opt-125m (no weights): the scheduler needs a model
# config, never a model.
OPT_CONFIG = {
    "architectures": ["OPTForCausalLM"],
    "model_type": "opt",
    "hidden_size": 768,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "ffn_dim": 3072,
    "max_position_embeddings": 2048,
    "vocab_size": 50272,
    "word_embed_proj_dim": 768,
    "do_layer_norm_before": True,
    "bos_token_id": 2,
    "eos_token_id": 2,
    "pad_token_id": 1,
    "torch_dtype": "float16",
}
BLOCK = 16
WINDOW = 128


def make_scheduler(impl: str, running: int, num_blocks: int, layout: str) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    import torch
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs
    from vllm.v1.kv_cache_interface import (
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
        SlidingWindowSpec,
    )
    from vllm.v1.structured_output import StructuredOutputManager

    model_dir = os.path.join(tempfile.gettempdir(), "livetail-bench-opt-config")
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(OPT_CONFIG, f)
    model_config = ModelConfig(
        model=model_dir, dtype="float16", seed=0, skip_tokenizer_init=True, max_model_len=2048
    )
    scheduler_config = SchedulerConfig(
        max_num_seqs=running,
        max_num_batched_tokens=8192,
        max_model_len=2048,
        enable_chunked_prefill=True,
        watermark=0.0,
        is_encoder_decoder=False,
    )
    cache_config = CacheConfig(block_size=BLOCK, cache_dtype="auto", enable_prefix_caching=True)
    cache_config.num_gpu_blocks = num_blocks
    vllm_config = VllmConfig(
        scheduler_config=scheduler_config, model_config=model_config, cache_config=cache_config
    )
    full = FullAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=64, dtype=torch.float16)
    groups = [KVCacheGroupSpec(["full"], full)]
    if layout == "full_swa":
        swa = SlidingWindowSpec(
            block_size=BLOCK,
            num_kv_heads=1,
            head_size=64,
            dtype=torch.float16,
            sliding_window=WINDOW,
        )
        groups.append(KVCacheGroupSpec(["swa"], swa))
    kv_cache_config = KVCacheConfig(
        num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups
    )
    register_all_kvcache_specs(vllm_config)
    cls: Any = Scheduler
    if impl == "livetail":
        from livetail.vllm import Scheduler as LivetailScheduler

        cls = LivetailScheduler
    return cls(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        block_size=BLOCK,
        log_stats=True,
        structured_output_manager=StructuredOutputManager(vllm_config),
    )


def make_requests(running: int, seed: int = 0) -> list[Any]:
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.request import Request

    init_none_hash(sha256)
    hasher = get_request_block_hasher(BLOCK, sha256)
    rng = random.Random(seed)
    prefix = [rng.randrange(1, 50_000) for _ in range(512)]
    out = []
    for i in range(running):
        prompt = prefix + [rng.randrange(1, 50_000) for _ in range(rng.randint(64, 512))]
        sp = SamplingParams(max_tokens=1000, ignore_eos=True)
        out.append(Request(f"r{i}", prompt, sp, None, block_hasher=hasher))
    return out


def step(scheduler: Any) -> int:
    """One schedule() + update_from_output(); returns the number of requests scheduled."""
    from vllm.v1.outputs import ModelRunnerOutput

    so = scheduler.schedule()
    ids = list(so.num_scheduled_tokens)
    sampled = []
    for rid in ids:
        r = scheduler.requests[rid]
        sampled.append([11] if r.num_computed_tokens >= r.num_tokens else [])
    out = ModelRunnerOutput(
        req_ids=ids,
        req_id_to_index={rid: i for i, rid in enumerate(ids)},
        sampled_token_ids=sampled,
        logprobs=None,
        prompt_logprobs_dict={},
        pooler_output=[],
    )
    scheduler.update_from_output(so, out)
    return len(ids)


def warm(scheduler: Any, running: int) -> None:
    """Admit and prefill every request; afterwards every step decodes `running` requests."""
    for r in make_requests(running):
        scheduler.add_request(r)
    for _ in range(10_000):
        step(scheduler)
        if len(scheduler.running) == running and all(
            r.num_computed_tokens >= r.num_tokens - 1 for r in scheduler.running
        ):
            break
    step(scheduler)
    if len(scheduler.running) != running:
        raise SystemExit(f"only {len(scheduler.running)} of {running} requests running")


class ManagerTimer:
    """Wraps every public method of a KV-cache manager (and its block pool) with a timer."""

    def __init__(self, manager: Any) -> None:
        self.seconds = 0.0
        self.calls = 0
        self.depth = 0  # only outermost calls count: a pool call inside a manager call is in it
        for obj in (manager, manager.block_pool):
            for name in dir(type(obj)):
                if name.startswith("_"):
                    continue
                attr = getattr(obj, name, None)
                if callable(attr):
                    setattr(obj, name, self._wrap(attr))

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*a: Any, **k: Any) -> Any:
            if self.depth:
                return fn(*a, **k)
            self.depth = 1
            t0 = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                self.seconds += time.thread_time() - t0
                self.calls += 1
                self.depth = 0

        return timed


CALLGRIND_HELPER = r"""
#include <valgrind/callgrind.h>
void livetail_bench_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void livetail_bench_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""


def callgrind_switches() -> tuple[Callable[[], None], Callable[[], None]]:
    """start() / stop() of callgrind's instrumentation (no-ops outside valgrind)."""
    import ctypes
    import subprocess

    d = tempfile.mkdtemp(prefix="livetail-callgrind-")
    src, lib = os.path.join(d, "h.c"), os.path.join(d, "h.so")
    with open(src, "w") as f:
        f.write(CALLGRIND_HELPER)
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", lib, src], check=True)
    h = ctypes.CDLL(lib)
    return h.livetail_bench_start, h.livetail_bench_stop


def measure(
    impls: list[str],
    running: int,
    steps: int,
    layout: str,
    share: bool = True,
    switches: tuple[Callable[[], None], Callable[[], None]] | None = None,
) -> dict[str, Any]:
    nb = running * 200 + 1000
    scheds = {i: make_scheduler(i, running, nb, layout) for i in impls}
    for s in scheds.values():
        warm(s, running)
    times: dict[str, list[float]] = {i: [] for i in impls}
    if switches is not None:
        switches[0]()
    for _ in range(steps):
        for i, s in scheds.items():
            t0 = time.thread_time()  # CPU time of this thread: a busy machine inflates it less
            n = step(s)
            times[i].append(time.thread_time() - t0)
            assert n == running, (i, n)
    if switches is not None:
        switches[1]()
    res: dict[str, Any] = {}
    for i, s in scheds.items():
        if not share:
            res[i] = {
                "step_us": statistics.median(times[i]) * 1e6 if times[i] else 0.0,
                "manager_share": 0.0,
                "manager_us": 0.0,
                "manager_calls": 0.0,
            }
            continue
        timer = ManagerTimer(s.kv_cache_manager)
        t0 = time.thread_time()
        for _ in range(steps):
            step(s)
        total = time.thread_time() - t0
        res[i] = {
            "step_us": statistics.median(times[i]) * 1e6 if times[i] else 0.0,
            "manager_share": timer.seconds / total if total else 0.0,
            "manager_us": timer.seconds / steps * 1e6 if steps else 0.0,
            "manager_calls": timer.calls / steps if steps else 0.0,
        }
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--running", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--only", choices=["vllm", "livetail"])
    ap.add_argument("--layout", choices=["full_swa", "full"], default="full_swa")
    ap.add_argument(
        "--callgrind",
        action="store_true",
        help="instrument only the measured steps (run under callgrind with --instr-atstart=no);"
        " skips the timed-wrapper pass",
    )
    args = ap.parse_args(argv)
    impls = [args.only] if args.only else ["vllm", "livetail"]
    print(
        f"layout {args.layout}, {args.steps} decode steps, median CPU time of a step "
        "(schedule + update), the two schedulers alternating step by step"
    )
    print("| running | manager | step | KV manager per step | manager share | manager calls/step |")
    print("|---:|---|---:|---:|---:|---:|")
    for n in args.running:
        switches = callgrind_switches() if args.callgrind else None
        res = measure(impls, n, args.steps, args.layout, not args.callgrind, switches)
        for i in impls:
            r = res[i]
            print(
                f"| {n} | {i} | {r['step_us']:.0f} us | {r['manager_us']:.0f} us | "
                f"{100 * r['manager_share']:.0f}% | {r['manager_calls']:.0f} |"
            )
        if len(impls) == 2 and res["vllm"]["step_us"]:
            ratio = res["livetail"]["step_us"] / res["vllm"]["step_us"]
            print(f"|  | livetail / vLLM | {ratio:.2f} | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
