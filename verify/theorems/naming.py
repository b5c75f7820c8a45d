"""Section 7.8 slot by slot: naming before reclaiming reaches every page a later hit needs.

cache_full_blocks offers and gives names through the rules of ``spec/slots.py``
(``offered``, ``takes_name``); this theorem calls them on a symbolic slot of a symbolic
table whose pages its acquires placed and its reclaims left (``runs.slot_real``).
"""

from __future__ import annotations

from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.spec import runs, slots

from ..z3arith import Z3
from .prover.prover import Prover
from .prover.slot_traces import naming_candidates, slot_traces
from .prover.states import group, table
from .prover.symbols import Geometry, every_kind, ints
from .prover.theorem import theorem


@theorem(
    "naming-reaches-every-resume-page",
    """Executes cache_full_blocks' slot rules (spec/slots.py offered and takes_name) on a
    symbolic slot j of a symbolic table of two runs (runs.slot_real for the pages its
    acquires placed and its reclaims left) at a naming frontier n up to the extent, for a
    full group, a state group, a sliding group with A = 0 and a live-tail sliding group
    whose alignment is the lcm (B, W, m unbounded). The engine names a chunk's pages before
    it reclaims for that chunk, with keys covering n, so the reclaim floor is at most the
    naming cursor u. Then every slot a later match at a boundary T <= n needs, and that no
    earlier call offered (j >= u), is offered a name now and holds a real page, which takes
    the name unless it has one: for a full group every slot below n / B; for a sliding group
    the R slots behind every lcm boundary b with b*B <= n (live tail included: the resume
    pages are real); for a state group the slot ending at n when n is a multiple of B (its
    chunk end). Unbounded.""",
    """Live tail never costs a prefix hit: every page a later match needs gets its name
    while it is still real, holes included in the table.""",
    kills=("names-skip-last-page",),
    cost=2,
    rlimit=2_500_000,
    executes=("run_real", "slots.offered", "slots.takes_name"),
    trace=slot_traces("naming-reaches-every-resume-page", naming_candidates, impl="both"),
)
def naming_reaches(p: Prover) -> None:
    cancel = p.lemma(
        "lemma: x*B <= y*B with B >= 1 gives x <= y",
        lambda x, y, B: ([B >= 1, x * B <= y * B], x <= y),
        3,
    )
    for g in every_kind():
        gr = group(g)
        tb, th = table(g, "", 2)
        n, u, j, k, q = ints("n u j k q")
        named = z3.Bool("named")
        covered = n / g.B  # keys cover n
        hyps = [*g.hyps, *th, n >= 0, n <= geo.extent(tb.slots, tb.tail, g.B), u >= 0]
        hyps += [tb.floor <= u, u <= covered, j >= u]
        if g.kind == "full":
            hyps += [tb.floor == 0]  # a full group never reclaims
        state = g.kind == "state"
        offer = slots.offered(j, n, g.B, u, covered, state, Z3)
        page = z3.If(runs.slot_real(tb, j, gr, Z3), z3.Int("page"), 0)
        hyps.append(z3.Int("page") >= 1)
        gets = z3.And(
            offer, runs.slot_real(tb, j, gr, Z3), slots.takes_name(page, named, Z3) == z3.Not(named)
        )
        label = f"[{g.label}]"
        show = {"j": j, "n": n, "u": u, "floor": tb.floor, "slots": tb.slots}
        if g.kind == "full":
            needed = j < covered
        elif state:
            needed = z3.And(n % g.B == 0, j == n / g.B - 1)
        else:
            # An lcm boundary b, a multiple of q (for live tail q = m: the alignment is the lcm).
            if g.live:
                hyps.append(q == g.m)
            hyps.append(q >= 1)
            b = k
            needed = z3.And(b >= 1, b % q == 0, b * g.B <= n, b - g.R() <= j, j < b)
            hyps.append(cancel(b, tb.slots, g.B))  # b*B <= n <= extent <= slots*B
            if g.live:
                kept = _kept(p, g)
                hyps += [kept(j, b, r.frontier) for r in tb.runs]
        if g.live:
            p.exhibit(f"{label} a needed slot past the cursor exists", [*hyps, needed], show)
        p.prove(
            f"{label} a needed slot past the cursor is offered, real, and named",
            z3.Implies(needed, gets),
            hyps,
            show,
        )


def _kept(p: Prover, g: Geometry) -> Any:
    """Lemma instantiator: a resume slot of an aligned boundary is live at every frontier."""
    return p.lemma(
        f"[{g.label}] lemma: a slot behind an aligned boundary is live at every frontier",
        lambda j, b, f: (
            [*g.hyps, b >= 1, b % g.m == 0, b - g.R() <= j, j < b, j >= 0, f >= 0],
            geo.live(j, f, g.W, g.B, g.A, Z3),
        ),
        3,
    )
