"""livetail: paged KV-cache block manager with live-tail allocation for sliding-window groups.

The classes are native (``livetail._core``, C++); ``livetail.spec`` is the executable model
they are checked against.
"""

from ._core import (
    BlockPool,
    BlockTable,
    Coordinator,
    FullAttentionManager,
    GroupSpec,
    Manager,
    SlidingWindowManager,
    StateManager,
    __version__,
    page_ids_batch,
)

__all__ = [
    "BlockPool",
    "BlockTable",
    "Coordinator",
    "FullAttentionManager",
    "GroupSpec",
    "Manager",
    "SlidingWindowManager",
    "StateManager",
    "__version__",
    "page_ids_batch",
]
