"""The two managers, the request streams' types and the scheduler-shaped loop of
benchmarks/vllm_side_by_side.py (which runs them: see there for the layouts and rules).

Both managers (``make_manager``) are driven through the same request streams by one
scheduler-shaped loop (``run_stream``) that calls them the way vLLM 0.33's
``Scheduler.schedule`` / ``update_from_output`` do:

1. ``new_step_starts()``; arrivals join the back of the waiting queue.
2. Running requests, in order: ``allocate_slots(request, n, num_lookahead_tokens=0)`` for the
   next prefill chunk (``n`` capped by the step's token budget) or one decode token. When it
   returns ``None`` the last running request is preempted (``free``, ``num_computed_tokens``
   reset to 0, back to the front of the waiting queue) and the call is retried; a request
   that preempts itself ends the running pass.
3. Only if nothing was preempted: waiting requests, in order, while the budget and
   ``max_num_seqs`` allow: ``get_computed_blocks`` (the prefix hit), then ``allocate_slots``
   with ``num_new_computed_tokens`` / ``new_computed_blocks`` / ``num_lookahead_tokens=0`` /
   ``delay_cache_blocks=False`` / ``full_sequence_must_fit=True`` (the whole-prompt admission
   check, vLLM 0.33's default ``scheduler_reserve_full_isl=True``); ``None`` stops admission
   for the step.
4. Forward: every scheduled request advances ``num_computed_tokens``; one that reached its
   token count samples a token (``append_output_token_ids``); ``cache_blocks`` to the
   computed tokens; a request that produced ``max_tokens`` tokens is freed (``free``).
5. ``remove_skipped_blocks`` for every running request on its computed tokens (the
   processed-token reclaim ``allocate_slots`` otherwise runs at the request's next call).

Per step it records the admitted requests and their prefix-hit tokens, the preempted and
running requests, and the pages pinned per group during the forward (after step 3) and
after the reclaim. Two runs agree when every step's record is equal.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

# (kind, block size, window); kind "full" or "sliding".
LAYOUTS: dict[str, list[tuple[str, int, int | None]]] = {
    "full_swa": [("full", 16, None), ("sliding", 16, 128)],
    "dsv4": [
        ("full", 256, None),
        ("sliding", 64, 128),
        ("sliding", 64, 128),
        ("sliding", 4, 8),
        ("sliding", 8, 128),
    ],
}
# Groups whose kernels may read the chunk from activations: the compressor states.
COMPRESSOR_GROUPS: dict[str, tuple[int, ...]] = {"full_swa": (), "dsv4": (3, 4)}


@dataclass(frozen=True)
class ReqSpec:
    """One request of a stream: arrival step, prompt tokens, tokens to generate."""

    rid: str
    arrival: int
    prompt: tuple[int, ...]
    max_tokens: int


@dataclass
class Stream:
    name: str
    requests: list[ReqSpec]
    max_num_batched_tokens: int
    max_num_seqs: int = 64


@dataclass
class StepRecord:
    admitted: list[tuple[str, int]] = field(default_factory=list)  # (request, hit tokens)
    preempted: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    pinned_forward: list[int] = field(default_factory=list)  # per group, distinct pages
    pinned_total_forward: int = 0
    pinned_total_after: int = 0

    def key(self) -> tuple[Any, ...]:
        return (
            tuple(self.admitted),
            tuple(self.preempted),
            tuple(self.running),
            tuple(self.pinned_forward),
            self.pinned_total_forward,
            self.pinned_total_after,
        )


@dataclass
class Run:
    label: str
    steps: list[StepRecord]
    finished: int
    wedged_at: int | None  # step at which nothing can ever run again (vLLM retries forever)
    total_requests: int

    @property
    def peak_pages(self) -> int:
        return max((s.pinned_total_forward for s in self.steps), default=0)

    @property
    def max_running(self) -> int:
        return max((len(s.running) for s in self.steps), default=0)

    @property
    def preemptions(self) -> int:
        return sum(len(s.preempted) for s in self.steps)

    @property
    def hit_tokens(self) -> int:
        return sum(h for s in self.steps for _, h in s.admitted)

    @property
    def drained(self) -> bool:
        return self.finished == self.total_requests

    def steps_text(self) -> str:
        if self.drained:
            return str(len(self.steps))
        if self.wedged_at is not None:
            return f"wedged at {self.wedged_at}"
        return f"not drained in {len(self.steps)}"


# ---- vLLM objects ---------------------------------------------------------------------


def _vllm() -> Any:
    import vllm.v1.core.kv_cache_manager as m

    return m


def layout_geometry(layout: str) -> tuple[int, int]:
    """(scheduler block size = lcm of page sizes, hash block size = gcd)."""
    sizes = [b for _, b, _ in LAYOUTS[layout]]
    return reduce(lambda a, b: a * b // math.gcd(a, b), sizes), reduce(math.gcd, sizes)


# vLLM 0.33 runs DeepSeek-V4 with async scheduling (on by default for generation models),
# so every engine step has up to two batches in flight: max_in_flight_tokens is twice the
# step's token budget (VllmConfig.max_in_flight_tokens = max_concurrent_batches * budget).
MAX_CONCURRENT_BATCHES = 2


def dsv4_specs() -> list[Any]:
    """DeepSeek-V4's KV-cache group specs as vLLM 0.33's model code builds them, at its
    default fp8_ds_mla cache dtype (models/deepseek_v4): the MLA attention cache
    (``DeepseekV4MLAAttention.get_kv_cache_spec``: head_dim 512, 584 bytes a token, 576-byte
    alignment), the sliding-window cache of its attention layers (``DeepseekV4SWACache``:
    B=64, the model's window of 128, no bounded replay: that is DeepSeek-V4.1's), and the
    ratio-4 and ratio-128 compressor states (``CompressorStateCache``: float32, state_dim
    2 * coff * 512 with coff 2 resp. 1, B=4 W=8 and B=8 W=128)."""
    import torch
    from vllm.v1.kv_cache_interface import (
        MLAAttentionSpec,
        SlidingWindowMLASpec,
        get_kv_quant_mode,
    )

    head_dim, dtype = 512, "fp8_ds_mla"
    mla = MLAAttentionSpec(
        block_size=256,
        num_kv_heads=1,
        max_tp_shards=1,
        head_size=head_dim,
        dtype=torch.uint8,
        tokens_per_state=4,
        cache_dtype_str=dtype,
        alignment=576,
        model_version="deepseek_v4",
        kv_quant_mode=get_kv_quant_mode(dtype),
        state_content_bytes=584,
    )
    swa = SlidingWindowMLASpec(
        bounded_replay=False,
        block_size=64,
        num_kv_heads=1,
        max_tp_shards=1,
        head_size=head_dim,
        dtype=torch.uint8,
        sliding_window=128,
        cache_dtype_str=dtype,
        state_content_bytes=584,
        alignment=576,
        model_version="deepseek_v4",
        kv_quant_mode=get_kv_quant_mode(dtype),
    )

    def state(ratio: int, block_size: int) -> Any:
        coff = 1 + (ratio == 4)
        return SlidingWindowMLASpec(
            block_size=block_size,
            num_kv_heads=1,
            max_tp_shards=1,
            head_size=2 * coff * head_dim,
            dtype=torch.float32,
            sliding_window=coff * ratio,
            alignment=576,
        )

    return [mla, swa, swa, state(4, 4), state(128, 8)]


def kv_cache_config(layout: str, num_blocks: int) -> Any:
    import torch
    from vllm.v1.kv_cache_interface import (
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
        SlidingWindowSpec,
    )

    specs: list[Any]
    if layout == "dsv4":
        specs = dsv4_specs()
    else:
        plain_kw: dict[str, Any] = dict(num_kv_heads=1, head_size=64, dtype=torch.float16)
        specs = [
            FullAttentionSpec(block_size=b, **plain_kw)
            if kind == "full"
            else SlidingWindowSpec(block_size=b, sliding_window=w, **plain_kw)
            for kind, b, w in LAYOUTS[layout]
        ]
    for spec, (_, b, w) in zip(specs, LAYOUTS[layout]):
        assert spec.block_size == b and getattr(spec, "sliding_window", None) == w, spec
    groups = [KVCacheGroupSpec([f"layer{g}"], spec) for g, spec in enumerate(specs)]
    return KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)


_registered = False


def _register() -> None:
    global _registered
    if not _registered:
        from vllm.utils.hashing import sha256
        from vllm.v1.core.kv_cache_utils import init_none_hash
        from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs

        register_all_kvcache_specs(None)
        init_none_hash(sha256)
        _registered = True


# The rules where livetail and vLLM 0.33 still differ (docs/vllm_side_by_side.md); each can
# be switched to livetail's on a vLLM manager, to show that they explain every difference.
# Naming is no longer one: livetail names only the sliding-window slots a hit can use
# (semantics 13.4), as vLLM's ``reachable_block_mask`` does, and the two name alike.
RULES = ("reclaim-order", "pinned-copy")


def adopt_livetail_rules(manager: Any, rules: Sequence[str] = RULES) -> Any:
    """Give one vLLM KVCacheManager livetail's choice on each rule named (instance only).

    reclaim-order: the blocks a sliding-window reclaim frees enter the free queue in
      ascending slot order (vLLM: descending), so the lowest slot is evicted first.
    pinned-copy: a lookup of a name several blocks carry returns one in use if any (vLLM:
      the first registered), so a hit takes no free page for a copy already pinned.
    """
    unknown = set(rules) - set(RULES)
    if unknown:
        raise ValueError(f"unknown rules {sorted(unknown)}; the rules are {RULES}")
    from vllm.v1.core.single_type_kv_cache_manager import SlidingWindowManager

    pool = manager.block_pool
    for m in manager.coordinator.single_type_managers:
        if not isinstance(m, SlidingWindowManager):
            continue
        if "reclaim-order" in rules:
            remove = m._remove_blocks_in_range

            def ascending(request_id: str, first: int, last: int, _remove: Any = remove) -> None:
                free = pool.free_blocks
                pool.free_blocks = lambda blocks: free(list(blocks)[::-1])
                try:
                    _remove(request_id, first, last)
                finally:
                    del pool.free_blocks

            m._remove_blocks_in_range = ascending
    if "pinned-copy" in rules:
        index = pool.cached_block_hash_to_block
        one = index.get_one_block

        def prefer_pinned(key: Any) -> Any:
            copies = index._cache.get(key)
            if isinstance(copies, dict):
                return next((b for b in copies.values() if b.ref_cnt > 0), one(key))
            return one(key)

        index.get_one_block = prefer_pinned
    return manager


def make_manager(
    impl: str,
    layout: str,
    num_blocks: int,
    stream: Stream,
    max_model_len: int,
    live_tail: bool = False,
    rules: Sequence[str] = (),
) -> Any:
    """impl "vllm": vLLM 0.33's KVCacheManager (with ``rules`` switched to livetail's);
    "livetail": livetail.vllm.KVCacheManager."""
    _register()
    sched, hashb = layout_geometry(layout)
    kwargs = dict(
        kv_cache_config=kv_cache_config(layout, num_blocks),
        max_model_len=max_model_len,
        scheduler_block_size=sched,
        hash_block_size=hashb,
        max_in_flight_tokens=MAX_CONCURRENT_BATCHES * stream.max_num_batched_tokens,
        enable_caching=True,
    )
    if impl == "vllm":
        if live_tail:
            raise ValueError("live_tail: vLLM's manager has no live-tail allocation")
        return adopt_livetail_rules(_vllm().KVCacheManager(**kwargs), rules)
    from livetail.vllm import KVCacheManager

    return KVCacheManager(**kwargs, live_tail_groups=COMPRESSOR_GROUPS[layout] if live_tail else ())


def make_requests(stream: Stream, layout: str) -> dict[str, Any]:
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher
    from vllm.v1.request import Request

    _register()
    hasher = get_request_block_hasher(layout_geometry(layout)[1], sha256)
    out = {}
    for r in stream.requests:
        sp = SamplingParams(max_tokens=r.max_tokens, ignore_eos=True)
        out[r.rid] = Request(r.rid, list(r.prompt), sp, None, block_hasher=hasher)
    return out


# ---- the scheduler-shaped loop ---------------------------------------------------------


def pinned_per_group(manager: Any, running: Sequence[Any], num_groups: int) -> list[int]:
    seen: list[set[int]] = [set() for _ in range(num_groups)]
    for req in running:
        for g, blocks in enumerate(manager.get_blocks(req.request_id).blocks):
            seen[g].update(b.block_id for b in blocks if b.block_id != 0)
    return [len(s) for s in seen]


def run_stream(
    manager: Any,
    stream: Stream,
    layout: str,
    label: str,
    max_steps: int = 100_000,
    on_step: Callable[[int, Any], None] | None = None,
) -> Run:
    from vllm.v1.request import RequestStatus

    reqs = make_requests(stream, layout)
    by_arrival: dict[int, list[str]] = {}
    for r in stream.requests:
        by_arrival.setdefault(r.arrival, []).append(r.rid)
    last_arrival = max(by_arrival, default=0)
    num_groups = len(LAYOUTS[layout])
    total = manager.block_pool.get_num_free_blocks()
    waiting: deque[Any] = deque()
    running: list[Any] = []
    steps: list[StepRecord] = []
    finished = 0
    wedged_at = None
    token = 7  # every sampled token; prompts decide the prefix hits

    for t in range(max_steps):
        if finished == len(reqs):
            break
        manager.new_step_starts()
        for rid in by_arrival.get(t, ()):
            waiting.append(reqs[rid])
        rec = StepRecord()
        budget = stream.max_num_batched_tokens
        scheduled: dict[str, int] = {}

        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            n = min(req.num_tokens - req.num_computed_tokens, budget)
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
        rec.pinned_forward = pinned_per_group(manager, running, num_groups)
        rec.pinned_total_forward = total - manager.block_pool.get_num_free_blocks()
        if on_step is not None:
            on_step(t, manager)

        done = []
        for req in running:
            n = scheduled.get(req.request_id)
            if n is None:
                continue
            req.num_computed_tokens += n
            if req.num_computed_tokens >= req.num_tokens:
                req.append_output_token_ids(token)
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
            wedged_at = t  # the head request can never be admitted: vLLM retries forever
            break
    return Run(label, steps, finished, wedged_at, len(reqs))
