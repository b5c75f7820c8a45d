"""Stage 2 at CI size: vLLM 0.33's KVCacheManager and livetail's adapter, step by step.

Runs benchmarks/vllm_side_by_side.py --ci in process, admissions with the whole-prompt check
(``full_sequence_must_fit=True``, vLLM 0.33's default). Live tail off, the two managers differ
only through the two rules of docs/vllm_side_by_side.md (reclaim order, which copy a hit
takes): with those switched to livetail's on vLLM's manager, every step's admissions, prefix
hits, preemptions, running requests and pinned pages (per group, during the forward and after
the reclaim) are equal. Naming no longer differs (both name only the sliding-window pages a
hit can use), and the whole-prompt charges differ only for requests with a prefix hit,
without changing any admission here. Skipped where vLLM is not installed.
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


def test_whole_prompt_charges_differ_only_with_a_prefix_hit(
    harness: Any, rows: dict[tuple[str, int], Any]
) -> None:
    # vLLM caps a sliding group's charge at ceil((W - 1 + C) / B) + 1 pages; livetail
    # charges the exact peak of its chunks but counts the pages a hit claims as held to the
    # end (docs/decisions.md), so it may charge more for a request with a hit. No
    # admission changes: the pool has room for either charge when they are asked.
    charges = harness.admission_charges("dsv4", 900, True)
    assert [(r, x, y) for r, x, y in charges if x != y] == [("r4", 470, 591), ("r5", 469, 515)]
    assert len(charges) == 8
    admitted = dict(x for s in rows["dsv4", 900].adapter.steps for x in s.admitted)
    # r1, r2, r6 and r7 have 1024-token hits too, charged alike; r0 and r3 have none.
    assert admitted == {f"r{i}": 0 if i in (0, 3) else 1024 for i in range(8)}
    for r, x, y in harness.admission_charges("full_swa", 120, True):
        assert x == y, r


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
    assert lt.max_running == 2 and lt.peak_pages == 6734
    # The whole-prompt check holds L1 (51 976 tokens) back while L0 is in its only chunk:
    # per group during the first forward (MLA, SWA, SWA, ratio-4 state, ratio-128 state)
    # only L0's pages, L1 admitted at step 1.
    assert lt.steps[0].admitted == [("L0", 0)] and lt.steps[1].admitted == [("L1", 0)]
    assert lt.steps[0].pinned_forward == [129, 514, 514, 259, 2059]


def test_live_tail_drains_a_shared_prefix_stream_vllm_wedges_on(live_rows: list[Any]) -> None:
    name, pool, v, lt = live_rows[1]
    assert pool == 900
    assert v.wedged_at == 5 and v.finished == 0 and v.peak_pages == 0
    assert lt.drained and len(lt.steps) == 12
    assert lt.max_running == 5 and lt.peak_pages == 822
