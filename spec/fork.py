"""Forks (semantics 13.6): a second request holding the same pages, then its own tail.

``Coordinator.fork(tables)`` returns fresh tables that hold every page ``tables`` holds (one
more reference per real slot, ``slots.forked`` and ``slots.share``; holes stay holes), with
the same extent, tail room, reclaim floor, naming cursor and runs, bound to the same pool and
coordinator; and, per group, the slot both requests may still write (``slots.tail_slot``: the
partially written last slot, -1 when the extent is page-aligned). Before either request
writes past the shared extent, ``Coordinator.copy_tail(tables)`` gives it its own copy of
each group's tail page that is still shared (``slots.copies_tail``): one fresh page per such
group, all or nothing; the engine copies the listed pages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import pool_state, runs, slots
from .pool_state import LISTS
from .table import BlockTable

if TYPE_CHECKING:
    from .coordinator import Coordinator

# One copy copy_tail asks of the engine: (group, shared page, the table's own new page).
TailCopy = tuple[int, int, int]


def fork(c: Coordinator, tables: Sequence[BlockTable]) -> tuple[list[BlockTable], list[int]]:
    """Fresh tables holding the same pages as ``tables``, and per group the tail slot.

    Every real page gains one reference (holes stay holes); the fork has the tables' extent,
    tail room, reclaim floor and naming cursor, bound to the same pool. The second value is,
    per group, the partially written last slot both requests may still write (copy it with
    copy_tail before writing past the extent), -1 when the extent is page-aligned. A table
    with a pending load is a ValueError (its slots hold no content yet: complete the load
    first); a step plan made before is stale afterwards.
    """
    tables = c._check_tables(tables)
    for i, t in enumerate(tables):
        if t.load is not None:
            raise ValueError(
                f"tables[{i}] has a pending load (semantics section 10): its slots hold no "
                "content yet; complete the load, then fork"
            )
    pool = c._pool
    out: list[BlockTable] = []
    tails: list[int] = []
    for t in tables:
        n = len(t.slots)
        f = BlockTable()
        f.slots = [int(slots.fork_cell(p)) for p in t.slots]
        # Below the floor reclaim left no real page: the band [floor, n) holds them all.
        for s in range(t.reclaim_floor, n):
            page = t.slots[s]
            if slots.forked(s, page, n):
                pool_state.pin(pool, page, LISTS)  # slots.share; a plan made before is stale
        f.tail_available = t.tail_available
        f.reclaim_floor = t.reclaim_floor
        f.named_upto = t.named_upto
        f.runs = list(t.runs)
        if t.pool is not None:
            f.pool = t.pool
            f.block_size = t.block_size
            f._coordinator = c._identity
        out.append(f)
        tails.append(int(slots.tail_slot(n, t.tail_available)))
    return out, tails


def copy_tail(c: Coordinator, tables: Sequence[BlockTable]) -> list[TailCopy] | None:
    """The tables' own copy of every tail page they share.

    One fresh page per group whose tail slot (fork's) holds a page another holder shares,
    all or nothing: None, nothing changed, when the pool has fewer free pages. Each such slot
    takes its fresh page and drops one reference of the shared one; returns the copies
    (group, shared page, new page) the engine makes, [] when no tail is shared. A partial
    page carries no name, so neither does its copy.
    """
    tables = c._check_tables(tables)
    pool = c._pool
    todo: list[tuple[int, int]] = []
    for g, t in enumerate(tables):
        a = int(slots.tail_slot(len(t.slots), t.tail_available))
        if a >= 0 and slots.copies_tail(t.slots[a], pool._ref[t.slots[a]]):
            todo.append((g, a))
    fresh = pool._allocate(len(todo))
    if fresh is None:
        return None
    copies: list[TailCopy] = []
    for (g, a), new in zip(todo, fresh):
        t = tables[g]
        old = t.slots[a]
        t.slots[a] = int(slots.copy_tail_cell(a, old, a, True, new))
        # The shared page keeps its other holders: it never re-enters the queue here.
        _, requeued = runs.drop_reference(pool._ref[old])
        assert not requeued, "copy_tail copied a page only one holder had"
        pool_state.release(pool, old, LISTS)
        c._pinned[g] += 1
        copies.append((g, old, new))
    return copies
