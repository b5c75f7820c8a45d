"""Section 7.2: the O(1) closed forms equal the slot-by-slot definitions."""

from __future__ import annotations

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo

from ..z3arith import Z3
from .prover.prover import Prover
from .prover.symbols import (
    acquire_shape,
    every_kind,
    indicator,
    ints,
    live_tail,
    shape,
    slot_by_slot_count,
)
from .prover.theorem import theorem


@theorem(
    "resume-count-closed-form",
    """The resume-slot count g(x) = (x div m)*R' + max(0, x mod m - (m - R')) equals the
    number of slots s < x with s mod m >= m - R', for every period m >= 1, every
    0 <= R' <= m and every x >= 0 (unbounded; induction on x: g(0) = 0 and
    g(x+1) - g(x) = [x mod m >= m - R']). The R' the geometry uses, min(R, m), is in that
    range for every B, W and A.""",
    """Counting the resume pages of a chunk is O(1) and exact, however long the chunk.""",
    kills=("resume-count-off-by-one",),
    rlimit=2_700_000,
)
def resume_count_closed_form(p: Prover) -> None:
    x, m, kept = ints("x m kept")
    hyps = [m >= 1, kept >= 0, kept <= m, x >= 0]

    def g(v: z3.ArithRef | int) -> z3.ArithRef:
        return geo.resume_count_below(v, m, kept, Z3)

    p.prove("base: g(0) = 0", g(0) == 0, hyps)
    p.prove(
        "step: g(x+1) - g(x) = [x mod m >= m - R']",
        g(x + 1) - g(x) == indicator(x % m >= m - kept),
        hyps,
    )
    for gm in (live_tail(), *every_kind()[:3]):
        p.prove(
            f"[{gm.label}] 0 <= R' = kept_per_period <= m = period",
            z3.And(gm.kept() >= 0, gm.kept() <= gm.period(), gm.period() >= 1),
            gm.hyps,
        )


@theorem(
    "live-count-closed-form",
    """live_count(first, new, f) equals the number of slots s in [first, first+new) with
    live(s, f), the slot-by-slot definition, for every page size B >= 1, window W >= 1,
    alignment A = m*B (m >= 1) or A = 0, every first >= 0, new >= 0 and frontier f >= 0
    (unbounded; induction on new).""",
    """blocks_needed_for can be answered in O(1) without walking the chunk's slots, and it
    agrees with the walk acquire does.""",
    kills=("live-off-by-one",),
    rlimit=12_000_000,
)
def live_count_closed_form(p: Prover) -> None:
    slot_by_slot_count(p, live_tail(), "")
    slot_by_slot_count(p, every_kind()[2], "")


@theorem(
    "blocks-needed-equals-acquire",
    """Definitional (the blocks_needed step compares the query with the live_count it is
    built from, and still holds with live_count unknown; the executed acquire is proved by
    acquire-all-or-nothing). For every manager kind (full; state, W = 2; sliding with A = 0;
    live-tail sliding with A = m*B) and every table shape (slots >= 0, tail room in
    [0, B-1], 0 when empty) and count n >= 0: acquire(n) appends the fewest slots that
    hold the n - tail tokens that do not fit the tail room, leaves a valid shape whose
    extent grew by n, and
    blocks_needed_for(n) equals the number of those new slots that acquire makes real (every
    one when A = 0; those with live(s, extent + n) otherwise, counted slot by slot by
    induction). Unbounded.""",
    """An engine can ask how many pages a chunk will take and get exactly what acquire
    takes: admission never over- or under-reserves for a single acquire.""",
    kills=("live-off-by-one",),
    rlimit=12_000_000,
)
def blocks_needed_equals_acquire(p: Prover) -> None:
    acquire_shape(p, z3.Int("B"), "")
    for g in every_kind():
        slots, tail, n = ints("slots tail n")
        hyps = [*g.hyps, *shape(slots, tail, g.B), n >= 0]
        needed = geo.blocks_needed(slots, tail, n, g.W, g.B, g.A, Z3)
        new = geo.new_slots(tail, g.B, n, Z3)
        if not g.live:
            p.prove(
                f"[{g.label}] blocks_needed = new slots (every new slot is real)",
                needed == new,
                hyps,
                show={"needed": needed, "new_slots": new},
            )
            continue
        slot_by_slot_count(p, g, "_c")
        # What the spec's acquire does: new = ceil_div(n - tail, B) slots from `slots`,
        # frontier extent + n, real iff live(s, f); counted by the closed form proved above.
        walk = z3.If(
            n > tail,
            geo.live_count(
                slots,
                geo.ceil_div(n - tail, g.B, Z3),
                geo.extent(slots, tail, g.B) + n,
                g.W,
                g.B,
                g.A,
                Z3,
            ),
            0,
        )
        p.prove(
            f"[{g.label}] blocks_needed = live new slots at frontier extent + n",
            needed == walk,
            hyps,
            show={"needed": needed, "acquire_takes": walk},
        )
