"""Where a Hypothesis run of either machine leaves its failing trace: ``TraceSink``.

Shared by the device machine (``verify/machine/rules.py``) and the host-tier machine
(``verify/machine/host_rules.py``); it needs of a world only what ``Recorder`` names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Recorder(Protocol):
    """What a sink needs of a world: its first failure and its trace (Lockstep, HostWorld)."""

    @property
    def failure(self) -> Any: ...

    def to_trace(self, origin: str, variant: str | None = None) -> dict[str, Any]: ...

    @property
    def ops(self) -> list[Any]: ...


class TraceSink:
    """Collects the trace of the last failing run (Hypothesis runs the shrunk example last)."""

    def __init__(self, origin: str = "differential", variant: str | None = None) -> None:
        self.origin = origin
        self.variant = variant
        self.last: dict[str, Any] | None = None
        self.examples = 0
        self.steps = 0  # ops run over every example: what a campaign's size is counted in
        self.on_example: Callable[[int], None] | None = None

    def finished(self, world: Recorder | None) -> None:
        self.examples += 1
        if world is not None:
            self.steps += len(world.ops)
        if self.on_example is not None:
            self.on_example(self.examples)
        if world is not None and world.failure is not None:
            self.last = world.to_trace(self.origin, self.variant)
