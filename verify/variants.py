"""Deliberately wrong variants of the spec, to show that the checks can fail.

Each variant patches one function or method of ``livetail.spec`` for the duration of a
``with applied(name):`` block.  The spec calls its geometry through the module
(``geo.live(...)``) and the theorems do the same, so a patched closed form is what both
the model and the proofs see.  Every variant must be caught by the differential test or
its invariants, and by at least one theorem (``livetail verify --mutants``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from livetail.spec import coordinator as spec_coordinator
from livetail.spec import geometry as geo
from livetail.spec import host as spec_host
from livetail.spec import runs
from livetail.spec import slots as spec_slots
from livetail.spec.coordinator import Coordinator
from livetail.spec.geometry import Arith, Num
from livetail.spec.managers import _Manager
from livetail.spec.pool import BlockPool
from livetail.spec.table import BlockTable

from . import variants_prompt as _vp
from .fork_variants import FORK_RULES
from .variants_chunked import variants as _chunked_variants
from .variants_pool import variants as _pool_variants


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    target: Any
    attribute: str
    replacement: Callable[..., Any]


def _combined_charge(
    slots: Num, tail: Num, first: Num, extra: Num, W: Num, B: Num, A: Num, ar: Arith = geo.INT
) -> Num:
    # Wrong: charges first + extra as one chunk; live tail makes that an under-count.
    return geo.blocks_needed(slots, tail, first + extra, W, B, A, ar)


def _live_off_by_one(s: Num, f: Num, W: Num, B: Num, A: Num, ar: Arith = geo.INT) -> Num:
    # Wrong: the first slot still inside the window is treated as slid out.
    return ar.cond(
        A > 0,
        lambda: ar.either(
            s > geo.slid_out(f, W, B, ar),
            ar.mod(s, geo.period(A, B, ar)) >= geo.period(A, B, ar) - geo.resume_pages(W, B, ar),
        ),
        lambda: True,
    )


def _reclaim_stops_at_first_hole(self: _Manager, pool: BlockPool, table: BlockTable, f: int) -> int:
    # Wrong: treats a hole as the end of the expired band.
    b = self._reclaim_bound(table, f)
    released = []
    s = table.reclaim_floor
    while s < b and table.slots[s] != 0:
        released.append(table.slots[s])
        table.slots[s] = 0
        s += 1
    table.reclaim_floor = max(table.reclaim_floor, s)
    return pool._release(list(reversed(released)))


def _acquire_before_check(self: _Manager, pool: BlockPool, table: BlockTable, n: int) -> bool:
    # Wrong: takes pages slot by slot and gives up half way on shortfall.
    if n == 0:
        return True
    if n <= table.tail_available:
        table.tail_available -= n
        self._bind(pool, table)
        return True
    first = len(table.slots)
    new = geo.ceil_div(n - table.tail_available, self.block_size)
    f = self._extent(table) + n
    run = runs.acquire_run(self._state(table), n, self._group())
    for s in range(first, first + new):
        if self._is_live(s, f):
            page = pool._allocate(1)
            if page is None:
                return False
            table.slots.append(page[0])
        else:
            table.slots.append(0)
    table.tail_available = geo.tail_after(table.tail_available, self.block_size, n)
    table.runs.append(run)  # the run is recorded only when the acquire went through
    self._bind(pool, table)
    return True


def _frontier_minus_one(t: runs.TableState, n: Num, g: runs.Group, ar: Arith = geo.INT) -> runs.Run:
    # Wrong: places the new slots for frontier extent + n - 1.
    return runs.Run(
        t.slots, geo.new_slots(t.tail, g.B, n, ar), geo.extent(t.slots, t.tail, g.B) + n - 1
    )


def _packed_first(run: runs.Run, s: Num, g: runs.Group, ar: Arith = geo.INT) -> Num:
    # Wrong: the run's real pages go to its first slots, the holes after them.
    return s - run.first < runs.run_take(run, g, ar)


def _band_top_kept(floor: Num, b: Num, ar: Arith = geo.INT) -> tuple[Num, Num]:
    # Wrong: the last slot of the band is never scanned.
    return floor, ar.max(floor, b - 1)


def _counts_shared(ref: Num, ar: Arith = geo.INT) -> Num:
    # Wrong: a shared page is predicted to re-enter the queue.
    return ref >= 1


def _slid_out_plus_one(f: Num, W: Num, B: Num, ar: Arith = geo.INT) -> Num:
    # Wrong: one page more is treated as out of the window.
    d = f - W + 1
    return ar.cond(d > 0, lambda: ar.div(d, B) + 1, lambda: 0)


def _floor_to_bound(floor: Num, b: Num, ar: Arith = geo.INT) -> Num:
    # Wrong: the floor is set to the bound, so it moves down after an earlier reclaim.
    return b


def _resume_count_off_by_one(x: Num, m: Num, kept: Num, ar: Arith = geo.INT) -> Num:
    # Wrong: the partial period counts one resume slot too many (an off-by-one in a closed form).
    return ar.div(x, m) * kept + ar.max(0, ar.mod(x, m) - (m - kept) + 1)


def _coordinator_fits_strict(
    free: Num, tables: list[runs.TableState], groups: list[runs.Group], n: Num, ar: Arith = geo.INT
) -> runs.CoordinatorStep:
    # Wrong: the coordinator's fits check is strict, so a request that needs exactly the
    # free pages is refused.
    need = runs._sum(
        geo.blocks_needed(t.slots, t.tail, n, g.W, g.B, g.A, ar) for t, g in zip(tables, groups)
    )
    ok = need < free
    n_each = ar.cond(ok, lambda: n, lambda: 0)
    steps = []
    left = free
    for t, g in zip(tables, groups):
        step = runs.acquire(left, t, n_each, g, ar)
        steps.append(step)
        left = step.free
    return runs.CoordinatorStep(ok, need, tuple(steps), left)


def _take_counts_holes(run: runs.Run, g: runs.Group, ar: Arith = geo.INT) -> Num:
    # Wrong: the pages a run takes are counted over all its slots, holes included.
    return run.count


def _floor_not_updated(floor: Num, b: Num, ar: Arith = geo.INT) -> Num:
    # Wrong: reclaim forgets to move the floor, so the next reclaim scans the band again.
    return floor


def _tail_after_off_by_one(tail: Num, B: Num, n: Num, ar: Arith = geo.INT) -> Num:
    # Wrong: the tail room left after a spill into new slots is one token short.
    def spill() -> Num:
        r = ar.mod(n - tail, B)
        return ar.cond(r > 0, lambda: B - r - 1, lambda: 0)

    return ar.cond(n > tail, spill, lambda: tail - n)


def _reclaim_cell_spares_floor(s: Num, page: Num, lo: Num, hi: Num, ar: Arith = geo.INT) -> Num:
    # Wrong: the band's first slot (the one at the floor) keeps its page.
    return ar.cond(runs.both(lo < s, s < hi, ar), lambda: 0, lambda: page)


def _reclaimable_ignores_names(
    s: Num,
    page: Num,
    ref: Num,
    cached: Any,
    count_uncached: Any,
    lo: Num,
    hi: Num,
    ar: Arith = geo.INT,
) -> Any:
    # Wrong: count_uncached=False still counts unnamed pages.
    return runs.both(
        spec_slots.punched(s, page, lo, hi, ar), runs.counts_as_reclaimable(ref, ar), ar
    )


_offered = spec_slots.offered  # the rule itself, for the variants built on it


def _offered_skips_last(
    j: Num, n: Num, B: Num, R: Num, q: Num, upto: Num, covered: Num, *rest: Any
) -> Any:
    # Wrong: the last page the keys cover is never offered a name.
    return _offered(j, n, B, R, q, upto, covered - 1, *rest)


def _offered_dense(j: Num, n: Num, B: Num, R: Num, q: Num, *rest: Any) -> Any:
    # Wrong: every full page the keys cover is offered a name, whether or not an aligned
    # boundary can resume from it (dense naming: the rule before section 13.4; R = -1 is a
    # full group's, every slot behind a boundary).
    return _offered(j, n, B, -1, q, *rest)


def _plan_fits_strict(taken: Num, free: Num, released: Num, ar: Arith = geo.INT) -> Any:
    # Wrong: a step that would use every free page is treated as not fitting.
    return taken < free + released


def _removes_while_copies_remain(holders: Num, ar: Arith = geo.INT) -> Any:
    # Wrong: the name is announced removed while one other page still carries it.
    return holders <= 1


def _freed_skips_last(s: Num, page: Num, slots: Num, ar: Arith = geo.INT) -> Any:
    # Wrong: free lets go of every real slot's page but the last slot's (an off-by-one in
    # the band), though it empties the whole table.
    return runs.both(spec_slots.in_band(s, 0, slots - 1, ar), page != 0, ar)


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in [
        Variant(
            "combined-charge",
            "blocks_needed_for_sequential charges first+extra as one chunk",
            geo,
            "blocks_needed_sequential",
            _combined_charge,
        ),
        Variant(
            "live-off-by-one",
            "live(s, f) uses s > slid_out(f) instead of s >= slid_out(f)",
            geo,
            "live",
            _live_off_by_one,
        ),
        Variant(
            "reclaim-stops-at-hole",
            "reclaim_expired stops scanning at the first hole in the expired band",
            _Manager,
            "_reclaim",
            _reclaim_stops_at_first_hole,
        ),
        Variant(
            "acquire-before-check",
            "acquire takes pages slot by slot before checking the whole batch fits",
            _Manager,
            "_acquire",
            _acquire_before_check,
        ),
        Variant(
            "acquire-frontier-minus-one",
            "acquire places its new slots for frontier extent + n - 1",
            runs,
            "acquire_run",
            _frontier_minus_one,
        ),
        Variant(
            "real-pages-packed-first",
            "acquire puts its real pages in the run's first slots and the holes after them",
            runs,
            "run_real",
            _packed_first,
        ),
        Variant(
            "reclaim-keeps-band-top",
            "reclaim_expired never frees the last slot of its band",
            runs,
            "reclaim_band",
            _band_top_kept,
        ),
        Variant(
            "reclaimable-counts-shared",
            "blocks_reclaimable_at counts pages other holders share",
            runs,
            "counts_as_reclaimable",
            _counts_shared,
        ),
        Variant(
            "slid-out-off-by-one",
            "slid_out(f) is one page too high",
            geo,
            "slid_out",
            _slid_out_plus_one,
        ),
        Variant(
            "reclaim-floor-to-bound",
            "reclaim sets the floor to the bound instead of the max of floor and bound",
            runs,
            "floor_after",
            _floor_to_bound,
        ),
        Variant(
            "resume-count-off-by-one",
            "the resume-slot count of a partial period is one too high",
            geo,
            "resume_count_below",
            _resume_count_off_by_one,
        ),
        Variant(
            "coordinator-fits-strict",
            "the coordinator's acquire admits only when the summed need is below the free pages",
            runs,
            "coordinator_acquire",
            _coordinator_fits_strict,
        ),
        Variant(
            "take-counts-holes",
            "the pages an acquire's run takes count its holes too",
            runs,
            "run_take",
            _take_counts_holes,
        ),
        Variant(
            "reclaim-floor-not-updated",
            "reclaim leaves the floor where it was",
            runs,
            "floor_after",
            _floor_not_updated,
        ),
        Variant(
            "tail-after-off-by-one",
            "the tail room an acquire leaves in its last new slot is one token short",
            geo,
            "tail_after",
            _tail_after_off_by_one,
        ),
        Variant(
            "reclaim-cell-spares-floor",
            "reclaim lets go of the page at the floor but leaves it in its slot",
            spec_slots,
            "reclaim_cell",
            _reclaim_cell_spares_floor,
        ),
        Variant(
            "reclaimable-ignores-names",
            "blocks_reclaimable_at(count_uncached=False) counts unnamed pages too",
            spec_slots,
            "reclaimable_cell",
            _reclaimable_ignores_names,
        ),
        Variant(
            "names-skip-last-page",
            "cache_full_blocks never offers a name to the last page its keys cover",
            spec_slots,
            "offered",
            _offered_skips_last,
        ),
        Variant(
            "plan-fits-strict",
            "a step plan treats a step that uses every free page as not fitting",
            runs,
            "plan_fits",
            _plan_fits_strict,
        ),
        Variant(
            "removes-while-copies-remain",
            "a removed event is sent while another page still carries the name",
            spec_slots,
            "removes",
            _removes_while_copies_remain,
        ),
        Variant(
            "free-skips-last-slot",
            "free lets go of every real slot's page but the last slot's",
            spec_slots,
            "freed",
            _freed_skips_last,
        ),
    ]
}


@contextlib.contextmanager
def applied(name: str) -> Iterator[Variant]:
    """Patch the spec with variant `name` inside the block; restore it afterwards."""
    try:
        v = VARIANTS[name] if name in VARIANTS else HOST_VARIANTS[name]
    except KeyError:
        known = ", ".join([*VARIANTS, *HOST_VARIANTS])
        raise ValueError(f"unknown variant {name!r}; known: {known}") from None
    with patched(v):
        yield v


@contextlib.contextmanager
def patched(v: Variant) -> Iterator[None]:
    """Patch the spec with `v` (registered or not) inside the block; restore it afterwards."""
    original = v.target.__dict__[v.attribute]
    setattr(v.target, v.attribute, v.replacement)
    try:
        yield
    finally:
        setattr(v.target, v.attribute, original)


# --- host tier (semantics section 10) ----------------------------------------------------
# Caught by the host machine's data oracle (verify/machine/host.py, tests/test_host_machine.py)
# and rejected by the host-tier theorems that name them in `kills` (verify/theorems/host_*.py;
# `applied` takes either table). They stay out of VARIANTS: `livetail verify --mutants` runs
# every theorem against every entry of VARIANTS (each host variant would add a full round);
# tests/test_theorems.py checks each claimed kill, and `livetail replay --variant` takes them.


def _load_into_hole(host_page: Num, loaded_page: Num, ar: Arith = geo.INT) -> Num:
    # Wrong: the loaded page is not put in the table; the host-served slot stays a hole.
    return 0


def _reachable_without_first_resume_page(
    j: Num, n: Num, B: Num, R: Num, q: Num, ar: Arith = geo.INT
) -> Any:
    # Wrong: a sliding or state group offloads R - 1 of the R slots behind each boundary.
    first = (ar.div(j, q) + 1) * q
    near = runs.both(first * B <= n, first - R + 1 <= j, ar)
    return runs.both(j >= 0, ar.cond(R < 0, lambda: (j + 1) * B <= n, lambda: near), ar)


def _complete_load_rotated(c: Coordinator, plan: object) -> None:
    # Wrong: the names go to the plan's device pages rotated by one (the wrong page).
    assert isinstance(plan, spec_host.LoadPlan)
    pages = plan._device_pages
    plan._device_pages = pages[1:] + pages[:1]
    try:
        spec_host.complete_load(c, plan)
    finally:
        plan._device_pages = pages


def _pin_host_in_queue(self: Coordinator, host_page: int) -> None:
    # Wrong: the pending load counts its host page but leaves it in the host queue, where
    # an offload's allocation can evict and reuse it.
    assert self._host is not None
    self._host._ref[host_page] += 1


def _claim_cell_host_id(
    device_page: Num, host_page: Num, loaded_page: Num, ar: Arith = geo.INT
) -> Num:
    # Wrong: a host-served slot gets the host page's id instead of the device page loaded for it.
    return ar.cond(device_page != 0, lambda: device_page, lambda: host_page)


HOST_VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant(
            "load-into-hole",
            "a claim leaves a host-served slot a hole instead of loading into it",
            spec_slots,
            "loaded",
            _load_into_hole,
        ),
        Variant(
            "offload-skips-resume-page",
            "an offload plan leaves out the first resume page behind each boundary",
            spec_slots,
            "reachable",
            _reachable_without_first_resume_page,
        ),
        Variant(
            "load-into-wrong-page",
            "complete_load names the plan's device pages rotated by one",
            spec_coordinator,
            "_complete_load",
            _complete_load_rotated,
        ),
        Variant(
            "evict-pinned-host-page",
            "a pending load's host page stays in the host queue (evictable)",
            Coordinator,
            "_pin_host",
            _pin_host_in_queue,
        ),
        Variant(
            "claim-cell-host-id",
            "a claim puts the host page's id in a host-served slot, not the device page loaded",
            spec_slots,
            "claim_cell",
            _claim_cell_host_id,
        ),
    )
}


def rule_variants(*entries: tuple[str, str, str, Callable[..., Any]]) -> dict[str, Variant]:
    """Variants that replace one rule of spec/slots.py each: (name, description, rule, wrong)."""
    return {n: Variant(n, d, spec_slots, attr, f) for n, d, attr, f in entries}


# --- the pool's queue rules (semantics section 2, spec/slots.py) --------------------------


def _queue_before_front(front: Num, queue: Num, ar: Arith = geo.INT) -> Any:
    # Wrong: an allocation takes the ordered queue's head first and the stack of unnamed
    # released pages only once the queue is empty (a name goes while unnamed pages are free).
    return queue == 0


def _keeps_name(named: Any, ar: Arith = geo.INT) -> Any:
    # Wrong: the page an allocation takes keeps its prefix-cache name (no eviction).
    return False


def _named_joins_front(named: Any, retention: Any, ar: Arith = geo.INT) -> Any:
    # Wrong: with retention on every released page joins the front, named ones too.
    return retention


VARIANTS.update(
    rule_variants(
        (
            "alloc-queue-before-front",
            "an allocation takes the ordered queue's head before the stack of unnamed pages",
            "from_front",
            _queue_before_front,
        ),
        (
            "alloc-keeps-name",
            "the page an allocation takes keeps its prefix-cache name",
            "evicts",
            _keeps_name,
        ),
        (
            "named-release-joins-front",
            "a released named page joins the queue's front like an unnamed one",
            "joins_front",
            _named_joins_front,
        ),
    )
)

# --- sparse naming (semantics 13.4, spec/slots.py offered) --------------------------------

VARIANTS.update(
    rule_variants(
        (
            "names-unreachable-slots",
            "cache_full_blocks names every full page, also those no aligned boundary resumes from",
            "offered",
            _offered_dense,
        ),
    )
)
VARIANTS.update(rule_variants(*FORK_RULES))  # semantics 13.6 (verify/fork_variants.py)


def _copy_target_host(device_page: Num, host_page: Num, load: Any, ar: Arith = geo.INT) -> Num:
    # Wrong: a completed load names the device page whose id is the host page's (ids mixed up).
    return host_page


def _copy_name_on_abort(name: Num, completed: Any, ar: Arith = geo.INT) -> Num:
    # Wrong: an aborted plan still names its target pages, though nothing was copied.
    return name


def _drops_device_on_load(load: Any, completed: Any, ar: Arith = geo.INT) -> Any:
    # Wrong: a load's end drops its device pages' references too, as an offload's does: the
    # loaded pages re-enter the queue while their slots still hold them.
    return True


HOST_VARIANTS.update(
    rule_variants(
        (
            "load-names-host-page",
            "complete_load names the device page whose id is the host page's, not the loaded one",
            "copy_target",
            _copy_target_host,
        ),
        (
            "aborted-plan-names-pages",
            "abort_offload (and a load aborted by free) names the plan's target pages",
            "copy_name",
            _copy_name_on_abort,
        ),
        (
            "load-releases-device-page",
            "complete_load drops the loaded device pages' references, as an offload does",
            "drops_device",
            _drops_device_on_load,
        ),
    )
)

# 13.1 prompt charge, 13.2 chunked, the pool's transitions, 13.5 state: variants_*.py.
for _more in (_vp.variants, _chunked_variants, _pool_variants, _vp.variants_state):
    VARIANTS.update(_more(Variant))
