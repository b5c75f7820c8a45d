"""Semantics 13.7, partial write-back: bounded, exhaustive runs of the spec.

``plan_offload(tables, n, max_pages=k)`` takes at most k host pages; the pages it takes must
keep the longest prefix a match can serve from the host alone. Here that prefix is computed
from section 8's support rule and section 10's reachable slots (``worlds/host.py``), and
compared with every other choice of as many pages, by brute force; the spec's own order
(``spec/host.py`` ``write_back_order``) is never asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from .prover.prover import Prover
from .prover.query import Values
from .prover.theorem import theorem
from .worlds.host import HOST_LAYOUTS, QUICK_LAYOUTS, HostWorld, reach, reachable_slots
from .worlds.prefix import COVERAGE, Layout, _count, _exhaust, base_of, lcm_of, pages_ever

Entry = tuple[int, int]  # (group, slot)


def _support(layout: Layout, t: int, L: int) -> list[Entry]:
    """The slots every group needs to resume at boundary t*L (section 8)."""
    out = []
    for g, grp in enumerate(layout):
        b = t * L // grp.B
        lo = 0 if grp.kind == "full" else max(0, b - grp.resume())
        out += [(g, j) for j in range(lo, b)]
    return out


def _covered(layout: Layout, N: int, L: int, on_host: set[Entry]) -> int:
    """The greatest t such that the host alone serves every boundary t'*L <= t*L."""
    t = 0
    while (t + 1) * L <= N and all(e in on_host for e in _support(layout, t + 1, L)):
        t += 1
    return t


def _writeback_problem(w: HostWorld, N: int, k: int) -> str:
    """Plan at most k pages on a copy of the world; check the choice and all-or-nothing."""
    layout, L = w.layout, w.lcm
    ts, keys, base = w.tables[0], w.keys(N), base_of(layout)
    host_names = w.host_names()

    def name(g: int, j: int) -> tuple[int, bytes]:  # section 8: slot j's name in group g
        return (g, keys[(j + 1) * (layout[g].B // base) - 1])

    def held(names: set[tuple[int, bytes]]) -> set[Entry]:  # the slots those names serve
        return {
            (g, j) for g, grp in enumerate(layout) for j in range(N // grp.B) if name(g, j) in names
        }

    # The slots a plan may copy: reachable slots whose real device page carries the name the
    # host lacks.
    cand = [
        (g, j)
        for g, grp in enumerate(layout)
        for j in reachable_slots(grp, N, L)
        if ts[g].slots[j] != 0
        and w.pool._name(ts[g].slots[j]) == name(g, j)
        and name(g, j) not in host_names
    ]
    take = min(k, len(cand))
    c = w.copy()
    before = c.full_snapshot()
    call = f"plan_offload(request 0, {N}, max_pages={k})"
    plan = c.coord.plan_offload(c.tables[0], N, max_pages=k)
    _count("partial plans asked")
    if plan is None:
        if take <= c.host.num_free:
            return f"{call} returned None with {c.host.num_free} free host pages for {take}"
        if c.full_snapshot() != before:
            return f"{call} was refused (short host) but changed things"
        _count("partial plans refused (too few host pages)")
        return ""
    got = list(zip(plan.groups, plan.slots))
    if len(got) != take or any(e not in cand for e in got) or got != sorted(got):
        return f"{call} lists {got}; {take} of the copyable entries {cand} by group then slot"
    # The slots the host serves besides the copies: its names once the plan's allocation
    # evicted the oldest (the same however the plan's pages are chosen).
    have = held(c.host_names())
    mine = _covered(layout, N, L, have | set(got))
    best = max((_covered(layout, N, L, have | set(s)) for s in combinations(cand, take)), default=0)
    _count("choices compared", len(cand))
    _count("partial plans whose prefix grew", mine > _covered(layout, N, L, have))
    if mine != best:
        return (
            f"{call} copies {got}: the host then serves every boundary up to {mine * L} "
            f"tokens; copying {take} other pages of {cand} serves up to {best * L}"
        )
    # The prefix is real: with the device's names gone, a match is served from the host.
    c.complete_offload(0, plan)
    c.do({"op": "free", "request": 0})
    assert c.pool.reset_names()
    for t in range(1, mine + 1):
        m = c.coord.match_prefix(c.keys(t * L))
        if m.num_tokens != t * L:
            return f"after {call} and its copies, a match of {t * L} tokens found {m.num_tokens}"
    _count("boundaries served from the host after a partial plan", mine)
    return ""


def _writeback_search(layouts: Sequence[Layout], max_n: int) -> tuple[int, Values | None]:
    cases = 0
    for layout in layouts:
        L = lcm_of(layout)
        for N in range(1, max_n * L + 2):
            total = reach(layout, N)
            for reclaimed in (False, True):
                for host_blocks in sorted({2, 1 + (total + 1) // 2, 2 + total}):
                    for pre in range(0, total + 1):
                        w = HostWorld(layout, 1 + pages_ever(layout, N), host_blocks, 1)
                        assert w.do({"op": "acquire", "request": 0, "tokens": N})
                        w.do({"op": "cache", "request": 0, "doc": 0, "tokens": N})
                        if reclaimed:
                            w.do({"op": "reclaim", "request": 0, "frontier": N})
                        # A host that holds an earlier partial write-back's pages.
                        if pre:
                            first = w.coord.plan_offload(w.tables[0], N, max_pages=pre)
                            if first is None:
                                continue
                            w.complete_offload(0, first)
                        for k in range(0, total + 2):
                            problem = _writeback_problem(w, N, k)
                            cases += 1
                            if problem:
                                return cases, w.values(problem, max_pages=k, prompt_tokens=N)
    return cases, None


WRITEBACK_MAX_N = 3  # prompts of N <= 3*lcm+1 tokens (2*lcm+1 with --quick)


@theorem(
    "partial-write-back-keeps-longest-prefix-bounded",
    f"""Bounded, exhaustive over the spec's classes (semantics 13.7): for the
    {len(HOST_LAYOUTS)} coordinators of offload-is-reachable-set-bounded (6 with livetail
    verify --quick), a request that computed and named a prompt of every N <= 3*lcm+1 tokens
    (2*lcm+1 with --quick), reclaimed to N or not, a host pool of 1 usable page, about half
    or all of the reachable pages plus one, holding the pages of an earlier partial
    write-back of every size: plan_offload(tables, N, max_pages=k) for every k from 0 to one
    past the reachable pages lists min(k, c) of the c copyable entries (reachable slots
    whose real device page is named and whose name the host lacks, from section 10's
    definition), by group then slot, or returns None, changing nothing, exactly when the
    host has fewer free pages; and the prefix the host alone then serves (the greatest T,
    a multiple of the lcm, such that every boundary up to T has section 8's support among
    the host's names, after the plan's allocation evicted the oldest host names as every
    allocation does) is the greatest that any choice of min(k, c) copyable entries gives
    (every choice tried). After the copies, with the device's names gone, a match of every
    boundary up to that prefix finds it, served from the host.""",
    """An engine that writes back only what fits (max_pages = host.num_free) keeps the
    longest prefix its host pages can serve: the lowest boundaries' pages go first, so every
    request sharing a shorter prefix also hits.""",
    bounded=True,
    cost=2,
    rlimit=2_000_000,
)
def partial_write_back(p: Prover) -> None:
    layouts, max_n = (QUICK_LAYOUTS, 2) if p.quick else (HOST_LAYOUTS, WRITEBACK_MAX_N)
    _exhaust(p, lambda: _writeback_search(layouts, max_n))


__all__ = ["COVERAGE", "partial_write_back"]
