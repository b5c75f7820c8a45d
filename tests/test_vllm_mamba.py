"""livetail.vllm with Mamba "align" mode (semantics 13.5; needs vllm and torch).

vLLM's MambaSpec in mode "align" becomes a state group with live tail (checkpoints when the
layers export them); the adapter defers a hit on a state page named in the same step, as
vLLM's MambaManager does, and refuses by name what the core does not model. Skipped where
vLLM is not installed.
"""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

import importlib.util  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from livetail import vllm as adapter  # noqa: E402
from vllm.utils.hashing import sha256  # noqa: E402
from vllm.v1.core.kv_cache_manager import KVCacheManager as VllmKVCacheManager  # noqa: E402
from vllm.v1.core.kv_cache_utils import init_none_hash  # noqa: E402
from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    MambaSpec,
)
from vllm_builders import request  # noqa: E402

B = 4
init_none_hash(sha256)
register_all_kvcache_specs(None)


def mamba(checkpoints: bool = True, **kw: object) -> MambaSpec:
    args: dict[str, object] = dict(
        block_size=B,
        shapes=((1,),),
        dtypes=(torch.float32,),
        mamba_cache_mode="align",
        num_prefill_checkpoint_blocks=1 if checkpoints else 0,
        prefill_checkpoint_alignment=B if checkpoints else None,
    )
    args.update(kw)
    return MambaSpec(**args)  # type: ignore[arg-type]


def config(*specs: object, num_blocks: int = 40) -> KVCacheConfig:
    groups = [KVCacheGroupSpec([f"layer{i}"], s) for i, s in enumerate(specs)]
    return KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)


def hybrid(checkpoints: bool = True, num_blocks: int = 40) -> KVCacheConfig:
    full = FullAttentionSpec(block_size=B, num_kv_heads=1, head_size=1, dtype=torch.float32)
    return config(full, mamba(checkpoints), num_blocks=num_blocks)


def managers(checkpoints: bool = True, num_blocks: int = 40, hash_block: int = B) -> list:
    kw = dict(max_model_len=256, scheduler_block_size=B, hash_block_size=hash_block)
    cfg = hybrid(checkpoints, num_blocks)
    return [VllmKVCacheManager(cfg, **kw), adapter.KVCacheManager(cfg, **kw)]


def test_align_maps_to_a_state_group_with_live_tail_and_checkpoints_when_exported():
    (spec,) = adapter.group_specs(config(mamba(True)))
    assert (spec.kind, spec.block_size, spec.live_tail_alloc, spec.checkpoints) == (
        "state", B, True, True
    )
    with pytest.raises(NotImplementedError, match="without prefill checkpoint blocks"):
        adapter.group_specs(config(mamba(False)))
    # An alignment of 1 (Mamba2's) divides every block: checkpoints.
    (spec,) = adapter.group_specs(config(mamba(True, prefill_checkpoint_alignment=1)))
    assert spec.checkpoints


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        (dict(num_speculative_blocks=1), 'Mamba "align" mode with speculative blocks'),
        (dict(prefill_checkpoint_alignment=3), "checkpoint alignment 3 that does not divide"),
    ],
)
def test_align_refuses_what_the_core_does_not_model_by_name(kw: dict, words: str) -> None:
    with pytest.raises(NotImplementedError, match=words):
        adapter.group_specs(config(mamba(True, **kw)))


def test_hashing_finer_than_the_mamba_block_is_refused_by_name():
    kw = dict(max_model_len=256, scheduler_block_size=B, hash_block_size=2)
    with pytest.raises(NotImplementedError, match="hashing finer than the Mamba block"):
        adapter.KVCacheManager(hybrid(), **kw)


def _blocks(m: object, rid: str) -> list[list[int]]:
    return [list(g) for g in m.get_block_ids(rid)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("checkpoints", [True])
def test_a_prefill_and_decode_hold_the_pages_vllms_manager_holds(checkpoints: bool) -> None:
    """A 10-token prompt in chunks of 8 then 2, then decode: the same block ids per group at
    every step on both managers (state pages only at the running state and checkpoint)."""
    seen = []
    for m in managers(checkpoints):
        r = request("a", list(range(10)))
        steps = []
        m.new_step_starts()
        assert m.allocate_slots(r, 8) is not None
        steps.append(_blocks(m, "a"))
        r.num_computed_tokens = 8
        m.cache_blocks(r, 8)
        m.new_step_starts()
        m.remove_skipped_blocks("a", 8)
        assert m.allocate_slots(r, 2) is not None
        steps.append(_blocks(m, "a"))
        r.num_computed_tokens = 10
        r.append_output_token_ids(7)
        for _ in range(3):
            m.new_step_starts()
            m.remove_skipped_blocks("a", r.num_computed_tokens)
            assert m.allocate_slots(r, 1) is not None
            steps.append(_blocks(m, "a"))
            r.num_computed_tokens += 1
            r.append_output_token_ids(7)
        seen.append(steps)
    assert seen[0] == seen[1]
    # Chunk [0, 8): the running state in slot 1 and, with checkpoints, slot 0 (state at 4).
    first_mamba = seen[1][0][1]
    assert (first_mamba[0] != 0) == checkpoints and first_mamba[1] != 0


def test_a_hit_on_a_state_named_this_step_waits_for_the_next_step_as_in_vllm():
    results = []
    for m in managers():
        a, b = request("a", list(range(13))), request("b", list(range(13)))
        m.new_step_starts()
        assert m.allocate_slots(a, 12) is not None  # names the chunk's pages now
        blocks, hit, _ = m.get_computed_blocks(b)
        same_step = m.allocate_slots(b, 13 - hit, hit, blocks, full_sequence_must_fit=True)
        a.num_computed_tokens = 12
        m.new_step_starts()
        blocks, hit2, _ = m.get_computed_blocks(b)
        next_step = m.allocate_slots(b, 13 - hit2, hit2, blocks, full_sequence_must_fit=True)
        results.append((hit, same_step is None, hit2, next_step is None))
    # vLLM's manager, then the adapter: a 12-token hit deferred in the step that named it,
    # admitted in the next.
    assert results == [(12, True, 12, False), (12, True, 12, False)]


def test_a_step_from_inside_a_page_past_its_end_is_refused_by_name():
    m = managers()[1]
    r = request("a", list(range(30)))
    assert m.allocate_slots(r, 6) is not None  # the last chunk ends inside a page
    r.num_computed_tokens = 6
    with pytest.raises(NotImplementedError, match="from inside a page"):
        m.allocate_slots(r, 5)


def test_speculative_decoding_in_align_mode_is_refused_by_name():
    kw = dict(max_model_len=256, scheduler_block_size=B, hash_block_size=B, use_eagle=True)
    with pytest.raises(NotImplementedError, match='Mamba "align" mode with speculative'):
        adapter.KVCacheManager(hybrid(), **kw)


def test_qwen3_next_layout_side_by_side_equal_at_every_step_at_ci_size():
    """benchmarks/vllm_mamba_side_by_side.py --ci: Qwen3-Next's layout (full attention +
    gated DeltaNet state in "align" mode, B = 544, checkpoints) on a shared-prefix stream:
    every step's admissions, hits, preemptions, running requests and pinned pages per group
    equal on vLLM's manager and the adapter, at both pool sizes."""
    bench = str(Path(__file__).resolve().parent.parent / "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    spec = importlib.util.spec_from_file_location(
        "vllm_mamba_side_by_side", Path(bench) / "vllm_mamba_side_by_side.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    rows = mod.rows(ci=True)
    assert [(name, nb) for name, nb, *_ in rows] == [("shared prefix", 60), ("shared prefix", 400)]
    for name, nb, v, lt, diff, _ in rows:
        assert diff is None, (name, nb, diff)
        assert v.drained and lt.drained and len(v.steps) == 42
        assert v.hit_tokens == lt.hit_tokens == 17408 and v.peak_pages == lt.peak_pages == 44
