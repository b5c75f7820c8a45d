"""Block pool (semantics section 2): page 0 is the null page, free pages in one FIFO queue."""

from __future__ import annotations

from collections.abc import Sequence

from ._args import bounded, count


class BlockPool:
    """Pages 0 .. num_blocks-1; page 0 is never allocated, freed, counted or cached."""

    def __init__(self, num_blocks: int) -> None:
        self._num_blocks = bounded("num_blocks", num_blocks, 1)
        # An insertion-ordered dict is the FIFO queue: pop the first key, append at the end.
        self._queue: dict[int, None] = dict.fromkeys(range(1, self._num_blocks))
        self._ref = [0] * self._num_blocks

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

    def _allocate(self, k: int) -> list[int] | None:
        """The first k free pages, each with count 1; None (and nothing taken) if short."""
        if k > len(self._queue):
            return None
        pages = []
        for _ in range(k):
            page = next(iter(self._queue))
            del self._queue[page]
            self._ref[page] = 1
            pages.append(page)
        return pages

    def _release(self, pages: Sequence[int]) -> int:
        """Drop one reference per entry, last entry first; returns pages that became free."""
        freed = 0
        for page in reversed(pages):
            self._ref[page] -= 1
            if self._ref[page] == 0:
                self._queue[page] = None
                freed += 1
        return freed

    def _is_cached(self, page: int) -> bool:
        """Whether the page carries a prefix-cache name (none does until section 8 exists)."""
        return False

    def __repr__(self) -> str:
        return f"BlockPool(num_blocks={self._num_blocks}, num_free={self.num_free})"
