"""livetail.spec: the executable model of livetail's semantics.

Pure Python, no dependencies.  The classes and method names are those of the native
module, so one program can drive either and compare them step by step.
"""

from . import geometry
from .batch import page_ids_batch
from .coordinator import Coordinator, GroupSpec
from .detach import DetachedTables
from .host import HostPool, LoadPlan, OffloadPlan
from .managers import (
    ChunkedLocalAttentionManager,
    FullAttentionManager,
    SlidingWindowManager,
    StateManager,
)
from .plan import StepPlan
from .pool import BlockPool
from .prefix import PrefixMatch, page_keys
from .table import BlockTable

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
    "OffloadPlan",
    "PrefixMatch",
    "SlidingWindowManager",
    "StateManager",
    "StepPlan",
    "geometry",
    "page_ids_batch",
    "page_keys",
]
