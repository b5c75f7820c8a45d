"""Semantics section 13.2: chunked local attention's reclaim bound and hit rule.

A chunked group with page size ``B`` and chunk size ``C = k * B`` (``k >= 1``): the query at
position ``t`` reads the keys ``[chunk_start(t), t]``, ``chunk_start(t) = floor(t / C) * C``.
Both theorems execute the spec's own closed forms (``geometry.chunked_reclaim_bound``, which
the manager's reclaim_expired and blocks_reclaimable_at call through ``runs.reclaim_bound_of``,
and ``geometry.chunked_resume_pages``, which the coordinator's match, claim and offload call)
on symbolic ``B``, ``k``, frontiers and boundaries: unbounded.
"""

from __future__ import annotations

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.spec import runs

from ..z3arith import Z3
from .prover.prover import Prover
from .prover.symbols import ints, shape
from .prover.theorem import theorem


def _reads(s: z3.ArithRef, t: z3.ArithRef, B: z3.ArithRef, C: z3.ArithRef) -> z3.BoolRef:
    """Does the query at position t read a key of slot s (keys [s*B, (s+1)*B))?"""
    return z3.And(s * B <= t, (s + 1) * B > geo.chunk_start(t, C, Z3))


@theorem(
    "chunked-reclaim-exact",
    """For every chunked group (B >= 1, C = k * B with k >= 1), table shape and frontier
    f <= extent, the reclaim bound b = min(floor(f / C) * C / B, slots) that reclaim_expired
    and blocks_reclaimable_at use (executed through runs.reclaim_bound_of) lies in
    [0, slots]; no query at a position t >= f reads a slot below b; every slot in [b, slots)
    is read by some query at a position t >= f (t = max(f, s * B)); and the bound never
    decreases as the frontier and the table grow. Unbounded.""",
    """reclaim_expired on a chunked group gives back exactly the pages no later query
    reads: none too early (no hole under a later read), none kept longer than needed.""",
    kills=("chunked-reclaim-one-chunk-late", "chunked-reclaim-one-chunk-early"),
    rlimit=6_000_000,
)
def chunked_reclaim_exact(p: Prover) -> None:
    B, k, slots, tail, f, t, s = ints("B k slots tail f t s")
    C = k * B
    hyps = [B >= 1, k >= 1, *shape(slots, tail, B), f >= 0, f <= geo.extent(slots, tail, B)]
    g = runs.Group(B, 1, 0, True, C)
    b = runs.reclaim_bound_of(f, slots, g, Z3)
    p.prove("0 <= b <= slots", z3.And(b >= 0, b <= slots), hyps)
    p.prove(
        "s < b and t >= f => the query at t does not read slot s",
        z3.Implies(z3.And(s >= 0, s < b, t >= f), z3.Not(_reads(s, t, B, C))),
        hyps,
    )
    later = z3.If(f >= s * B, f, s * B)
    p.prove(
        "b <= s < slots => the query at max(f, s * B) reads slot s",
        z3.Implies(z3.And(s >= b, s < slots), _reads(s, later, B, C)),
        hyps,
    )
    f2, slots2 = ints("f2 slots2")
    p.prove(
        "f <= f2 and slots <= slots2 => b(f) <= b(f2)",
        b <= runs.reclaim_bound_of(f2, slots2, g, Z3),
        [*hyps, f <= f2, slots <= slots2],
    )


@theorem(
    "chunked-hit-rule",
    """For every chunked group (B >= 1, C = k * B with k >= 1) and boundary T = b * B
    (b >= 0 slots), the resume count R = chunked_resume_pages(b) that match_prefix, claim and
    plan_offload use lies in [0, min(b, k - 1)] and is 0 exactly when T is a multiple of C;
    and a slot s < b is among the R slots behind T (s >= b - R) if and only if some query at
    a position t >= T reads it. So a boundary is supported exactly when every slot below it
    that a request resuming there will read is present, and claim's floor b - R leaves holes
    only where no later query reads. Unbounded.""",
    """A chunked hit never misses a page its request reads and never demands a page it does
    not: the hit rule of vLLM's ChunkedLocalAttentionManager, proved.""",
    kills=("chunked-hit-demands-whole-chunk", "chunked-hit-one-slot-short"),
    rlimit=4_000_000,
)
def chunked_hit_rule(p: Prover) -> None:
    B, k, b, s, t = ints("B k b s t")
    C = k * B
    T = b * B
    hyps = [B >= 1, k >= 1, b >= 0]
    R = geo.chunked_resume_pages(b, C, B, Z3)
    p.prove(
        "0 <= R <= min(b, k - 1)",
        z3.And(R >= 0, R <= b, R <= k - 1),
        hyps,
    )
    p.prove(
        "R = 0 iff T is a multiple of C (T = chunk_start(T))",
        (R == 0) == (T == geo.chunk_start(T, C, Z3)),
        hyps,
    )
    p.prove(
        "b - R <= s < b => the query at T reads slot s",
        z3.Implies(z3.And(s >= b - R, s < b), _reads(s, T, B, C)),
        hyps,
    )
    start = geo.chunk_start(T, C, Z3) == (b - R) * B
    p.prove("chunk_start(T) = (b - R) * B", start, hyps)
    later = z3.Implies(t >= T, geo.chunk_start(t, C, Z3) >= geo.chunk_start(T, C, Z3))
    p.prove("t >= T => chunk_start(t) >= chunk_start(T)", later, hyps)
    p.prove(
        "s < b and a query at t >= T reads slot s => s >= b - R",
        z3.Implies(z3.And(s >= 0, s < b, t >= T, _reads(s, t, B, C)), s >= b - R),
        [*hyps, start, later],
    )
