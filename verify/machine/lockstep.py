"""The device machine composed: the lockstep core with its plug-ins, and ``run_trace``.

``Lockstep`` is ``LockstepCore`` (``verify/machine/core.py``) with the ops of section 9
(``plan``: ``verify/machine/plan.py``) and section 12 (``reset_names``, ``evict_names``,
``detach``, ``release_detached``: ``verify/machine/names.py``) and section 13.6 (``fork``,
``copy_tail``: ``verify/machine/forks.py``) plugged in.  ``run_trace``
runs a trace on it, or on ``HostWorld`` (``verify/machine/host.py``) when the trace's
geometry has ``host_blocks``.  Nothing in the machine below imports this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..trace import trace_geometry
from .core import LockstepCore
from .forks import FORKS
from .host import run_host_trace
from .names import NAMES
from .plan import PLANS
from .side import Impl
from .step import run_ops


class Lockstep(LockstepCore):
    """Every implementation advanced by the same ops, plans and names included."""

    extensions = (PLANS, NAMES, FORKS)

    def __init__(self, geometry: Any, impls: Sequence[Impl]) -> None:
        super().__init__(geometry, impls)
        # Fork ops run only when every side has section 13.6.
        self.forks = all(hasattr(side.coord, "fork") for side in self.sides)


def run_trace(
    trace: dict[str, Any], impls: Sequence[Impl], *, stop_at_failure: bool = True
) -> tuple[Any, list[Any]]:
    """Run a (validated) trace's ops in lockstep; stops after the first failing step.

    A host-tier trace (geometry ``host_blocks``) runs on ``HostWorld``, any other on
    ``Lockstep``; both worlds and reports answer ``failure``, ``to_trace``, ``ok``,
    ``index`` and ``failed_properties()`` alike.
    """
    geometry = trace_geometry(trace)
    if geometry.host_blocks is not None:
        return run_host_trace(trace, impls, stop_at_failure=stop_at_failure)
    world = Lockstep(geometry, impls)
    return world, run_ops(world, trace["ops"], stop_at_failure)
