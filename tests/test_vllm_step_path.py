"""livetail.vllm's per-step path (python/livetail/vllm/_step.py) against the path it skips.

The reference manager answers every ``allocate_slots`` and ``cache_blocks`` by the general
path; the tested one takes the per-step path where it applies. On the same random traces
(admissions with prefix hits, decode and chunk steps with and without lookahead slots,
naming, reclaims, frees, preemptions) both must return the same blocks and leave the same
pool, tables, names, events and stats after every call. Needs vllm and torch.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

from livetail import vllm as adapter  # noqa: E402
from livetail.vllm._step import _NEVER  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import sha256  # noqa: E402
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    MambaSpec,
    SlidingWindowSpec,
)
from vllm.v1.request import Request, RequestStatus  # noqa: E402

init_none_hash(sha256)


class Reference(adapter.KVCacheManager):
    """The adapter with the per-step path switched off."""

    per_step_path = False


def full(b: int) -> FullAttentionSpec:
    return FullAttentionSpec(block_size=b, num_kv_heads=1, head_size=1, dtype=torch.float32)


def swa(b: int, w: int) -> SlidingWindowSpec:
    return SlidingWindowSpec(
        block_size=b, num_kv_heads=1, head_size=1, dtype=torch.float32, sliding_window=w
    )


def mamba(b: int) -> MambaSpec:
    return MambaSpec(
        block_size=b, shapes=((1,),), dtypes=(torch.float32,), mamba_cache_mode="none"
    )


# (name, specs, base page = hash block size, live_tail_groups)
LAYOUTS: list[tuple[str, list[Any], int, tuple[int, ...]]] = [
    ("full", [full(4)], 4, ()),
    ("full+swa", [full(4), swa(4, 6)], 4, ()),
    ("full8+swa4", [full(8), swa(4, 9)], 4, ()),
    ("full+swa live tail", [full(4), swa(4, 5)], 4, (1,)),
    ("full+mamba", [full(4), mamba(4)], 4, ()),
]


def make(cls: type, specs: list[Any], base: int, live: tuple[int, ...], **kw: Any) -> Any:
    groups = [KVCacheGroupSpec([f"layer{i}"], s) for i, s in enumerate(specs)]
    cfg = KVCacheConfig(
        num_blocks=kw.pop("num_blocks"), kv_cache_tensors=[], kv_cache_groups=groups
    )
    return cls(
        cfg,
        max_model_len=96,
        scheduler_block_size=base,
        hash_block_size=base,
        live_tail_groups=live,
        **kw,
    )


def state(m: Any, rids: list[str]) -> Any:
    """Everything observable of a manager (reading tables applies any deferred tokens)."""
    return (
        m.pool.num_free,
        m.usage,
        m.pool.ref_counts().tolist(),
        m.livetail_coordinator.stats(),
        {rid: m.get_block_ids(rid) for rid in rids},
        {rid: [(t.extent, t.reclaim_floor, len(t)) for t in m._reqs[rid].tables]
         for rid in rids if rid in m._reqs},
        m.take_events(),
        m.take_new_block_ids(),
    )  # fmt: skip


def ids(blocks: Any) -> Any:
    return None if blocks is None else blocks.get_block_ids()


def run_trace(seed: int, layout: int, events: bool, lookahead: bool) -> tuple[int, int]:
    """One random trace on both managers; returns (allocate_slots calls, per-step ones)."""
    name, specs, base, live = LAYOUTS[layout]
    rng = random.Random(seed)
    kw = dict(num_blocks=rng.choice([12, 24, 60]), enable_kv_cache_events=events)
    ref = make(Reference, specs, base, live, **kw)
    fast = make(adapter.KVCacheManager, specs, base, live, **kw)
    hasher = get_request_block_hasher(base, sha256)
    prefix = [rng.randrange(1, 50) for _ in range(40)]
    running: list[Request] = []
    waiting: list[Request] = []
    calls = per_step = 0
    for i in range(rng.randrange(4, 9)):
        toks = prefix[: rng.randrange(0, 40)] + [rng.randrange(1, 50) for _ in range(8)]
        sp = SamplingParams(max_tokens=200, ignore_eos=True)
        waiting.append(Request(f"r{i}", toks, sp, None, block_hasher=hasher))
    for _ in range(120):
        op = rng.random()
        if waiting and (op < 0.15 or not running):
            req = waiting.pop(0)
            (ba, hit, _), (bb, hit_b, _) = (m.get_computed_blocks(req) for m in (ref, fast))
            assert hit == hit_b and ids(ba) == ids(bb)
            n = min(req.num_tokens - hit, rng.choice([4, 9, 64]))
            a, new = (
                ids(m.allocate_slots(req, n, hit, b if hit else None, full_sequence_must_fit=True))
                for m, b in ((ref, ba), (fast, bb))
            )
            assert a == new, (name, seed)
            if new is None:
                waiting.insert(0, req)
                if not running:
                    break
                continue
            req.num_computed_tokens = hit
            req.status = RequestStatus.RUNNING
            running.append(req)
            pending = n
        elif running:
            req = rng.choice(running)
            left = req.num_tokens - req.num_computed_tokens
            n = left if left > 0 and rng.random() < 0.5 else 1
            n = max(1, min(n, rng.choice([1, 1, 1, 3, 7])))
            la = rng.choice([0, 0, 1, 2]) if lookahead else 0
            kwargs = {"num_lookahead_tokens": la} if la or rng.random() < 0.5 else {}
            before = fast._reqs[req.request_id].room >= 0 if req.request_id in fast._reqs else False
            a = ids(ref.allocate_slots(req, n, **kwargs))
            b = ids(fast.allocate_slots(req, n, **kwargs))
            calls += 1
            per_step += before and fast._reqs[req.request_id].room >= 0
            assert a == b, (name, seed)
            if a is None:  # preempt it, as the scheduler would
                for m in (ref, fast):
                    m.free(req)
                running.remove(req)
                req.status = RequestStatus.PREEMPTED
                req.num_computed_tokens = 0
                waiting.append(req)
                continue
            pending = n
        else:
            break
        # The step ran: tokens computed, a sampled token once the prompt is done.
        req.num_computed_tokens += pending
        if req.num_computed_tokens >= req.num_tokens:
            req.append_output_token_ids(rng.randrange(1, 50))
        if rng.random() < 0.3:
            for m in (ref, fast):
                m.cache_blocks(req, req.num_computed_tokens - rng.choice([0, 1]))
        if rng.random() < 0.1:
            for m in (ref, fast):
                m.remove_skipped_blocks(req.request_id, max(0, req.num_computed_tokens - 1))
        if rng.random() < 0.05:
            for m in (ref, fast):
                m.free(req)
            running.remove(req)
        if rng.random() < 0.2:
            rids = [r.request_id for r in running]
            assert state(ref, rids) == state(fast, rids), (name, seed)
        assert ref.get_blocks(req.request_id).get_block_ids() == fast.get_blocks(
            req.request_id
        ).get_block_ids()
        assert ref.estimate_cached_tokens(req) == fast.estimate_cached_tokens(req)
    rids = [r.request_id for r in running]
    assert state(ref, rids) == state(fast, rids), (name, seed)
    return calls, per_step


@pytest.mark.parametrize("layout", range(len(LAYOUTS)), ids=[x[0] for x in LAYOUTS])
@pytest.mark.parametrize("events", [False, True])
def test_the_per_step_path_changes_nothing_the_general_path_would_not(layout: int, events: bool):
    calls = per_step = 0
    for seed in range(12):
        lookahead = not LAYOUTS[layout][3]  # live tail refuses lookahead slots
        c, p = run_trace(seed, layout, events, lookahead)
        calls += c
        per_step += p
    # Not vacuous: most calls took the per-step path.
    assert calls > 300 and per_step > calls // 2, (calls, per_step)


def test_a_decode_step_inside_the_room_makes_no_native_call_until_the_tables_are_read():
    m = make(adapter.KVCacheManager, [full(4), swa(4, 8)], 4, (), num_blocks=20)
    hasher = get_request_block_hasher(4, sha256)
    req = Request("a", list(range(1, 10)), SamplingParams(max_tokens=9), None, block_hasher=hasher)
    assert m.allocate_slots(req, 9) is not None
    req.num_computed_tokens = 9
    req.status = RequestStatus.RUNNING
    r = m._reqs["a"]
    # 9 tokens in pages of 4: room to 12; the window reclaims from frontier 4*1 + 8 - 1 = 11
    # (slot 0 slides out); 12 tokens name a third page.
    assert (r.extent, r.room, r.reclaim_at, r.name_at, r.pending) == (9, 12, 11, 12, 0)
    req.append_output_token_ids(5)
    assert m.allocate_slots(req, 1, num_lookahead_tokens=1) is m.empty_kv_cache_blocks
    assert (r.extent, r.pending, r._tables[0].extent) == (11, 2, 9)
    m.cache_blocks(req, 10)  # below name_at: nothing read
    assert r.pending == 2
    assert m.get_block_ids("a") == ([1, 2, 3], [4, 5, 6])  # page ids: nothing applied
    assert r.pending == 2 and r.room == 12
    assert [t.extent for t in r.tables] == [11, 11]  # reading the tables applies them
    assert (r.pending, r.room) == (0, -1)


def test_the_mirror_has_no_thresholds_where_nothing_reclaims_or_names():
    m = make(adapter.KVCacheManager, [full(4)], 4, (), num_blocks=20, enable_caching=False)
    hasher = get_request_block_hasher(4, sha256)
    req = Request("a", list(range(1, 6)), SamplingParams(max_tokens=9), None, block_hasher=hasher)
    m.allocate_slots(req, 5)
    r = m._reqs["a"]
    assert (r.extent, r.room, r.reclaim_at, r.name_at) == (5, 8, _NEVER, _NEVER)


def test_bad_arguments_still_raise_on_a_running_request():
    m = make(adapter.KVCacheManager, [full(4), swa(4, 5)], 4, (1,), num_blocks=20)
    hasher = get_request_block_hasher(4, sha256)
    req = Request("a", list(range(1, 6)), SamplingParams(max_tokens=9), None, block_hasher=hasher)
    m.allocate_slots(req, 5)
    req.num_computed_tokens = 5
    req.status = RequestStatus.RUNNING
    assert m._reqs["a"].room == 8
    free = m.pool.num_free
    with pytest.raises(ValueError, match="num_new_tokens must be greater than 0"):
        m.allocate_slots(req, 0)
    with pytest.raises(ValueError, match="num_lookahead_tokens must be non-negative"):
        m.allocate_slots(req, 1, num_lookahead_tokens=-1)
    with pytest.raises(NotImplementedError, match="live tail .* speculative decoding"):
        m.allocate_slots(req, 1, num_lookahead_tokens=1)
    with pytest.raises(NotImplementedError, match="encoder tokens"):
        m.allocate_slots(req, 1, num_encoder_tokens=1)
    with pytest.raises(TypeError):
        m.allocate_slots(req, 1, no_such_argument=1)
    assert m._reqs["a"].extent == 5 and m.pool.num_free == free
