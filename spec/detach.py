"""Deferred free (semantics section 12): a request's references detached from its tables.

``Coordinator.detach(tables)`` empties the tables and moves their references into a
``DetachedTables`` handle without releasing anything (the pages stay pinned, and count in
their group's ``pinned_pages``); ``Coordinator.release_detached(handle)`` releases them later
in exactly the order ``free(tables)`` would have released them at detach time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import slots
from ._args import instance
from .host import abort_load_on_free

if TYPE_CHECKING:
    from .coordinator import Coordinator
    from .table import BlockTable


class DetachedTables:
    """The references of one request's tables, per group in slot order, until released."""

    def __init__(self, coordinator: Coordinator, batches: list[list[int]]) -> None:
        self._coordinator = coordinator
        self._batches = batches
        self._released = False

    @property
    def num_pages(self) -> int:
        """References the handle holds (one per real slot the tables had)."""
        return sum(len(b) for b in self._batches)

    @property
    def released(self) -> bool:
        return self._released

    def __repr__(self) -> str:
        return f"DetachedTables(num_pages={self.num_pages}, released={self._released})"


def detach(c: Coordinator, tables: list[BlockTable]) -> DetachedTables:
    """The tables' references, group by group; the tables end empty and unbound."""
    batches = []
    for t in tables:
        if t.load is not None:  # as free does: the pending load is aborted
            abort_load_on_free(t.load)
        batches.append(slots.free_batch(t.slots))
        t._reset()
    return DetachedTables(c, batches)


def release_detached(c: Coordinator, handle: object) -> int:
    """Release as free would have at detach time; returns the pages that re-entered the queue."""
    instance("handle", handle, DetachedTables)
    assert isinstance(handle, DetachedTables)
    if handle._coordinator is not c:
        raise ValueError("handle comes from another coordinator")
    if handle._released:
        raise ValueError("handle was released already")
    total = 0
    for g, pages in enumerate(handle._batches):
        back = c._pool._release(pages)  # the last slot's page first, as free
        c._pinned[g] -= back
        total += back
    handle._released = True
    return total
