"""The trace builders of the slot-rule theorems (verify/theorems/prover/slot_traces.py) on
counterexample values other than the ones the theorems' quick runs find: other geometries,
a floor above 0, a naming cursor, a page held by three holders, a plan whose request shares
its pages outside the plan.  Each trace replays green on the spec and reproduces its variant
(tests/test_theorems.py checks the theorems' own counterexamples the same way)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from livetail.verify.replay import main as replay
from livetail.verify.theorems.prover import slot_traces as st
from livetail.verify.trace import write_trace
from livetail.verify.variants import applied

LIVE = "[live-tail sliding (A = m*B)] a step"
SLIDING = "[sliding, live tail off (A = 0)] a step"

CASES: list[tuple[Any, str, str, dict[str, Any], str, list[str]]] = [
    (
        st.reclaim_candidates,
        "reclaim-keeps-band-top",
        LIVE,
        {"B": 2, "W": 3, "m": 2, "count0": 2, "count1": 3, "tail": 1, "floor": 1, "f": 7},
        "spec",
        ["group_acquire", "group_acquire", "group_reclaim", "group_reclaim", "group_reclaim"],
    ),
    (
        st.reclaim_candidates,
        "reclaim-cell-spares-floor",
        SLIDING,
        {"B": 1, "W": 2, "count0": 3, "count1": 1, "tail": 0, "floor": 2, "f": 4},
        "spec",
        ["group_acquire", "group_acquire", "group_reclaim", "group_reclaim", "group_reclaim"],
    ),
    (
        st.reclaimable_candidates,
        "reclaimable-counts-shared",
        "a step",
        {"s": 2, "lo": 0, "hi": 3, "ref": 3, "count_uncached": True},
        "spec",
        ["acquire", "cache", "claim", "claim", "acquire", "reclaim"],
    ),
    (
        st.reclaimable_candidates,
        "reclaimable-ignores-names",
        "a step",
        {"s": 2, "lo": 1, "hi": 3, "ref": 1, "count_uncached": False},
        "spec",
        ["group_acquire", "group_reclaim", "group_reclaim"],
    ),
    (
        st.naming_candidates,
        "names-skip-last-page",
        SLIDING,
        {"B": 1, "W": 3, "slots": 4, "tail": 0, "n": 4, "u": 1},
        "both",
        ["acquire", "cache", "cache", "claim"],
    ),
    (
        st.plan_candidates,
        "plan-fits-strict",
        "[full] a step",
        {"B": 2, "count0_0": 1, "count0_1": 2, "tail_0": 0, "tail_1": 0, "c_0": 1, "c_1": 2}
        | {"F": 1, "n_0": 1, "n_1": 1},
        "spec",
        ["acquire", "acquire", "cache", "claim", "plan"],
    ),
    (
        st.events_candidates,
        "removes-while-copies-remain",
        "a step",
        {"holders": 3},
        "spec",
        ["acquire", "cache"] * 3 + ["evict_names"] * 3,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[1] for c in CASES])
def test_builder_trace_reproduces_its_variant_and_replays_green(
    case: tuple[Any, str, str, dict[str, Any], str, list[str]], tmp_path: Path
) -> None:
    candidates, variant, step, values, impl, kinds = case
    build = st.slot_traces("a-theorem", candidates, impl)
    with applied(variant):
        traces = build("counterexample", [(step, values)], variant)
    assert len(traces) == 1
    tr = traces[0]
    assert [op["op"] for op in tr["ops"]] == kinds
    assert tr["variant"] == variant and tr["observed"]["properties"]
    assert tr["observed"]["values"] == values
    path = write_trace(tr, tmp_path)
    assert replay([str(path), "--impl", impl, "--quiet"]) == 0
    assert replay([str(path), "--impl", impl, "--quiet", "--variant", variant]) == 1


def test_builder_keeps_only_traces_that_fail_and_values_ops_realise() -> None:
    candidates, variant, step, values, *_ = CASES[0]
    build = st.slot_traces("a-theorem", candidates)
    assert build("counterexample", [(step, values)], None) == []  # the spec as it is: green
    with applied(variant):
        assert build("witness", [(step, values)], variant) == []
        assert build("counterexample", [(step, {**values, "tail": 2})], variant) == []  # >= B
        assert build("counterexample", [("[no kind] a step", values)], variant) == []
