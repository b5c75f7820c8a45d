"""``KVCacheManager``: vLLM 0.33's KV-cache manager interface on a livetail ``Coordinator``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from vllm.distributed.kv_events import KVCacheEvent
from vllm.v1.core.kv_cache_manager import KVCacheBlocks
from vllm.v1.core.kv_cache_utils import KVCacheBlock
from vllm.v1.kv_cache_interface import (
    KVCacheConfig,
    get_kv_cache_spec_kind,
    get_kv_cache_spec_sliding_window,
)
from vllm.v1.metrics.stats import PrefixCacheStats
from vllm.v1.request import Request, RequestStatus

import livetail

from ._events import _EventsAndStats
from ._groups import (
    KEY_BYTES,
    built_layouts,
    drop_eagle_block,
    group_specs,
    key_of,
    layout_of,
    live_tail_groups_from_env,
    retention_alignment,
    unsupported,
)
from ._options import Residency, context_parallel_specs, reused_names
from ._views import _BlockPoolView, _CoordinatorView, _Detached, _GroupView, _NamedBlock, _View


class _Req:
    """One request's tables (one per group) and what was named of them."""

    __slots__ = ("cached_blocks", "named_keys", "tables")

    def __init__(self, tables: list[livetail.BlockTable]) -> None:
        self.tables = tables
        self.cached_blocks = [0] * len(tables)  # per group: full slots named so far
        # Keys offered to cache_full_blocks so far (its num_tokens // base, capped by the
        # keys): a call offering no more names nothing (the tables' naming cursors are at
        # least there), so it is skipped.
        self.named_keys = 0


class KVCacheManager(_EventsAndStats, _View):
    """vLLM 0.33's ``KVCacheManager`` interface on a livetail ``Coordinator``."""

    _what = "KVCacheManager"

    # Class-level default for live_tail_groups, so an engine that builds the manager through
    # the scheduler (which passes vLLM's arguments only) can opt groups in. The environment
    # variable LIVETAIL_LIVE_TAIL_GROUPS, read at construction, comes before it (it reaches
    # vLLM's engine-core process; a class attribute set in the launching process does not).
    default_live_tail_groups: tuple[int, ...] = ()
    # True: vLLM's order of a request's freed unnamed blocks is NOT reproduced; livetail's
    # pool (semantics section 2) is used as is (docs/decisions.md, "vLLM adapter").
    retention = True

    def __init__(
        self,
        kv_cache_config: KVCacheConfig,
        max_model_len: int,
        scheduler_block_size: int,
        hash_block_size: int,
        max_in_flight_tokens: int | None = None,
        enable_caching: bool = True,
        use_eagle: bool = False,
        num_hash_lookahead_tokens: int = 0,
        num_prefill_lookahead: int = 0,
        log_stats: bool = False,
        enable_kv_cache_events: bool = False,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
        metrics_collector: Any = None,
        watermark: float = 0.0,
        enable_mamba_shared_prefix_checkpoint: bool = False,
        live_tail_groups: Iterable[int] | None = None,
    ) -> None:
        built_layouts.append(layout_of(kv_cache_config))
        if num_hash_lookahead_tokens < 0 or num_prefill_lookahead < 0:
            raise ValueError("lookahead token counts must be non-negative")
        if getattr(kv_cache_config, "hisparse_host_num_blocks", None):
            raise unsupported("HiSparse host blocks")
        if kv_cache_config.num_blocks < 1:
            raise ValueError("kv_cache_config.num_blocks must be >= 1")
        if watermark < 0.0:
            raise ValueError("watermark must be non-negative")
        if live_tail_groups is None:
            live_tail_groups = live_tail_groups_from_env()
        live = self.default_live_tail_groups if live_tail_groups is None else live_tail_groups
        self.specs = context_parallel_specs(
            group_specs(kv_cache_config, live), kv_cache_config, dcp_world_size, pcp_world_size
        )
        self._live_tail = any(s.live_tail_alloc for s in self.specs)
        if self._live_tail and (use_eagle or num_prefill_lookahead):
            raise self._live_tail_with_drafts("use_eagle" if use_eagle else "num_prefill_lookahead")
        if enable_mamba_shared_prefix_checkpoint and any(s.kind == "state" for s in self.specs):
            raise unsupported("Mamba shared-prefix checkpoints")

        self.kv_cache_config = kv_cache_config
        self.max_model_len = max_model_len
        self.max_in_flight_tokens = (
            max_model_len if max_in_flight_tokens is None else max_in_flight_tokens
        )
        self.scheduler_block_size = scheduler_block_size
        self.hash_block_size = hash_block_size
        self.enable_caching = enable_caching
        self.enable_kv_cache_events = enable_kv_cache_events
        # Speculative decoding (semantics 13.3). use_eagle: every hit drops its last
        # lcm-page (vLLM's drop_eagle_block, all groups as vLLM's coordinator falls back to
        # when no group is flagged, and for flagged groups too: get_computed_blocks).
        # num_prefill_lookahead L: the last L - 1 computed tokens may be re-prefilled, so
        # they are not named yet (vLLM's num_reprefillable_tokens). Hash lookahead needs
        # nothing here: the request's hashes already cover it and vLLM clears use_eagle.
        self.use_eagle = use_eagle
        self.num_hash_lookahead_tokens = num_hash_lookahead_tokens
        self._reprefillable = max(0, num_prefill_lookahead - 1)
        if (
            enable_caching
            and (use_eagle or any(g.is_eagle_group for g in kv_cache_config.kv_cache_groups))
            and num_prefill_lookahead
            and scheduler_block_size < num_prefill_lookahead
        ):
            raise ValueError(
                f"Multi-module MTP with prefix caching requires scheduler_block_size"
                f" (={scheduler_block_size}) >= num_speculative_tokens"
                f" (={num_prefill_lookahead})."
            )
        self.log_stats = log_stats
        self.metrics_collector = metrics_collector
        self.prefix_cache_stats: PrefixCacheStats | None = PrefixCacheStats() if log_stats else None
        self.mamba_shared_prefix_checkpoint = False
        self.retained_hit_group_ids: tuple[int, ...] = ()
        self.num_kv_cache_groups = len(kv_cache_config.kv_cache_groups)
        self.watermark_blocks = int(watermark * kv_cache_config.num_blocks)
        self.kv_cache_event_metadata = tuple(
            (
                get_kv_cache_spec_kind(group.kv_cache_spec).value,
                get_kv_cache_spec_sliding_window(group.kv_cache_spec),
            )
            for group in kv_cache_config.kv_cache_groups
        )
        self.empty_kv_cache_blocks = KVCacheBlocks(
            tuple(() for _ in range(self.num_kv_cache_groups))
        )

        # The pool queues events only for a consumer: vLLM's take_events() returns none
        # without enable_kv_cache_events.
        self.pool = livetail.BlockPool(
            kv_cache_config.num_blocks, retention=self.retention, events=enable_kv_cache_events
        )
        self.livetail_coordinator = livetail.Coordinator(
            self.specs, self.pool, alignment=retention_alignment(kv_cache_config, self.specs)
        )
        base = self.livetail_coordinator.base_block_size
        if enable_caching and base % hash_block_size:
            raise unsupported(
                f"hash_block_size {hash_block_size} that does not divide the groups' "
                f"common page size {base}"
            )
        self._base = base
        self._lcm = int(self.livetail_coordinator.lcm_block_size)
        self._hashes_per_key = base // hash_block_size if enable_caching else 1
        self._block_sizes = [s.block_size for s in self.specs]
        self._reclaims = any(s.kind != "full" for s in self.specs)
        self._zeroing = bool(getattr(kv_cache_config, "needs_kv_cache_zeroing", False))
        self._new_block_ids: list[int] = []

        # vLLM's block objects, one per page id; page 0 is vLLM's null block too.
        self._blocks = [_NamedBlock(p, self) for p in range(kv_cache_config.num_blocks)]
        self._blocks[0].is_null = True
        self._residency = Residency.of(metrics_collector, self._blocks, enable_caching)
        self._reqs: dict[str, _Req] = {}
        self._matches: dict[str, livetail.PrefixMatch] = {}
        self._events: list[KVCacheEvent] = []
        # livetail key -> vLLM hash, only where the key is derived (hash not 32 bytes).
        self._hash_of_key: dict[bytes, bytes] = {}
        self._fresh = self.livetail_coordinator.new_tables()  # never bound: charges only

        self.block_pool = _BlockPoolView(self)
        self.coordinator = _CoordinatorView(
            self,
            [
                _GroupView(self, g, group.kv_cache_spec)
                for g, group in enumerate(kv_cache_config.kv_cache_groups)
            ],
        )

    @staticmethod
    def _live_tail_with_drafts(what: str) -> NotImplementedError:
        # A draft writes, and its verification reads, slots past the computed tokens; live
        # tail leaves holes in a chunk's slots that no later query of the *verified*
        # sequence reads, which is not shown to hold for a draft's (semantics 13.3).
        return unsupported(f"live tail (live_tail_groups) with speculative decoding ({what})")

    # -- tables and blocks ---------------------------------------------------------------

    def _tables_of(self, request_id: str) -> list[livetail.BlockTable]:
        r = self._reqs.get(request_id)
        return self._fresh if r is None else r.tables

    def _req(self, request_id: str) -> _Req:
        r = self._reqs.get(request_id)
        if r is None:
            r = _Req(self.livetail_coordinator.new_tables())
            self._reqs[request_id] = r
        return r

    def _to_blocks(self, table: livetail.BlockTable, first: int = 0) -> list[KVCacheBlock]:
        blocks = self._blocks
        return [blocks[p] for p in table.page_ids()[first:].tolist()]

    @staticmethod
    def _extent(tables: Sequence[livetail.BlockTable]) -> int:
        return int(tables[0].extent)

    # -- keys ----------------------------------------------------------------------------

    def _keys_of(self, request: Request) -> list[bytes]:
        """One key per base page of the request's full hashed pages.

        Read afresh on every call: a request's hashes may be recomputed (streaming input,
        hash lookahead) and a request id may be reused by another request object.
        """
        hashes = request.block_hashes
        r = self._hashes_per_key
        if r == 1 and (not hashes or len(hashes[0]) == KEY_BYTES):
            return list(hashes)  # vLLM's default sha256 hashes are the keys
        keys = []
        for j in range(len(hashes) // r):
            h = hashes[(j + 1) * r - 1]
            k = key_of(h)
            if len(h) != KEY_BYTES:
                self._hash_of_key[k] = bytes(h)
            keys.append(k)
        return keys

    # -- charges -------------------------------------------------------------------------

    def _charge(
        self,
        tables: Sequence[livetail.BlockTable],
        match: livetail.PrefixMatch | None,
        num_tokens: int,
        whole_prompt: bool = False,
    ) -> int:
        """Free pages the request needs to cover num_tokens, claiming ``match`` first.

        ``whole_prompt``: the peak of computing them in chunks of at most
        max_in_flight_tokens, reclaiming before each (semantics 13.1), as vLLM's admission
        check charges a sliding group at most ceil((W - 1 + max_in_flight_tokens) / B) + 1;
        otherwise the pages one acquire of all of them takes.
        """
        c = self.livetail_coordinator
        chunk = max(1, self.max_in_flight_tokens)
        if match is not None:
            rest = max(0, num_tokens - match.num_tokens)
            # Exact on fresh tables: a match ends on a multiple of the lcm (semantics 6, 8).
            # The whole-prompt charge counts the claimed pages as held to the end, so it is
            # exact up to the claimed pages reclaimed before the peak (docs/decisions.md).
            rest_charge = (
                c.blocks_needed_for_prompt(self._fresh, rest, chunk, 0)
                if whole_prompt
                else c.blocks_needed_for(self._fresh, rest)
            )
            return int(c.blocks_consumed_by_claim(match)) + int(rest_charge)
        n = max(0, num_tokens - self._extent(tables))
        if whole_prompt:
            return int(c.blocks_needed_for_prompt(tables, n, chunk, 0))
        return int(c.blocks_needed_for(tables, n))

    # -- the interface vLLM's scheduler uses ----------------------------------------------

    @property
    def usage(self) -> float:
        total = self.pool.num_blocks - 1
        return 0.0 if total == 0 else self.pool.num_pinned / total

    def get_computed_blocks(
        self, request: Request, max_cache_hit_length: int | None = None
    ) -> tuple[KVCacheBlocks, int, int]:
        if not self.prefix_cache_lookup_enabled(request):
            return self.empty_kv_cache_blocks, 0, 0
        if max_cache_hit_length is None:
            max_cache_hit_length = request.num_tokens - 1
        keys = self._keys_of(request)
        n = min(len(keys), max(0, max_cache_hit_length) // self._base)
        match = self.livetail_coordinator.match_prefix(keys[:n])
        if self.use_eagle:
            match = drop_eagle_block(self.livetail_coordinator, keys, match, self._lcm, self._base)
        self._drain_events(None)
        num_tokens = int(match.num_tokens)
        if num_tokens == 0:
            self._matches.pop(request.request_id, None)
            return self.empty_kv_cache_blocks, 0, 0
        if self.enable_kv_cache_events and getattr(request, "kv_cache_report_mode", "") == "full":
            for g, run, parent, first in reused_names(match, self._block_sizes, keys, self._base):
                self._events.extend(self._stored(request, g, run, parent, first, True))
        self._matches[request.request_id] = match
        blocks = self._blocks
        hit = tuple([blocks[p] for p in pages.tolist()] for pages in match.pages)
        return KVCacheBlocks(hit), num_tokens, 0

    def get_computed_blocks_for_connector(
        self, request: Request, max_cache_hit_length: int | None = None
    ) -> tuple[KVCacheBlocks, int, int, bool]:
        raise unsupported("KV connectors (divergent hybrid hits)")

    def allocate_slots(
        self,
        request: Request,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: KVCacheBlocks | None = None,
        num_lookahead_tokens: int = 0,
        num_external_computed_tokens: int = 0,
        delay_cache_blocks: bool = False,
        num_encoder_tokens: int = 0,
        full_sequence_must_fit: bool = False,
        reserved_blocks: int = 0,
        has_scheduled_reqs: bool = True,
        skip_zeroing_group_ids: tuple[int, ...] = (),
    ) -> KVCacheBlocks | None:
        if (
            num_new_tokens == 0
            and num_external_computed_tokens == 0
            and num_new_computed_tokens == 0
        ):
            raise ValueError(
                "num_new_tokens must be greater than 0 when there are no computed tokens to adopt"
            )
        if num_lookahead_tokens < 0:
            raise ValueError("num_lookahead_tokens must be non-negative")
        if num_lookahead_tokens and self._live_tail:
            raise self._live_tail_with_drafts("num_lookahead_tokens")
        if num_external_computed_tokens or delay_cache_blocks or skip_zeroing_group_ids:
            raise unsupported("KV connectors (external computed tokens)")
        if num_encoder_tokens:
            raise unsupported("encoder tokens (cross attention)")
        rid = request.request_id
        match = (
            None
            if new_computed_blocks is None and not num_new_computed_tokens
            else self._adopted_match(rid, num_new_computed_tokens, new_computed_blocks)
        )
        r = self._reqs.get(rid) or self._req(rid)
        tables = r.tables
        if match is not None and any(len(t) or t.is_bound for t in tables):
            raise unsupported("a prefix hit adopted by a request that holds blocks")

        local = request.num_computed_tokens + num_new_computed_tokens
        total = min(local, self.max_model_len)
        watermark = 0
        if has_scheduled_reqs and request.status in (
            RequestStatus.WAITING,
            RequestStatus.PREEMPTED,
        ):
            watermark = self.watermark_blocks
        if full_sequence_must_fit:
            full = min(request.num_tokens, self.max_model_len)
            need = self._charge(tables, match, full, whole_prompt=True)
            if need + watermark > self.pool.num_free:
                return None
        # Slots for the drafts too (semantics 13.3): only verified tokens are named below, and
        # a rejected draft's slot is inside the extent, which the next acquire counts from.
        target = min(total + num_new_tokens + num_lookahead_tokens, self.max_model_len)
        c = self.livetail_coordinator
        extent = tables[0].extent
        if self._reclaims and extent:
            # A reclaim changes no table's length or extent.
            done = max(0, total - request.num_in_flight_tokens)
            c.reclaim_expired(tables, min(done, extent))
        if match is not None or watermark or reserved_blocks:
            need = self._charge(tables, match, target)
            if need + watermark > self.pool.num_free - reserved_blocks:
                if not extent:
                    self._forget_if_empty(rid)
                return None
            if match is not None:
                c.claim(tables, match)
                if self._residency is not None:
                    self._residency.accessed(p for pages in match.pages for p in pages.tolist())
                del self._matches[rid]
                for g, b in enumerate(self._block_sizes):
                    r.cached_blocks[g] = int(match.num_tokens) // b
                extent = tables[0].extent
        more = target - extent
        new = self.empty_kv_cache_blocks
        if more > 0:
            # acquire is all or nothing and fails exactly when its need exceeds the free
            # pages: the charge check above, with no watermark, reserve or claim to add.
            if not c.acquire(tables, more):
                assert match is None and not watermark and not reserved_blocks, (
                    "an acquire failed after its charge was checked"
                )
                if not extent:
                    self._forget_if_empty(rid)
                return None
            # A table of page size B holds ceil(extent / B) slots (its unused room is below
            # one page), and every B is a multiple of the base page: no new base slot, no
            # new slot in any group (15 decode steps in 16 at B = 16).
            base = self._base
            if (target + base - 1) // base > (extent + base - 1) // base:
                new = self._new_blocks(tables, extent, target)
                if self._residency is not None:
                    self._residency.allocated(b.block_id for grp in new.blocks for b in grp)
            extent = target
        self._cache(request, r, min(total + num_new_tokens, request.num_tokens), extent)
        return new

    def _new_blocks(
        self, tables: list[livetail.BlockTable], extent: int, target: int
    ) -> KVCacheBlocks:
        """vLLM's blocks for the slots an acquire from ``extent`` to ``target`` tokens added."""
        blocks = self._blocks
        ids = livetail.page_ids_batch(tables)  # one array for every group
        new = tuple(
            [blocks[p] for p in ids[g, -(-extent // b) : -(-target // b)].tolist()]
            for g, b in enumerate(self._block_sizes)
        )
        if self._zeroing:
            self._new_block_ids.extend(
                blk.block_id for group in new for blk in group if not blk.is_null
            )
        return self.create_kv_cache_blocks(new)

    def _adopted_match(
        self, rid: str, num_tokens: int, blocks: KVCacheBlocks | None
    ) -> livetail.PrefixMatch | None:
        """The match get_computed_blocks made for these blocks, or None if none is adopted."""
        if blocks is None or not any(len(b) for b in blocks.blocks):
            if num_tokens:
                raise unsupported("computed tokens adopted without their blocks")
            return None
        match = self._matches.get(rid)
        if match is None or int(match.num_tokens) != num_tokens:
            raise unsupported("a prefix hit shortened or changed after lookup (KV connectors)")
        for pages, group in zip(match.pages, blocks.blocks):
            if pages.tolist() != [b.block_id for b in group]:
                raise unsupported("a prefix hit shortened or changed after lookup (KV connectors)")
        return match

    def _forget_if_empty(self, rid: str) -> None:
        r = self._reqs.get(rid)
        if r is not None and not len(r.tables[0]) and not r.tables[0].is_bound:
            del self._reqs[rid]

    def _cache(self, request: Request, r: _Req, num_tokens: int, extent: int) -> None:
        """Name the request's pages up to num_tokens (tables' extent given); O(1) when no
        key is new to it."""
        if not self.enable_caching:
            return
        n = min(num_tokens - self._reprefillable, extent)
        if n <= 0:
            return
        offered = min(n // self._base, len(request.block_hashes) // self._hashes_per_key)
        if offered <= r.named_keys:
            return
        keys = self._keys_of(request)
        self._name_pages(r.tables, keys, n)
        r.named_keys = offered
        covered = offered * self._base
        for g, b in enumerate(self._block_sizes):
            r.cached_blocks[g] = max(r.cached_blocks[g], covered // b)
        self._drain_events(request)

    def free(self, request: Request) -> None:
        rid = request.request_id
        self._matches.pop(rid, None)
        r = self._reqs.pop(rid, None)
        if r is not None:
            self.livetail_coordinator.free(r.tables)
            self._drain_events(None)

    def pop_blocks_for_free(self, request: Request) -> list[KVCacheBlock]:
        rid = request.request_id
        self._matches.pop(rid, None)
        r = self._reqs.pop(rid, None)
        if r is None:
            return []
        pages = [p for t in r.tables for p in t.page_ids().tolist() if p != 0]
        if not pages:
            self.livetail_coordinator.free(r.tables)
            return []
        # The references move to a handle (pages stay pinned) until the scheduler's
        # block_pool.free_blocks releases them, in the order a free now would have.
        handle = self.livetail_coordinator.detach(r.tables)
        return [_Detached(p, handle) for p in pages]

    def _release_detached(self, handle: Any) -> None:
        self.livetail_coordinator.release_detached(handle)
        self._drain_events(None)

    def remove_skipped_blocks(
        self,
        request_id: str,
        processed_computed_tokens: int,
        num_prompt_tokens: int | None = None,
    ) -> None:
        r = self._reqs.get(request_id)
        if r is None or not self._reclaims or not len(r.tables[0]):
            return
        f = min(processed_computed_tokens, self._extent(r.tables))
        self.livetail_coordinator.reclaim_expired(r.tables, f)
        self._drain_events(None)

    def evict_blocks(self, block_ids: set[int]) -> None:
        """Drop the names of the given pages (their content is bad); pinned ones stay pinned."""
        self.pool.evict_names(sorted(block_ids))
        self._drain_events(None)

    def reset_prefix_cache(self) -> bool:
        """Drop every name; refused (False) while any page is in use, as vLLM refuses."""
        if self.pool.num_pinned or not self.pool.reset_names():
            return False
        self._drain_events(None)
        if self._residency is not None:
            self._residency.reset()
        if self.log_stats:
            assert self.prefix_cache_stats is not None
            self.prefix_cache_stats.reset = True
        return True

    def get_num_common_prefix_blocks(self, running_request_id: str) -> list[int]:
        return [0] * self.num_kv_cache_groups

    def get_blocks(self, request_id: str) -> KVCacheBlocks:
        r = self._reqs.get(request_id)
        if r is None:
            return self.empty_kv_cache_blocks
        return self.create_kv_cache_blocks(tuple(self._to_blocks(t) for t in r.tables))

    def get_block_ids(self, request_id: str) -> tuple[list[int], ...]:
        r = self._reqs.get(request_id)
        if r is None:
            return tuple([] for _ in range(self.num_kv_cache_groups))
        return tuple(t.page_ids().tolist() for t in r.tables)

    def get_block_ids_for_computed_tokens(
        self, request_id: str, num_computed_tokens: int
    ) -> tuple[list[int], ...]:
        ids = self.get_block_ids(request_id)
        return tuple(x[: -(-num_computed_tokens // b)] for x, b in zip(ids, self._block_sizes))

    def estimate_cached_tokens(self, request: Request) -> int:
        r = self._reqs.get(request.request_id)
        if r is None:
            return 0
        return min(n * b for n, b in zip(r.cached_blocks, self._block_sizes))

    def cache_blocks(self, request: Request, num_computed_tokens: int) -> None:
        r = self._reqs.get(request.request_id)
        if r is None or not len(r.tables[0]):
            return
        self._cache(request, r, num_computed_tokens, self._extent(r.tables))

    def create_kv_cache_blocks(self, blocks: tuple[list[KVCacheBlock], ...]) -> KVCacheBlocks:
        return KVCacheBlocks(blocks) if any(blocks) else self.empty_kv_cache_blocks

    def truncate_computed_blocks(
        self, blocks: KVCacheBlocks, num_computed_tokens: int
    ) -> KVCacheBlocks:
        raise unsupported("KV connectors (truncated local hits)")

    def take_new_block_ids(self) -> list[int]:
        ids, self._new_block_ids[:] = list(self._new_block_ids), []
        return ids

    def record_blocks_for_zeroing(self, request_id: str, start_token: int) -> None:
        r = self._reqs.get(request_id)
        if not self._zeroing or r is None:
            return
        for t, b in zip(r.tables, self._block_sizes):
            assert start_token % b == 0
            self._new_block_ids.extend(p for p in t.page_ids()[start_token // b :].tolist() if p)

    def take_kv_cache_block_copies(self) -> tuple[list[Any], list[KVCacheBlock]]:
        return [], []

    def take_boundary_state_offloads(self) -> dict[str, list[tuple[int, int, int]]]:
        return {}

    def finalize_partial_tail_offloads(self, request: Request) -> list[tuple[int, int, int]]:
        return []

    def new_step_starts(self) -> None:
        return None

    # -- pool-level calls that the core grows (kept apart so they swap in one place) ----

    def _name_pages(self, tables: list[livetail.BlockTable], keys: list[bytes], n: int) -> None:
        self.livetail_coordinator.cache_full_blocks(tables, keys, n)
