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
from collections.abc import Callable, Sequence
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
    change the tables); ``_Mirror.set`` sets it again.
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
            self._apply()
        self.room = -1
        return self._tables

    def _apply(self) -> None:
        ok = self._c.acquire(self._tables, self.pending)
        assert ok, "tokens inside the tail room took a page"
        self.pending = 0


class _Mirror:
    """What a request's mirror is computed from: the groups' page sizes and reclaim windows."""

    __slots__ = ("base", "caching", "reprefillable", "sizes", "uniform", "windows")

    def __init__(
        self, specs: Sequence[livetail.GroupSpec], base: int, reprefillable: int, caching: bool
    ) -> None:
        self.sizes = [s.block_size for s in specs]
        self.uniform = self.sizes[0] if len(set(self.sizes)) == 1 else 0
        # (group, B, W) of every group that reclaims, W the window of its reclaim bound (a
        # state group's is 2), or 0 for a bound of another form (every frontier reclaims).
        self.windows = [
            (g, s.block_size, int(s.sliding_window or 0) if s.kind == "sliding" else
             2 if s.kind == "state" else 0)
            for g, s in enumerate(specs)
            if s.kind != "full"
        ]  # fmt: skip
        self.base = base
        self.reprefillable = reprefillable
        self.caching = caching

    def set(self, r: _Req) -> None:
        """Set the mirror of ``r`` from its tables (pending tokens applied first)."""
        ts = r.tables
        self.set_from(r, int(ts[0].extent), ts)

    def set_from(self, r: _Req, e: int, ts: list[livetail.BlockTable]) -> None:
        """Set the mirror of ``r``, whose tables have extent ``e`` and no pending token."""
        u = self.uniform
        # A table of page size B holds ceil(e / B) slots: its tail room is below one page.
        room = -(-e // u) * u if u else min(-(-e // b) * b for b in self.sizes)
        at = _NEVER
        for g, b, w in self.windows:
            if not w:
                at = 0
                break
            floor = ts[g].reclaim_floor
            if -(-e // b) > floor:
                # reclaim_bound(f) = min(slid_out(f), slots) is above the floor from
                # slid_out(f) = (f - W + 1) // B = floor + 1 on.
                x = (floor + 1) * b + w - 1
                if x < at:
                    at = x
        r.reclaim_at = at
        r.name_at = (r.named_keys + 1) * self.base + self.reprefillable if self.caching else _NEVER
        r.extent = e
        r.room = room


def install_step_path(m: KVCacheManager) -> None:
    """Give ``m`` the per-step ``allocate_slots`` and ``cache_blocks``: closures over its
    state, set on the instance, which fall back to the class's methods (the general path).

    Closures because ``KVCacheManager`` has a ``__getattr__`` (``_View``: unknown
    attributes are refused by name), which takes every attribute read on the manager off
    CPython's fast path; a closure reads its state from cells.
    """
    cls = type(m)
    general: Callable[..., KVCacheBlocks | None] = cls.allocate_slots.__get__(m)
    general_cache: Callable[[Request, int], None] = cls.cache_blocks.__get__(m)
    reqs = m._reqs
    cap = m.max_model_len
    empty = m.empty_kv_cache_blocks
    live_tail = m._live_tail
    acquire = m.livetail_coordinator.acquire
    reclaim = m.livetail_coordinator.reclaim_expired
    mirror = m._mirror
    reclaims = bool(mirror.windows)
    base = m._base
    new_blocks = m._new_blocks
    cache = m._cache
    forget = m._forget_if_empty

    def allocate_slots(
        request: Request, num_new_tokens: int, *args: Any, **kwargs: Any
    ) -> KVCacheBlocks | None:
        r = reqs.get(request.request_id)
        if (
            r is None
            or r.room < 0
            or args
            or num_new_tokens <= 0
            or request.status is not _RUNNING
        ):
            return general(request, num_new_tokens, *args, **kwargs)
        la = 0
        if kwargs:  # vLLM passes num_lookahead_tokens alone; anything else: general path
            la = kwargs.get("num_lookahead_tokens", -1) if len(kwargs) == 1 else -1
            if la < 0 or (la and live_tail):
                return general(request, num_new_tokens, *args, **kwargs)
        # The general path's steps for a running request (no watermark, claim or reserve),
        # each skipped where it would change nothing.
        total = request.num_computed_tokens
        if total > cap:
            total = cap
        end = total + num_new_tokens
        target = end + la
        if target > cap:
            target = cap
        extent = r.extent
        f = total  # the reclaim frontier, where it may reach reclaim_at
        if total >= r.reclaim_at:
            f = total - request.num_in_flight_tokens
        if target <= r.room and end < r.name_at and f < r.reclaim_at:
            if target > extent:
                r.pending += target - extent
                r.extent = target
            return empty
        ts = r._tables
        if reclaims and extent:
            if f < 0:
                f = 0
            if f > extent:
                f = extent
            if f >= r.reclaim_at:
                if r.pending:
                    r._apply()  # the frontier may be past the tables' extent
                reclaim(ts, f)
        new = empty
        if target > extent:
            # The pending tokens with the new ones in one acquire: they take no page, so it
            # takes the pages, holes and order an acquire of the new ones alone would.
            if not acquire(ts, target - extent + r.pending):
                r.room = -1  # the pending tokens stay pending
                if not extent:
                    forget(request.request_id)
                return None
            r.pending = 0
            # A new base slot is a new slot in some group (see the general path).
            if -(-target // base) > -(-extent // base):
                new = new_blocks(ts, extent, target)
            extent = target
        if r.pending:
            r._apply()
        if end >= r.name_at:
            n = request.num_tokens
            cache(request, r, end if end < n else n, extent)
        mirror.set_from(r, extent, ts)
        return new

    def cache_blocks(request: Request, num_computed_tokens: int) -> None:
        r = reqs.get(request.request_id)
        if r is not None and r.room >= 0 and num_computed_tokens < r.name_at:
            return  # nothing new to name
        general_cache(request, num_computed_tokens)

    allocate_slots.__doc__ = general.__doc__
    m.allocate_slots = allocate_slots  # type: ignore[method-assign]
    m.cache_blocks = cache_blocks  # type: ignore[method-assign]
