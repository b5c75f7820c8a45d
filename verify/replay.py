"""``livetail replay TRACE``: re-run a trace on both implementations, step by step.

For every op it prints what each side returned, the charge against the pages taken, the
state of the pool and the request's tables (once when the sides agree, per side when they
do not), and every property's verdict.  A host-tier trace (geometry ``host_blocks``) runs
on ``HostWorld`` (``verify/machine/host.py``), data oracle included, and prints both pools
and the plans.
Exit status: 0 when every side agrees and every property holds on the whole trace, 1 when
a divergence or a violation is reproduced, 2 for a usage error (unreadable, non-UTF-8 or
invalid trace, a size outside the limits of ``verify/trace_limits.py``, unknown variant,
native module missing); every size is checked before anything runs.  An op the semantics
refuse in the state the trace reached (a reclaim past the tables' extent) makes the trace
invalid too: exit 2 when replay reaches it, whatever the sides did (a call that must raise
is a ``bad`` op).

A trace records the wrong spec variant it was found against (``"variant"``), but replay
runs the real spec unless ``--variant NAME`` is given: a trace of a fixed bug, or of a
variant, must replay green against the code as it is.  It prints a hint when they differ.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from . import variants
from .machine.host import HostWorld
from .machine.host_side import HostStepReport, describe_outcome
from .machine.lockstep import Lockstep
from .machine.side import Impl, NativeUnavailable, State, implementations
from .machine.step import SideStep, StepReport, describe_op
from .trace import TraceError, load_trace, trace_geometry
from .trace_limits import check_limits

PREFIX_OPS = frozenset({"cache", "claim"})

EXIT_OK = 0
EXIT_REPRODUCED = 1
EXIT_USAGE = 2


class InvalidTrace(Exception):
    """An op of the trace is not a valid call in the state the trace reached."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="livetail replay",
        description="Re-run a livetail trace on the spec and the native module, step by step.",
    )
    p.add_argument("trace", help="a trace file (JSON, see docs/traces.md)")
    p.add_argument(
        "--variant",
        choices=sorted([*variants.VARIANTS, *variants.HOST_VARIANTS]),
        help="replay against this deliberately wrong variant of the spec",
    )
    p.add_argument(
        "--impl",
        choices=("spec", "native", "both"),
        default="both",
        help="which implementations to run (default: both, compared step by step)",
    )
    p.add_argument(
        "--keep-going", action="store_true", help="run every op even after a failing step"
    )
    p.add_argument("--quiet", action="store_true", help="print only the verdict")
    return p


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of ``livetail replay``; returns the exit status."""
    w = out if out is not None else sys.stdout
    args = _parser().parse_args(list(argv) if argv is not None else None)
    try:
        trace = load_trace(args.trace)
        check_limits(trace)
    except TraceError as e:
        print(f"livetail replay: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.variant and args.impl == "native":
        print(
            "livetail replay: --variant changes the spec; use --impl spec or both", file=sys.stderr
        )
        return EXIT_USAGE
    try:
        impls = implementations(args.impl)
    except NativeUnavailable as e:
        print(f"livetail replay: {e}; use --impl spec", file=sys.stderr)
        return EXIT_USAGE
    if trace["geometry"].get("host_blocks") is not None:
        lacking = [i.label for i in impls if not hasattr(i.module, "HostPool")]
        if lacking:
            print(
                f"livetail replay: the trace runs the host tier but {', '.join(lacking)} "
                "has no host pool",
                file=sys.stderr,
            )
            return EXIT_USAGE
    prefix_ops = sorted({op["op"] for op in trace["ops"]} & PREFIX_OPS)
    lacking = [i.label for i in impls if not hasattr(i.module.Coordinator, "match_prefix")]
    if prefix_ops and lacking:
        print(
            f"livetail replay: the trace uses {', '.join(prefix_ops)} but {', '.join(lacking)} "
            "has no prefix caching",
            file=sys.stderr,
        )
        return EXIT_USAGE
    with _variant(args.variant):
        try:
            ok = replay(
                trace,
                impls,
                w,
                variant=args.variant,
                keep_going=args.keep_going,
                quiet=args.quiet,
                path=args.trace,
            )
        except InvalidTrace as e:
            print(f"livetail replay: invalid trace {args.trace}: {e}", file=sys.stderr)
            return EXIT_USAGE
    return EXIT_OK if ok else EXIT_REPRODUCED


@contextlib.contextmanager
def _variant(name: str | None) -> Iterator[None]:
    if name is None:
        yield
    else:
        with variants.applied(name):
            yield


def replay(
    trace: dict[str, Any],
    impls: Sequence[Impl],
    w: TextIO,
    *,
    variant: str | None = None,
    keep_going: bool = False,
    quiet: bool = False,
    path: str = "",
) -> bool:
    """Run and print a trace; True when every side agrees and every property holds."""
    geometry = trace_geometry(trace)
    impls = labelled(impls, variant)
    labels = [i.label for i in impls]

    def say(line: str = "") -> None:
        if not quiet:
            print(line, file=w)

    say(f"trace     {path} (format v{trace['version']}, origin {trace['origin']})")
    if trace["title"]:
        say(f"title     {trace['title']}")
    say(f"geometry  {geometry.describe()}")
    say(f"running   {' vs '.join(labels)}")
    recorded = trace.get("variant")
    if recorded and recorded != variant:
        say(
            f"note      recorded against the wrong variant {recorded!r}; this replays "
            f"{'the real spec' if not variant else repr(variant)} "
            f"(add --variant {recorded} to reproduce the recording)"
        )
    observed = trace.get("observed")
    if observed:
        say(f"recorded  step {observed.get('step')}: {', '.join(observed.get('properties', []))}")
    say()

    host = geometry.host_blocks is not None
    world: Lockstep | HostWorld = (
        HostWorld(geometry, impls, lines=True) if host else Lockstep(geometry, impls)
    )
    first_bad: StepReport | HostStepReport | None = None
    for i, op in enumerate(trace["ops"]):
        rep = world.run(op)
        if isinstance(rep, StepReport):
            why = invalid_op(op, rep.sides[0].before)
            if why:
                raise InvalidTrace(f"ops[{i}] {op['op']} is not a valid call: {why}")
        if not quiet:
            if isinstance(rep, HostStepReport):
                _print_host_step(rep, labels, w)
            else:
                _print_step(rep, labels, w)
        if not rep.ok and first_bad is None:
            first_bad = rep
            if not keep_going:
                remaining = len(trace["ops"]) - rep.index - 1
                if remaining:
                    say(f"stopped after the failing step ({remaining} op(s) not run; --keep-going)")
                break
    if first_bad is None:
        agree = f"{' and '.join(labels)} agree, " if len(labels) > 1 else ""
        print(
            f"result    OK: {len(trace['ops'])} step(s), {agree}every property holds on "
            f"{', '.join(labels)} (exit 0)",
            file=w,
        )
        return True
    print(
        f"result    REPRODUCED at step {first_bad.index} {describe_op(first_bad.op)}: "
        f"{', '.join(first_bad.failed_properties())} (exit 1)",
        file=w,
    )
    for f in first_bad.failures:
        print(f"          {f}", file=w)
    return False


def invalid_op(op: dict[str, Any], before: State) -> str:
    """Why the semantics refuse `op` in the state `before` (the same on every side when the
    step's ``agree`` holds), or ''.  Only calls the trace asks to succeed are judged: a
    reclaim past the extent is a ``bad`` op (``reclaim-past-extent``), never a ``reclaim``."""
    kind = op["op"]
    if kind not in ("reclaim", "group_reclaim"):
        return ""
    r, f = op["request"], op["frontier"]
    tables = before.tables[r]
    if kind == "group_reclaim":
        g = op["group"]
        extent = tables[g].extent
        where = f"request {r}'s group {g} table"
    else:
        if before.split(r):  # the one-request property judges this call
            return ""
        extent = tables[0].extent if tables else 0
        where = f"request {r}'s tables"
    if f > extent:
        return f"frontier {f} is past the extent {extent} of {where}"
    return ""


def labelled(impls: Sequence[Impl], variant: str | None) -> list[Impl]:
    """The spec side renamed ``spec[NAME]`` when a variant is patched in."""
    if variant is None:
        return list(impls)
    return [Impl(f"spec[{variant}]", i.module) if i.label == "spec" else i for i in impls]


def _print_step(rep: StepReport, labels: list[str], w: TextIO) -> None:
    _print_returned(rep.index, rep.op, [str(s.outcome) for s in rep.sides], labels, w)
    charge = _charge_line(rep.op, rep.sides[0])
    if charge:
        print(f"  charge      {charge}", file=w)
    r = rep.op.get("request", 0)
    _print_states([_state_lines(s, r) for s in rep.sides], labels, w)
    _print_verdicts(rep.verdicts(), rep.failures, w)


def _print_host_step(rep: HostStepReport, labels: list[str], w: TextIO) -> None:
    _print_returned(rep.index, rep.op, [describe_outcome(s.outcome) for s in rep.sides], labels, w)
    _print_states([s.lines for s in rep.sides], labels, w)
    _print_verdicts(rep.verdicts(), rep.failures, w)


def _print_returned(
    index: int, op: dict[str, Any], outs: list[str], labels: list[str], w: TextIO
) -> None:
    print(f"step {index}  {describe_op(op)}", file=w)
    if len(set(outs)) == 1:
        print(f"  returned    {outs[0]}", file=w)
    else:
        print("  returned    " + " | ".join(f"{lab}: {o}" for lab, o in zip(labels, outs)), file=w)


def _print_states(states: list[list[str]], labels: list[str], w: TextIO) -> None:
    """One block when every side's state agrees, else one per side."""
    if all(st == states[0] for st in states):
        tag = "(all)" if len(states) > 1 else ""
        for i, line in enumerate(states[0]):
            print(f"  {'state ' + tag if i == 0 else '':<11} {line}", file=w)
    else:
        for lab, lines in zip(labels, states):
            for i, line in enumerate(lines):
                print(f"  {lab if i == 0 else '':<11} {line}", file=w)


def _print_verdicts(
    verdicts: Sequence[tuple[str, bool]], failures: Sequence[str], w: TextIO
) -> None:
    print(
        "  properties  " + "  ".join(f"{p} {'ok' if ok else 'FAIL'}" for p, ok in verdicts), file=w
    )
    for f in failures:
        print(f"    ! {f}", file=w)
    print(file=w)


def _charge_line(op: dict[str, Any], s: SideStep) -> str:
    f = s.facts
    kind = op["op"]
    if kind == "admit":
        line = (
            f"sequential {f.get('sequential')} (slot by slot {f.get('oracle_sequential')}), "
            f"combined {f.get('combined')}, chunk need {f.get('chunk_need')}, "
            f"free {f.get('free_before')}"
        )
        if "chunk_take" in f:
            line += (
                f" | took chunk {f['chunk_take']} + decode {f['decode_take']} = "
                f"{f['chunk_take'] + f['decode_take']}, peak {f['peak']}"
            )
        else:
            line += " | deferred (charge above the free pages)"
        return line
    if kind in ("acquire", "decode", "group_acquire"):
        taken = s.before.pool.num_free - s.after.pool.num_free
        by_group = f.get("need_by_group")
        groups = f" (per group {by_group})" if by_group else ""
        free = s.before.pool.num_free
        return f"blocks_needed_for {f.get('need')}{groups}, free {free} | took {taken}"
    if kind == "claim" and "match_tokens" in f:
        between = f" | between: acquire {f['between_acquire']}" if "between_acquire" in f else ""
        return (
            f"match {f['match_tokens']} tokens, pages {f['match_pages']}, "
            f"blocks_consumed_by_claim {f['consumed']}{between}"
        )
    if kind in ("reclaim", "group_reclaim"):
        return f"blocks_reclaimable_at {f.get('predicted')} | released {s.outcome}"
    return ""


def _state_lines(s: SideStep, r: int) -> list[str]:
    lines = [s.after.pool.compact()]
    for g, t in enumerate(s.after.tables[r]):
        lines.append(f"r{r}g{g} {t.compact()}")
    return lines


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
