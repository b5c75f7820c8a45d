"""The host-tier theorems (``verify/theorems/host_offload.py``, ``host_loads.py``): each
proves on the spec and meets the cases it is about, and each rejects the wrong host variants
it claims (``verify/variants.py`` ``HOST_VARIANTS``) and broken specs patched in
here, so none passes vacuously.

They run in this process with ``--quick``'s bounds, the way ``livetail verify --quick`` runs
each of them in a child; the full bounds run in ``livetail verify`` and ``livetail rlimits``.
"""

from __future__ import annotations

from typing import Any

import pytest
from livetail.spec.coordinator import Coordinator
from livetail.spec.managers import _Manager
from livetail.spec.prefix import PrefixMatch
from livetail.verify.theorems import PROPERTY, THEOREMS, run_theorem
from livetail.verify.theorems.worlds import host as h
from livetail.verify.theorems.worlds.prefix import full, sliding, state
from livetail.verify.variants import HOST_VARIANTS

NAMES = [
    "offload-is-reachable-set-bounded",
    "match-across-tiers-greatest-boundary-bounded",
    "claim-with-loads-all-or-nothing-bounded",
    "loads-land-in-real-slots-bounded",
    "offload-preserves-hits-bounded",
]

# What each run must have met (its coverage note), so a pass is never vacuous.
MET = {
    "offload-is-reachable-set-bounded": [
        "pages offloaded",
        "reachable named pages the host held (skipped)",
        "named pages below n that are not reachable (left out)",
        "offloads refused (too few host pages)",
        "host names evicted by an offload",
    ],
    "match-across-tiers-greatest-boundary-bounded": [
        "matches served partly from the host",
        "matches longer than the device alone supports",
        "slots whose name is on both tiers",
    ],
    "claim-with-loads-all-or-nothing-bounded": [
        "claims with loads",
        "claims with loads refused (too few free device pages)",
        "device names evicted by a claim's fresh pages",
    ],
    "loads-land-in-real-slots-bounded": [
        "pages loaded into real slots",
        "loaded pages named after complete_load",
        "loads of several pages",
        "offloads that evicted host names while a load was pending",
        "offloads refused while a load was pending",
    ],
    "offload-preserves-hits-bounded": ["hits of a nonzero boundary", "slots served from the host"],
}

# Cases each checks with --quick's bounds (docs/theorems.md, "Host tier").
QUICK_CASES = {
    "offload-is-reachable-set-bounded": 10170,
    "match-across-tiers-greatest-boundary-bounded": 23594,
    "claim-with-loads-all-or-nothing-bounded": 23594,
    "loads-land-in-real-slots-bounded": 34404,
    "offload-preserves-hits-bounded": 2033,
}


# Some of what they met with --quick's bounds, exactly (docs/theorems.md quotes these).
QUICK_COVERAGE = {
    "offload-is-reachable-set-bounded": {
        "host names evicted by an offload": 656,
        "offloads refused (too few host pages)": 1200,
    },
    "match-across-tiers-greatest-boundary-bounded": {"matches served partly from the host": 1583},
    "claim-with-loads-all-or-nothing-bounded": {
        "claims with loads": 206,
        "claims with loads refused (too few free device pages)": 335,
    },
    "loads-land-in-real-slots-bounded": {"loads of several pages": 108},
}


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    return {name: run_theorem(name, quick=True) for name in NAMES}


def _rejects(name: str, variant: str | None = None) -> dict[str, Any]:
    r = run_theorem(name, variant=variant, quick=True)
    assert r["verdict"] == "counterexample", (r["verdict"], r["message"])
    assert r["values"]["problem"]
    return r


# --- the real spec ------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_theorem_proves_on_the_spec_and_meets_its_cases(
    name: str, results: dict[str, dict[str, Any]]
) -> None:
    r = results[name]
    th = THEOREMS[name]
    assert r["verdict"] == "proved" == th.expected, (r["message"], r["steps"])
    assert th.bounded and name.endswith("-bounded") and th.trace is None
    assert th.rlimit == 2_000_000 and r["rlimit_used"] == 0  # no solver: the floor budget
    assert PROPERTY[name].startswith("7.11 (") and PROPERTY[name].endswith("bounded)")
    [step] = r["steps"]
    assert step["result"] == "proved-bounded"
    assert step["detail"] == f"{QUICK_CASES[name]} cases"
    met = r["notes"]["coverage"]
    for key in MET[name]:
        assert met.get(key, 0) > 0, (key, met)
    for key, n in QUICK_COVERAGE.get(name, {}).items():
        assert met[key] == n, (key, met)


def test_the_theorems_come_last_and_claim_every_host_variant() -> None:
    names = list(THEOREMS)
    assert names[-len(NAMES) :] == NAMES
    # Every host variant is claimed; the slot theorems (verify/theorems/slots.py) claim
    # the ones inside the slot rules the claim and the offload run.
    claimed = {v for th in THEOREMS.values() for v in th.kills if v in HOST_VARIANTS}
    assert claimed == set(HOST_VARIANTS)
    assert THEOREMS["match-across-tiers-greatest-boundary-bounded"].kills == ()


def test_reachable_slots_follow_section_10() -> None:
    # A full group: every slot j < n / B.
    assert h.reachable_slots(full(4), 9, 4) == [0, 1]
    # Live tail, R = 1 (W = 2, B = 1), lcm 4: the slot behind each of 4 and 8.
    assert h.reachable_slots(sliding(1, 2, True), 9, 4) == [3, 7]
    # R = 2 (W = 3): two slots behind each boundary; none below the first boundary.
    assert h.reachable_slots(sliding(1, 3, True), 8, 4) == [2, 3, 6, 7]
    assert h.reachable_slots(sliding(1, 3, True), 3, 4) == []
    # W = 1: R = 0, nothing is ever needed.
    assert h.reachable_slots(sliding(1, 1, True), 9, 3) == []
    # A state group: R = 1, the slot ending at each lcm boundary (B = 2, lcm 6).
    assert h.reachable_slots(state(2), 12, 6) == [2, 5]
    assert h.reach((sliding(1, 2, True), full(4)), 9) == 2 + 2


def test_read_slots_are_the_window_before_the_query() -> None:
    # A query at position c reads keys [c - W + 1, c - 1] from pages.
    assert list(h.read_slots(sliding(1, 2, True), 8)) == [7]
    assert list(h.read_slots(sliding(2, 3), 8)) == [3]
    assert list(h.read_slots(sliding(1, 1, True), 8)) == []
    assert list(h.read_slots(state(2), 6)) == [2]
    assert list(h.read_slots(full(4), 8)) == [0, 1]


# --- the wrong host variants ----------------------------------------------------------------


def test_offload_set_rejects_an_offload_that_skips_the_resume_page() -> None:
    r = _rejects("offload-is-reachable-set-bounded", "offload-skips-resume-page")
    v = r["values"]
    # The first configuration: live B=1 W=2 beside full B=4 (lcm 4), one chunk of 4 tokens:
    # slot 3 of the live group is the resume page of boundary 4.
    assert (v["layout"], v["host_blocks"], v["offload_tokens"]) == (
        "live(B=1,W=2) + full(B=4)",
        2,
        4,
    )
    assert v["problem"] == (
        "plan_offload(request 0, 4) copies (group, slot) [(1, 0)]; the reachable named slots "
        "whose names the host lacks are [(0, 3), (1, 0)]"
    )
    assert [op["op"] for op in v["ops"]] == ["acquire", "cache", "offload"]


def test_offload_preserves_hits_rejects_an_offload_that_skips_the_resume_page() -> None:
    r = _rejects("offload-preserves-hits-bounded", "offload-skips-resume-page")
    v = r["values"]
    assert (v["prompt_tokens"], v["before"], v["after"]) == (4, 4, 0)
    assert v["ops"][-2:] == [
        {"op": "evict_all", "pages": 5},
        {"op": "claim", "request": 0, "doc": 0, "tokens": 4},
    ]


def test_claim_rejects_a_pinned_host_page_left_in_the_host_queue() -> None:
    r = _rejects("claim-with-loads-all-or-nothing-bounded", "evict-pinned-host-page")
    assert r["values"]["problem"] == (
        "host counts [0, 1, 1], queue [2, 1] after the claim; expected one pin per loaded "
        "host page [1, 2], each out of the host queue"
    )


def test_loads_reject_a_pinned_host_page_an_offload_recycles() -> None:
    # The bystander's offload, made while the load is pending, takes the loaded host page:
    # the load then copies the other prompt's content under the prompt's name.
    r = _rejects("loads-land-in-real-slots-bounded", "evict-pinned-host-page")
    v = r["values"]
    assert v["problem"].startswith("after complete_load: device page ")
    name, held = v["problem"].split(" named ")[1].split(" holds the content of ")
    assert name.startswith("g0/") and held.startswith("g1/") and name[3:] != held[3:]
    assert [op["op"] for op in v["ops"][-6:]] == [
        "claim",
        "offload",
        "complete_offload",
        "offload",
        "complete_offload",
        "complete_load",
    ]


def test_loads_reject_a_load_completed_into_the_wrong_page() -> None:
    r = _rejects("loads-land-in-real-slots-bounded", "load-into-wrong-page")
    problem = r["values"]["problem"]
    # Two loads (g0 slot 3, g1 slot 0 share one key): the names are swapped, which the
    # check of each loaded page's name against its host page's sees before the oracle.
    assert problem.startswith("after complete_load: device page ")
    got, want = problem.split(" is named ")[1].split(", the name of host page ")[0].split(", not ")
    assert got[3:] == want[3:] and {got[:3], want[:3]} == {"g0/", "g1/"}


@pytest.mark.parametrize(
    "name", ["claim-with-loads-all-or-nothing-bounded", "loads-land-in-real-slots-bounded"]
)
def test_a_load_left_in_a_hole_breaks_the_spec_run_check_inside_the_claim(name: str) -> None:
    r = _rejects(name, "load-into-hole")
    assert r["values"]["problem"].startswith(
        "a claim that fits raised AssertionError: slot 3 disagrees with the table's runs"
    )


@pytest.fixture
def no_run_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The spec's own run check off: the theorems' checks alone must see the hole."""
    monkeypatch.setattr(_Manager, "check_runs", False)


def test_claim_sees_a_load_left_in_a_hole_by_itself(no_run_check: None) -> None:
    r = _rejects("claim-with-loads-all-or-nothing-bounded", "load-into-hole")
    assert r["values"]["problem"] == (
        "g0 live(B=1,W=2) after claiming 4 tokens: slots [0, 0, 0, 0], tail 0, floor 3, "
        "cursor 4; expected slots [0, 0, 0, 2] (each host-served slot holding its fresh page), "
        "tail 0, floor 3, cursor 4, bound, the load pending"
    )


def test_loads_see_a_load_left_in_a_hole_by_themselves(no_run_check: None) -> None:
    r = _rejects("loads-land-in-real-slots-bounded", "load-into-hole")
    assert r["values"]["problem"] == (
        "the load of g0 slot 3 copies into device page 6, but the claimed table's slot is a hole"
    )


# --- deliberately broken specs (no host variant breaks the match) ----------------------------

_match = Coordinator.match_prefix


def _present_on_device_only(self: Coordinator, name: Any) -> bool:
    """Wrong: a name kept on the host alone does not count as present."""
    return self.pool._lookup(name) != 0


def _match_prefers_the_host(self: Coordinator, keys: Any) -> PrefixMatch:
    """Wrong: a slot whose name is on both tiers is served from the host."""
    m = _match(self, keys)
    host = self.host
    assert host is not None
    for pages, hps, names in zip(m._pages, m._host_pages, m._names):
        for j, name in enumerate(names):
            if name is not None and pages[j] and host._lookup(name):
                pages[j], hps[j] = 0, host._lookup(name)
    return m


def test_match_across_tiers_rejects_a_match_that_ignores_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Coordinator, "_present", _present_on_device_only)
    r = _rejects("match-across-tiers-greatest-boundary-bounded")
    assert (
        "the boundaries supported by the names on the device or the host"
        in (r["values"]["problem"])
    )


def test_match_across_tiers_rejects_a_match_that_prefers_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Coordinator, "match_prefix", _match_prefers_the_host)
    r = _rejects("match-across-tiers-greatest-boundary-bounded")
    assert "expected a device page named so" in r["values"]["problem"]


def test_claim_rejects_a_consumed_count_without_the_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    consumed = Coordinator.blocks_consumed_by_claim

    def without_loads(self: Coordinator, match: PrefixMatch) -> int:
        loads = sum(1 for hps in match.host_pages for hp in hps if hp)
        return int(consumed(self, match)) - loads

    monkeypatch.setattr(Coordinator, "blocks_consumed_by_claim", without_loads)
    r = _rejects("claim-with-loads-all-or-nothing-bounded")
    assert r["values"]["problem"].startswith("blocks_consumed_by_claim ")
    assert "host-served slots" in r["values"]["problem"]
