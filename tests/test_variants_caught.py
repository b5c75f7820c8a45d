"""Every deliberately wrong spec variant is caught, leaves a minimal trace, and replays.

The machine runs the patched spec alone: its invariants (checked against the machine's own
slot-by-slot oracle, never against the spec) must catch each variant without the native
module's help.  The trace is then replayed on spec and native: with ``--variant`` the
failure is reproduced (exit 1), without it the same ops pass on both sides (exit 0).

Hypothesis' shrink phase is skipped here for time (it adds 30-60 s per variant and its
stateful shrinker leaves steps behind anyway); ``minimize_trace`` reduces the first failing
example to a 1-minimal trace in milliseconds, which the last assertion checks.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, settings
from livetail.verify import replay, variants
from livetail.verify.campaign import run_differential
from livetail.verify.machine import rules as machine_rules
from livetail.verify.machine.side import implementations
from livetail.verify.trace import load_trace

PRE_CHUNKED_KINDS = ("full", "live", "sliding", "live", "state")

# The properties that may flag each variant at the trace's failing step.
CAUGHT_BY = {
    "combined-charge": ("closed-form",),  # blocks_needed_for_sequential != slot-by-slot sum
    # The concrete acquire's run check raises: its placement and the closed-form take disagree
    # (in an acquire op, or in the acquire a plan's apply_step runs).
    "live-off-by-one": ("valid-call", "step-plan"),
    "reclaim-stops-at-hole": ("reclaim",),  # a real page left below the reclaim bound
    "acquire-before-check": ("all-or-nothing",),  # a failed group acquire kept pages
    "reclaimable-ignores-names": ("closed-form",),  # counted pages no name makes reclaimable
    "plan-fits-strict": ("step-plan",),  # the plan differs from its definition
    # The pool's names break under the rule; since reset_names and the stored/removed
    # decisions share the event rules, the event stream may be what diverges first.
    "removes-while-copies-remain": ("names", "events"),
    # The pool's queue rules (spec/slots.py from_front, evicts, joins_front):
    "alloc-queue-before-front": ("exact-take",),  # the pages taken are not the queue's head
    "alloc-keeps-name": ("exact-take",),  # a page handed out still carries its name
    "named-release-joins-front": ("retention",),  # an unnamed free page behind a named one
    # free's own check raises (its batch is one page short of its runs' real pages).
    "free-skips-last-slot": ("valid-call",),
    # The fork's last slot holds a page one reference short: counts != holders.
    "fork-skips-last-slot": ("conservation",),
}


# Killed by unbounded theorems that execute the transitions (tests/test_theorems.py,
# livetail verify --mutants); the machine is not asked to find them.
BY_THEOREMS = {
    "acquire-frontier-minus-one",
    "real-pages-packed-first",
    "reclaim-keeps-band-top",
    "reclaimable-counts-shared",
    "slid-out-off-by-one",
    "reclaim-floor-to-bound",
    "resume-count-off-by-one",
    "coordinator-fits-strict",
    "take-counts-holes",
    "reclaim-floor-not-updated",
    "tail-after-off-by-one",
    "reclaim-cell-spares-floor",
    "names-skip-last-page",  # the spec-alone oracle compares names, does not predict them
    "names-unreachable-slots",  # the same: dense names differ from native's sparse ones only
    "prompt-charge-largest-chunk",  # the machine does not query the whole-prompt charge
    "chunked-reclaim-one-chunk-late",
    "chunked-reclaim-one-chunk-early",
    "chunked-hit-demands-whole-chunk",
    "chunked-hit-one-slot-short",
    # The pool's own transitions (spec/pool_state.py): pool-transitions-keep-the-queue
    # executes them and refutes each; the scenarios catch each too (test_quick_campaign.py).
    "unlink-keeps-back-link",
    "release-frees-at-one",
    "claim-leaves-page-queued",
    "requeue-keeps-name-at-back",
    "drop-name-keeps-holder",
    "state-checkpoint-dropped",  # the kinds searched here have no live-tail state group
}


def test_every_variant_has_an_expected_catching_property() -> None:
    assert sorted(set(CAUGHT_BY) | BY_THEOREMS) == sorted(variants.VARIANTS)
    assert not set(CAUGHT_BY) & BY_THEOREMS


def _replay(path: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = replay.main([str(path), "--impl", "both", *args], out=out)
    return code, out.getvalue()


@pytest.mark.parametrize("name", sorted(CAUGHT_BY))
def test_wrong_variant_is_caught_and_its_minimal_trace_replays(
    name: str,
    tmp_path: Path,
    assert_one_minimal: Callable[[dict[str, Any], str], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # None of these variants is about a group kind: search the kinds the table above was
    # written for (no chunked group, whose variants the theorems kill), so that the
    # derandomized search meets the same first failures.
    monkeypatch.setattr(machine_rules, "GROUP_KINDS", PRE_CHUNKED_KINDS)
    result = run_differential(
        implementations("spec"),
        examples=2000,
        steps=40,
        variant=name,
        traces_dir=tmp_path,
        parent=settings(phases=[Phase.explicit, Phase.generate]),
    )
    assert result.failure is not None, f"variant {name} survived {result.examples} examples"
    assert result.trace_path is not None
    assert list(tmp_path.iterdir()) == [result.trace_path]

    trace = load_trace(result.trace_path)
    assert trace["variant"] == name
    assert trace["origin"] == "differential"
    assert set(CAUGHT_BY[name]) & set(trace["observed"]["properties"])
    assert trace["observed"]["step"] == len(trace["ops"]) - 1

    code, text = _replay(result.trace_path, "--variant", name)
    assert code == 1, text
    assert f"spec[{name}] vs native" in text
    assert any(f"{prop} FAIL" in text for prop in CAUGHT_BY[name])

    code, text = _replay(result.trace_path)
    assert code == 0, text
    assert f"add --variant {name} to reproduce" in text

    assert_one_minimal(trace, name)
