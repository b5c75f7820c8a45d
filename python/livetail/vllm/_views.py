"""The parts of vLLM's block pool, KV-cache coordinator and single-type managers that vLLM's
scheduler and tests reach through ``KVCacheManager``, as views of livetail's state."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from vllm.distributed.kv_events import KVCacheEvent
from vllm.v1.core.kv_cache_utils import BlockHash, KVCacheBlock, make_block_hash_with_group_id
from vllm.v1.kv_cache_interface import KVCacheSpec

import livetail

from ._groups import key_of, unsupported

if TYPE_CHECKING:
    from ._manager import KVCacheManager


class _NamedBlock(KVCacheBlock):
    """vLLM's block object for one page: its ``block_hash`` is the pool's name of the page now
    (vLLM's hash with the group id appended, or None), read when asked, so naming and eviction
    keep nothing else up to date."""

    def __init__(self, block_id: int, manager: KVCacheManager) -> None:
        super().__init__(block_id)
        self._m = manager

    @property
    def block_hash(self) -> Any:
        name = None if self.is_null else self._m.pool.name(self.block_id)
        if name is None:
            return None
        key = bytes(name[1])
        return make_block_hash_with_group_id(
            BlockHash(self._m._hash_of_key.get(key, key)), int(name[0])
        )


class _Detached(KVCacheBlock):
    """A block handed out by ``pop_blocks_for_free``: carries its request's detached handle."""

    def __init__(self, block_id: int, handle: Any) -> None:
        super().__init__(block_id)
        self.handle = handle  # the Coordinator's DetachedTables


class _View:
    """Base of the views: an attribute vLLM's object has and the view lacks is refused."""

    _what = "object"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise unsupported(f"vLLM's {self._what}.{name} (manager internals)")


class _FreeQueueView:
    def __init__(self, pool: livetail.BlockPool) -> None:
        self._pool = pool

    @property
    def num_free_blocks(self) -> int:
        return int(self._pool.num_free)


class _BlockPoolView(_View):
    """The part of vLLM's ``BlockPool`` its scheduler and tests reach through."""

    _what = "BlockPool"

    def __init__(self, manager: KVCacheManager) -> None:
        self._m = manager
        self.num_gpu_blocks = manager.pool.num_blocks
        self.hash_block_size = manager.hash_block_size
        self.num_hash_lookahead_tokens = manager.num_hash_lookahead_tokens
        self.metrics_collector = None
        self.enable_caching = manager.enable_caching
        self.enable_kv_cache_events = manager.enable_kv_cache_events
        self.null_block = manager._blocks[0]
        self.free_block_queue = _FreeQueueView(manager.pool)
        # (group, key) -> page of every named page, rebuilt when the pool's name counters
        # move (get_cached_block only: the pool has no lookup by name).
        self._index: dict[tuple[int, bytes], int] = {}
        self._index_version: tuple[int, ...] = ()

    def get_num_free_blocks(self) -> int:
        return int(self._m.pool.num_free)

    def get_usage(self) -> float:
        return self._m.usage

    @property
    def blocks(self) -> list[KVCacheBlock]:
        """vLLM's block objects, reference counts read from the pool now."""
        counts = self._m.pool.ref_counts()
        blocks = self._m._blocks
        for p in range(1, len(blocks)):
            blocks[p].ref_cnt = int(counts[p])
        return blocks

    def get_cached_block(
        self, block_hash: bytes, kv_cache_group_ids: list[int]
    ) -> list[KVCacheBlock] | None:
        """vLLM's lookup of the page named by a block hash in each group, or None.

        The hash must end one of the group's pages (as vLLM's own lookup asks). Read by the
        auxiliary-output connector (routed experts). O(pages) after the names changed, O(1)
        otherwise: the pool has no lookup by name, so the view keeps an index.
        """
        pool = self._m.pool
        st = pool.stats()
        version = (st["names_stored"], st["names_removed"], st["pages_evicted"])
        if version != self._index_version:
            self._index = {}
            for p in range(1, pool.num_blocks):
                name = pool.name(p)
                if name is not None:
                    self._index[(int(name[0]), bytes(name[1]))] = p
            self._index_version = version
        key = key_of(block_hash)
        blocks = self._m._blocks
        out = []
        for g in kv_cache_group_ids:
            page = self._index.get((g, key))
            if page is None:
                return None
            out.append(blocks[page])
        return out

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """Frees what ``pop_blocks_for_free`` detached; each request's tables once."""
        handles: list[Any] = []
        for block in ordered_blocks:
            if block.is_null:
                continue
            if not isinstance(block, _Detached):
                raise unsupported("freeing blocks it did not detach (copy-on-write retention)")
            if not block.handle.released and block.handle not in handles:
                handles.append(block.handle)
        for handle in handles:
            self._m._release_detached(handle)

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        # Outside a single-type manager vLLM takes pages straight from its pool only for the
        # copy-on-write of a partial prefix hit (partial hash hits need Mamba "align" mode);
        # livetail hands out pages to tables only.
        raise unsupported(
            "pages taken outside a request's tables (copy-on-write of partial prefix hits, "
            'Mamba "align" mode)'
        )

    def evict_blocks(self, block_ids: set[int]) -> None:
        self._m.evict_blocks(block_ids)

    def take_events(self) -> list[KVCacheEvent]:
        return self._m.take_events()


class _GroupView(_View):
    """One group as vLLM's single-type manager looks from the scheduler and tests."""

    _what = "SingleTypeKVCacheManager"

    retains_longer_hit = False

    def __init__(self, manager: KVCacheManager, group_id: int, spec: KVCacheSpec) -> None:
        self._m = manager
        self.kv_cache_group_id = group_id
        self.kv_cache_spec = spec
        self.block_size = spec.block_size
        self.block_pool = manager.block_pool
        self._null_block = manager._blocks[0]  # read by vLLM's tests (a private name there)
        self.records_new_block_ids = manager._zeroing
        self.new_block_ids: list[int] = manager._new_block_ids

    @property
    def req_to_blocks(self) -> dict[str, list[KVCacheBlock]]:
        g = self.kv_cache_group_id
        return {rid: self._m._to_blocks(r.tables[g]) for rid, r in self._m._reqs.items()}

    @property
    def num_cached_block(self) -> dict[str, int]:
        g = self.kv_cache_group_id
        return {rid: r.cached_blocks[g] for rid, r in self._m._reqs.items()}

    def take_new_block_ids(self) -> list[int]:
        return []  # the manager drains its one list (take_new_block_ids)

    def take_pending_cow_copies(self) -> list[tuple[KVCacheBlock, KVCacheBlock]]:
        return []

    def take_pending_boundary_state_offloads(self) -> list[Any]:
        return []

    def finalize_partial_tail_offload(self, *args: object) -> None:
        return None


class _CoordinatorView(_View):
    """The part of vLLM's KV-cache coordinator its scheduler reaches through."""

    _what = "KVCacheCoordinator"

    enable_partial_hash_hits = False

    def __init__(self, manager: KVCacheManager, groups: list[_GroupView]) -> None:
        self._m = manager
        groups_cfg = manager.kv_cache_config.kv_cache_groups
        flagged = {i for i, g in enumerate(groups_cfg) if g.is_eagle_group}
        # vLLM's rule: the flagged groups, or every group when use_eagle flags none.
        self.eagle_group_ids = flagged or (
            set(range(len(groups_cfg))) if manager.use_eagle else set()
        )
        self.num_reprefillable_tokens = manager._reprefillable
        self.single_type_managers = groups
        full = [g for g, s in enumerate(manager.specs) if s.kind == "full"]
        self.full_attention_group_id = full[0] if full else None
        self.block_pool = manager.block_pool
        self._null_block = manager._blocks[0]  # read by vLLM's tests (a private name there)
        self.livetail = manager.livetail_coordinator

    def get_num_blocks_to_allocate(
        self,
        request_id: str,
        num_tokens: int,
        new_computed_blocks: Sequence[Sequence[KVCacheBlock]],
        num_encoder_tokens: int,
        total_computed_tokens: int,
        num_local_computed_tokens: int,
        num_tokens_main_model: int,
        apply_admission_cap: bool = False,
        prefill_end: int | None = None,
    ) -> int:
        if num_encoder_tokens:
            raise unsupported("encoder tokens (cross attention)")
        if any(len(b) for b in new_computed_blocks):
            raise unsupported("charging a prefix hit outside allocate_slots")
        return self._m._charge(self._m._tables_of(request_id), None, num_tokens)

    def new_step_starts(self) -> None:
        return None
