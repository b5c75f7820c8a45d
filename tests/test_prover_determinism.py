"""Z3 resource use depends on the formula only, not on what the process built before it.

Every query is decided in a fresh context from its SMT-LIB text (``Prover`` / ``Query``), so
a theorem spends the same units whatever other terms were made and dropped first; in the
process-wide context the ids of those terms steer Z3's search (on CPython 3.10 one theorem
needed nine times its 3.11 units, from the interpreter's memory management alone).
"""

from __future__ import annotations

from typing import Any

import pytest

z3 = pytest.importorskip("z3")

from livetail.verify.theorems import run_theorem  # noqa: E402
from livetail.verify.theorems.prover.prover import Prover  # noqa: E402
from livetail.verify.theorems.prover.query import Query, rlimit_count  # noqa: E402

NAME = "shift-invariance-by-alignment"


def _steps(result: dict[str, Any]) -> list[tuple[str, str, int]]:
    return [(s["name"], s["result"], s["rlimit"]) for s in result["steps"]]


def _churn(n: int) -> None:
    """Make and drop many unrelated terms, moving the ids the main context hands out."""
    keep = []
    for i in range(n):
        x, y = z3.Ints(f"churn_{n}_{i} churn_{n}_{i}_b")
        keep.append(z3.simplify(x * (y + i) - i * x + y / (i + 1)))
        if i % 3 == 0:
            keep.pop()
    del keep


def test_a_theorem_spends_the_same_units_after_unrelated_terms_were_made_and_dropped() -> None:
    first = run_theorem(NAME)
    _churn(5000)
    second = run_theorem(NAME)
    assert first["verdict"] == second["verdict"] == "proved"
    assert first["rlimit_used"] == second["rlimit_used"] > 0
    assert _steps(first) == _steps(second)


def test_query_counts_only_its_own_units_and_returns_models_in_the_main_context() -> None:
    x, y = z3.Ints("qx qy")
    before = rlimit_count()
    q = Query(10_000_000)
    q.add(x * y == 12, x > 1, y > x)
    assert q.check() == z3.sat
    m = q.model()
    assert m.eval(x * y).as_long() == 12 and m.eval(x).as_long() > 1
    spent = rlimit_count() - before
    assert 0 < spent < 10_000_000
    q.push()
    q.add(x > 100, y < 100)
    assert q.check() == z3.unsat
    q.pop()
    assert q.check() == z3.sat


def test_a_query_over_its_budget_is_unknown_with_z3s_reason() -> None:
    x, y, z = z3.Ints("bx by bz")
    p = Prover(rlimit=2_000)
    q = p._solver()
    # Fermat for cubes on a range: far beyond 2 000 units.
    q.add(x > 0, y > 0, z > 0, x * x * x + y * y * y == z * z * z, z < 10_000)
    assert q.check() == z3.unknown
    assert q.reason_unknown().startswith("resource limit of 2000 units reached")


CHURN = """
import z3
keep = [z3.simplify(z3.Int(f"c{i}") * 3 + z3.Int("u") - z3.Int("v") * i >= z3.Int("w"))
        for i in range(200)]
del keep[::2]
"""
"""Run first in one of the two interpreters: terms made and dropped move the ids of u, v, w."""

SIMPLIFY = """
import z3
from livetail.verify.theorems.prover.terms import simplified
u, v, w = z3.Ints("u v w")
f = z3.Implies(z3.And(w <= v, u + v == 0), z3.And(u + 31 * w == 0, v - w >= 2, u * 2 <= w))
g = z3.Implies(z3.And(v - w >= 2, w <= v), z3.Or(u + 31 * w == 0, u * 2 <= w, u + v == 0))
print(repr(z3.simplify(z3.And(f, g)).sexpr()))
print(repr(simplified(z3.And(f, g)).sexpr()))
"""


def _interpreter(code: str) -> list[str]:
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONHASHSEED="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_simplified_gives_the_same_formula_whatever_the_process_made_before() -> None:
    plain, ours = _interpreter(SIMPLIFY), _interpreter(CHURN + SIMPLIFY)
    # z3.simplify orders a disjunction by term ids: the churn moves them (else this test
    # would show nothing); the small-domain search's simplification must not move.
    assert plain[0] != ours[0]
    assert plain[1] == ours[1]


THEOREM = """
import json
from livetail.verify.theorems import run_theorem
r = run_theorem("sequential-charge-exact")  # a full run: it searches small
print(json.dumps([r["verdict"], r["rlimit_used"], [[s["name"], s["rlimit"]] for s in r["steps"]]]))
"""


def test_small_domain_searches_spend_the_same_units_in_two_processes_with_other_histories() -> None:
    """The failure this guards against: one theorem's small-domain pass used 2,201,399 units
    in one process and 2,201,400 in another (the search's formula came from z3.simplify)."""
    plain, churned = _interpreter(THEOREM), _interpreter(CHURN + THEOREM)
    assert plain == churned
    verdict, used, steps = __import__("json").loads(plain[-1])
    assert verdict == "proved" and used > 0
    assert steps[0][0] == "small domain of every step" and steps[0][1] > 0
