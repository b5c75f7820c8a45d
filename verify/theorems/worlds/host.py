"""The host tier's bounded runs (section 10): ``HostWorld``, its points and walks.

Offload plans, matches across tiers, claims with loads and their completion are procedural
(two FIFO queues, two maps of names, a search over boundaries), so the host-tier theorems
(``host_offload.py``, ``host_loads.py``) run the spec's own classes (``livetail.spec``) over
every configuration inside stated bounds and check each property on every one.  They reuse
the prefix theorems' layouts, chunkings, prompt lengths and ``World`` (``worlds/prefix.py``:
a coordinator, tables, the ops run so far), extended here by a host pool and a data oracle:
what each device and host page holds, written from the semantics alone (computing a chunk
writes each real slot's position content, a completed offload copies device -> host page by
the plan, a completed load host -> device), as ``verify/machine/host.py`` tracks it for the
lockstep machine.

What offload must copy is computed here (``reachable_slots``) from section 10's definition
(reachable slots: a full group's named slots j < n/B, a sliding or state group's named
slots in [b-R, b) behind every lcm multiple b*B <= n, R = 1 for state groups), never by the
spec's ``offload_set``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

from livetail import spec

from ..prover.query import Values
from .prefix import (
    DOC,
    G,
    Layout,
    World,
    _clone,
    _count,
    _evict,
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
)

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
QUICK_LAYOUTS = [HOST_LAYOUTS[i] for i in (1, 2, 4, 5, 6, 7)]
"""--quick: the layouts with holes, W = 1 and state groups (every kind still present), and
one whose full group names every slot (a claim's fresh pages then evict device names: with
sparse naming, semantics 13.4, the others free unnamed pages first)."""


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
