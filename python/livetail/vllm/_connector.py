"""KV connectors on the adapter (docs/semantics.md 13.5, "KV connectors").

What vLLM 0.33's scheduler asks of its manager when a KV connector (P/D disaggregation,
LMCache, offloading) loads tokens from outside: slots for the externally computed tokens
(``num_external_computed_tokens``), naming deferred until an asynchronous load lands
(``delay_cache_blocks``), no zeroing of the pages a load writes (``skip_zeroing_group_ids``),
the local lookup a connector runs first (``get_computed_blocks_for_connector``) and a hit cut
back to a shorter boundary (``truncate_computed_blocks``).

Only existing core operations are used: a prefix hit is claimed, the loaded tokens are
acquired and the slots no later query reads are reclaimed at once (so a sliding group holds
real pages only for the slots its window still reads, holes elsewhere: the connector is told
which slots are holes by the null block, id 0, in ``get_blocks``, as vLLM tells it), then the
slots of the tokens to compute are acquired. The charge is the pages the two acquires take,
before the reclaim gives the slid-out ones back (docs/decisions.md, "KV connectors").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vllm.v1.core.kv_cache_manager import KVCacheBlocks
from vllm.v1.core.kv_cache_utils import BlockHash, KVCacheBlock, make_block_hash_with_group_id
from vllm.v1.request import Request, RequestStatus

import livetail

from ._groups import unsupported

if TYPE_CHECKING:
    from ._manager import KVCacheManager


def check_group_ids(m: KVCacheManager, group_ids: object) -> tuple[int, ...]:
    """``skip_zeroing_group_ids`` checked: a tuple (or list) of distinct group indices."""
    if not isinstance(group_ids, (tuple, list)):
        raise TypeError("skip_zeroing_group_ids must be a tuple of group indices")
    for g in group_ids:
        if not isinstance(g, int) or isinstance(g, bool):
            raise TypeError("skip_zeroing_group_ids must hold ints")
        if not 0 <= g < m.num_kv_cache_groups:
            raise ValueError(f"skip_zeroing_group_ids: no group {g}")
    return tuple(group_ids)


def truncate_computed_blocks(
    m: KVCacheManager, blocks: KVCacheBlocks, num_computed_tokens: int
) -> KVCacheBlocks:
    """vLLM's ``truncate_computed_blocks``: the hit's first ``num_computed_tokens`` tokens.

    Pure slicing, as vLLM's: nothing is claimed or released. The adopting allocate matches
    again at the shorter boundary (``_adopt``), since a sliding group's hit there needs the
    pages behind that boundary, not the ones behind the longer one.
    """
    if not isinstance(num_computed_tokens, int) or isinstance(num_computed_tokens, bool):
        raise TypeError("num_computed_tokens must be an int")
    out = []
    for group, b in zip(blocks.blocks, m._block_sizes, strict=True):
        if num_computed_tokens < 0 or num_computed_tokens % b:
            raise ValueError(
                f"num_computed_tokens {num_computed_tokens} is not a multiple of the page size {b}"
            )
        n = num_computed_tokens // b
        if n > len(group):
            raise ValueError(f"num_computed_tokens {num_computed_tokens} is past the hit")
        out.append(list(group[:n]))
    return m.create_kv_cache_blocks(tuple(out))


def _adopt(
    m: KVCacheManager, request: Request, num_tokens: int, blocks: KVCacheBlocks | None
) -> livetail.PrefixMatch | None:
    """The match the adopted hit stands for: get_computed_blocks' own, or, for a hit that
    ``truncate_computed_blocks`` cut back, a match at the shorter boundary."""
    rid = request.request_id
    match = m._matches.get(rid)
    cut = blocks is not None and any(len(b) for b in blocks.blocks)
    if not (cut and match is not None and 0 < num_tokens < int(match.num_tokens)):
        return m._adopted_match(rid, num_tokens, blocks)
    assert blocks is not None
    keys = m._keys_of(request)
    short = m.livetail_coordinator.match_prefix(keys[: num_tokens // m._base])
    if int(short.num_tokens) != num_tokens:
        raise unsupported(
            f"a prefix hit cut back to {num_tokens} tokens, where some group cannot resume "
            "(KV connectors)"
        )
    for g, (pages, group) in enumerate(zip(short.pages, blocks.blocks)):
        # A sliding or state group's pages are the ones behind the shorter boundary, which
        # the cut-back hit need not hold; a full group's are the same pages.
        if m.specs[g].kind == "full" and pages.tolist() != [b.block_id for b in group]:
            raise unsupported("a prefix hit changed after lookup (KV connectors)")
    m._matches[rid] = short
    return short


def allocate_slots(
    m: KVCacheManager,
    request: Request,
    num_new_tokens: int,
    num_new_computed_tokens: int,
    new_computed_blocks: KVCacheBlocks | None,
    num_lookahead_tokens: int,
    num_external_computed_tokens: int,
    delay_cache_blocks: bool,
    full_sequence_must_fit: bool,
    reserved_blocks: int,
    has_scheduled_reqs: bool,
    skip_zeroing_group_ids: tuple[int, ...],
) -> KVCacheBlocks | None:
    """``allocate_slots`` with a connector's arguments (the manager checked the others)."""
    if not isinstance(num_external_computed_tokens, int) or num_external_computed_tokens < 0:
        raise ValueError("num_external_computed_tokens must be a non-negative int")
    skip = check_group_ids(m, skip_zeroing_group_ids)
    rid = request.request_id
    r = m._reqs.get(rid)
    holds = r is not None and any(len(t) or t.is_bound for t in r.tables)
    if holds:
        if num_external_computed_tokens or num_new_computed_tokens or delay_cache_blocks:
            # vLLM's scheduler loads from outside only into a request that holds nothing
            # (a new or preempted one); its coordinator ignores the tokens otherwise.
            raise unsupported("external computed tokens for a request that holds blocks")
        return m.allocate_slots(
            request,
            num_new_tokens,
            num_lookahead_tokens=num_lookahead_tokens,
            full_sequence_must_fit=full_sequence_must_fit,
            reserved_blocks=reserved_blocks,
            has_scheduled_reqs=has_scheduled_reqs,
        )
    if request.num_computed_tokens:
        raise unsupported("external computed tokens for a request with computed tokens")
    match = _adopt(m, request, num_new_computed_tokens, new_computed_blocks)
    c = m.livetail_coordinator
    ext = num_external_computed_tokens
    local = num_new_computed_tokens
    total = min(local + ext, m.max_model_len)
    target = min(total + num_new_tokens + num_lookahead_tokens, m.max_model_len)
    watermark = 0
    if has_scheduled_reqs and request.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED):
        watermark = m.watermark_blocks
    claimed = 0 if match is None else int(c.blocks_consumed_by_claim(match))
    fresh = m._fresh
    if full_sequence_must_fit:
        # The loaded tokens come in one acquire, whatever the chunk limit: the chunking the
        # whole-prompt charge bounds has chunks of at most max(that acquire, the limit).
        full = min(request.num_tokens, m.max_model_len)
        chunk = max(1, m.max_in_flight_tokens, total - local)
        need = claimed + int(c.blocks_needed_for_prompt(fresh, max(0, full - local), chunk, 0))
        if need + watermark > m.pool.num_free:
            return None
    loaded, rest = total - local, max(0, target - total)
    need = claimed + int(c.blocks_needed_for_sequential(fresh, loaded, rest))
    if need + watermark > m.pool.num_free - reserved_blocks:
        return None
    r = m._req(rid)
    tables = r.tables
    if match is not None:
        c.claim(tables, match)
        if m._residency is not None:
            m._residency.accessed(p for pages in match.pages for p in pages.tolist())
        del m._matches[rid]
        for g, b in enumerate(m._block_sizes):
            r.cached_blocks[g] = local // b
    if loaded:
        ok = c.acquire(tables, loaded)
        assert ok, "an acquire failed after its charge was checked"
        if m._reclaims:
            # The loaded slots no later query reads give their pages back at once: holes,
            # as vLLM's null blocks (nothing has been written to them).
            c.reclaim_expired(tables, total)
        pages = _loaded_pages(m, tables, local, total)
        if m._zeroing:
            # Not a group an asynchronous load writes: zeroing would race the load.
            m._new_block_ids.extend(p for g, ps in enumerate(pages) if g not in skip for p in ps)
        if m._residency is not None:
            m._residency.allocated(p for ps in pages for p in ps)
    new = m.empty_kv_cache_blocks
    if rest:
        ok = c.acquire(tables, rest)
        assert ok, "an acquire failed after its charge was checked"
        new = m._new_blocks(tables, total, target)  # reports them to the residency metrics
    if not delay_cache_blocks:
        m._cache(request, r, min(total + num_new_tokens, request.num_tokens), target)
    m._drain_events(None)
    return new


def _loaded_pages(
    m: KVCacheManager, tables: list[livetail.BlockTable], local: int, total: int
) -> list[list[int]]:
    """Per group, the real pages of the loaded tokens' slots (the ones the reclaim kept)."""
    ids = livetail.page_ids_batch(tables)
    return [
        [p for p in ids[g, local // b : -(-total // b)].tolist() if p]
        for g, b in enumerate(m._block_sizes)
    ]


def get_computed_blocks_for_connector(
    m: KVCacheManager, request: Request, max_cache_hit_length: int | None = None
) -> tuple[KVCacheBlocks, int, int, bool]:
    """The local lookup a connector runs first: ``get_computed_blocks`` and never diverged.

    vLLM reports a full-attention hit deeper than a lagging state group's (the connector
    then brings the state) only for Mamba groups in "align" mode. livetail's match is the
    boundary every group supports, which is vLLM's reconciled fallback: the connector is
    asked for the tokens past it.
    """
    return (*m.get_computed_blocks(request, max_cache_hit_length), False)


# -- the views of pages connectors (and vLLM's connector tests) read ----------------------


def block_hash_of(m: KVCacheManager, page: int) -> bytes | None:
    """vLLM's ``block_hash`` of a page (its hash and group id), None if it carries no name."""
    name = m.pool.name(page)
    if name is None:
        return None
    group, key = int(name[0]), bytes(name[1])
    return make_block_hash_with_group_id(BlockHash(m._hash_of_key.get(key, key)), group)


class LiveBlock(KVCacheBlock):
    """vLLM's block object for one page: its reference count and hash are the pool's now.

    vLLM's connectors and tests keep block objects and read ``ref_cnt`` and ``block_hash``
    later (after an eviction, a free); these read the pool then. The manager is a class
    attribute of the class ``live_blocks`` makes, so a block carries nothing beyond vLLM's.
    Only vLLM's initial values may be written (the dataclass's ``__init__`` writes them).
    """

    _m: KVCacheManager

    @property  # type: ignore[override]
    def ref_cnt(self) -> int:
        return 0 if self.is_null else int(self._m.pool.ref_count(self.block_id))

    @ref_cnt.setter
    def ref_cnt(self, value: int) -> None:
        if value != 0:
            raise unsupported("a block's reference count set outside the manager")

    @property  # type: ignore[override]
    def _block_hash(self) -> bytes | None:
        return None if self.is_null else block_hash_of(self._m, self.block_id)

    @_block_hash.setter
    def _block_hash(self, value: object) -> None:
        if value is not None:
            raise unsupported("a block's hash set outside the manager")

    @property
    def block_hash(self) -> bytes | None:
        return self._block_hash


def live_blocks(m: KVCacheManager, num_blocks: int) -> list[KVCacheBlock]:
    """One ``LiveBlock`` per page id of ``m``'s pool; page 0 is vLLM's null block too."""
    cls = type("LiveBlock", (LiveBlock,), {"_m": m})
    blocks: list[KVCacheBlock] = [cls(p) for p in range(num_blocks)]
    blocks[0].is_null = True
    return blocks


class HashToBlockView:
    """vLLM's ``BlockPool.cached_block_hash_to_block``: every named page by its hash, built
    from the pool when read (``_cache`` as vLLM's: one block, or a dict of them by id)."""

    def __init__(self, m: KVCacheManager) -> None:
        self._cache: dict[bytes, Any] = {}
        for p in range(1, m.pool.num_blocks):
            h = block_hash_of(m, p)
            if h is None:
                continue
            blk = m._blocks[p]
            held = self._cache.get(h)
            if held is None:
                self._cache[h] = blk
            elif isinstance(held, dict):
                held[p] = blk
            else:
                self._cache[h] = {held.block_id: held, p: blk}

    def __len__(self) -> int:
        return len(self._cache)

    def get_one_block(self, key: bytes) -> KVCacheBlock | None:
        blocks = self._cache.get(key)
        if isinstance(blocks, dict):
            return next(iter(blocks.values()))
        return blocks
