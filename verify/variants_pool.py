"""Wrong variants of the pool's own transitions (``spec/pool_state.py``), registered in
``variants.VARIANTS``: the bugs a reviewer would write in the pool's glue (a forgotten
field update, an off-by-one, a wrong order), each refuted by
``pool-transitions-keep-the-queue``, which executes those functions."""

from __future__ import annotations

from typing import Any

from livetail.spec import pool_state as ps
from livetail.spec import runs, slots
from livetail.spec.geometry import Bool, Num
from livetail.spec.pool_state import OUT, Mem


def _unlink_keeps_back_link(st: Any, page: Num, when: Bool, mem: Mem) -> None:
    # Wrong: the next page's back link still names the page taken out.
    a, b = mem.get(st._prv, page), mem.get(st._nxt, page)
    st._nxt = mem.put(st._nxt, a, b, when)
    st._nxt = mem.put(st._nxt, page, OUT, when)
    st._prv = mem.put(st._prv, page, OUT, when)
    st._mid = mem.ite(ps.both(when, st._mid == page, mem), b, st._mid)
    st._free = st._free - mem.ind(when)


def _release_frees_at_one(st: Any, page: Num, mem: Mem) -> Bool:
    # Wrong: a page rejoins the queue when its count drops to 1, not 0.
    left, _ = runs.drop_reference(mem.get(st._ref, page), mem.ar)
    freed = left <= 1
    st._ref = mem.put(st._ref, page, left)
    st._version = st._version + 1
    front = slots.joins_front(mem.has(st._name_of, page), st._retention, mem.ar)
    ps.link(st, page, front, freed, mem)
    st._counters["pages_released"] += mem.ind(freed)
    return freed


def _share_leaves_page_queued(st: Any, page: Num, mem: Mem) -> None:
    # Wrong: a claimed free page is counted as taken but stays in the queue.
    takes = slots.claim_takes(mem.get(st._ref, page), mem.ar)
    st._free = st._free - mem.ind(takes)
    st._ref = mem.put(st._ref, page, mem.get(st._ref, page) + 1)
    st._version = st._version + 1
    st._counters["pages_claimed_free"] += mem.ind(takes)
    st._counters["pages_claimed"] += 1


def _requeue_at_back(st: Any, page: Num, mem: Mem) -> None:
    # Wrong: a free page that lost its name goes to the queue's back, behind named pages.
    goes = slots.joins_front(False, st._retention, mem.ar)
    ps.unlink(st, page, goes, mem)
    ps.link(st, page, False, goes, mem)
    st._version = st._version + mem.ind(goes)


def _drop_name_keeps_holder(st: Any, page: Num, when: Bool, mem: Mem) -> tuple[Bool, Any]:
    # Wrong: the page keeps its place on the name's holder list.
    name = mem.at(st._name_of, page)
    st._name_of = mem.unbind(st._name_of, page, when)
    gone = ps.both(when, slots.removes(mem.holders(st._pages_named, name), mem.ar), mem)
    st._pages_named = mem.unbind(st._pages_named, name, gone)
    st._tokens_of = mem.unbind(st._tokens_of, name, gone)
    st._counters["pages_evicted"] += mem.ind(when)
    st._counters["names_removed"] += mem.ind(gone)
    return gone, name


POOL_GLUE = (
    (
        "unlink-keeps-back-link",
        "a page taken out of the free queue leaves its successor's back link pointing at it",
        "unlink",
        _unlink_keeps_back_link,
    ),
    (
        "release-frees-at-one",
        "a released page rejoins the free queue when its count drops to 1",
        "release",
        _release_frees_at_one,
    ),
    (
        "claim-leaves-page-queued",
        "a claim counts a free matched page as taken but leaves it in the free queue",
        "share",
        _share_leaves_page_queued,
    ),
    (
        "requeue-keeps-name-at-back",
        "evict_names puts a free page that lost its name at the queue's back",
        "requeue_unnamed",
        _requeue_at_back,
    ),
    (
        "drop-name-keeps-holder",
        "a page that loses its name stays on the name's holder list",
        "drop_name",
        _drop_name_keeps_holder,
    ),
)


def variants(variant: Any) -> dict[str, Any]:
    """The pool-glue variants, built with ``variants.Variant`` (passed in: no import cycle)."""
    return {n: variant(n, d, ps, attr, f) for n, d, attr, f in POOL_GLUE}
