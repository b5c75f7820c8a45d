"""Run each theorem in a fresh process, with a wall-clock kill only as a hang guard.

Z3's results depend on solver history, so every theorem gets a new interpreter (two at a
time on two cores), a fixed ``random_seed`` and a fixed ``PYTHONHASHSEED``.  Its proofs are
budgeted in Z3 resource units (``rlimit``, see ``theorems/_prover.py``), which do not
depend on the machine's load.  Verdicts: ``proved``, ``witness``, ``counterexample``,
``unknown`` (Z3 gave up, the rlimit budget included), and ``error``: no verdict because the
environment failed, i.e. the process was killed by the wall-clock guard or died without a
result.  A theorem passes when its verdict equals its expected one; ``unknown`` and
``error`` never pass.

``python -m livetail.verify.runner --child NAME [--seed N] [--rlimit U] [--variant V] [--quick]``
is the child side: it prints one line, ``LIVETAIL-RESULT <json>``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

MARKER = "LIVETAIL-RESULT "
DEFAULT_TIMEOUT = 600.0
"""Wall-clock guard per theorem, in seconds: far above any theorem's time on a loaded
machine, so it only ends a hung process (Z3 does not check its rlimit everywhere)."""
DEFAULT_JOBS = 2
GUARD = "wall-clock guard"


def passed(result: dict[str, Any]) -> bool:
    return bool(result["verdict"] == result["expected"])


def killed(result: dict[str, Any]) -> bool:
    """Under a wrong variant: a definite verdict other than the expected one."""
    verdict = str(result["verdict"])
    return verdict not in ("unknown", "error") and verdict != result["expected"]


def _child_env() -> dict[str, str]:
    """The environment a child needs to import this very livetail package, hash seed fixed."""
    import livetail

    root = str(Path(livetail.__file__).resolve().parent.parent)
    env = dict(os.environ)
    parts = [root, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    # Same iteration order of str-keyed sets in every run: the same queries in the same order.
    env["PYTHONHASHSEED"] = "0"
    return env


@dataclass
class _Job:
    name: str
    variant: str | None
    proc: subprocess.Popen[str]
    started: float
    deadline: float
    out: IO[str]  # the child's stdout and stderr go to files: a full pipe cannot block it
    err: IO[str]

    def close(self) -> None:
        self.out.close()
        self.err.close()


def _failed(
    name: str, variant: str | None, verdict: str, message: str, seconds: float
) -> dict[str, Any]:
    from .theorems import THEOREMS

    th = THEOREMS.get(name)
    return {
        "name": name,
        "verdict": verdict,
        "expected": th.expected if th else "proved",
        "seconds": round(seconds, 3),
        "rlimit_used": None,
        "rlimit_budget": th.budget if th else None,
        "statement": th.statement if th else "",
        "bounded": th.bounded if th else False,
        "variant": variant,
        "steps": [],
        "values": {},
        "witnesses": [],
        "message": message,
        "notes": {},
        "traces": [],
    }


def run_theorems(
    tasks: Sequence[tuple[str, str | None]],
    *,
    seed: int = 0,
    timeout: float = DEFAULT_TIMEOUT,
    jobs: int = DEFAULT_JOBS,
    quick: bool = False,
    rlimit: int | None = None,
    on_start: Callable[[str, str | None], None] | None = None,
    on_done: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run (theorem, variant or None) tasks in fresh processes; results in task order.

    ``timeout`` is the wall-clock guard per process; ``rlimit`` overrides every theorem's
    budget of Z3 resource units (None: each theorem's own).
    """
    import tempfile

    env = _child_env()
    pending = list(enumerate(tasks))
    running: dict[int, _Job] = {}
    results: dict[int, dict[str, Any]] = {}
    while pending or running:
        while pending and len(running) < max(1, jobs):
            i, (name, variant) = pending.pop(0)
            cmd = [
                sys.executable,
                "-m",
                "livetail.verify.runner",
                "--child",
                name,
                "--seed",
                str(seed),
            ]
            if rlimit is not None:
                cmd += ["--rlimit", str(rlimit)]
            if variant is not None:
                cmd += ["--variant", variant]
            if quick:
                cmd.append("--quick")
            # Closed by _Job.close once the child is collected or killed.
            out = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # noqa: SIM115
            err = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # noqa: SIM115
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env)
            now = time.monotonic()
            running[i] = _Job(name, variant, proc, now, now + timeout, out, err)
            if on_start is not None:
                on_start(name, variant)
        time.sleep(0.02)
        for i, job in list(running.items()):
            now = time.monotonic()
            code = job.proc.poll()
            if code is None and now < job.deadline:
                continue
            if code is None:
                job.proc.kill()
                job.proc.wait()
                res = _failed(
                    job.name,
                    job.variant,
                    "error",
                    f"{GUARD}: the process was killed after {timeout:g} s of wall clock. This "
                    "is an environment failure, not a verdict: proofs are budgeted in Z3 "
                    "resource units (rlimit), which a loaded machine does not change; a "
                    "process past the guard is hung or the machine far slower than expected "
                    "(raise --timeout).",
                    now - job.started,
                )
            else:
                res = _collect(job, now)
            job.close()
            del running[i]
            results[i] = res
            if on_done is not None:
                on_done(res)
    return [results[i] for i in range(len(tasks))]


def _collect(job: _Job, now: float) -> dict[str, Any]:
    job.out.seek(0)
    text = job.out.read()
    for line in text.splitlines():
        if line.startswith(MARKER):
            res: dict[str, Any] = json.loads(line[len(MARKER) :])
            return res
    job.err.seek(0)
    tail = (job.err.read() or text).strip().splitlines()[-8:]
    return _failed(
        job.name,
        job.variant,
        "error",
        f"the theorem process exited with code {job.proc.returncode} and no result: "
        + " | ".join(tail),
        now - job.started,
    )


def child_main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m livetail.verify.runner")
    ap.add_argument("--child", required=True, metavar="NAME")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rlimit", type=int, default=None)
    ap.add_argument("--variant", default=None)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    from .theorems import run_theorem

    result = run_theorem(a.child, seed=a.seed, variant=a.variant, rlimit=a.rlimit, quick=a.quick)
    sys.stdout.write(MARKER + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
