"""Slot transitions: what each state change does to one slot, written once over ``Arith``.

``runs.py`` describes a table by counts (its runs, floor and tail); this module says what
a transition does to each slot's page id.  Every per-slot rule is a pure function of the
slot index, the page it holds and the transition's parameters, so it evaluates on Python
ints (the model's classes call it slot by slot) and on Z3 terms (``livetail.verify``
calls it on a symbolic slot of a symbolic table, an unbounded array of page ids, and
proves what it leaves for every slot at once).  The band a rule touches comes from
``runs`` (``reclaim_band``, ``claim_run``); each rule leaves every slot outside its band
unchanged, which the theorems prove, so the model may visit the band alone.

The model's only own code is ``apply`` (visit the band, write what the rule says) and
``batch`` (collect the pages a rule lets go, in the order the pool releases them).
"""

from __future__ import annotations

from collections.abc import Callable

from . import runs
from .geometry import INT, Arith, Bool, Num
from .runs import both


def in_band(s: Num, lo: Num, hi: Num, ar: Arith = INT) -> Bool:
    """Is slot s in ``[lo, hi)``?"""
    return both(lo <= s, s < hi, ar)


# --- reclaim_expired: punch every real slot of the band --------------------------------------


def punched(s: Num, page: Num, lo: Num, hi: Num, ar: Arith = INT) -> Bool:
    """Does reclaim over the band ``[lo, hi)`` let go of the page slot s holds?"""
    return both(in_band(s, lo, hi, ar), page != 0, ar)


def reclaim_cell(s: Num, page: Num, lo: Num, hi: Num, ar: Arith = INT) -> Num:
    """The page slot s holds after a reclaim over ``[lo, hi)``: a hole inside, as it was outside."""
    return ar.cond(in_band(s, lo, hi, ar), lambda: 0, lambda: page)


def reclaimable_cell(
    s: Num,
    page: Num,
    ref: Num,
    cached: Bool,
    count_uncached: Bool,
    lo: Num,
    hi: Num,
    ar: Arith = INT,
) -> Bool:
    """Does blocks_reclaimable_at count slot s?  Its page would re-enter the queue now.

    ``ref`` is the page's reference count, ``cached`` whether it carries a name; with
    ``count_uncached`` False only named pages count.
    """
    counted = both(punched(s, page, lo, hi, ar), runs.counts_as_reclaimable(ref, ar), ar)
    return both(counted, ar.either(count_uncached, cached), ar)


# --- free: every slot lets go ------------------------------------------------------------------


def freed(s: Num, page: Num, slots: Num, ar: Arith = INT) -> Bool:
    """Does free let go of the page slot s holds?  Every real slot of the table does."""
    return both(in_band(s, 0, slots, ar), page != 0, ar)


# --- claim: the matched pages, and a fresh device page for every host-served slot ----------


def claim_cell(device_page: Num, host_page: Num, loaded_page: Num, ar: Arith = INT) -> Num:
    """The page a claimed slot holds: the matched device page, else the page loaded for it.

    ``host_page`` is the host copy the match serves the slot from (0: none) and
    ``loaded_page`` the fresh device page the claim took for that copy.
    """
    return ar.cond(
        device_page != 0, lambda: device_page, lambda: loaded(host_page, loaded_page, ar)
    )


def loaded(host_page: Num, loaded_page: Num, ar: Arith = INT) -> Num:
    """A host-served slot takes its fresh device page; a slot the host does not serve, none."""
    return ar.cond(host_page != 0, lambda: loaded_page, lambda: 0)


def claim_takes(ref: Num, ar: Arith = INT) -> Bool:
    """Does claiming a matched page take it from the free queue?  Iff nobody holds it."""
    return ref == 0


# --- cache_full_blocks: which slots are offered a name ---------------------------------------


def offered(
    j: Num,
    n: Num,
    B: Num,
    R: Num,
    q: Num,
    upto: Num,
    covered: Num,
    state: bool,
    ar: Arith = INT,
) -> Bool:
    """Is slot j offered a name by cache_full_blocks(n)?  (It takes one if real and unnamed.)

    ``upto`` is the table's naming cursor (slots below it were offered before), ``covered``
    the full pages the call's keys and n cover, ``R`` the group's resume count (-1 for a full
    group) and ``q`` the alignment in the group's pages.  A full group offers every slot; a
    sliding group only the slots that can serve a match (section 13.4): the R slots behind a
    multiple of the alignment (``behind_boundary``), whether or not that boundary is computed
    yet (the cursor passes each slot once).  A state group offers only the slot ending
    exactly at n, and only when n is a multiple of B (no other page holds a usable state)
    and that slot is behind a boundary, i.e. n is a multiple of the alignment.
    """
    fresh = both(both(upto <= j, j < covered, ar), behind_boundary(j, R, q, ar), ar)
    if not state:
        return fresh
    return both(fresh, both(ar.mod(n, B) == 0, j == ar.div(n, B) - 1, ar), ar)


def behind_boundary(j: Num, R: Num, q: Num, ar: Arith = INT) -> Bool:
    """Is slot j one of the R slots right behind a multiple of q (any slot of a full group)?

    ``R`` is the group's resume count (-1: a full group, every slot serves), ``q`` the
    alignment in the group's pages; with R >= q every slot is behind a boundary.
    """
    return ar.cond(R < 0, lambda: True, lambda: ar.mod(j, q) >= q - R)


def takes_name(page: Num, named: Bool, ar: Arith = INT) -> Bool:
    """Does an offered slot's page take a name?  A real page that has none yet."""
    return both(page != 0, named == False, ar)  # noqa: E712 (a Z3 term has no `not`)


# --- offload: the slots a match can ever use (section 10) ----------------------------------


def reachable(j: Num, n: Num, B: Num, R: Num, q: Num, ar: Arith = INT) -> Bool:
    """Can slot j of a group serve a match of some boundary of at most n tokens?

    ``R`` is the group's resume count (-1 for a full group: every slot up to n), ``q`` the
    coordinator's alignment in the group's pages (section 13.9; the lcm by default).  A
    full group's slot j serves every boundary past it; a sliding or state group's serves the
    boundaries b (multiples of q, b*B <= n) with b - R <= j < b, of which the first above j
    is the nearest: it decides.
    """
    first = (ar.div(j, q) + 1) * q  # the first aligned boundary above slot j, in pages
    near = both(first * B <= n, first - R <= j, ar)
    return both(j >= 0, ar.cond(R < 0, lambda: (j + 1) * B <= n, lambda: near), ar)


# --- the pool: where a released page goes ------------------------------------------------


def joins_front(named: Bool, retention: Bool, ar: Arith = INT) -> Bool:
    """A page whose count dropped to 0 joins the queue's front iff it is unnamed (retention on).

    Named pages join the back (matchable until evicted, oldest first); with retention off
    every page joins the back (the earlier order).
    """
    return both(retention, named == False, ar)  # noqa: E712 (a Z3 term has no `not`)


# --- events: when naming and eviction change the set of names a pool holds ---------------


def stores(holders: Num, ar: Arith = INT) -> Bool:
    """Does naming one more page ``(group, key)`` emit a stored event?

    ``holders`` is how many pages carry that name before: only a name new to the pool is
    announced (several pages may carry one name, section 8).
    """
    return holders == 0


def removes(holders: Num, ar: Arith = INT) -> Bool:
    """Does a page losing its name emit a removed event?  ``holders``: pages still carrying it.

    Only the last copy's eviction removes the name from the pool.
    """
    return holders == 0


# --- the pool: where an allocated page comes from ------------------------------------------


def from_front(front: Num, queue: Num, ar: Arith = INT) -> Bool:
    """Does an allocation's next page come off the stack of unnamed released pages?

    ``front`` and ``queue`` are the pages left on that stack and in the ordered queue behind
    it (never-used pages, then named released ones).  The free queue is the stack, top
    first, then the ordered queue: taking the stack while it holds a page takes the free
    queue's head, so an allocation of k takes its first k pages in order (section 2).
    """
    return front > 0


def evicts(named: Bool, ar: Arith = INT) -> Bool:
    """Does the page an allocation takes lose its name?  Iff it carries one.

    A page handed out is written afresh, so its prefix-cache name goes (eviction); under
    the retention rule only a page from the ordered queue's named tail can carry one.
    """
    return named
# --- host tier: what ending a copy plan does to each of its entries (section 10) -----------
# An offload plan's entry copies a device page to a host page, a load plan's a host page to
# a device page; each entry carries the name of what it copies.  ``load`` says which kind of
# plan ends and ``completed`` how: complete_offload, abort_offload, complete_load, and the
# abort of a load whose request is freed.  Names are ints here (0: none) for Z3, and
# (group, key) pairs in the model.


def ends_entry(i: Num, k: Num, ar: Arith = INT) -> Bool:
    """Does ending a plan of k entries visit entry i?  Every entry of the plan, once."""
    return in_band(i, 0, k, ar)


def copy_target(device_page: Num, host_page: Num, load: Bool, ar: Arith = INT) -> Num:
    """The page an entry's copy writes, and names: a load's device page, an offload's host page."""
    return ar.cond(load, lambda: device_page, lambda: host_page)


def copy_name(name: Num, completed: Bool, ar: Arith = INT) -> Num:
    """The name an entry's target page takes when its plan ends: on completion the entry's
    (the content copied into it); on abort none (0), for nothing was copied."""
    return ar.cond(completed, lambda: name, lambda: 0)


def drops_device(load: Bool, completed: Bool, ar: Arith = INT) -> Bool:
    """Does the plan's end drop the entry's device page reference?  An offload's copy
    reference goes, completed or aborted; a load's device page stays, held by its slot."""
    return ar.cond(load, lambda: False, lambda: True)


def drops_host(load: Bool, completed: Bool, ar: Arith = INT) -> Bool:
    """Does the plan's end drop the entry's host page reference?  Always: an offload's host
    page was allocated for the copy, a load's host page pinned for it."""
    return True


# --- the model's glue -----------------------------------------------------------------------


def apply(slots: list[int], lo: int, hi: int, cell: Callable[[int, int], int]) -> None:
    """Write ``cell(s, page)`` into every slot of ``[lo, hi)`` (the rules leave the rest alone)."""
    for s in range(lo, hi):
        slots[s] = cell(s, slots[s])


def batch(
    slots: list[int],
    lo: int,
    hi: int,
    lets_go: Callable[[int, int], bool],
    descending: bool = False,
) -> list[int]:
    """The pages of ``[lo, hi)`` that ``lets_go``: the batch the pool releases, last entry first.

    free's batch is in slot order (the last slot's page re-enters the queue first);
    reclaim's is collected from the top of the band down (``descending``), so its pages
    re-enter the queue in ascending slot order (section 5).
    """
    order = range(hi - 1, lo - 1, -1) if descending else range(lo, hi)
    return [slots[s] for s in order if lets_go(s, slots[s])]


def free_batch(slots: list[int]) -> list[int]:
    """free's batch: the pages of every slot ``freed`` lets go, in slot order."""
    n = len(slots)
    return batch(slots, 0, n, lambda s, p: bool(freed(s, p, n)))


__all__ = [
    "apply",
    "batch",
    "behind_boundary",
    "claim_cell",
    "claim_takes",
    "copy_name",
    "copy_target",
    "drops_device",
    "drops_host",
    "ends_entry",
    "evicts",
    "free_batch",
    "freed",
    "from_front",
    "in_band",
    "joins_front",
    "loaded",
    "offered",
    "punched",
    "reachable",
    "reclaim_cell",
    "reclaimable_cell",
    "removes",
    "stores",
    "takes_name",
]
