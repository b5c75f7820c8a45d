"""``KVCacheManager``'s per-step path: the calls vLLM's scheduler makes for every running
request in every step, answered without a native call when nothing but the extent moves.

vLLM calls ``allocate_slots`` once per running request per step; most calls open no slot,
release no page and name no page (15 decode steps in 16 at B = 16). Such a call only moves
the request's extent inside its tables' tail room, which no page id, pool count, name or
event depends on: the move is kept in the request's ``_Req`` and applied to the tables when
anything reads them (docs/decisions.md, "vLLM adapter: the per-step path").
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from vllm.v1.core.kv_cache_manager import KVCacheBlocks
from vllm.v1.request import Request, RequestStatus

import livetail

if TYPE_CHECKING:
    from ._manager import KVCacheManager

# A threshold no frontier or token count reaches.
_NEVER = sys.maxsize
_RUNNING = RequestStatus.RUNNING


class _Req:
    """One request's tables (one per group), what was named of them, and the per-step path's
    mirror of them.

    The mirror is valid while ``room >= 0``: ``extent`` is the request's extent, of which
    the last ``pending`` tokens are not applied to the tables yet (they fit in the tail room
    of every table: applying them takes no page and adds no slot); the tables reach
    ``room`` tokens without a new slot in any group; a reclaim at a frontier below
    ``reclaim_at`` changes nothing; a naming of fewer than ``name_at`` tokens names nothing.
    Reading ``tables`` applies the pending tokens and drops the mirror (the reader may
    change the tables); ``_StepPath._refresh`` sets it again.
    """

    __slots__ = (
        "_c",
        "_tables",
        "cached_blocks",
        "extent",
        "name_at",
        "named_keys",
        "pending",
        "reclaim_at",
        "room",
    )

    def __init__(self, tables: list[livetail.BlockTable], c: livetail.Coordinator) -> None:
        self._c = c
        self._tables = tables
        self.cached_blocks = [0] * len(tables)  # per group: full slots named so far
        # Keys offered to cache_full_blocks so far (its num_tokens // base, capped by the
        # keys): a call offering no more names nothing (the tables' naming cursors are at
        # least there), so it is skipped.
        self.named_keys = 0
        self.pending = 0
        self.extent = 0
        self.room = -1  # no mirror yet
        self.reclaim_at = 0
        self.name_at = 0

    @property
    def tables(self) -> list[livetail.BlockTable]:
        """The tables with every token applied; the mirror dropped."""
        if self.pending:
            ok = self._c.acquire(self._tables, self.pending)
            assert ok, "tokens inside the tail room took a page"
            self.pending = 0
        self.room = -1
        return self._tables


class _StepPath:
    """The per-step half of ``KVCacheManager`` (its ``__init__`` sets the state)."""

    max_model_len: int
    enable_caching: bool
    empty_kv_cache_blocks: KVCacheBlocks
    _reqs: dict[str, _Req]
    _block_sizes: list[int]
    _windows: list[tuple[int, int, int]]
    _base: int
    _reprefillable: int
    _live_tail: bool

    def allocate_slots(
        self: KVCacheManager,
        request: Request,
        num_new_tokens: int,
        *args: Any,
        **kwargs: Any,
    ) -> KVCacheBlocks | None:
        """vLLM's ``allocate_slots`` (``KVCacheManager._allocate_slots``), first the per-step
        path: a running request (no watermark) that asks only for tokens (and lookahead
        slots) its tables have room for, at a frontier that reclaims nothing and a count
        that names nothing, gets no new block, and its extent moves in its ``_Req``."""
        r = self._reqs.get(request.request_id)
        if (
            r is not None
            and r.room >= 0
            and not args
            and num_new_tokens > 0
            and request.status is _RUNNING
        ):
            lookahead = 0
            if kwargs:  # vLLM passes num_lookahead_tokens alone; anything else: general path
                lookahead = kwargs.get("num_lookahead_tokens", -1) if len(kwargs) == 1 else -1
                if lookahead < 0 or (lookahead and self._live_tail):
                    lookahead = -1
            if lookahead >= 0:
                cap = self.max_model_len
                total = request.num_computed_tokens
                if total > cap:
                    total = cap
                end = total + num_new_tokens
                target = end + lookahead
                if target > cap:
                    target = cap
                if (
                    target <= r.room
                    and end < r.name_at
                    and (
                        total < r.reclaim_at
                        or total - request.num_in_flight_tokens < r.reclaim_at
                    )
                ):
                    if target > r.extent:
                        r.pending += target - r.extent
                        r.extent = target
                    return self.empty_kv_cache_blocks
        return self._allocate_slots(request, num_new_tokens, *args, **kwargs)

    def cache_blocks(self: KVCacheManager, request: Request, num_computed_tokens: int) -> None:
        """vLLM's ``cache_blocks``: nothing to do below the request's ``name_at``."""
        r = self._reqs.get(request.request_id)
        if r is not None and r.room >= 0 and num_computed_tokens < r.name_at:
            return
        self._cache_blocks(request, num_computed_tokens)

    @staticmethod
    def _reclaim_windows(specs: Sequence[livetail.GroupSpec]) -> list[tuple[int, int, int]]:
        """(group, B, W) of every group that reclaims, W the window of its reclaim bound (a
        state group's is 2), or 0 for a bound of another form (every frontier reclaims)."""
        return [
            (g, s.block_size, int(s.sliding_window or 0) if s.kind == "sliding" else
             2 if s.kind == "state" else 0)
            for g, s in enumerate(specs)
            if s.kind != "full"
        ]  # fmt: skip

    def _refresh(self, r: _Req) -> None:
        """Set the mirror of ``r`` (``_Req``) from its tables."""
        ts = r.tables  # every token applied
        e = int(ts[0].extent)
        # A table of page size B holds ceil(e / B) slots: its tail room is below one page.
        room = min(-(-e // b) * b for b in self._block_sizes)
        at = _NEVER
        for g, b, w in self._windows:
            if not w:
                at = 0
                break
            floor = int(ts[g].reclaim_floor)
            if -(-e // b) > floor:
                # reclaim_bound(f) = min(slid_out(f), slots) is above the floor from
                # slid_out(f) = (f - W + 1) // B = floor + 1 on.
                at = min(at, (floor + 1) * b + w - 1)
        r.reclaim_at = at
        r.name_at = (
            (r.named_keys + 1) * self._base + self._reprefillable if self.enable_caching else _NEVER
        )
        r.extent = e
        r.room = room
