"""Run the differential machines for a budget of examples and keep the failing trace.

``run_campaign`` is what ``livetail verify --examples N`` calls (spec against native, the
device machine then the host-tier machine, each its targeted scenarios of
``verify/scenarios.py`` first); ``run_differential`` is the general form the tests use
(either machine, any implementations, a wrong spec variant, a fixed seed) and
``run_scenarios`` runs the scenarios alone.
Hypothesis stops at the first failure, shrinks it, and replays the minimal example last;
that last run is the trace written.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test

from . import variants
from .machine.host_rules import host_machine
from .machine.host_side import HostStepFailure
from .machine.lockstep import run_trace
from .machine.rules import differential_machine
from .machine.side import Impl, implementations
from .machine.sink import TraceSink
from .machine.step import StepFailure, describe_op
from .scenarios import scenarios
from .trace import DEFAULT_TRACES_DIR, TraceError, parse_trace, write_trace

STEPS_PER_EXAMPLE = 50
"""Operations per example in a campaign (the CI test sets its own budget)."""


@dataclass
class DifferentialResult:
    examples: int
    seconds: float
    failure: str | None = None
    trace: dict[str, Any] | None = None
    trace_path: Path | None = None
    steps: int = 0  # ops run over every example

    @property
    def failed(self) -> bool:
        return self.failure is not None


@contextlib.contextmanager
def _maybe_variant(name: str | None) -> Iterator[None]:
    if name is None:
        yield
    else:
        with variants.applied(name):
            yield


def _kept_trace(
    found: dict[str, Any], impls: Sequence[Impl], origin: str, variant: str | None, minimize: bool
) -> dict[str, Any]:
    """The trace a failure leaves: `found` minimized (with `minimize`), replayed once more so
    that its observed part is the minimal run's (`found` if that no longer fails)."""
    small = minimize_trace(found, impls) if minimize else found
    world, _ = run_trace(small, impls)
    kept: dict[str, Any] = world.to_trace(origin, variant) if world.failure else found
    return kept


def run_differential(
    impls: Sequence[Impl],
    *,
    examples: int,
    steps: int = STEPS_PER_EXAMPLE,
    variant: str | None = None,
    seed: int | None = None,
    traces_dir: Path | str | None = DEFAULT_TRACES_DIR,
    progress: Callable[[int, int], None] | None = None,
    origin: str = "differential",
    parent: settings | None = None,
    minimize: bool = True,
    tier: str = "device",
) -> DifferentialResult:
    """Drive `impls` in lockstep for up to `examples` examples of up to `steps` ops.

    `tier` picks the machine: ``"device"`` (``differential_machine``) or ``"host"``
    (``machine.host_rules.host_machine``, the host tier with its data oracle).  `variant` patches
    the spec with a wrong variant for the whole run.  `seed` fixes Hypothesis' randomness
    (None: derandomized when `parent` says so, else random).  A failure (after
    Hypothesis' shrinking and, with `minimize`, ``minimize_trace``) is written to
    `traces_dir` (None: not written).  Errors that are not a failing step (a bug in the
    machine itself) propagate.
    """
    impls = [
        Impl(f"spec[{variant}]", i.module) if variant and i.label == "spec" else i for i in impls
    ]
    sink = TraceSink(origin=origin, variant=variant)
    if progress is not None:
        sink.on_example = lambda n: progress(min(n, examples), examples)
    base = parent if parent is not None else settings(derandomize=False)
    run_settings = settings(
        base,
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        report_multiple_bugs=False,
        print_blob=False,
        verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
    )
    if tier == "device":
        machine = differential_machine(impls, sink)
    elif tier == "host":
        machine = host_machine(impls, sink)
    else:
        raise ValueError(f"tier must be 'device' or 'host', not {tier!r}")
    if seed is not None:
        machine = hypothesis_seed(seed)(machine)
    start = time.monotonic()
    failure: str | None = None
    trace: dict[str, Any] | None = None
    with _maybe_variant(variant):
        try:
            run_state_machine_as_test(machine, settings=run_settings)  # type: ignore[no-untyped-call,unused-ignore]
        except (StepFailure, HostStepFailure, Flaky) as e:
            failure = str(e)
        if failure is not None and sink.last is not None:
            trace = _kept_trace(sink.last, impls, origin, variant, minimize)
    result = DifferentialResult(
        min(sink.examples, examples), time.monotonic() - start, failure, trace, steps=sink.steps
    )
    if trace is not None and traces_dir is not None:
        result.trace_path = write_trace(trace, traces_dir)
    return result


def run_scenarios(
    impls: Sequence[Impl],
    *,
    tier: str = "device",
    variant: str | None = None,
    traces_dir: Path | str | None = DEFAULT_TRACES_DIR,
    minimize: bool = True,
    origin: str = "scenarios",
    progress: Callable[[int, int], None] | None = None,
) -> DifferentialResult:
    """Run the targeted scenarios of `tier` (``verify/scenarios.py``) on `impls` in lockstep.

    Each scenario builds one situation the random examples reach only now and then; they
    run in order and the first failing one stops the run (``examples``: the scenarios run,
    the failing one last).  A failure is minimized and written like a random example's.
    `progress` sees (scenarios done, scenarios of the tier) after each one.
    """
    if tier not in ("device", "host"):
        raise ValueError(f"tier must be 'device' or 'host', not {tier!r}")
    impls = [
        Impl(f"spec[{variant}]", i.module) if variant and i.label == "spec" else i for i in impls
    ]
    start = time.monotonic()
    done = steps = 0
    failure: str | None = None
    trace: dict[str, Any] | None = None
    chosen = scenarios(tier)
    with _maybe_variant(variant):
        for scenario in chosen:
            world = scenario.run(impls)
            done += 1
            steps += len(world.ops)
            if progress is not None:
                progress(done, len(chosen))
            if world.failure is not None:
                rep = world.failure
                head = f"scenario {scenario.name}, step {rep.index} {describe_op(rep.op)} failed:"
                failure = "\n".join([head, *(f"  {f}" for f in rep.failures)])
                found = world.to_trace(origin, variant)
                trace = _kept_trace(found, impls, origin, variant, minimize)
                break
    result = DifferentialResult(done, time.monotonic() - start, failure, trace, steps=steps)
    if trace is not None and traces_dir is not None:
        result.trace_path = write_trace(trace, traces_dir)
    return result


def run_campaign(
    examples: int,
    traces_dir: Path,
    seed: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    stage: Callable[[str, str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Spec against native: the device machine's targeted scenarios then `examples` random
    examples, then the host-tier machine's scenarios and as many random examples; failing
    traces go to `traces_dir`.  A machine whose scenarios fail runs no random example.

    Returns {"examples", "host_examples" (random examples run), "scenarios",
    "host_scenarios" (scenarios run), "steps", "host_steps" (ops run, scenarios and every
    example of each machine), "failures" (machines that failed), "traces", "seconds",
    "implementations", "seed", "failure"}.  `progress` sees (done, 2 * examples), the host
    machine's examples counted after the device machine's.  `stage` sees (machine
    ``"device"`` or ``"host"``, ``"scenarios"`` or ``"examples"``, done, total) as each
    scenario or random example of a machine ends, for a log of the run's progress.  Raises
    ``machine.side.NativeUnavailable`` when the native module cannot be imported.
    """
    impls = implementations("both")

    def ticker(offset: int) -> Callable[[int, int], None] | None:
        if progress is None:
            return None
        report = progress
        return lambda done, total: report(offset + done, 2 * examples)

    def staged(tier: str, kind: str) -> Callable[[int, int], None] | None:
        if stage is None:
            return None
        report = stage
        return lambda done, total: report(tier, kind, done, total)

    def both(*fs: Callable[[int, int], None] | None) -> Callable[[int, int], None] | None:
        live = [f for f in fs if f is not None]
        if not live:
            return None

        def each(done: int, total: int) -> None:
            for f in live:
                f(done, total)

        return each

    results = []
    for offset, tier in ((0, "device"), (examples, "host")):
        targeted = run_scenarios(
            impls, tier=tier, traces_dir=traces_dir, progress=staged(tier, "scenarios")
        )
        if targeted.failed:
            results.append((targeted, DifferentialResult(0, 0.0)))
            continue
        randomly = run_differential(
            impls,
            examples=examples,
            seed=seed,
            traces_dir=traces_dir,
            progress=both(ticker(offset), staged(tier, "examples")),
            tier=tier,
        )
        results.append((targeted, randomly))
    (device_s, device), (host_s, host) = results
    failures = [r.failure for r in (device_s, device) if r.failure is not None]
    failures += [f"host tier: {r.failure}" for r in (host_s, host) if r.failure is not None]
    runs = [r for pair in results for r in pair]
    return {
        "examples": device.examples,
        "host_examples": host.examples,
        "scenarios": device_s.examples,
        "host_scenarios": host_s.examples,
        "steps": device_s.steps + device.steps,
        "host_steps": host_s.steps + host.steps,
        "failures": len(failures),
        "traces": [str(r.trace_path) for r in runs if r.trace_path is not None],
        "seconds": round(sum(r.seconds for r in runs), 3),
        "implementations": [i.label for i in impls],
        "seed": seed,
        "failure": "\n".join(failures) or None,
    }


# --- trace-level minimisation -----------------------------------------------------------

NUMERIC_FIELDS = ("tokens", "chunk", "reserve", "frontier", "between_tokens", "doc", "plan")
REQUEST_FIELDS = ("request", "between_request")


def _failing_props(trace: dict[str, Any], impls: Sequence[Impl]) -> tuple[list[str], int]:
    """(failed properties of the first failing step, its index); ([], -1) if all pass."""
    try:
        world, _ = run_trace(trace, impls)
    except Exception:  # a candidate the machine cannot even set up is not a reproduction
        return [], -1
    if world.failure is None:
        return [], -1
    return world.failure.failed_properties(), world.failure.index


MAX_REPLAYS = 20_000
"""Candidate replays a minimization may make: a count, not seconds, so that the trace it
returns is the same on an idle and on a loaded machine."""


def minimize_trace(
    trace: dict[str, Any], impls: Sequence[Impl], *, max_replays: int = MAX_REPLAYS
) -> dict[str, Any]:
    """A smaller trace that fails the same way (same first failed property).

    Hypothesis' stateful shrinker leaves steps it cannot delete (rule choices shift when a
    step goes); replaying a trace takes milliseconds, so this greedy pass finishes the job:
    drop ops, drop groups and requests, shrink the pool, the windows and page sizes, then
    every token count and frontier.  Run it under the same variant as the failure.
    """
    props, index = _failing_props(trace, impls)
    if index < 0:
        return trace
    target = props[0]
    replays = 0
    best = _with(trace, ops=trace["ops"][: index + 1])

    def fails(candidate: dict[str, Any]) -> dict[str, Any] | None:
        try:
            c = parse_trace(candidate)
        except TraceError:
            return None
        p, i = _failing_props(c, impls)
        return _with(c, ops=c["ops"][: i + 1]) if target in p else None

    changed = True
    while changed and replays < max_replays:
        changed = False
        for candidate in _candidates(best):
            if replays >= max_replays:
                break
            replays += 1
            smaller = fails(candidate)
            if smaller is not None and _size(smaller) < _size(best):
                best, changed = smaller, True
                break
    return best


def _size(t: dict[str, Any]) -> tuple[int, ...]:
    g = t["geometry"]
    numbers = sum(op.get(f, 0) for op in t["ops"] for f in NUMERIC_FIELDS)
    shape = sum(d["block_size"] + d.get("sliding_window", 0) for d in g["groups"])
    pools = g["num_blocks"] + g.get("host_blocks", 0)
    shape += g.get("alignment", 0)
    fields = sum(len(op) for op in t["ops"])  # last: a plain op over one that wraps it
    return (len(t["ops"]), len(g["groups"]), g["num_requests"], pools, shape, numbers, fields)


def _with(t: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(t))
    geometry = changes.pop("geometry", None)
    if geometry:
        out["geometry"].update(geometry)
    out.update(changes)
    return out


def _candidates(t: dict[str, Any]) -> Iterator[dict[str, Any]]:
    ops: list[dict[str, Any]] = t["ops"]
    g = t["geometry"]
    groups: list[dict[str, Any]] = g["groups"]
    # Drop a run of ops, halves first, then quarters, ... then single ops (the last op is
    # the failing one: keep it).
    body = len(ops) - 1
    size = max(body // 2, 1)
    while size >= 1 and body > 0:
        for start in range(body - size, -1, -size):
            yield _with(t, ops=ops[:start] + ops[start + size :])
        size //= 2
    # Drop a group, renumbering group fields above it.
    if len(groups) > 1:
        for k in range(len(groups)):
            kept = [
                {**op, "group": op["group"] - (op["group"] > k)} if "group" in op else op
                for op in ops
                if not (op["op"] != "bad" and op.get("group") == k)
            ]
            kept = [{**op, "group": 0} if op.get("group") == -1 else op for op in kept]
            yield _with(t, ops=kept, geometry={"groups": groups[:k] + groups[k + 1 :]})
    # Drop requests nobody uses, then merge every request into request 0.
    used = sorted({op[f] for op in ops for f in REQUEST_FIELDS if f in op})
    if used != list(range(len(used))) or g["num_requests"] > len(used):
        remap = {r: i for i, r in enumerate(used)}
        yield _with(
            t,
            ops=[{**op, **{f: remap[op[f]] for f in REQUEST_FIELDS if f in op}} for op in ops],
            geometry={"num_requests": max(len(used), 1)},
        )
    if g["num_requests"] > 1:
        yield _with(
            t,
            ops=[{**op, **{f: 0 for f in REQUEST_FIELDS if f in op}} for op in ops],
            geometry={"num_requests": 1},
        )
    # Drop the acquire in the middle of a claim.
    for i, op in enumerate(ops):
        if "between_request" in op:
            plain = {k: v for k, v in op.items() if k not in ("between_request", "between_tokens")}
            yield _with(t, ops=ops[:i] + [plain] + ops[i + 1 :])
    # A plan whose failure is the acquire between its plan and apply: that acquire alone.
    for i, op in enumerate(ops):
        if op["op"] == "plan" and "between_request" in op:
            alone = {
                "op": "acquire",
                "request": op["between_request"],
                "tokens": op["between_tokens"],
            }
            yield _with(t, ops=ops[:i] + [alone] + ops[i + 1 :])
    # A smaller pool (and host pool).
    for nb in range(1, g["num_blocks"]):
        yield _with(t, geometry={"num_blocks": nb})
    for hb in range(1, g.get("host_blocks") or 1):
        yield _with(t, geometry={"host_blocks": hb})
    # The lcm as the alignment (an alignment no longer a multiple of the lcm fails to parse).
    if "alignment" in g:
        plain = json.loads(json.dumps(t))
        del plain["geometry"]["alignment"]
        yield plain
    # Simpler groups: live tail off, smaller windows, smaller page sizes.
    for k, d in enumerate(groups):
        options: list[dict[str, Any]] = []
        if d["kind"] == "sliding":
            options += [{**d, "sliding_window": w} for w in range(1, d["sliding_window"])]
        options += [{**d, "block_size": b} for b in range(1, d["block_size"])]
        for o in options:
            yield _with(t, geometry={"groups": groups[:k] + [o] + groups[k + 1 :]})
    # Smaller token counts and frontiers.
    for i, op in enumerate(ops):
        for f in NUMERIC_FIELDS:
            v = op.get(f, 0)
            for smaller in sorted({0, 1, 2, v // 2, v - 1}):
                if 0 <= smaller < v:
                    yield _with(t, ops=ops[:i] + [{**op, f: smaller}] + ops[i + 1 :])
