"""The ``livetail`` command: ``livetail verify ...`` and ``livetail replay ...``.

``livetail verify`` runs every theorem (each in a fresh process, two at a time, its proofs
budgeted in Z3 resource units, a wall-clock kill only as a hang guard), the
spec-against-native differential campaign (device and host-tier machines), and optionally
the kill table of the wrong spec variants; prints one table; writes a JSON report and the
traces of every witness and counterexample; exits non-zero on any failure.

Every subcommand needs the ``verify`` extra (z3-solver, hypothesis, rich); without it, and
for an unknown subcommand, the command says what is missing and exits 2, as it does for
every usage error. ``livetail --version`` needs nothing.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import runner
from .printing import LOG_WIDTH, Log, is_kill, print_tables

if TYPE_CHECKING:
    from rich.progress import Progress

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

DEFAULT_EXAMPLES = 200
QUICK_EXAMPLES = 10
DEFAULT_REPORT = Path(".livetail") / "report.json"
DEFAULT_TRACES = Path(".livetail") / "traces"
DIFFERENTIAL = "differential"


class UsageError(Exception):
    pass


def _verify_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="livetail verify",
        description="Prove livetail's theorems with Z3, run the spec-against-native "
        "differential campaign, and write a report.",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"short run for CI: the campaign's targeted scenarios and {QUICK_EXAMPLES} random "
        "examples per machine, no bit-vector search, small-domain search only in the theorems "
        "that claim a wrong variant and in [-1, 1] only, smaller bounds in four bounded "
        "theorems",
    )
    p.add_argument(
        "--examples",
        type=int,
        metavar="N",
        help=f"differential campaign: random examples per machine after the targeted "
        f"scenarios (default {DEFAULT_EXAMPLES}; 0 skips the campaign)",
    )
    p.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        default=[],
        help=f"run only these theorems (repeat or comma-separate; '{DIFFERENTIAL}' "
        "names the campaign); see 'livetail theorems'",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=runner.DEFAULT_TIMEOUT,
        metavar="S",
        help="wall-clock guard per theorem, in seconds (default "
        f"{runner.DEFAULT_TIMEOUT:.0f}): only ends a hung process, reported as an 'error' of "
        "the environment; proofs are budgeted in Z3 resource units (rlimit), not seconds",
    )
    p.add_argument(
        "--report",
        type=Path,
        default=DEFAULT_REPORT,
        metavar="FILE.json",
        help=f"where to write the JSON report (default {DEFAULT_REPORT})",
    )
    p.add_argument(
        "--traces",
        type=Path,
        default=DEFAULT_TRACES,
        metavar="DIR",
        help=f"where to write witness and counterexample traces (default {DEFAULT_TRACES})",
    )
    p.add_argument(
        "--mutants",
        action="store_true",
        help="also run every theorem against every wrong spec variant; print the kill "
        "table; fail if a variant survives",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="z3 random_seed for the theorems and the campaign's seed (default 0)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=runner.DEFAULT_JOBS,
        metavar="N",
        help=f"theorem processes at a time (default {runner.DEFAULT_JOBS})",
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="print only the final table (no line per theorem as it ends, no campaign progress)",
    )
    from .coverage import add_arguments

    add_arguments(p)
    return p


def _selection(only: Sequence[str]) -> tuple[list[str], bool]:
    """(theorem names in report order, whether the campaign runs); UsageError on bad names."""
    from .theorems import THEOREMS

    names = [n.strip() for item in only for n in item.split(",") if n.strip()]
    if not names:
        return list(THEOREMS), True
    unknown = [n for n in names if n not in THEOREMS and n != DIFFERENTIAL]
    if unknown:
        known = ", ".join([*THEOREMS, DIFFERENTIAL])
        raise UsageError(f"unknown theorem(s): {', '.join(unknown)}. Known: {known}")
    return [n for n in THEOREMS if n in names], DIFFERENTIAL in names


def _by_cost(names: Sequence[str]) -> list[str]:
    from .theorems import THEOREMS

    return sorted(names, key=lambda n: -THEOREMS[n].cost)


def _write_traces(result: dict[str, Any], traces_dir: Path) -> list[str]:
    from .trace import write_trace

    paths = []
    for tr in result.get("traces", []):
        try:
            paths.append(str(write_trace(tr, traces_dir)))
        except Exception as e:  # a malformed trace must not hide the verdict
            result["message"] = f"{result.get('message', '')} (trace not written: {e})".strip()
    return paths


def _campaign(
    examples: int, traces_dir: Path, seed: int, progress: Progress, log: Log | None = None
) -> dict[str, Any]:
    task = progress.add_task(
        f"differential campaign ({examples} + {examples} host-tier examples)", total=2 * examples
    )
    t0, c0 = time.monotonic(), time.thread_time()
    try:
        from .campaign import run_campaign

        def tick(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        if log is None or log.quiet:
            res = run_campaign(examples, traces_dir, seed=seed, progress=tick)
        else:
            res = run_campaign(examples, traces_dir, seed=seed, progress=tick, stage=log.campaign)
    except Exception as e:  # the native module missing is the usual one
        progress.update(task, visible=False)
        return {
            "examples": 0,
            "failures": 1,
            "traces": [],
            "seconds": round(time.monotonic() - t0, 3),
            "error": f"{type(e).__name__}: {e}",
            "ok": False,
        }
    progress.update(task, completed=2 * examples, total=2 * examples)
    if log is not None:
        verdict = "divergence" if res.get("failures") else "no divergence"
        log.line(
            f"campaign: {verdict}, {res.get('examples')} + {res.get('host_examples', 0)} "
            f"host-tier random examples, {float(res.get('seconds') or 0.0):.1f}s"
        )
    out = {k: res.get(k) for k in ("examples", "failures", "traces", "seconds", "failure")}
    out["cpu_seconds"] = round(time.thread_time() - c0, 3)  # this thread runs the campaign
    for k in ("host_examples", "scenarios", "host_scenarios", "steps", "host_steps"):
        if k in res:
            out[k] = res[k]
    out["ok"] = not res.get("failures")
    return out


def _mutants(
    names: Sequence[str], args: argparse.Namespace, progress: Progress, log: Log | None = None
) -> dict[str, Any]:
    from .theorems import THEOREMS
    from .variants import VARIANTS

    tasks = [(n, v) for v in VARIANTS for n in _by_cost(names)]
    task = progress.add_task("wrong variants x theorems", total=len(tasks))
    finished = [0]

    def done(r: dict[str, Any]) -> None:
        progress.advance(task)
        finished[0] += 1
        if log is not None:
            log.mutants(finished[0], len(tasks))

    results = runner.run_theorems(
        tasks,
        seed=args.seed,
        timeout=args.timeout,
        jobs=args.jobs,
        quick=args.quick,
        on_done=done,
    )
    matrix: dict[str, dict[str, str]] = {v: {} for v in VARIANTS}
    traces: list[str] = []
    for r in results:
        matrix[r["variant"]][r["name"]] = r["verdict"]
        if runner.killed(r):
            traces += _write_traces(r, args.traces)
    variants: dict[str, Any] = {}
    ok = True
    for v in VARIANTS:
        killers = [n for n in names if is_kill(matrix[v][n], THEOREMS[n].expected)]
        expected = [n for n in names if v in THEOREMS[n].kills]
        missed = [n for n in expected if n not in killers]
        survived = not killers
        ok = ok and not survived and not missed
        variants[v] = {
            "description": VARIANTS[v].description,
            "killed_by": killers,
            "expected_killers": expected,
            "missed": missed,
            "survived": survived,
        }
    cpu = round(sum(r.get("cpu_seconds") or 0.0 for r in results), 3)
    return {"variants": variants, "matrix": matrix, "traces": traces, "ok": ok, "cpu_seconds": cpu}


def _unwritable(path: Path) -> str:
    """'' if the report can be written at `path` (tried by opening it to append), else why.

    Creates the missing parent folders, as writing the report would; leaves no new file."""
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as e:
        return e.strerror or str(e)
    if not existed:
        path.unlink()
    return ""


def _not_a_folder(path: Path) -> str:
    """'' if `path` is a folder or can be made one, else why; creates nothing."""
    p = next((q for q in (path, *path.parents) if q.exists()), None)
    return "" if p is None or p.is_dir() else f"{p} is a file, not a folder"


def verify_main(argv: Sequence[str]) -> int:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    args = _verify_parser().parse_args(list(argv))
    if args.coverage or args.write_allowlist:
        from .coverage import from_args

        return from_args(args)
    # Logs and pipes get lines and tables at their full width: nothing is cut or wrapped.
    console = Console(width=None if sys.stdout.isatty() else LOG_WIDTH)
    err = Console(stderr=True, width=None if sys.stderr.isatty() else LOG_WIDTH)  # no wrap
    try:
        names, with_campaign = _selection(args.only)
    except UsageError as e:
        err.print(f"livetail verify: {e}")
        return EXIT_USAGE
    if args.timeout <= 0 or args.jobs < 1 or (args.examples is not None and args.examples < 0):
        err.print("livetail verify: --timeout must be > 0, --jobs >= 1, --examples >= 0")
        return EXIT_USAGE
    unwritable = _unwritable(args.report)
    if unwritable:  # found now, not after a run of many minutes
        err.print(f"livetail verify: cannot write the report {args.report}: {unwritable}")
        return EXIT_USAGE
    not_a_folder = _not_a_folder(args.traces)
    if not_a_folder:  # else every trace would be lost after the run, with exit 0
        err.print(f"livetail verify: cannot write traces to {args.traces}: {not_a_folder}")
        return EXIT_USAGE
    examples = args.examples
    if examples is None:
        examples = QUICK_EXAMPLES if args.quick else DEFAULT_EXAMPLES
    with_campaign = with_campaign and examples > 0
    t0 = time.monotonic()
    report: dict[str, Any] = {
        "seed": args.seed,
        "quick": args.quick,
        "timeout": args.timeout,
        "theorems": [],
    }
    results: list[dict[str, Any]] = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task("theorems", total=len(names))
        log = Log(console, len(names), args.quiet)
        running: set[str] = set()
        lock = threading.Lock()

        def started(name: str, variant: str | None) -> None:
            with lock:
                running.add(name)
                progress.update(task, description=f"theorems: {', '.join(sorted(running))}")

        def done(r: dict[str, Any]) -> None:
            with lock:
                running.discard(r["name"])
                progress.update(
                    task, advance=1, description=f"theorems: {', '.join(sorted(running)) or 'done'}"
                )
            log.theorem(r)

        def prove() -> None:
            results.extend(
                runner.run_theorems(
                    [(n, None) for n in _by_cost(names)],
                    seed=args.seed,
                    timeout=args.timeout,
                    jobs=args.jobs,
                    on_start=started,
                    on_done=done,
                    quick=args.quick,
                )
            )

        # The campaign runs in this process while the theorem processes run beside it.
        worker = threading.Thread(target=prove, name="theorems")
        worker.start()
        if with_campaign:
            report["differential"] = _campaign(examples, args.traces, args.seed, progress, log)
        else:
            why = "examples = 0" if examples == 0 else "not selected by --only"
            report["differential"] = {
                "examples": 0,
                "failures": 0,
                "traces": [],
                "seconds": 0.0,
                "skipped": why,
                "ok": True,
            }
        worker.join()
        if args.mutants:
            report["mutants"] = _mutants(names, args, progress, log)
    runner.stop_fork_server()  # the theorem processes then count in getrusage(RUSAGE_CHILDREN)
    by_name = {r["name"]: r for r in results}
    for n in names:
        r = by_name[n]
        r["ok"] = runner.passed(r)
        r["traces"] = _write_traces(r, args.traces)
        report["theorems"].append(r)
    ok = all(r["ok"] for r in report["theorems"])
    ok = ok and report.get("differential", {"ok": True})["ok"]
    ok = ok and report.get("mutants", {"ok": True})["ok"]
    report["ok"] = ok
    report["seconds"] = round(time.monotonic() - t0, 3)
    # CPU of the theorem processes, the campaign and any variant runs: the run's cost on an
    # idle machine.
    cpu = [r.get("cpu_seconds") or 0.0 for r in report["theorems"]]
    cpu.append(report["differential"].get("cpu_seconds", 0.0))
    cpu.append(report.get("mutants", {}).get("cpu_seconds", 0.0))
    report["cpu_seconds"] = round(sum(cpu), 3)
    print_tables(console, report)
    try:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    except OSError as e:
        err.print(f"livetail verify: cannot write the report {args.report}: {e}")
        return EXIT_FAILED
    console.print(
        f"{'[green]all checks passed' if ok else '[bold red]FAILED'}[/] in "
        f"{report['seconds']:.1f}s ({report['cpu_seconds']:.1f}s of CPU); report "
        f"{args.report}, traces {args.traces}"
    )
    return EXIT_OK if ok else EXIT_FAILED


def theorems_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="livetail theorems", description="List the theorems livetail verify proves."
    )
    p.add_argument("--markdown", action="store_true", help="print docs/theorems.md's list")
    p.add_argument(
        "--docs",
        metavar="DIR",
        type=Path,
        help="rewrite the tables of DIR/README.md and DIR/docs/theorems.md generated from "
        "the registry (between their <!-- NAME:start --> and <!-- NAME:end --> markers)",
    )
    p.add_argument(
        "--check", action="store_true", help="with --docs: change nothing, exit 1 if stale"
    )
    args = p.parse_args(list(argv))
    from .theorems import THEOREMS, markdown

    if args.check and args.docs is None:
        p.error("--check needs --docs DIR")
    if args.docs is not None:
        from .theorems.tables import DOC_BLOCKS, stale_docs, write_docs

        missing = ", ".join(rel for rel in DOC_BLOCKS if not (args.docs / rel).is_file())
        try:  # every file is read and checked before any is written
            if missing:
                raise ValueError(f"not the project's root: {missing} not found there")
            changed = stale_docs(args.docs) if args.check else write_docs(args.docs)
        except (OSError, ValueError) as e:  # unreadable, not UTF-8, markers missing
            print(f"livetail theorems: --docs {args.docs}: {e}", file=sys.stderr)
            return EXIT_USAGE
        for rel in changed:
            print(f"{'stale' if args.check else 'rewrote'}: {args.docs / rel}")
        return EXIT_FAILED if args.check and changed else EXIT_OK
    if args.markdown:
        sys.stdout.write(markdown())
        return EXIT_OK
    for th in THEOREMS.values():
        kind = "bounded" if th.bounded else "z3"
        print(f"{th.name:48s} {kind:8s} expected {th.expected}")
    return EXIT_OK


USAGE = """usage: livetail {verify,replay,theorems,rlimits} ...
       livetail --version

  livetail verify   prove the theorems, run the differential campaign, write a report
  livetail replay   re-run a trace on the spec and the native module, step by step
  livetail theorems list the theorems (--docs DIR: rewrite the docs' generated tables)
  livetail rlimits  measure each theorem's Z3 resource use under several seeds, suggest budgets

The subcommands need the verify extra: pip install 'livetail[verify]'
"""

COMMANDS = ("verify", "replay", "theorems", "rlimits")
# The distributions of the verify extra, by the module each one installs.
VERIFY_EXTRA = {"z3": "z3-solver", "hypothesis": "hypothesis", "rich": "rich"}


def version() -> str:
    """The installed distribution's version (no native module needed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("livetail")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


def missing_verify_extra() -> list[str]:
    """The distributions of the verify extra that cannot be imported here."""
    missing = []
    for module, dist in VERIFY_EXTRA.items():
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(dist)
    return missing


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``livetail`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return EXIT_OK if args else EXIT_USAGE
    if args[0] == "--version":
        print(f"livetail {version()}")
        return EXIT_OK
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        sys.stderr.write(f"livetail: unknown command {command!r}\n{USAGE}")
        return EXIT_USAGE
    missing = missing_verify_extra()
    if missing:
        sys.stderr.write(
            f"livetail {command} needs the verify extra, which is not installed "
            f"(missing: {', '.join(missing)}).\nInstall it with: pip install 'livetail[verify]'\n"
        )
        return EXIT_USAGE
    if command == "verify":
        return verify_main(rest)
    if command == "replay":
        try:
            from .replay import main as replay_main
        except ImportError as e:
            print(f"livetail replay: unavailable ({e})", file=sys.stderr)
            return EXIT_USAGE
        return int(replay_main(rest))
    if command == "rlimits":
        from .rlimits import main as rlimits_main

        return rlimits_main(rest)
    return theorems_main(rest)
