"""Refute, then prove: every step searches the small domain before its unbounded query.

A wrong transition with a small counterexample must end ``counterexample`` with the
shrunk values, never ``unknown`` after the budget is spent; a claim that holds in the
small domain goes on to the unbounded proof, which still finds counterexamples outside it.
"""

from __future__ import annotations

import pytest
import z3  # type: ignore[import-untyped]
from livetail.verify.theorems import THEOREMS, run_theorem
from livetail.verify.theorems.prover.prover import Prover, StepFailed
from livetail.verify.theorems.prover.small import to_bv
from livetail.verify.variants import VARIANTS

MODEL_LOOPS = {
    "reclaim-stops-at-hole": "patches the model's reclaim_expired slot loop (_Manager._reclaim)",
    "acquire-before-check": "patches the model's page-taking loop (_Manager._acquire)",
    # No Z3 theorem evaluates the whole-prompt charge (docs/decisions.md says why).
    "prompt-charge-largest-chunk": "patches the whole-prompt charge's chunk_peak_end",
}
"""Variants of model code no Z3 theorem executes: the bounded theorems refute them."""

SEED_DEPENDENT = {
    # No step's small domain holds its counterexample (its smallest needs an extra of 3 on
    # a two-page geometry, beyond the [-4, 4] search's cap); the unbounded query finds one in
    # admission-promise's charge lemma with seeds 0 and 1 but not within minutes with seed 2,
    # so no Z3 theorem that expects a proof claims it (combined-charge-under-counts does:
    # its witness vanishes).
    "combined-charge": "admission-promise",
}


def test_small_domain_counterexample_is_shrunk_to_the_least_total_size() -> None:
    x, y = z3.Ints("x y")
    p = Prover(rlimit=10_000_000)
    with pytest.raises(StepFailed) as e:
        p.prove("x < 3 or y < 2", z3.Or(x < 3, y < 2), [x >= 0, y >= 0])
    assert e.value.verdict == "counterexample"
    assert (e.value.values["x"], e.value.values["y"]) == (3, 2)
    assert p.steps[-1].detail.startswith("small domain [-4, 4], shrunk: ")
    assert p.notes["small_domain"]["searches"] == 1
    assert p.notes["small_domain"]["units"] > 0


def test_small_domain_counterexample_with_a_boolean_flag() -> None:
    # A step over a flag and a size: the counterexample needs the flag set, and is confirmed
    # on the Int formula with the flag's value from the same model.
    x = z3.Int("x")
    flag = z3.Bool("flag")
    p = Prover(rlimit=10_000_000)
    with pytest.raises(StepFailed) as e:
        p.prove("flag => x * x != 4", z3.Implies(flag, x * x != 4), [x >= 0])
    assert e.value.verdict == "counterexample"
    assert e.value.values["x"] == 2
    assert p.steps[-1].detail.startswith("small domain [-4, 4], shrunk: ")


def test_counterexample_outside_the_small_domain_is_found_by_the_unbounded_query() -> None:
    x = z3.Int("x")
    p = Prover(rlimit=10_000_000)
    with pytest.raises(StepFailed) as e:
        p.prove("x != 10", x != 10, [x >= 0])
    assert e.value.values["x"] == 10
    assert not p.steps[-1].detail.startswith("small domain")


def test_nonlinear_small_counterexample_with_division_by_a_symbol() -> None:
    a, b = z3.Ints("a b")
    p = Prover(rlimit=10_000_000)
    with pytest.raises(StepFailed) as e:
        p.prove("a div b * b + a mod b = a + 1", (a / b) * b + a % b == a + 1, [b >= 1])
    assert e.value.verdict == "counterexample"
    assert p.steps[-1].detail.startswith("small domain")


@pytest.mark.parametrize("va,vb", [(-3, 2), (3, -2), (-3, -2), (7, 3), (0, 4)])
def test_bit_vector_image_keeps_euclidean_div_and_mod(va: int, vb: int) -> None:
    """Z3's Int div and mod are Euclidean (remainder in [0, |b|)), for negative operands too."""
    a, b = z3.Ints("a b")
    r = va % abs(vb)
    q = (va - r) // vb
    image, words = to_bv(z3.And(a / b == q, a % b == r), [a, b])
    s = z3.Solver()
    s.add(image, words["a"] == va, words["b"] == vb)
    assert s.check() == z3.sat
    wrong, words = to_bv(z3.Or(a / b != q, a % b != r), [a, b])
    s = z3.Solver()
    s.add(wrong, words["a"] == va, words["b"] == vb)
    assert s.check() == z3.unsat


def test_bit_vector_image_is_the_term_z3py_operators_build() -> None:
    """The C-API walk builds what ``+ - * <= == %`` on z3py words build, including Python's
    reflected comparison when the right operand is a numeral word (``x >= 0`` is ``0 <= x``),
    so the queries made from it are unchanged."""
    x, y, z = z3.Ints("x y z")
    b = z3.Bool("b")
    formula = z3.And(
        x >= 0,
        3 <= y,
        x + y * 2 - 1 == z,
        x / y == 1,
        x % y != 0,
        z3.Distinct(x, y, z),
        z3.If(x > y, x, y) < 4,
        z3.Implies(b, x == 2),
        -x <= z,
        z3.Or(z3.Not(b), z3.Xor(b, x < y)),
    )
    image, words = to_bv(formula, [x, y, z])
    X, Y, Z = words["x"], words["y"], words["z"]

    def n(v: int) -> z3.BitVecRef:
        return z3.BitVecVal(v, 8)

    def mod(a: z3.BitVecRef, c: z3.BitVecRef) -> z3.BitVecRef:
        return a % z3.If(c < 0, -c, c)

    expected = z3.And(
        X >= n(0),
        Y >= n(3),
        X + Y * n(2) - n(1) == Z,
        (X - mod(X, Y)) / Y == n(1),
        z3.Distinct(mod(X, Y), n(0)),
        z3.Distinct(X, Y, Z),
        z3.If(X > Y, X, Y) < n(4),
        z3.Implies(b, X == n(2)),
        -X <= Z,
        z3.Or(z3.Not(b), z3.Xor(b, X < Y)),
    )
    assert image.eq(expected), (image.sexpr(), expected.sexpr())


def test_the_prove_pass_replays_the_steps_the_search_pass_recorded() -> None:
    """Run twice, a script of prover steps builds its formulas once: the second pass decides
    the recorded steps, with the same results and units as running the script again."""
    x, y = z3.Ints("x y")
    runs = []

    def script(p: Prover) -> None:
        runs.append(p.phase)
        p.prove("x + y >= x", x + y >= x, [y >= 0])
        p.lemma("lemma: a*a >= 0", lambda a: ([], a * a >= 0), 1)

    first = Prover(rlimit=10_000_000, phase="small")
    script(first)
    assert first.replayable and [m for m, _, _ in first.script] == ["prove", "prove"]
    replayed = Prover(rlimit=10_000_000, phase="prove")
    replayed.replay(first.script)
    again = Prover(rlimit=10_000_000, phase="prove")
    script(again)
    assert runs == ["small", "prove"]
    steps = [(s.name, s.result, s.rlimit) for s in replayed.steps]
    assert steps == [(s.name, s.result, s.rlimit) for s in again.steps]
    assert [r for _, r, _ in steps] == ["proved", "proved"]
    own = Prover(rlimit=10_000_000, phase="small")
    own._solver()  # a query of the script's own: the script must run again
    assert not own.replayable


def test_a_claim_true_in_the_small_domain_goes_on_to_the_unbounded_proof() -> None:
    x = z3.Int("x")
    p = Prover(rlimit=10_000_000)
    p.prove("x*x >= 0", x * x >= 0, [])
    assert [s.result for s in p.steps] == ["proved"]


def test_first_pass_stops_at_the_small_counterexample_before_any_unbounded_query() -> None:
    """Under a wrong transition whose counterexample has sizes of 1, the theorem ends in
    pass 1: only the failing step is recorded, and every unit went to small searches."""
    r = run_theorem("acquire-all-or-nothing", variant="take-counts-holes", quick=True)
    assert r["verdict"] == "counterexample"
    assert [s["result"] for s in r["steps"]] == ["counterexample"]
    assert r["steps"][0]["detail"].startswith("small domain [-4, 4], shrunk: ")
    assert r["rlimit_used"] == r["notes"]["small_domain"]["units"] <= THEOREMS[r["name"]].budget
    v = r["values"]
    assert all(abs(x) <= 1 for k, x in v.items() if isinstance(x, int)), v
    assert r["traces"], "the counterexample maps to an acquire: a trace is written"


def test_every_variant_the_z3_tier_executes_is_claimed_by_a_z3_theorem() -> None:
    """Each such variant is claimed by a theorem that expects a proof, so the kill test in
    test_theorems.py requires a counterexample (never unknown) within its budget."""
    for v in VARIANTS:
        claimers = [n for n, th in THEOREMS.items() if v in th.kills and not th.bounded]
        if v in SEED_DEPENDENT:
            continue
        if v in MODEL_LOOPS:
            assert not claimers, v
            assert any(v in th.kills for th in THEOREMS.values() if th.bounded), v
            continue
        assert any(THEOREMS[n].expected == "proved" for n in claimers), (v, claimers)


def test_combined_charge_is_refuted_with_a_counterexample_under_seed_0() -> None:
    r = run_theorem("admission-promise", variant="combined-charge", quick=True)
    assert r["verdict"] == "counterexample", (r["verdict"], r["message"])
    assert r["rlimit_used"] <= THEOREMS["admission-promise"].budget
    assert "combined-charge" in THEOREMS["combined-charge-under-counts"].kills


def _small_limits(monkeypatch: pytest.MonkeyPatch, name: str, quick: bool) -> tuple[list, dict]:
    """The unit cap of every small-domain search of one run, and the run's result."""
    limits: list[int] = []
    search = Prover._small_model

    def record(self: Prover, image: object, box: object, words: object, limit: int, *a: object):
        limits.append(limit)
        return search(self, image, box, words, limit, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(Prover, "_small_model", record)
    return limits, run_theorem(name, quick=quick)


def test_quick_searches_small_only_in_theorems_that_claim_a_variant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not THEOREMS["sequential-charge-exact"].kills
    limits, quick = _small_limits(monkeypatch, "sequential-charge-exact", True)
    assert quick["verdict"] == "proved" and limits == []
    assert "small_domain" not in quick["notes"]
    assert "small domain of every step" not in [s["name"] for s in quick["steps"]]
    limits, full = _small_limits(monkeypatch, "sequential-charge-exact", False)
    assert full["verdict"] == "proved" and len(limits) == 2 * full["notes"]["small_domain"][
        "searches"
    ]
    assert full["steps"][0]["name"] == "small domain of every step"
    # The unbounded steps are the same queries: only the small pass is left out.
    def unbounded(r: dict) -> list[tuple[str, str, int]]:
        return [(s["name"], s["result"], s["rlimit"]) for s in r["steps"]]

    assert unbounded(quick) == unbounded(full)[1:]


def test_quick_searches_the_one_box_in_a_theorem_that_claims_a_variant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = "live-tail-hole-never-read"
    assert THEOREMS[name].kills
    limits, quick = _small_limits(monkeypatch, name, True)
    searches = quick["notes"]["small_domain"]["searches"]
    assert quick["verdict"] == "proved" and searches > 0
    # One search per step, in [-1, 1] (100,000 units); a full run adds the [-4, 4] one.
    assert limits == [100_000] * searches
    assert "every symbol in [-1, 1]" in quick["steps"][0]["detail"]
    limits, full = _small_limits(monkeypatch, name, False)
    assert sorted(set(limits)) == [100_000, 250_000]
    assert full["steps"][0]["detail"].endswith("every symbol in [-1, 1] then [-4, 4]")


def test_a_kill_beyond_the_quick_cap_comes_from_the_unbounded_query() -> None:
    name, variant = "acquire-all-or-nothing", "tail-after-off-by-one"
    quick = run_theorem(name, variant=variant, quick=True)
    full = run_theorem(name, variant=variant)
    assert quick["verdict"] == full["verdict"] == "counterexample"
    assert not quick["steps"][-1]["detail"].startswith("small domain")
    assert full["steps"][-1]["detail"].startswith("small domain [-4, 4], shrunk")
