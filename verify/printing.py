"""What ``livetail verify`` prints: a line per theorem as its result arrives and the
campaign's progress as it goes (``Log``), then the summary and kill tables
(``print_tables``).  When stdout is not a terminal the console is ``LOG_WIDTH`` wide, so a
log keeps every column whole."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

LOG_WIDTH = 10_000
"""Console width when stdout is not a terminal: wider than any line or table the command
prints, so a log keeps every column whole (rich cuts what passes the width)."""


def every(done: int, total: int, parts: int = 10) -> bool:
    """Whether a progress count is worth a line: about every `parts`-th of the total, and
    the end."""
    return done == total or done % max(1, total // parts) == 0


class Log:
    """The run as it goes, one line at a time: each theorem as its result arrives (in the
    parent, from the process pool's results), the campaign's scenarios and random examples,
    the variant runs.  Lines are plain (no columns to cut), so a log reads like a terminal;
    with ``quiet`` nothing is printed here and the final table is the whole output."""

    def __init__(self, console: Console, theorems: int, quiet: bool) -> None:
        self.console = console
        self.theorems = theorems
        self.quiet = quiet
        self.done = 0
        self.t0 = time.monotonic()
        self.lock = threading.Lock()

    def line(self, text: str) -> None:
        if self.quiet:
            return
        with self.lock:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def theorem(self, r: dict[str, Any]) -> None:
        with self.lock:
            self.done += 1
            done = self.done
        width = len(str(self.theorems))
        verdict = label(str(r["verdict"]))
        if r["verdict"] != r["expected"]:
            verdict = f"{verdict} (FAILED: expected {label(str(r['expected']))})"
        kind = "bounded" if r.get("bounded") else "z3"
        self.line(
            f"[{done:>{width}}/{self.theorems}] {r['name']}: {verdict}, {kind}, "
            f"{units(r.get('rlimit_used'), r.get('rlimit_budget'))} units, "
            f"{float(r['seconds']):.1f}s"
        )

    def campaign(self, tier: str, kind: str, done: int, total: int) -> None:
        if not every(done, total, 4 if kind == "scenarios" else 10):
            return
        what = "scenarios" if kind == "scenarios" else "random examples"
        machine = "device" if tier == "device" else "host-tier"
        self.line(
            f"campaign, {machine} machine: {what} {done}/{total} "
            f"({time.monotonic() - self.t0:.1f}s into the run)"
        )

    def mutants(self, done: int, total: int) -> None:
        if every(done, total):
            self.line(f"wrong variants x theorems: {done}/{total} runs")


def is_kill(verdict: str, expected: str) -> bool:
    return verdict not in ("unknown", "error") and verdict != expected


def units(used: int | None, budget: int | None) -> str:
    """Resource units as "used / budget" in millions (one decimal)."""

    def m(n: int | None) -> str:
        return "-" if n is None else f"{n / 1e6:.1f}M"

    return f"{m(used)} / {m(budget)}"


def label(verdict: str) -> str:
    return {"witness": "witness found"}.get(verdict, verdict)


def print_tables(console: Console, report: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(title="livetail verify", title_justify="left")
    t.add_column("property", no_wrap=True)
    t.add_column("kind", no_wrap=True)
    t.add_column("verdict", no_wrap=True)
    t.add_column("expected", no_wrap=True)
    t.add_column("time", justify="right", no_wrap=True)
    t.add_column("rlimit used / budget", justify="right", no_wrap=True)
    for r in report["theorems"]:
        style = "green" if r["ok"] else "bold red"
        kind = "bounded" if r["bounded"] else "z3"
        t.add_row(
            r["name"],
            kind,
            f"[{style}]{label(r['verdict'])}[/]",
            label(r["expected"]),
            f"{r['seconds']:.1f}s",
            units(r.get("rlimit_used"), r.get("rlimit_budget")),
        )
    d = report.get("differential")
    if d is not None and "skipped" not in d:
        if "error" in d:
            verdict = "[bold red]not run[/]"
        elif d["ok"]:
            verdict = "[green]no divergence[/]"
        else:
            verdict = "[bold red]divergence[/]"
        host = f" + {d['host_examples']} host-tier" if "host_examples" in d else ""
        steps = f", {d['steps'] + d['host_steps']} steps" if "steps" in d else ""
        targeted = ""
        if "scenarios" in d:
            targeted = f"{d['scenarios'] + d.get('host_scenarios', 0)} scenarios, "
        t.add_row(
            f"differential campaign ({targeted}{d['examples']}{host} examples{steps})",
            "spec/native",
            verdict,
            "no divergence",
            f"{d['seconds']:.1f}s",
        )
    console.print(t)
    if d is not None and "error" in d:
        console.print(f"[bold red]differential campaign:[/] {d['error']}")
    elif d is not None and d.get("failure"):
        console.print(f"[bold red]differential campaign failed:[/] {d['failure']}")
    for r in report["theorems"]:
        if not r["ok"]:
            console.print(
                f"[bold red]{r['name']}[/]: {label(r['verdict'])}, expected "
                f"{label(r['expected'])}. {r['message']}"
            )
            if r.get("values"):
                console.print(f"  values: {r['values']}")
    m = report.get("mutants")
    if m is not None:
        names = [r["name"] for r in report["theorems"]]
        k = Table(
            title="kill table (x: the theorem rejects the variant; ! expected to)",
            title_justify="left",
        )
        k.add_column("theorem")
        for v in m["matrix"]:
            k.add_column(v, justify="center")
        for n in names:
            cells = []
            for v in m["matrix"]:
                verdict = m["matrix"][v].get(n, "")
                mark = (
                    "x"
                    if is_kill(
                        verdict, next(r["expected"] for r in report["theorems"] if r["name"] == n)
                    )
                    else "."
                )
                if n in m["variants"][v]["expected_killers"]:
                    mark = f"[green]{mark}![/]" if mark == "x" else "[bold red].![/]"
                elif verdict in ("unknown", "error"):
                    mark = "?"
                cells.append(mark)
            k.add_row(n, *cells)
        k.add_row(
            "[bold]survives?[/]",
            *[
                "[bold red]SURVIVES[/]" if m["variants"][v]["survived"] else "[green]killed[/]"
                for v in m["matrix"]
            ],
        )
        console.print(k)
