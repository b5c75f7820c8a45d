"""Section 7, property 8 and section 8 (prefix caching): bounded, exhaustive runs of the spec.

Names, lookups, matches and claims are procedural (a map of names, a FIFO queue, a search
over boundaries), so these theorems run the spec's own classes (``livetail.spec``) over
every configuration inside stated bounds, as the bounded theorems do, and check each property
on every one.  The geometry they rest on is proved unbounded elsewhere and cited, not
re-proved: ``live-tail-resume-pages-kept`` (no resume page of an aligned boundary is ever a
hole), ``reclaim-releases-only-expired`` (a reclaimed slot is a full page at the reclaim
frontier, so an engine that names before it reclaims has named it) and
``shift-invariance-by-alignment`` (a table of a multiple of the alignment charges like a
fresh one).

Every run is a list of trace ops (``verify/trace.py``: ``acquire``, ``cache``, ``reclaim``,
``free``, ``claim``, ``admit``) over document 0 of the trace machine, so a failing
configuration becomes a replayable trace that ends with a ``claim`` (or ``admit``) op.  The
machine checks that a claim's match changed nothing and the claim itself, and the admission
charge; it has no oracle for *which* boundary a match must return, so a trace of a wrong
boundary replays the situation without turning red by itself (its ``observed`` record says
what was wrong).

The layouts, bounds and the runs themselves (``World``, ``points``, ``walk``) are in
``worlds/prefix.py``, shared with the host-tier theorems; this module holds the five
theorems.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .prover.prover import Prover
from .prover.query import Values
from .prover.theorem import theorem
from .worlds.prefix import (
    CHARGE_EXTRA,
    CHARGE_FIRST,
    CHARGE_LAYOUTS,
    HIT_EXHAUSTIVE,
    HIT_EXHAUSTIVE_QUICK,
    HIT_LAYOUTS,
    HIT_MAX_N,
    LAYOUTS,
    WALK_EXHAUSTIVE,
    WALK_MAX_N,
    WALK_QUICK,
    Layout,
    Op,
    Prefixes,
    World,
    _count,
    _exhaust,
    _trace_builder,
    base_of,
    chunkings,
    claim_op,
    lcm_of,
    like,
    pages_ever,
    prompt_lengths,
    supports,
    walk,
)

# --- 1. a match changes nothing --------------------------------------------------------------


def _check_read_only(w: World, prompts: Sequence[int]) -> Values | None:
    parts = ["free queue", "reference counts", "page names", "pages per name", "tables"]
    before = w.snapshot()
    for P in prompts:
        keys = w.keys(P)
        m1 = w.coord.match_prefix(keys)
        after = w.snapshot()
        m2 = w.coord.match_prefix(keys)
        problem = ""
        if after != before:
            diff = [x for x, a, b in zip(parts, before, after) if a != b]
            problem = f"match_prefix of {P} tokens changed the {', '.join(diff)}"
        elif (m1.num_tokens, m1.pages) != (m2.num_tokens, m2.pages):
            problem = f"two matches of {P} tokens differ: {m1.pages} vs {m2.pages}"
        elif w.snapshot() != before:
            problem = f"a repeated match_prefix of {P} tokens changed the state"
        if problem:
            return w.values(problem, [claim_op(w.num_requests - 1, P)], prompt_tokens=P)
    return None


@theorem(
    "match-is-read-only-bounded",
    """Bounded, exhaustive over the spec's classes: for 14 coordinators (full, state, plain and
    live-tail sliding groups; page sizes 1 to 4; W from 1 to 4, live tail with and without
    holes; lcm up to 4), every prompt of N <= 2*lcm+1 tokens (lcm+1 with livetail verify
    --quick) computed chunk by chunk (every chunking for N <= 4, else up to 8: one chunk, token
    by token, ending on every, every other or no lcm multiple, one token either side of them,
    every even token), each chunk named before it is reclaimed, in a pool that is tight (the
    request's own allocations evict pages it reclaimed) or roomy; in every state after each
    chunk, while a second request allocates token by token (evicting the oldest free pages) with
    the first holding or freed, after a second request computed the same prompt (two pages per
    name) and freed, and after a third request claimed the prompt and the others freed:
    match_prefix of every prompt length that is 0, an lcm multiple up to N+lcm, or one base page
    less changes nothing (free queue order, reference counts, page names and their order, every
    table's slots, tail, floor, naming cursor and binding), and a repeat returns the same match.""",
    """An engine may match as often as it likes (to price admission before deciding, or to
    probe several prompts): a match never evicts, pins, reorders or renames a page, and
    never touches a table.""",
    bounded=True,
    cost=2,
    trace=_trace_builder("match-is-read-only-bounded"),
    rlimit=2_000_000,
)
def match_is_read_only(p: Prover) -> None:
    max_n = WALK_QUICK if p.quick else WALK_MAX_N
    _exhaust(p, lambda: walk(LAYOUTS, max_n, WALK_EXHAUSTIVE, _check_read_only))


# --- 2. a claim takes exactly blocks_consumed_by_claim free pages -----------------------------


def _claim_problem(c: World, r: int, P: int) -> str:
    """Match P tokens in `c`, claim into request r's fresh tables, check section 8."""
    coord, pool = c.coord, c.pool
    ts = c.tables[r]
    c.ops.append(claim_op(r, P))
    m = coord.match_prefix(c.keys(P))
    consumed = coord.blocks_consumed_by_claim(m)
    T, pages = m.num_tokens, m.pages
    queue, refs, names = pool.free_queue(), pool.ref_counts(), c.names()
    others = [
        (tuple(t.slots), t.tail_available, t.reclaim_floor, t.named_upto)
        for i, row in enumerate(c.tables)
        if i != r
        for t in row
    ]
    real = {pg for g in pages for pg in g if pg}
    were_free = [pg for pg in queue if pg in real]
    if consumed != len(were_free):
        return (
            f"blocks_consumed_by_claim {consumed}, but {len(were_free)} distinct matched pages "
            f"are free ({sorted(were_free)})"
        )
    coord.claim(ts, m)
    _count("claims")
    _count("claims that took free pages", consumed > 0)
    _count("claims sharing pages in use", any(refs[pg] for pg in real))
    taken = len(queue) - pool.num_free
    if taken != consumed:
        return f"claim took {taken} free pages, blocks_consumed_by_claim said {consumed}"
    if pool.free_queue() != [pg for pg in queue if pg not in real]:
        return "the claim did not take exactly the matched free pages (the rest in order)"
    per_slot = [0] * len(refs)
    for group_pages in pages:
        for pg in group_pages:
            per_slot[pg] += 1 if pg else 0
    if pool.ref_counts() != [x + k for x, k in zip(refs, per_slot)]:
        return "the claim did not add exactly one reference per matched slot"
    if c.names() != names:
        return "the claim changed the page names"
    now = [
        (tuple(t.slots), t.tail_available, t.reclaim_floor, t.named_upto)
        for i, row in enumerate(c.tables)
        if i != r
        for t in row
    ]
    if now != others:
        return "the claim changed another request's table"
    for gi, (g, t) in enumerate(zip(c.layout, ts)):
        if T == 0:
            if not t.is_fresh:
                return f"g{gi}: a claim of a 0-token match left the table {t!r}"
            continue
        b = T // g.B
        R = g.resume()
        floor = 0 if R < 0 else max(0, b - R)
        got = (t.slots, t.tail_available, t.reclaim_floor, t.named_upto, t.block_size)
        want = (pages[gi], 0, floor, b, g.B)
        if len(pages[gi]) != b or got != want or t.pool is not pool or t.extent != T:
            return (
                f"g{gi} {g} after claiming {T} tokens: slots {t.slots}, tail "
                f"{t.tail_available}, floor {t.reclaim_floor}, cursor {t.named_upto}, "
                f"block_size {t.block_size}, extent {t.extent}, bound "
                f"{t.pool is pool}; expected slots {pages[gi]} ({b} slots), tail 0, floor "
                f"{floor}, cursor {b}, extent {T}, bound to the pool"
            )
    return ""


def _stale_problem(w: World, r: int, P: int) -> Values | None:
    """Evict a free matched page by an allocation between match and claim (a stale match):
    blocks_consumed_by_claim and claim raise ValueError and change nothing."""
    m = w.coord.match_prefix(w.keys(P))
    real = {pg for g in m.pages for pg in g if pg}
    queue = w.pool.free_queue()
    where = [i for i, pg in enumerate(queue) if pg in real]
    if not where:
        return None
    ev = 1  # the evicting request
    n = next(
        (
            n
            for n in range(1, 4 * w.lcm * (len(queue) + 1))
            if where[0] + 1 <= w.coord.blocks_needed_for(w.tables[ev], n) <= len(queue)
        ),
        None,
    )
    if n is None:
        return None
    # Found without a copy (match_prefix and blocks_needed_for are read-only); now run it.
    c = w.copy(requests=(ev, r))
    m = c.coord.match_prefix(c.keys(P))
    ts = c.tables[ev]
    op = claim_op(r, P, between_request=ev, between_tokens=n)
    c.coord.blocks_consumed_by_claim(m)
    if not c.coord.acquire(ts, n) or all(c.pool._is_cached(pg) for pg in real):
        return None  # nothing evicted (acquire-all-or-nothing-bounded checks the take)
    before = c.snapshot()
    problem = ""
    for what, call in (
        ("blocks_consumed_by_claim", lambda: c.coord.blocks_consumed_by_claim(m)),
        ("claim", lambda: c.coord.claim(c.tables[r], m)),
    ):
        try:
            call()
            problem = f"{what} of a stale match (page evicted by acquire({n})) did not raise"
        except ValueError:
            pass
        if not problem and c.snapshot() != before:
            problem = f"{what} of a stale match changed the state"
        if problem:
            return w.values(problem, [op], prompt_tokens=P)
    _count("stale matches refused")
    return None


def _check_claim(w: World, prompts: Sequence[int]) -> Values | None:
    r = w.num_requests - 1
    seen = set()
    for P in prompts:
        m = w.coord.match_prefix(w.keys(P))
        distinct = (m.num_tokens, tuple(map(tuple, m.pages)))
        if distinct in seen:
            continue  # the same match claims the same way (match-is-read-only-bounded)
        seen.add(distinct)
        c = w.copy(requests=(r,))
        problem = _claim_problem(c, r, P)
        if problem:
            return c.values(problem, prompt_tokens=P)
    return _stale_problem(w, r, prompts[-1])


@theorem(
    "claim-takes-consumed-bounded",
    """Bounded, exhaustive over the spec's classes: in every state of match-is-read-only-bounded
    (the same 14 coordinators, prompts, chunkings, pools, evictions, frees, duplicates and
    shares; N <= lcm+1 with livetail verify --quick) and for every distinct match of the prompt
    lengths it matches, a claim into fresh tables takes exactly blocks_consumed_by_claim free
    pages, which equals the number of distinct matched pages that were free: exactly those leave
    the free queue (the others keep their order), each matched slot adds one reference, no name
    and no other table changes, and each claimed table holds the matched pages in b = num_tokens
    / B slots with tail room 0, extent num_tokens, naming cursor b and reclaim floor max(0, b -
    R) for sliding and state groups (0 for full groups), bound to the pool; a match of 0 tokens
    leaves the tables fresh. And when an acquire between match and claim evicts a matched free
    page (the longest prompt), blocks_consumed_by_claim and claim raise ValueError and change
    nothing.""",
    """An engine that charges blocks_consumed_by_claim for a hit gets exactly that many
    pages taken by the claim; the claimed tables resume at the boundary and never rescan
    the holes below it; a match made stale by an allocation is refused, never half
    claimed.""",
    bounded=True,
    cost=3,
    trace=_trace_builder("claim-takes-consumed-bounded"),
    rlimit=2_000_000,
)
def claim_takes_consumed(p: Prover) -> None:
    max_n = WALK_QUICK if p.quick else WALK_MAX_N
    _exhaust(p, lambda: walk(LAYOUTS, max_n, WALK_EXHAUSTIVE, _check_claim))


# --- 3. the admission charge with a hit is exact ----------------------------------------------


def _charge_worlds(layout: Layout) -> Iterator[tuple[World, int]]:
    """Request 0 computes 0, lcm or 2*lcm tokens a chunk per lcm (so every lcm multiple is
    named in every group), holding its pages or freed; the prompt to match is its prompt."""
    L = lcm_of(layout)
    for N in (L, 2 * L, 0):
        for freed in (False, True) if N else (False,):
            reach = N + (CHARGE_FIRST + CHARGE_EXTRA) * L + 2  # the claimed tables' extent
            w = World(layout, 2 + pages_ever(layout, N) + pages_ever(layout, reach), 2)
            w.compute(0, range(L, N + 1, L))
            if freed:
                w.do({"op": "free", "request": 0})
            yield w, N


def _charge_search(layouts: Sequence[Layout]) -> tuple[int, Values | None]:
    cases = 0
    for layout in layouts:
        L = lcm_of(layout)
        for w, P in _charge_worlds(layout):
            c = w.copy()
            m = c.coord.match_prefix(c.keys(P))
            consumed = c.coord.blocks_consumed_by_claim(m)
            T = m.num_tokens
            free0 = c.pool.num_free
            c.do(claim_op(1, P))
            claim_take = free0 - c.pool.num_free
            _count("hits claimed", T > 0)
            _count("hits that took free pages", consumed > 0)
            fresh = c.coord.new_tables()
            for first in range(CHARGE_FIRST * L + 2):
                chunk = _Chunk(c, fresh, T, first)
                for extra in range(CHARGE_EXTRA * L + 2):
                    charge = c.coord.blocks_needed_for_sequential(fresh, first, extra)
                    on_claimed = c.coord.blocks_needed_for_sequential(c.tables[1], first, extra)
                    for between in (False, True):
                        cases += 1
                        problem = _charge_case(
                            chunk, extra, between, charge, on_claimed, claim_take
                        )
                        if not problem and claim_take != consumed:
                            problem = (
                                f"the claim took {claim_take} pages, "
                                f"blocks_consumed_by_claim said {consumed}"
                            )
                        if problem:
                            admit: Op = {
                                "op": "admit",
                                "request": 1,
                                "chunk": first,
                                "reserve": extra,
                            }
                            if between:
                                admit["reclaim_between"] = True
                            return cases, c.values(
                                problem,
                                [admit],
                                matched=T,
                                consumed=consumed,
                                first=first,
                                extra=extra,
                            )
    return cases, None


class _Chunk:
    """Request 1's claimed world after acquire(first) succeeded or not (`ok`), and the same
    after a reclaim_expired at the chunk's end, each run once (the acquires after them
    start from copies): what an operation does depends only on the world it starts from."""

    def __init__(self, claimed: World, fresh: Sequence[Any], T: int, first: int) -> None:
        self.T, self.first = T, first
        self.chunk_need = claimed.coord.blocks_needed_for(fresh, first)
        d = claimed.copy()
        self.free1 = d.pool.num_free
        self.ok = d.coord.acquire(d.tables[1], first)
        self.take1 = self.free1 - d.pool.num_free
        self.chunked = d
        self._reclaimed: World | None = None

    def reclaimed(self) -> World:
        if self._reclaimed is None:
            d = self.chunked.copy()
            d.coord.reclaim_expired(d.tables[1], self.T + self.first)
            self._reclaimed = d
        return self._reclaimed


def _charge_case(
    chunk: _Chunk, extra: int, between: bool, charge: int, on_claimed: int, claim_take: int
) -> str:
    T, first, chunk_need = chunk.T, chunk.first, chunk.chunk_need
    if not chunk.ok:
        return f"acquire({first}) after the claim failed with {chunk.free1} pages free"
    take1 = chunk.take1
    d = (chunk.reclaimed() if between else chunk.chunked).copy()
    coord, pool, ts = d.coord, d.pool, d.tables[1]
    free2 = pool.num_free
    if not coord.acquire(ts, extra):
        return f"acquire({extra}) after the chunk failed with {free2} pages free"
    take2 = free2 - pool.num_free
    if take1 + take2 != charge or take1 != chunk_need:
        return (
            f"after a claim of {T} tokens the chunk of {first} took {take1} and the decode "
            f"of {extra} took {take2} pages; the fresh-table charges are "
            f"blocks_needed_for {chunk_need}, sequential {charge} (claim took {claim_take}: "
            f"{claim_take + take1 + take2} in all vs {claim_take + charge} charged)"
        )
    if on_claimed != charge:
        return f"sequential charge {on_claimed} on the claimed tables, {charge} on fresh ones"
    return ""


@theorem(
    "hit-admission-exact-bounded",
    """Bounded, exhaustive over the spec's classes: for 11 coordinators (every kind; live
    tail with holes, degenerate and with W = 1; page sizes 1 to 4; lcm up to 6), after a
    first request computed 0, lcm or 2*lcm tokens (one chunk per lcm, named, then
    reclaimed) and either holds its pages or freed them, a second request matches that
    prompt and claims the match into fresh tables, then acquires the rest of its chunk
    (first <= 3*lcm+1 tokens) and its decode reserve (extra <= 2*lcm+1), with or without a
    reclaim_expired at the chunk's end in between: the claim takes
    blocks_consumed_by_claim(match) pages, the chunk takes blocks_needed_for(first) and
    the decode blocks_needed_for_sequential(first, extra) - blocks_needed_for(first), both
    computed on fresh tables, so blocks_consumed_by_claim + the fresh-table sequential
    charge is exactly what the claim and the two acquires take (and the sequential charge
    on the claimed tables equals the fresh one). End to end, on the executable classes, of
    what shift-invariance-by-alignment proves unbounded for the closed forms: a claimed
    table of b = num_tokens/B slots and no tail room is an A-aligned table.""",
    """Admission with a prefix hit can be priced before the claim: charge
    blocks_consumed_by_claim(match) plus blocks_needed_for_sequential on fresh tables for
    the rest of the chunk and the decode reserve; that is exactly what the claim and the
    acquires will take.""",
    kills=("combined-charge",),
    bounded=True,
    cost=2,
    trace=_trace_builder("hit-admission-exact-bounded"),
    rlimit=2_000_000,
)
def hit_admission_exact(p: Prover) -> None:
    _exhaust(p, lambda: _charge_search(CHARGE_LAYOUTS))


# --- 4. property 8: live tail never costs a hit -----------------------------------------------


def property8(N: int, prompt: int, L: int, ends: Sequence[int], has_state: bool) -> int:
    """Semantics section 7, property 8: the greatest lcm multiple T <= min(N, prompt) that,
    when there are state groups, was a chunk end (0 if none)."""
    for T in range(min(N, prompt) // L * L, 0, -L):
        if not has_state or T in ends:
            return T
    return 0


def _hit_search(layouts: Sequence[Layout], exhaustive: int) -> tuple[int, Values | None]:
    cases = 0
    for layout in layouts:
        L, base = lcm_of(layout), base_of(layout)
        has_state = any(g.kind == "state" for g in layout)
        plain = like(layout, [g.full_allocation() for g in layout])
        # Every allocation pops a page never used before: no eviction at any point.
        nb = 1 + pages_ever(layout, HIT_MAX_N * L + 1)
        runs = Prefixes(World(layout, nb, 2)), Prefixes(World(plain, nb, 2))
        for N in range(1, HIT_MAX_N * L + 2):
            prompts = prompt_lengths(N + L, L, base)
            for ends in chunkings(N, L, exhaustive):
                live, classic = (r.compute(ends) for r in runs)
                assert live is not None and classic is not None
                _count("runs")
                _count("runs where live tail took fewer pages", live.taken < classic.taken)
                for phase in ("holds its pages", "freed"):
                    if phase == "freed":
                        live.do({"op": "free", "request": 0})
                        classic.do({"op": "free", "request": 0})
                    if any(w.pool.num_cached != w.seq for w in (live, classic)):
                        return cases, live.values("a name was evicted (the pool is too small)")
                    for P in prompts:
                        cases += 1
                        want = property8(N, P // base * base, L, ends, has_state)
                        got = live.coord.match_prefix(live.keys(P)).num_tokens
                        got_classic = classic.coord.match_prefix(classic.keys(P)).num_tokens
                        _count("hits of a nonzero boundary", want > 0)
                        if got != want or got_classic != want:
                            problem = (
                                f"request 0 computed {N} tokens in chunks ending at "
                                f"{list(ends)} and {phase}; a match of {P} tokens returns "
                                f"{got} with live tail, {got_classic} with full allocation; "
                                f"property 8 says {want}"
                            )
                            return cases, live.values(
                                problem,
                                [claim_op(1, P)],
                                prompt_tokens=P,
                                live_tail=got,
                                full_allocation=got_classic,
                                expected=want,
                            )
    return cases, None


@theorem(
    "live-tail-never-costs-a-hit-bounded",
    """Bounded, exhaustive over the spec's classes (semantics section 7, property 8): for 22
    coordinators (live-tail sliding groups with holes, degenerate live tail, W = 1, two live
    groups, live page size 3, plain sliding, full and state groups; lcm up to 6; four of them
    with an alignment of 3 or 4 above their lcm, semantics 13.9, where sliding and state
    groups name only the slots behind its multiples), a request that computed N <=
    3*lcm+1 tokens chunk by chunk (every chunking for N <= 8, 6 with livetail verify --quick,
    else up to 8 as in match-is-read-only-bounded), naming each chunk's pages before
    reclaiming them, in a pool where no allocation evicts: a later match of any prompt length
    that is 0, an lcm multiple up to N+lcm or one base page less, while the request holds its
    pages and after it freed them, returns exactly the greatest lcm multiple T <= min(N,
    prompt) that, for every state group, was a chunk end (without state groups simply the
    greatest), and the same as the same run with every sliding group on full allocation
    (with an alignment, read "alignment" for "lcm" throughout). The
    geometric core is proved unbounded by live-tail-resume-pages-kept (no resume page of an
    aligned boundary is ever a hole) and reclaim-releases-only-expired (a reclaimed slot is full
    at the reclaim frontier, so it was named first).""",
    """Turning live tail on never loses a prefix-cache hit: the pages it skips are never
    ones a match needs, so an engine keeps full allocation's hit rate at a fraction of the
    pages.""",
    bounded=True,
    cost=2,
    trace=_trace_builder("live-tail-never-costs-a-hit-bounded"),
    rlimit=2_000_000,
)
def live_tail_never_costs_a_hit(p: Prover) -> None:
    exhaustive = HIT_EXHAUSTIVE_QUICK if p.quick else HIT_EXHAUSTIVE
    _exhaust(p, lambda: _hit_search(HIT_LAYOUTS, exhaustive))


# --- 5. the match returns the greatest supported boundary -------------------------------------


def _check_greatest(w: World, prompts: Sequence[int]) -> Values | None:
    pool = w.pool
    refs = pool.ref_counts()
    named = set(pool._name_of.values())
    copies_of: dict[Any, list[int]] = {}  # each name's pages, in the pool's order
    for q, nm in pool._name_of.items():
        copies_of.setdefault(nm, []).append(q)
    L, base = w.lcm, w.base
    for P in prompts:
        keys = w.keys(P)
        m = w.coord.match_prefix(keys)
        supported = [
            T
            for T in range(0, len(keys) * base + 1, L)
            if all(supports(g, gi, T, keys, base, named) for gi, g in enumerate(w.layout))
        ]
        T = m.num_tokens
        problem = ""
        _count("matches above an unsupported boundary", len(supported) * L <= supported[-1])
        if T != supported[-1]:
            problem = (
                f"match_prefix of {P} tokens returned {T}; the supported boundaries are "
                f"{supported} (brute force), the greatest {supported[-1]}"
            )
        for gi, g in enumerate(w.layout):
            if problem:
                break
            b, R = T // g.B, g.resume()
            low = 0 if R < 0 else max(0, b - R)
            k = g.B // base
            pages = m.pages[gi]
            if len(pages) != b:
                problem = f"g{gi}: {len(pages)} matched slots for {T} tokens, expected {b}"
                break
            for j, pg in enumerate(pages):
                if j < low:
                    if pg:
                        problem = f"g{gi} slot {j} below the resume pages matched page {pg}"
                    continue
                name = (gi, keys[(j + 1) * k - 1])
                copies = copies_of.get(name, [])
                in_use = [q for q in copies if refs[q] >= 1]
                want = min(in_use or copies, key=lambda q: w.registered[q])
                _count("matched names with several copies", len(copies) > 1)
                if pg != want:
                    problem = (
                        f"g{gi} slot {j} matched page {pg}; the copies named {gi}/key {j} are "
                        f"{copies} (in use {in_use}): expected the earliest registered "
                        f"{'in use' if in_use else 'free'} one, {want}"
                    )
                    break
        if problem:
            return w.values(problem, [claim_op(w.num_requests - 1, P)], prompt_tokens=P)
    return None


@theorem(
    "match-greatest-boundary-bounded",
    """Bounded, exhaustive over the spec's classes: in every state of
    match-is-read-only-bounded (14 coordinators, prompts of N <= 2*lcm+1 tokens, their
    chunkings, tight and roomy pools, evictions, frees, a second copy of every page, shared
    pages) and for every prompt length it matches, match_prefix returns the greatest lcm
    multiple T <= len(keys)*base that every group supports, where support is recomputed by
    definition from the pool's names (a full group needs a named page for every slot below
    T/B, a sliding or state group for the R slots below it), over every boundary: this
    covers state groups named only at some chunk ends and sliding groups whose resume pages
    were evicted at some boundaries but not at others, where support is not monotone. Each
    group's matched pages are real exactly on the slots it needs, each the copy of its name
    that is in use if one is, the earliest registered among those.""",
    """A hit is never missed: the match finds the longest prefix the cache can resume,
    even when a lower boundary is gone, and prefers a copy already pinned so the claim
    spends as few free pages as possible.""",
    bounded=True,
    cost=2,
    trace=_trace_builder("match-greatest-boundary-bounded"),
    rlimit=2_000_000,
)
def match_greatest_boundary(p: Prover) -> None:
    _exhaust(p, lambda: walk(LAYOUTS, WALK_MAX_N, WALK_EXHAUSTIVE, _check_greatest))
