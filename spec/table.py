"""Block table (semantics section 3): one per request per group."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .host import LoadPlan
    from .pool import BlockPool
    from .runs import Run


class BlockTable:
    """Slots (slot s covers tokens [s*B, (s+1)*B)), each a page id, 0 = hole."""

    def __init__(self) -> None:
        self.slots: list[int] = []
        self.tail_available = 0
        self.reclaim_floor = 0
        # Set by the first successful acquire (or claim), cleared by free.
        self.pool: BlockPool | None = None
        self.block_size = 0
        # Slots below this were offered names by cache_full_blocks; never revisited.
        self.named_upto = 0
        # The runs that built the slots (spec/runs.py): what the slots must agree with.
        self.runs: list[Run] = []
        # A claim's pending load (section 10): freeing the table aborts it.
        self.load: LoadPlan | None = None
        # The identity of the coordinator whose acquire or claim bound it (None: unbound, or
        # bound by a manager called directly); cleared with pool. Other coordinators reject
        # the table.
        self._coordinator: object | None = None

    def __len__(self) -> int:
        return len(self.slots)

    @property
    def extent(self) -> int:
        """Tokens the table covers: len(slots) * B - tail_available."""
        return len(self.slots) * self.block_size - self.tail_available

    @property
    def num_real_pages(self) -> int:
        return sum(1 for p in self.slots if p != 0)

    @property
    def is_fresh(self) -> bool:
        """Empty and unbound: what a claim needs."""
        return not self.slots and self.pool is None

    @property
    def is_bound(self) -> bool:
        return self.pool is not None

    def page_ids(self) -> list[int]:
        """Page id per slot, holes as 0, no compaction."""
        return list(self.slots)

    def _reset(self) -> None:
        self.slots = []
        self.tail_available = 0
        self.reclaim_floor = 0
        self.pool = None
        self.block_size = 0
        self.named_upto = 0
        self.runs = []
        self.load = None
        self._coordinator = None

    def __repr__(self) -> str:
        return (
            f"BlockTable(slots={len(self.slots)}, real={self.num_real_pages}, "
            f"tail_available={self.tail_available}, reclaim_floor={self.reclaim_floor})"
        )
