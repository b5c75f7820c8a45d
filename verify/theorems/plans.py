"""Section 7, property 10 (step plans): bounded, exhaustive over the spec.

Planning a step is procedural (a greedy scan), so the theorem runs the spec's own classes
over every configuration inside the stated bounds.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail import spec
from livetail.spec import geometry as geo
from livetail.spec import runs

from ..z3arith import Z3
from .prover.prover import Prover
from .prover.query import Values
from .prover.slot_traces import plan_candidates, slot_traces
from .prover.states import ARITH, count_lemmas, general, group, shape_facts, table, take_lemma
from .prover.symbols import Geometry, every_kind, ints
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


@theorem(
    "step-plan-apply-never-fails",
    """Executes the spec's step plan (spec/runs.py plan_stepped over plan_fits, the rule the
    model's plan_step decides by) for two requests in priority order, each a symbolic table
    of one run (symbolic sizes, frontier, floor and tail room) with a symbolic token count,
    its pages held alone or shared with holders outside the plan (reference count c >= 1),
    symbolic free pages F, for a full group and a live-tail sliding group (B, W, m unbounded;
    a state group and a sliding group with A = 0 allocate exactly as a full group does, and a
    plan never reclaims): then applies it as
    apply_step does, runs.free_table on the preempted requests and runs.acquire on the
    stepped ones in priority order. Every stepped acquire succeeds; the free pages after
    are F + released - taken, the plan's free_after; the stepped prefix is the longest that
    fits (stepping one more would not fit with the rest preempted); and the top request is
    stepped whenever it fits with the other preempted. Unbounded in sizes and counts, for
    two requests that share no page with each other (pages shared between requests of one
    plan: step-plan-bounded and the differential campaign); for every live_count,
    ceil_div, extent, slid_out, tail_after and new_slots function (the facts the steps use
    are proved lemmas).""",
    """A step an engine plans never fails half-way, preempts no more than it must, and never
    starves the request at the head of its queue.""",
    kills=("plan-fits-strict",),
    cost=4,
    rlimit=8_800_000,
    executes=("plan_stepped", "free_table", "acquire"),
    trace=slot_traces("step-plan-apply-never-fails", plan_candidates),
)
def step_plan(p: Prover) -> None:
    # A state group and a sliding group with A = 0 allocate as a full group does (every new
    # slot real) and a plan never reclaims: full and live tail are the two acquires there are.
    kinds = every_kind()
    for g in (kinds[0], kinds[3]):
        gr = group(g)
        cf = count_lemmas(p, g)
        ext0, _ = shape_facts(p, g)
        take = take_lemma(p, g, cf, ext0)

        def setup(g: Geometry = g, gr: runs.Group = gr, take: Any = take) -> tuple[Any, ...]:
            F = z3.Int("F")
            tabs, hyps, ns, cs = [], [*g.hyps, F >= 0], [], []
            for i in range(2):
                t, th = table(g, f"_{i}", 1)
                n, c = ints(f"n_{i} c_{i}")
                tabs.append(t)
                ns.append(n)
                cs.append(c)
                hyps += [*th, n >= 0, c >= 1]
            needs = [
                geo.blocks_needed(t.slots, t.tail, n, g.W, g.B, g.A, Z3) for t, n in zip(tabs, ns)
            ]
            rel = [runs.free_table(0, t, gr, (c,), Z3).released for t, c in zip(tabs, cs)]

            def released_from(k: int) -> Any:
                return sum(rel[k:], z3.IntVal(0))

            k = runs.plan_stepped(needs, F, released_from, Z3)
            # apply_step: free the preempted (lowest priority first), then acquire in order.
            back = z3.If(k == 0, released_from(0), z3.If(k == 1, released_from(1), 0))
            a0 = runs.acquire(F + back, tabs[0], ns[0], gr, Z3)
            a1 = runs.acquire(z3.If(k >= 1, a0.free, F + back), tabs[1], ns[1], gr, Z3)
            hyps += take(tabs[0].slots, tabs[0].tail, ns[0], F + back)
            hyps += take(tabs[1].slots, tabs[1].tail, ns[1], z3.If(k >= 1, a0.free, F + back))
            hyps += [r >= 0 for r in rel]
            return F, needs, released_from, k, back, a0, a1, hyps

        def applies(setup: Any = setup) -> tuple[Any, Any]:
            F, needs, released_from, k, back, a0, a1, hyps = setup()
            after = z3.If(k == 2, a1.free, z3.If(k == 1, a0.free, F + back))
            taken = z3.If(k == 2, needs[0] + needs[1], z3.If(k == 1, needs[0], 0))
            claim = z3.And(
                z3.Implies(k >= 1, a0.ok),
                z3.Implies(k >= 2, a1.ok),
                after == F + back - taken,
            )
            return claim, hyps

        def longest(setup: Any = setup) -> tuple[Any, Any]:
            F, needs, released_from, k, back, a0, a1, hyps = setup()
            one_more = z3.And(
                z3.Implies(k == 0, needs[0] > F + released_from(1)),
                z3.Implies(k == 1, needs[0] + needs[1] > F),
            )
            top = z3.Implies(needs[0] <= F + released_from(1), k >= 1)
            return z3.And(one_more, top, k >= 0, k <= 2), hyps

        label = f"[{g.label}]"
        if g.kind == "full":
            free0, need, rel_from, stepped, *_, facts = setup()
            p.exhibit(
                f"{label} a plan that steps the top request and preempts the other exists",
                [*facts, stepped == 1, rel_from(1) >= 1, need[0] > free0],
            )
        general(
            p,
            g,
            f"{label} every stepped acquire succeeds; free after = free_after",
            applies,
            over=ARITH,
        )
        general(
            p,
            g,
            f"{label} the stepped prefix is the longest; the top request progresses",
            longest,
            over=ARITH,
        )
