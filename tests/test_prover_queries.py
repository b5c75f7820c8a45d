"""How the range theorems spend their queries: the SMT core first, obligations in batches.

A batch (every obligation of an expression tree, or every claim of a hot-path site, in one
query) only ever proves; when it does not, each obligation is decided on its own, so a
failure still names the one operation that does not fit and gives its values.
"""

from __future__ import annotations

import pytest

z3 = pytest.importorskip("z3")

from livetail.verify.theorems.hot_paths import prove_site  # noqa: E402
from livetail.verify.theorems.prover import query  # noqa: E402
from livetail.verify.theorems.prover.obligations import I64, bare, check_obligations  # noqa: E402
from livetail.verify.theorems.prover.prover import Prover, StepFailed  # noqa: E402
from livetail.verify.theorems.prover.query import Query  # noqa: E402
from livetail.verify.theorems.sites.managers import Site  # noqa: E402
from livetail.verify.z3arith import RangeArith, Tracker  # noqa: E402


def _units(q: Query) -> int:
    before = query.rlimit_count()
    q.check()
    return query.rlimit_count() - before


def test_core_first_decides_a_linear_query_within_its_units() -> None:
    x = z3.Int("x")
    q = Query(1_000_000, core_first=20_000)
    q.add(x >= 0, x <= I64, x + 1 > I64 + 1)
    assert _units(q) <= 20_000
    q = Query(1_000_000, core_first=20_000)
    q.add(x >= 0, x <= I64, x + 1 > I64 + 1)
    assert q.check() == z3.unsat


def test_core_first_that_gives_up_hands_the_query_to_the_full_strategy() -> None:
    # One unit is not enough for the core: the full strategy decides, with the same answer
    # as without a core attempt, and the model comes back.
    x, y = z3.Ints("x y")
    for core_first in (0, 1):
        q = Query(5_000_000, core_first=core_first)
        q.add(x > 1, y > 1, x * y == 391)
        assert q.check() == z3.sat
        m = q.model()
        assert {m.eval(x).as_long(), m.eval(y).as_long()} == {17, 23}


def _two_sums(hi_b: int) -> tuple[Prover, Tracker, list[object]]:
    """a + b and a - b over a in [0, I64], b in [0, hi_b]: the sum wraps iff hi_b > 0."""
    a, b = z3.Ints("a b")
    tr = Tracker(label="two sums")
    ar = RangeArith(tr)
    _ = ar.num(a) - ar.num(b)
    _ = ar.num(a) + ar.num(b)
    return Prover(rlimit=10_000_000), tr, [a >= 0, a <= I64, b >= 0, b <= hi_b]


def test_batched_obligations_prove_when_every_one_fits() -> None:
    p, tr, hyps = _two_sums(0)
    check_obligations(p, bare(hyps), tr.obligations, "int64")
    assert p.steps == []  # nothing failed, no per-obligation step was needed


def test_batched_obligations_name_the_one_that_does_not_fit_with_its_value() -> None:
    p, tr, hyps = _two_sums(1)
    with pytest.raises(StepFailed) as e:
        check_obligations(p, bare(hyps), tr.obligations, "int64")
    assert e.value.verdict == "counterexample"
    assert e.value.step == "int64 [ceil_div] two sums: range of '+' #1"
    assert e.value.values["value"] == I64 + 1
    assert [s.result for s in p.steps] == ["counterexample"]


def _site(code: str, hyps: str) -> Site:
    return Site("native/x.cpp", "f", code, hyps, "test site")


def test_a_site_whose_claims_all_hold_is_proved_in_one_batch() -> None:
    p = Prover(rlimit=10_000_000)
    assert prove_site(p, _site("a + b", "0 <= a, a <= I64 - 1, 0 <= b, b <= 1")) == 1
    assert [s.result for s in p.steps] == ["proved"]


def test_a_site_with_a_wrapping_operation_names_it_with_a_counterexample() -> None:
    p = Prover(rlimit=10_000_000)
    with pytest.raises(StepFailed) as e:
        prove_site(p, _site("a * 2 - b", "0 <= a, a <= I64, 0 <= b, b <= 1"))
    assert e.value.verdict == "counterexample"
    assert e.value.message == "x.cpp f: a * 2 - b: range of '*' fails"
    assert p.steps[-1].name == "x.cpp f: a * 2 - b: range of '*'"
