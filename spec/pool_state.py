"""The pool's state changes as transitions, written once over ``Mem`` (semantics section 2).

A pool's state is arrays indexed by page: reference counts ``_ref``, the free queue's links
``_nxt`` / ``_prv``, the names ``_name_of`` (page -> name), each name's holders
``_pages_named`` (name -> its pages) and the token ids a name carries ``_tokens_of``, plus
the free count ``_free``, the change counter ``_version`` and the monotone ``_counters``.
Every function here takes such a state record and writes the new state into it: the model
passes its ``BlockPool`` (``LISTS``: Python lists and dicts, updated in place), and
``livetail.verify`` passes a record of Z3 arrays and integers (``Z3Mem``: each write a
``Store``), so a theorem executes these very functions on a symbolic pool of any size.
``BlockPool``'s methods are a thin shell: argument checks, loops over the pages of one
call, and the event log.

The free queue is one circular doubly linked list over the arrays, behind page 0 (the null
page, never allocated, is its sentinel): head first, the stack of unnamed released pages,
then the ordered queue (never-used pages, then named released ones, oldest first), whose
first page is ``_mid`` (0: the ordered queue is empty).  A page out of the queue has both
links ``OUT`` (-1).  Where a page goes and where an allocation takes one are
``spec/slots.py``'s rules (``from_front``, ``evicts``, ``joins_front``, ``claim_takes``,
``stores``, ``removes``).

Every write takes a condition (``when``): a transition that does not apply leaves the
state as it was, with no branch on symbolic state.
"""

from __future__ import annotations

from typing import Any, Protocol

from . import runs, slots
from .geometry import INT, Arith, Bool, Num

OUT = -1  # the link of a page out of the queue (pinned)


class Mem(Protocol):
    """The array operations whose Python and Z3 spellings differ (``Arith``'s, for state)."""

    @property
    def ar(self) -> Arith:
        """The arithmetic of the values the arrays hold (for the rules of ``slots``)."""
        ...

    def get(self, a: Any, i: Num) -> Num:
        """Entry i of array a."""
        ...

    def put(self, a: Any, i: Num, v: Num, when: Bool = True) -> Any:
        """Array a with entry i set to v where ``when`` holds (the list itself, updated)."""
        ...

    def ite(self, c: Bool, a: Num, b: Num) -> Num: ...

    def ind(self, c: Bool) -> Num:
        """1 where c holds, else 0."""
        ...

    def has(self, m: Any, k: Any) -> Bool:
        """Does map m hold key k?"""
        ...

    def at(self, m: Any, k: Any) -> Any:
        """Map m's value at k (None, or 0 over Z3, where it holds none)."""
        ...

    def bind(self, m: Any, k: Any, v: Any, when: Bool = True) -> Any:
        """Map m with k -> v where ``when`` holds."""
        ...

    def unbind(self, m: Any, k: Any, when: Bool = True) -> Any:
        """Map m without key k where ``when`` holds."""
        ...

    def holders(self, m: Any, k: Any) -> Num:
        """How many pages name k's holder list in m has."""
        ...

    def join(self, m: Any, k: Any, page: Num, when: Bool = True) -> Any:
        """m with page appended to k's holders where ``when`` holds."""
        ...

    def leave(self, m: Any, k: Any, page: Num, when: Bool = True) -> Any:
        """m with page taken off k's holders where ``when`` holds."""
        ...

    def empty(self, m: Any) -> Any:
        """m with no key."""
        ...


class ListMem:
    """``Mem`` over Python lists and dicts, updated in place: the model's."""

    ar: Arith = INT

    def get(self, a: list[int], i: int) -> int:
        return a[i]

    def put(self, a: list[int], i: int, v: int, when: bool = True) -> list[int]:
        if when:
            a[i] = v
        return a

    def ite(self, c: bool, a: int, b: int) -> int:
        return a if c else b

    def ind(self, c: bool) -> int:
        return 1 if c else 0

    def has(self, m: dict[Any, Any], k: Any) -> bool:
        return k in m

    def at(self, m: dict[Any, Any], k: Any) -> Any:
        return m.get(k)

    def bind(self, m: dict[Any, Any], k: Any, v: Any, when: bool = True) -> dict[Any, Any]:
        if when:
            m[k] = v
        return m

    def unbind(self, m: dict[Any, Any], k: Any, when: bool = True) -> dict[Any, Any]:
        if when:
            m.pop(k, None)
        return m

    def holders(self, m: dict[Any, list[int]], k: Any) -> int:
        return len(m.get(k, ()))

    def join(self, m: dict[Any, list[int]], k: Any, page: int, when: bool = True) -> Any:
        if when:
            m.setdefault(k, []).append(page)
        return m

    def leave(self, m: dict[Any, list[int]], k: Any, page: int, when: bool = True) -> Any:
        if when:
            m[k].remove(page)
        return m

    def empty(self, m: dict[Any, Any]) -> dict[Any, Any]:
        m.clear()
        return m


LISTS = ListMem()


def both(a: Bool, b: Bool, mem: Mem) -> Bool:
    return runs.both(a, b, mem.ar)


# --- the queue's links -----------------------------------------------------------------------


def queue_links(num_blocks: int) -> tuple[list[int], list[int]]:
    """A new pool's links: the stack empty, the ordered queue pages 1 .. N-1 in order."""
    order = [0, *range(1, num_blocks), 0]  # the ring, from the sentinel back to it
    nxt, prv = [0] * num_blocks, [0] * num_blocks
    for a, b in zip(order, order[1:]):
        nxt[a], prv[b] = b, a
    return nxt, prv


def head(st: Any, mem: Mem) -> Num:
    """The page an allocation takes: the stack's top while it holds a page, else the ordered
    queue's head, as ``slots.from_front`` decides (0 when the queue is empty)."""
    top, mid = mem.get(st._nxt, 0), st._mid
    stacked, ordered = mem.ind(top != mid), mem.ind(mid != 0)
    return mem.ite(slots.from_front(stacked, ordered, mem.ar), top, mid)


def unlink(st: Any, page: Num, when: Bool, mem: Mem) -> None:
    """Page leaves the queue wherever it is (its neighbours close up) where ``when`` holds."""
    a, b = mem.get(st._prv, page), mem.get(st._nxt, page)
    st._nxt = mem.put(st._nxt, a, b, when)
    st._prv = mem.put(st._prv, b, a, when)
    st._nxt = mem.put(st._nxt, page, OUT, when)
    st._prv = mem.put(st._prv, page, OUT, when)
    st._mid = mem.ite(both(when, st._mid == page, mem), b, st._mid)
    st._free = st._free - mem.ind(when)


def link(st: Any, page: Num, front: Bool, when: Bool, mem: Mem) -> None:
    """Page joins the queue where ``when`` holds: on the stack's top (the queue's head) if
    ``front``, else at the ordered queue's back (the queue's tail)."""
    a = mem.ite(front, 0, mem.get(st._prv, 0))
    b = mem.ite(front, mem.get(st._nxt, 0), 0)
    st._nxt = mem.put(st._nxt, a, page, when)
    st._prv = mem.put(st._prv, b, page, when)
    st._nxt = mem.put(st._nxt, page, b, when)
    st._prv = mem.put(st._prv, page, a, when)
    starts = both(both(when, front == False, mem), st._mid == 0, mem)  # noqa: E712
    st._mid = mem.ite(starts, page, st._mid)
    st._free = st._free + mem.ind(when)


# --- allocation, release, claim ----------------------------------------------------------------


def take(st: Any, mem: Mem) -> tuple[Num, Bool, Bool, Any]:
    """An allocation's next page (the queue holds one): the queue's head, taken out with
    count 1, its name dropped if ``slots.evicts`` says so.  Returns the page, whether it lost
    a name, whether that was the name's last copy (a removed event), and the name."""
    page = head(st, mem)
    unlink(st, page, True, mem)
    st._ref = mem.put(st._ref, page, 1)
    st._version = st._version + 1
    st._counters["pages_allocated"] += 1
    evicted = slots.evicts(mem.has(st._name_of, page), mem.ar)
    removed, name = drop_name(st, page, evicted, mem)
    return page, evicted, removed, name


def release(st: Any, page: Num, mem: Mem) -> Bool:
    """One reference to page goes (``runs.drop_reference``); at count 0 it joins the queue
    where ``slots.joins_front`` says.  Returns whether it became free."""
    left, freed = runs.drop_reference(mem.get(st._ref, page), mem.ar)
    st._ref = mem.put(st._ref, page, left)
    st._version = st._version + 1
    front = slots.joins_front(mem.has(st._name_of, page), st._retention, mem.ar)
    link(st, page, front, freed, mem)
    st._counters["pages_released"] += mem.ind(freed)
    return freed


def share(st: Any, page: Num, mem: Mem) -> None:
    """One more reference to a real page (a claim's matched page); a free one leaves the
    queue wherever it is (``slots.claim_takes``)."""
    takes = slots.claim_takes(mem.get(st._ref, page), mem.ar)
    unlink(st, page, takes, mem)
    st._ref = mem.put(st._ref, page, mem.get(st._ref, page) + 1)
    st._version = st._version + 1
    st._counters["pages_claimed_free"] += mem.ind(takes)
    st._counters["pages_claimed"] += 1


def pin(st: Any, page: Num, mem: Mem) -> None:
    """One more holder of a held page (``slots.share``): an offload copy's reference (the
    page cannot be reused meanwhile), a fork's slot."""
    st._ref = mem.put(st._ref, page, slots.share(mem.get(st._ref, page), mem.ar))
    st._version = st._version + 1


def requeue_unnamed(st: Any, page: Num, mem: Mem) -> None:
    """A free page that lost its name goes where an unnamed release would put it
    (``slots.joins_front``): out of the queue and back in, on the stack if so."""
    goes = slots.joins_front(False, st._retention, mem.ar)
    unlink(st, page, goes, mem)
    link(st, page, True, goes, mem)
    st._version = st._version + mem.ind(goes)


# --- names ---------------------------------------------------------------------------------------


def set_name(st: Any, page: Num, name: Any, tokens: Any, carries: Bool, mem: Mem) -> Bool:
    """Page (pinned) takes ``name``; True if the name is new to the pool (``slots.stores``),
    which then keeps ``tokens`` if it ``carries`` any."""
    new = slots.stores(mem.holders(st._pages_named, name), mem.ar)
    st._name_of = mem.bind(st._name_of, page, name)
    st._pages_named = mem.join(st._pages_named, name, page)
    st._tokens_of = mem.bind(st._tokens_of, name, tokens, both(new, carries, mem))
    st._counters["pages_named"] += 1
    st._counters["names_stored"] += mem.ind(new)
    return new


def drop_name(st: Any, page: Num, when: Bool, mem: Mem) -> tuple[Bool, Any]:
    """Page (named) loses its name where ``when`` holds; returns whether that was the name's
    last copy (``slots.removes``: the pool no longer holds the name) and the name."""
    name = mem.at(st._name_of, page)
    st._name_of = mem.unbind(st._name_of, page, when)
    st._pages_named = mem.leave(st._pages_named, name, page, when)
    gone = both(when, slots.removes(mem.holders(st._pages_named, name), mem.ar), mem)
    st._pages_named = mem.unbind(st._pages_named, name, gone)
    st._tokens_of = mem.unbind(st._tokens_of, name, gone)
    st._counters["pages_evicted"] += mem.ind(when)
    st._counters["names_removed"] += mem.ind(gone)
    return gone, name


def clear_names(st: Any, named_pages: Num, names: Num, mem: Mem) -> None:
    """reset_names once ``slots.clears`` allowed it: every name goes (the queue, counts and
    links stay).  ``named_pages`` and ``names``: how many pages carry one, distinct names."""
    st._counters["pages_evicted"] += named_pages
    st._counters["names_removed"] += names
    st._name_of = mem.empty(st._name_of)
    st._pages_named = mem.empty(st._pages_named)
    st._tokens_of = mem.empty(st._tokens_of)


__all__ = [
    "LISTS",
    "OUT",
    "ListMem",
    "Mem",
    "clear_names",
    "drop_name",
    "head",
    "link",
    "pin",
    "queue_links",
    "release",
    "requeue_unnamed",
    "set_name",
    "share",
    "take",
    "unlink",
]
