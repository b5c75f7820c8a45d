"""The README's worked examples run and print what the README says."""

from __future__ import annotations

import importlib.util
import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_engine_loop_example_drains_with_preemption_and_hits_and_returns_every_page(
    capsys: pytest.CaptureFixture[str],
) -> None:
    runpy.run_path(str(ROOT / "examples" / "engine_loop.py"), run_name="__main__")
    assert capsys.readouterr().out.splitlines() == [
        "steps 68 preemptions 2 hit tokens 19072",
        "free pages 599 of 599 cached 556",
    ]


def test_workload_benchmark_drains_with_the_same_figures_on_both_implementations(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = str(ROOT / "benchmarks" / "workload.py")
    for impl in ("spec", "native"):
        monkeypatch.setattr(
            sys,
            "argv",
            [script, "--impl", impl, "--requests", "6", "--num-blocks", "300", "900"],
        )
        runpy.run_path(script, run_name="__main__")
    out = capsys.readouterr().out.splitlines()
    pools = [line.split() for line in out if line.split()[:1] in (["300"], ["900"])]
    rows = [r[:9] for r in pools if len(r) == 10]
    counters = [r for r in pools if len(r) == 11]
    # Same workload, same decisions: both implementations print the same figures.
    assert len(rows) == 16
    assert counters[:8] == counters[8:]
    # pool, live tail, retention, hit rate of every match_prefix call, evicted pages, removed
    # names, peak pinned pages of the full, sliding and conv groups (coordinator.stats()).
    assert counters[:8] == [
        ["300", "off", "off", "0.0%", "0", "0", "0", "/", "0", "/", "0"],
        ["300", "off", "on", "0.0%", "0", "0", "0", "/", "0", "/", "0"],
        ["300", "on", "off", "2.8%", "391", "391", "197", "/", "95", "/", "58"],
        ["300", "on", "on", "2.8%", "370", "370", "197", "/", "95", "/", "58"],
        ["900", "off", "off", "61.8%", "1234", "1234", "216", "/", "112", "/", "448"],
        ["900", "off", "on", "61.8%", "1142", "1142", "216", "/", "112", "/", "448"],
        ["900", "on", "off", "61.8%", "0", "0", "216", "/", "112", "/", "58"],
        ["900", "on", "on", "61.8%", "0", "0", "216", "/", "112", "/", "58"],
    ]
    assert rows[:8] == rows[8:]
    # pool, live tail, retention, steps, preempted, recomputed, hit rate, peak, rejected.
    assert rows[:8] == [
        # Without live tail a 2048-token chunk needs 256 conv pages: no request can ever fit.
        ["300", "off", "off", "11", "0", "0", "0.0%", "0", "6"],
        ["300", "off", "on", "11", "0", "0", "0.0%", "0", "6"],
        # With live tail every request runs; one preemption, its 64 decode tokens recomputed.
        ["300", "on", "off", "261", "1", "64", "49.2%", "299", "0"],
        ["300", "on", "on", "261", "1", "64", "49.2%", "299", "0"],
        ["900", "off", "off", "139", "0", "0", "61.5%", "642", "0"],
        ["900", "off", "on", "139", "0", "0", "61.5%", "642", "0"],
        ["900", "on", "off", "139", "0", "0", "61.5%", "341", "0"],
        ["900", "on", "on", "139", "0", "0", "61.5%", "341", "0"],
    ]


def test_workload_retention_rule_raises_the_hit_rate_of_a_tight_pool() -> None:
    spec = importlib.util.spec_from_file_location("workload", ROOT / "benchmarks" / "workload.py")
    assert spec is not None and spec.loader is not None
    wl = importlib.util.module_from_spec(spec)
    sys.modules["workload"] = wl
    spec.loader.exec_module(wl)
    import livetail

    w = wl.Workload(num_blocks=400)
    off, on = (wl.run(livetail, w, True, retention) for retention in (False, True))
    # 64 requests drain in both; keeping named pages behind unnamed ones keeps more hits.
    assert (off.steps, off.preemptions, off.recomputed, off.rejected) == (1441, 5, 8875, 0)
    assert (on.steps, on.preemptions, on.recomputed, on.rejected) == (1306, 2, 128, 0)
    assert (round(off.hit_rate, 3), round(on.hit_rate, 3)) == (0.578, 0.656)


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
