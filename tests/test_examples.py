"""The README's worked examples run and print what the README says."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_engine_loop_example_hits_the_shared_prompt_and_returns_every_page(
    capsys: pytest.CaptureFixture[str],
) -> None:
    runpy.run_path(str(ROOT / "examples" / "engine_loop.py"), run_name="__main__")
    assert capsys.readouterr().out.splitlines() == [
        "first request hit 0 tokens",
        "second request hit 4992 tokens",
        "free pages 4095 of 4095 cached 234",
    ]


def test_workload_benchmark_runs_on_both_implementations(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = str(ROOT / "benchmarks" / "workload.py")
    for impl in ("spec", "native"):
        monkeypatch.setattr(
            sys, "argv", [script, "--impl", impl, "--requests", "6", "--num-blocks", "900"]
        )
        runpy.run_path(script, run_name="__main__")
    out = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in out if line.strip().startswith("900")]
    # Same workload, same decisions: both implementations print the same figures.
    assert len(rows) == 4
    assert [r[:7] for r in rows[:2]] == [r[:7] for r in rows[2:]]


def test_readme_ten_line_example_runs_with_the_figures_it_states() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Ten lines", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    ns: dict[str, object] = {}
    exec(block, ns)
    # 8192 tokens + 1 decode token: (32 + 1) + (64 + 1) + (64 + 1) pages.
    assert ns["charge"] == 163
    ids = ns["ids"]
    assert len(ids) == 1024  # type: ignore[arg-type]
    assert [s for s, p in enumerate(ids) if p][:4] == [30, 31, 62, 63]  # type: ignore[call-overload]
    # After reclaim and free every page is back.
    assert ns["pool"].num_free == (1 << 16) - 1  # type: ignore[attr-defined]
