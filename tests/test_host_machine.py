"""The host tier in lockstep with the data oracle (verify/machine_host.py), and the wrong
host-tier variants that the oracle catches with the spec alone."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from livetail.spec.managers import _Manager
from livetail.verify import variants
from livetail.verify.machine_host import HostMachine, host_machine

SETTINGS = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# The oracle's words for each variant: what a query or a name finds wrong.
CAUGHT_BY = {
    "load-into-hole": "a query reads a hole",
    "offload-skips-resume-page": "offload plan",
    "load-into-wrong-page": "holds other",
    "evict-pinned-host-page": "holds other",
}


def test_spec_and_native_agree_and_hold_their_content_through_the_host_tier() -> None:
    run_state_machine_as_test(host_machine(("livetail.spec", "livetail")), settings=SETTINGS)


@pytest.fixture
def oracle_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The spec's own run-description check off: the oracle alone must see the variant."""
    monkeypatch.setattr(_Manager, "_check_runs", lambda *args: None)


def test_every_host_variant_has_an_oracle_message() -> None:
    assert sorted(CAUGHT_BY) == sorted(variants.HOST_VARIANTS)


@pytest.mark.parametrize(
    "name", ["load-into-hole", "load-into-wrong-page", "offload-skips-resume-page"]
)
def test_wrong_host_variant_is_found_by_the_machine(name: str, oracle_only: None) -> None:
    run = settings(SETTINGS, max_examples=300, phases=[Phase.generate])
    with variants.applied(name), pytest.raises(AssertionError, match=CAUGHT_BY[name]):
        run_state_machine_as_test(host_machine(("livetail.spec",)), settings=run)


def pinned_page_reuse(m: HostMachine) -> None:
    """A load pins host pages 1, 2 (names of request 0's first 8 tokens); request 1's
    offload then needs 3 host pages of a 4-page host pool with one free unnamed page."""
    m.setup(0, 16, 5)
    steps = [
        lambda: m.compute(0, 8),
        lambda: m.offload(0, 8),
        lambda: m.end_offload(0, True),
        lambda: m.free(0),
        lambda: m.evict(64),
        lambda: m.admit(0, 0, 4),
        lambda: m.compute(1, 16),
        lambda: m.offload(1, 16),
        lambda: m.end_offload(1, True),
        lambda: m.complete_load(0),
    ]
    for step in steps:
        step()
        m.agree_and_hold_their_content()


def test_a_pinned_host_page_is_never_reused_while_its_load_is_pending() -> None:
    m = host_machine(("livetail.spec", "livetail"))()
    pinned_page_reuse(m)
    for side in m.sides:
        # Request 1's offload found 1 free host page for 3 (pages 1, 2 pinned): no plan.
        assert [str(p.state) for p in side.offloads] == ["completed"]
        assert side.loads[0] is None  # the load completed
        assert side.host.stats()["pages_loaded"] == 2


def test_evicting_a_pinned_host_page_is_caught_by_the_oracle(oracle_only: None) -> None:
    m = host_machine(("livetail.spec",))()
    with (
        variants.applied("evict-pinned-host-page"),
        pytest.raises(AssertionError, match=CAUGHT_BY["evict-pinned-host-page"]),
    ):
        pinned_page_reuse(m)
