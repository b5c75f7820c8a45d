"""Host tier (semantics section 10) in lockstep, with the data oracle (section 7 item 11).

A Hypothesis machine over requests that compute chunks (acquire, name, reclaim, as an
engine does), offload (plan, then complete or abort), are freed, come back through a match
across tiers and a claim with loads, and complete their loads; plus usage errors. Every
implementation (spec first, then native) runs every step; after each step their full state
must agree: device and host queues, reference counts, name counts, tables, the plans'
arrays, events of both tiers and both pools' counters.

The data oracle tracks what each device and host page holds, written here from the
semantics alone: computing a chunk writes each real slot's position content into its page,
a completed offload copies device -> host page by the plan, a completed load host ->
device. After every step it checks that every named page holds its name's content (spec
side, where names are visible), that every slot a query of a request can read holds the
content of its position (a hole there is a failure), and that an offload plan holds
exactly the reachable named pages whose names the host lacked.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from .machine import doc_keys

Content = tuple[Any, ...]

# (kind, block size, window, live tail) per group.
LAYOUTS: list[list[tuple[str, int, int | None, bool]]] = [
    [("full", 4, None, False), ("sliding", 2, 3, True)],
    [("full", 4, None, False), ("sliding", 2, 5, True), ("state", 4, None, False)],
    [("sliding", 2, 3, False), ("full", 2, None, False)],
    [("sliding", 1, 3, True), ("full", 2, None, False)],
]
NUM_REQUESTS = 3
DOCS = 3


def _ints(a: Any) -> list[int]:
    return [int(x) for x in a]


def _attempt(fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
    try:
        return fn(*args), None
    except Exception as e:  # an observation to compare across sides
        return None, type(e).__name__


@dataclass
class HostSide:
    """One implementation's pools, coordinators, tables and pending plans."""

    mod: Any
    pool: Any
    host: Any
    coord: Any
    bare: Any  # a coordinator without host pool
    other: Any  # another coordinator with a host pool
    tables: list[list[Any]]
    offloads: list[Any]
    loads: list[Any]  # per request: its pending LoadPlan or None
    content: dict[int, Content]
    hcontent: dict[int, Content]

    @property
    def is_spec(self) -> bool:
        return bool(self.mod.__name__.endswith(".spec"))

    def state(self) -> tuple[Any, ...]:
        p, h = self.pool, self.host
        return (
            _ints(p.free_queue()),
            _ints(p.ref_counts()),
            int(p.num_cached),
            _ints(h.free_queue()),
            _ints(h.ref_counts()),
            int(h.num_cached),
            [
                [(_ints(t.page_ids()), int(t.tail_available), int(t.reclaim_floor)) for t in ts]
                for ts in self.tables
            ],
            [str(o.state) for o in self.offloads],
        )


def plan_arrays(plan: Any) -> Any:
    if plan is None:
        return None
    return (
        _ints(plan.groups),
        _ints(plan.slots),
        _ints(plan.device_pages),
        _ints(plan.host_pages),
        str(plan.state),
    )


class HostMachine(RuleBasedStateMachine):
    """Spec and native (or the spec alone) driven through the host tier in lockstep."""

    modules: tuple[str, ...] = ("livetail.spec", "livetail")

    def __init__(self) -> None:
        super().__init__()
        self.sides: list[HostSide] = []
        self.layout: list[tuple[str, int, int | None, bool]] = []
        self.doc = list(range(NUM_REQUESTS))  # distinct prompts beyond a shared prefix
        self.computed = [0] * NUM_REQUESTS
        self.base = 1
        self.lcm = 1

    # -- set-up ---------------------------------------------------------------------------

    @initialize(
        layout=st.integers(0, len(LAYOUTS) - 1),
        device=st.sampled_from([16, 24, 40]),
        host=st.sampled_from([4, 5, 8, 24]),
    )
    def setup(self, layout: int, device: int, host: int) -> None:
        self.layout = LAYOUTS[layout]
        sizes = [g[1] for g in self.layout]
        self.base = math.gcd(*sizes)
        self.lcm = math.lcm(*sizes)
        for name in self.modules:
            m = importlib.import_module(name)
            specs = [m.GroupSpec(k, b, w, live) for k, b, w, live in self.layout]
            pool = m.BlockPool(device, events=True)
            hp = m.HostPool(host, events=True)
            self.sides.append(
                HostSide(
                    m,
                    pool,
                    hp,
                    m.Coordinator(specs, pool, hp),
                    m.Coordinator(specs, m.BlockPool(device)),
                    m.Coordinator(specs, m.BlockPool(device), m.HostPool(host)),
                    [[m.BlockTable() for _ in specs] for _ in range(NUM_REQUESTS)],
                    [],
                    [None] * NUM_REQUESTS,
                    {},
                    {},
                )
            )

    # -- the data oracle's content model ------------------------------------------------

    def position_content(self, r: int, g: int, j: int, c: int) -> Content:
        """What slot j of request r's group g holds once c tokens are computed."""
        B = self.layout[g][1]
        if (j + 1) * B <= c:
            keys = doc_keys(self.doc[r], c, self.base)
            return (g, keys[(j + 1) * (B // self.base) - 1])
        return ("partial", self.doc[r], g, j, c)

    def read_slots(self, g: int, c: int) -> range:
        """The computed slots a query at position c reads (section 4: keys [c-W+1, c])."""
        kind, B, W, _ = self.layout[g]
        window = 2 if kind == "state" else W
        lo = 0 if window is None else max(0, c - window + 1)
        return range(lo // B, (c - 1) // B + 1) if c > lo else range(0)

    def reachable(self, r: int, n: int, side: HostSide) -> list[tuple[int, int]]:
        """(group, slot) of the reachable named slots up to n (section 10), group then slot."""
        out = []
        for g, (kind, B, W, _) in enumerate(self.layout):
            if kind == "full":
                slots = list(range(n // B))
            else:
                R = 1 if kind == "state" or W is None else -(-(W - 1) // B)
                wanted = {
                    j
                    for T in range(self.lcm, n + 1, self.lcm)
                    for j in range(max(0, T // B - R), T // B)
                }
                slots = sorted(wanted)
            t = side.tables[r][g]
            for j in slots:
                p = int(t.page_ids()[j])
                if p and side.pool._name(p) is not None:
                    out.append((g, j))
        return out

    # -- lockstep ---------------------------------------------------------------------------

    def each(self, fn: Callable[[HostSide], Any]) -> list[Any]:
        outs = [fn(s) for s in self.sides]
        for o in outs[1:]:
            assert o == outs[0], f"sides disagree: {outs}"
        return outs

    # -- rules ------------------------------------------------------------------------------

    @rule(r=st.integers(0, NUM_REQUESTS - 1), n=st.integers(1, 12))
    def compute(self, r: int, n: int) -> None:
        """Acquire a chunk, compute it (write its pages), name, reclaim: an engine step."""
        if self.sides[0].loads[r] is not None:
            return  # the engine completes a load before computing past it
        c0 = self.computed[r]

        def step(s: HostSide) -> Any:
            ts = s.tables[r]
            ok, err = _attempt(s.coord.acquire, ts, n)
            assert err is None, f"a valid acquire raised {err}"
            if not ok:
                return (ok, err)
            for g, t in enumerate(ts):
                B = self.layout[g][1]
                ids = _ints(t.page_ids())
                for j in range(c0 // B, (c0 + n - 1) // B + 1):
                    if ids[j]:
                        s.content[ids[j]] = self.position_content(r, g, j, c0 + n)
            keys = doc_keys(self.doc[r], c0 + n, self.base)
            named = s.coord.cache_full_blocks(ts, keys, c0 + n)
            back = s.coord.reclaim_expired(ts, c0 + n)
            return (ok, int(named), int(back))

        outs = self.each(step)
        if outs[0][0]:
            self.computed[r] += n

    @rule(r=st.integers(0, NUM_REQUESTS - 1), upto=st.integers(0, 64))
    def offload(self, r: int, upto: int) -> None:
        n = min(upto, self.computed[r])

        def step(s: HostSide) -> Any:
            want = None
            if s.is_spec:
                host_names = set(s.host._pages_named)
                want = [
                    (g, j)
                    for g, j in self.reachable(r, n, s)
                    if s.pool._name(int(s.tables[r][g].page_ids()[j])) not in host_names
                ]
            plan, err = _attempt(s.coord.plan_offload, s.tables[r], n)
            assert err is None, f"a valid plan_offload raised {err}"
            if plan is not None:
                s.offloads.append(plan)
                got = list(zip(_ints(plan.groups), _ints(plan.slots)))
                # Oracle: exactly the reachable named pages whose names the host lacked.
                assert want is None or got == want, f"offload plan {got}, reachable {want}"
            return (plan_arrays(plan), err)

        self.each(step)

    @precondition(lambda self: self.sides and self.sides[0].offloads)
    @rule(i=st.integers(0, 7), complete=st.sampled_from([True, True, True, False]))
    def end_offload(self, i: int, complete: bool) -> None:
        """Complete or abort a plan: mostly a pending one, sometimes one that ended (error)."""
        pending = [k for k, p in enumerate(self.sides[0].offloads) if str(p.state) == "pending"]
        k = pending[i % len(pending)] if pending and i < 6 else i % len(self.sides[0].offloads)

        def step(s: HostSide) -> Any:
            plan = s.offloads[k]
            pending = str(plan.state) == "pending"
            fn = s.coord.complete_offload if complete else s.coord.abort_offload
            before = s.state()
            _, err = _attempt(fn, plan)
            if err is None and complete:  # the engine copied each device page to its host page
                for dp, hp in zip(_ints(plan.device_pages), _ints(plan.host_pages)):
                    s.hcontent[hp] = s.content.get(dp, ("garbage",))
            if not pending:
                assert err == "ValueError" and s.state() == before, "a plan ended twice"
            else:
                assert err is None, f"ending a pending plan raised {err}"
            return err

        self.each(step)

    @rule(r=st.integers(0, NUM_REQUESTS - 1), d=st.integers(0, DOCS - 1), pages=st.integers(0, 16))
    def admit(self, r: int, d: int, pages: int) -> None:
        """A freed request comes back: match across tiers, then claim with loads."""
        if any(t.is_bound or len(t) for t in self.sides[0].tables[r]):
            return  # claims need fresh tables
        keys = doc_keys(d, pages * self.base, self.base)

        def step(s: HostSide) -> Any:
            m = s.coord.match_prefix(keys)
            hit = (int(m.num_tokens), [_ints(p) for p in m.pages], [_ints(p) for p in m.host_pages])
            consumed, _ = _attempt(s.coord.blocks_consumed_by_claim, m)
            before = s.state()
            plan, err = _attempt(s.coord.claim, s.tables[r], m)
            if err is not None:
                assert err == "ValueError" and s.state() == before, "a failed claim changed state"
                assert consumed > s.pool.num_free, "a claim failed with enough free pages"
            elif plan is not None:
                s.loads[r] = plan
                dps = _ints(plan.device_pages)
                for dp in dps:
                    s.content[dp] = ("unloaded", dp)  # fresh: holds nothing until the copy
            return (hit, consumed, err, plan_arrays(plan))

        outs = self.each(step)
        if outs[0][2] is None and outs[0][0][0] > 0:
            self.doc[r] = d
            self.computed[r] = outs[0][0][0]

    @rule(r=st.integers(0, NUM_REQUESTS - 1))
    def complete_load(self, r: int) -> None:
        def step(s: HostSide) -> Any:
            plan = s.loads[r]
            if plan is None:
                return None
            _, err = _attempt(s.coord.complete_load, plan)
            assert err is None, f"complete_load of a pending load raised {err}"
            if err is None:  # the engine copied each host page into its device page
                for hp, dp in zip(_ints(plan.host_pages), _ints(plan.device_pages)):
                    s.content[dp] = s.hcontent.get(hp, ("garbage",))
                s.loads[r] = None
            return err

        self.each(step)

    @rule(n=st.integers(1, 64))
    def evict(self, n: int) -> None:  # up to 4 * n tokens
        """Another request takes n tokens and leaves: its allocation evicts old device names."""

        def step(s: HostSide) -> Any:
            ts = s.coord.new_tables()
            k = 4 * n
            while k and s.coord.blocks_needed_for(ts, k) > s.pool.num_free:  # as much as fits
                k -= 1
            ok = s.coord.acquire(ts, k)
            for t in ts:  # what it computed is garbage to the oracle
                for p in _ints(t.page_ids()):
                    if p:
                        s.content[p] = ("scratch", p)
            s.coord.free(ts)
            return ok

        self.each(step)

    @rule(r=st.integers(0, NUM_REQUESTS - 1))
    def free(self, r: int) -> None:
        def step(s: HostSide) -> Any:
            plan = s.loads[r]
            s.coord.free(s.tables[r])
            s.loads[r] = None
            if plan is not None:
                assert str(plan.state) == "aborted", "free left its pending load"
                before = s.state()
                _, err = _attempt(s.coord.complete_load, plan)
                assert err == "ValueError" and s.state() == before, "a freed load completed"
            return None

        self.each(step)
        self.computed[r] = 0

    @rule(
        r=st.integers(0, NUM_REQUESTS - 1),
        n=st.integers(1, 64),
        other=st.booleans(),
        load=st.booleans(),
    )
    def round_trip(self, r: int, n: int, other: bool, load: bool) -> None:
        """Offload everything, free, evict, and come back (as `other` request or as r): the
        life cycle a host hit needs, as one rule so that short runs reach it."""
        c, d = self.computed[r], self.doc[r]
        if c == 0 or self.sides[0].loads[r] is not None:
            return
        self.offload(r, c)
        self.agree_and_hold_their_content()
        if self.sides[0].offloads:
            self.end_offload(-1, True)  # the plan just made (or the last still pending)
            self.agree_and_hold_their_content()
        self.free(r)
        self.agree_and_hold_their_content()
        self.evict(n)
        self.agree_and_hold_their_content()
        back = (r + 1) % NUM_REQUESTS if other else r
        self.admit(back, d, c // self.base)
        if load:
            self.agree_and_hold_their_content()
            self.complete_load(back)

    @rule(kind=st.integers(0, 3), r=st.integers(0, NUM_REQUESTS - 1))
    def bad(self, kind: int, r: int) -> None:
        """Usage errors: ValueError, nothing changed."""

        def step(s: HostSide) -> Any:
            before = s.state()
            if kind == 0:
                _, err = _attempt(s.bare.plan_offload, s.bare.new_tables(), 0)
            elif kind == 1 and s.offloads:
                _, err = _attempt(s.other.complete_offload, s.offloads[-1])
            elif kind == 2 and s.loads[r] is not None:
                _, err = _attempt(s.other.complete_load, s.loads[r])
            else:
                _, err = _attempt(s.coord.plan_offload, s.tables[r], self.computed[r] + 1_000)
            assert err == "ValueError", f"usage error {kind} gave {err}"
            assert s.state() == before, f"usage error {kind} changed the state"
            return err

        self.each(step)

    # -- after every step ---------------------------------------------------------------------

    @invariant()
    def agree_and_hold_their_content(self) -> None:
        if not self.sides:
            return
        self.each(lambda s: s.state())
        self.each(lambda s: (s.pool.take_events(), s.host.take_events()))
        self.each(lambda s: (s.coord.stats(), s.host.stats()))
        for s in self.sides:
            self.check_content(s)

    def check_content(self, s: HostSide) -> None:
        if s.is_spec:
            for p, name in s.pool._name_of.items():
                assert s.content.get(p) == name, f"device page {p} named {name[0]} holds other"
            for hp, name in s.host._name_of.items():
                assert s.hcontent.get(hp) == name, f"host page {hp} named {name[0]} holds other"
        for r in range(NUM_REQUESTS):
            c = self.computed[r]
            if c == 0 or s.loads[r] is not None:
                continue  # nothing computed, or the engine must not read before the load
            for g, t in enumerate(s.tables[r]):
                ids = _ints(t.page_ids())
                for j in self.read_slots(g, c):
                    assert ids[j] != 0, f"request {r} group {g} slot {j}: a query reads a hole"
                    got = s.content.get(ids[j])
                    want = self.position_content(r, g, j, c)
                    assert got == want, f"request {r} group {g} slot {j} holds {got}, not {want}"


def host_machine(modules: tuple[str, ...] = ("livetail.spec", "livetail")) -> type[HostMachine]:
    """The machine over the given implementations (the spec alone: the oracle only)."""
    return type("HostMachineOf", (HostMachine,), {"modules": modules})
