"""vLLM's schedulers on livetail's manager, and ``install`` for the pytest plugin."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import vllm.v1.core.sched.scheduler as _sched_module
from vllm.v1.core.sched.async_scheduler import AsyncScheduler as _VllmAsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler as _VllmScheduler
from vllm.v1.kv_cache_interface import KVCacheConfig

from ._groups import built_layouts, layout_of
from ._manager import KVCacheManager


def install(swap: bool = True) -> None:
    """Make vLLM's scheduler module build livetail's manager (what the pytest plugin does).

    ``swap=False`` keeps vLLM's own manager and only records each one's layout in
    ``built_layouts`` (the baseline run of scripts/vllm_env.sh).
    """
    if swap:
        _sched_module.KVCacheManager = KVCacheManager  # type: ignore[misc]
        return
    base = _sched_module.KVCacheManager

    class _Recording(base):  # type: ignore[misc, valid-type]
        def __init__(self, kv_cache_config: KVCacheConfig, *args: Any, **kwargs: Any) -> None:
            built_layouts.append(layout_of(kv_cache_config))
            super().__init__(kv_cache_config, *args, **kwargs)

    _sched_module.KVCacheManager = _Recording  # type: ignore[misc]


_swap_lock = threading.Lock()


@contextlib.contextmanager
def _livetail_manager() -> Iterator[None]:
    """vLLM's scheduler builds ``KVCacheManager`` by its module-level name: swap it."""
    with _swap_lock:
        saved = _sched_module.KVCacheManager
        _sched_module.KVCacheManager = KVCacheManager  # type: ignore[misc]
        try:
            yield
        finally:
            _sched_module.KVCacheManager = saved  # type: ignore[misc]


class Scheduler(_VllmScheduler):
    """vLLM's scheduler on livetail's manager (``scheduler_cls``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        with _livetail_manager():
            super().__init__(*args, **kwargs)


class AsyncScheduler(_VllmAsyncScheduler):
    """vLLM's async scheduler on livetail's manager (``scheduler_cls``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        with _livetail_manager():
            super().__init__(*args, **kwargs)
