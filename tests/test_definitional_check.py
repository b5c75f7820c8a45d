"""The definitional check: a step re-run with the function it is about made unknown.

If a step still proves when the function it compares against is replaced by an
uninterpreted function of the same arguments, the step says nothing about that function
(it compares a function with its own body).  The steps of the theorems that execute the
spec's transitions must fail that check; the steps known to pass it are labelled
definitional in their theorem's statement.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from livetail.spec import geometry as geo
from livetail.spec import runs
from livetail.verify.theorems import THEOREMS, run_theorem
from livetail.verify.theorems.prover.prover import Prover, StepFailed
from livetail.verify.theorems.prover.query import rlimit_count
from livetail.verify.theorems.prover.terms import uninterpreted

LIVE = "[live-tail sliding (A = m*B)]"

# (theorem, (module, function it is about), step name): the step must NOT prove once the
# function is unknown.
ABOUT = [
    (
        "acquire-all-or-nothing",
        (geo, "blocks_needed"),
        f"{LIVE} acquire succeeds iff blocks_needed_for(n) <= F",
    ),
    (
        "coordinator-acquire-all-or-nothing",
        (geo, "blocks_needed"),
        "[live 1] lemma: the executed acquire takes blocks_needed_for(n) if it fits, else 0",
    ),
    (
        "admission-promise",
        (geo, "blocks_needed_sequential"),
        f"{LIVE} lemma: when the charge fits, the executed acquire(first) then acquire(extra)"
        " succeed and take exactly the charge",
    ),
    (
        "acquire-places-holes-outside-every-window",
        (geo, "live"),
        "a hole is outside the window of every query t >= the run's frontier",
    ),
    (
        "reclaim-exact-with-shared-pages",
        (runs, "counts_as_reclaimable"),
        "[state (W = 2)] released = blocks_reclaimable_at(f) before, free grows by it",
    ),
]

# Steps that still prove with the function unknown: their theorems say so.
FLAGGED = [
    (
        "blocks-needed-equals-acquire",
        (geo, "live_count"),
        f"{LIVE} blocks_needed = live new slots at frontier extent + n",
    ),
    (
        "sequential-charge-exact",
        (geo, "blocks_needed"),
        f"{LIVE} sequential = take(first) + take(extra) on the shape left",
    ),
    ("decode-reserve-exact", (geo, "blocks_needed"), f"{LIVE} reserve = take of acquire(extra)"),
    (
        "sequential-charge-bounds-peak",
        (geo, "blocks_needed"),
        f"{LIVE} peak pinned <= sequential, for any r >= 0 reclaimed between",
    ),
]


class Focused(Prover):
    """A prover that decides only the step under test and records its result.

    Every other step of the theorem is skipped: its query says nothing about whether the
    step under test depends on the function, and with the function unknown it could only
    fail (spending budget) or prove vacuously.  A lemma is skipped too, but its instances
    still reach later steps as hypotheses, exactly as in the real run.  The step gets the
    theorem's whole budget.
    """

    def __init__(self, step: str, rlimit: int) -> None:
        super().__init__(rlimit=rlimit)
        self.step = step
        self.reached = False

    def _skip(self, name: str) -> bool:
        if name.removesuffix(" (general)") != self.step:
            return True
        if not self.reached:  # the budget counts from the step's first query
            self.reached, self.start = True, rlimit_count()
        return False

    def prove(self, name: str, *args: Any, **kwargs: Any) -> None:
        if not self._skip(name):
            with contextlib.suppress(StepFailed):
                super().prove(name, *args, **kwargs)

    def prove_general(self, name: str, *args: Any, **kwargs: Any) -> None:
        if not self._skip(name):
            with contextlib.suppress(StepFailed):
                super().prove_general(name, *args, **kwargs)

    def exhibit(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return {}


def _results_with_unknown(theorem: str, target: tuple[Any, str], step: str) -> dict[str, str]:
    p = Focused(step, THEOREMS[theorem].budget)
    with uninterpreted(*target):
        THEOREMS[theorem].check(p)
    out: dict[str, str] = {}
    for s in p.steps:
        out.setdefault(s.name, s.result)
        if s.result == "proved":
            out[s.name] = "proved"
    return out


@pytest.mark.parametrize("theorem,target,step", ABOUT, ids=[a[0] for a in ABOUT])
def test_executing_step_fails_with_the_function_it_is_about_unknown(
    theorem: str, target: tuple[Any, str], step: str
) -> None:
    results = _results_with_unknown(theorem, target, step)
    # The step was attempted (its general query at least: when that is undecided, the
    # concrete fallback may end on the theorem's rlimit budget before it records a result)
    # and did not prove.
    assert step in results or f"{step} (general)" in results, sorted(results)
    assert results.get(step) != "proved"


@pytest.mark.parametrize("theorem,target,step", FLAGGED, ids=[f[0] for f in FLAGGED])
def test_definitional_step_still_proves_and_its_theorem_says_so(
    theorem: str, target: tuple[Any, str], step: str
) -> None:
    results = _results_with_unknown(theorem, target, step)
    assert results.get(step) == "proved", sorted(results)
    assert "efinitional" in THEOREMS[theorem].statement


def _needed_one_more(
    slots: Any, tail: Any, n: Any, W: Any, B: Any, A: Any, ar: Any = geo.INT
) -> Any:
    """Wrong: blocks_needed_for charges one page more whenever the acquire adds slots."""
    right = _REAL["blocks_needed"]
    return ar.cond(n > tail, lambda: right(slots, tail, n, W, B, A, ar) + 1, lambda: 0)


def _sequential_one_less(
    slots: Any, tail: Any, first: Any, extra: Any, W: Any, B: Any, A: Any, ar: Any = geo.INT
) -> Any:
    """Wrong: the sequential charge is one page short."""
    return _REAL["blocks_needed_sequential"](slots, tail, first, extra, W, B, A, ar) - 1


_REAL = {f: getattr(geo, f) for f in ("blocks_needed", "blocks_needed_sequential")}


@pytest.mark.parametrize(
    "theorem,attribute,wrong,step",
    [
        (
            "coordinator-acquire-all-or-nothing",
            "blocks_needed",
            _needed_one_more,
            ABOUT[1][2],
        ),
        (
            "admission-promise",
            "blocks_needed_sequential",
            _sequential_one_less,
            "[full] lemma: when the charge fits, the executed acquire(first) then acquire(extra)"
            " succeed and take exactly the charge",
        ),
    ],
    ids=["coordinator-acquire-all-or-nothing", "admission-promise"],
)
def test_restated_theorem_rejects_a_wrong_closed_form_with_a_counterexample(
    monkeypatch: pytest.MonkeyPatch, theorem: str, attribute: str, wrong: Any, step: str
) -> None:
    monkeypatch.setattr(geo, attribute, wrong)
    r = run_theorem(theorem)
    assert r["verdict"] == "counterexample", (r["verdict"], r["message"])
    assert r["message"] == f"{step}: counterexample"
