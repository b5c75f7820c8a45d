"""Semantics 13.1: the whole-prompt charge bounds the peak of every chunking (bounded).

Runs the spec's own managers (``reclaim_expired`` and ``acquire`` on real tables and a
pool) over every configuration inside the stated bounds, every chunk (f, F) a chunking can
reach (any frontier is reachable with chunks of 1 .. C tokens, and after the reclaim at f a
table holds the same pages whatever chunks led there) and the decode acquire after it.
An unbounded Z3 proof over the closed form does not go through: the charge is a maximum of
eleven candidates, and even with B, W and m fixed (counts unbounded) the query for a
live-tail group is left unknown after 120 s (docs/decisions.md).
"""

from __future__ import annotations

from typing import Any

from livetail import spec
from livetail.spec import geometry as geo

from .prover.prover import Prover
from .prover.query import Values
from .prover.theorem import theorem
from .worlds.managers import Group, every_group, fork

MAX_B, MAX_W, MAX_M = 3, 5, 3
MAX_N, CHUNKS, DECODES = 12, (1, 2, 3, 4, 6), (0, 1, 2)


def _held(g: Group, e: int, top: int) -> tuple[dict[tuple[int, int], int], Any, Any]:
    """Pages taken from the pool, counted from the table reclaimed at e, after the spec's
    reclaim_expired(f) then acquire(F - f), for every e <= f < F <= top."""
    mgr = g.manager()
    pool, table = spec.BlockPool(1 << 11), spec.BlockTable()
    assert mgr.acquire(pool, table, e)
    mgr.reclaim_expired(pool, table, e)
    free0 = pool.num_free
    held: dict[tuple[int, int], int] = {}
    at_f = fork(pool, table)
    for f in range(e, top):
        if f > e:
            assert mgr.acquire(*at_f, 1)  # one-token chunks reach every frontier
        mgr.reclaim_expired(*at_f, f)
        for F in range(f + 1, top + 1):
            p2, t2 = fork(*at_f)
            assert mgr.acquire(p2, t2, F - f)
            held[(f, F)] = free0 - p2.num_free
    return held, mgr, table


def _search() -> tuple[int, Values | None]:
    cases = 0
    for g in every_group(MAX_B, MAX_W, MAX_M):
        for e in (0, 1, g.B + 1, 2 * g.B):
            held, mgr, table = _held(g, e, e + MAX_N + max(DECODES))
            for n in range(0, MAX_N + 1):
                N = e + n
                for C in CHUNKS:
                    reach = [v for (f, F), v in held.items() if f < N and F <= min(f + C, N)]
                    for d in DECODES:
                        cases += 1
                        peak = max([0, *reach, *([held[(N, N + d)]] if d else [])])
                        charge = mgr.blocks_needed_for_prompt(table, n, C, d)
                        problem = ""
                        if charge != peak:
                            problem = f"charge {charge}, worst chunking's peak {peak}"
                        elif g.kind != "full" and g.m == 0 and d == 0:
                            W = g.W if g.W is not None else 2
                            cap = geo.ceil_div(W - 1 + C, g.B) + 1
                            whole = mgr.blocks_needed_for(table, n)
                            if charge > min(cap, whole):
                                problem = f"charge {charge} above vLLM's cap {cap} or {whole}"
                        if problem:
                            return cases, {
                                **g.describe(),
                                "extent": e,
                                "n": n,
                                "C": C,
                                "decode": d,
                                "problem": problem,
                            }
    return cases, None


@theorem(
    "prompt-charge-bounds-every-chunk-bounded",
    """Bounded, exhaustive over the spec's classes, executing the spec's reclaim_expired and
    acquire: for every manager kind with B <= 3, W <= 5, m <= 3 (and A = 0), every table of
    extent e in {0, 1, B + 1, 2B} reclaimed at e, every n <= 12, C in {1, 2, 3, 4, 6} and
    decode <= 2: the pages taken from the pool after reclaim_expired(f) then acquire(F - f),
    for every chunk e <= f < F <= min(f + C, e + n) a chunking reaches, and after
    reclaim_expired(e + n) then acquire(decode), never exceed
    blocks_needed_for_prompt(n, C, decode), and the greatest of them equals it; without live
    tail (A = 0, decode 0) it is at most vLLM's cap ceil((W - 1 + C)/B) + 1 and at most
    blocks_needed_for(n).""",
    """An engine that admits a prompt when its whole-prompt charge fits the free pages never
    runs out of pages in the middle of its prefill, whatever chunk sizes up to C its steps
    give it; and it is never charged more than vLLM's own admission check would charge.""",
    kills=("prompt-charge-largest-chunk",),
    bounded=True,
    cost=3,
    rlimit=2_000_000,
)
def prompt_charge_bounds_every_chunk(p: Prover) -> None:
    p.exhaust("every configuration within the bounds", _search)
