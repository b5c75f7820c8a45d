"""livetail as vLLM 0.33's KV-cache manager: ``KVCacheManager`` and ``Scheduler``.

``KVCacheManager`` has the constructor of ``vllm.v1.core.kv_cache_manager.KVCacheManager``
and every method and attribute vLLM's scheduler uses; page ids are livetail's (page 0 is
vLLM's null block too) and the blocks it hands out are vLLM's own ``KVCacheBlock`` objects
in vLLM's ``KVCacheBlocks``. ``Scheduler`` / ``AsyncScheduler`` are vLLM's schedulers
built on it, for ``scheduler_cls``.

Groups, by one table from vLLM's spec class (``_groups.SPEC_KINDS``): full attention and
MLA -> livetail ``full``; sliding window (MLA too) -> ``sliding`` with live tail off unless
the group is listed in ``live_tail_groups`` or ``LIVETAIL_LIVE_TAIL_GROUPS`` (only for
kernels that read the chunk from activations: README, "Under vLLM's scheduler"); Mamba
without a prefix-cache mode -> ``state``. Speculative decoding (lookahead slots, EAGLE's
block drop, prefill lookahead) as vLLM's manager does it. Every other feature raises
``NotImplementedError`` naming it.

This package is the only part of livetail that imports vLLM. Its modules: ``_groups``
(vLLM's groups as livetail group specs, block hashes as keys, the refusals), ``_manager``
(``KVCacheManager``), ``_views`` (the block pool, coordinator and per-group managers vLLM
reaches through it), ``_events`` (vLLM's KV events and prefix-cache stats), ``_scheduler``
(the schedulers and ``install``).
"""

# The key constants and the two records the pytest plugin (livetail.vllm_pytest) reads and
# clears are module attributes too (not in __all__).
from ._groups import KEY_BYTES as KEY_BYTES
from ._groups import KEY_DERIVATION_PREFIX as KEY_DERIVATION_PREFIX
from ._groups import built_layouts as built_layouts
from ._groups import group_specs, key_of, layout_of, unsupported
from ._groups import unsupported_hits as unsupported_hits
from ._manager import KVCacheManager
from ._scheduler import AsyncScheduler, Scheduler, install

__all__ = [
    "AsyncScheduler",
    "KVCacheManager",
    "Scheduler",
    "group_specs",
    "install",
    "layout_of",
    "key_of",
    "unsupported",
]
