"""Section 7.4 (live-tail safety and minimality) and the geometric half of 7.5 (reclaim)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo

from ..z3arith import Z3
from ._common import ints, live_tail, shape
from ._prover import Prover, Values
from ._registry import theorem
from ._traces import groups_for, ops_trace


def _hole_traces(
    verdict: str, found: Sequence[tuple[str, Values]], variant: str | None
) -> list[dict[str, Any]]:
    """A fresh table acquires f tokens; slot s is then a hole the next query reads."""
    out = []
    for step, v in found:
        if not {"B", "W", "m", "s", "f"} <= set(v) or int(v["f"]) <= int(v["s"]) * int(v["B"]):
            continue
        f = int(v["f"])
        groups = groups_for({**v, "group": "live"})
        out.append(
            ops_trace(
                groups,
                1 + 2 * (f + 2),
                1,
                [{"op": "acquire", "request": 0, "tokens": f}],
                f"live-tail-hole-never-read {verdict}: {step}",
                "live-tail-hole-never-read",
                variant,
                v,
            )
        )
    return out


@theorem(
    "live-tail-hole-never-read",
    """Live-tail safety, part 1: for every geometry (B, W >= 1, A = m*B, m >= 1), every
    frontier f and every slot s >= 0 below it (s*B < f), if live(s, f) is false (acquire
    makes slot s a hole when its chunk ends at f) then for every later query position
    t >= f every token of slot s is outside t's window ((s+1)*B <= t - W + 1) and
    s < slid_out(t): the hole stays slid out at every later frontier. Unbounded.""",
    """A kernel never reads a hole: every key a later query needs is in a real page.""",
    kills=("live-off-by-one",),
    trace=_hole_traces,
    rlimit=2_000_000,
)
def hole_never_read(p: Prover) -> None:
    g = live_tail()
    s, f, t = ints("s f t")
    hyps = [*g.hyps, s >= 0, s * g.B < f, t >= f]
    hole = z3.Not(geo.live(s, f, g.W, g.B, g.A, Z3))
    show = {"live": geo.live(s, f, g.W, g.B, g.A, Z3), "slid_out_f": geo.slid_out(f, g.W, g.B, Z3)}
    p.prove(
        "a hole created at frontier f is outside the window of every query t >= f",
        z3.Implies(hole, (s + 1) * g.B <= t - g.W + 1),
        hyps,
        show=show,
    )
    p.prove(
        "a hole created at frontier f is below slid_out(t) for every t >= f",
        z3.Implies(hole, s < geo.slid_out(t, g.W, g.B, Z3)),
        hyps,
        show=show,
    )


@theorem(
    "live-tail-resume-pages-kept",
    """Live-tail safety, part 2: R = resume_pages(W, B) = ceil((W-1)/B) is the fewest pages
    that hold the W-1 tokens before a page boundary (R*B >= W-1, and (R-1)*B < W-1 when
    W > 1), and for every geometry, every A-aligned boundary b (b mod m = 0, in slots) and
    every slot s with b - R <= s < b, s >= 0, live(s, f) holds at every frontier f: no
    resume page of an aligned boundary is ever a hole. Unbounded.""",
    """A request can always be resumed from a prefix-cache hit at any lcm boundary: the
    pages it needs there were allocated and named, never punched as holes.""",
    rlimit=2_000_000,
)
def resume_pages_kept(p: Prover) -> None:
    g = live_tail()
    R = g.R()
    p.prove("R*B >= W-1", R * g.B >= g.W - 1, list(g.hyps))
    p.prove(
        "R is the fewest: W > 1 => (R-1)*B < W-1",
        z3.Implies(g.W > 1, (R - 1) * g.B < g.W - 1),
        list(g.hyps),
    )
    p.prove("W = 1 => R = 0", z3.Implies(g.W == 1, R == 0), list(g.hyps))
    b, s, f = ints("b s f")
    p.prove(
        "b mod m = 0 and b - R <= s < b => live(s, f)",
        geo.live(s, f, g.W, g.B, g.A, Z3),
        [*g.hyps, b >= 1, b % g.m == 0, s >= 0, b - R <= s, s < b, f >= 0],
    )


@theorem(
    "live-tail-minimal",
    """Live-tail minimality: for every geometry, slot s >= 0 and frontier f, if live(s, f) then
    slot s holds a token inside the window of the query at f ((s+1)*B > f - W + 1), or it is
    one of the R resume pages of the aligned boundary b = (s div m + 1)*m and that boundary
    is at or below the frontier (b*B <= f). Unbounded.""",
    """Live tail allocates nothing it does not need: every real page is either read by the
    next query or needed to resume from a boundary the request has already passed.""",
    rlimit=2_000_000,
)
def live_tail_minimal(p: Prover) -> None:
    g = live_tail()
    s, f = ints("s f")
    R = g.R()
    b = (s / g.m + 1) * g.m
    in_window = (s + 1) * g.B > f - g.W + 1
    resume = z3.And(b % g.m == 0, b - R <= s, s < b, b * g.B <= f)
    p.prove(
        "live(s, f) => in the window at f, or a resume page of an aligned boundary <= f",
        z3.Implies(geo.live(s, f, g.W, g.B, g.A, Z3), z3.Or(in_window, resume)),
        [*g.hyps, s >= 0, f >= 0],
        show={"b": b, "R": R},
    )


@theorem(
    "reclaim-releases-only-expired",
    """For every group (B, W >= 1), table shape and frontier f <= extent, the reclaim bound
    b = min(slid_out(f), slots) lies in [0, slots], every slot below it has every token
    outside the window of every query t >= f, and the bound never decreases as the frontier
    and the table grow. A state group (W = 2) reclaimed at its extent keeps at most its last
    page. Unbounded.""",
    """reclaim_expired only gives back pages no later query reads, and its scan (which
    starts at the floor) never has to revisit a slot.""",
    rlimit=2_000_000,
)
def reclaim_releases_only_expired(p: Prover) -> None:
    B, W, slots, tail, f, t, s = ints("B W slots tail f t s")
    hyps = [B >= 1, W >= 1, *shape(slots, tail, B), f >= 0, f <= geo.extent(slots, tail, B)]
    b = geo.reclaim_bound(f, slots, W, B, Z3)
    p.prove("0 <= b <= slots", z3.And(b >= 0, b <= slots), hyps)
    p.prove(
        "s < b => slot s is outside the window of every query t >= f",
        z3.Implies(z3.And(s >= 0, s < b, t >= f), (s + 1) * B <= t - W + 1),
        hyps,
    )
    f2, slots2 = ints("f2 slots2")
    p.prove(
        "f <= f2 and slots <= slots2 => b(f) <= b(f2)",
        b <= geo.reclaim_bound(f2, slots2, W, B, Z3),
        [*hyps, f <= f2, slots <= slots2],
    )
    state = geo.reclaim_bound(geo.extent(slots, tail, B), slots, 2, B, Z3)
    p.prove(
        "state group (W = 2) reclaimed at its extent keeps at most the last page",
        slots - state <= 1,
        [B >= 1, *shape(slots, tail, B)],
    )
