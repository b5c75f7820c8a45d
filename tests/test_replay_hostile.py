"""``livetail replay`` on hostile input: exit 0, 1 or 2 within a time and memory bound.

Each input runs ``replay.main`` in a forked child under an address-space limit
(``RLIMIT_AS``: what the parent maps plus ``HEADROOM``) and a wall-clock guard; the child
reports its exit status, or 3 for an exception that escaped ``main``. Random bytes, random
JSON and mutations of the kept traces of ``tests/traces`` must all end 0 (ok), 1 (a failure
reproduced, with the verdict line) or 2 (a usage error, with a ``livetail replay:`` message).
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import resource
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from livetail.verify import replay

KEPT = sorted((Path(__file__).parent / "traces").rglob("*.json"))
HEADROOM = 1536 * 2**20  # bytes the child may map beyond what the parent has mapped
GUARD_SECONDS = 60.0  # a hang guard, not a speed figure: every run here takes well under 5 s
FUZZ = settings(
    max_examples=40,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _mapped_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def replay_bounded(data: bytes, *args: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `livetail replay FILE *args` on `data`, bounded."""
    with tempfile.TemporaryDirectory() as d:
        path, out_path, err_path = (os.path.join(d, n) for n in ("t.json", "out", "err"))
        Path(path).write_bytes(data)
        limit = _mapped_bytes() + HEADROOM
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 3
            try:
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
                with open(out_path, "w") as out, open(err_path, "w") as err:
                    os.dup2(err.fileno(), 2)
                    sys.stderr = err
                    try:
                        code = replay.main([path, "--quiet", *args], out=out)
                    except BaseException:  # noqa: BLE001 - reported as status 3
                        traceback.print_exc(file=err)
                        code = 3
                    out.flush()
                    err.flush()
            finally:
                os._exit(code)
        deadline = time.monotonic() + GUARD_SECONDS
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail(f"replay ran past {GUARD_SECONDS} s on {data[:200]!r}")
            time.sleep(0.005)
        code = os.waitstatus_to_exitcode(status)
        return code, Path(out_path).read_text(), Path(err_path).read_text()


def assert_clean_exit(data: bytes) -> int:
    code, out, err = replay_bounded(data)
    assert code in (0, 1, 2), f"exit {code} on {data[:300]!r}:\n{err[-3000:]}"
    assert "Traceback" not in err, err[-3000:]
    if code == 2:
        assert err.startswith("livetail replay: "), err
    else:
        assert "result    " in out, out
    return code


# --- the hostile traces of the tracker, each exit 2 before anything runs -------------------


def _trace(num_blocks: int = 40, ops: list[dict[str, Any]] | None = None, **geo: Any) -> bytes:
    return json.dumps(
        {
            "format": "livetail-trace",
            "version": 1,
            "title": "",
            "origin": "manual",
            "variant": None,
            "geometry": {
                "groups": [
                    {"kind": "full", "block_size": 256},
                    {
                        "kind": "sliding",
                        "block_size": 8,
                        "sliding_window": 12,
                        "live_tail_alloc": True,
                    },
                ],
                "num_blocks": num_blocks,
                "num_requests": 2,
                **geo,
            },
            "observed": None,
            "ops": ops or [{"op": "admit", "request": 0, "chunk": 17, "reserve": 2}],
        }
    ).encode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_trace(2**31 - 1), "replay runs pools of at most 4194304 pages"),
        (_trace(10**12), "num_blocks=1000000000000 is past the int32 limit"),
        (_trace(ops=[{"op": "acquire", "request": 0, "tokens": 2**62}]), "past the int32 limit"),
        (_trace(ops=[{"op": "acquire", "request": 0, "tokens": 2**31 - 1}]), "span"),
        (b"\xff\xfe{not utf-8", "is not UTF-8 text"),
        (b'{"format": "livetail-trace", "version": 1,', "is not valid JSON"),
        (b"[" * 100_000, "is not valid JSON"),
        (b"1" * 5000, "is not valid JSON"),
        (_trace(ops=[{"op": "bad", "call": "no-such-call", "request": 0, "group": 0}]), "call"),
        (_trace(ops=[{"op": "plan", "mask": 1, "first": 0, "tokens": 1, "bad": 9}]), "bad"),
        (_trace(ops=[{"op": "cache", "request": 0, "doc": 5000, "tokens": 8}]), "uint32"),
        (
            _trace(
                groups=[{"kind": "full", "block_size": 2**30}, {"kind": "full", "block_size": 3}]
            ),
            "geometry is not one the API accepts",
        ),
        (
            _trace(
                groups=[{"kind": "full", "block_size": 1}, {"kind": "full", "block_size": 2**20}]
            ),
            "slots of block_size 1",
        ),
    ],
    ids=[
        "pool-2**31-1",
        "pool-10**12",
        "chunk-2**62",
        "table-2**31-slots",
        "non-utf8",
        "truncated-json",
        "deep-json",
        "huge-int",
        "unknown-bad-call",
        "plan-bad",
        "doc-past-uint32",
        "lcm-past-int32",
        "lcm-slots",
    ],
)
def test_hostile_trace_is_a_usage_error_before_anything_runs(data: bytes, message: str) -> None:
    code, out, err = replay_bounded(data)
    assert (code, out) == (2, ""), err
    assert err.startswith("livetail replay: ") and message in err, err
    assert "Traceback" not in err


def test_a_pool_of_2_to_the_20_pages_replays_an_honest_trace() -> None:
    """The trace benchmarks/bench_replay.py times, at 2**20 pages: exit 0."""
    path = Path(__file__).parent.parent / "benchmarks" / "bench_replay.py"
    loader = importlib.util.spec_from_file_location("bench_replay", path)
    assert loader is not None and loader.loader is not None
    bench = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(bench)
    code, out, err = replay_bounded(json.dumps(bench.trace(2**20)).encode())
    assert code == 0, err
    assert "OK: 6 step(s), spec and native agree" in out


# --- fuzz: random bytes, random JSON, mutated kept traces -------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_hostile = st.sampled_from(
    [
        -1,
        0,
        1,
        2,
        3,
        17,
        255,
        256,
        2**16,
        2**20,
        2**22,
        2**22 + 1,
        2**31 - 1,
        2**31,
        2**62,
        10**12,
        1.5,
        True,
        None,
        "x",
        [],
        {},
    ]
) | st.integers(-5, 300)


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_exit_0_1_or_2(data: bytes) -> None:
    assert_clean_exit(data)


@FUZZ
@given(_json)
def test_random_json_exit_0_1_or_2(value: Any) -> None:
    assert_clean_exit(json.dumps(value).encode())


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*prefix, i)))
    return out


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    path = draw(st.sampled_from(KEPT))
    trace = json.loads(path.read_text())
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(_paths(trace)[1:]))
        parent = trace
        for k in where[:-1]:
            parent = parent[k]
        how = draw(st.sampled_from(["set", "set", "set", "delete", "copy-op"]))
        if how == "delete":
            del parent[where[-1]]
        elif how == "copy-op" and isinstance(trace.get("ops"), list) and trace["ops"]:
            ops = trace["ops"]
            copy = json.loads(json.dumps(draw(st.sampled_from(ops))))
            ops.insert(draw(st.integers(0, len(ops))), copy)
        else:
            parent[where[-1]] = draw(_hostile)
        if not isinstance(trace, dict):
            break
    data = json.dumps(trace).encode()
    if draw(st.booleans()) and draw(st.booleans()):  # now and then, damage the bytes too
        cut = draw(st.integers(0, len(data)))
        data = data[:cut] + draw(st.binary(max_size=4)) + data[cut + 4 :]
    return data


@FUZZ
@given(_mutated())
def test_mutated_kept_traces_exit_0_1_or_2(data: bytes) -> None:
    assert_clean_exit(data)


def test_replay_exit_codes_in_process() -> None:
    """The same main, in process: 2 for a bad file, with the message on stderr."""
    err = io.StringIO()
    old = sys.stderr
    sys.stderr = err
    try:
        code = replay.main(["/nonexistent/trace.json", "--quiet"], out=io.StringIO())
    finally:
        sys.stderr = old
    assert code == 2
    assert err.getvalue().startswith("livetail replay: cannot read trace /nonexistent/trace.json")


def test_plan_with_no_request_and_first_past_the_requests_runs() -> None:
    """A minimized plan op may keep `first` past the requests it dropped: taken modulo."""
    ops = [{"op": "plan", "mask": 0, "first": 7, "tokens": 1, "bad": 1}]
    code, out, err = replay_bounded(_trace(ops=ops))
    assert code == 0, err + out


def test_docs_state_the_exit_codes_and_the_limits_replay_enforces() -> None:
    from livetail.verify import trace_limits as lim

    root = Path(__file__).parent.parent
    traces_md = (root / "docs" / "traces.md").read_text()
    readme = " ".join((root / "README.md").read_text().split())
    assert (
        "`0` every side agrees and every property holds, `1` the failure reproduces, "
        "`2` a bad trace or usage" in readme
    )
    assert (replay.EXIT_OK, replay.EXIT_REPRODUCED, replay.EXIT_USAGE) == (0, 1, 2)
    for row in (
        f"| `num_blocks`, `host_blocks` | at most `2**{lim.MAX_POOL.bit_length() - 1}` pages",
        f"| at most `2**{lim.MAX_SLOTS.bit_length() - 1}`, an upper bound from the ops alone",
        f"| `lcm / block_size` per group | at most `2**{lim.MAX_LCM_SLOTS.bit_length() - 1}` |",
        f"| ops times slots per step | at most `2**{lim.MAX_WORK.bit_length() - 1}` |",
        f"| `host_evict` tokens | at most `2**{lim.MAX_EVICT.bit_length() - 1}` |",
        f"| at most {lim.MAX_REQUESTS} requests, `2**{lim.MAX_OPS.bit_length() - 1}` ops |",
        f"e.g. the lcm of the page sizes within int32), at most {lim.MAX_GROUPS} |",
    ):
        assert row in traces_md, row
