"""The README's worked examples run and print what the README says."""

from __future__ import annotations

import importlib.util
import re
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
        # Sparse naming (semantics 13.4): the conv group (B=8, lcm 64) names one slot in 8,
        # so fewer names are evicted, and with retention on and live tail off none at 900.
        ["300", "on", "off", "2.8%", "389", "389", "197", "/", "95", "/", "58"],
        ["300", "on", "on", "2.8%", "368", "368", "197", "/", "95", "/", "58"],
        ["900", "off", "off", "61.8%", "227", "227", "216", "/", "112", "/", "448"],
        ["900", "off", "on", "61.8%", "0", "0", "216", "/", "112", "/", "448"],
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
    # Without live tail the conv group names only its pages behind 64-token boundaries
    # (semantics 13.4): with retention its churn never evicts the prompt, every hit is kept.
    plain = wl.run(livetail, w, False, True)
    assert (plain.steps, plain.preemptions, plain.recomputed, round(plain.hit_rate, 3)) == (
        3627, 0, 0, 0.751
    )  # fmt: skip


def _host_rows(out: list[str]) -> tuple[list[list[str]], list[list[str]]]:
    """The host mode's two tables, seconds dropped: (runs, host pages)."""
    rows = [line.split() for line in out if line[:6].strip().isdigit()]
    return [r[:10] for r in rows if len(r) == 11], [r for r in rows if len(r) == 19]


def test_workload_host_tier_mode_prints_the_same_figures_on_both_implementations(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = str(ROOT / "benchmarks" / "workload.py")
    small = ["--requests", "6", "--num-blocks", "300", "--host", "0", "2"]
    tables = []
    for impl in ("spec", "native"):
        monkeypatch.setattr(sys, "argv", [script, "--impl", impl, *small])
        runpy.run_path(script, run_name="__main__")
        tables.append(_host_rows(capsys.readouterr().out.splitlines()))
    assert tables[0] == tables[1]
    runs, pages = tables[1]
    # pool, host, live tail, steps, preempted, recomputed, hit rate, host hit, loaded, short.
    assert runs == [
        ["300", "0", "off", "11", "0", "0", "0.0%", "0", "0", "0"],
        # With no usable host page every offload of a named chunk is short (None).
        ["300", "0", "on", "261", "1", "64", "49.2%", "0", "0", "9"],
        ["300", "600", "off", "11", "0", "0", "0.0%", "0", "0", "0"],
        # The host serves the hits the device evicted: no preemption, a higher hit rate.
        ["300", "600", "on", "260", "0", "0", "61.5%", "4096", "11", "0"],
    ]
    # The conv group names only its pages behind 64-token boundaries (semantics 13.4): 198.
    assert pages[3] == [
        "300", "600", "on", "594", "198", "/", "198", "/", "198",
        "198", "/", "198", "/", "198", "198", "/", "198", "/", "198",
    ]  # fmt: skip


def test_workload_host_tier_figures_of_the_readme() -> None:
    spec = importlib.util.spec_from_file_location("workload", ROOT / "benchmarks" / "workload.py")
    assert spec is not None and spec.loader is not None
    wl = importlib.util.module_from_spec(spec)
    sys.modules["workload"] = wl
    spec.loader.exec_module(wl)
    import livetail

    got = {}
    for nb in (400, 1200):
        w = wl.Workload(num_blocks=nb)
        for factor in (0, 2, 8):
            for live in (False, True):
                r = wl.run(livetail, w, live, True, factor * nb if factor else 1)
                h = r.host
                got[nb, factor, live] = (
                    (r.steps, r.preemptions, r.recomputed, round(r.hit_rate, 3)),
                    (h.host_hit_tokens, h.stats["pages_loaded"], h.short, h.peak_pages),
                    (h.named_by_group, h.offloaded_by_group, h.peak_by_group),
                )
                if factor == 0:
                    # A host pool with no usable page changes nothing: the figures of the
                    # device-only run (retention on).
                    bare = wl.run(livetail, w, live, True)
                    assert bare.host is None
                    assert (bare.steps, bare.preemptions, bare.recomputed, bare.hit_tokens) == (
                        r.steps, r.preemptions, r.recomputed, r.hit_tokens
                    )  # fmt: skip
    # steps, preempted, recomputed, hit rate; host hit tokens, pages loaded, short offloads,
    # named host pages at peak; per group (full, sliding, conv): pages named on the device,
    # pages offloaded, named host pages at peak.
    assert got == {
        (400, 0, False): ((3627, 0, 0, 0.751), (0, 0, 66, 0),
                          ([1306, 1306, 1306], [0, 0, 0], [0, 0, 0])),
        (400, 0, True): ((1306, 2, 128, 0.656), (0, 0, 80, 0),
                         ([1715, 1715, 1715], [0, 0, 0], [0, 0, 0])),
        (400, 2, False): ((3627, 0, 0, 0.751), (0, 0, 0, 799),
                          ([1306, 1306, 1306], [1562, 1370, 1310], [322, 271, 265])),
        (400, 2, True): ((1172, 0, 0, 0.751), (16384, 35, 0, 799),
                         ([1306, 1306, 1306], [1562, 1353, 1308], [322, 271, 265])),
        (400, 8, False): ((3627, 0, 0, 0.751), (0, 0, 0, 3199),
                          ([1306, 1306, 1306], [1370, 1322, 1307], [1121, 1070, 1063])),
        (400, 8, True): ((1172, 0, 0, 0.751), (16384, 35, 0, 3199),
                         ([1306, 1306, 1306], [1370, 1313, 1306], [1121, 1065, 1063])),
        (1200, 0, False): ((421, 0, 0, 0.751), (0, 0, 66, 0),
                           ([1306, 1306, 1306], [0, 0, 0], [0, 0, 0])),
        (1200, 0, True): ((411, 4, 4885, 0.697), (0, 0, 75, 0),
                          ([1511, 1511, 1511], [0, 0, 0], [0, 0, 0])),
        (1200, 2, False): ((421, 0, 0, 0.751), (0, 0, 0, 2399),
                           ([1306, 1306, 1306], [1370, 1322, 1307], [853, 803, 788])),
        (1200, 2, True): ((403, 2, 99, 0.751), (37760, 27, 0, 2399),
                          ([1306, 1306, 1306], [1370, 1316, 1306], [853, 805, 788])),
        (1200, 8, False): ((421, 0, 0, 0.751), (0, 0, 0, 3918),
                           ([1306, 1306, 1306], [1306, 1306, 1306], [1306, 1306, 1306])),
        (1200, 8, True): ((403, 2, 99, 0.751), (37760, 27, 0, 3918),
                          ([1306, 1306, 1306], [1306, 1306, 1306], [1306, 1306, 1306])),
    }  # fmt: skip
    # Only reachable pages go to the host, and only they are named on the device (semantics
    # 13.4): the conv group (B=8) offloads the page behind each 64-token boundary and names as
    # many pages as the full group (B=64), live tail off or on; its host peak is the same with
    # live tail off and on.
    for nb in (400, 1200):
        for factor in (2, 8):
            off, on = (got[nb, factor, live][2] for live in (False, True))
            assert off[0][2] == off[0][0] == on[0][2] == on[0][0] == 1306
            assert off[1][2] <= 1310
            assert off[2][2] == on[2][2]


def test_readme_host_tier_tables_are_the_benchmark_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = str(ROOT / "benchmarks" / "workload.py")
    monkeypatch.setattr(sys, "argv", [script, "--host", "0", "2", "8"])
    runpy.run_path(script, run_name="__main__")
    runs, pages = _host_rows(capsys.readouterr().out.splitlines())
    readme = (ROOT / "README.md").read_text().split("With a host tier (`python benchmarks", 1)[1]
    blocks = [b.split("```", 1)[0] for b in readme.split("```\n")[1::2]][:2]
    assert len(runs) == len(pages) == 12
    assert [line.split() for line in blocks[0].splitlines()[1:]] == runs
    assert [line.split() for line in blocks[1].splitlines()[1:]] == pages


def test_workload_host_tier_copies_the_system_prompt_again_once_the_host_evicts_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = importlib.util.spec_from_file_location("workload", ROOT / "benchmarks" / "workload.py")
    assert spec is not None and spec.loader is not None
    wl = importlib.util.module_from_spec(spec)
    sys.modules["workload"] = wl
    spec.loader.exec_module(wl)
    import livetail

    copies: list[int] = []  # full-group slots offloaded, over every plan
    offload = wl.HostTier.offload

    def counted(self: object, tables: object, num_tokens: int) -> None:
        plans = len(self.plans)  # type: ignore[attr-defined]
        offload(self, tables, num_tokens)
        if len(self.plans) > plans:  # type: ignore[attr-defined]
            plan = self.plans[-1]  # type: ignore[attr-defined]
            copies.extend(j for g, j in zip(wl.ints(plan.groups), wl.ints(plan.slots)) if g == 0)

    monkeypatch.setattr(wl.HostTier, "offload", counted)
    for nb, factor, times in ((400, 2, 5), (400, 8, 2), (1200, 2, 2), (1200, 8, 1)):
        for live in (False, True):
            copies.clear()
            wl.run(livetail, wl.Workload(num_blocks=nb), live, True, factor * nb)
            # Full slots 0-63 hold the 4096-token system prompt every request starts with.
            assert [copies.count(j) for j in range(64)] == [times] * 64


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


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--plot-pool", "999"], "--plot-pool 999 is not one of the pool sizes run"),
        (["--host", "2"], "--plot draws the device-only table"),
        ([], "--plot needs matplotlib: pip install 'livetail[plot]'"),
    ],
    ids=["plot-pool-not-run", "plot-with-host", "no-matplotlib"],
)
def test_workload_plot_options_are_checked_before_the_run(
    tmp_path: Path,
    extra: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--plot is a usage error (exit 2, nothing run) without matplotlib or a pool to plot."""
    script = str(ROOT / "benchmarks" / "workload.py")
    png = tmp_path / "p.png"
    argv = [script, "--num-blocks", "300", "--plot", str(png), "--plot-pool", "300", *extra]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "matplotlib" else real(n, *a)
    )
    with pytest.raises(SystemExit) as e:
        runpy.run_path(script, run_name="__main__")
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and message in err
    assert not png.exists()


def test_pyproject_has_the_plot_extra_the_readme_names() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert 'plot = ["matplotlib>=3.5"]' in text
    assert "needs matplotlib, `pip install 'livetail[plot]'`" in (ROOT / "README.md").read_text()


def test_router_example_prints_the_readme_table(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = str(ROOT / "examples" / "router.py")
    monkeypatch.setattr(sys, "argv", [script])
    runpy.run_path(script, run_name="__main__")
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "3 engines, 150 requests, 258853 prompt tokens",
        "policy             hit rate  recomputed  router claimed",
        "exact                 53.8%      119589          139264",
        "round-robin           28.9%      184101               -",
        "full-groups-only      50.6%      127781          198368",
    ]
    # The exact router reuses what it claimed; the full-groups-only one claimed 67296 tokens
    # more than its engines could reuse.
    assert 258853 - 119589 == 139264
    assert 198368 - (258853 - 127781) == 67296
    assert 127781 - 119589 == 8192
    readme = (ROOT / "README.md").read_text().split("python examples/router.py", 1)[1]
    table = readme.split("```\n", 2)[1]
    assert table.splitlines() == out


def test_router_example_plots_or_says_what_it_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = str(ROOT / "examples" / "router.py")
    png = tmp_path / "router.png"
    monkeypatch.setattr(sys, "argv", [script, "--plot", str(png)])
    if importlib.util.find_spec("matplotlib") is None:
        message = "--plot needs matplotlib: pip install 'livetail[plot]'"
        with pytest.raises(SystemExit, match=re.escape(message)):
            runpy.run_path(script, run_name="__main__")
    else:
        runpy.run_path(script, run_name="__main__")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert capsys.readouterr().out.splitlines()[-1] == f"wrote {png}"
