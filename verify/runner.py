"""Run each theorem in a fresh process, with a wall-clock kill only as a hang guard.

Z3's results depend on solver history, so every theorem gets a new process (two at a
time on two cores), a fixed ``random_seed`` and a fixed ``PYTHONHASHSEED``.  Where the
platform has it, each process is forked from a server that has imported z3 and the theorems
and done nothing else (``multiprocessing``'s forkserver), so every theorem starts from the
same state without paying an interpreter start and the imports again (about 0.15 s of CPU a
theorem); elsewhere each is a new interpreter.  Its proofs are
budgeted in Z3 resource units (``rlimit``, see ``theorems/prover/query.py``), which do not
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
import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

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


class _Proc(Protocol):
    """What the runner needs of a theorem process (a ``subprocess.Popen`` has it)."""

    returncode: int | None

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...

    def wait(self) -> int: ...


PRELOAD = ["z3", "livetail.verify.runner", "livetail.verify.theorems"]
"""What the fork server imports before it forks a theorem process."""


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """``os.environ`` holds ``env``'s values inside the block (the fork server starts with
    them); only the keys that differ are touched, so other threads never see them missing."""
    changed = {k: os.environ.get(k) for k, v in env.items() if os.environ.get(k) != v}
    for k in changed:
        os.environ[k] = env[k]
    try:
        yield
    finally:
        for k, v in changed.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v


def _forked_child(argv: list[str], out: str, err: str) -> None:
    """A theorem process forked from the server: ``child_main`` with its output in files."""
    for fd, path in ((1, out), (2, err)):
        with open(path, "w", encoding="utf-8") as f:
            os.dup2(f.fileno(), fd)  # C-level writes (z3's warnings) land there too
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    if os.environ.get("PYTHONHASHSEED") != "0":
        raise RuntimeError("the fork server runs without PYTHONHASHSEED=0")
    child_main(argv)


class _Forked:
    """A theorem process forked from the server, with ``subprocess.Popen``'s interface."""

    def __init__(self, ctx: Any, env: dict[str, str], argv: list[str], out: str, err: str):
        self.returncode: int | None = None
        self.p = ctx.Process(target=_forked_child, args=(argv, out, err), daemon=False)
        with _environment(env):
            self.p.start()

    def poll(self) -> int | None:
        if self.returncode is None and not self.p.is_alive():
            self.p.join()
            self.returncode = self.p.exitcode
        return self.returncode

    def kill(self) -> None:
        self.p.kill()

    def wait(self) -> int:
        self.p.join()
        self.returncode = self.p.exitcode
        return int(self.returncode or 0)


def _fork_context() -> Any | None:
    """multiprocessing's forkserver context preloading the theorems, where it exists.

    ``LIVETAIL_VERIFY_SPAWN=1`` forces a new interpreter per theorem instead.
    """
    if os.environ.get("LIVETAIL_VERIFY_SPAWN") == "1":
        return None
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return None
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


@dataclass
class _Job:
    name: str
    variant: str | None
    proc: _Proc
    started: float
    deadline: float
    out: IO[str]  # the child's stdout and stderr go to files: a full pipe cannot block it
    err: IO[str]

    def close(self) -> None:
        for f in (self.out, self.err):
            f.close()
            with contextlib.suppress(OSError):
                os.unlink(f.name)


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
    env = _child_env()
    ctx = _fork_context()
    pending = list(enumerate(tasks))
    running: dict[int, _Job] = {}
    results: dict[int, dict[str, Any]] = {}
    while pending or running:
        while pending and len(running) < max(1, jobs):
            i, (name, variant) = pending.pop(0)
            argv = ["--child", name, "--seed", str(seed)]
            if rlimit is not None:
                argv += ["--rlimit", str(rlimit)]
            if variant is not None:
                argv += ["--variant", variant]
            if quick:
                argv.append("--quick")
            # Closed and removed by _Job.close once the child is collected or killed.
            out = tempfile.NamedTemporaryFile(  # noqa: SIM115
                mode="w+", encoding="utf-8", prefix="livetail-", delete=False
            )
            err = tempfile.NamedTemporaryFile(  # noqa: SIM115
                mode="w+", encoding="utf-8", prefix="livetail-", delete=False
            )
            proc: _Proc
            if ctx is not None:
                proc = _Forked(ctx, env, argv, out.name, err.name)
            else:
                cmd = [sys.executable, "-m", "livetail.verify.runner", *argv]
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


def stop_fork_server() -> None:
    """Stop the fork server, if one runs, and wait for it.

    The theorem processes are the server's children and it reaps them, so their CPU time
    reaches this process (``getrusage(RUSAGE_CHILDREN)``, what ``/usr/bin/time`` reports)
    only once this process has waited for the server.  ``livetail verify`` calls it at the
    end; a later ``run_theorems`` starts a new server.
    """
    from multiprocessing import forkserver

    stop = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)  # private
    if stop is not None:
        with contextlib.suppress(OSError, ChildProcessError):
            stop()


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
    # CPU the process used (a forked one counts from its fork): what a verify run costs,
    # whatever else the machine was doing.
    result["cpu_seconds"] = round(time.process_time(), 3)
    sys.stdout.write(MARKER + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
