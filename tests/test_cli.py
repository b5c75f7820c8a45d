"""``livetail verify`` / ``livetail replay`` / ``python -m livetail.verify``: exit codes,
the report's schema, traces, and the failure paths (unknown names, timeouts, surviving
variants, a campaign that cannot run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from livetail.verify import cli
from livetail.verify.theorems import THEOREMS
from livetail.verify.variants import VARIANTS

FAST = "live-tail-minimal"


def _verify(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    report = tmp_path / "report.json"
    code = cli.main(
        ["verify", "--quick", "--report", str(report), "--traces", str(tmp_path / "traces"), *args]
    )
    return code, json.loads(report.read_text()) if report.exists() else {}


def test_verify_only_one_theorem_passes_and_writes_the_report_schema(tmp_path: Path) -> None:
    code, report = _verify(tmp_path, "--only", FAST)
    assert code == cli.EXIT_OK
    assert report["ok"] is True
    [t] = report["theorems"]
    assert {"name", "verdict", "expected", "seconds", "statement"} <= set(t)
    assert (t["name"], t["verdict"], t["expected"]) == (FAST, "proved", "proved")
    assert t["statement"] == THEOREMS[FAST].statement
    assert isinstance(t["seconds"], float)
    d = report["differential"]
    assert {"examples", "failures", "traces"} <= set(d)
    assert d["skipped"] == "not selected by --only"


def test_verify_writes_witness_traces_and_lists_them(tmp_path: Path) -> None:
    code, report = _verify(tmp_path, "--only", "combined-charge-under-counts")
    assert code == cli.EXIT_OK
    [t] = report["theorems"]
    assert t["verdict"] == "witness"
    assert len(t["traces"]) == 2
    for p in t["traces"]:
        assert Path(p).parent == tmp_path / "traces"
        assert json.loads(Path(p).read_text())["origin"] == "z3"


def test_verify_unknown_theorem_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _verify(tmp_path, "--only", "no-such-theorem")
    assert code == cli.EXIT_USAGE
    assert report == {}
    err = capsys.readouterr().err
    assert "unknown theorem(s): no-such-theorem" in err
    assert FAST in err


def test_verify_wall_clock_guard_is_an_environment_error_not_unknown_nor_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _verify(tmp_path, "--only", "native-arithmetic-fits-int64", "--timeout", "0.5")
    assert code == cli.EXIT_FAILED
    [t] = report["theorems"]
    assert (t["verdict"], t["ok"], t["rlimit_used"]) == ("error", False, None)
    assert t["message"].startswith("wall-clock guard: the process was killed after 0.5 s")
    assert "environment failure, not a verdict" in t["message"]
    assert report["ok"] is False
    assert "native-arithmetic-fits-int64: error, expected proved. wall-clock guard" in " ".join(
        capsys.readouterr().out.split()
    )


def test_verify_reports_each_theorems_rlimit_use_within_its_budget(tmp_path: Path) -> None:
    code, report = _verify(tmp_path, "--only", "live-tail-hole-never-read")
    assert code == cli.EXIT_OK
    [t] = report["theorems"]
    assert t["rlimit_budget"] == THEOREMS["live-tail-hole-never-read"].budget
    assert 0 < t["rlimit_used"] <= t["rlimit_budget"]
    assert t["rlimit_used"] == sum(s["rlimit"] for s in t["steps"])


def test_verify_mutants_fails_when_a_variant_survives(tmp_path: Path) -> None:
    # live-tail-minimal alone rejects no variant: every one survives.
    code, report = _verify(tmp_path, "--only", FAST, "--mutants", "--examples", "0")
    assert code == cli.EXIT_FAILED
    m = report["mutants"]
    assert m["ok"] is False
    assert set(m["variants"]) == set(VARIANTS)
    assert all(v["survived"] for v in m["variants"].values())
    assert set(m["matrix"]["combined-charge"]) == {FAST}


def test_verify_mutants_passes_when_every_variant_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The CLI's pass path on three variants and the three cheap theorems that kill them
    # (the whole kill table is tests/test_theorems.py's: every claimed kill, one by one).
    from livetail.verify import variants

    kept = ("live-off-by-one", "combined-charge", "acquire-before-check")
    monkeypatch.setattr(variants, "VARIANTS", {v: variants.VARIANTS[v] for v in kept})
    only = "live-tail-hole-never-read,combined-charge-under-counts,acquire-all-or-nothing-bounded"
    # No --timeout: the default wall-clock guard only ends a hung process; every theorem's
    # work is bounded by its rlimit budget, whatever the machine's load.
    code, report = _verify(tmp_path, "--only", only, "--mutants", "--examples", "0")
    assert code == cli.EXIT_OK, report.get("mutants")
    m = report["mutants"]
    assert m["ok"] is True
    assert sorted(m["variants"]) == sorted(kept)
    assert m["variants"]["combined-charge"]["killed_by"] == ["combined-charge-under-counts"]
    assert m["variants"]["acquire-before-check"]["killed_by"] == ["acquire-all-or-nothing-bounded"]
    assert "live-tail-hole-never-read" in m["variants"]["live-off-by-one"]["killed_by"]
    assert m["traces"]  # every kill left a replayable trace
    # The run's CPU counts the variant runs too (the campaign did not run).
    assert m["cpu_seconds"] > 0
    theorems = sum(t["cpu_seconds"] for t in report["theorems"])
    assert report["cpu_seconds"] == pytest.approx(theorems + m["cpu_seconds"], abs=0.01)


def test_verify_reports_a_campaign_that_cannot_run_as_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from livetail.verify import campaign
    from livetail.verify.machine.side import NativeUnavailable

    def unavailable(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise NativeUnavailable("livetail has no native module")

    monkeypatch.setattr(campaign, "run_campaign", unavailable)
    code, report = _verify(tmp_path, "--only", f"{FAST},differential", "--examples", "3")
    assert code == cli.EXIT_FAILED
    d = report["differential"]
    assert d["ok"] is False and d["failures"] == 1
    assert "NativeUnavailable: livetail has no native module" in d["error"]
    assert report["theorems"][0]["verdict"] == "proved"


def test_verify_passes_campaign_results_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from livetail.verify import campaign

    seen: dict[str, Any] = {}

    def fake(
        examples: int,
        traces_dir: Path,
        seed: int | None = None,
        progress: Any = None,
        stage: Any = None,
    ) -> dict[str, Any]:
        seen.update(examples=examples, traces_dir=traces_dir, seed=seed)
        if progress is not None:
            progress(examples, examples)
        return {
            "examples": examples,
            "host_examples": examples,
            "failures": 0,
            "traces": [],
            "seconds": 0.1,
        }

    monkeypatch.setattr(campaign, "run_campaign", fake)
    code, report = _verify(tmp_path, "--only", "differential", "--examples", "7", "--seed", "5")
    assert code == cli.EXIT_OK
    assert seen == {"examples": 7, "traces_dir": tmp_path / "traces", "seed": 5}
    assert report["theorems"] == []
    d = report["differential"]
    assert (d["examples"], d["host_examples"], d["ok"]) == (7, 7, True)


def test_replay_subcommand_delegates_to_the_replayer(tmp_path: Path) -> None:
    from livetail.verify.trace import make_trace, write_trace

    trace = make_trace(
        [{"kind": "full", "block_size": 2}],
        8,
        1,
        [{"op": "acquire", "request": 0, "tokens": 3}],
        title="t",
        origin="manual",
    )
    path = write_trace(trace, tmp_path)
    assert cli.main(["replay", str(path), "--impl", "spec", "--quiet"]) == 0
    assert cli.main(["replay", str(tmp_path / "missing.json"), "--impl", "spec"]) == 2


def test_unknown_command_and_no_command_are_usage_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["prove"]) == cli.EXIT_USAGE
    assert "unknown command 'prove'" in capsys.readouterr().err
    assert cli.main([]) == cli.EXIT_USAGE
    assert cli.main(["--help"]) == cli.EXIT_OK


def test_python_dash_m_runs_the_same_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "livetail.verify", "theorems"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert [line.split()[0] for line in out.stdout.splitlines()] == list(THEOREMS)


# A child interpreter in which the named modules cannot be imported, running the command.
_BLOCKED = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # import raises ImportError
from livetail.verify.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _run_blocking(blocked: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _BLOCKED, blocked, *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
    )


def test_version_prints_the_installed_distribution_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from importlib.metadata import version

    assert cli.main(["--version"]) == cli.EXIT_OK
    assert capsys.readouterr().out == f"livetail {version('livetail')}\n"
    import livetail

    assert livetail.__version__ == version("livetail")


@pytest.mark.parametrize(
    "args",
    [["verify", "--quick"], ["verify", "--help"], ["replay", "t.json"], ["theorems"]],
    ids=["verify", "verify-help", "replay", "theorems"],
)
def test_subcommand_without_the_verify_extra_says_what_to_install_and_exits_2(
    args: list[str],
) -> None:
    out = _run_blocking("z3,hypothesis,rich", *args)
    assert out.returncode == 2, out.stderr
    assert out.stderr == (
        f"livetail {args[0]} needs the verify extra, which is not installed "
        "(missing: z3-solver, hypothesis, rich).\n"
        "Install it with: pip install 'livetail[verify]'\n"
    )
    assert out.stdout == ""


def test_one_missing_distribution_of_the_extra_is_named() -> None:
    out = _run_blocking("rich", "theorems")
    assert out.returncode == 2
    assert "(missing: rich)" in out.stderr
    assert "Traceback" not in out.stderr


def test_version_and_help_need_no_extra() -> None:
    from importlib.metadata import version

    out = _run_blocking("z3,hypothesis,rich", "--version")
    assert (out.returncode, out.stdout) == (0, f"livetail {version('livetail')}\n")
    out = _run_blocking("z3,hypothesis,rich", "--help")
    assert out.returncode == 0
    assert "pip install 'livetail[verify]'" in out.stdout


def test_replay_with_an_unimportable_native_module_exits_2(tmp_path: Path) -> None:
    from livetail.verify.trace import make_trace, write_trace

    trace = make_trace(
        [{"kind": "full", "block_size": 2}],
        8,
        1,
        [{"op": "acquire", "request": 0, "tokens": 3}],
        title="t",
        origin="manual",
    )
    path = str(write_trace(trace, tmp_path))
    out = _run_blocking("livetail._core", "replay", path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("livetail replay: livetail's native module cannot be imported")
    assert out.stderr.rstrip().endswith("; use --impl spec")
    assert "Traceback" not in out.stderr
    # The spec needs no native module: the same trace replays on it alone.
    out = _run_blocking("livetail._core", "replay", path, "--impl", "spec", "--quiet")
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_native_name_without_the_native_module_raises_import_error_naming_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['livetail._core'] = None\n"
        "import livetail, livetail.spec\n"
        "assert livetail.spec.BlockPool(4).num_free == 3\n"
        "try:\n"
        "    livetail.BlockPool\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(
        "livetail.BlockPool needs the native module livetail._core, which cannot be imported: "
    )


def test_verify_unwritable_report_is_a_usage_error_before_any_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report path under a regular file cannot be written: exit 2 before anything runs."""
    from livetail.verify import runner

    def no_run(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a theorem ran although the report cannot be written")

    monkeypatch.setattr(runner, "run_theorems", no_run)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code = cli.main(["verify", "--quick", "--only", FAST, "--report", str(blocker / "r.json")])
    assert code == cli.EXIT_USAGE
    err = "".join(capsys.readouterr().err.split())  # the console may wrap a long path
    assert f"livetailverify:cannotwritethereport{blocker / 'r.json'}:" in err
    # A writable path is left as it was found: no report file before the run ends.
    ok = tmp_path / "new" / "r.json"
    assert cli._unwritable(ok) == "" and not ok.exists()


def test_verify_waits_for_its_theorem_processes_so_time_counts_their_cpu(tmp_path: Path) -> None:
    """``/usr/bin/time livetail verify`` must count the theorem processes: they are children
    of the fork server, so the command waits for the server before it exits."""
    report = tmp_path / "report.json"
    code = (
        "import json, resource, sys\n"
        "from livetail.verify import cli\n"
        f"rc = cli.main(['verify', '--quick', '--only', {FAST!r}, '--examples', '0',\n"
        f"              '--report', {str(report)!r}, '--traces', {str(tmp_path / 't')!r}])\n"
        "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(json.dumps([rc, u.ru_utime + u.ru_stime]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    rc, children = json.loads(out.stdout.strip().splitlines()[-1])
    assert rc == cli.EXIT_OK
    [t] = json.loads(report.read_text())["theorems"]
    # The theorem's own CPU is whatever it costs (under 0.1 s on a fast machine): no timed
    # threshold here, only that it was counted and that the children's CPU covers it.
    assert t["cpu_seconds"] > 0
    # The children's CPU as the kernel counts it covers the theorem process's own count.
    assert children >= 0.9 * t["cpu_seconds"]


# --- what `livetail verify` prints while it runs ---------------------------------------


def _result(name: str, verdict: str = "proved", seconds: float = 1.25) -> dict[str, Any]:
    th = THEOREMS[name]
    return {
        "name": name,
        "verdict": verdict,
        "expected": th.expected,
        "seconds": seconds,
        "rlimit_used": 1_500_000,
        "rlimit_budget": th.budget,
        "statement": th.statement,
        "bounded": th.bounded,
        "variant": None,
        "steps": [],
        "values": {},
        "witnesses": [],
        "message": "",
        "notes": {},
        "traces": [],
        "cpu_seconds": 0.5,
    }


def _units(name: str) -> str:
    return f"1.5M / {THEOREMS[name].budget / 1e6:.1f}M units"


def test_verify_prints_each_theorem_as_its_result_arrives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The pool's results arrive one by one; each line must be out before the next arrives,
    # not after the last one.
    from livetail.verify import runner

    first, second = "live-tail-minimal", "live-tail-hole-never-read"
    seen: list[str] = []
    order: list[str] = []

    def pool(tasks: Any, **kw: Any) -> list[dict[str, Any]]:
        out = []
        for i, (name, _variant) in enumerate(tasks):
            order.append(name)
            r = _result(name, "counterexample" if name == second else "proved", 1.25 + i)
            kw["on_done"](r)
            seen.append(capsys.readouterr().out)
            out.append(r)
        return out

    monkeypatch.setattr(runner, "run_theorems", pool)
    code, report = _verify(tmp_path, "--only", f"{first},{second}", "--examples", "0")
    assert code == cli.EXIT_FAILED
    assert sorted(order) == sorted([first, second])
    lines = [s.strip() for s in seen]
    verdicts = {first: "proved", second: "counterexample (FAILED: expected proved)"}
    for i, name in enumerate(order):
        assert lines[i] == (
            f"[{i + 1}/2] {name}: {verdicts[name]}, z3, {_units(name)}, {1.25 + i:.1f}s"
        )
    final = capsys.readouterr().out
    assert "livetail verify" in final and "FAILED" in final  # the table, at the end


def test_verify_quiet_prints_only_the_final_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from livetail.verify import runner

    def pool(tasks: Any, **kw: Any) -> list[dict[str, Any]]:
        out = [_result(name) for name, _v in tasks]
        for r in out:
            kw["on_done"](r)
        return out

    monkeypatch.setattr(runner, "run_theorems", pool)
    code, _ = _verify(tmp_path, "--only", FAST, "--examples", "0", "--quiet")
    assert code == cli.EXIT_OK
    out = capsys.readouterr().out
    assert f"[1/1] {FAST}" not in out
    assert out.lstrip().startswith("livetail verify")  # the table is the first thing printed
    assert "all checks passed" in out


def test_verify_prints_the_campaigns_progress_as_it_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from livetail.verify import campaign

    def fake(
        examples: int,
        traces_dir: Path,
        seed: int | None = None,
        progress: Any = None,
        stage: Any = None,
    ) -> dict[str, Any]:
        for tier, scenarios in (("device", 8), ("host", 3)):
            for k in range(1, scenarios + 1):
                stage(tier, "scenarios", k, scenarios)
            for k in range(1, examples + 1):
                stage(tier, "examples", k, examples)
        return {
            "examples": examples,
            "host_examples": examples,
            "scenarios": 8,
            "host_scenarios": 3,
            "steps": 1000,
            "host_steps": 369,
            "failures": 0,
            "traces": [],
            "seconds": 0.1,
        }

    monkeypatch.setattr(campaign, "run_campaign", fake)
    code, report = _verify(tmp_path, "--only", "differential", "--examples", "20")
    assert code == cli.EXIT_OK
    out = capsys.readouterr().out
    progress = [line.split(" (")[0] for line in out.splitlines() if line.startswith("campaign, ")]
    # Scenarios about every quarter and at the end, random examples every tenth.
    assert progress == [
        *(f"campaign, device machine: scenarios {k}/8" for k in (2, 4, 6, 8)),
        *(f"campaign, device machine: random examples {k}/20" for k in range(2, 21, 2)),
        *(f"campaign, host-tier machine: scenarios {k}/3" for k in (1, 2, 3)),
        *(f"campaign, host-tier machine: random examples {k}/20" for k in range(2, 21, 2)),
    ]
    assert "campaign: no divergence, 20 + 20 host-tier random examples, 0.1s" in out
    # Not a terminal: the table keeps its full width (a 150-column console cut this row).
    row = "differential campaign (11 scenarios, 20 + 20 host-tier examples, 1369 steps)"
    assert row in out
    assert "…" not in out


def test_verify_prints_a_real_theorems_line_when_it_finishes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import re

    code, report = _verify(tmp_path, "--only", FAST)
    assert code == cli.EXIT_OK
    [t] = report["theorems"]
    line = next(s for s in capsys.readouterr().out.splitlines() if s.startswith("[1/1]"))
    used = f"{t['rlimit_used'] / 1e6:.1f}M"
    assert line == (
        f"[1/1] {FAST}: proved, z3, {used} / {THEOREMS[FAST].budget / 1e6:.1f}M units, "
        f"{t['seconds']:.1f}s"
    )
    assert re.fullmatch(r"\[1/1\] [a-z-]+: proved, z3, \d+\.\dM / \d+\.\dM units, \d+\.\ds", line)


def test_verify_campaign_progress_counts_what_the_campaign_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The real campaign, one random example per machine: the progress lines end on the
    # counts the report gives.
    code, report = _verify(tmp_path, "--only", "differential", "--examples", "1")
    assert code == cli.EXIT_OK
    d = report["differential"]
    out = capsys.readouterr().out.splitlines()
    lines = [s.split(" (")[0] for s in out]
    for machine, key in (("device", "scenarios"), ("host-tier", "host_scenarios")):
        n = d[key]
        assert n > 0
        assert f"campaign, {machine} machine: scenarios {n}/{n}" in lines
        assert f"campaign, {machine} machine: random examples 1/1" in lines
    done = f"campaign: no divergence, 1 + 1 host-tier random examples, {d['seconds']:.1f}s"
    assert done in out
