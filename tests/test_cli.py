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


def test_verify_mutants_passes_when_every_variant_is_killed(tmp_path: Path) -> None:
    only = ",".join(
        [
            "live-tail-hole-never-read",
            "sequential-charge-exact",
            "reclaim-bounded",
            "acquire-all-or-nothing-bounded",
            "acquire-places-holes-outside-every-window",
            "reclaim-exact-with-shared-pages",
        ]
    )
    # --timeout is a hang guard: a counterexample under a variant can take a loaded machine
    # a minute.
    code, report = _verify(
        tmp_path, "--only", only, "--mutants", "--examples", "0", "--timeout", "180"
    )
    assert code == cli.EXIT_OK, report.get("mutants")
    m = report["mutants"]
    assert m["ok"] is True
    assert m["variants"]["combined-charge"]["killed_by"] == ["sequential-charge-exact"]
    assert m["variants"]["reclaim-stops-at-hole"]["killed_by"] == ["reclaim-bounded"]
    assert m["variants"]["acquire-before-check"]["killed_by"] == ["acquire-all-or-nothing-bounded"]
    assert "live-tail-hole-never-read" in m["variants"]["live-off-by-one"]["killed_by"]
    holes = "acquire-places-holes-outside-every-window"
    for v in ("acquire-frontier-minus-one", "real-pages-packed-first", "slid-out-off-by-one"):
        assert holes in m["variants"][v]["killed_by"], v
    for v in ("reclaim-keeps-band-top", "reclaimable-counts-shared", "reclaim-floor-to-bound"):
        assert "reclaim-exact-with-shared-pages" in m["variants"][v]["killed_by"], v
    assert m["traces"]  # every kill left a replayable trace


def test_verify_reports_a_campaign_that_cannot_run_as_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from livetail.verify import campaign
    from livetail.verify.machine import NativeUnavailable

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
        examples: int, traces_dir: Path, seed: int | None = None, progress: Any = None
    ) -> dict[str, Any]:
        seen.update(examples=examples, traces_dir=traces_dir, seed=seed)
        if progress is not None:
            progress(examples, examples)
        return {"examples": examples, "failures": 0, "traces": [], "seconds": 0.1}

    monkeypatch.setattr(campaign, "run_campaign", fake)
    code, report = _verify(tmp_path, "--only", "differential", "--examples", "7", "--seed", "5")
    assert code == cli.EXIT_OK
    assert seen == {"examples": 7, "traces_dir": tmp_path / "traces", "seed": 5}
    assert report["theorems"] == []
    assert report["differential"]["examples"] == 7 and report["differential"]["ok"] is True


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
