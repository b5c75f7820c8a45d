#!/usr/bin/env python3
"""vLLM 0.33's scheduler step on vLLM's KVCacheManager and on livetail's adapter.

One step is ``Scheduler.schedule()`` plus ``update_from_output()`` with a fake
``ModelRunnerOutput`` (one sampled token per request that finished its prompt, as vLLM's own
scheduler tests build it). Both schedulers run the same trace in the same process: N
requests (shared 512-token prefix plus a 64-512-token suffix, prefix caching on, chunked
prefill, 8192-token steps) are admitted and prefilled, then ``--steps`` decode steps with N
requests running are timed, alternating the two schedulers step by step so that a busy
machine slows both alike. A second pass wraps every method of the KV-cache manager (and its
block pool view) with a timer: the manager's time per step and share of the step, less the
wrapper's own time (measured on an empty function, per call).

Layouts (``--layout``, default both): ``full`` (one full-attention group, B=16) and
``full_swa`` (full B=16 + sliding window W=128 B=16).

    python benchmarks/bench_vllm_step.py                      # N = 64 and 256, both layouts
    python benchmarks/bench_vllm_step.py --only vllm --running 256 --steps 20   # one side

Instruction counts (independent of machine load): ``--instructions`` runs, for every layout,
N and manager, a child of this script under ``valgrind --tool=callgrind`` with
instrumentation off until the measured steps (a C helper over valgrind's ``callgrind.h``,
built with the system C compiler). The child counts ``--instr-steps`` whole decode steps,
then as many again counting only inside the manager's methods (collection toggled on at a
call's entry and off at its exit), less the toggling wrapper's own count (measured on an
empty function, per call):

    python benchmarks/bench_vllm_step.py --instructions        # both tables
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


def _wrap_manager(manager: Any, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Replace every public method of the manager and of its block pool by wrap(method)."""
    for obj in (manager, manager.block_pool):
        for name in dir(type(obj)):
            if name.startswith("_"):
                continue
            attr = getattr(obj, name, None)
            if callable(attr):
                setattr(obj, name, wrap(attr))


def _empty(*a: Any, **k: Any) -> None:
    return None


class ManagerTimer:
    """Times every public method of a KV-cache manager (and its block pool view)."""

    def __init__(self, manager: Any) -> None:
        self.seconds = 0.0
        self.calls = 0
        self.depth = 0  # only outermost calls count: a pool call inside a manager call is in it
        if manager is not None:
            _wrap_manager(manager, self._wrap)

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


def wrapper_seconds(calls: int = 20_000) -> float:
    """The timer wrapper's own time per call: the median of 5 runs on an empty function."""
    runs = []
    for _ in range(5):
        t = ManagerTimer(None)
        f = t._wrap(_empty)
        for _ in range(calls):
            f(1, 2)
        runs.append(t.seconds / calls)
    return statistics.median(runs)


CALLGRIND_HELPER = r"""
#include <valgrind/callgrind.h>
void livetail_bench_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void livetail_bench_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
void livetail_bench_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
void livetail_bench_dump(void) { CALLGRIND_DUMP_STATS; }
"""


def callgrind_helper() -> Any:
    """start / stop (instrumentation), toggle (collection), dump (no-ops outside valgrind)."""
    import ctypes
    import subprocess

    d = tempfile.mkdtemp(prefix="livetail-callgrind-")
    src, lib = os.path.join(d, "h.c"), os.path.join(d, "h.so")
    with open(src, "w") as f:
        f.write(CALLGRIND_HELPER)
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", lib, src], check=True)
    return ctypes.CDLL(lib)


def measure(
    impls: list[str], running: int, steps: int, layout: str, share: bool = True
) -> dict[str, Any]:
    nb = running * 200 + 1000
    scheds = {i: make_scheduler(i, running, nb, layout) for i in impls}
    for s in scheds.values():
        warm(s, running)
    times: dict[str, list[float]] = {i: [] for i in impls}
    for _ in range(steps):
        for i, s in scheds.items():
            t0 = time.thread_time()  # CPU time of this thread: a busy machine inflates it less
            n = step(s)
            times[i].append(time.thread_time() - t0)
            assert n == running, (i, n)
    overhead = wrapper_seconds() if share else 0.0
    res: dict[str, Any] = {}
    for i, s in scheds.items():
        r = res[i] = {
            "step_us": statistics.median(times[i]) * 1e6,
            "manager_share": 0.0,
            "manager_us": 0.0,
            "manager_calls": 0.0,
        }
        if not share:
            continue
        timer = ManagerTimer(s.kv_cache_manager)
        t0 = time.thread_time()
        for _ in range(steps):
            step(s)
        total = time.thread_time() - t0 - timer.calls * overhead
        manager = max(0.0, timer.seconds - timer.calls * overhead)
        r["manager_share"] = manager / total if total > 0 else 0.0
        r["manager_us"] = manager / steps * 1e6
        r["manager_calls"] = timer.calls / steps
    return res


def count_child(impl: str, running: int, steps: int, layout: str) -> None:
    """Under callgrind (collection off at start): three dumps, each counting one part.

    1: ``steps`` whole decode steps; 2: as many steps, counting inside the manager's methods
    only; 3: the toggling wrapper on an empty function, as many calls as part 2 made.
    """
    h = callgrind_helper()
    s = make_scheduler(impl, running, running * 200 + 1000, layout)
    warm(s, running)
    h.livetail_bench_start()
    h.livetail_bench_toggle()
    for _ in range(steps):
        step(s)
    h.livetail_bench_toggle()
    h.livetail_bench_dump()
    calls = [0]
    depth = [0]
    toggle = h.livetail_bench_toggle

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*a: Any, **k: Any) -> Any:
            if depth[0]:
                return fn(*a, **k)
            depth[0] = 1
            toggle()
            try:
                return fn(*a, **k)
            finally:
                toggle()
                calls[0] += 1
                depth[0] = 0

        return counted

    _wrap_manager(s.kv_cache_manager, wrap)
    for _ in range(steps):
        step(s)
    h.livetail_bench_dump()
    n = calls[0]
    f = wrap(_empty)
    for _ in range(n):
        f(1, 2)
    h.livetail_bench_dump()
    h.livetail_bench_stop()
    print(json.dumps({"calls": n}))


def count(impl: str, running: int, steps: int, layout: str) -> dict[str, float]:
    """Run count_child under callgrind; instructions per step: whole step and manager."""
    import glob
    import subprocess

    d = tempfile.mkdtemp(prefix="livetail-cg-")
    out = os.path.join(d, "cg.out")
    cmd = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
        f"--callgrind-out-file={out}", sys.executable, os.path.abspath(__file__),
        "--count-child", impl, "--running", str(running), "--instr-steps", str(steps),
        "--layout", layout,
    ]  # fmt: skip
    p = subprocess.run(cmd, check=True, capture_output=True, text=True)
    calls = json.loads(p.stdout.strip().splitlines()[-1])["calls"]
    totals = []
    for n in (1, 2, 3):
        (path,) = glob.glob(f"{out}.{n}")
        with open(path) as f:
            totals.append(next(int(ln.split()[1]) for ln in f if ln.startswith("totals:")))
    step_i, manager_i, wrapper_i = totals
    return {
        "step": step_i / steps,
        "manager": max(0, manager_i - wrapper_i) / steps,
        "calls": calls / steps,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--running", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--only", choices=["vllm", "livetail"])
    ap.add_argument("--layout", choices=["full", "full_swa", "both"], default="both")
    ap.add_argument(
        "--instructions",
        action="store_true",
        help="also count instructions per step under callgrind (one child per row)",
    )
    ap.add_argument(
        "--instr-steps", type=int, default=16, help="decode steps counted (16: one page of B=16)"
    )
    ap.add_argument("--no-time", action="store_true", help="skip the timed table")
    ap.add_argument("--count-child", choices=["vllm", "livetail"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    layouts = ["full", "full_swa"] if args.layout == "both" else [args.layout]
    if args.count_child:
        count_child(args.count_child, args.running[0], args.instr_steps, layouts[0])
        return 0
    impls = [args.only] if args.only else ["vllm", "livetail"]
    if not args.no_time:
        print(
            f"{args.steps} decode steps, median CPU time of a step (schedule + update), the "
            "two schedulers alternating step by step; manager time less the timer's own"
        )
        print("| layout | running | manager | step | KV manager per step | share of step "
              "| manager calls/step |")  # fmt: skip
        print("|---|---:|---|---:|---:|---:|---:|")
        for layout in layouts:
            for n in args.running:
                res = measure(impls, n, args.steps, layout)
                for i in impls:
                    r = res[i]
                    print(
                        f"| {layout} | {n} | {i} | {r['step_us']:.0f} us | "
                        f"{r['manager_us']:.0f} us | {100 * r['manager_share']:.1f}% | "
                        f"{r['manager_calls']:.0f} |"
                    )
                if len(impls) == 2:
                    v, lt = res["vllm"], res["livetail"]
                    print(
                        f"| {layout} | {n} | livetail / vLLM | "
                        f"{lt['step_us'] / v['step_us']:.2f} | "
                        f"{lt['manager_us'] / max(v['manager_us'], 1e-9):.3f} | | |"
                    )
                sys.stdout.flush()
    if args.instructions:
        print(
            f"\ninstructions per decode step (callgrind, {args.instr_steps} steps counted); "
            "manager: inside its methods, less the toggling wrapper's own count"
        )
        print("| layout | running | manager | step | KV manager per step | share of step "
              "| per manager call |")  # fmt: skip
        print("|---|---:|---|---:|---:|---:|---:|")
        for layout in layouts:
            for n in args.running:
                cres = {i: count(i, n, args.instr_steps, layout) for i in impls}
                for i in impls:
                    c = cres[i]
                    print(
                        f"| {layout} | {n} | {i} | {c['step'] / 1e6:.2f} M | "
                        f"{c['manager'] / 1e6:.3f} M | {100 * c['manager'] / c['step']:.1f}% | "
                        f"{c['manager'] / max(c['calls'], 1):.0f} |"
                    )
                if len(impls) == 2:
                    v, lt = cres["vllm"], cres["livetail"]
                    print(
                        f"| {layout} | {n} | livetail / vLLM | {lt['step'] / v['step']:.3f} | "
                        f"{lt['manager'] / v['manager']:.3f} | | |"
                    )
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
