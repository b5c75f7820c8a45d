"""One step of the differential machine: the queries asked after it, what it reports, and
what a plug-in adds to the lockstep core (``Extension``: ops, how to run one, how to judge it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy

from ..trace import Geometry, Op, make_trace
from .oracle import doc_keys
from .side import Outcome, Side, State, Verdict


@dataclass(frozen=True)
class Query:
    """One read-only question asked of every implementation after a step.

    name: ``needed`` (args n), ``sequential`` (first, extra) or ``reclaimable``
    (f, count_uncached as 0/1); group None asks the coordinator, else that group's manager.
    """

    name: str
    request: int
    group: int | None
    args: tuple[int, ...]
    # "": plain ints; "numpy": counts passed as numpy.int64 (decisions: __index__ objects
    # are counts); "limit": the largest count the int32 limit allows (must answer);
    # "past-limit": one more (must raise ValueError).
    style: str = ""

    @property
    def key(self) -> str:
        if self.name == "match":
            return f"match_prefix(doc {self.args[0]}, {self.args[1]} tokens)"
        where = f"r{self.request}" if self.group is None else f"r{self.request}g{self.group}"
        tag = f" [{self.style}]" if self.style else ""
        if self.name == "reclaimable":
            extra = "" if self.args[1] else ", count_uncached=False"
            return f"{where} reclaimable({self.args[0]}{extra}){tag}"
        return f"{where} {self.name}({', '.join(map(str, self.args))}){tag}"

    def ask(self, s: Side) -> Any:
        if self.name == "match":
            m = s.coord.match_prefix(doc_keys(self.args[0], self.args[1], s.geometry.base))
            pages = tuple(tuple(int(p) for p in g) for g in m.pages)
            return repr((int(m.num_tokens), pages, int(s.coord.blocks_consumed_by_claim(m))))
        ts = s.tables[self.request]
        args: tuple[Any, ...] = self.args
        if self.style == "numpy":
            args = tuple(numpy.int64(a) for a in self.args)
        if self.group is None:
            if self.name == "needed":
                return s.coord.blocks_needed_for(ts, *args)
            return s.coord.blocks_needed_for_sequential(ts, *args)
        m, t = s.managers[self.group], ts[self.group]
        if self.name == "needed":
            return m.blocks_needed_for(t, *args)
        if self.name == "sequential":
            return m.blocks_needed_for_sequential(t, *args)
        return m.blocks_reclaimable_at(t, args[0], bool(self.args[1]))


@dataclass
class SideStep:
    """One implementation's view of one step."""

    label: str
    outcome: Outcome
    before: State
    after: State
    facts: dict[str, Any] = field(default_factory=dict)
    queries: dict[str, Outcome] = field(default_factory=dict)
    # The questions this side was asked, derived from its own state after the step.
    plan: dict[str, Query] = field(default_factory=dict)
    verdicts: list[Verdict] = field(default_factory=list)


class _SideVerdicts(Protocol):
    label: str
    verdicts: list[Verdict]


class Verdicts:
    """What a step's report says: its sides' verdicts and whether the sides agree.

    Shared by the device machine's ``StepReport`` and the host tier's ``HostStepReport``.
    """

    agree: Verdict
    sides: Sequence[_SideVerdicts]

    @property
    def failures(self) -> list[str]:
        out = [] if self.agree.ok else [f"agree: {self.agree.detail}"]
        for s in self.sides:
            out.extend(f"{s.label}: {v.prop}: {v.detail}" for v in s.verdicts if not v.ok)
        return out

    @property
    def ok(self) -> bool:
        return not self.failures

    def failed_properties(self) -> list[str]:
        props = [] if self.agree.ok else ["agree"]
        for s in self.sides:
            props.extend(v.prop for v in s.verdicts if not v.ok and v.prop not in props)
        return props

    def verdicts(self) -> list[tuple[str, bool]]:
        """Each property with whether it held on every side ("agree" first, for two sides)."""
        props: dict[str, bool] = {}
        if len(self.sides) > 1:
            props["agree"] = self.agree.ok
        for s in self.sides:
            for v in s.verdicts:
                props[v.prop] = props.get(v.prop, True) and v.ok
        return list(props.items())


@dataclass
class StepReport(Verdicts):
    index: int
    op: Op
    sides: list[SideStep]
    agree: Verdict


def describe_op(op: Op) -> str:
    args = ", ".join(f"{k}={v}" for k, v in op.items() if k != "op")
    return f"{op['op']}({args})"


def run_ops(world: Any, ops: Sequence[Op], stop_at_failure: bool) -> list[Any]:
    """Run `ops` on a world (``Lockstep``, ``HostWorld``), after the first failing step
    only if not `stop_at_failure`; their reports."""
    reports = []
    for op in ops:
        rep = world.run(op)
        reports.append(rep)
        if not rep.ok and stop_at_failure:
            break
    return reports


def recorded_trace(
    geometry: Geometry,
    ops: Sequence[Op],
    failure: Any,
    origin: str,
    variant: str | None,
    title: str | None,
    *,
    tier: str = "",
    untitled: str = "recorded run",
    describe: Callable[[Any], str] = str,
) -> dict[str, Any]:
    """The trace of a world's ops (observed = `failure`, its first failing step, if any).

    `tier` prefixes a failure's title, `untitled` is the title of a run without failure;
    `describe` writes a side's outcome.
    """
    observed: dict[str, Any] | None = None
    if failure is not None:
        observed = {
            "step": failure.index,
            "properties": failure.failed_properties(),
            "failures": failure.failures,
            "outcomes": {s.label: describe(s.outcome) for s in failure.sides},
            "implementations": [s.label for s in failure.sides],
        }
        if title is None:
            props = ", ".join(failure.failed_properties())
            where = f"{tier}: " if tier else ""
            title = f"{where}{props} at step {failure.index}: {describe_op(failure.op)}"
    kept = ops if failure is None else ops[: failure.index + 1]
    return make_trace(
        [g.to_dict() for g in geometry.groups],
        geometry.num_blocks,
        geometry.num_requests,
        list(kept),
        title=title or untitled,
        origin=origin,
        variant=variant,
        observed=observed,
        host_blocks=geometry.host_blocks,
        alignment=geometry.alignment,
    )


class StepFailure(AssertionError):
    """A step diverged or broke a property; carries the report."""

    def __init__(self, report: StepReport) -> None:
        self.report = report
        lines = [f"step {report.index} {describe_op(report.op)} failed:"]
        lines.extend(f"  {f}" for f in report.failures)
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class Extension:
    """Ops a plug-in adds to the lockstep core (``verify/machine/core.py``).

    ``apply(world, side, op, facts)`` runs one op on one side and returns its ``Outcome``
    (``facts``: what else it observed, compared across sides); ``check(world, side, op,
    step)`` judges that side's step.  ``world`` is the ``LockstepCore`` running the op.
    The core runs and judges its own ops first; an op kind no extension lists is an
    ``UnknownOp``.  ``verify/machine/lockstep.py`` composes the core with its plug-ins.
    """

    ops: tuple[str, ...]
    apply: Callable[[Any, Side, Op, dict[str, Any]], Outcome]
    check: Callable[[Any, Side, Op, SideStep], list[Verdict]]
