"""``livetail replay``: exit status, step-by-step output, and the kept regression traces."""

from __future__ import annotations

import importlib
import io
import json
import types
from pathlib import Path
from typing import Any

import pytest
from livetail.verify import replay
from livetail.verify.machine.side import Impl
from livetail.verify.trace import load_trace, make_trace, write_trace

TRACES = Path(__file__).parent / "traces"
KEPT = sorted(TRACES.rglob("*.json"))

LIVE_17_THEN_2 = [
    {"kind": "full", "block_size": 256},
    {"kind": "sliding", "block_size": 8, "sliding_window": 12, "live_tail_alloc": True},
]


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return replay.main(list(argv), out=out), out.getvalue()


def _witness(tmp_path: Path, variant: str | None = "combined-charge") -> Path:
    trace = make_trace(
        LIVE_17_THEN_2,
        num_blocks=40,
        num_requests=1,
        ops=[{"op": "admit", "request": 0, "chunk": 17, "reserve": 2}],
        title="17 then 2",
        origin="z3",
        variant=variant,
    )
    return write_trace(trace, tmp_path)


def test_witness_replays_green_and_prints_sequential_and_combined_charge_and_take(
    tmp_path: Path,
) -> None:
    code, text = _run(str(_witness(tmp_path)), "--impl", "both")
    assert code == 0, text
    # Full group: 1 page either way; live group: 3 pages for 17 then 2, 2 for 19 at once.
    assert (
        "charge      sequential 4 (slot by slot 4), combined 3, chunk need 4, free 39 "
        "| took chunk 4 + decode 0 = 4, peak 4"
    ) in text
    assert "running   spec vs native" in text
    assert "properties  agree ok  closed-form ok  sequential-charge ok" in text
    assert text.rstrip().endswith(
        "result    OK: 1 step(s), spec and native agree, every property holds on spec, native "
        "(exit 0)"
    )


def test_witness_under_combined_charge_variant_reproduces_the_under_charge(tmp_path: Path) -> None:
    code, text = _run(str(_witness(tmp_path)), "--impl", "both", "--variant", "combined-charge")
    assert code == 1, text
    assert "running   spec[combined-charge] vs native" in text
    assert "sequential 3 (slot by slot 4)" in text
    assert "chunk took 4 + decode took 0 = 4, sequential charge 3" in text
    assert "result    REPRODUCED at step 0 admit(request=0, chunk=17, reserve=2)" in text
    assert "agree FAIL" in text  # the patched spec no longer matches native's answers


def test_trace_recorded_against_a_variant_replays_the_real_spec_and_says_so(
    tmp_path: Path,
) -> None:
    code, text = _run(str(_witness(tmp_path)), "--impl", "spec")
    assert code == 0
    assert (
        "note      recorded against the wrong variant 'combined-charge'; this replays the real "
        "spec (add --variant combined-charge to reproduce the recording)"
    ) in text


def test_trace_without_variant_prints_no_variant_note(tmp_path: Path) -> None:
    code, text = _run(str(_witness(tmp_path, variant=None)), "--impl", "spec")
    assert code == 0
    assert "note" not in text


def test_quiet_replay_prints_only_the_result(tmp_path: Path) -> None:
    code, text = _run(str(_witness(tmp_path)), "--impl", "spec", "--quiet")
    assert code == 0
    assert text == "result    OK: 1 step(s), every property holds on spec (exit 0)\n"


def test_replay_stops_after_the_first_failing_step_unless_keep_going(tmp_path: Path) -> None:
    trace = make_trace(
        [{"kind": "full", "block_size": 1}],
        num_blocks=2,
        num_requests=1,
        ops=[
            {"op": "group_acquire", "request": 0, "group": 0, "tokens": 2},
            {"op": "decode", "request": 0},
        ],
        title="t",
        origin="manual",
    )
    path = str(write_trace(trace, tmp_path))
    code, text = _run(path, "--impl", "spec", "--variant", "acquire-before-check")
    assert code == 1
    assert "stopped after the failing step (1 op(s) not run; --keep-going)" in text
    assert "step 1" not in text
    code, text = _run(path, "--impl", "spec", "--variant", "acquire-before-check", "--keep-going")
    assert code == 1
    assert "step 1  decode(request=0)" in text
    assert "REPRODUCED at step 0 group_acquire(request=0, group=0, tokens=2)" in text


def test_unreadable_trace_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert replay.main([str(bad)]) == 2
    assert f"livetail replay: {bad} is not valid JSON" in capsys.readouterr().err


def test_missing_trace_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert replay.main([str(tmp_path / "nope.json")]) == 2
    assert "cannot read trace" in capsys.readouterr().err


def test_variant_with_native_only_is_a_usage_error(tmp_path: Path) -> None:
    assert (
        replay.main([str(_witness(tmp_path)), "--impl", "native", "--variant", "live-off-by-one"])
        == 2
    )


def test_unknown_variant_is_rejected_by_the_parser(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as e:
        replay.main([str(_witness(tmp_path)), "--variant", "no-such-variant"])
    assert e.value.code == 2


def test_kept_traces_exist() -> None:
    names = {p.relative_to(TRACES).as_posix() for p in KEPT}
    assert {
        "reference-8192-tokens.json",
        "prefix-hit-share-and-stale-match.json",
        "sequential-charge-17-then-2.json",
        "variants/combined-charge.json",
        "variants/live-off-by-one.json",
        "variants/reclaim-stops-at-hole.json",
        "variants/acquire-before-check.json",
        "host-round-trip.json",
        "variants/evict-pinned-host-page.json",
        "names-reset-evict-detach.json",
    } <= names


def _uses_prefix_caching_native_lacks(path: Path) -> bool:
    uses = any(op["op"] in replay.PREFIX_OPS for op in load_trace(path)["ops"])
    return uses and not hasattr(importlib.import_module("livetail").Coordinator, "match_prefix")


@pytest.mark.parametrize("path", KEPT, ids=[p.relative_to(TRACES).as_posix() for p in KEPT])
def test_kept_trace_replays_green_on_spec_and_native(path: Path) -> None:
    if _uses_prefix_caching_native_lacks(path):
        pytest.skip("the native module has no prefix caching (semantics section 8) yet")
    code, text = _run(str(path), "--impl", "both")
    assert code == 0, text


def test_prefix_trace_replays_green_on_the_spec_with_a_stale_claim_refused() -> None:
    code, text = _run(str(TRACES / "prefix-hit-share-and-stale-match.json"), "--impl", "spec")
    assert code == 0, text
    assert (
        "charge      match 16 tokens, pages [[1, 2, 3, 4], [0, 0, 0, 0, 0, 0, 0, 8], "
        "[0, 0, 0, 12]], blocks_consumed_by_claim 6\n"
    ) in text
    assert "blocks_consumed_by_claim raise ValueError | between: acquire True" in text


@pytest.mark.parametrize(
    "path",
    [p for p in KEPT if load_trace(p)["variant"]],
    ids=[p.relative_to(TRACES).as_posix() for p in KEPT if load_trace(p)["variant"]],
)
def test_kept_variant_trace_still_catches_its_variant(path: Path) -> None:
    trace: dict[str, Any] = load_trace(path)
    code, text = _run(str(path), "--impl", "both", "--variant", trace["variant"])
    assert code == 1, text


def test_reference_trace_takes_32_64_64_pages_for_8192_tokens() -> None:
    code, text = _run(str(TRACES / "reference-8192-tokens.json"), "--impl", "both")
    assert code == 0
    assert "charge      blocks_needed_for 160 (per group [32, 64, 64]), free 199 | took 160" in text
    # The live group keeps slots 1022 and 1023 in the window: 62 of its 64 pages come back.
    assert "charge      blocks_reclaimable_at [0, 60, 62] | released 122" in text


def test_trace_files_are_json_with_the_documented_header() -> None:
    for path in KEPT:
        data = json.loads(path.read_text())
        assert list(data)[:4] == ["format", "version", "title", "origin"]
        assert (data["format"], data["version"]) == ("livetail-trace", 1)


def test_replay_blames_only_the_side_that_diverged() -> None:
    # The wrong variant takes a page on a failed acquire; native replays clean alone. Each
    # side's int32-limit questions come from its own table shape, so native is not blamed.
    path = str(TRACES / "shortfall-mid-batch.json")
    code, text = _run(path, "--impl", "both", "--variant", "acquire-before-check")
    assert code == 1
    result = text[text.index("result    REPRODUCED") :]
    assert "result    REPRODUCED at step 1 group_acquire(request=1, group=0, tokens=3): " in result
    assert "agree, all-or-nothing, table-shape (exit 1)" in result
    assert "\n          native: " not in result  # no property of native's own fails
    assert "spec[acquire-before-check]: all-or-nothing: failed acquire changed" in result
    code, _ = _run(path, "--impl", "native")
    assert code == 0


# --- host-tier traces (geometry host_blocks, host_* ops; verify/machine/host.py) --------


def test_host_trace_replays_green_with_a_match_served_by_both_tiers() -> None:
    code, text = _run(str(TRACES / "host-round-trip.json"), "--impl", "both")
    assert code == 0, text
    assert (
        "geometry  g0 full B=4; g1 sliding B=2 W=5 live; g2 state B=4 | lcm 4 | pool 16 pages "
        "(15 usable) | host pool 24 pages (23 usable) | 3 request(s)\n"
    ) in text
    # Eviction left the sliding and state groups' names on the device, the full group's
    # only on the host: the match takes the full group's 4 slots from the host.
    assert (
        "step 10  host_claim(request=1, doc=0, tokens=16)\n"
        "  returned    match (16, [[0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 10, 13], [0, 0, 0, 14]], "
        "[[1, 2, 3, 4], [0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0]]), consumed 7, raised None, "
        "load ([0, 0, 0, 0], [0, 1, 2, 3], [3, 2, 1, 6], [1, 2, 3, 4], 'pending')\n"
    ) in text
    assert "              plans  offloads [aborted, completed] | pending loads r1\n" in text
    assert "  properties  agree ok  claim ok  host-data ok\n" in text
    assert (
        "step 12  host_free(request=1)\n  returned    aborted load True\n" in text
        and "  properties  agree ok  free-aborts-load ok  host-data ok\n" in text
    )
    assert (
        "step 7  host_complete_offload(plan=1)\n  returned    plan 0, raised ValueError\n" in text
    )
    assert text.count("usage-error ok") == 4
    assert text.endswith(
        "result    OK: 18 step(s), spec and native agree, every property holds on spec, native "
        "(exit 0)\n"
    )


def test_host_variant_trace_reproduces_on_the_spec_alone_through_the_data_oracle() -> None:
    path = str(TRACES / "variants" / "evict-pinned-host-page.json")
    code, text = _run(path, "--impl", "spec", "--variant", "evict-pinned-host-page", "--quiet")
    assert code == 1
    assert text.startswith(
        "result    REPRODUCED at step 9 host_complete_load(request=0): host-data (exit 1)\n"
        "          spec[evict-pinned-host-page]: host-data: device page 13 named 0 holds other; "
    )
    # Against native the pinned pages still in the host queue diverge at the claim already.
    code, text = _run(path, "--variant", "evict-pinned-host-page", "--quiet")
    assert code == 1
    assert text.startswith(
        "result    REPRODUCED at step 5 host_claim(request=0, doc=0, tokens=8): agree (exit 1)\n"
        "          agree: host queue [4, 3, 2, 1] vs [4, 3]; "
    )


HOST_GROUPS = [{"kind": "full", "block_size": 4}]
HOST_OPS = [{"op": "host_compute", "request": 0, "tokens": 8}]


@pytest.mark.parametrize(
    ("geometry", "ops", "message"),
    [
        ({}, HOST_OPS, "ops[0].op 'host_compute' is a host-tier op: it needs geometry.host_blocks"),
        (
            {"host_blocks": 4},
            [{"op": "acquire", "request": 0, "tokens": 8}],
            "ops[0].op 'acquire' is not a host-tier op; a trace with geometry.host_blocks holds",
        ),
        ({"host_blocks": 0}, HOST_OPS, "geometry.host_blocks must be >= 1, got 0"),
        ({"host_blocks": "4"}, HOST_OPS, "geometry.host_blocks must be an integer"),
        ({"host_pool": 4}, HOST_OPS, "geometry has unknown field(s) ['host_pool']"),
        (
            {"host_blocks": 4},
            [{"op": "host_complete_offload"}],
            "ops[0] (host_complete_offload) is missing field 'plan'",
        ),
        (
            {"host_blocks": 4},
            [{"op": "host_abort_offload", "plan": -1}],
            "ops[0].plan must be >= 0, got -1",
        ),
        (
            {"host_blocks": 4},
            [{"op": "host_claim", "request": 0, "doc": 0, "tokens": 8, "pages": 2}],
            "ops[0] (host_claim) has unknown field(s) ['pages']",
        ),
        (
            {"host_blocks": 4},
            [{"op": "host_free", "request": 1}],
            "ops[0].request=1 but the trace has 1 request(s)",
        ),
        (
            {"host_blocks": 4},
            [{"op": "host_bad", "call": "explode", "request": 0}],
            "ops[0].call must be one of ['offload-without-host', 'complete-offload-foreign', "
            "'complete-load-foreign', 'offload-past-extent'], got 'explode'",
        ),
        (
            {"host_blocks": 4},
            [{"op": "host_evict", "tokens": True}],
            "ops[0].tokens must be an integer, got True",
        ),
    ],
)
def test_malformed_host_trace_exits_2(
    geometry: dict[str, Any],
    ops: list[dict[str, Any]],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "host.json"
    trace = {
        "format": "livetail-trace",
        "version": 1,
        "title": "t",
        "origin": "manual",
        "variant": None,
        "geometry": {"groups": HOST_GROUPS, "num_blocks": 8, "num_requests": 1, **geometry},
        "observed": None,
        "ops": ops,
    }
    path.write_text(json.dumps(trace))
    assert replay.main([str(path), "--impl", "spec"]) == 2
    assert f"livetail replay: {path}: {message}" in capsys.readouterr().err


def test_host_trace_on_an_implementation_without_a_host_pool_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    no_host = types.ModuleType("no_host")  # a module with the device classes only
    monkeypatch.setattr(replay, "implementations", lambda which: [Impl("no-host", no_host)])
    assert replay.main([str(TRACES / "host-round-trip.json")]) == 2
    assert (
        "livetail replay: the trace runs the host tier but no-host has no host pool"
        in capsys.readouterr().err
    )
