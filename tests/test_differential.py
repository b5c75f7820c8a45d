"""The stateful differential test: spec and native module in lockstep, compared every step.

One example = a random coordinator (1-4 groups: full, sliding with and without live tail,
state; page sizes 1-16 with varying lcm), a small pool, 1-4 requests, and up to
``STEPS`` operations of the request life cycle and its abuses (see verify/machine/rules.py).
After every step both sides' full state and every query's answer are compared, and each
section-7 property is checked against the machine's slot-by-slot oracle.

Budgets: the ``ci`` profile (default) runs ``CI_EXAMPLES`` derandomized examples, 43 s on
one core of an idle 2-core machine; ``LIVETAIL_HYPOTHESIS_PROFILE=campaign``
runs the campaign profile's ``max_examples`` with fresh randomness.  A failure writes its
minimal trace to ``$LIVETAIL_TRACES_DIR`` (default ``.livetail/traces``); replay it with
``livetail replay TRACE``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import Phase, settings
from livetail.verify.campaign import run_campaign, run_differential
from livetail.verify.machine import rules as machine_rules
from livetail.verify.machine.lockstep import run_trace
from livetail.verify.machine.side import Impl, implementations
from livetail.verify.trace import load_trace

CI_EXAMPLES = 300
STEPS = 50
TRACES_DIR = Path(os.environ.get("LIVETAIL_TRACES_DIR", ".livetail/traces"))


def _examples() -> int:
    if os.environ.get("LIVETAIL_HYPOTHESIS_PROFILE", "ci") == "ci":
        return CI_EXAMPLES
    return int(settings().max_examples)  # the loaded profile's budget


def test_spec_and_native_agree_step_by_step_and_every_property_holds() -> None:
    result = run_differential(
        implementations("both"),
        examples=_examples(),
        steps=STEPS,
        traces_dir=TRACES_DIR,
        parent=settings(),
    )
    assert result.failure is None, (
        f"{result.failure}\n\nminimal trace: {result.trace_path}\n"
        f"replay it with: livetail replay {result.trace_path}"
    )
    assert result.examples == _examples()


def test_run_campaign_reports_its_budget_and_calls_progress_up_to_it(tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    report = run_campaign(
        5, tmp_path, seed=1, progress=lambda done, total: seen.append((done, total))
    )
    assert {
        k: report[k]
        for k in ("examples", "host_examples", "failures", "traces", "implementations", "seed")
    } == {
        "examples": 5,
        "host_examples": 5,
        "failures": 0,
        "traces": [],
        "implementations": ["spec", "native"],
        "seed": 1,
    }
    assert report["failure"] is None
    assert report["seconds"] > 0
    # Ops run over every example Hypothesis ran (the campaign's size): at least one each.
    assert report["steps"] >= 5 and report["host_steps"] >= 5
    # One call per machine run, clamped to each machine's budget: the device machine's 1 to
    # 5, then the host machine's counted after them, 6 to 10, out of 10.
    assert sorted(set(seen)) == [(n, 10) for n in range(1, 11)]
    assert seen == sorted(seen)
    assert list(tmp_path.iterdir()) == []


def _forward_free_module() -> ModuleType:
    """The spec, except a freed batch re-enters the queue first page first (not last first)."""
    spec = importlib.import_module("livetail.spec")

    class ForwardFreePool(spec.BlockPool):  # type: ignore[misc, name-defined]
        def _release(self, pages: Sequence[int]) -> int:
            return int(super()._release(list(reversed(pages))))

    fake = ModuleType("forward_free")
    fake.__dict__.update({k: getattr(spec, k) for k in spec.__all__})
    fake.BlockPool = ForwardFreePool  # type: ignore[attr-defined]
    return fake


# The two divergence tests below are about the pool (its queue order, its names), not a
# group kind: they search the kinds they were written for (no chunked group), so that the
# derandomized search meets the same minimal traces.
PRE_CHUNKED_KINDS = ("full", "live", "sliding", "live", "state")


def test_a_divergence_from_the_spec_is_caught_and_minimised_to_take_then_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(machine_rules, "GROUP_KINDS", PRE_CHUNKED_KINDS)
    impls = [implementations("spec")[0], Impl("forward-free", _forward_free_module())]
    result = run_differential(
        impls,
        examples=500,
        steps=STEPS,
        traces_dir=tmp_path,
        parent=settings(phases=[Phase.explicit, Phase.generate]),
    )
    assert result.trace_path is not None, "the queue-order divergence went unnoticed"
    trace = load_trace(result.trace_path)
    observed = trace["observed"]
    assert observed["implementations"] == ["spec", "forward-free"]
    assert "agree" in observed["properties"]
    # The machine's own queue-order check flags the fake side, not the spec.
    assert all(not f.startswith("spec:") for f in observed["failures"])
    # Minimal: take two pages (one acquire, or one decode per page: the minimiser cannot
    # merge decodes, which take one token each), give them back (a free, a reclaim, or a
    # step plan that preempts the request: it frees its tables); no op can be dropped.
    ops = trace["ops"]
    assert 2 <= len(ops) <= 3, ops
    assert all(op["op"] in ("acquire", "decode", "group_acquire") for op in ops[:-1]), ops
    assert ops[-1]["op"] in ("free", "group_free", "reclaim", "group_reclaim", "plan"), ops
    for i in range(len(ops) - 1):
        world, _ = run_trace({**trace, "ops": ops[:i] + ops[i + 1 :]}, impls)
        assert world.failure is None, f"op {i} of {ops} is not needed"


def _no_evict_module() -> ModuleType:
    """The spec, except an allocation keeps the popped page's prefix-cache name."""
    spec = importlib.import_module("livetail.spec")

    class NoEvictPool(spec.BlockPool):  # type: ignore[misc, name-defined]
        def _drop_name(self, page: int) -> None:
            pass

    fake = ModuleType("no_evict")
    fake.__dict__.update({k: getattr(spec, k) for k in spec.__all__})
    fake.BlockPool = NoEvictPool  # type: ignore[attr-defined]
    return fake


def test_a_prefix_cache_divergence_is_caught_with_the_naming_op_in_its_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(machine_rules, "GROUP_KINDS", PRE_CHUNKED_KINDS)
    impls = [implementations("spec")[0], Impl("no-evict", _no_evict_module())]
    result = run_differential(
        impls,
        examples=500,
        steps=STEPS,
        traces_dir=tmp_path,
        parent=settings(phases=[Phase.explicit, Phase.generate]),
    )
    assert result.trace_path is not None, "a page kept its name after eviction, unnoticed"
    trace = load_trace(result.trace_path)
    # The sides disagree; section 12's oracle (names per page) may see the kept name too.
    assert "agree" in trace["observed"]["properties"]
    assert set(trace["observed"]["properties"]) <= {"agree", "names"}
    ops = [op["op"] for op in trace["ops"]]
    assert "cache" in ops  # a page must be named before its eviction can go wrong
    # Short and 1-minimal: no op can be dropped (the length depends on the example the
    # derandomized search meets first, which every new op kind of the machine shifts).
    assert len(ops) <= 6
    full = trace["ops"]
    for i in range(len(full)):
        world, _ = run_trace({**trace, "ops": full[:i] + full[i + 1 :]}, impls)
        assert world.failure is None, f"op {i} of {ops} is not needed"
