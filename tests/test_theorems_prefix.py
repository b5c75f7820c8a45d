"""The prefix-caching theorems (``verify/theorems/prefix.py``): each yields its expected
verdict on the spec, and each rejects a deliberately broken spec, so none passes vacuously.

The broken specs are patched in with ``monkeypatch`` inside the test (they are not
registered variants of ``verify/variants.py``); the theorems run in this process, the
way ``livetail verify`` runs each of them in a child.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from livetail.spec import geometry as geo
from livetail.spec import pool_state, runs
from livetail.spec.coordinator import Coordinator
from livetail.spec.geometry import Arith, Num
from livetail.spec.pool import BlockPool
from livetail.spec.prefix import PrefixMatch, check_keys
from livetail.verify.theorems import THEOREMS, run_theorem
from livetail.verify.theorems import prefix as pfx
from livetail.verify.theorems.worlds import prefix as world
from livetail.verify.trace import load_trace, write_trace

NAMES = [
    "match-is-read-only-bounded",
    "claim-takes-consumed-bounded",
    "hit-admission-exact-bounded",
    "live-tail-never-costs-a-hit-bounded",
    "match-greatest-boundary-bounded",
]

# What each run must have met (the coverage note), so a pass is never vacuous.
MET = {
    "match-is-read-only-bounded": ["states"],
    "claim-takes-consumed-bounded": [
        "claims that took free pages",
        "claims sharing pages in use",
        "stale matches refused",
    ],
    "hit-admission-exact-bounded": ["hits claimed", "hits that took free pages"],
    "live-tail-never-costs-a-hit-bounded": [
        "hits of a nonzero boundary",
        "runs where live tail took fewer pages",
    ],
    "match-greatest-boundary-bounded": [
        "matches above an unsupported boundary",
        "matched names with several copies",
    ],
}


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    return {name: run_theorem(name) for name in NAMES}


def _rejects(name: str) -> dict[str, Any]:
    r = run_theorem(name)
    assert r["verdict"] == "counterexample", (r["verdict"], r["message"])
    assert r["values"]["problem"]
    return r


# --- the real spec ------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_theorem_proves_on_the_spec_and_meets_its_cases(
    name: str, results: dict[str, dict[str, Any]]
) -> None:
    r = results[name]
    assert r["verdict"] == "proved" == THEOREMS[name].expected, (r["message"], r["steps"])
    assert THEOREMS[name].bounded and name.endswith("-bounded")
    assert r["steps"] and all(s["result"] == "proved-bounded" for s in r["steps"])
    met = r["notes"]["coverage"]
    for key in MET[name]:
        assert met.get(key, 0) > 0, (key, met)


@pytest.mark.parametrize(
    "name,cases",
    [
        ("match-is-read-only-bounded", 15_387),
        ("claim-takes-consumed-bounded", 15_387),
        ("live-tail-never-costs-a-hit-bounded", 25_468),
    ],
)
def test_quick_mode_walks_the_smaller_bounds_the_statement_gives(
    name: str, cases: int, results: dict[str, dict[str, Any]]
) -> None:
    """``livetail verify --quick`` runs these three within the quick bounds their statements
    name (N <= lcm+1; every chunking for N <= 6), still meeting every interesting case."""
    r = run_theorem(name, quick=True)
    assert r["verdict"] == "proved", (r["message"], r["steps"])
    assert [s["detail"] for s in r["steps"]] == [f"{cases} cases"]
    assert "with livetail verify --quick" in THEOREMS[name].statement
    for key in MET[name]:
        assert r["notes"]["coverage"].get(key, 0) > 0, (key, r["notes"]["coverage"])
    assert int(results[name]["steps"][0]["detail"].split()[0]) > cases


def test_the_theorems_are_registered_after_the_others_in_order() -> None:
    # Prefix caching comes after the other theorems; only retention, step plans and the host
    # tier (tests/test_theorems_host.py) follow it.
    from livetail.verify.theorems import host_loads, host_offload, host_writeback

    names = list(THEOREMS)
    start = names.index(NAMES[0])
    assert names[start : start + len(NAMES)] == NAMES
    after = names[start + len(NAMES) :]
    assert after[:2] == ["retention-bounded", "step-plan-bounded"]
    host = {host_loads.__name__, host_offload.__name__, host_writeback.__name__}
    assert all(THEOREMS[n].check.__module__ in host for n in after[2:])
    assert THEOREMS["hit-admission-exact-bounded"].kills == ("combined-charge",)


def test_document_keys_are_the_trace_machines() -> None:
    from livetail.verify.machine.oracle import doc_keys

    for doc in (0, 1):
        for base in (1, 2, 3):
            for n in (0, 5, 23, 24, 31, 64):
                assert world.doc_keys(doc, n, base) == doc_keys(doc, n, base)


def test_property8_formula() -> None:
    # No state group: the greatest lcm multiple within both the prompt and the computed N.
    assert pfx.property8(9, 100, 4, (9,), False) == 8
    assert pfx.property8(9, 7, 4, (9,), False) == 4
    # A state group: only chunk ends count, and a lower one is found when a higher is not.
    assert pfx.property8(9, 100, 4, (4, 9), True) == 4
    assert pfx.property8(9, 100, 4, (3, 9), True) == 0
    assert pfx.property8(12, 100, 4, (8, 12), True) == 12


# --- registered variants -------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["combined-charge"])
def test_hit_admission_rejects_its_variants_with_a_trace_that_reproduces_them(
    variant: str, tmp_path: Path
) -> None:
    from livetail.verify.replay import main as replay

    r = run_theorem("hit-admission-exact-bounded", variant=variant)
    assert r["verdict"] == "counterexample", r["message"]
    assert r["values"]["matched"] > 0  # found after a real hit, not a 0-token match
    [trace] = r["traces"]
    path = write_trace(trace, tmp_path)
    ops = load_trace(path)["ops"]
    assert [op["op"] for op in ops[-2:]] == ["claim", "admit"]
    assert replay([str(path), "--impl", "spec", "--quiet"]) == 0
    assert replay([str(path), "--impl", "spec", "--quiet", "--variant", variant]) == 1


# --- deliberately broken specs -------------------------------------------------------------

_match = Coordinator.match_prefix
_claim = Coordinator.claim
_resume = Coordinator._resume
_cache = Coordinator.cache_full_blocks
_check_match = Coordinator._check_match


def _match_touches_pages(self: Coordinator, keys: Any) -> PrefixMatch:
    """Wrong: a match "refreshes" each matched free page to the back of the free queue."""
    m = _match(self, keys)
    for pages in m.pages:
        for p in pages:
            if p and self.pool.ref_count(p) == 0:
                pool_state.unlink(self.pool, p, True, pool_state.LISTS)
                pool_state.link(self.pool, p, False, True, pool_state.LISTS)
    return m


def _match_stops_at_first_miss(self: Coordinator, keys: Any) -> PrefixMatch:
    """Wrong: searches the boundaries from below and stops at the first unsupported one."""
    ks = check_keys(keys)
    best = 0
    for T in range(self.lcm_block_size, len(ks) * self.base_block_size + 1, self.lcm_block_size):
        if any(self._support(g, T, ks) is None for g in range(self.num_groups)):
            break
        best = T
    return _match(self, ks[: best // self.base_block_size])


def _lookup_earliest_registered(self: BlockPool, name: Any) -> int:
    """Wrong: the earliest registered copy even when a later copy is in use."""
    pages = self._pages_named.get(name, [])
    return pages[0] if pages else 0


def _claim_without_floor(self: Coordinator, tables: Any, match: PrefixMatch) -> None:
    """Wrong: the claimed tables keep reclaim floor 0 (the holes below would be rescanned)."""
    _claim(self, tables, match)
    for t in tables:
        t.reclaim_floor = 0


def _consumed_counts_pages_in_use(self: Coordinator, match: PrefixMatch) -> int:
    """Wrong: counts every distinct matched page, also those already in use."""
    mt = self._check_match(match)
    return len({p for pages in mt._pages for p in pages if p})


def _match_never_stale(self: Coordinator, match: object) -> PrefixMatch:
    """Wrong: does not re-check that the matched pages still carry their names."""
    assert isinstance(match, PrefixMatch)
    return match


def _one_resume_page_more(self: Coordinator, g: int) -> int:
    """Wrong: a match needs R + 1 pages behind a sliding or state boundary."""
    R = _resume(self, g)
    return R if R < 0 else R + 1


def _one_resume_page_fewer(s: Num, f: Num, W: Num, B: Num, A: Num, ar: Arith = geo.INT) -> Num:
    """Wrong: live tail keeps only R - 1 resume pages per aligned block."""
    return ar.cond(
        A > 0,
        lambda: ar.either(
            s >= geo.slid_out(f, W, B, ar),
            ar.mod(s, geo.period(A, B, ar))
            >= geo.period(A, B, ar) - geo.resume_pages(W, B, ar) + 1,
        ),
        lambda: True,
    )


def _run_real_one_resume_page_fewer(
    run: runs.Run, s: Num, g: runs.Group, ar: Arith = geo.INT
) -> Num:
    """Wrong placement, through the run description: R - 1 resume pages per aligned block."""
    return _one_resume_page_fewer(s, run.frontier, g.W, g.B, g.A, ar)


def _real_in_one_resume_page_fewer(
    run: runs.Run, lo: int, hi: int, g: runs.Group, ar: Arith = geo.INT
) -> int:
    """The run's real slots in [lo, hi) under that wrong placement, counted slot by slot."""
    a = min(max(lo, run.first), run.end)
    e = min(max(hi, a), run.end)
    return sum(1 for s in range(a, e) if _run_real_one_resume_page_fewer(run, s, g))


def _state_named_at_every_page(self: Coordinator, tables: Any, keys: Any, num_tokens: int) -> int:
    """Wrong: a state group names every full page, not only the one ending at num_tokens."""
    named = int(_cache(self, tables, keys, num_tokens))
    base = self.base_block_size
    for g, (m, t) in enumerate(zip(self.managers, tables)):
        if m.kind != "state":
            continue
        k = m.block_size // base
        for j in range(min(num_tokens // m.block_size, len(keys) // k)):
            page = t.slots[j]
            if page and not self.pool._is_cached(page):
                self.pool._set_name(page, (g, keys[(j + 1) * k - 1]))
                named += 1
    return named


def test_read_only_rejects_a_match_that_reorders_the_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Coordinator, "match_prefix", _match_touches_pages)
    r = _rejects("match-is-read-only-bounded")
    assert "changed the free queue" in r["values"]["problem"]


def test_claim_rejects_a_claim_without_the_reclaim_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Coordinator, "claim", _claim_without_floor)
    r = _rejects("claim-takes-consumed-bounded")
    assert "floor 0" in r["values"]["problem"]


def test_claim_rejects_a_consumed_count_that_includes_pages_in_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Coordinator, "blocks_consumed_by_claim", _consumed_counts_pages_in_use)
    r = _rejects("claim-takes-consumed-bounded")
    assert "blocks_consumed_by_claim" in r["values"]["problem"]


def test_claim_rejects_a_claim_of_a_stale_match(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Coordinator, "_check_match", _match_never_stale)
    r = _rejects("claim-takes-consumed-bounded")
    assert "stale match" in r["values"]["problem"]
    assert "between_tokens" in r["values"]["ops"][-1]


def test_hit_admission_rejects_a_consumed_count_that_includes_pages_in_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Coordinator, "blocks_consumed_by_claim", _consumed_counts_pages_in_use)
    r = _rejects("hit-admission-exact-bounded")
    assert "blocks_consumed_by_claim said" in r["values"]["problem"]


def test_never_costs_a_hit_rejects_live_tail_that_drops_a_resume_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The wrong rule goes through the run description, so the runs place and count it and
    # the concrete spec's run checks agree with it: only the lost hit can reject it.
    monkeypatch.setattr(runs, "run_real", _run_real_one_resume_page_fewer)
    monkeypatch.setattr(runs, "real_in", _real_in_one_resume_page_fewer)
    r = _rejects("live-tail-never-costs-a-hit-bounded")
    v = r["values"]
    # Full allocation still finds the hit; live tail loses it.
    assert v["live_tail"] < v["full_allocation"] == v["expected"]


def test_never_costs_a_hit_rejects_a_match_that_needs_one_page_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Coordinator, "_resume", _one_resume_page_more)
    r = _rejects("live-tail-never-costs-a-hit-bounded")
    assert r["values"]["live_tail"] < r["values"]["expected"]


def test_never_costs_a_hit_rejects_state_pages_named_off_chunk_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Coordinator, "cache_full_blocks", _state_named_at_every_page)
    r = _rejects("live-tail-never-costs-a-hit-bounded")
    assert r["values"]["live_tail"] > r["values"]["expected"]


def test_greatest_boundary_rejects_a_match_that_stops_at_the_first_miss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Coordinator, "match_prefix", _match_stops_at_first_miss)
    r = _rejects("match-greatest-boundary-bounded")
    assert "brute force" in r["values"]["problem"]


def test_greatest_boundary_rejects_a_lookup_that_ignores_pages_in_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(BlockPool, "_lookup", _lookup_earliest_registered)
    r = _rejects("match-greatest-boundary-bounded")
    assert "in use" in r["values"]["problem"]


def test_a_counterexample_becomes_a_trace_that_replays_on_the_spec(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from livetail.verify.replay import main as replay

    monkeypatch.setattr(Coordinator, "match_prefix", _match_stops_at_first_miss)
    r = _rejects("match-greatest-boundary-bounded")
    monkeypatch.undo()
    [trace] = r["traces"]
    path = write_trace(trace, tmp_path)
    loaded = load_trace(path)
    assert loaded["origin"] == "z3" and loaded["observed"]["theorem"] == r["name"]
    last = loaded["ops"][-1]
    assert last["op"] == "claim" and last["tokens"] == r["values"]["prompt_tokens"]
    # The trace machine has no oracle for which boundary a match returns: on the real spec
    # the same ops replay green (the observed record says what the broken match did).
    assert replay([str(path), "--impl", "spec", "--quiet"]) == 0
