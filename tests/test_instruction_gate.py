"""The instruction-count gate (benchmarks/instructions.py, run by .ci/native) fails when it
should and passes when it should.

One build of native/bench/hot.cpp is counted under callgrind: against the committed baseline
the gate passes; against that baseline with one operation's count lowered by 20% it fails,
naming the operation; and a build with a deliberate slowdown compiled in
(LIVETAIL_HOT_SLOWDOWN: dependent additions in every coordinator decode step) fails the CLI
gate with exit 1. Skipped where valgrind or a C++ compiler is missing (about 30 s of CPU).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "instructions.py"

pytestmark = pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("g++") is None,
    reason="the instruction gate needs valgrind and g++",
)


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("instructions", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def gate() -> ModuleType:
    return _module()


@pytest.fixture(scope="module")
def binary(gate: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    built: Path = gate.build(ROOT, tmp_path_factory.mktemp("hot") / "hot")
    return built


@pytest.fixture(scope="module")
def counts(gate: Any, binary: Path) -> dict[str, float]:
    got: dict[str, float] = gate.count(binary)
    return got


def test_counts_are_exact_for_one_binary(gate: Any, binary: Path, counts: dict[str, float]) -> None:
    """Fixed inputs: a second callgrind run of the same binary gives the same counts."""
    assert counts["coordinator.decode"] > 0
    assert gate.count(binary) == counts
    assert set(counts) == set(gate.load_baseline(gate.BASELINE)["operations"])


def test_gate_passes_on_the_committed_baseline(gate: Any, counts: dict[str, float]) -> None:
    baseline = gate.load_baseline(gate.BASELINE)
    if baseline["compiler"] != gate.compiler_id():
        pytest.skip(f"baseline counted with {baseline['compiler']}, not {gate.compiler_id()}")
    assert gate.compare_to_baseline(counts, baseline) == []
    for name, entry in baseline["operations"].items():
        assert entry["reason"].strip(), name


def test_gate_fails_when_a_count_is_20_percent_over_its_baseline(
    gate: Any, counts: dict[str, float]
) -> None:
    baseline = {"compiler": gate.compiler_id(), "operations": {}}
    for name, got in counts.items():
        baseline["operations"][name] = {"instructions": got, "reason": "measured"}
    assert gate.compare_to_baseline(counts, baseline) == []
    lowered = copy.deepcopy(baseline)
    lowered["operations"]["coordinator.decode"]["instructions"] = counts["coordinator.decode"] * 0.8
    failures = gate.compare_to_baseline(counts, lowered)
    assert len(failures) == 1 and failures[0].startswith("coordinator.decode:"), failures
    assert "+25.0% over the baseline" in failures[0]
    # 9% over passes (the limit is 10%); an entry without a reason fails.
    near = copy.deepcopy(baseline)
    near["operations"]["coordinator.decode"]["instructions"] = counts["coordinator.decode"] / 1.09
    assert gate.compare_to_baseline(counts, near) == []
    near["operations"]["table.export_1024"]["reason"] = " "
    assert gate.compare_to_baseline(counts, near) == [
        "table.export_1024: the baseline entry has no reason"
    ]


def test_gate_fails_on_a_deliberate_slowdown(tmp_path: Path, counts: dict[str, float]) -> None:
    """The CLI gate on a build with 60 dependent additions per decode step: exit 1, naming
    the decode step (and only operations that run it)."""
    baseline = tmp_path / "baseline.json"
    ops = {n: {"instructions": c, "reason": "measured"} for n, c in counts.items()}
    gate = _module()
    baseline.write_text(json.dumps({"compiler": gate.compiler_id(), "operations": ops}))
    run = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "check",
            "--baseline",
            str(baseline),
            "--define",
            "LIVETAIL_HOT_SLOWDOWN=60",
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    failed = [line for line in run.stderr.splitlines() if line.startswith("instruction gate: ")]
    assert [f.split(":")[1].strip() for f in failed] == ["coordinator.decode"], run.stderr
    assert "instruction gate failed" in run.stderr
