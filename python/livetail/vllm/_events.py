"""``KVCacheManager``'s KV events (vLLM's event objects) and prefix-cache stats."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from vllm.distributed.kv_events import (
    MEDIUM_GPU,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVCacheEvent,
)
from vllm.v1.core.kv_cache_utils import maybe_convert_block_hash
from vllm.v1.metrics.stats import PrefixCacheStats
from vllm.v1.request import Request

import livetail


class _EventsAndStats:
    """The events and stats half of ``KVCacheManager`` (its ``__init__`` sets the state)."""

    enable_caching: bool
    enable_kv_cache_events: bool
    log_stats: bool
    prefix_cache_stats: PrefixCacheStats | None
    kv_cache_event_metadata: tuple[tuple[str, int | None], ...]
    pool: livetail.BlockPool
    _block_sizes: list[int]
    _events: list[KVCacheEvent]
    _hash_of_key: dict[bytes, bytes]

    # -- stats ---------------------------------------------------------------------------

    def make_prefix_cache_stats(self) -> PrefixCacheStats | None:
        if not self.log_stats:
            return None
        stats = self.prefix_cache_stats
        self.prefix_cache_stats = PrefixCacheStats()
        return stats

    def prefix_cache_lookup_enabled(self, request: Request) -> bool:
        return self.enable_caching and not request.skip_reading_prefix_cache

    def record_prefix_cache_stats(self, request: Request, num_hits: int) -> None:
        # Per admitted request, as the scheduler reports it: a lookup that is retried
        # counts once (the pool's match counters count every lookup).
        if not self.log_stats or not self.prefix_cache_lookup_enabled(request):
            return
        assert self.prefix_cache_stats is not None
        self.prefix_cache_stats.record(
            num_tokens=request.num_tokens,
            num_hits=num_hits,
            preempted=request.num_preemptions > 0,
        )

    # -- events --------------------------------------------------------------------------

    def take_events(self) -> list[KVCacheEvent]:
        self._drain_events(None)
        events, self._events = self._events, []
        return events if self.enable_kv_cache_events else []

    def _drain_events(self, request: Request | None) -> None:
        """livetail's pool events as vLLM's event objects (stored ones carry the tokens)."""
        if not self.enable_kv_cache_events:
            return  # the pool queues none
        raw = self.pool.take_events()
        if not raw:
            return
        for ev in raw:
            kind, _tier, group, keys, parent, first = ev[:6]
            if kind == "stored":
                self._events.extend(self._stored(request, group, keys, parent, first))
            elif kind == "removed":
                self._events.extend(
                    BlockRemoved(
                        block_hashes=[maybe_convert_block_hash(self._hash(k))],
                        medium=MEDIUM_GPU,
                        group_idx=group,
                    )
                    for k in keys
                )
            else:
                self._events.append(AllBlocksCleared())

    def _hash(self, key: bytes) -> bytes:
        return self._hash_of_key.get(key, key)

    def _stored(
        self,
        request: Request | None,
        group: int,
        keys: Sequence[bytes],
        parent: bytes | None,
        first: int,
        one_event: bool = False,
    ) -> Iterator[BlockStored]:
        """The stored events of ``keys``, the names of the group's slots from ``first`` on:
        one per name, as vLLM's cache_full_blocks emits them, or (``one_event``) one for the
        run, as vLLM re-announces a prefix hit's blocks (``kv_cache_report_mode="full"``)."""
        assert request is not None, "names are given only while caching a request's blocks"
        b = self._block_sizes[group]
        kind, window = self.kv_cache_event_metadata[group]
        lora = request.lora_request
        prev = parent
        runs = [(first, keys)] if one_event else [(first + i, [k]) for i, k in enumerate(keys)]
        for slot, run in runs:
            start = slot * b
            yield BlockStored(
                block_hashes=[maybe_convert_block_hash(self._hash(k)) for k in run],
                parent_block_hash=None
                if prev is None
                else maybe_convert_block_hash(self._hash(prev)),
                token_ids=list(request.all_token_ids[start : start + len(run) * b]),
                block_size=b,
                lora_id=lora.adapter_id if lora else None,
                medium=MEDIUM_GPU,
                lora_name=lora.name if lora else None,
                group_idx=group,
                kv_cache_spec_kind=kind,
                kv_cache_spec_sliding_window=window,
            )
            prev = run[-1]
