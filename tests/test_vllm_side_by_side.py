"""Stage 2 at CI size: vLLM 0.33's KVCacheManager and livetail's adapter, step by step.

Runs benchmarks/vllm_side_by_side.py --ci in process. Live tail off, the two managers differ
only through the three rules of docs/vllm_side_by_side.md: with those switched to livetail's
on vLLM's manager, every step's admissions, prefix hits, preemptions, running requests and
pinned pages (per group, during the forward and after the reclaim) are equal. Skipped where
vLLM is not installed.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")
pytest.importorskip("livetail.vllm")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def harness() -> Any:
    # As `python benchmarks/vllm_side_by_side.py` runs: its directory first on the path, for
    # its sibling benchmarks/side_by_side_driver.py.
    bench = str(ROOT / "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    path = ROOT / "benchmarks" / "vllm_side_by_side.py"
    spec = importlib.util.spec_from_file_location("vllm_side_by_side", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses resolve annotations through it
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def rows(harness: Any) -> dict[tuple[str, int], Any]:
    return {(a.layout, a.pool): a for a in harness.agreement_rows(ci=True)}


def test_ci_runs_cover_both_layouts_and_pools(rows: dict[tuple[str, int], Any]) -> None:
    assert sorted(rows) == [("dsv4", 900), ("dsv4", 3000), ("full_swa", 120), ("full_swa", 400)]


def test_vllm_with_livetails_three_rules_agrees_at_every_step(
    rows: dict[tuple[str, int], Any],
) -> None:
    for key, a in rows.items():
        assert a.diffs_rules == [], (key, a.diffs_rules[:3])
        assert a.vllm.drained and a.adapter.drained, key


def test_roomy_pools_agree_without_any_rule(rows: dict[tuple[str, int], Any]) -> None:
    # No named page is evicted: the three rules never come into play.
    for key in (("full_swa", 400), ("dsv4", 3000)):
        a = rows[key]
        assert a.diffs == [], (key, a.diffs[:3])
    assert rows["full_swa", 400].vllm.hit_tokens == 2560
    assert rows["dsv4", 3000].vllm.hit_tokens == 6144


def test_tight_full_swa_pool_differs_by_reclaim_order(rows: dict[tuple[str, int], Any]) -> None:
    # vLLM evicts the highest reclaimed sliding-window slot first, livetail the lowest:
    # r4's prefix keeps its last 8 sliding pages (the resume pages of 256) only in livetail.
    a = rows["full_swa", 120]
    first = a.diffs[0]
    assert first[:2] == (25, "admitted")
    assert first[2] == (("r4", 240), ("r5", 0))
    assert first[3] == (("r4", 256), ("r5", 0))
    assert (a.vllm.hit_tokens, a.adapter.hit_tokens) == (2048, 2080)
    assert (len(a.vllm.steps), len(a.adapter.steps)) == (80, 80)


def test_tight_dsv4_pool_differs_by_names_and_copies(rows: dict[tuple[str, int], Any]) -> None:
    # vLLM names only the compressor pages a hit can use, so its unnamed churn is reused
    # before the shared prefix is evicted; livetail names every page and loses r5's hit.
    a = rows["dsv4", 900]
    first = a.diffs[0]
    assert first[:2] == (10, "admitted")
    assert first[2] == (("r5", 1024),) and first[3] == ()
    assert (a.vllm.hit_tokens, a.adapter.hit_tokens) == (6144, 4096)
    assert (len(a.vllm.steps), len(a.adapter.steps)) == (26, 30)


def _vllm_with_rules(harness: Any, layout: str, pool: int, rules: tuple[str, ...]) -> Any:
    stream = harness.streams(layout, True)[0]
    max_len = max(len(r.prompt) + r.max_tokens for r in stream.requests) + 1
    m = harness.make_manager("vllm", layout, pool, stream, max_len, rules=rules)
    return harness.run_stream(m, stream, layout, "")


def test_reclaim_order_alone_explains_the_full_swa_difference(
    harness: Any, rows: dict[tuple[str, int], Any]
) -> None:
    v = _vllm_with_rules(harness, "full_swa", 120, ("reclaim-order",))
    assert harness.differences(v, rows["full_swa", 120].adapter) == []


def test_pinned_copy_explains_what_remains_on_dsv4(
    harness: Any, rows: dict[tuple[str, int], Any]
) -> None:
    v = _vllm_with_rules(harness, "dsv4", 900, ("reclaim-order", "dense-names"))
    d = harness.differences(v, rows["dsv4", 900].adapter)
    assert d[0][:2] == (17, "admitted")
    assert d[0][2] == (("r6", 1024),) and d[0][3] == (("r6", 1024), ("r7", 0))


def test_vllm_same_on_mla_and_plain_specs(harness: Any) -> None:
    stream = harness.streams("dsv4", True)[0]
    max_len = max(len(r.prompt) + r.max_tokens for r in stream.requests) + 1
    runs = [
        harness.run_stream(
            harness.make_manager("vllm", "dsv4", 900, stream, max_len, mla=mla), stream, "dsv4", ""
        )
        for mla in (True, False)
    ]
    assert harness.differences(*runs) == []
    mla_manager = harness.make_manager("vllm", "dsv4", 900, stream, max_len, mla=True)
    kinds = [type(g.kv_cache_spec).__name__ for g in mla_manager.kv_cache_config.kv_cache_groups]
    assert kinds == ["MLAAttentionSpec"] + ["SlidingWindowMLASpec"] * 4


@pytest.fixture(scope="module")
def live_rows(harness: Any) -> list[Any]:
    return harness.live_tail_rows(ci=True)


def test_live_tail_runs_the_long_prompts_vllm_never_admits(live_rows: list[Any]) -> None:
    # vllm-ascend #15204's prompts (32 850 / 51 976 / 63 778 tokens, 64 Ki-token steps) on a
    # pool of 6 958 free pages: vLLM's first chunk needs more than the pool, forever.
    name, pool, v, lt = live_rows[0]
    assert (name, pool) == ("long prompts (#15204)", 6959)
    assert v.wedged_at == 0 and v.finished == 0 and v.peak_pages == 0
    assert lt.drained and len(lt.steps) == 9
    assert lt.max_running == 2 and lt.peak_pages == 6931
    # per group during the first forward: MLA, SWA, SWA, ratio-4 state, ratio-128 state
    assert lt.steps[0].pinned_forward == [257, 1025, 1025, 516, 4108]


def test_live_tail_drains_a_shared_prefix_stream_vllm_wedges_on(live_rows: list[Any]) -> None:
    name, pool, v, lt = live_rows[1]
    assert pool == 900
    assert v.wedged_at == 5 and v.finished == 0 and v.peak_pages == 0
    assert lt.drained and len(lt.steps) == 12
    assert lt.max_running == 5 and lt.peak_pages == 822
