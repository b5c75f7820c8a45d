"""The host tier in lockstep with the data oracle (verify/machine/host.py), its traces, and
the wrong host-tier variants that the oracle catches with the spec alone.

A failing host-machine run is minimized and written as a trace of ``host_*`` ops like the
device machine's (``run_differential(..., tier="host")``); ``livetail replay`` reproduces
it: exit 1 with ``--variant``, exit 0 without.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, settings
from livetail.spec.managers import _Manager
from livetail.verify import replay, variants
from livetail.verify.campaign import run_differential
from livetail.verify.machine.lockstep import run_trace
from livetail.verify.machine.side import implementations
from livetail.verify.trace import HOST_OP_FIELDS, load_trace

SETTINGS = settings(derandomize=True, database=None, deadline=None)
TRACES_DIR = Path(os.environ.get("LIVETAIL_TRACES_DIR", ".livetail/traces"))
PINNED = Path(__file__).parent / "traces" / "variants" / "evict-pinned-host-page.json"

# The property and the oracle's words for each variant: what a query or a name finds wrong.
CAUGHT_BY = {
    "load-into-hole": ("host-data", "a query reads a hole"),
    "offload-skips-resume-page": ("offload-set", "offload plan"),
    "load-into-wrong-page": ("host-data", "holds other"),
    "evict-pinned-host-page": ("host-data", "holds other"),
    "claim-cell-host-id": ("host-data", "holds ('scratch'"),
    # The device page at the host page's id is usually free: the pool refuses to name it.
    "load-names-host-page": ("valid-call", "raised AssertionError"),
    "aborted-plan-names-pages": ("host-data", "holds other"),
    # A loaded page reused while its slot holds it: the slot holds scratch or another name.
    "load-releases-device-page": ("host-data", "holds"),
}
# Found by the machine within the test's budget; evict-pinned-host-page needs a host pool filled to
# the page, which tests/traces/variants/evict-pinned-host-page.json holds.
BY_MACHINE = [
    "load-into-hole",
    "load-into-wrong-page",
    "offload-skips-resume-page",
    "claim-cell-host-id",
    "load-names-host-page",
    "aborted-plan-names-pages",
    "load-releases-device-page",
]


def _replay(path: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = replay.main([str(path), "--impl", "both", *args], out=out)
    return code, out.getvalue()


def _oracle_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The spec's own run-description check off: the oracle alone must see the variant."""
    monkeypatch.setattr(_Manager, "check_runs", False)


def test_spec_and_native_agree_and_hold_their_content_through_the_host_tier() -> None:
    result = run_differential(
        implementations("both"),
        examples=150,
        steps=40,
        traces_dir=TRACES_DIR,
        parent=SETTINGS,
        tier="host",
    )
    assert result.failure is None, (
        f"{result.failure}\n\nminimal trace: {result.trace_path}\n"
        f"replay it with: livetail replay {result.trace_path}"
    )
    assert result.examples == 150


def test_every_host_variant_has_an_oracle_message() -> None:
    assert sorted(CAUGHT_BY) == sorted(variants.HOST_VARIANTS)


@pytest.mark.parametrize("name", BY_MACHINE)
def test_wrong_host_variant_is_caught_and_its_minimal_trace_replays(
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    assert_one_minimal: Callable[[dict[str, Any], str], None],
) -> None:
    _oracle_only(monkeypatch)
    result = run_differential(
        implementations("spec"),
        examples=300,
        steps=40,
        variant=name,
        traces_dir=tmp_path,
        parent=settings(SETTINGS, phases=[Phase.explicit, Phase.generate]),
        tier="host",
    )
    assert result.failure is not None, f"variant {name} survived {result.examples} examples"
    assert result.trace_path is not None
    assert list(tmp_path.iterdir()) == [result.trace_path]

    trace = load_trace(result.trace_path)
    assert trace["variant"] == name
    assert trace["origin"] == "differential"
    assert trace["geometry"]["host_blocks"] >= 1
    assert {op["op"] for op in trace["ops"]} <= set(HOST_OP_FIELDS)
    prop, words = CAUGHT_BY[name]
    assert prop in trace["observed"]["properties"]
    assert any(words in f for f in trace["observed"]["failures"]), trace["observed"]
    assert trace["observed"]["step"] == len(trace["ops"]) - 1

    assert_one_minimal(trace, name)

    monkeypatch.undo()  # replay as the command line does: the spec's own checks on
    code, text = _replay(result.trace_path, "--variant", name)
    assert code == 1, text
    assert f"spec[{name}] vs native" in text
    assert "result    REPRODUCED at step " in text

    code, text = _replay(result.trace_path)
    assert code == 0, text
    assert f"add --variant {name} to reproduce" in text


def test_a_pinned_host_page_is_never_reused_while_its_load_is_pending() -> None:
    """A load pins host pages 1, 2 (names of request 0's first 8 tokens); request 1's
    offload then needs 3 host pages of a 4-page host pool with one free unnamed page."""
    world, reports = run_trace(load_trace(PINNED), implementations("both"))
    assert world.failure is None
    assert len(reports) == 10
    for side in world.sides:
        # Request 1's offload found 1 free host page for 3 (pages 1, 2 pinned): no plan.
        assert [str(p.state) for p in side.offloads] == ["completed"]
        assert side.loads[0] is None  # the load completed
        assert side.host.stats()["pages_loaded"] == 2


def test_evicting_a_pinned_host_page_is_caught_by_the_oracle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _oracle_only(monkeypatch)
    with variants.applied("evict-pinned-host-page"):
        world, _ = run_trace(load_trace(PINNED), implementations("spec"))
    assert world.failure is not None
    assert world.failure.index == 9  # complete_load: the load read a page the offload reused
    assert world.failure.failed_properties() == ["host-data"]
    assert "holds other" in world.failure.failures[0]
