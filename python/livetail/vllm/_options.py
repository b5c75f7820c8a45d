"""Three of vLLM's manager options on the adapter: decode context parallelism (DCP), KV-cache
residency metrics, and ``kv_cache_report_mode="full"`` (docs/decisions.md, "vLLM adapter")."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from vllm.v1.core.kv_cache_utils import KVCacheBlock
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig

import livetail

from ._groups import scheduler_spec


def context_parallel_specs(
    specs: Sequence[livetail.GroupSpec],
    kv_cache_config: KVCacheConfig,
    dcp_world_size: int,
    pcp_world_size: int,
) -> list[livetail.GroupSpec]:
    """The groups' page sizes under decode context parallelism, as vLLM's managers size them.

    With DCP of size D, each page of a DCP-sharded group (``spec.dcp_sharded``: attention
    groups unless a draft opts out) holds B * D tokens, spread over the D ranks: the group's
    livetail page size is B * D, which is also the block size of its events and the page its
    prefix keys are read at. Replicated groups (Mamba, opted-out drafts) keep B. vLLM
    accepts DCP (and prefill context parallelism, which changes no page size) only when
    every sharded group is full attention: other layouts are refused as vLLM refuses them.
    """
    if dcp_world_size < 1 or pcp_world_size < 1:
        raise ValueError(
            f"dcp_world_size and pcp_world_size must be >= 1, got {dcp_world_size} and "
            f"{pcp_world_size}"
        )
    out = list(specs)
    if dcp_world_size == 1 and pcp_world_size == 1:
        return out
    for g, (spec, group) in enumerate(zip(specs, kv_cache_config.kv_cache_groups)):
        vspec = scheduler_spec(group.kv_cache_spec)
        sharded = bool(getattr(vspec, "dcp_sharded", False))
        if sharded and not isinstance(vspec, FullAttentionSpec):
            what = "DCP" if dcp_world_size > 1 else "PCP"
            raise ValueError(
                f"{what} supports only full-attention groups and replicated groups; group {g}"
                f" is a sharded {type(vspec).__name__}"
            )
        if sharded and dcp_world_size > 1:
            out[g] = livetail.GroupSpec(spec.kind, spec.block_size * dcp_world_size)
    return out


class Residency:
    """vLLM's KV-cache residency metrics (``KVCacheMetricsCollector``) fed by the adapter.

    The callbacks vLLM's block pool makes, at the same moments: every page an allocation
    takes is first reported evicted (vLLM reports each reused block so, named or not, so that
    a sampled block's record never leaks) when prefix caching is on, then allocated; every
    page of a prefix hit a request claims is accessed; a prefix-cache reset resets.
    """

    __slots__ = ("blocks", "caching", "collector")

    def __init__(self, collector: Any, blocks: list[KVCacheBlock], caching: bool) -> None:
        self.collector = collector
        self.blocks = blocks
        self.caching = caching

    @classmethod
    def of(cls, collector: Any, blocks: list[KVCacheBlock], caching: bool) -> Residency | None:
        return None if collector is None else cls(collector, blocks, caching)

    def allocated(self, pages: Iterable[int]) -> None:
        blocks, c = self.blocks, self.collector
        for p in pages:
            if p:
                if self.caching:
                    c.on_block_evicted(blocks[p])
                c.on_block_allocated(blocks[p])

    def accessed(self, pages: Iterable[int]) -> None:
        blocks, c = self.blocks, self.collector
        for p in pages:
            if p:
                c.on_block_accessed(blocks[p])

    def reset(self) -> None:
        self.collector.reset()


def reused_names(
    match: livetail.PrefixMatch, block_sizes: Sequence[int], keys: Sequence[bytes], base: int
) -> list[tuple[int, list[bytes], bytes | None, int]]:
    """The names a hit reuses, per group as runs ``(group, keys, parent, first slot)``.

    ``kv_cache_report_mode="full"`` re-announces a hit's blocks to consumers that missed
    their first announcement. vLLM announces every block of the hit, holes of sliding
    groups included; the adapter announces the hit's real pages only, each run of them with
    the name before it as parent (as the pool announced them), because a hole holds no page
    and no later event would ever withdraw a name announced for it.
    """
    out = []
    for g, (pages, b) in enumerate(zip(match.pages, block_sizes)):
        per = b // base
        ids = pages.tolist()
        j = 0
        while j < len(ids):
            if ids[j] == 0:
                j += 1
                continue
            first = j
            while j < len(ids) and ids[j] != 0:
                j += 1
            run = [keys[(s + 1) * per - 1] for s in range(first, j)]
            parent = keys[first * per - 1] if first else None
            out.append((g, run, parent, first))
    return out
