"""Section 13.5: a state group with live tail (vLLM's Mamba "align" mode) keeps real only the
states the forward writes, names nothing else, and its checkpoint is vLLM's.

The theorem executes the model's placement (``runs.acquire_run``, ``runs.run_real``,
``runs.run_take``), its reclaim bound (``runs.reclaim_bound_of``) and cache_full_blocks'
slot rules (``slots.offered``, ``slots.takes_name``) on a symbolic acquire of a state group
with live tail, with and without checkpoints, for every page size.
"""

from __future__ import annotations

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.spec import runs, slots

from ..z3arith import Z3
from .prover.prover import Prover
from .prover.symbols import ints
from .prover.theorem import theorem


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
