"""livetail.vllm: vLLM 0.33's KVCacheManager interface on livetail (needs vllm and torch).

Skipped where vLLM is not installed (the default test environment); scripts/vllm_env.sh
builds one that has it and runs these besides vLLM's own scheduler tests.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

from livetail import vllm as adapter  # noqa: E402
from vllm.distributed.kv_events import AllBlocksCleared, BlockStored  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import sha256  # noqa: E402
from vllm.v1.core.kv_cache_manager import KVCacheManager as VllmKVCacheManager  # noqa: E402
from vllm.v1.core.kv_cache_utils import (  # noqa: E402
    get_request_block_hasher,
    init_none_hash,
    make_block_hash_with_group_id,
    maybe_convert_block_hash,
)
from vllm.v1.kv_cache_interface import (  # noqa: E402
    CrossAttentionSpec,
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    MambaSpec,
    SlidingWindowSpec,
)
from vllm.v1.request import Request  # noqa: E402
from vllm_builders import request  # noqa: E402

B = 4
init_none_hash(sha256)


def full(block_size: int = B) -> FullAttentionSpec:
    return FullAttentionSpec(
        block_size=block_size, num_kv_heads=1, head_size=1, dtype=torch.float32
    )


def config(*specs: object, num_blocks: int = 11) -> KVCacheConfig:
    groups = [KVCacheGroupSpec([f"layer{i}"], s) for i, s in enumerate(specs)]
    return KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)


def manager(num_blocks: int = 11, **kwargs: object) -> adapter.KVCacheManager:
    return adapter.KVCacheManager(
        config(full(), num_blocks=num_blocks),
        max_model_len=64,
        scheduler_block_size=B,
        hash_block_size=B,
        **kwargs,
    )


def test_importing_livetail_does_not_import_vllm():
    code = "import sys, livetail; assert 'vllm' not in sys.modules, 'vllm imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_key_of_keeps_32_byte_hashes_and_derives_the_others():
    assert adapter.key_of(b"k" * 32) == b"k" * 32
    derived = hashlib.sha256(adapter.KEY_DERIVATION_PREFIX + b"12345678").digest()
    assert adapter.key_of(b"12345678") == derived


def test_group_specs_map_full_and_sliding_with_live_tail_off_unless_opted_in():
    swa = SlidingWindowSpec(
        block_size=B, num_kv_heads=1, head_size=1, dtype=torch.float32, sliding_window=8
    )
    specs = adapter.group_specs(config(full(), swa))
    assert [(s.kind, s.block_size, s.sliding_window, s.live_tail_alloc) for s in specs] == [
        ("full", B, None, False),
        ("sliding", B, 8, False),
    ]
    assert adapter.group_specs(config(full(), swa), live_tail_groups=[1])[1].live_tail_alloc
    with pytest.raises(ValueError, match="group 0 is not a sliding-window group"):
        adapter.group_specs(config(full(), swa), live_tail_groups=[0])


def test_group_specs_refuse_other_groups_by_name():
    cross = CrossAttentionSpec(block_size=B, num_kv_heads=1, head_size=1, dtype=torch.float32)
    with pytest.raises(NotImplementedError, match=r"cross attention .*group 1: CrossAttentionSpec"):
        adapter.group_specs(config(full(), cross))


def test_group_specs_map_mamba_without_a_cache_mode_to_state_and_align_to_live_tail():
    def mamba(mode: str) -> MambaSpec:
        return MambaSpec(
            block_size=64, shapes=((1,),), dtypes=(torch.float32,), mamba_cache_mode=mode
        )

    (spec,) = adapter.group_specs(config(mamba("none")))
    assert (spec.kind, spec.block_size, spec.live_tail_alloc) == ("state", 64, False)
    with pytest.raises(NotImplementedError, match="without prefill checkpoint blocks"):
        adapter.group_specs(config(mamba("align")))  # with them: tests/test_vllm_mamba.py


def test_allocate_slots_takes_pages_in_queue_order_and_names_full_blocks():
    m = manager()
    r = request("a", list(range(10)))
    new = m.allocate_slots(r, 10)
    assert new.get_block_ids() == ([1, 2, 3],)
    assert m.get_block_ids("a") == ([1, 2, 3],)
    assert m.block_pool.get_num_free_blocks() == 7
    assert m.usage == pytest.approx(0.3)
    # Two full blocks carry names (the third holds 2 tokens): 8 cached tokens.
    assert m.estimate_cached_tokens(r) == 8
    assert [m.pool.name(p) is not None for p in (1, 2, 3)] == [True, True, False]


def test_a_prefix_hit_is_claimed_and_the_rest_acquired():
    m = manager()
    m.allocate_slots(request("a", list(range(10))), 10)
    b = request("b", list(range(10)))
    blocks, hit, boundary = m.get_computed_blocks(b)
    assert (blocks.get_block_ids(), hit, boundary) == (([1, 2],), 8, 0)
    new = m.allocate_slots(b, 2, num_new_computed_tokens=8, new_computed_blocks=blocks)
    assert new.get_block_ids() == ([4],)
    assert m.get_block_ids("b") == ([1, 2, 4],)
    assert [m.pool.ref_count(p) for p in (1, 2, 3, 4)] == [2, 2, 1, 1]
    assert m.block_pool.get_num_free_blocks() == 6


def test_a_blocks_hash_is_the_pools_name_of_its_page_now():
    # vLLM's block_hash: the block hash with the group id appended while the page is named.
    m = manager()
    a = request("a", list(range(10)))
    m.allocate_slots(a, 10)
    blocks = m.get_blocks("a").blocks[0]
    expected = [make_block_hash_with_group_id(h, 0) for h in a.block_hashes]
    assert [b.block_hash for b in blocks] == [*expected, None]  # the third holds 2 tokens
    m.evict_blocks({blocks[1].block_id})
    assert [b.block_hash for b in blocks] == [expected[0], None, None]
    assert m.block_pool.null_block.block_hash is None


def test_free_keeps_names_matchable_and_restores_the_pool():
    m = manager()
    a = request("a", list(range(10)))
    m.allocate_slots(a, 10)
    m.free(a)
    assert m.block_pool.get_num_free_blocks() == 10
    assert m.usage == 0.0
    assert m.get_computed_blocks(request("c", list(range(10))))[1] == 8


def test_allocate_slots_returns_none_and_changes_nothing_when_short():
    m = manager(num_blocks=4)
    assert m.allocate_slots(request("a", list(range(16))), 16) is None
    assert m.block_pool.get_num_free_blocks() == 3
    assert m.get_block_ids("a") == ([],)


def test_full_sequence_must_fit_charges_the_whole_prompt():
    m = manager(num_blocks=4)
    r = request("a", list(range(20)))
    assert m.allocate_slots(r, 4, full_sequence_must_fit=True) is None
    assert m.allocate_slots(r, 4).get_block_ids() == ([1],)


def test_take_events_gives_vllms_stored_events_with_their_tokens():
    m = manager(enable_kv_cache_events=True)
    r = request("a", list(range(9)))
    m.allocate_slots(r, 9)
    h0, h1 = r.block_hashes[0], r.block_hashes[1]

    def stored(h: bytes, parent: bytes | None, tokens: list[int]) -> BlockStored:
        return BlockStored(
            block_hashes=[maybe_convert_block_hash(h)],
            parent_block_hash=None if parent is None else maybe_convert_block_hash(parent),
            token_ids=tokens,
            block_size=B,
            lora_id=None,
            medium="GPU",
            lora_name=None,
            group_idx=0,
            kv_cache_spec_kind="full_attention",
            kv_cache_spec_sliding_window=None,
        )

    assert m.take_events() == [stored(h0, None, [0, 1, 2, 3]), stored(h1, h0, [4, 5, 6, 7])]
    assert m.take_events() == []


def test_decode_steps_return_only_new_blocks_and_name_each_block_once_full():
    m = manager(enable_kv_cache_events=True)
    r = request("a", list(range(6)))
    assert m.allocate_slots(r, 6).get_block_ids() == ([1, 2],)
    r.num_computed_tokens = 6
    got = []
    for token in (100, 101, 102):
        r.append_output_token_ids(token)
        got.append(m.allocate_slots(r, 1).get_block_ids())
        r.num_computed_tokens += 1
    # Token 101 fills block 2 (named then), token 102 opens block 3.
    assert got == [([],), ([],), ([3],)]
    assert m.get_block_ids("a") == ([1, 2, 3],)
    assert m.estimate_cached_tokens(r) == 8
    h0, h1 = r.block_hashes[0], r.block_hashes[1]
    assert [(e.block_hashes, e.parent_block_hash, e.token_ids) for e in m.take_events()] == [
        ([maybe_convert_block_hash(h0)], None, [0, 1, 2, 3]),
        ([maybe_convert_block_hash(h1)], maybe_convert_block_hash(h0), [4, 5, 100, 101]),
    ]


def test_a_decode_step_the_pool_cannot_serve_returns_none_and_keeps_the_request():
    m = manager(num_blocks=3)
    r = request("a", list(range(8)))
    assert m.allocate_slots(r, 8).get_block_ids() == ([1, 2],)
    r.num_computed_tokens = 8
    r.append_output_token_ids(100)
    assert m.allocate_slots(r, 1) is None
    assert m.get_block_ids("a") == ([1, 2],)
    assert m.block_pool.get_num_free_blocks() == 0
    m.free(r)
    assert m.block_pool.get_num_free_blocks() == 2


def test_without_kv_events_the_pool_keeps_no_event_queue():
    m = manager()
    m.allocate_slots(request("a", list(range(9))), 9)
    assert m.take_events() == []
    with pytest.raises(ValueError, match="built with events=False"):
        m.pool.take_events()


def test_reset_prefix_cache_is_refused_while_a_page_is_in_use():
    m = manager(enable_kv_cache_events=True)
    a = request("a", list(range(10)))
    m.allocate_slots(a, 10)
    m.take_events()
    assert m.reset_prefix_cache() is False
    m.free(a)
    assert m.reset_prefix_cache() is True
    assert m.take_events() == [AllBlocksCleared()]
    assert m.get_computed_blocks(request("c", list(range(10))))[1] == 0
    assert m.block_pool.get_num_free_blocks() == 10


def test_a_sliding_group_gives_back_slid_out_pages_as_null_blocks():
    swa = SlidingWindowSpec(
        block_size=B, num_kv_heads=1, head_size=1, dtype=torch.float32, sliding_window=4
    )
    m = adapter.KVCacheManager(
        config(full(), swa), max_model_len=64, scheduler_block_size=B, hash_block_size=B
    )
    m.allocate_slots(request("a", list(range(17))), 16)
    assert m.get_block_ids("a") == ([1, 2, 3, 4], [5, 6, 7, 8])
    # 16 tokens done: the next query reads tokens 13..16, so slots 0-2 slid out (W=4, B=4).
    m.remove_skipped_blocks("a", 16)
    assert m.get_block_ids("a") == ([1, 2, 3, 4], [0, 0, 0, 8])
    assert m.block_pool.get_num_free_blocks() == 5


def test_pop_blocks_for_free_holds_the_pages_until_the_pool_frees_them():
    m = manager()
    a = request("a", list(range(10)))
    m.allocate_slots(a, 10)
    blocks = m.pop_blocks_for_free(a)
    assert [b.block_id for b in blocks] == [1, 2, 3]
    assert m.get_block_ids("a") == ([],)
    assert m.block_pool.get_num_free_blocks() == 7
    m.block_pool.free_blocks(reversed(blocks))
    assert m.block_pool.get_num_free_blocks() == 10


def test_unsupported_allocation_features_raise_named_errors():
    m = manager()
    r = request("a", list(range(8)))
    with pytest.raises(NotImplementedError, match="encoder tokens"):
        m.allocate_slots(r, 4, num_encoder_tokens=4)
    assert m.block_pool.get_num_free_blocks() == 10


def test_scheduler_swap_is_scoped_to_construction():
    import vllm.v1.core.sched.scheduler as sched
    from livetail.vllm._scheduler import _livetail_manager

    saved = sched.KVCacheManager
    with _livetail_manager():
        assert sched.KVCacheManager is adapter.KVCacheManager
    assert sched.KVCacheManager is saved


def _with_retention(interval: object) -> adapter.KVCacheManager:
    swa = SlidingWindowSpec(
        block_size=B, num_kv_heads=1, head_size=1, dtype=torch.float32, sliding_window=8
    )
    cfg = config(full(), swa, num_blocks=64)
    cfg.prefix_cache_retention_interval = interval
    return adapter.KVCacheManager(
        cfg, max_model_len=64, scheduler_block_size=B, hash_block_size=B, live_tail_groups=[1]
    )


@pytest.mark.parametrize("interval,alignment", [(None, B), (0, B), (B, B), (16, 16)])
def test_the_retention_interval_is_the_coordinators_alignment(interval, alignment):
    # None (dense) and 0 (vLLM's replay boundaries only) give the lcm; a positive interval
    # that is a multiple of the lcm is the alignment (semantics 13.9).
    m = _with_retention(interval)
    assert m.livetail_coordinator.alignment == alignment


def test_a_retention_interval_off_the_lcm_is_refused_by_name():
    with pytest.raises(NotImplementedError, match="prefix_cache_retention_interval 6"):
        _with_retention(6)
def _gpt_oss(num_blocks: int) -> KVCacheConfig:
    swa = SlidingWindowSpec(
        block_size=16, num_kv_heads=1, head_size=1, dtype=torch.float32, sliding_window=128
    )
    return config(full(16), swa, num_blocks=num_blocks)


def _prompt(rid: str, n: int) -> Request:
    return Request(
        request_id=rid,
        prompt_token_ids=list(range(n)),
        sampling_params=SamplingParams(max_tokens=4),
        pooling_params=None,
        block_hasher=get_request_block_hasher(16, sha256),
    )


def _admits(m: object, n: int) -> bool:
    r = _prompt("a", n)
    return m.allocate_slots(r, min(n, 512), full_sequence_must_fit=True) is not None  # type: ignore[attr-defined]


def test_full_sequence_must_fit_charges_the_peak_of_chunked_prefill_as_vllm_does():
    """gpt-oss's layout (full + sliding W=128, B=16), a 3000-token prompt, 512-token steps,
    300 pages: the whole sequence's pages in every group would be 188 + 188 and never fit;
    the chunked peak is 188 + 41 (vLLM's cap for the sliding group), and it is admitted."""
    kw = dict(max_model_len=4096, scheduler_block_size=16, hash_block_size=16)
    ours = adapter.KVCacheManager(_gpt_oss(300), max_in_flight_tokens=512, **kw)
    tables = ours.livetail_coordinator.new_tables()
    assert ours._charge(tables, None, 3000, whole_prompt=True) == 188 + 41
    assert _admits(ours, 3000)
    theirs = VllmKVCacheManager(_gpt_oss(300), max_in_flight_tokens=512, **kw)
    assert _admits(theirs, 3000)
    # The smallest pool each admits the prompt in: livetail never charges more than vLLM.
    for n in (100, 700, 3000):
        ours_low = _smallest(adapter.KVCacheManager, n, kw)
        vllm_low = _smallest(VllmKVCacheManager, n, kw)
        assert ours_low <= vllm_low, (n, ours_low, vllm_low)
    assert _smallest(adapter.KVCacheManager, 3000, kw) == 1 + 188 + 41  # page 0 is null


def _smallest(cls: type, n: int, kw: dict[str, int]) -> int:
    """The fewest num_blocks with which a manager of class cls admits an n-token prompt."""
    lo, hi = 1, 2048
    while lo < hi:
        mid = (lo + hi) // 2
        if _admits(cls(_gpt_oss(mid), max_in_flight_tokens=512, **kw), n):
            hi = mid
        else:
            lo = mid + 1
    return lo
