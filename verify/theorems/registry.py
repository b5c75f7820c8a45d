"""The registry: every theorem ``livetail verify`` proves, in report order, and the property
of semantics section 7 it establishes.

Each theorem module registers its theorems with ``@theorem`` (``prover/theorem.py``); this
module lists every one of them by its check function, once, with what it establishes, and
puts ``THEOREMS`` in that order (the report's, the docs' and ``livetail rlimits``').  A
theorem registered and not listed here, or listed and not registered, fails the import.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .all_or_nothing import (
    acquire_all_or_nothing,
    acquire_all_or_nothing_bounded,
    coordinator_acquire,
    coordinator_all_or_nothing,
)
from .arithmetic import (
    closed_forms_int32,
    native_arithmetic_int64,
    sequential_fits_checks_agree,
    textbook_round_up,
)
from .chunked import chunked_hit_rule, chunked_reclaim_exact
from .closed_forms import (
    blocks_needed_equals_acquire,
    live_count_closed_form,
    resume_count_closed_form,
)
from .conservation import conservation, references_per_page
from .events import events_replay
from .host_loads import (
    claim_slots,
    claim_with_loads,
    loads_land_in_real_slots,
    match_across_tiers,
)
from .host_offload import offload_is_reachable_set, offload_preserves_hits, offload_reachable
from .host_plans import plan_ends
from .host_writeback import partial_write_back
from .hot_paths import native_hot_paths
from .live_tail_safety import (
    acquire_places_holes,
    full_allocation,
    hole_never_read,
    live_tail_minimal,
    resume_pages_kept,
    state_live_tail,
)
from .naming import naming_only_reachable, naming_reaches
from .plans import step_plan, step_plan_bounded
from .pool_transitions import pool_transitions
from .prefix import (
    claim_takes_consumed,
    hit_admission_exact,
    live_tail_never_costs_a_hit,
    match_greatest_boundary,
    match_is_read_only,
)
from .prompt_charge import prompt_charge_bounds_every_chunk
from .prover.prover import Prover
from .prover.theorem import THEOREMS, Theorem
from .reclaim import (
    reclaim_bounded,
    reclaim_exact,
    reclaim_releases_only_expired,
    reclaim_slots,
    reclaimable_slots,
)
from .retention import retention_bounded, retention_queue
from .sequential_charge import (
    admission_promise,
    combined_charge_under_counts,
    decode_reserve_exact,
    sequential_charge_bounds_peak,
    sequential_charge_exact,
    sequential_with_reclaims,
)
from .shift import shift_by_non_multiple, shift_invariance

__all__ = ["NO_THEOREM", "PROPERTY", "REGISTRY", "SECTION7", "THEOREMS", "properties"]

# Report order: closed forms, charges, safety, the bounded runs of the spec, arithmetic,
# prefix caching, retention and step plans, the host tier.
REGISTRY: tuple[tuple[Callable[[Prover], None], str], ...] = (
    (resume_count_closed_form, "7.2 (closed form of the resume count)"),
    (live_count_closed_form, "7.2 (live_count = slot-by-slot count)"),
    (blocks_needed_equals_acquire, "7.2 (definitional; acquire shape)"),
    (full_allocation, "7.4 (degenerate case)"),
    (acquire_all_or_nothing, "7.1 (manager acquire)"),
    (coordinator_all_or_nothing, "7.1 (coordinator acquire)"),
    (admission_promise, "7.3 (sequential charge bounds the peak)"),
    (acquire_places_holes, "7.4 (acquire's placement)"),
    (reclaim_exact, "7.5 (reclaim, with sharing and holes)"),
    (conservation, "7.6 (free + pinned = N - 1, inductive; per-page: bounded)"),
    (references_per_page, "7.6 per page (acquire, claim, free, fork, copy_tail: count = holders)"),
    (sequential_charge_exact, "7.3 (over the closed forms; partly definitional)"),
    (sequential_fits_checks_agree, "7.7 (spec and native agree on the int32 check)"),
    (sequential_charge_bounds_peak, "7.3 (definitional, over the closed forms)"),
    (combined_charge_under_counts, "7.3 (the combined charge does not bound the peak)"),
    (decode_reserve_exact, "7.3 (reserve >= 0; partly definitional)"),
    (shift_invariance, "section 6 (charges on fresh tables)"),
    (shift_by_non_multiple, "section 6 (alignment is needed)"),
    (hole_never_read, "7.4 (safety, over live)"),
    (resume_pages_kept, "7.4 (resume pages, over live)"),
    (live_tail_minimal, "7.4 (minimality, over live)"),
    (reclaim_releases_only_expired, "7.5 (the reclaim bound)"),
    (reclaim_slots, "7.5 and 7.6 per slot (the model's reclaim, slot by slot)"),
    (reclaimable_slots, "7.5 (blocks_reclaimable_at, slot by slot)"),
    (chunked_reclaim_exact, "7.5 (a chunked group's reclaim bound, section 13.2)"),
    (chunked_hit_rule, "7.8 (a chunked group's hit rule, section 13.2)"),
    (naming_reaches, "7.8 (naming reaches every page a hit needs)"),
    (naming_only_reachable, "7.8 (sparse naming: nothing a hit cannot use, 13.4)"),
    (state_live_tail, "7.4 and 7.8 (Mamba \"align\" mode: state pages and names, 13.5)"),
    (step_plan, "7.10 (two requests, no page shared between them)"),
    (events_replay, "7.12 (replay = names, inductive per name)"),
    (retention_queue, "7.9 (the free queue's order, inductive)"),
    (pool_transitions, "7.6 and 7.9 per page (the pool's own transitions, inductive)"),
    (claim_slots, "7.11 and 7.8 per slot (the claim places matched and loaded pages)"),
    (offload_reachable, "7.11 (offload picks exactly the reachable slots)"),
    (plan_ends, "7.11 per entry (completed plans name their pages, every plan drops its pins)"),
    (acquire_all_or_nothing_bounded, "7.1 (bounded)"),
    (sequential_with_reclaims, "7.3 (bounded)"),
    (prompt_charge_bounds_every_chunk, "7.3 (the whole-prompt charge of section 13.1, bounded)"),
    (reclaim_bounded, "7.5 and 7.6 per page (bounded)"),
    (coordinator_acquire, "7.1 (bounded)"),
    (native_arithmetic_int64, "7.7"),
    (closed_forms_int32, "7.7"),
    (textbook_round_up, "7.7 (why the round-up is written as it is)"),
    (native_hot_paths, "7.7 (every native hot-path expression)"),
    (match_is_read_only, "7.8 (bounded)"),
    (claim_takes_consumed, "7.8 (bounded)"),
    (hit_admission_exact, "7.8 (bounded)"),
    (live_tail_never_costs_a_hit, "7.8 (bounded)"),
    (match_greatest_boundary, "7.8 (bounded)"),
    (retention_bounded, "7.9 (bounded)"),
    (step_plan_bounded, "7.10 (bounded)"),
    (offload_is_reachable_set, "7.11 (offload copies the reachable pages, bounded)"),
    (match_across_tiers, "7.11 (match across tiers, bounded)"),
    (claim_with_loads, "7.11 (claim with loads, bounded)"),
    (loads_land_in_real_slots, "7.11 (loads and the data oracle, bounded)"),
    (offload_preserves_hits, "7.11 (offload then match across tiers, bounded)"),
    (partial_write_back, "7.11 (a partial write-back keeps the longest prefix, 13.7, bounded)"),
)


def _listed() -> list[Theorem]:
    by_check = {th.check: th for th in THEOREMS.values()}
    missing = [check.__qualname__ for check, _ in REGISTRY if check not in by_check]
    listed = {check for check, _ in REGISTRY}
    unlisted = [th.name for th in THEOREMS.values() if th.check not in listed]
    if missing or unlisted or len(listed) != len(REGISTRY):
        raise RuntimeError(
            f"theorem registry out of step: not registered {missing}, not listed {unlisted}"
        )
    return [by_check[check] for check, _ in REGISTRY]


_ordered = _listed()
THEOREMS.clear()
THEOREMS.update((th.name, th) for th in _ordered)

PROPERTY: dict[str, str] = {th.name: prop for th, (_, prop) in zip(_ordered, REGISTRY)}
"""Which property of semantics section 7 each theorem establishes (and how far)."""

SECTION7 = {
    1: "all-or-nothing",
    2: "closed forms = slot-by-slot",
    3: "sequential charge bounds the peak",
    4: "live-tail safety and minimality",
    5: "reclaim",
    6: "conservation",
    7: "arithmetic",
    8: "prefix caching",
    9: "retention",
    10: "step plans",
    11: "host tier",
    12: "events",
}
NO_THEOREM: dict[int, str] = {}
"""Section-7 properties with no theorem, and what checks them instead."""


def properties(th: Theorem) -> list[int]:
    """The section-7 properties a theorem establishes (from PROPERTY: "7.N", "7.N and 7.M")."""
    return [int(n) for n in re.findall(r"7\.(\d+)", PROPERTY[th.name])]
