"""livetail.vllm under three of vLLM 0.33's manager options, beside vLLM's own KVCacheManager:
decode context parallelism, KV-cache residency metrics and kv_cache_report_mode="full"
(needs vllm and torch; docs/decisions.md, "vLLM adapter")."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("vllm")
pytest.importorskip("torch")

from livetail import vllm as adapter  # noqa: E402
from vllm.distributed.kv_events import BlockStored  # noqa: E402
from vllm.v1.core.kv_cache_manager import KVCacheManager as VllmManager  # noqa: E402
from vllm_builders import build, full, request, swa  # noqa: E402

BOTH = [VllmManager, adapter.KVCacheManager]


# -- decode context parallelism -------------------------------------------------------------


@pytest.mark.parametrize("cls", BOTH)
def test_dcp_pages_hold_block_size_times_dcp_tokens_in_sharded_groups_only(cls: type) -> None:
    # Group 0 is sharded over 4 ranks (pages of 16 tokens), group 1 a replicated draft (4).
    m = build(
        cls,
        full(),
        full(dcp_sharded=False),
        dcp_world_size=4,
        scheduler_block_size=16,
        enable_kv_cache_events=True,
    )
    r = request("a", list(range(40)))
    assert m.allocate_slots(r, 40).get_block_ids() == ([1, 2, 3], list(range(4, 14)))
    stored = [e for e in m.take_events() if isinstance(e, BlockStored)]
    # Two full pages of group 0 (16 tokens each). Group 1 (4 each): vLLM names up to the
    # last multiple of the scheduler block (32 tokens, 8 pages), livetail every full page
    # (10; docs/decisions.md: names past the lcm boundary serve no hit until it fills).
    named = 8 if cls is VllmManager else 10
    assert (
        sorted((e.group_idx, e.block_size) for e in stored for _ in e.block_hashes)
        == [(0, 16)] * 2 + [(1, 4)] * named
    )
    r.num_computed_tokens = 40
    blocks, hit, _ = m.get_computed_blocks(request("b", list(range(40))))
    assert (hit, blocks.get_block_ids()) == (32, ([1, 2], list(range(4, 12))))


def test_dcp_refuses_a_sharded_sliding_group_with_nothing_built() -> None:
    with pytest.raises(ValueError, match="DCP supports only full-attention groups .* group 1"):
        build(adapter.KVCacheManager, full(), swa(8), dcp_world_size=2)
    with pytest.raises(ValueError, match="dcp_world_size and pcp_world_size must be >= 1"):
        build(adapter.KVCacheManager, full(), dcp_world_size=0)


def test_pcp_changes_no_page_size() -> None:
    m = build(adapter.KVCacheManager, full(), pcp_world_size=2)
    assert [s.block_size for s in m.specs] == [4]


# -- residency metrics ----------------------------------------------------------------------


class Recorder:
    """A KVCacheMetricsCollector that records its callbacks instead of sampling."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def on_block_allocated(self, block: Any) -> None:
        self.calls.append(("allocated", block.block_id))

    def on_block_accessed(self, block: Any) -> None:
        self.calls.append(("accessed", block.block_id))

    def on_block_evicted(self, block: Any) -> None:
        self.calls.append(("evicted", block.block_id))

    def reset(self) -> None:
        self.calls.append(("reset",))


def residency_calls(cls: type) -> list[tuple[Any, ...]]:
    rec = Recorder()
    m = build(cls, full(), num_blocks=9, metrics_collector=rec)
    a = request("a", list(range(10)))
    assert m.allocate_slots(a, 10) is not None  # pages 1-3; 1 and 2 named
    a.num_computed_tokens = 10
    m.free(a)
    b = request("b", list(range(9)))
    blocks, hit, _ = m.get_computed_blocks(b)
    assert hit == 8
    assert m.allocate_slots(b, 1, hit, blocks) is not None  # claims 1, 2; takes one page
    m.free(b)
    # Seven pages from eight free: the last one taken is named page 2 (its name evicted).
    assert m.allocate_slots(request("c", list(range(100, 128))), 28) is not None
    m.free(request("c", []))
    assert m.reset_prefix_cache()
    return rec.calls


def test_residency_callbacks_are_vllms_in_order() -> None:
    taken = lambda *pages: [x for p in pages for x in (("evicted", p), ("allocated", p))]  # noqa: E731
    expected = [
        *taken(1, 2, 3),
        ("accessed", 1),
        ("accessed", 2),
        *taken(3),
        *taken(3, 4, 5, 6, 7, 8, 2),
        ("reset",),
    ]
    assert residency_calls(adapter.KVCacheManager) == expected
    assert residency_calls(VllmManager) == expected


@pytest.mark.parametrize("cls", BOTH)
def test_residency_reports_each_page_of_a_connector_load_once(cls: type) -> None:
    # 4 tokens loaded by a connector (one page), 6 computed (two pages): each taken once.
    rec = Recorder()
    m = build(cls, full(), metrics_collector=rec)
    r = request("a", list(range(10)))
    assert m.allocate_slots(r, 6, num_external_computed_tokens=4) is not None
    assert rec.calls == [x for p in (1, 2, 3) for x in (("evicted", p), ("allocated", p))]


def test_residency_without_prefix_caching_reports_allocations_only() -> None:
    rec = Recorder()
    m = build(adapter.KVCacheManager, full(), metrics_collector=rec, enable_caching=False)
    assert m.allocate_slots(request("a", list(range(6))), 6) is not None
    assert rec.calls == [("allocated", 1), ("allocated", 2)]


# -- kv_cache_report_mode="full" ------------------------------------------------------------


def reannounced(cls: type, *specs: Any) -> list[BlockStored]:
    m = build(cls, *specs, enable_kv_cache_events=True)
    a = request("a", list(range(12)))
    assert m.allocate_slots(a, 12) is not None
    m.take_events()
    b = request("b", list(range(13)), extra_args={"kv_cache_report_mode": "full"})
    assert m.get_computed_blocks(b)[1] == 12
    return m.take_events()


def test_report_mode_full_reannounces_a_full_groups_hit_as_vllm_does() -> None:
    ours, theirs = reannounced(adapter.KVCacheManager, full()), reannounced(VllmManager, full())
    assert [(e.block_hashes, e.parent_block_hash, e.token_ids, e.group_idx) for e in ours] == [
        (e.block_hashes, e.parent_block_hash, e.token_ids, e.group_idx) for e in theirs
    ]
    assert len(ours) == 1 and len(ours[0].block_hashes) == 3
    assert ours[0].token_ids == list(range(12)) and ours[0].parent_block_hash is None


def test_report_mode_full_announces_only_the_real_pages_of_a_sliding_hit() -> None:
    ours = reannounced(adapter.KVCacheManager, full(), swa(5))
    theirs = reannounced(VllmManager, full(), swa(5))
    full_hashes = theirs[0].block_hashes
    assert [(e.group_idx, e.block_hashes) for e in theirs] == [(0, full_hashes), (1, full_hashes)]
    # The sliding group's hit holds one real page (slot 2; slots 0 and 1 are holes): it is
    # announced with slot 1's name as parent, as the pool announced it.
    assert [(e.group_idx, e.block_hashes, e.parent_block_hash, e.token_ids) for e in ours] == [
        (0, full_hashes, None, list(range(12))),
        (1, full_hashes[2:], full_hashes[1], list(range(8, 12))),
    ]


def test_report_mode_incremental_announces_nothing_on_a_hit() -> None:
    m = build(adapter.KVCacheManager, full(), enable_kv_cache_events=True)
    a = request("a", list(range(12)))
    assert m.allocate_slots(a, 12) is not None
    m.take_events()
    assert m.get_computed_blocks(request("b", list(range(13))))[1] == 12
    assert m.take_events() == []
