"""livetail: paged KV-cache block manager with live-tail allocation for sliding-window groups.

The classes are native (``livetail._core``, C++); ``livetail.spec`` is the executable model
they are checked against. Prefix caching (``page_keys``, ``Coordinator.cache_full_blocks``,
``match_prefix``, ``blocks_consumed_by_claim``, ``claim``) shares computed prompt prefixes
between requests.
"""

try:
    from ._core import (
        BlockPool,
        BlockTable,
        ChunkedLocalAttentionManager,
        Coordinator,
        DetachedTables,
        FullAttentionManager,
        GroupSpec,
        HostPool,
        LoadPlan,
        Manager,
        OffloadPlan,
        PrefixMatch,
        SlidingWindowManager,
        StateManager,
        StepPlan,
        __version__,
        page_ids_batch,
        page_keys,
    )
except ImportError as _native_error:  # a broken or foreign-platform install
    # The pure-Python parts (livetail.spec, the livetail command) still import, so the command
    # can report this and exit 2; any use of a native name raises with the cause.
    _NATIVE_ERROR = _native_error

    def __getattr__(name: str) -> object:
        if name in __all__:
            raise ImportError(
                f"livetail.{name} needs the native module livetail._core, which cannot be "
                f"imported: {_NATIVE_ERROR}"
            ) from _NATIVE_ERROR
        raise AttributeError(f"module 'livetail' has no attribute {name!r}")


__all__ = [
    "BlockPool",
    "BlockTable",
    "ChunkedLocalAttentionManager",
    "Coordinator",
    "DetachedTables",
    "FullAttentionManager",
    "GroupSpec",
    "HostPool",
    "LoadPlan",
    "Manager",
    "OffloadPlan",
    "PrefixMatch",
    "SlidingWindowManager",
    "StateManager",
    "StepPlan",
    "__version__",
    "page_ids_batch",
    "page_keys",
]
