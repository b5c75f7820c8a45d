"""Block pool (semantics section 2): page 0 is the null page, free pages in one queue.

Retention rule: a page whose count drops to 0 joins the back of the queue if it carries a
prefix-cache name (evicted oldest first) and the front if it carries none (reused first).
"""

from __future__ import annotations

from collections.abc import Sequence

from ._args import bounded, count
from .runs import drop_reference

# A page's prefix-cache name: (group index, 32-byte key).
Name = tuple[int, bytes]


class BlockPool:
    """Pages 0 .. num_blocks-1; page 0 is never allocated, freed, counted or cached."""

    def __init__(self, num_blocks: int, retention: bool = True) -> None:
        self._num_blocks = bounded("num_blocks", num_blocks, 1)
        if not isinstance(retention, bool):
            raise TypeError(f"retention must be a bool, got {type(retention).__name__}")
        # retention=False keeps the earlier order (every freed page appended at the back).
        self._retention = retention
        # The queue is reversed(self._front) followed by self._queue: _front is a stack of
        # unnamed released pages (its last entry is the queue's head); _queue, an
        # insertion-ordered dict, holds the never-used pages and named released ones.
        self._front: list[int] = []
        # Change counter (semantics section 9): bumped by every change to the queue or a
        # reference count, so a step plan can tell it is stale.
        self._version = 0
        self._queue: dict[int, None] = dict.fromkeys(range(1, self._num_blocks))
        self._ref = [0] * self._num_blocks
        # Prefix-cache names: each named page's name, and each name's pages in
        # registration order (several requests may have computed the same prefix).
        self._name_of: dict[int, Name] = {}
        self._pages_named: dict[Name, list[int]] = {}

    @property
    def num_blocks(self) -> int:
        return self._num_blocks

    @property
    def num_free(self) -> int:
        return len(self._front) + len(self._queue)

    @property
    def num_pinned(self) -> int:
        return self._num_blocks - 1 - self.num_free

    @property
    def retention(self) -> bool:
        """True: unnamed freed pages go to the queue's front (section 2); False: to the back."""
        return self._retention

    def free_queue(self) -> list[int]:
        """The free pages, next to be allocated first."""
        return self._front[::-1] + list(self._queue)

    def ref_count(self, page: int) -> int:
        p = count("page", page)
        if p >= self._num_blocks:
            raise ValueError(f"page must be < num_blocks ({self._num_blocks}), got {p}")
        return self._ref[p]

    def ref_counts(self) -> list[int]:
        return list(self._ref)

    @property
    def num_cached(self) -> int:
        """Pages that carry a prefix-cache name (in use or free)."""
        return len(self._name_of)

    @property
    def num_cached_free(self) -> int:
        """Named pages in the free queue: matchable until an allocation evicts them."""
        return sum(1 for p in self._name_of if self._ref[p] == 0)

    def _allocate(self, k: int) -> list[int] | None:
        """The first k free pages, each with count 1; None (and nothing taken) if short."""
        if k > self.num_free:
            return None
        if k:
            self._version += 1
        pages = []
        for _ in range(k):
            if self._front:
                page = self._front.pop()
            else:
                page = next(iter(self._queue))
                del self._queue[page]
                self._drop_name(page)  # eviction: the oldest free page loses its name
            self._ref[page] = 1
            pages.append(page)
        return pages

    def _release(self, pages: Sequence[int]) -> int:
        """Drop one reference per entry, last entry first; returns pages that became free."""
        freed = 0
        if pages:
            self._version += 1
        for page in reversed(pages):
            self._ref[page], freed_now = drop_reference(self._ref[page])
            if freed_now:
                if self._retention and page not in self._name_of:
                    self._front.append(page)  # unnamed: reused first
                else:
                    self._queue[page] = None  # named: matchable until evicted, oldest first
                freed += 1
        return freed

    def _is_cached(self, page: int) -> bool:
        return page in self._name_of

    def _name(self, page: int) -> Name | None:
        return self._name_of.get(page)

    def _set_name(self, page: int, name: Name) -> None:
        self._name_of[page] = name
        self._pages_named.setdefault(name, []).append(page)

    def _drop_name(self, page: int) -> None:
        name = self._name_of.pop(page, None)
        if name is not None:
            pages = self._pages_named[name]
            pages.remove(page)
            if not pages:
                del self._pages_named[name]

    def _lookup(self, name: Name) -> int:
        """The earliest registered page in use with this name, else the earliest one; 0 if none."""
        pages = self._pages_named.get(name, [])
        for p in pages:
            if self._ref[p] >= 1:
                return p
        return pages[0] if pages else 0

    def _take_shared(self, page: int) -> None:
        """One more reference to a real page; a free one leaves the queue wherever it is."""
        self._version += 1
        if self._ref[page] == 0:
            if page in self._queue:
                del self._queue[page]
            else:
                self._front.remove(page)
        self._ref[page] += 1

    def __repr__(self) -> str:
        return f"BlockPool(num_blocks={self._num_blocks}, num_free={self.num_free})"
