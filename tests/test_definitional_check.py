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
from livetail.verify.theorems._prover import DEFAULT_RLIMIT, Prover, StepFailed, uninterpreted

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
]


class KeepGoing(Prover):
    """A prover that records each step's result and carries on past failures."""

    def prove(self, name: str, *args: Any, **kwargs: Any) -> None:
        with contextlib.suppress(StepFailed):
            super().prove(name, *args, **kwargs)

    def prove_general(self, name: str, *args: Any, **kwargs: Any) -> None:
        with contextlib.suppress(StepFailed):
            super().prove_general(name, *args, **kwargs)

    def exhibit(self, name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().exhibit(name, *args, **kwargs)
        except StepFailed:
            return {}


def _results_with_unknown(
    theorem: str, target: tuple[Any, str], rlimit: int | None = None
) -> dict[str, str]:
    p = KeepGoing(rlimit=THEOREMS[theorem].budget if rlimit is None else rlimit)
    with uninterpreted(*target):
        THEOREMS[theorem].check(p)
    out: dict[str, str] = {}
    for s in p.steps:
        out.setdefault(s.name, s.result)
        if s.result == "proved":
            out[s.name] = "proved"
    return out


# Theorems whose steps for other groups come first and fail without the function, spending
# the theorem's own budget before the step under test: they run with the default budget.
REACH = {"acquire-all-or-nothing": DEFAULT_RLIMIT}


@pytest.mark.parametrize("theorem,target,step", ABOUT, ids=[a[0] for a in ABOUT])
def test_executing_step_fails_with_the_function_it_is_about_unknown(
    theorem: str, target: tuple[Any, str], step: str
) -> None:
    results = _results_with_unknown(theorem, target, REACH.get(theorem))
    # The step was attempted (its general query at least: when that is undecided, the
    # concrete fallback may end on the theorem's rlimit budget before it records a result)
    # and did not prove.
    assert step in results or f"{step} (general)" in results, sorted(results)
    assert results.get(step) != "proved"


@pytest.mark.parametrize("theorem,target,step", FLAGGED, ids=[f[0] for f in FLAGGED])
def test_definitional_step_still_proves_and_its_theorem_says_so(
    theorem: str, target: tuple[Any, str], step: str
) -> None:
    # Earlier steps fail without the function and may spend the theorem's own budget: the
    # default one lets the run reach the step.
    results = _results_with_unknown(theorem, target, DEFAULT_RLIMIT)
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
