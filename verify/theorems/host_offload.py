"""Section 7, property 11 (host tier), offload: bounded, exhaustive runs of the spec.

What offload must copy is computed from section 10's definition (``worlds/host.py``:
reachable slots), never by the spec's ``offload_set``; the runs are ``HostWorld``'s.  The
trace format has no host operations yet, so these theorems build no trace; a failure's
values list the run's operations and say what went wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

import z3  # type: ignore[import-untyped]
from livetail import spec
from livetail.spec import geometry as geo
from livetail.spec import slots

from ..z3arith import Z3
from .host_traces import offload_set_traces
from .prover.prover import Prover
from .prover.query import Values
from .prover.symbols import every_kind, ints
from .prover.theorem import theorem
from .worlds.host import HOST_LAYOUTS, QUICK_LAYOUTS, Found, HostWorld, reach, reachable_slots
from .worlds.prefix import (
    COVERAGE,
    Layout,
    _count,
    _exhaust,
    _peak_and_total,
    base_of,
    chunkings,
    claim_op,
    lcm_of,
    pages_ever,
    probes,
    prompt_lengths,
)

# --- 1. offload copies exactly the reachable named pages the host lacks ---------------------


def _offload_problem(w: HostWorld, r: int, n: int) -> str:
    """Plan request r's offload up to n tokens, check it against section 10, complete it."""
    pool, host, ts = w.pool, w.host, w.tables[r]
    held = w.host_names()
    want: list[tuple[int, int]] = []
    for gi, g in enumerate(w.layout):
        slots = reachable_slots(g, n, w.lcm)
        for j in slots:
            name = pool._name(ts[gi].slots[j]) if ts[gi].slots[j] else None
            if name is None:
                continue
            if name in held:
                _count("reachable named pages the host held (skipped)")
            else:
                want.append((gi, j))
        wanted = set(slots)
        _count(
            "named pages below n that are not reachable (left out)",
            sum(1 for j in range(n // g.B) if j not in wanted and pool._name(ts[gi].slots[j])),
        )
    before = w.full_snapshot()
    queue, refs, names = pool.free_queue(), pool.ref_counts(), w.names()
    hq, hnames = host.free_queue(), dict(host._name_of)
    k = len(want)
    call = f"plan_offload(request {r}, {n})"
    plan = w.coord.plan_offload(ts, n)
    _count("offloads planned")
    if plan is None:
        if k <= len(hq):
            return f"{call} returned None with {len(hq)} free host pages for {k} copies ({want})"
        if w.full_snapshot() != before:
            return f"{call} was refused (needs {k} host pages, {len(hq)} free) but changed things"
        _count("offloads refused (too few host pages)")
        return ""
    got = list(zip(plan.groups, plan.slots))
    if got != want:
        return (
            f"{call} copies (group, slot) {got}; the reachable named slots whose names the "
            f"host lacks are {want}"
        )
    if k > len(hq):
        return f"{call} needs {k} host pages, {len(hq)} are free, and it returned a plan"
    dps = [ts[g].slots[j] for g, j in want]
    if plan.device_pages != dps or plan.host_pages != hq[:k]:
        return (
            f"{call} copies device pages {plan.device_pages} to host pages {plan.host_pages}; "
            f"expected {dps} (the tables' slots) to {hq[:k]} (the host queue's first {k})"
        )
    exp = list(refs)
    for dp in dps:
        exp[dp] += 1
    if pool.ref_counts() != exp or pool.free_queue() != queue or w.names() != names:
        return f"{call} did not add exactly one device reference per copied page and nothing else"
    kept = {hp: nm for hp, nm in hnames.items() if hp not in plan.host_pages}
    if host.free_queue() != hq[k:] or dict(host._name_of) != kept:
        return f"{call} did not take exactly the host queue's first {k} pages (dropping names)"
    if w.snapshot()[4] != before[0][4] or plan.state != "pending":
        return f"{call} changed a table, or its plan is {plan.state}"
    _count("pages offloaded", k)
    _count("host names evicted by an offload", len(hnames) - len(kept))
    w.complete_offload(r, plan)
    if any(host._name(hp) != pool._name(dp) for dp, hp in zip(dps, plan.host_pages)):
        return f"complete_offload after {call}: a host page does not carry its device page's name"
    if pool.ref_counts() != refs or host.free_queue() != hq[k:] + plan.host_pages[::-1]:
        return (
            f"complete_offload after {call}: device counts {pool.ref_counts()} (before the "
            f"plan {refs}), host queue {host.free_queue()} (expected "
            f"{hq[k:] + plan.host_pages[::-1]}: the named pages at the back, last first)"
        )
    return ""


OFFLOAD_MODES = ("each", "sweep")
OFFLOAD_MAX_N = 2  # prompts of N <= 2*lcm+1 tokens
OFFLOAD_EXHAUSTIVE = 4  # ... every chunking for N <= 4


def _offload_search(
    layouts: Sequence[Layout], max_n: int, exhaustive_upto: int
) -> tuple[int, Values | None]:
    cases = 0
    for layout in layouts:
        L = lcm_of(layout)
        probe = probes(layout, max_n * L + 1)
        for N in range(1, max_n * L + 2):
            k = reach(layout, N)
            for ends in chunkings(N, L, exhaustive_upto):
                peak, total = _peak_and_total(probe, ends)
                for num_blocks in sorted({1 + peak, 2 + total}):
                    for host_blocks in sorted({2, 1 + (k + 1) // 2, 1 + k}):
                        for mode in OFFLOAD_MODES:
                            w = HostWorld(layout, num_blocks, host_blocks, 1)
                            w.check_offload = _offload_problem
                            before = int(COVERAGE.get("offloads planned", 0))
                            try:
                                start = 0
                                for e in ends:
                                    if not w.chunk(0, start, e, offload=mode == "each"):
                                        break
                                    start = e
                                else:
                                    # each: once more (only names evicted from the host are
                                    # copied again); sweep: up to every n <= N in turn.
                                    for n in [N] if mode == "each" else range(N + 1):
                                        w.offload(0, n)
                            except Found as f:
                                return cases, f.values
                            cases += int(COVERAGE["offloads planned"]) - before
    return cases, None


@theorem(
    "offload-is-reachable-set-bounded",
    f"""Bounded, exhaustive over the spec's classes (semantics section 10, offload): for
    {len(HOST_LAYOUTS)} coordinators with a host pool (a full group alone; live-tail sliding
    groups with holes, R = 1 and R = 2, page sizes 1 and 2; live tail with W = 1; plain
    sliding beside a state group; a live group beside a state and a full group; a full group
    beside a state group; lcm up to 4; 6 of them with livetail verify --quick), a request
    computing every prompt of N <= 2*lcm+1 tokens chunk by chunk (every chunking for N <=
    4, else the chunkings of match-is-read-only-bounded), each
    chunk named, in a device pool that is tight or roomy and a host pool of 1 usable page, about
    half or all of the prompt's reachable pages, offloading either after naming each chunk
    (before its reclaim) and once more at N, or after its last chunk up to every n = 0..N in
    turn: plan_offload(tables, n) copies exactly the reachable named pages whose names the
    host lacks, recomputed here from the definition (a full group's named slots j < n/B; a
    sliding or state group's named slots in [b-R, b) for every lcm multiple b*B <= n, R = 1
    for a state group), by group then slot, from the tables' pages to the host queue's first
    pages (evicting their names), adding one device reference per copied page and changing
    nothing else; when the host has too few free pages it returns None and changes nothing
    (both pools, names, tables); complete_offload names each host page by its device page's
    name, returns the host pages to the back of the host queue (last first) and restores the
    device reference counts.""",
    """An engine's offload copies every page a later match could load back and nothing else:
    with live tail only the resume pages of a sliding group go to the host, and a page the
    host already holds is never copied twice; a host too small for the plan refuses it whole.""",
    kills=("offload-skips-resume-page",),
    bounded=True,
    cost=2,
    rlimit=2_000_000,
)
def offload_is_reachable_set(p: Prover) -> None:
    layouts = QUICK_LAYOUTS if p.quick else HOST_LAYOUTS
    _exhaust(p, lambda: _offload_search(layouts, OFFLOAD_MAX_N, OFFLOAD_EXHAUSTIVE))


# --- 5. offload preserves hits ---------------------------------------------------------------


def _keeps_hits_search(
    layouts: Sequence[Layout], max_n: int, exhaustive_upto: int
) -> tuple[int, Values | None]:
    cases = 0
    for layout in layouts:
        L, base = lcm_of(layout), base_of(layout)
        for N in range(1, max_n * L + 2):
            prompts = prompt_lengths(N + L, L, base)
            for ends in chunkings(N, L, exhaustive_upto):
                # No device eviction while computing; the host holds every reachable name.
                w = HostWorld(layout, 1 + pages_ever(layout, N), 1 + reach(layout, N), 1)
                start = 0
                for e in ends:
                    assert w.chunk(0, start, e, offload=True)
                    start = e
                before = {P: w.coord.match_prefix(w.keys(P)).num_tokens for P in prompts}
                w.do({"op": "free", "request": 0})
                # Another tenant of the pool (one full group, page size 1) takes every free
                # page: each allocation evicts the oldest name, so none is left on the device.
                k = w.pool.num_free
                tenant = spec.Coordinator([spec.GroupSpec("full", 1)], w.pool)
                tenant.acquire(tenant.new_tables(), k)
                w.ops.append({"op": "evict_all", "pages": k})
                _count("runs")
                if w.pool.num_cached:
                    return cases, w.values(f"{w.pool.num_cached} device names survived")
                for P in prompts:
                    cases += 1
                    m = w.coord.match_prefix(w.keys(P))
                    from_host = sum(1 for row in m.host_pages for hp in row if hp)
                    _count("hits of a nonzero boundary", before[P] > 0)
                    _count("slots served from the host", from_host)
                    if m.num_tokens != before[P] or any(pg for row in m.pages for pg in row):
                        problem = (
                            f"request 0 computed {N} tokens in chunks ending at {list(ends)}, "
                            f"offloading each chunk; a match of {P} tokens found {before[P]} "
                            f"before and {m.num_tokens} after request 0 freed and every device "
                            f"name was evicted ({from_host} slots from the host)"
                        )
                        return cases, w.values(
                            problem,
                            [claim_op(0, P)],
                            prompt_tokens=P,
                            before=before[P],
                            after=m.num_tokens,
                        )
    return cases, None


KEEPS_HITS = 3  # prompts of N <= 3*lcm+1 tokens
KEEPS_HITS_EXHAUSTIVE = 6  # ... every chunking for N <= 6


@theorem(
    "offload-preserves-hits-bounded",
    f"""Bounded, exhaustive over the spec's classes (semantics section 10, offload then
    match across tiers): for the {len(HOST_LAYOUTS)} coordinators of
    offload-is-reachable-set-bounded (6 with livetail verify --quick), a request computing
    every prompt of N <= 3*lcm+1 tokens (N <= 2*lcm+1 with --quick) chunk by chunk (every
    chunking for N <= 6, else the chunkings of match-is-read-only-bounded), naming each
    chunk, then offloading it (plan_offload up to the chunk's end, complete_offload) before
    its reclaim, in a device pool where nothing is evicted while it computes and a host pool
    that holds every reachable page: after the request frees its tables and another tenant
    of the pool takes every free device page (so no name is left on the device), a match
    of any prompt length that is 0, an lcm multiple up to N+lcm or one base page less finds
    the same boundary it found while the request held its pages, every slot it needs served
    from the host.""",
    """An engine that offloads each chunk's reachable pages before reclaiming them loses no
    prefix hit when the device evicts everything: with live tail only the resume pages go
    to the host, and they are enough.""",
    kills=("offload-skips-resume-page",),
    bounded=True,
    cost=2,
    rlimit=2_000_000,
)
def offload_preserves_hits(p: Prover) -> None:
    layouts, max_n = (QUICK_LAYOUTS, 2) if p.quick else (HOST_LAYOUTS, KEEPS_HITS)
    _exhaust(p, lambda: _keeps_hits_search(layouts, max_n, KEEPS_HITS_EXHAUSTIVE))


@theorem(
    "offload-set-is-reachable-set",
    """Executes the offload's slot rule (spec/slots.py reachable, which the model's
    offload_set asks of every slot below n / B) on a symbolic slot j, token count n, page
    size B and the coordinator's alignment of q pages (the lcm by default; all unbounded),
    for a full group, a state group and sliding groups (W unbounded): the rule picks exactly
    section 10's reachable slots. For a full group, the slots j < n / B; for a sliding or
    state group, the slots in [b - R, b) of some aligned boundary b (a multiple of q) with
    b*B <= n: every slot the rule picks lies
    behind such a boundary (the first boundary above it), and every slot behind one is
    picked. No slot at or past n / B is picked, so asking the slots below n / B is enough.
    Unbounded.""",
    """An offload copies to host memory exactly the pages a later match can use, and every
    one of them: nothing a hit needs is left on the device alone, nothing else takes host
    memory.""",
    kills=("offload-skips-resume-page",),
    cost=2,
    rlimit=2_200_000,
    executes=("slots.reachable",),
    trace=offload_set_traces("offload-set-is-reachable-set"),
)
def offload_reachable(p: Prover) -> None:
    times = p.lemma(
        "lemma: x <= y and c >= 0 give x*c <= y*c",
        lambda x, y, c: ([x <= y, c >= 0], x * c <= y * c),
        3,
    )
    above = p.lemma(
        "lemma: j < k*q with q >= 1 gives j div q + 1 <= k",
        lambda j, k, q: ([j >= 0, q >= 1, j < k * q], j / q + 1 <= k),
        3,
    )
    # The rule does not read the alignment: live tail or not, a sliding group is the same.
    for g in every_kind()[:3]:
        j, n, q, k = ints("j n q k")
        full = g.kind == "full"
        R = -1 if full else geo.resume_pages(g.W, g.B, Z3)
        hyps = [*g.hyps, j >= 0, n >= 0, q >= 1]
        picked = slots.reachable(j, n, g.B, R, q, Z3)
        show = {"j": j, "n": n, "q": q, "picked": picked}
        label = f"[{g.label}]"
        p.prove(
            f"{label} a picked slot lies below n / B", z3.Implies(picked, j < n / g.B), hyps, show
        )
        if full:
            p.prove(
                f"{label} every slot below n / B is picked",
                z3.Implies(j < n / g.B, picked),
                hyps,
                show,
            )
            continue
        first = (j / q + 1) * q
        p.prove(
            f"{label} a picked slot lies behind a boundary b = the first multiple of q above it",
            z3.Implies(picked, z3.And(first * g.B <= n, first - R <= j, j < first)),
            hyps,
            show,
        )
        b = k * q
        # The first boundary above j is at or below b, so it is within n and j behind it.
        facts = [above(j, k, q), times(j / q + 1, k, q), times(first, b, g.B)]
        p.prove(
            f"{label} every slot behind a boundary b <= n / B is picked",
            z3.Implies(z3.And(k >= 1, b * g.B <= n, b - R <= j, j < b), picked),
            [*hyps, *facts],
            show,
        )
