"""Tables as runs of acquires, and the transitions written once over ``Arith``.

A table is described by the *runs* that built it: each acquire appends one run
``(first slot, slot count, frontier)``, a claim one run of the claimed slots, and the
reclaim floor says which slots below it reclaim has already punched.  Slot ``s`` of run
``r`` is real iff ``s >= floor`` and ``live(s, r.frontier)``; the pages a run takes are
counted by the proved closed form ``live_count``.  So every transition is loop-free over
slots and runs on Python ints (the model, ``managers.py`` and ``coordinator.py`` call
these functions and then fill their per-slot page ids, checking at run time that the
slots agree with the description) and on Z3 terms (``livetail.verify`` executes the very
same functions on symbolic state: symbolic page size, window, alignment, token counts,
free pages and table shape).

Pages are abstracted by counts: a pool is its number of free pages, and, where sharing
matters, the pages of a run carry one reference count (``refs``), so a reclaim or a free
drops one reference per page of a run (``drop_reference``) exactly as ``BlockPool`` does
page by page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from . import geometry as geo
from .geometry import INT, Arith, Bool, Num


@dataclass(frozen=True)
class Group:
    """A group's geometry: page size B, window W, live alignment A (0 = off).

    ``reclaims`` is False for full-attention groups, which never release a page before
    ``free`` (a Python bool: the kind of a group is never symbolic).
    """

    B: Num
    W: Num
    A: Num
    reclaims: bool = True
    C: Num | None = None  # a chunked group's chunk size (section 13.2); None for the others


def reclaim_bound_of(f: Num, slots: Num, g: Group, ar: Arith = INT) -> Num:
    """The group's reclaim bound: the sliding one, or the chunked one for a chunked group."""
    if g.C is None:
        return geo.reclaim_bound(f, slots, g.W, g.B, ar)
    return geo.chunked_reclaim_bound(f, slots, g.C, g.B, ar)


@dataclass(frozen=True)
class Run:
    """Slots ``[first, first + count)`` created together, real iff live at ``frontier``."""

    first: Num
    count: Num
    frontier: Num

    @property
    def end(self) -> Num:
        return self.first + self.count


@dataclass(frozen=True)
class TableState:
    """A table's shape, reclaim floor and runs (oldest first)."""

    slots: Num
    tail: Num
    floor: Num
    runs: tuple[Run, ...] = ()


EMPTY = TableState(0, 0, 0, ())


def both(a: Bool, b: Bool, ar: Arith = INT) -> Bool:
    return ar.cond(a, lambda: b, lambda: False)


# --- what a run holds ---------------------------------------------------------------------


def acquire_run(t: TableState, n: Num, g: Group, ar: Arith = INT) -> Run:
    """The run acquire(n) appends: the new slots and the frontier they are placed for."""
    return Run(t.slots, geo.new_slots(t.tail, g.B, n, ar), geo.extent(t.slots, t.tail, g.B) + n)


def run_real(run: Run, s: Num, g: Group, ar: Arith = INT) -> Bool:
    """Is slot s of the run given a real page?  (Placement: live at the run's frontier.)"""
    return geo.live(s, run.frontier, g.W, g.B, g.A, ar)


def real_in(run: Run, lo: Num, hi: Num, g: Group, ar: Arith = INT) -> Num:
    """How many slots of the run in ``[lo, hi)`` are real by placement (closed form)."""
    a = ar.min(ar.max(lo, run.first), run.end)
    e = ar.min(ar.max(hi, a), run.end)
    return geo.live_count(a, e - a, run.frontier, g.W, g.B, g.A, ar)


def run_take(run: Run, g: Group, ar: Arith = INT) -> Num:
    """Pages the run took when it was created."""
    return real_in(run, run.first, run.end, g, ar)


# --- queries on a table --------------------------------------------------------------------


def slot_real(t: TableState, s: Num, g: Group, ar: Arith = INT) -> Bool:
    """Does slot s hold a real page?  Not below the floor; else as its run placed it."""
    inside: Bool = False
    for run in t.runs:
        mine = both(both(run.first <= s, s < run.end, ar), run_real(run, s, g, ar), ar)
        inside = ar.either(inside, mine)
    return both(s >= t.floor, inside, ar)


def real_pages_in(t: TableState, lo: Num, hi: Num, g: Group, ar: Arith = INT) -> list[Num]:
    """Per run, its real slots in ``[max(lo, floor), hi)``."""
    low = ar.max(lo, t.floor)
    return [real_in(run, low, hi, g, ar) for run in t.runs]


def real_pages(t: TableState, g: Group, ar: Arith = INT) -> Num:
    """Real pages the table holds (``BlockTable.num_real_pages``)."""
    return _sum(real_pages_in(t, t.floor, t.slots, g, ar))


def counts_as_reclaimable(ref: Num, ar: Arith = INT) -> Bool:
    """A page in the band re-enters the queue on reclaim iff this table holds its only reference."""
    return ref == 1


def reclaimable(t: TableState, f: Num, g: Group, refs: tuple[Num, ...], ar: Arith = INT) -> Num:
    """blocks_reclaimable_at(f) when each run's pages have reference count ``refs[i]``."""
    if not g.reclaims:
        return 0
    b = reclaim_bound_of(f, t.slots, g, ar)
    band = real_pages_in(t, t.floor, b, g, ar)
    return _sum(_pick(counts_as_reclaimable(ref, ar), k, 0, ar) for k, ref in zip(band, refs))


# --- transitions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AcquireStep:
    ok: Bool  # the pool had the pages; on False nothing changed
    take: Num  # pages taken (0 on failure)
    run: Run  # the run appended (count 0 on failure)
    free: Num  # free pages after
    table: TableState  # table after


def acquire(free: Num, t: TableState, n: Num, g: Group, ar: Arith = INT) -> AcquireStep:
    """acquire(n), all-or-nothing: the run's real pages as one batch, or nothing."""
    run = acquire_run(t, n, g, ar)
    need = run_take(run, g, ar)
    ok = need <= free

    def pick(then: Any, otherwise: Any) -> Any:
        return ar.cond(ok, lambda: then, lambda: otherwise)

    placed = Run(run.first, pick(run.count, 0), run.frontier)
    after = TableState(
        pick(t.slots + run.count, t.slots),
        pick(geo.tail_after(t.tail, g.B, n, ar), t.tail),
        t.floor,
        (*t.runs, placed),
    )
    return AcquireStep(ok, pick(need, 0), placed, pick(free - need, free), after)


def reclaim_band(floor: Num, b: Num, ar: Arith = INT) -> tuple[Num, Num]:
    """The slots ``[lo, hi)`` a reclaim to bound b scans: from the floor up to b."""
    return floor, b


def floor_after(floor: Num, b: Num, ar: Arith = INT) -> Num:
    """The reclaim floor after a reclaim to bound b: it never moves down."""
    return ar.max(floor, b)


def drop_reference(ref: Num, ar: Arith = INT) -> tuple[Num, Bool]:
    """One holder lets go of a page: its new count, and whether it re-enters the queue."""
    return ref - 1, ref - 1 == 0


@dataclass(frozen=True)
class ReleaseStep:
    released: Num  # pages that re-entered the free queue
    dropped: Num  # references dropped (one per real slot let go)
    refs: tuple[Num, ...]  # each run's reference count after
    free: Num
    table: TableState


def _release(
    free: Num,
    t: TableState,
    per_run: list[Num],
    refs: tuple[Num, ...],
    after: TableState,
    ar: Arith,
) -> ReleaseStep:
    released: list[Num] = []
    new_refs: list[Num] = []
    for k, ref in zip(per_run, refs):
        left, freed = drop_reference(ref, ar)
        released.append(_pick(freed, k, 0, ar))
        new_refs.append(_pick(k > 0, left, ref, ar))
    total = _sum(released)
    return ReleaseStep(total, _sum(per_run), tuple(new_refs), free + total, after)


def reclaim(
    free: Num, t: TableState, f: Num, g: Group, refs: tuple[Num, ...], ar: Arith = INT
) -> ReleaseStep:
    """reclaim_expired(f): punch every real slot in the band, drop one reference each."""
    if not g.reclaims:
        return ReleaseStep(0, 0, refs, free, t)
    b = reclaim_bound_of(f, t.slots, g, ar)
    lo, hi = reclaim_band(t.floor, b, ar)
    per_run = real_pages_in(t, lo, hi, g, ar)
    after = replace(t, floor=floor_after(t.floor, b, ar))
    return _release(free, t, per_run, refs, after, ar)


def free_table(
    free: Num, t: TableState, g: Group, refs: tuple[Num, ...], ar: Arith = INT
) -> ReleaseStep:
    """free: every real page lets go of one reference; the table becomes empty."""
    per_run = real_pages_in(t, t.floor, t.slots, g, ar)
    return _release(free, t, per_run, refs, EMPTY, ar)


def claim_run(b: Num, g: Group, resume: Num, ar: Arith = INT) -> TableState:
    """The table a claim of b slots leaves: one run placed at frontier b*B, floor b - R.

    ``resume`` is R for sliding and state groups and -1 for full groups (every slot kept);
    slots at or above the floor are real (``live(s, b*B)`` holds there), the rest holes.
    """
    floor = ar.cond(resume < 0, lambda: 0, lambda: ar.max(0, b - resume))
    return TableState(b, 0, floor, (Run(0, b, b * g.B),))


@dataclass(frozen=True)
class CoordinatorStep:
    ok: Bool  # the summed need fitted; on False no group changed
    need: Num  # the summed blocks_needed_for
    steps: tuple[AcquireStep, ...]  # each group's acquire, in group order
    free: Num


def coordinator_acquire(
    free: Num, tables: list[TableState], groups: list[Group], n: Num, ar: Arith = INT
) -> CoordinatorStep:
    """Coordinator acquire(n): all groups acquire if the summed need fits, else none."""
    need = _sum(
        geo.blocks_needed(t.slots, t.tail, n, g.W, g.B, g.A, ar) for t, g in zip(tables, groups)
    )
    ok = need <= free
    n_each = ar.cond(ok, lambda: n, lambda: 0)
    steps = []
    left = free
    for t, g in zip(tables, groups):
        step = acquire(left, t, n_each, g, ar)
        steps.append(step)
        left = step.free
    return CoordinatorStep(ok, need, tuple(steps), left)


# --- step plans (section 9) ----------------------------------------------------------------


def plan_fits(taken: Num, free: Num, released: Num, ar: Arith = INT) -> Bool:
    """Does a step taking ``taken`` pages fit once ``released`` pages are back in the queue?"""
    return taken <= free + released


def plan_stepped(
    needs: Sequence[Num], free: Num, released_from: Callable[[int], Num], ar: Arith = INT
) -> Num:
    """The requests a plan steps: the greatest k with sum(needs[:k]) fitting once requests
    k, k+1, ... are preempted (``released_from(k)`` pages back; k = 0 always fits).

    Tried from the top down; on ints a suffix is asked for only until one fits (``cond``
    runs one branch), so the model scans no more requests than it preempts.
    """
    taken: list[Num] = [0]
    for need in needs:
        taken.append(taken[-1] + need)
    done: Bool = False
    stepped: Num = 0
    for k in range(len(needs), 0, -1):

        def fits_k(k: int = k) -> Bool:
            return plan_fits(taken[k], free, released_from(k), ar)

        fits = ar.cond(done, lambda: True, fits_k)

        def pick(k: int = k, fits: Bool = fits) -> Num:
            return ar.cond(fits, lambda: k, lambda: 0)

        def kept(s: Num = stepped) -> Num:
            return s

        stepped = ar.cond(done, kept, pick)
        done = fits
    return stepped


def _pick(c: Bool, then: Num, otherwise: Num, ar: Arith) -> Num:
    return ar.cond(c, lambda: then, lambda: otherwise)


def _sum(xs: Any) -> Num:
    total: Num = 0
    for x in xs:
        total = total + x
    return total
