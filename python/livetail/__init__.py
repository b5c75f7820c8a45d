"""livetail: paged KV-cache block manager with live-tail allocation for sliding-window groups.

The classes are native (``livetail._core``, C++); ``livetail.spec`` is the executable model
they are checked against. Prefix caching (``page_keys``, ``Coordinator.cache_full_blocks``,
``match_prefix``, ``blocks_consumed_by_claim``, ``claim``) shares computed prompt prefixes
between requests.
"""

from ._core import (
    BlockPool,
    BlockTable,
    Coordinator,
    FullAttentionManager,
    GroupSpec,
    Manager,
    PrefixMatch,
    SlidingWindowManager,
    StateManager,
    StepPlan,
    __version__,
    page_ids_batch,
    page_keys,
)

__all__ = [
    "BlockPool",
    "BlockTable",
    "Coordinator",
    "FullAttentionManager",
    "GroupSpec",
    "Manager",
    "PrefixMatch",
    "SlidingWindowManager",
    "StateManager",
    "StepPlan",
    "__version__",
    "page_ids_batch",
    "page_keys",
]
