"""Section 7, property 4: live-tail safety and minimality.

``acquire-places-holes-outside-every-window`` executes ``runs.acquire`` on symbolic states
and reads which slots it made holes; the others are over the closed form ``live``, and
``full-allocation-when-resume-covers-alignment`` is the degenerate case (live tail changes
nothing when the resume pages cover the alignment).
``state-live-tail-keeps-written-states`` is section 13.5's state group with live tail (vLLM's
Mamba "align" mode): the model's placement, reclaim bound and naming rules on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.spec import runs, slots

from ..z3arith import Z3
from .prover.prover import Prover
from .prover.query import Values
from .prover.states import group
from .prover.symbols import ints, live_tail, shape
from .prover.theorem import theorem
from .prover.traces import groups_for, ops_trace, transition_traces


@theorem(
    "acquire-places-holes-outside-every-window",
    """Executes the spec's acquire (spec/runs.py) of n tokens on a symbolic table shape
    (B, W, m unbounded, A = m*B, any slot count, tail room and count n, enough free pages)
    and reads which of the new run's slots it made real (runs.run_real, the placement the
    concrete acquire fills its slots by); E = extent + n is the extent it leaves. First it
    exhibits a hole (the statement is not vacuous); then every hole of the run is outside the window
    of every later query t >= E ((s+1)*B <= t - W + 1) and is no resume page of any
    A-aligned boundary b (not b - R <= s < b); every slot of the run the next query reads
    ((s+1)*B > E - W + 1) is real; and every real slot of the run is either read by that
    query or one of the R resume pages of the aligned boundary (s div m + 1)*m at or below E
    (minimality). Unbounded.""",
    """A kernel never reads a hole, a request can always resume from an lcm boundary, and
    live tail pins nothing else: the acquire that placed the pages put every hole where no
    query will look and every real page where one will.""",
    kills=("real-pages-packed-first", "slid-out-off-by-one", "acquire-frontier-minus-one"),
    cost=3,
    rlimit=42_000_000,
    executes=("acquire", "run_real"),
    trace=transition_traces("acquire-places-holes-outside-every-window", "live"),
)
def acquire_places_holes(p: Prover) -> None:
    g = live_tail()
    gr = group(g)
    slots, tail, n, s, t, b, F = ints("slots tail n s t b F")
    state = runs.TableState(slots, tail, 0, ())
    run = runs.acquire(F, state, n, gr, Z3).run
    # The extent the acquire leaves (acquire-all-or-nothing proves the executed acquire
    # leaves exactly this): the frontier of the next query.
    E = geo.extent(slots, tail, g.B) + n
    hyps = [*g.hyps, slots >= 0, tail >= 0, tail <= g.B - 1, n >= 0]
    inside = [run.first <= s, s < run.end]
    real = runs.run_real(run, s, gr, Z3)
    hole = z3.Not(real)
    show = {"first": run.first, "count": run.count, "frontier": run.frontier, "E": E}
    p.exhibit("a hole exists", [*hyps, *inside, hole], show=show)
    hyps = [*hyps, *inside]
    p.prove(
        "a hole is outside the window of every query t >= the run's frontier",
        z3.Implies(z3.And(hole, t >= run.frontier), (s + 1) * g.B <= t - g.W + 1),
        hyps,
        show=show,
    )
    p.prove(
        "a hole is no resume page of any aligned boundary",
        z3.Implies(z3.And(hole, b % g.m == 0, b >= 1), z3.Not(z3.And(b - g.R() <= s, s < b))),
        hyps,
        show=show,
    )
    p.prove(
        "every slot of the run the next query reads is real",
        z3.Implies((s + 1) * g.B > E - g.W + 1, real),
        hyps,
        show=show,
    )
    boundary = (s / g.m + 1) * g.m
    resume = z3.And(boundary - g.R() <= s, boundary * g.B <= E)
    p.prove(
        "every real slot is read by the next query or a resume page of a boundary <= E",
        z3.Implies(real, z3.Or((s + 1) * g.B > E - g.W + 1, resume)),
        hyps,
        show=show,
    )


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
    "full-allocation-when-resume-covers-alignment",
    """Live tail degenerates to full allocation when the resume pages cover the alignment:
    if R = ceil((W-1)/B) >= m = A/B then live(s, f) holds for every slot s >= 0 and frontier
    f, and blocks_needed_for equals the number of new slots, as with A = 0. Unbounded.""",
    """Turning live tail on can never make a group allocate differently from classic
    allocation when the window spans a whole alignment block; it only ever removes pages.""",
    rlimit=2_000_000,
)
def full_allocation(p: Prover) -> None:
    g = live_tail()
    s, f, slots, tail, n = ints("s f slots tail n")
    cover = g.R() >= g.m
    p.prove("R >= m => live(s, f)", geo.live(s, f, g.W, g.B, g.A, Z3), [*g.hyps, cover, s >= 0])
    hyps = [*g.hyps, cover, *shape(slots, tail, g.B), n >= 0]
    p.prove(
        "R >= m => blocks_needed = new slots",
        geo.blocks_needed(slots, tail, n, g.W, g.B, g.A, Z3) == geo.new_slots(tail, g.B, n, Z3),
        hyps,
    )


@theorem(
    "state-live-tail-keeps-written-states",
    """Executes the model's acquire placement (runs.acquire_run, runs.run_real, runs.run_take),
    its reclaim bound (runs.reclaim_bound_of) and cache_full_blocks' slot rules (slots.offered,
    slots.takes_name) for a state group with live tail (W = 2, A = RUNNING) and with
    checkpoints (A = CHECKPOINT), on a symbolic acquire of n >= 1 tokens from an extent e that
    is a multiple of B (the engine's contract: a step from inside a page never passes that
    page's end, so every step that opens a slot starts on a page boundary), a symbolic slot j
    and a naming call at n' tokens with cursor u and alignment q pages (B, e, n, j, n', u, q
    unbounded). A new slot is real iff it holds the running state at the new frontier f
    (j = (f - 1) / B) or, with checkpoints, it is the slot right behind it; the acquire takes
    min(new slots, 1) pages, min(new slots, 2) with checkpoints. The checkpoint slot ends at
    K = floor((f - 1) / B) * B with e + B <= K < f: exactly vLLM's prefill checkpoint
    position (get_mamba_prefill_checkpoint_position at hash block B) and its validity
    conditions (is_mamba_prefill_checkpoint_valid). A reclaim at e keeps the slot holding the
    state after e tokens, which the forward reads. A slot of the acquire that takes a name is
    real, so it is the running state or the checkpoint: no hole and no unwritten page is ever
    named. Unbounded.""",
    """vLLM's Mamba "align" mode on livetail pins the pages vLLM pins, and a prefix hit on a
    state page always resumes from a state the forward wrote.""",
    kills=("state-checkpoint-dropped",),
    cost=1,
    rlimit=4_000_000,
    executes=(
        "runs.acquire_run",
        "run_real",
        "runs.run_take",
        "runs.reclaim_bound_of",
        "slots.offered",
        "slots.takes_name",
    ),
)
def state_live_tail(p: Prover) -> None:
    for ck in (False, True):
        B, s0, n, j, n2, u, q, floor = ints("B s0 n j n2 u q floor")
        A = geo.CHECKPOINT if ck else geo.RUNNING
        g = runs.Group(B, 2, A, True)
        e = s0 * B  # the acquire starts on a page boundary
        before = runs.TableState(s0, 0, floor, ())
        run = runs.acquire_run(before, n, g, Z3)
        f = run.frontier
        hyps = [B >= 1, s0 >= 0, n >= 1, floor >= 0, floor <= s0]
        label = "[state, live tail, checkpoints]" if ck else "[state, live tail]"
        show = {"B": B, "e": e, "n": n, "j": j}
        new = z3.And(run.first <= j, j < run.end)
        real = z3.And(new, runs.run_real(run, j, g, Z3))
        running = j == (f - 1) / B
        checkpoint = z3.And(j == (f - 1) / B - 1, j >= s0) if ck else z3.BoolVal(False)
        p.exhibit(f"{label} an acquire of several pages exists", [*hyps, run.count >= 3], show)
        p.prove(
            f"{label} a new slot is real iff it is the running state's or the checkpoint's",
            real == z3.Or(running, checkpoint),
            hyps,
            show,
        )
        keep = 2 if ck else 1
        p.prove(
            f"{label} the acquire takes min(new slots, {keep}) pages",
            runs.run_take(run, g, Z3) == z3.If(run.count < keep, run.count, keep),
            hyps,
            show,
        )
        if ck:
            K = (j + 1) * B
            vllm = z3.And(
                K == (f - 1) / B * B,  # get_mamba_prefill_checkpoint_position(f, B)
                e % B == 0,
                e + B <= K,
                e < K,
                K < f,
            )
            p.exhibit(f"{label} a checkpoint slot exists", [*hyps, real, j != (f - 1) / B], show)
            p.prove(
                f"{label} the checkpoint is vLLM's prefill checkpoint, valid for the chunk",
                z3.Implies(z3.And(real, j != (f - 1) / B), vllm),
                hyps,
                show,
            )
        bound = runs.reclaim_bound_of(e, s0, g, Z3)
        p.prove(
            f"{label} a reclaim at e keeps the slot holding the state after e tokens",
            z3.Implies(e >= 1, bound <= (e - 1) / B),
            hyps,
            show,
        )
        named = z3.Bool("named")
        page = z3.If(real, z3.Int("page"), 0)
        covered = n2 / B
        offer = slots.offered(j, n2, B, 1, q, u, covered, False, Z3)
        takes = z3.And(new, offer, slots.takes_name(page, named, Z3))
        nh = [*hyps, z3.Int("page") >= 1, n2 >= 0, n2 <= f, u >= 0, q >= 1]
        p.prove(
            f"{label} a slot of the acquire that takes a name holds a state the forward wrote",
            z3.Implies(takes, z3.Or(running, checkpoint)),
            nh,
            show,
        )
