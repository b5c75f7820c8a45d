"""Semantics 13.1: the whole-prompt charge bounds the peak of every chunking (bounded),
from a table reclaimed at its extent and from a claimed prefix hit.

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


# The claimed case: smaller bounds (every (f, F) replays a coordinator's claim).
CLAIM_B, CLAIM_W, CLAIM_M, CLAIM_N, CLAIM_CHUNKS = 2, 4, 2, 7, (1, 2, 5)


def _claim_world(g: Group, T: int, past: int | None) -> tuple[Any, Any, Any, set[int]]:
    """A spec coordinator whose group 0 is g (the others fix the lcm), a match of a T-token
    prefix an earlier request named, and the pages that request still holds: none when it
    was freed (past None), else those it holds at frontier T + past, reclaimed there."""
    pool = spec.BlockPool(1 << 9)
    c = spec.Coordinator([spec.GroupSpec(**kw) for kw in g.groups()], pool)
    keys = spec.page_keys(list(range(T)), c.base_block_size)
    first = c.new_tables()
    assert c.acquire(first, T)
    c.cache_full_blocks(first, keys, T)
    if past is None:
        c.free(first)
    else:
        assert c.acquire(first, past)
        c.reclaim_expired(first, T + past)
    match = c.match_prefix(keys)
    assert match.num_tokens == T
    held = set() if past is None else {p for t in first for p in t.page_ids() if p}
    return pool, c, match, held


def _claim_search() -> tuple[int, Values | None]:
    """Group 0's free pages taken (the real pages its table holds that the earlier request
    does not), counted before the claim: after the claim, and after reclaim_expired(f) then
    acquire(F - f) from the claimed table for every chunk T <= f < F a chunking reaches,
    against the group's part of blocks_needed_for_prompt_after_claim."""
    cases = 0
    top = CLAIM_N + max(DECODES)
    for g in every_group(CLAIM_B, CLAIM_W, CLAIM_M):
        lcm = max(g.B, g.m * g.B)
        for T in (lcm, 2 * lcm):
            for past in (None, 0, 1, g.B, g.B + (g.W or 2)):
                pool, c, match, held = _claim_world(g, T, past)
                took: dict[tuple[int, int], int] = {}

                def taken(tables: Any, held: set[int] = held) -> int:
                    return sum(1 for p in tables[0].page_ids() if p and p not in held)

                for f in range(T, T + top):
                    for F in range(f + 1, T + top + 1):
                        _, c2, m2, _ = _claim_world(g, T, past)
                        ts = c2.new_tables()
                        c2.claim(ts, m2)
                        took[(T, T)] = taken(ts)
                        for a, b in ((T, f), (f, F)):
                            c2.reclaim_expired(ts, a)
                            assert c2.acquire(ts, b - a)
                        took[(f, F)] = taken(ts)
                mgr = c.managers[0]
                pages, hps = match.pages[0], match.host_pages[0]
                for n in range(0, CLAIM_N + 1):
                    N = T + n
                    for C in CLAIM_CHUNKS:
                        reach = [v for (f, F), v in took.items() if F <= min(f + C, N)]
                        for d in DECODES:
                            cases += 1
                            dec = [took[(N, N + d)]] if d else []
                            peak = max([*reach, *dec])
                            charge = mgr.prompt_after_claim(
                                T, pages, hps, pool.ref_count, n, C, d
                            )
                            if charge != peak:
                                return cases, {
                                    **g.describe(),
                                    "hit": T,
                                    "earlier request past the hit": past,
                                    "n": n,
                                    "C": C,
                                    "decode": d,
                                    "problem": f"charge {charge}, worst chunking's {peak}",
                                }
    return cases, None


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
    blocks_needed_for(n). With a prefix hit, for every kind with B <= 2, W <= 4, m <= 2, a
    hit of one or two lcm pages an earlier request named (freed, or still holding its pages
    at 0, 1, B or B + W tokens past the hit), every n <= 7, C in {1, 2, 5} and decode <= 2:
    the free pages the group takes after its claim and after every reachable chunk and the
    decode, counted before the claim (a page the earlier request holds is not taken), never
    exceed its part of blocks_needed_for_prompt_after_claim, and the greatest equals it.""",
    """An engine that admits a prompt when its whole-prompt charge fits the free pages never
    runs out of pages in the middle of its prefill, whatever chunk sizes up to C its steps
    give it, with or without a prefix hit; and without a hit it is never charged more than
    vLLM's own admission check would charge.""",
    kills=("prompt-charge-largest-chunk",),
    bounded=True,
    cost=3,
    rlimit=2_000_000,
)
def prompt_charge_bounds_every_chunk(p: Prover) -> None:
    p.exhaust("every configuration within the bounds", _search)
    p.exhaust("every claimed table within the bounds", _claim_search)
