"""The trace format (docs/traces.md): make_trace, write_trace, load_trace and their errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from livetail.verify.trace import (
    TraceError,
    load_trace,
    make_trace,
    parse_trace,
    trace_geometry,
    write_trace,
)

GROUPS = [
    {"kind": "full", "block_size": 256},
    {"kind": "sliding", "block_size": 8, "sliding_window": 12, "live_tail_alloc": True},
]
OPS = [{"op": "admit", "request": 0, "chunk": 17, "reserve": 2}]


def _trace(**kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "groups": GROUPS,
        "num_blocks": 40,
        "num_requests": 1,
        "ops": OPS,
        "title": "17 then 2",
        "origin": "z3",
    }
    args.update(kw)
    return make_trace(**args)


def test_make_trace_builds_the_documented_dict() -> None:
    assert _trace(variant="combined-charge", observed={"step": 0}) == {
        "format": "livetail-trace",
        "version": 1,
        "title": "17 then 2",
        "origin": "z3",
        "variant": "combined-charge",
        "geometry": {"groups": GROUPS, "num_blocks": 40, "num_requests": 1},
        "ops": OPS,
        "observed": {"step": 0},
    }


def test_make_trace_accepts_group_spec_objects() -> None:
    from livetail.spec import GroupSpec

    t = _trace(groups=[GroupSpec("full", 256), GroupSpec("sliding", 8, 12, True)])
    assert t["geometry"]["groups"] == GROUPS


def test_geometry_of_a_trace_knows_its_lcm() -> None:
    assert trace_geometry(_trace()).lcm == 256


def test_write_then_load_round_trips_and_names_the_file_by_content(tmp_path: Path) -> None:
    t = _trace(variant="combined-charge")
    path = write_trace(t, tmp_path / "deeper")
    assert path.parent == tmp_path / "deeper"
    assert path.name.startswith("z3-combined-charge-") and path.suffix == ".json"
    assert load_trace(path) == t
    assert write_trace(t, tmp_path / "deeper") == path  # the same run lands in the same file
    # One op per line, so traces diff well.
    assert '\n    {"op": "admit", "request": 0, "chunk": 17, "reserve": 2}\n  ]\n}\n' in (
        path.read_text()
    )


def test_claim_with_an_acquire_in_between_is_a_valid_op() -> None:
    claim = {"op": "claim", "request": 0, "doc": 1, "tokens": 8}
    between = {**claim, "between_request": 0, "between_tokens": 16}
    assert _trace(ops=[claim, between])["ops"] == [claim, between]


def test_host_trace_carries_the_host_pool_size_in_its_geometry(tmp_path: Path) -> None:
    ops = [
        {"op": "host_compute", "request": 0, "tokens": 8},
        {"op": "host_offload", "request": 0, "tokens": 8},
        {"op": "host_complete_offload", "plan": 0},
        {"op": "host_bad", "call": "offload-past-extent", "request": 0},
    ]
    t = _trace(ops=ops, host_blocks=5)
    assert t["geometry"] == {
        "groups": GROUPS,
        "num_blocks": 40,
        "num_requests": 1,
        "host_blocks": 5,
    }
    assert t["ops"] == ops
    geometry = trace_geometry(t)
    assert geometry.host_blocks == 5
    assert geometry.describe().endswith(
        "| pool 40 pages (39 usable) | host pool 5 pages (4 usable) | 1 request(s)"
    )
    assert load_trace(write_trace(t, tmp_path)) == t
    assert trace_geometry(_trace()).host_blocks is None  # a device trace has no host pool


def test_trace_without_variant_is_named_spec(tmp_path: Path) -> None:
    assert write_trace(_trace(origin="differential"), tmp_path).name.startswith(
        "differential-spec-"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "other"}, "not a livetail trace: format is 'other'"),
        ({"version": 2}, "trace format version 2 is not supported (this livetail reads 1)"),
        ({"ops": {}}, "ops must be a list"),
        ({"ops": []}, "a trace needs at least one op"),
        ({"ops": [{"op": "explode"}]}, "ops[0].op must be one of"),
        ({"ops": [{"op": "decode"}]}, "ops[0] (decode) is missing field 'request'"),
        ({"ops": [{"op": "decode", "request": 1}]}, "ops[0].request=1 but the trace has 1 request"),
        ({"ops": [{"op": "decode", "request": -1}]}, "ops[0].request must be >= 0, got -1"),
        ({"ops": [{"op": "decode", "request": True}]}, "ops[0].request must be an integer"),
        ({"ops": [{"op": "decode", "request": 0, "x": 1}]}, "has unknown field(s) ['x']"),
        (
            {"ops": [{"op": "group_free", "request": 0, "group": 2}]},
            "ops[0].group=2 but the trace has 2 group(s)",
        ),
        (
            {"ops": [{**OPS[0], "reclaim_between": 1}]},
            "ops[0].reclaim_between must be true or false",
        ),
        (
            {"ops": [{"op": "claim", "request": 0, "doc": 0, "tokens": 8, "between_request": 0}]},
            "ops[0]: between_request and between_tokens go together",
        ),
        (
            {
                "ops": [
                    {
                        "op": "claim",
                        "request": 0,
                        "doc": 0,
                        "tokens": 8,
                        "between_request": 1,
                        "between_tokens": 4,
                    }
                ]
            },
            "ops[0].between_request=1 but the trace has 1 request(s)",
        ),
        ({"geometry": {"groups": [], "num_blocks": 4, "num_requests": 1}}, "non-empty list"),
        (
            {
                "geometry": {
                    "groups": [{"kind": "sliding", "block_size": 8}],
                    "num_blocks": 4,
                    "num_requests": 1,
                }
            },
            "geometry.groups[0].sliding_window must be an integer",
        ),
        (
            {
                "geometry": {
                    "groups": [{"kind": "full", "block_size": 8, "live_tail_alloc": True}],
                    "num_blocks": 4,
                    "num_requests": 1,
                }
            },
            "only a sliding or state group has live_tail_alloc",
        ),
        (
            {"geometry": {"groups": GROUPS, "num_blocks": 0, "num_requests": 1}},
            "geometry.num_blocks must be >= 1, got 0",
        ),
    ],
)
def test_parse_trace_rejects_malformed_traces_with_a_clear_message(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(TraceError) as e:
        parse_trace({**_trace(), **change})
    assert message in str(e.value)


def test_load_trace_names_the_file_in_its_errors(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({**_trace(), "version": 99}))
    with pytest.raises(TraceError) as e:
        load_trace(path)
    assert (
        str(e.value) == f"{path}: trace format version 99 is not supported (this livetail reads 1)"
    )
