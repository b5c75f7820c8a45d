"""The theorem suite: every theorem yields its expected verdict, and every wrong variant of
the spec is rejected by the theorems that claim to reject it.

Theorems run as ``livetail verify`` runs them: each in a fresh process, two at a time,
budgeted in Z3 resource units.  The module-scoped fixtures run each (theorem, variant)
pair once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.verify import runner
from livetail.verify.theorems import THEOREMS, markdown, run_theorem
from livetail.verify.theorems.prover.prover import Prover, StepFailed
from livetail.verify.trace import write_trace
from livetail.verify.variants import HOST_VARIANTS, VARIANTS
from livetail.verify.z3arith import BVArith, RangeArith, Tracked, Tracker

ROOT = Path(__file__).resolve().parent.parent


REPORT_ENV = "LIVETAIL_VERIFY_REPORT"


def _from_report(path: Path) -> dict[str, dict[str, Any]]:
    """The theorem results of a ``livetail verify --quick`` report (seed 0, every theorem).

    CI runs the main job just before the tests; naming its report in ``LIVETAIL_VERIFY_REPORT``
    lets this module check that run's results instead of proving everything a second time.
    The report must be of the same registry: every theorem, same statements, same budgets.
    """
    report = json.loads(path.read_text())
    assert report["quick"] is True and report["seed"] == 0, path
    out = {r["name"]: dict(r) for r in report["theorems"] if r["variant"] is None}
    assert sorted(out) == sorted(THEOREMS), path
    for name, r in out.items():
        assert r["statement"] == THEOREMS[name].statement, name
        assert r["rlimit_budget"] == THEOREMS[name].budget, name
        r["traces"] = [json.loads(Path(t).read_text()) for t in r["traces"]]
    return out


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    """Every theorem on the real spec (quick mode: the optional bit-vector search is skipped)."""
    import os

    if os.environ.get(REPORT_ENV):
        return _from_report(Path(os.environ[REPORT_ENV]))
    names = sorted(THEOREMS, key=lambda n: -THEOREMS[n].cost)
    out = runner.run_theorems([(n, None) for n in names], quick=True)
    return {r["name"]: r for r in out}


BUSY_SECONDS = 1200
"""A busy process ends by itself after this long even if the test cannot kill it."""


def _busy() -> subprocess.Popen[bytes]:
    """A CPU-bound process beside the theorem processes (the test kills it)."""
    loop = (
        f"import time\nend = time.monotonic() + {BUSY_SECONDS}\nwhile time.monotonic() < end: pass"
    )
    return subprocess.Popen([sys.executable, "-c", loop])


@pytest.fixture(scope="module")
def busy_results() -> dict[str, dict[str, Any]]:
    """Every Z3 theorem again, with two CPU-bound processes running beside it throughout.

    The bounded theorems use no solver and have no budget (an exhaustive run of the spec),
    so only the Z3 theorems, whose budgets are the point, are run again.
    """
    names = [
        n for n in sorted(THEOREMS, key=lambda n: -THEOREMS[n].cost) if not THEOREMS[n].bounded
    ]
    hogs = [_busy(), _busy()]
    try:
        out = runner.run_theorems([(n, None) for n in names], quick=True)
        # Both were busy until the very end, or this was not a loaded run.
        assert [h.poll() for h in hogs] == [None, None]
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    return {r["name"]: r for r in out}


@pytest.fixture(scope="module")
def kills() -> dict[tuple[str, str], dict[str, Any]]:
    """Each theorem under each variant it claims to reject."""
    tasks = [(n, v) for n, th in THEOREMS.items() for v in th.kills]
    out = runner.run_theorems(tasks, quick=True)
    return {(r["name"], r["variant"]): r for r in out}


@pytest.mark.parametrize("name", list(THEOREMS))
def test_theorem_yields_its_expected_verdict(name: str, results: dict[str, dict[str, Any]]) -> None:
    r = results[name]
    assert r["verdict"] == THEOREMS[name].expected, (r["message"], r["steps"])


@pytest.mark.parametrize("name,variant", [(n, v) for n, th in THEOREMS.items() for v in th.kills])
def test_wrong_variant_is_rejected_by_its_theorem(
    name: str, variant: str, kills: dict[tuple[str, str], dict[str, Any]]
) -> None:
    r = kills[(name, variant)]
    # A rejection is a concrete counterexample (or, for a witness theorem, the witness
    # vanishing), never a timeout.
    if r["expected"] == "proved":
        assert r["verdict"] == "counterexample", (r["verdict"], r["message"])
        assert r["values"]
    else:
        assert r["verdict"] == "proved", (r["verdict"], r["message"])
    assert runner.killed(r)


def test_z3_theorems_give_the_same_verdicts_and_units_beside_two_busy_processes(
    results: dict[str, dict[str, Any]], busy_results: dict[str, dict[str, Any]]
) -> None:
    assert busy_results
    for name, busy in busy_results.items():
        idle = results[name]
        assert busy["verdict"] == idle["verdict"] == THEOREMS[name].expected, name
        # Not only the verdict: every step used exactly the same Z3 resource units.
        assert [(s["name"], s["result"], s["rlimit"]) for s in busy["steps"]] == [
            (s["name"], s["result"], s["rlimit"]) for s in idle["steps"]
        ], name
        assert busy["rlimit_used"] == idle["rlimit_used"] <= THEOREMS[name].budget, name


def test_every_variant_has_a_theorem_that_claims_to_reject_it() -> None:
    # The host tier's variants too (they stay out of VARIANTS and --mutants' table).
    claimed = {v for th in THEOREMS.values() for v in th.kills}
    assert claimed == set(VARIANTS) | set(HOST_VARIANTS)


def test_theorems_declare_only_known_variants_and_verdicts() -> None:
    for th in THEOREMS.values():
        assert set(th.kills) <= set(VARIANTS) | set(HOST_VARIANTS), th.name
        assert th.expected in ("proved", "witness"), th.name
        assert th.statement and th.guarantee, th.name
        assert ("Bounded" in th.statement) == th.bounded, th.name


def test_combined_charge_witness_includes_17_then_2_with_exact_values(
    results: dict[str, dict[str, Any]],
) -> None:
    r = results["combined-charge-under-counts"]
    example = [w["values"] for w in r["witnesses"] if w["values"].get("first") == 17]
    assert len(example) == 1
    v = example[0]
    assert (v["B"], v["W"], v["m"] * v["B"], v["slots"], v["tail"]) == (8, 12, 256, 0, 0)
    assert (v["first"], v["extra"]) == (17, 2)
    assert (v["combined"], v["sequential"]) == (2, 3)
    assert (v["first_take"], v["decode_take"]) == (3, 0)


def test_17_then_2_trace_defers_on_the_spec_and_breaks_the_combined_variant(
    results: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    from livetail.verify.replay import main as replay

    traces = [
        t for t in results["combined-charge-under-counts"]["traces"] if "17 then 2" in t["title"]
    ]
    assert len(traces) == 1
    path = write_trace(traces[0], tmp_path)
    assert json.loads(path.read_text())["ops"] == [
        {"op": "admit", "request": 0, "chunk": 17, "reserve": 2}
    ]
    assert replay([str(path), "--impl", "spec", "--quiet"]) == 0
    assert replay([str(path), "--impl", "spec", "--quiet", "--variant", "combined-charge"]) == 1


def test_counterexample_traces_reproduce_their_variant_and_replay_green_on_the_spec(
    kills: dict[tuple[str, str], dict[str, Any]], tmp_path: Path
) -> None:
    from livetail.verify.replay import main as replay

    reproduced = set()
    for (name, variant), r in kills.items():
        impl = "both" if variant in AGAINST_NATIVE else "spec"
        for tr in r["traces"]:
            assert tr["variant"] == variant
            assert tr["observed"]["theorem"] == name
            path = write_trace(tr, tmp_path)
            assert replay([str(path), "--impl", impl, "--quiet"]) == 0
            assert replay([str(path), "--impl", impl, "--quiet", "--variant", variant]) == 1
            reproduced.add((name, variant))
    # Every claimed kill of a theorem with a trace builder gives a trace that reproduces it
    # (a witness theorem's kill is its witness vanishing: nothing to trace).
    traced = {
        (n, v)
        for (n, v) in kills
        if THEOREMS[n].trace is not None and THEOREMS[n].expected == "proved"
    }
    assert reproduced == traced - set(UNTRACED)
    assert set(UNTRACED) <= traced


UNTRACED: dict[tuple[str, str], str] = {
    # (theorem, variant) -> why no trace: a counterexample whose state no ops reach (its
    # theorem's report then gives the values only).
}

AGAINST_NATIVE = {
    # The spec-alone machine compares which pages carry names, it does not predict them:
    # the trace reproduces as a disagreement with the native module (--impl both).
    "names-skip-last-page",
    "names-unreachable-slots",
}


def test_textbook_round_up_witness_overflows_inside_the_limits(
    results: dict[str, dict[str, Any]],
) -> None:
    v = results["textbook-round-up-overflows-int32"]["values"]
    assert v["n"] - v["tail"] + v["B"] - 1 > 2**31 - 1
    assert geo.fits_int32(v["slots"], v["tail"], v["B"], v["n"])
    note = results["textbook-round-up-overflows-int32"]["notes"]["bv32_mirror"]
    assert "textbook (a + B - 1) / B = -" in note


def test_docs_list_every_theorem_in_the_registry_words() -> None:
    text = " ".join((ROOT / "docs" / "theorems.md").read_text().split())
    for th in THEOREMS.values():
        assert f"`{th.name}`" in text, th.name
        assert th.statement in text, th.name
    assert " ".join(markdown().split()) in text


# --- the proof machinery itself ---------------------------------------------------------------


def _prover() -> Prover:
    return Prover()


def test_prove_with_contradictory_hypotheses_is_unknown_not_proved() -> None:
    x = z3.Int("x")
    p = _prover()
    with pytest.raises(StepFailed) as e:
        p.prove("vacuous", x == 1, [x > 2, x < 1])
    assert e.value.verdict == "unknown"


def test_prove_reports_a_concrete_counterexample() -> None:
    x = z3.Int("x")
    p = _prover()
    with pytest.raises(StepFailed) as e:
        p.prove("x*x != 4", x * x != 4, [x >= 0])
    assert e.value.verdict == "counterexample"
    assert e.value.values["x"] == 2


def test_opaque_abstraction_falls_back_to_the_concrete_formula() -> None:
    x = z3.Int("x")
    p = _prover()
    # With x*x replaced by a fresh value the claim fails; concretely it holds.
    p.prove("x*x >= 0", x * x >= 0, [], opaque=[x * x])
    assert [s.result for s in p.steps] == ["unknown", "proved"]


def test_refute_that_finds_no_witness_records_proved() -> None:
    x = z3.Int("x")
    p = _prover()
    assert p.refute("no witness", x >= 0, [x > 3]) is None
    assert p.refuted is False


def test_run_theorem_unknown_name_is_an_error_and_a_variant_is_restored() -> None:
    with pytest.raises(KeyError):
        run_theorem("no-such-theorem")
    before = geo.live
    r = run_theorem("live-tail-hole-never-read", variant="live-off-by-one")
    assert r["verdict"] == "counterexample"
    assert geo.live is before


def test_range_arith_guards_obligations_by_the_branch_that_runs() -> None:
    tr = Tracker()
    ar = RangeArith(tr)
    a = ar.num(z3.Int("a"))
    ar.cond(a > 0, lambda: ar.div(a, 2), lambda: 0)
    kinds = [(o.kind, o.op) for o in tr.obligations]
    assert kinds == [("divisor", "div"), ("dividend", "div"), ("range", "div")]
    s = z3.Solver()
    # The dividend obligation a >= 0 holds on the branch where it is computed.
    s.add(tr.obligations[1].guard, z3.Not(tr.obligations[1].holds))
    assert s.check() == z3.unsat


def test_range_arith_records_every_add_sub_mul() -> None:
    tr = Tracker()
    ar = RangeArith(tr)
    a, b = ar.num(z3.Int("a")), ar.num(z3.Int("b"))
    r = 3 - (a + b) * 2
    assert isinstance(r, Tracked)
    assert [o.op for o in tr.obligations] == ["+", "*", "-"]


def test_bv_arith_has_cpp_semantics() -> None:
    bv = BVArith(32)

    def val(e: Any) -> int:
        return int(z3.simplify(e).as_signed_long())

    seven, neg7, two = z3.BitVecVal(7, 32), z3.BitVecVal(-7, 32), z3.BitVecVal(2, 32)
    assert val(bv.div(neg7, two)) == -3  # truncation, not floor
    assert val(bv.mod(neg7, two)) == -1  # remainder has the dividend's sign (SRem)
    assert val(bv.mod(seven, z3.BitVecVal(-2, 32))) == 1
    assert val(bv.max(z3.BitVecVal(-1, 32), two)) == 2  # signed comparison


def test_bit_vector_tracker_flags_a_real_wrap_and_only_that() -> None:
    tr = Tracker(bits=64)
    ar = RangeArith(tr)
    a, b = z3.BitVecs("a b", 64)
    _ = ar.num(a) + ar.num(b)
    [ob] = tr.obligations
    wraps = z3.Solver()
    wraps.add(a >= 0, b >= 0, z3.Not(ob.holds))
    assert wraps.check() == z3.sat
    m = wraps.model()
    assert m.eval(a).as_signed_long() + m.eval(b).as_signed_long() > 2**63 - 1
    safe = z3.Solver()
    safe.add(a >= 0, b >= 0, a <= 2**62 - 1, b <= 2**62, z3.Not(ob.holds))
    assert safe.check() == z3.unsat


def test_readme_table_states_every_theorem_with_its_domain_and_property() -> None:
    from livetail.verify.theorems import PROPERTY, readme_table

    assert set(PROPERTY) == set(THEOREMS)
    text = (ROOT / "README.md").read_text()
    assert readme_table() in text
    for th in THEOREMS.values():
        unbounded = not th.bounded and th.expected == "proved"
        assert (f"`{th.name}` | unbounded |" in text) == unbounded, th.name
