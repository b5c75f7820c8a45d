"""Section 7, property 10 (step plans): bounded, exhaustive over the spec.

Planning a step is procedural (a greedy scan), so the theorem runs the spec's own classes
over every configuration inside the stated bounds.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from livetail import spec

from .prover.prover import Prover
from .prover.query import Values
from .prover.theorem import theorem
from .worlds.prefix import _clone

# --- item 10: step plans --------------------------------------------------------------------

LAYOUTS: list[list[dict[str, Any]]] = [
    [{"kind": "full", "block_size": 2}],
    [
        {"kind": "full", "block_size": 2},
        {"kind": "sliding", "block_size": 1, "sliding_window": 2, "live_tail_alloc": True},
    ],
]
POOLS = (4, 7)  # num_blocks
PRIOR = (0, 2, 3)  # tokens each request computed before the plan
ASK = (0, 1, 3)  # tokens each request asks for in the step
MAX_REQUESTS = 3


def _released(pool: Any, tables: list[Any]) -> int:
    """Definition: distinct pages whose every reference is held by these tables."""
    held: dict[int, int] = {}
    for t in tables:
        for p in t.slots:
            if p:
                held[p] = held.get(p, 0) + 1
    return sum(1 for p, n in held.items() if n == pool.ref_count(p))


def _setups() -> Iterator[tuple[Any, list[list[Any]], list[int], Values]]:
    keys = spec.page_keys(list(range(8)), 1)
    for li, layout in enumerate(LAYOUTS):
        for nb in POOLS:
            for r in range(1, MAX_REQUESTS + 1):
                for prior in itertools.product(PRIOR, repeat=r):
                    for share in (False, True) if r > 1 else (False,):
                        pool = spec.BlockPool(nb)
                        c = spec.Coordinator([spec.GroupSpec(**g) for g in layout], pool)
                        reqs = [c.new_tables() for _ in range(r)]
                        ok = True
                        for i, (ts, n) in enumerate(zip(reqs, prior)):
                            if share and i == 1:
                                c.claim(ts, c.match_prefix(keys[: prior[0]]))
                                n -= ts[0].extent
                            if n > 0 and not c.acquire(ts, n):
                                ok = False
                                break
                            done = ts[0].extent
                            c.cache_full_blocks(ts, keys, done)
                            c.reclaim_expired(ts, done)
                        if not ok:
                            continue
                        for ask in itertools.product(ASK, repeat=r):
                            v: Values = {
                                "layout": li,
                                "num_blocks": nb,
                                "prior": repr(prior),
                                "share": share,
                                "ask": repr(ask),
                            }
                            yield c, reqs, list(ask), v


def _check_plan(c: Any, reqs: list[list[Any]], ask: list[int]) -> str:
    pool = c.pool
    needs = [c.blocks_needed_for(ts, n) for ts, n in zip(reqs, ask)]
    free = pool.num_free
    flat = [[t for ts in reqs[k:] for t in ts] for k in range(len(reqs) + 1)]
    fits = [sum(needs[:k]) <= free + _released(pool, flat[k]) for k in range(len(reqs) + 1)]
    k_best = max(k for k in range(len(reqs) + 1) if fits[k])
    plan = c.plan_step(list(zip(reqs, ask)))
    if plan.stepped != k_best or plan.preempted != len(reqs) - k_best:
        return f"stepped {plan.stepped}, the longest prefix that fits is {k_best}"
    released = _released(pool, flat[k_best])
    if (plan.pages_taken, plan.pages_released) != (sum(needs[:k_best]), released):
        return f"plan says taken {plan.pages_taken} released {plan.pages_released}"
    if plan.free_after != free + released - sum(needs[:k_best]):
        return f"free_after {plan.free_after}"
    top = needs[0] <= free + _released(pool, flat[1])
    if plan.top_fits != top or (top and plan.stepped < 1):
        return f"top fits {top}, plan top_fits {plan.top_fits}, stepped {plan.stepped}"
    extents = [[t.extent for t in ts] for ts in reqs]
    c.apply_step(plan)  # a fresh plan: must not raise
    if pool.num_free != plan.free_after:
        return f"free after apply {pool.num_free}, plan said {plan.free_after}"
    for i, ts in enumerate(reqs):
        want = [e + ask[i] for e in extents[i]] if i < k_best else [0] * len(ts)
        if [t.extent for t in ts] != want or (i >= k_best and any(t.is_bound for t in ts)):
            return f"request {i}: extents {[t.extent for t in ts]}, expected {want}"
    return ""


def _fork(c: Any, reqs: list[list[Any]]) -> tuple[Any, list[list[Any]]]:
    """An independent copy of a coordinator, its pool and the requests' tables."""
    pool = _clone(c.pool)
    return _clone(c, c.pool, pool), [[_clone(t, c.pool, pool) for t in ts] for ts in reqs]


def _plan_search() -> tuple[int, Values | None]:
    cases = 0
    for c, reqs, ask, v in _setups():
        c2, reqs2 = _fork(c, reqs)
        cases += 1
        wrong = _check_plan(c2, reqs2, ask)
        if wrong:
            return cases, {**v, "problem": wrong}
    return cases, None


@theorem(
    "step-plan-bounded",
    f"""Bounded, exhaustive over the spec: two layouts ({{full B=2}} and {{full B=2; live
    sliding B=1 W=2}}), pools of {", ".join(map(str, POOLS))} blocks, 1 to {MAX_REQUESTS}
    requests, each having computed {", ".join(map(str, PRIOR))} tokens (acquire, name,
    reclaim; with the second request claiming the first one's named prefix or not) and
    asking for {", ".join(map(str, ASK))} tokens. plan_step steps exactly the longest
    priority prefix k with sum(need_i, i < k) <= free + released(suffix), released counted
    by definition (distinct pages whose every reference the suffix holds); it reports
    pages_taken, pages_released and free_after exactly; top_fits holds iff need_0 <= free +
    released(every other request), and then request 0 is stepped; apply_step of the fresh
    plan never fails, leaves exactly free_after pages free, grows each stepped request by
    its tokens and leaves each preempted one empty and unbound.""",
    """A whole engine step can be planned before it runs: the plan never fails half-way,
    preempts no more than it must, and always lets the top request progress when the pool
    can hold it at all.""",
    bounded=True,
    cost=5,
    rlimit=2_000_000,
)
def step_plan_bounded(p: Prover) -> None:
    p.exhaust("every layout, pool, request count, history and ask", _plan_search)
