"""Block pool (semantics section 2): page 0 is the null page, free pages in one FIFO queue."""

from __future__ import annotations

from collections.abc import Sequence

from ._args import bounded, count
from .runs import drop_reference

# A page's prefix-cache name: (group index, 32-byte key).
Name = tuple[int, bytes]


class BlockPool:
    """Pages 0 .. num_blocks-1; page 0 is never allocated, freed, counted or cached."""

    def __init__(self, num_blocks: int) -> None:
        self._num_blocks = bounded("num_blocks", num_blocks, 1)
        # An insertion-ordered dict is the FIFO queue: pop the first key, append at the end.
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
        return len(self._queue)

    @property
    def num_pinned(self) -> int:
        return self._num_blocks - 1 - len(self._queue)

    def free_queue(self) -> list[int]:
        """The free pages, next to be allocated first."""
        return list(self._queue)

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
        if k > len(self._queue):
            return None
        pages = []
        for _ in range(k):
            page = next(iter(self._queue))
            del self._queue[page]
            self._ref[page] = 1
            self._drop_name(page)  # eviction: the oldest free page loses its name
            pages.append(page)
        return pages

    def _release(self, pages: Sequence[int]) -> int:
        """Drop one reference per entry, last entry first; returns pages that became free."""
        freed = 0
        for page in reversed(pages):
            self._ref[page], freed_now = drop_reference(self._ref[page])
            if freed_now:
                self._queue[page] = None
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
        if self._ref[page] == 0:
            del self._queue[page]
        self._ref[page] += 1

    def __repr__(self) -> str:
        return f"BlockPool(num_blocks={self._num_blocks}, num_free={self.num_free})"
