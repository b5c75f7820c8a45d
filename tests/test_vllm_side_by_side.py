"""Stage 2 at CI size: vLLM 0.33's KVCacheManager and livetail's adapter, step by step.

Runs benchmarks/vllm_side_by_side.py --ci in process, at vLLM 0.33's defaults (the
whole-prompt check ``full_sequence_must_fit=True``, two batches in flight for async
scheduling) and with DeepSeek-V4's specs as vLLM builds them. Live tail off, the two managers
differ only through the two rules of docs/vllm_side_by_side.md (reclaim order, which copy a
hit takes): with those switched to livetail's on vLLM's manager, every step's admissions,
prefix hits, preemptions, running requests and pinned pages (per group, during the forward
and after the reclaim) are equal. The whole-prompt charges are equal at vLLM's defaults.
Skipped where vLLM is not installed."""

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


def test_the_rules_are_reclaim_order_and_pinned_copy(harness: Any) -> None:
    assert harness.RULES == ("reclaim-order", "pinned-copy")
    stream = harness.streams("full_swa", True)[0]
    with pytest.raises(ValueError, match="dense-names"):
        harness.make_manager("vllm", "full_swa", 120, stream, 1000, rules=("dense-names",))


def test_vllm_with_livetails_rules_agrees_at_every_step(
    rows: dict[tuple[str, int], Any],
) -> None:
    for key, a in rows.items():
        assert a.diffs_rules == [], (key, a.diffs_rules[:3])
        assert a.vllm.drained and a.adapter.drained, key


def test_roomy_pools_agree_without_any_rule(rows: dict[tuple[str, int], Any]) -> None:
    # No named page is evicted: the rules never come into play.
    for key in (("full_swa", 400), ("dsv4", 3000)):
        a = rows[key]
        assert a.diffs == [], (key, a.diffs[:3])
    assert rows["full_swa", 400].vllm.hit_tokens == 2560
    assert rows["dsv4", 3000].vllm.hit_tokens == 6144


def test_tight_dsv4_pool_agrees_without_any_rule(rows: dict[tuple[str, int], Any]) -> None:
    # Sparse naming (semantics 13.4): livetail names the compressor pages vLLM's
    # reachable_block_mask names, so r5 keeps its 1024-token hit on both.
    a = rows["dsv4", 900]
    assert a.diffs == [], a.diffs[:3]
    assert a.vllm.hit_tokens == a.adapter.hit_tokens == 6144
    assert len(a.vllm.steps) == len(a.adapter.steps) == 26
    assert a.vllm.steps[10].admitted == [("r5", 1024)]


def test_tight_full_swa_pool_differs_by_both_rules(rows: dict[tuple[str, int], Any]) -> None:
    # vLLM evicts the highest reclaimed sliding-window slot first, livetail the lowest, and
    # vLLM's hit may take a free copy of a pinned page: r8's whole-prompt check passes at
    # step 46 on vLLM's manager only.
    a = rows["full_swa", 120]
    first = a.diffs[0]
    assert first[:2] == (46, "admitted")
    assert first[2] == (("r8", 256),) and first[3] == ()
    assert (a.vllm.hit_tokens, a.adapter.hit_tokens) == (2048, 1792)
    assert (len(a.vllm.steps), len(a.adapter.steps)) == (81, 84)


def _vllm_with_rules(harness: Any, layout: str, pool: int, rules: tuple[str, ...]) -> Any:
    stream = harness.streams(layout, True)[0]
    max_len = max(len(r.prompt) + r.max_tokens for r in stream.requests) + 1
    m = harness.make_manager("vllm", layout, pool, stream, max_len, rules=rules)
    return harness.run_stream(m, stream, layout, "")


@pytest.mark.parametrize("rule", ["reclaim-order", "pinned-copy"])
def test_each_rule_alone_leaves_a_difference_on_full_swa(
    harness: Any, rows: dict[tuple[str, int], Any], rule: str
) -> None:
    v = _vllm_with_rules(harness, "full_swa", 120, (rule,))
    d = harness.differences(v, rows["full_swa", 120].adapter)
    if rule == "pinned-copy":  # the reclaim order left: r8's admission at step 46 differs
        assert d[0][:2] == (46, "admitted")
    else:  # the copy left: vLLM's step-59 hit takes free copies of 16 pinned full pages,
        # so the adapter admits r10 a step earlier
        assert d[0][:2] == (59, "pinned per group")
        assert d[0][2:] == ((65, 38), (49, 38))
        assert (60, "admitted", (), (("r10", 256),)) in d


def test_whole_prompt_charges_equal_vllms_at_its_defaults(harness: Any) -> None:
    # vLLM's default async scheduling: two batches in flight, C = 2 x the step budget.
    # The adapter's charge (semantics 13.1; with a prefix hit counted before the claim)
    # equals vLLM's on every check of both layouts.
    assert harness.MAX_CONCURRENT_BATCHES == 2
    for layout, pool in (("dsv4", 900), ("dsv4", 3000), ("full_swa", 120), ("full_swa", 400)):
        charges = harness.admission_charges(layout, pool, True)
        assert [r for r, x, _, y in charges if x != y] == [], (layout, pool)
    assert len(harness.admission_charges("dsv4", 900, True)) == 8


def test_without_async_two_hits_pass_vllms_charge_not_its_first_chunk(harness: Any) -> None:
    # One batch in flight (C = the step budget, 2048): r4 and r5 have 1024-token hits and
    # each computes the rest of its prompt in one chunk. vLLM's whole-prompt charge caps a
    # sliding group at ceil((W - 1 + C) / B) + 1 less the hit's blocks, below what that
    # chunk takes, so the same allocate_slots call then refuses unless the chunk's own
    # charge fits: the adapter's charge is exactly that chunk's, never above both checks.
    harness.driver.MAX_CONCURRENT_BATCHES = 1
    try:
        charges = harness.admission_charges("dsv4", 900, True)
    finally:
        harness.driver.MAX_CONCURRENT_BATCHES = 2
    assert [(r, x, c, y) for r, x, c, y in charges if x != y] == [
        ("r4", 470, 591, 591),
        ("r5", 469, 515, 515),
    ]
    assert all(y <= max(x, c) for _, x, c, y in charges)
    assert "2 above (by 46 to 121 pages), 0 below; against its two checks: 0 above, 0 below" in (
        harness.charge_summary(charges)
    )


def test_dsv4_runs_on_the_specs_vllm_builds(harness: Any) -> None:
    # MLA B=256 and four SlidingWindowMLASpec groups, with DeepSeek-V4's sizes, on both.
    stream = harness.streams("dsv4", True)[0]
    max_len = max(len(r.prompt) + r.max_tokens for r in stream.requests) + 1
    groups = harness.driver.kv_cache_config("dsv4", 900).kv_cache_groups
    specs = [g.kv_cache_spec for g in groups]
    assert [type(s).__name__ for s in specs] == ["MLAAttentionSpec"] + ["SlidingWindowMLASpec"] * 4
    assert [s.block_size for s in specs] == [256, 64, 64, 4, 8]
    assert [getattr(s, "sliding_window", None) for s in specs] == [None, 128, 128, 8, 128]
    assert [s.head_size for s in specs] == [512, 512, 512, 2048, 1024]
    assert specs[0].model_version == specs[1].model_version == "deepseek_v4"
    assert not any(getattr(s, "bounded_replay", False) for s in specs)
    lt = harness.make_manager("livetail", "dsv4", 900, stream, max_len)
    assert [g.kind for g in lt.livetail_coordinator.specs] == ["full"] + ["sliding"] * 4
    v = harness.make_manager("vllm", "dsv4", 900, stream, max_len)
    assert [type(m).__name__ for m in v.coordinator.single_type_managers] == [
        "FullAttentionManager"
    ] + ["SlidingWindowManager"] * 4
    # vLLM's cap ceil(min(W - 1 + C, max_model_len) / B) + 1 with C = 2 x 2048 in flight.
    cap = -(-min(127 + 2 * 2048, max_len) // 64) + 1
    assert v.coordinator.single_type_managers[1].max_admission_blocks_per_request == cap
    assert lt.max_in_flight_tokens == 2 * 2048


@pytest.fixture(scope="module")
def live_rows(harness: Any) -> list[Any]:
    return harness.live_tail_rows(ci=True)


def test_live_tail_runs_the_long_prompts_vllm_never_admits(live_rows: list[Any]) -> None:
    # vllm-ascend #15204's prompts (32 850 / 51 976 / 63 778 tokens, 64 Ki-token steps) on a
    # pool of 6 958 free pages: vLLM's first chunk needs more than the pool, forever; so does
    # the adapter's with live tail off.
    row = live_rows[0]
    assert (row.stream, row.pool) == ("long prompts (#15204)", 6959)
    for r in (row.vllm, row.off):
        assert r.wedged_at == 0 and r.finished == 0 and r.peak_pages == 0
    lt = row.on
    assert lt.drained and len(lt.steps) == 9 and lt.preemptions == 0 and lt.hit_tokens == 0
    assert lt.max_running == 2 and lt.peak_pages == 6734
    # The whole-prompt check holds L1 (51 976 tokens) back while L0 is in its only chunk:
    # per group during the first forward (MLA, SWA, SWA, ratio-4 state, ratio-128 state)
    # only L0's pages, L1 admitted at step 1.
    assert lt.steps[0].admitted == [("L0", 0)] and lt.steps[1].admitted == [("L1", 0)]
    assert lt.steps[0].pinned_forward == [129, 514, 514, 259, 2059]


def test_live_tail_drains_a_shared_prefix_stream_vllm_wedges_on(live_rows: list[Any]) -> None:
    row = live_rows[1]
    assert row.pool == 900
    for r in (row.vllm, row.off):
        assert r.wedged_at == 5 and r.finished == 0 and r.peak_pages == 0
    lt = row.on
    assert lt.drained and len(lt.steps) == 12 and lt.preemptions == 0
    assert lt.max_running == 5 and lt.peak_pages == 822 and lt.hit_tokens == 1024


def test_readme_live_tail_table_is_the_ci_run(harness: Any, live_rows: list[Any]) -> None:
    # The README's DeepSeek-V4 table is this run's, line for line.
    lines: list[str] = []
    harness.print_live_tail(live_rows, lines.append)
    readme = (ROOT / "README.md").read_text()
    start = readme.index(lines[0])
    assert readme[start:].splitlines()[: len(lines)] == lines
    assert len(lines) == 2 + 3 * len(live_rows)


def test_admission_table_dsv4_rows(harness: Any) -> None:
    # benchmarks/admission_table.py's DeepSeek-V4 rows at 3000 tokens (docs/vllm_side_by_side.md):
    # on vLLM's own specs the adapter's smallest admitting pool is vLLM's; with live tail on
    # the two compressor-state groups, 344 blocks against 1232.
    path = ROOT / "benchmarks" / "admission_table.py"
    spec = importlib.util.spec_from_file_location("admission_table", path)
    assert spec is not None and spec.loader is not None
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    assert table.row("DeepSeek-V4 (vLLM's specs), live tail off", 3000) == (1232, 1232)
    assert table.row("DeepSeek-V4, live tail on the compressor states", 3000) == (1232, 344)
