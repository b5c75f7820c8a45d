"""Section 7.8 slot by slot: naming before reclaiming reaches every page a later hit needs,
and (section 13.4) names nothing a hit can never use.

cache_full_blocks offers and gives names through the rules of ``spec/slots.py``
(``offered``, ``takes_name``); these theorems call them on a symbolic slot of a symbolic
table whose pages its acquires placed and its reclaims left (``runs.slot_real``), with the
coordinator's alignment in the group's pages symbolic (section 13.9).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.spec import runs, slots

from ..z3arith import Z3
from .prover.prover import Prover
from .prover.slot_traces import Candidate, naming_candidates, slot_traces
from .prover.states import group, table
from .prover.symbols import Geometry, every_kind, ints
from .prover.theorem import theorem
from .prover.traces import geometry_of, groups_for


@theorem(
    "naming-reaches-every-resume-page",
    """Executes cache_full_blocks' slot rules (spec/slots.py offered and takes_name) on a
    symbolic slot j of a symbolic table of two runs (runs.slot_real for the pages its
    acquires placed and its reclaims left) at a naming frontier n up to the extent, for a
    full group, a state group, a sliding group with A = 0 and a live-tail sliding group, with
    the coordinator's alignment q pages (for the live-tail group its own A = m*B: q = m; B,
    W, m, q unbounded). The engine names a chunk's pages before it reclaims for that chunk,
    with keys covering n, so the reclaim floor is at most the naming cursor u. Then every
    slot a later match at a boundary T <= n needs, and that no earlier call offered (j >= u),
    is offered a name now and holds a real page, which takes the name unless it has one: for
    a full group every slot below n / B; for a sliding group the R slots behind every aligned
    boundary b (a multiple of q) with b*B <= n (live tail included: the resume pages are
    real); for a state group the slot ending at n when n is a multiple of the alignment (its
    chunk end). Unbounded.""",
    """Live tail never costs a prefix hit: every page a later match needs gets its name
    while it is still real, holes included in the table.""",
    kills=("names-skip-last-page",),
    cost=2,
    rlimit=3_400_000,
    executes=("run_real", "slots.offered", "slots.takes_name"),
    trace=slot_traces("naming-reaches-every-resume-page", naming_candidates, impl="both"),
)
def naming_reaches(p: Prover) -> None:
    cancel = p.lemma(
        "lemma: x*B <= y*B with B >= 1 gives x <= y",
        lambda x, y, B: ([B >= 1, x * B <= y * B], x <= y),
        3,
    )
    behind = p.lemma(
        "lemma: the slot right behind a multiple b >= 1 of q is the last of its period",
        lambda b, q: ([b >= 1, q >= 1, b % q == 0], (b - 1) % q == q - 1),
        2,
    )
    resume_slot = p.lemma(
        "lemma: a slot among the R behind a multiple b of q is R or fewer from its period's end",
        lambda j, b, q, R: (
            [j >= 0, q >= 1, R >= 0, b % q == 0, b - R <= j, j < b],
            j % q >= q - R,
        ),
        4,
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
        R = -1 if g.kind == "full" else g.R()
        hyps.append(q >= 1)
        if g.live:
            hyps.append(q == g.m)  # a live-tail group's A is the coordinator's alignment
        offer = slots.offered(j, n, g.B, R, q, u, covered, state, Z3)
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
            # n is an aligned boundary: a multiple of B whose page count is a multiple of q.
            needed = z3.And(n % g.B == 0, (n / g.B) % q == 0, j == n / g.B - 1)
            hyps.append(behind(n / g.B, q))
        else:
            # An aligned boundary b, a multiple of q.
            b = k
            needed = z3.And(b >= 1, b % q == 0, b * g.B <= n, b - g.R() <= j, j < b)
            hyps.append(cancel(b, tb.slots, g.B))  # b*B <= n <= extent <= slots*B
            hyps.append(resume_slot(j, b, q, g.R()))
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


@theorem(
    "naming-names-only-reachable-slots",
    """Executes cache_full_blocks' slot rule (spec/slots.py offered) and the reachable rule
    of section 10 (slots.reachable) on a symbolic slot j, naming frontier n, naming cursor u
    and keys covering `covered` pages, for a full group, a state group, a sliding group with
    A = 0 and a live-tail sliding group, with the coordinator's alignment q pages (for the
    live-tail group q = m; B, W, m, q unbounded). Every slot the rule offers a name is a
    full page the call covers (u <= j < covered), and for a sliding or state group it can
    serve a match (section 13.4): a sliding group's offered slot is one of the R slots
    behind the first aligned boundary above it (reachable at that boundary), a state group's
    is the slot ending at n, which is then an aligned boundary (reachable at n). So no slot
    that no aligned boundary can resume from takes a name: it stays unnamed and joins the
    free queue's front at release. Unbounded.""",
    """Sliding and state groups name only what a prefix hit can use; every other page of
    theirs stays unnamed and is reused before any cached page is evicted.""",
    kills=("names-unreachable-slots",),
    cost=1,
    rlimit=2_000_000,
    executes=("slots.offered", "slots.reachable"),
    trace=slot_traces(
        "naming-names-only-reachable-slots", lambda s, v: _offered_slot(s, v), "both"
    ),
)
def naming_only_reachable(p: Prover) -> None:
    for g in every_kind():
        n, u, j, q, covered = ints("n u j q covered")
        full = g.kind == "full"
        state = g.kind == "state"
        R = -1 if full else g.R()
        hyps = [*g.hyps, n >= 0, u >= 0, q >= 1, covered >= 0, covered <= n / g.B]
        if g.live:
            hyps.append(q == g.m)  # a live-tail group's A is the coordinator's alignment
        offer = slots.offered(j, n, g.B, R, q, u, covered, state, Z3)
        label = f"[{g.label}]"
        show = {"j": j, "n": n, "u": u, "q": q, "covered": covered}
        p.prove(
            f"{label} an offered slot is a full page the call covers, past the cursor",
            z3.Implies(offer, z3.And(u <= j, j < covered)),
            hyps,
            show,
        )
        if full:
            continue
        first = (j / q + 1) * q  # the first aligned boundary above slot j, in pages
        serves = slots.reachable(j, n if state else first * g.B, g.B, R, q, Z3)
        where = "at n, an aligned boundary" if state else "at the first aligned boundary above it"
        p.exhibit(f"{label} an offered slot exists", [*hyps, offer], show)
        p.prove(
            f"{label} an offered slot can serve a match {where}",
            z3.Implies(offer, serves),
            hyps,
            show,
        )


def _offered_slot(step: str, v: Mapping[str, Any]) -> Iterator[Candidate]:
    """A table computed to n tokens and named there, the alignment q pages of its group.

    A full group of page size q*B beside the counterexample's group makes q*B the lcm, so
    the coordinator's alignment (the lcm) is q of the group's pages; the machine then
    compares which pages carry names with the native module (--impl both).
    """
    g = geometry_of(step, v)
    if g is None or min(g["B"], g["W"], g["m"]) < 1:
        return
    B, q = g["B"], int(v.get("q", 1))
    n, j = int(v.get("n", 0)), int(v.get("j", 0))
    if q < 1 or j < 0 or n < (j + 1) * B or n > 64 * B * q:
        return
    groups = groups_for(g)
    if q > 1 and g["group"] != "live":
        groups.append({"kind": "full", "block_size": q * B})
    ops = [
        {"op": "acquire", "request": 0, "tokens": n},
        {"op": "cache", "request": 0, "doc": 0, "tokens": n},
    ]
    yield groups, 1 + 2 * len(groups) * (n // B + 2), 1, ops
