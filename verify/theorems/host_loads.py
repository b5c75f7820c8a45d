"""Section 7, property 11 (host tier), matches across tiers, claims with loads, loads.

Bounded, exhaustive runs of the spec's classes (``HostWorld``, ``worlds/host.py``, with its
data oracle of what each device and host page holds).  No trace (the trace format has no
host operations); a failure's values list the run's operations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo
from livetail.spec import runs, slots

from ..z3arith import Z3
from .host_traces import claim_slot_traces
from .prover.prover import Prover
from .prover.query import Values
from .prover.states import follows_runs, group, slot_pages
from .prover.symbols import every_kind, ints
from .prover.theorem import theorem
from .worlds.host import HOST_LAYOUTS, QUICK_LAYOUTS, HostWorld, Name, _nm, host_walk
from .worlds.prefix import Layout, _count, _exhaust, claim_op, supports

# --- 2. a match over both tiers finds the greatest supported boundary -------------------------


def _supported(w: HostWorld, keys: Sequence[bytes], named: set[Name]) -> list[int]:
    """Every lcm multiple T <= len(keys)*base that each group supports from `named`."""
    return [
        T
        for T in range(0, len(keys) * w.base + 1, w.lcm)
        if all(supports(g, gi, T, keys, w.base, named) for gi, g in enumerate(w.layout))
    ]


def _check_across(w: HostWorld, prompts: Sequence[int]) -> Values | None:
    pool, host = w.pool, w.host
    device, on_host = set(pool._name_of.values()), w.host_names()
    present = device | on_host
    base = w.base
    before = w.full_snapshot()
    for P in prompts:
        keys = w.keys(P)
        m = w.coord.match_prefix(keys)
        T, pages, hps = m.num_tokens, m.pages, m.host_pages
        both, on_device = _supported(w, keys, present), _supported(w, keys, device)
        problem = ""
        if T != both[-1]:
            problem = (
                f"match_prefix of {P} tokens returned {T}; the boundaries supported by the "
                f"names on the device or the host are {both} (brute force), the greatest {both[-1]}"
            )
        served = 0
        for gi, g in enumerate(w.layout):
            if problem:
                break
            b, R, k = T // g.B, g.resume(), g.B // base
            low = 0 if R < 0 else max(0, b - R)
            if len(pages[gi]) != b or len(hps[gi]) != b:
                problem = f"g{gi}: {len(pages[gi])} pages, {len(hps[gi])} host pages for {b} slots"
                break
            for j in range(b):
                pg, hp = pages[gi][j], hps[gi][j]
                if j < low:
                    if pg or hp:
                        problem = f"g{gi} slot {j} below the resume pages: page {pg}, host {hp}"
                        break
                    continue
                name = (gi, keys[(j + 1) * k - 1])
                copies = [q for q, nm in pool._name_of.items() if nm == name]
                _count("slots whose name is on both tiers", bool(copies) and name in on_host)
                if copies:
                    ok = pg in copies and hp == 0
                    want = f"a device page named so ({copies}), host page 0"
                else:
                    ok = pg == 0 and host._name(hp) == name
                    want = "device page 0 and the host page carrying the name"
                    served += ok
                if not ok:
                    problem = f"g{gi} slot {j}: page {pg}, host page {hp}; expected {want}"
                    break
        if problem:
            return w.values(problem, [claim_op(w.num_requests - 1, P)], prompt_tokens=P)
        _count("matches served partly from the host", served > 0)
        _count("matches longer than the device alone supports", T > on_device[-1])
    if w.full_snapshot() != before:
        return w.values("match_prefix changed the state (a pool, a name or a table)")
    return None


HOST_WALK = 2  # matches, claims and loads: prompts of N <= 2*lcm+1 tokens
HOST_WALK_QUICK = 1  # ... N <= lcm+1 with --quick
HOST_WALK_EXHAUSTIVE = 4  # ... every chunking for N <= 4


def _walk_bounds(p: Prover) -> tuple[list[Layout], int]:
    return (QUICK_LAYOUTS, HOST_WALK_QUICK) if p.quick else (HOST_LAYOUTS, HOST_WALK)


def _call(what: str, fn: Callable[..., Any], *args: Any) -> tuple[Any, str]:
    """A spec call that must succeed: its result, or what it raised as the problem."""
    try:
        return fn(*args), ""
    except Exception as e:  # e.g. the spec's own run check: the claim broke its table
        return None, f"{what} raised {type(e).__name__}: {e}"


def _walk_statement(what: str, bystander: str = "") -> str:
    return f"""Bounded, exhaustive over the spec's classes (semantics section 10, {what}):
    {bystander}for the {len(HOST_LAYOUTS)} coordinators of
    offload-is-reachable-set-bounded (6 with livetail verify --quick), a first request
    computing every prompt of N <= 2*lcm+1 tokens (N <= lcm+1 with --quick) chunk by chunk
    (every chunking for N <= 4, else the chunkings of match-is-read-only-bounded), each
    chunk named, offloading after naming each chunk (before its reclaim) or once after its
    last chunk, in a device pool that is tight or roomy and a host pool holding about half
    or all of the prompt's reachable pages; in every state after each chunk, while a second
    request allocates a token at a time (evicting the oldest free device pages, so names
    survive on the host only) with the first holding its pages or freed, and after the
    second request frees, for every prompt length that is 0, an lcm multiple up to N+lcm or
    one base page less:"""


@theorem(
    "match-across-tiers-greatest-boundary-bounded",
    _walk_statement("match across tiers")
    + """ match_prefix returns the greatest lcm multiple T <= len(keys)*base that every group
    supports when a slot counts as present if its name is on the device or on the host,
    support recomputed by definition over every boundary (section 8's rules on present
    slots); on each slot a group needs, the match takes the device page carrying the name
    when the device has one (host page 0), else device page 0 and the host page carrying
    the name; below the resume pages both are 0; and the matches change nothing in either
    pool or any table.""",
    """A name evicted from the device but kept on the host still counts for a hit, so the
    match finds the longest prefix either tier can resume; a page still on the device is
    never loaded from the host.""",
    bounded=True,
    cost=2,
    rlimit=2_000_000,
)
def match_across_tiers(p: Prover) -> None:
    layouts, max_n = _walk_bounds(p)
    _exhaust(p, lambda: host_walk(layouts, max_n, HOST_WALK_EXHAUSTIVE, _check_across))


# --- 3. a claim with loads is all-or-nothing and takes blocks_consumed_by_claim -------------


def _distinct_loading_matches(w: HostWorld, prompts: Sequence[int]) -> Iterator[tuple[int, Any]]:
    """(prompt length, match) for each distinct match that serves a slot from the host."""
    seen = set()
    for P in prompts:
        m = w.coord.match_prefix(w.keys(P))
        if not any(any(row) for row in m.host_pages):
            continue
        key = (m.num_tokens, tuple(map(tuple, m.pages)), tuple(map(tuple, m.host_pages)))
        if key not in seen:
            seen.add(key)
            yield P, m


def _others(c: HostWorld, r: int) -> list[Any]:
    return [
        (tuple(t.slots), t.tail_available, t.reclaim_floor, t.named_upto, t.load is None)
        for i, row in enumerate(c.tables)
        if i != r
        for t in row
    ]


def _claim_loads_problem(c: HostWorld, r: int, P: int) -> str:
    coord, pool, host = c.coord, c.pool, c.host
    ts = c.tables[r]
    m = coord.match_prefix(c.keys(P))
    T, pages, hps = m.num_tokens, m.pages, m.host_pages
    queue, refs, dnames = pool.free_queue(), pool.ref_counts(), dict(pool._name_of)
    hq, hrefs, hnames = host.free_queue(), host.ref_counts(), dict(host._name_of)
    real = {pg for row in pages for pg in row if pg}
    loads = [(g, j) for g, row in enumerate(hps) for j, hp in enumerate(row) if hp]
    rest = [pg for pg in queue if pg not in real]
    want = len(queue) - len(rest) + len(loads)
    consumed = coord.blocks_consumed_by_claim(m)
    if consumed != want:
        return (
            f"blocks_consumed_by_claim {consumed}; the match has {len(queue) - len(rest)} free "
            f"matched device pages and {len(loads)} host-served slots: {want}"
        )
    before, others = c.full_snapshot(), _others(c, r)
    c.ops.append(claim_op(r, P))
    if want > len(queue):
        try:
            coord.claim(ts, m)
            return f"a claim taking {want} device pages with {len(queue)} free did not raise"
        except ValueError:
            pass
        if c.full_snapshot() != before:
            parts = ("the device pool or a table", "the host pool", "a table's pending load")
            diff = [x for x, a, b in zip(parts, before, c.full_snapshot()) if a != b]
            return f"a refused claim with loads changed {', '.join(diff)}"
        _count("claims with loads refused (too few free device pages)")
        return ""
    plan, problem = _call("a claim that fits", coord.claim, ts, m)
    if problem:
        return problem
    _count("claims with loads")
    fresh = rest[: len(loads)]
    loaded = [hps[g][j] for g, j in loads]
    if pool.num_free != len(queue) - consumed or pool.free_queue() != rest[len(loads) :]:
        return (
            f"the claim took {len(queue) - pool.num_free} free device pages "
            f"(blocks_consumed_by_claim {consumed}); free queue {pool.free_queue()}, expected "
            f"{rest[len(loads) :]} (the matched free pages out, then the first {len(loads)})"
        )
    if (
        plan is None
        or list(zip(plan.groups, plan.slots)) != loads
        or plan.device_pages != fresh
        or plan.host_pages != loaded
    ):
        got = (
            None if plan is None else (plan.groups, plan.slots, plan.device_pages, plan.host_pages)
        )
        return f"load plan {got}; expected slots {loads}, device pages {fresh}, host pages {loaded}"
    exp = list(refs)
    for row in pages:
        for pg in row:
            exp[pg] += 1 if pg else 0
    for f in fresh:
        exp[f] = 1
    kept = {pg: nm for pg, nm in dnames.items() if pg not in fresh}
    if pool.ref_counts() != exp or dict(pool._name_of) != kept:
        return "the claim did not add one reference per matched slot and 1 per fresh page"
    _count("device names evicted by a claim's fresh pages", len(dnames) - len(kept))
    hexp = list(hrefs)
    for hp in loaded:
        hexp[hp] += 1
    if host.ref_counts() != hexp or host.free_queue() != [h for h in hq if h not in loaded]:
        return (
            f"host counts {host.ref_counts()}, queue {host.free_queue()} after the claim; "
            f"expected one pin per loaded host page {loaded}, each out of the host queue"
        )
    if dict(host._name_of) != hnames:
        return "the claim changed a host page's name"
    for gi, (g, t) in enumerate(zip(c.layout, ts)):
        b, R = T // g.B, g.resume()
        slots = list(pages[gi])
        for (lg, j), f in zip(loads, fresh):
            if lg == gi:
                slots[j] = f
        floor = 0 if R < 0 else max(0, b - R)
        now = (t.slots, t.tail_available, t.reclaim_floor, t.named_upto, t.pool is pool)
        if now != (slots, 0, floor, b, True) or t.load is not plan:
            return (
                f"g{gi} {g} after claiming {T} tokens: slots {t.slots}, tail {t.tail_available}, "
                f"floor {t.reclaim_floor}, cursor {t.named_upto}; expected slots {slots} (each "
                f"host-served slot holding its fresh page), tail 0, floor {floor}, cursor {b}, "
                "bound, the load pending"
            )
    if _others(c, r) != others:
        return "the claim changed another request's table"
    _count("pages loaded", len(loads))
    return ""


def _check_claim_loads(w: HostWorld, prompts: Sequence[int]) -> Values | None:
    r = w.num_requests - 1
    for P, _m in _distinct_loading_matches(w, prompts):
        c = w.copy()
        problem = _claim_loads_problem(c, r, P)
        if problem:
            return c.values(problem, prompt_tokens=P)
    return None


@theorem(
    "claim-with-loads-all-or-nothing-bounded",
    _walk_statement("claim with loads")
    + """ for every distinct match that serves a slot from the host,
    blocks_consumed_by_claim equals the number of distinct matched device pages that are
    free plus the number of host-served slots; when that exceeds the free device pages, the
    claim into fresh tables raises ValueError and changes nothing (both pools' queues,
    counts and names, every table, no pending load); otherwise it takes exactly that many
    free device pages (the matched free ones, then the queue's first pages, one per
    host-served slot, evicting their names), adds one reference per matched slot, pins each
    loaded host page (one more reference, out of the host queue, names unchanged), returns
    the load plan (group, slot, fresh device page, host page) by group then slot, and leaves
    each claimed table with the matched pages and each host-served slot holding its fresh
    page, tail room 0, reclaim floor max(0, b - R) (0 for full groups), naming cursor b, bound
    to the pool, its load pending; no other table changes.""",
    """Admission with a host hit can be priced before the claim: blocks_consumed_by_claim
    counts the fresh pages the loads take, and a claim that does not fit is refused whole,
    never half loaded; a pending load's host pages cannot be evicted.""",
    kills=("load-into-hole", "evict-pinned-host-page"),
    bounded=True,
    cost=2,
    rlimit=2_000_000,
)
def claim_with_loads(p: Prover) -> None:
    layouts, max_n = _walk_bounds(p)
    _exhaust(p, lambda: host_walk(layouts, max_n, HOST_WALK_EXHAUSTIVE, _check_claim_loads))


# --- 4. loads land in real slots; after complete_load every read slot holds its content -------


def _check_loads(w: HostWorld, prompts: Sequence[int]) -> Values | None:
    problem = w.oracle()
    if problem:
        return w.values(problem)
    r, bystander = w.num_requests - 1, 2
    N = w.computed[bystander]
    for P, m in _distinct_loading_matches(w, prompts):
        if w.coord.blocks_consumed_by_claim(m) > w.pool.num_free:
            continue  # refused whole (claim-with-loads-all-or-nothing-bounded)
        c = w.copy()
        claimed, problem = _call("a claim that fits", c.claim, r, P)
        if problem:
            return c.values(problem, prompt_tokens=P)
        plan = claimed[1]
        for g, j, dp in zip(plan.groups, plan.slots, plan.device_pages):
            slot = c.tables[r][g].slots[j]
            if slot != dp:
                where = "a hole" if slot == 0 else f"page {slot}"
                return c.values(
                    f"the load of g{g} slot {j} copies into device page {dp}, but the "
                    f"claimed table's slot is {where}",
                    prompt_tokens=P,
                )
        _count("pages loaded into real slots", plan.num_pages)
        # The names the loaded pages must get: those of the host pages they copy (pinned by
        # the pending load, so no offload below can rename them).
        expected = [c.host._name(hp) for hp in plan.host_pages]
        _count("loads of several pages", plan.num_pages > 1)
        # Before the engine completes the load, the bystander offloads its prompt (up to each
        # lcm multiple, then all of it): host pages are allocated while the load is pending.
        for n in [*range(c.lcm, N + 1, c.lcm), N]:
            names = c.host_names()
            done = c.offload(bystander, n)
            if done is None:
                _count("offloads refused while a load was pending")
            elif names - c.host_names():
                _count("offloads that evicted host names while a load was pending")
        c.complete_load(r, plan)
        for dp, hp, name in zip(plan.device_pages, plan.host_pages, expected):
            got = c.pool._name(dp)
            if got != name:
                return c.values(
                    f"after complete_load: device page {dp} is named "
                    f"{_nm(got) if got else 'nothing'}, not "
                    f"{_nm(name) if name else 'nothing'}, the name of host page {hp} it loads",
                    prompt_tokens=P,
                )
        _count("loaded pages named after complete_load", plan.num_pages)
        problem = c.oracle()
        if problem:
            return c.values(f"after complete_load: {problem}", prompt_tokens=P)
    return None


@theorem(
    "loads-land-in-real-slots-bounded",
    _walk_statement(
        "claim with loads and the data oracle",
        "with a third request holding N tokens of another prompt (other names), ",
    )
    + """ the data oracle (what each device and host page holds: a computed chunk writes
    each real slot's position content, a completed offload copies device -> host page by the
    plan, a completed load host -> device) holds in each state (every named page, device or
    host, holds its name's content; every slot a query of a request at its frontier can read
    is real and holds its position's content); and for every distinct match that serves a
    slot from the host and fits the free device pages, a claim into fresh tables puts each
    loaded device page in the slot it loads (never a hole), and after the third request
    offloads its prompt up to each lcm multiple and then all of it (allocating host pages
    while the load is pending) and the engine copies and calls complete_load, each loaded
    device page carries the name of the host page it loads, and the oracle holds again, for
    the claimed request's reads (the resume pages or whole prefix at the boundary)
    included.""",
    """A request resumed from the host reads exactly the keys its prefix computed: every
    loaded page lands in a slot the query reads, gets the name of what was copied into it,
    and no offload can recycle a host page while its load is pending.""",
    kills=(
        "load-into-hole",
        "load-into-wrong-page",
        "evict-pinned-host-page",
        "load-names-host-page",
    ),
    bounded=True,
    cost=3,
    rlimit=2_000_000,
)
def loads_land_in_real_slots(p: Prover) -> None:
    layouts, max_n = _walk_bounds(p)
    _exhaust(
        p,
        lambda: host_walk(layouts, max_n, HOST_WALK_EXHAUSTIVE, _check_loads, bystander=True),
    )


@theorem(
    "claim-places-matched-and-loaded-pages",
    """Executes the claim's slot rule (spec/slots.py claim_cell and loaded) on one symbolic
    slot s of a match of b slots (b unbounded; the matched device pages, host pages and
    the fresh device pages taken for host copies are unbounded arrays) and runs.claim_run
    for the run description the claim leaves, for a full group, a state group, a sliding
    group with A = 0 and a live-tail sliding group (B, W, m unbounded). The match is any
    match section 8 and 10 allow: below the resume pages (slots < b - R) nothing; at the
    resume pages (every slot for a full group) a device page or else a host copy. Then the
    claimed slot holds a page exactly where the claim's runs say (runs.slot_real): holes
    below the floor b - R, real pages from it on; a device-served slot holds its matched
    page; a host-served slot holds the fresh device page loaded for it, a real slot, never
    a hole. Unbounded.""",
    """A claimed request reads its resumed prefix from real pages only, and each host copy
    lands in the very slot that needs it.""",
    kills=("load-into-hole", "claim-cell-host-id"),
    cost=2,
    rlimit=2_000_000,
    executes=("claim_run", "slots.claim_cell"),
    trace=claim_slot_traces("claim-places-matched-and-loaded-pages"),
)
def claim_slots(p: Prover) -> None:
    for g in every_kind():
        gr = group(g)
        dev, host, fresh = slot_pages("device"), slot_pages("host"), slot_pages("fresh")
        b, s = ints("b s")
        resume = -1 if g.kind == "full" else geo.resume_pages(g.W, g.B, Z3)
        low = 0 if g.kind == "full" else Z3.max(0, b - resume)
        claimed = runs.claim_run(b, gr, resume, Z3)
        hyps = [*g.hyps, b >= 0, s >= 0, s < b]
        served = s >= low
        hyps += [
            z3.Implies(z3.Not(served), z3.And(dev[s] == 0, host[s] == 0)),
            z3.Implies(served, z3.Or(dev[s] != 0, host[s] != 0)),
            z3.Implies(dev[s] != 0, host[s] == 0),  # device copies preferred slot by slot
            z3.Implies(host[s] != 0, fresh[s] != 0),  # a fresh device page per host copy
        ]
        cell = slots.claim_cell(dev[s], host[s], fresh[s], Z3)
        show = {"s": s, "b": b, "device": dev[s], "host": host[s], "fresh": fresh[s], "slot": cell}
        label = f"[{g.label}]"
        p.prove(
            f"{label} the slot follows the claim's runs",
            follows_runs(claimed, cell, s, gr),
            hyps,
            show,
        )
        p.prove(
            f"{label} a device-served slot holds its matched page",
            z3.Implies(dev[s] != 0, cell == dev[s]),
            hyps,
            show,
        )
        p.prove(
            f"{label} a host-served slot holds the page loaded for it",
            z3.Implies(host[s] != 0, cell == fresh[s]),
            hyps,
            show,
        )
