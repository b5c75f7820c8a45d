"""``livetail rlimits``: measure every theorem's Z3 resource use and suggest its budget.

Each theorem runs in full (not ``--quick``: the optional searches count too) under each
of several seeds with a budget large enough not to bind, on the real spec and under every
wrong variant it claims to reject (its budget must cover finding that counterexample too),
and the table shows the most units it used per seed, its budget now, the margin (budget /
most used) and the suggested budget: ``MARGIN`` times the most used over the seeds,
rounded up to two significant digits, at least ``FLOOR``.  A new theorem gets its budget
from this table (``rlimit=`` in its ``@theorem``); ``--markdown`` prints the table
docs/theorems.md keeps.  The command exits non-zero when a verdict is not the expected one
or a claimed variant survives under some seed, or a budget is below what a seed used.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import Any

from . import runner

SEEDS = (0, 1, 2)
MARGIN = 2.0
FLOOR = 2_000_000
MEASURE_RLIMIT = 4_000_000_000
"""The budget while measuring: far above any theorem (Z3 takes it as a 32-bit count)."""


def suggest(used: int) -> int:
    """``MARGIN`` times ``used``, rounded up to two significant digits, at least ``FLOOR``."""
    target = max(FLOOR, math.ceil(MARGIN * used))
    step: int = 10 ** max(0, len(str(target)) - 2)
    return -(-target // step) * step


def measure(
    names: Sequence[str],
    seeds: Sequence[int] = SEEDS,
    *,
    jobs: int = runner.DEFAULT_JOBS,
    timeout: float = runner.DEFAULT_TIMEOUT,
) -> list[dict[str, Any]]:
    """Per theorem: name, verdicts and units used per seed, budget, most used, suggested."""
    from .theorems import THEOREMS

    tasks = [(n, v) for n in names for v in (None, *THEOREMS[n].kills)]
    by_seed: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for seed in seeds:
        done = runner.run_theorems(
            tasks, seed=seed, jobs=jobs, timeout=timeout, rlimit=MEASURE_RLIMIT
        )
        by_seed[seed] = {n: [r for r in done if r["name"] == n] for n in names}
    rows = []
    for n in names:
        runs = [by_seed[seed][n] for seed in seeds]
        used = [_most(rs) for rs in runs]
        most = max((u for u in used if u is not None), default=0)
        rows.append(
            {
                "name": n,
                # On the real spec: its verdict; under a variant: rejected or not.
                "verdicts": [_verdict(rs) for rs in runs],
                "expected": THEOREMS[n].expected,
                "used": used,
                "seconds": [max(r["seconds"] for r in rs) for rs in runs],
                "budget": THEOREMS[n].budget,
                "measured": THEOREMS[n].rlimit is not None,
                "most": most,
                "suggested": suggest(most),
            }
        )
    return rows


def _most(runs: Sequence[dict[str, Any]]) -> int | None:
    """The most units any run used (None if one has no count: it did not finish)."""
    used = [r["rlimit_used"] for r in runs]
    return None if None in used else max(used)


def _verdict(runs: Sequence[dict[str, Any]]) -> str:
    """The real spec's verdict, or "variant survives" when a claimed variant is not killed."""
    real = next(r for r in runs if r["variant"] is None)
    survivors = [r["variant"] for r in runs if r["variant"] is not None and not runner.killed(r)]
    return f"{survivors[0]} survives" if survivors else str(real["verdict"])


def ok(row: dict[str, Any]) -> bool:
    """Every seed gave the expected verdict within the theorem's budget."""
    return all(v == row["expected"] for v in row["verdicts"]) and row["most"] <= row["budget"]


def _m(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e6:.2f}M"


def text_table(rows: Sequence[dict[str, Any]], seeds: Sequence[int]) -> str:
    head = (
        f"{'theorem':48s} "
        + " ".join(f"{'seed ' + str(s):>9s}" for s in seeds)
        + f" {'budget':>9s} {'margin':>7s} {'suggest':>9s}  verdicts"
    )
    lines = [head]
    for r in rows:
        margin = r["budget"] / r["most"] if r["most"] else math.inf
        flag = "" if ok(r) else "  <-- FAILS"
        default = "" if r["measured"] else " (default)"
        lines.append(
            f"{r['name']:48s} "
            + " ".join(f"{_m(u):>9s}" for u in r["used"])
            + f" {_m(r['budget']):>9s} {margin:6.1f}x {_m(r['suggested']):>9s}  "
            + ",".join(sorted(set(r["verdicts"])))
            + default
            + flag
        )
    return "\n".join(lines) + "\n"


def markdown_table(rows: Sequence[dict[str, Any]], seeds: Sequence[int]) -> str:
    cols = " | ".join(f"used, seed {s}" for s in seeds)
    lines = [
        f"| theorem | {cols} | budget | margin |",
        "|---|" + "---:|" * (len(seeds) + 2),
    ]
    for r in rows:
        margin = f"{r['budget'] / r['most']:.1f}x" if r["most"] else "-"
        used = " | ".join("-" if u is None else f"{u:,}" for u in r["used"])
        lines.append(f"| `{r['name']}` | {used} | {r['budget']:,} | {margin} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="livetail rlimits",
        description="Measure each theorem's Z3 resource use (rlimit) under several seeds "
        "and suggest its budget.",
    )
    ap.add_argument(
        "--seeds",
        default=",".join(map(str, SEEDS)),
        metavar="N,N,...",
        help="z3 random seeds (default %(default)s)",
    )
    ap.add_argument("--only", action="append", default=[], metavar="NAME")
    ap.add_argument("--jobs", type=int, default=runner.DEFAULT_JOBS, metavar="N")
    ap.add_argument("--timeout", type=float, default=runner.DEFAULT_TIMEOUT, metavar="S")
    ap.add_argument("--markdown", action="store_true", help="print docs/theorems.md's table")
    a = ap.parse_args(list(argv) if argv is not None else None)
    from .theorems import THEOREMS

    try:
        seeds = [int(x) for x in a.seeds.split(",") if x.strip()]
    except ValueError:
        ap.error("--seeds takes comma-separated integers")
    names = [n.strip() for item in a.only for n in item.split(",") if n.strip()]
    unknown = [n for n in names if n not in THEOREMS]
    if unknown or not seeds:
        ap.error(f"unknown theorem(s): {', '.join(unknown)}" if unknown else "no seeds")
    names = [n for n in THEOREMS if not names or n in names]
    rows = measure(names, seeds, jobs=a.jobs, timeout=a.timeout)
    out = markdown_table(rows, seeds) if a.markdown else text_table(rows, seeds)
    sys.stdout.write(out)
    return 0 if all(ok(r) for r in rows) else 1
