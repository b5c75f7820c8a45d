"""One side of the host-tier machine and what one step of it reports.

``HostSide`` is one implementation's device pool, host pool, coordinator and tables with
the offload and load plans in flight; ``HostSideStep`` and ``HostStepReport`` are what
``HostWorld`` (``verify/machine/host.py``) records of a step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..trace import Geometry, Op
from .side import Impl, Verdict, read_pool
from .step import Verdicts, describe_op

Content = tuple[Any, ...]


def _ints(a: Any) -> list[int]:
    if hasattr(a, "tolist"):  # a numpy array: one C-level conversion
        return [int(x) for x in a.tolist()]
    return [int(x) for x in a]


def _attempt(fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
    try:
        return fn(*args), None
    except Exception as e:  # an observation to compare across sides
        return None, type(e).__name__


STATE_PARTS = (
    "device queue",
    "device ref counts",
    "device named",
    "host queue",
    "host ref counts",
    "host named",
    "tables",
    "offload plans",
)


@dataclass
class HostSide:
    """One implementation's pools, coordinators, tables and pending plans."""

    label: str
    mod: Any
    pool: Any
    host: Any
    coord: Any
    bare: Any  # a coordinator without host pool
    other: Any  # another coordinator with a host pool
    tables: list[list[Any]]
    offloads: list[Any]
    loads: list[Any]  # per request: its pending LoadPlan or None
    content: dict[int, Content]
    hcontent: dict[int, Content]

    @classmethod
    def build(cls, impl: Impl, geometry: Geometry) -> HostSide:
        m = impl.module
        specs = [
            m.GroupSpec(
                g.kind, g.block_size, g.sliding_window, g.live_tail_alloc,
                attention_chunk_size=g.attention_chunk_size, checkpoints=g.checkpoints,
            )
            for g in geometry.groups
        ]
        device, host = geometry.num_blocks, geometry.host_blocks or 1
        pool = m.BlockPool(device, events=True)
        hp = m.HostPool(host, events=True)
        return cls(
            impl.label,
            m,
            pool,
            hp,
            m.Coordinator(specs, pool, hp, alignment=geometry.alignment),
            m.Coordinator(specs, m.BlockPool(min(device, 64)), alignment=geometry.alignment),
            m.Coordinator(
                specs,
                m.BlockPool(min(device, 64)),
                m.HostPool(min(host, 64)),
                alignment=geometry.alignment,
            ),
            [[m.BlockTable() for _ in specs] for _ in range(geometry.num_requests)],
            [],
            [None] * geometry.num_requests,
            {},
            {},
        )

    @property
    def is_spec(self) -> bool:
        return bool(self.mod.__name__.endswith(".spec"))

    def state(self) -> tuple[Any, ...]:
        p, h = self.pool, self.host
        return (
            *read_pool(p),
            int(p.num_cached),
            *read_pool(h),
            int(h.num_cached),
            [
                [(_ints(t.page_ids()), int(t.tail_available), int(t.reclaim_floor)) for t in ts]
                for ts in self.tables
            ],
            [str(o.state) for o in self.offloads],
        )

    def summary(self, r: int) -> list[str]:
        """Replay's state lines: both pools, request r's tables, the pending plans."""

        def queue(q: Sequence[int]) -> str:
            return " ".join(map(str, q[:12])) + (" ..." if len(q) > 12 else "")

        p, h = self.pool, self.host
        lines = [
            f"device free={int(p.num_free)} named={int(p.num_cached)} "
            f"queue=[{queue(read_pool(p)[0])}]",
            f"host   free={int(h.num_free)} named={int(h.num_cached)} "
            f"queue=[{queue(read_pool(h)[0])}]",
        ]
        for g, t in enumerate(self.tables[r]):
            ids = " ".join(str(x) if x else "." for x in _ints(t.page_ids()))
            lines.append(
                f"r{r}g{g} [{ids}] tail={int(t.tail_available)} floor={int(t.reclaim_floor)}"
            )
        offloads = ", ".join(str(o.state) for o in self.offloads) or "none"
        loads = ", ".join(f"r{i}" for i, x in enumerate(self.loads) if x is not None) or "none"
        lines.append(f"plans  offloads [{offloads}] | pending loads {loads}")
        return lines


def plan_arrays(plan: Any) -> Any:
    if plan is None:
        return None
    return (
        _ints(plan.groups),
        _ints(plan.slots),
        _ints(plan.device_pages),
        _ints(plan.host_pages),
        str(plan.state),
    )


# --- one step -----------------------------------------------------------------------------


@dataclass
class HostSideStep:
    """One implementation's view of one host op."""

    label: str
    outcome: Any
    verdicts: list[Verdict] = field(default_factory=list)
    observed: tuple[Any, ...] = ()  # state, events, counters after the op
    lines: list[str] = field(default_factory=list)  # replay's state lines

    def require(self, prop: str, ok: bool, detail: str = "") -> None:
        self.verdicts.append(Verdict(prop, ok, "" if ok else detail))


@dataclass
class HostStepReport(Verdicts):
    index: int
    op: Op
    sides: list[HostSideStep]
    agree: Verdict


def _show(c: Content | None) -> str:
    """Page content for a message: a name's key as its first 8 hex digits."""
    if c is None:
        return "nothing"
    return "(" + ", ".join(x.hex()[:8] if isinstance(x, bytes) else repr(x) for x in c) + ")"


def _short(v: Any, limit: int = 200) -> str:
    text = str(v)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_outcome(outcome: Any) -> str:
    if isinstance(outcome, dict):
        return ", ".join(f"{k} {v}" for k, v in outcome.items())
    return str(outcome)


class HostStepFailure(AssertionError):
    """A host op diverged or broke a property; carries the report."""

    def __init__(self, report: HostStepReport) -> None:
        self.report = report
        lines = [f"step {report.index} {describe_op(report.op)} failed:"]
        lines.extend(f"  {f}" for f in report.failures)
        super().__init__("\n".join(lines))
