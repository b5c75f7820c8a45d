"""Section 7, property 11 and section 10 (host tier): bounded, exhaustive runs of the spec.

Offload plans, matches across tiers, claims with loads and their completion are procedural
(two FIFO queues, two maps of names, a search over boundaries), so, like ``prefix.py``, these
theorems run the spec's own classes (``livetail.spec``) over every configuration inside
stated bounds and check each property on every one.  They reuse the prefix theorems'
layouts, chunkings, prompt lengths and ``World`` (``_prefix_world.py``: a coordinator,
tables, the ops run so far), extended here by a host pool and a data oracle: what each
device and host page holds, written from the semantics alone (computing a chunk writes each
real slot's position content, a completed offload copies device -> host page by the plan, a
completed load host -> device), as ``verify/machine_host.py`` tracks it for the lockstep machine.

What offload must copy is computed here from section 10's definition (reachable slots:
a full group's named slots j < n/B, a sliding or state group's named slots in [b-R, b)
behind every lcm multiple b*B <= n, R = 1 for state groups), never by the spec's
``offload_set``.

The trace format has no host operations yet, so these theorems build no trace; a failure's
values list the run's operations (``offload``, ``complete_offload``, ``claim``,
``complete_load`` beside the trace ops) and say what went wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

from livetail import spec

from ._prefix_world import (
    COVERAGE,
    DOC,
    G,
    Layout,
    World,
    _clone,
    _count,
    _evict,
    _exhaust,
    _peak_and_total,
    base_of,
    chunkings,
    claim_op,
    doc_tokens,
    full,
    lcm_of,
    pages_ever,
    probes,
    prompt_lengths,
    sliding,
    state,
    supports,
)
from ._prover import Prover, Values
from ._registry import theorem

Content = tuple[Any, ...]
Name = tuple[int, bytes]

OTHER_SALT = b"other"
"""The bystander request's prompt: document 0's tokens under another salt (other names)."""

# The coordinators: a full group alone, live tail with holes (R = 1 and R = 2, page sizes 1
# and 2, lcm 4), live tail with W = 1 (R = 0), plain sliding beside a state group, a live
# group beside a state and a full group, and a full group beside a state group.
HOST_LAYOUTS: list[Layout] = [
    (full(2),),
    (sliding(1, 2, True), full(4)),
    (sliding(1, 3, True), full(4)),
    (sliding(2, 3, True), full(4)),
    (sliding(1, 1, True), full(3)),
    (sliding(2, 2), state(2)),
    (sliding(1, 2, True), state(1), full(3)),
    (full(1), state(2)),
]
QUICK_LAYOUTS = [HOST_LAYOUTS[i] for i in (1, 2, 4, 5, 6)]
"""--quick: the layouts with holes, W = 1 and state groups (every kind still present)."""


def reachable_slots(g: G, n: int, L: int) -> list[int]:
    """Section 10: the slots of group g a match can ever use up to n tokens (named or not)."""
    if g.kind == "full":
        return list(range(n // g.B))
    R = g.resume()  # state groups: 1
    return sorted({j for T in range(L, n + 1, L) for j in range(max(0, T // g.B - R), T // g.B)})


def reach(layout: Layout, n: int) -> int:
    """How many reachable slots a request of n tokens has over all groups."""
    L = lcm_of(layout)
    return sum(len(reachable_slots(g, n, L)) for g in layout)


def read_slots(g: G, c: int) -> range:
    """The slots a query at position c reads from pages (section 4: keys [c-W+1, c-1];
    a state group's W is 2, a full group reads every key)."""
    W = None if g.kind == "full" else (2 if g.W is None else g.W)
    lo = 0 if W is None else max(0, c - W + 1)
    return range(lo // g.B, (c - 1) // g.B + 1) if c > lo else range(0)


class Found(Exception):
    """A failure found inside a run (by the offload check of HostWorld.offload): its values."""

    def __init__(self, values: Values) -> None:
        super().__init__(values.get("problem", ""))
        self.values = values


OffloadCheck = Callable[["HostWorld", int, int], str]


class HostWorld(World):
    """A World whose coordinator has a host pool, with the data oracle's content model."""

    def __init__(
        self, layout: Layout, num_blocks: int, host_blocks: int, num_requests: int = 4
    ) -> None:
        super().__init__(layout, num_blocks, num_requests)
        self.host_blocks = host_blocks
        self.host = spec.HostPool(host_blocks)
        self.coord = spec.Coordinator([g.group_spec() for g in layout], self.pool, self.host)
        self.content: dict[int, Content] = {}  # device page -> what it holds
        self.hcontent: dict[int, Content] = {}  # host page -> what it holds
        self.computed = [0] * num_requests  # tokens each request's tables hold
        self.salt = [b""] * num_requests  # the prompt each request computes
        self.check_offload: OffloadCheck | None = None

    def copy(self, requests: Sequence[int] | None = None) -> HostWorld:
        """An independent copy (no load may be pending: its plan would be shared)."""
        assert all(t.load is None for ts in self.tables for t in ts)
        new = cast(HostWorld, super().copy(requests))
        new.host = _clone(self.host)
        new.coord._host = new.host
        new.coord._pinned = list(self.coord._pinned)
        new.content = dict(self.content)
        new.hcontent = dict(self.hcontent)
        new.computed = list(self.computed)
        new.salt = list(self.salt)
        return new

    def prompt_keys(self, r: int, tokens: int) -> list[bytes]:
        if not self.salt[r]:
            return self.keys(tokens)
        b = self.base
        return list(spec.page_keys(doc_tokens(DOC, tokens // b * b), b, self.salt[r]))

    def position(self, r: int, g: int, j: int, c: int) -> Content:
        """What slot j of request r's group g holds once c tokens are computed."""
        B = self.layout[g].B
        if (j + 1) * B <= c:
            return (g, self.prompt_keys(r, c)[(j + 1) * (B // self.base) - 1])
        return ("partial", self.salt[r], g, j, c)

    def do(self, op: dict[str, Any]) -> Any:
        kind, r = op["op"], op["request"]
        if kind == "acquire":
            c0 = self.computed[r]
            ok = super().do(op)
            if ok:
                c = c0 + op["tokens"]
                # The forward computes the chunk: each real slot it covers holds its content.
                for g, (grp, t) in enumerate(zip(self.layout, self.tables[r])):
                    for j in range(c0 // grp.B, (c - 1) // grp.B + 1):
                        if t.slots[j]:
                            self.content[t.slots[j]] = self.position(r, g, j, c)
                self.computed[r] = c
            return ok
        if kind == "cache" and self.salt[r]:
            self.ops.append(op)
            return self.coord.cache_full_blocks(
                self.tables[r], self.prompt_keys(r, op["tokens"]), op["tokens"]
            )
        out = super().do(op)
        if kind == "free":
            self.computed[r] = 0
        return out

    def chunk(self, r: int, start: int, end: int, offload: bool = False) -> bool:
        """acquire, name, (offload: plan and complete), reclaim: an engine's step."""
        if not self.do({"op": "acquire", "request": r, "tokens": end - start}):
            return False
        self.do({"op": "cache", "request": r, "doc": DOC, "tokens": end})
        if offload:
            self.offload(r, end)
        self.do({"op": "reclaim", "request": r, "frontier": end})
        return True

    # -- host operations ----------------------------------------------------------------

    def offload(self, r: int, n: int) -> Any:
        """plan_offload(request r, n), the engine's copies, complete_offload; the plan."""
        self.ops.append({"op": "offload", "request": r, "tokens": n})
        if self.check_offload is not None:
            problem = self.check_offload(self, r, n)
            if problem:
                raise Found(self.values(problem, offload_tokens=n))
            return None
        plan = self.coord.plan_offload(self.tables[r], n)
        self.complete_offload(r, plan)
        return plan

    def complete_offload(self, r: int, plan: Any) -> None:
        if plan is None:
            return
        for dp, hp in zip(plan.device_pages, plan.host_pages):
            self.hcontent[hp] = self.content.get(dp, ("garbage",))
        self.ops.append({"op": "complete_offload", "request": r})
        self.coord.complete_offload(plan)

    def claim(self, r: int, P: int) -> tuple[Any, Any]:
        """Match P tokens and claim them into request r's fresh tables: (match, load plan)."""
        self.ops.append(claim_op(r, P))
        m = self.coord.match_prefix(self.keys(P))
        plan = self.coord.claim(self.tables[r], m)
        if plan is not None:
            for dp in plan.device_pages:
                self.content[dp] = ("unloaded", dp)  # fresh: nothing until the copy
        self.computed[r] = m.num_tokens
        return m, plan

    def complete_load(self, r: int, plan: Any) -> None:
        for hp, dp in zip(plan.host_pages, plan.device_pages):
            self.content[dp] = self.hcontent.get(hp, ("garbage",))
        self.ops.append({"op": "complete_load", "request": r})
        self.coord.complete_load(plan)

    def other_prompt(self, r: int, n: int) -> bool:
        """Request r computes n tokens of the other prompt in one chunk and names them."""
        self.salt[r] = OTHER_SALT
        if not self.do({"op": "acquire", "request": r, "tokens": n}):
            return False
        self.do({"op": "cache", "request": r, "salt": OTHER_SALT.decode(), "tokens": n})
        return True

    # -- observations -------------------------------------------------------------------

    def host_snapshot(self) -> tuple[Any, ...]:
        h = self.host
        return (
            tuple(h.free_queue()),
            tuple(h.ref_counts()),
            tuple(h._name_of.items()),
            tuple((name, tuple(pages)) for name, pages in h._pages_named.items()),
        )

    def full_snapshot(self) -> tuple[Any, ...]:
        loads = tuple(t.load is None for ts in self.tables for t in ts)
        return (self.snapshot(), self.host_snapshot(), loads)

    def host_names(self) -> set[Name]:
        return set(self.host._name_of.values())

    def values(self, problem: str, then: Sequence[dict[str, Any]] = (), **extra: Any) -> Values:
        return super().values(problem, then, host_blocks=self.host_blocks, **extra)

    def oracle(self) -> str:
        """The data oracle: every named page, device or host, holds its name's content, and
        every slot a query of a request can read holds its position's content."""
        for p, name in self.pool._name_of.items():
            if self.content.get(p) != name:
                return f"device page {p} named {_nm(name)} holds {_ct(self.content.get(p))}"
        for hp, name in self.host._name_of.items():
            if self.hcontent.get(hp) != name:
                return f"host page {hp} named {_nm(name)} holds {_ct(self.hcontent.get(hp))}"
        for r, ts in enumerate(self.tables):
            c = self.computed[r]
            if c == 0 or any(t.load is not None for t in ts):
                continue  # nothing computed, or the engine must not read before the load
            for g, (grp, t) in enumerate(zip(self.layout, ts)):
                for j in read_slots(grp, c):
                    if t.slots[j] == 0:
                        return f"request {r} g{g} slot {j}: a query at {c} reads a hole"
                    got, want = self.content.get(t.slots[j]), self.position(r, g, j, c)
                    if got != want:
                        return (
                            f"request {r} g{g} slot {j} (page {t.slots[j]}) holds {_ct(got)}, "
                            f"a query at {c} needs {_ct(want)}"
                        )
        return ""


def _nm(name: Name) -> str:
    return f"g{name[0]}/{name[1][:4].hex()}"


def _ct(c: Content | None) -> str:
    if c is None:
        return "nothing"
    if len(c) == 2 and isinstance(c[1], bytes):
        return f"the content of {_nm(cast(Name, c))}"
    return repr(c)


# --- the runs ----------------------------------------------------------------------------

MODES = ("each", "end")
"""Request 0 offloads after naming each chunk, before its reclaim (as an engine does), or
once after its last chunk (only what its tables still hold)."""


def host_points(
    layout: Layout,
    ends: Sequence[int],
    num_blocks: int,
    host_blocks: int,
    mode: str,
    bystander: int = 0,
) -> Iterator[HostWorld]:
    """Every state the match, claim and load theorems check (callers must not change them).

    Request 2 (with ``bystander`` tokens) first computes the other prompt in one chunk and
    holds it. Request 0 computes ``ends``, offloading in ``mode``; then, each from that
    state: (E) request 1 allocates a token at a time (evicting the oldest free device
    pages) while request 0 holds its pages, then frees; (F) request 0 frees, then request 1
    does the same. Request 3 stays fresh for the checks' claims.
    """
    w = HostWorld(layout, num_blocks, host_blocks)
    if bystander and not w.other_prompt(2, bystander):
        return
    start = 0
    for e in ends:
        if not w.chunk(0, start, e, offload=mode == "each"):
            return
        start = e
        yield w
    if mode == "end":
        w.offload(0, ends[-1])
        yield w
    for first_holds in (True, False):
        x = w.copy() if first_holds else w
        if not first_holds:
            x.do({"op": "free", "request": 0})
            yield x
        yield from cast(Iterator[HostWorld], _evict(x, 1))
        x.do({"op": "free", "request": 1})
        yield x


def host_sizes(layout: Layout, N: int) -> list[int]:
    """Roomy (every reachable name of N tokens fits) and tight (about half of them)."""
    k = reach(layout, N)
    return sorted({1 + k, 1 + (k + 1) // 2})


Visit = Callable[[HostWorld, Sequence[int]], "Values | None"]


def host_walk(
    layouts: Sequence[Layout],
    max_n: int,
    exhaustive_upto: int,
    visit: Visit,
    bystander: bool = False,
) -> tuple[int, Values | None]:
    """`visit(world, prompt lengths)` in every state of every configuration."""
    cases = 0
    for layout in layouts:
        L, base = lcm_of(layout), base_of(layout)
        probe = probes(layout, max_n * L + 1)
        for N in range(1, max_n * L + 2):
            prompts = prompt_lengths(N + L, L, base)
            extra = pages_ever(layout, N) if bystander else 0
            for ends in chunkings(N, L, exhaustive_upto):
                # Tight: request 0's chunks evict pages it reclaimed; roomy: nothing evicted
                # before request 1 allocates.
                peak, total = _peak_and_total(probe, ends)
                for num_blocks in sorted({1 + extra + peak, 2 + extra + total}):
                    for host_blocks in host_sizes(layout, N):
                        for mode in MODES:
                            pts = host_points(
                                layout,
                                ends,
                                num_blocks,
                                host_blocks,
                                mode,
                                bystander=N if bystander else 0,
                            )
                            for w in pts:
                                cases += len(prompts)
                                _count("states")
                                failure = visit(w, prompts)
                                if failure is not None:
                                    return cases, failure
    return cases, None


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
    beside a state group; lcm up to 4; 5 of them with livetail verify --quick), a request
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
    offload-is-reachable-set-bounded (5 with livetail verify --quick), a first request
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
    kills=("load-into-hole", "load-into-wrong-page", "evict-pinned-host-page"),
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
    offload-is-reachable-set-bounded (5 with livetail verify --quick), a request computing
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
