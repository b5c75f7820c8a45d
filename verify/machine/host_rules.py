"""The host-tier machine's Hypothesis rules: ``host_machine`` drives ``HostWorld``
(``verify/machine/host.py``) through compute, offload, free, eviction and claims with loads;
a failing run becomes a trace through ``TraceSink``.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from ..trace import Geometry, GroupGeometry, Op
from .host import HostWorld
from .host_side import HostStepFailure
from .side import Impl
from .sink import TraceSink

# (kind, block size, window, live tail) per group.
LAYOUTS: list[list[tuple[str, int, int | None, bool]]] = [
    [("full", 4, None, False), ("sliding", 2, 3, True)],
    [("full", 4, None, False), ("sliding", 2, 5, True), ("state", 4, None, False)],
    [("sliding", 2, 3, False), ("full", 2, None, False)],
    [("sliding", 1, 3, True), ("full", 2, None, False)],
    # A chunked group (section 13.2): the window slot holds its chunk size C.
    [("full", 2, None, False), ("chunked", 2, 6, False)],
    [("chunked", 1, 4, False), ("sliding", 2, 3, True), ("full", 4, None, False)],
]


def layout_groups(layout: list[tuple[str, int, int | None, bool]]) -> tuple[GroupGeometry, ...]:
    """A layout's group specs (a chunked entry's third field is its chunk size)."""
    return tuple(
        GroupGeometry(k, b, None, live, w) if k == "chunked" else GroupGeometry(k, b, w, live)
        for k, b, w, live in layout
    )


NUM_REQUESTS = 3
DOCS = 3


class HostMachine(RuleBasedStateMachine):
    """Spec and native (or the spec alone) driven through the host tier in lockstep."""

    impls: tuple[Impl, ...] = ()
    sink: TraceSink | None = None

    def __init__(self) -> None:
        super().__init__()
        self.world: HostWorld | None = None

    @property
    def w(self) -> HostWorld:
        assert self.world is not None
        return self.world

    def step(self, op: Op) -> None:
        report = self.w.run(op)
        if not report.ok:
            raise HostStepFailure(report)

    # -- set-up ---------------------------------------------------------------------------

    @initialize(
        layout=st.integers(0, len(LAYOUTS) - 1),
        device=st.sampled_from([16, 24, 40]),
        host=st.sampled_from([4, 5, 8, 24]),
        wide=st.booleans(),
    )
    def setup(self, layout: int, device: int, host: int, wide: bool) -> None:
        groups = layout_groups(LAYOUTS[layout])
        geometry = Geometry(groups, device, NUM_REQUESTS, host)
        # Half the worlds align to two lcms (semantics 13.9): hits, resume pages, names and
        # offloads on its multiples only.
        if wide:
            geometry = Geometry(groups, device, NUM_REQUESTS, host, 2 * geometry.lcm)
        self.world = HostWorld(geometry, self.impls)

    # -- rules ------------------------------------------------------------------------------

    @rule(r=st.integers(0, NUM_REQUESTS - 1), n=st.integers(1, 12))
    def compute(self, r: int, n: int) -> None:
        if self.w.pending_load(r):
            return  # the engine completes a load before computing past it
        self.step({"op": "host_compute", "request": r, "tokens": n})

    @rule(
        r=st.integers(0, NUM_REQUESTS - 1),
        upto=st.integers(0, 64),
        cap=st.sampled_from([None, None, 0, 1, 2, 3, -1]),
    )
    def offload(self, r: int, upto: int, cap: int | None = None) -> None:
        """A whole plan, or a partial write-back (13.7) of a few pages or of what fits."""
        op = {"op": "host_offload", "request": r, "tokens": upto}
        if cap is not None:  # -1: what fits in the host pool now
            op["max_pages"] = cap if cap >= 0 else int(self.w.reference.host.num_free)
        self.step(op)

    @precondition(lambda self: self.world is not None and self.world.reference.offloads)
    @rule(i=st.integers(0, 7), complete=st.sampled_from([True, True, True, False]))
    def end_offload(self, i: int, complete: bool) -> None:
        """Complete or abort a plan: mostly a pending one, sometimes one that ended (error)."""
        plans = self.w.reference.offloads
        pending = [k for k, p in enumerate(plans) if str(p.state) == "pending"]
        k = pending[i % len(pending)] if pending and i < 6 else i % len(plans)
        kind = "host_complete_offload" if complete else "host_abort_offload"
        self.step({"op": kind, "plan": len(plans) - 1 - k})

    @rule(r=st.integers(0, NUM_REQUESTS - 1), d=st.integers(0, DOCS - 1), pages=st.integers(0, 16))
    def admit(self, r: int, d: int, pages: int) -> None:
        """A freed request comes back: match across tiers, then claim with loads."""
        if not self.w.fresh(r):
            return  # claims need fresh tables
        self.step({"op": "host_claim", "request": r, "doc": d, "tokens": pages * self.w.base})

    @rule(r=st.integers(0, NUM_REQUESTS - 1))
    def complete_load(self, r: int) -> None:
        if self.w.pending_load(r):
            self.step({"op": "host_complete_load", "request": r})

    @rule(n=st.integers(1, 64))
    def evict(self, n: int) -> None:
        """Another request takes up to 4 n tokens and leaves: old device names go."""
        self.step({"op": "host_evict", "tokens": 4 * n})

    @rule(r=st.integers(0, NUM_REQUESTS - 1))
    def free(self, r: int) -> None:
        self.step({"op": "host_free", "request": r})

    @rule(
        r=st.integers(0, NUM_REQUESTS - 1),
        n=st.integers(1, 64),
        other=st.booleans(),
        load=st.booleans(),
    )
    def round_trip(self, r: int, n: int, other: bool, load: bool) -> None:
        """Offload everything, free, evict, and come back (as `other` request or as r): the
        life cycle a host hit needs, as one rule so that short runs reach it."""
        c, d = self.w.computed[r], self.w.doc[r]
        if c == 0 or self.w.pending_load(r):
            return
        self.offload(r, c)
        if self.w.reference.offloads:
            self.end_offload(-1, True)  # the plan just made (or the last still pending)
        self.free(r)
        self.evict(n)
        back = (r + 1) % NUM_REQUESTS if other else r
        self.admit(back, d, c // self.w.base)
        if load:
            self.complete_load(back)

    @rule(kind=st.integers(0, 3), r=st.integers(0, NUM_REQUESTS - 1))
    def bad(self, kind: int, r: int) -> None:
        """Usage errors: ValueError, nothing changed."""
        if kind == 0:
            call = "offload-without-host"
        elif kind == 1 and self.w.reference.offloads:
            call = "complete-offload-foreign"
        elif kind == 2 and self.w.pending_load(r):
            call = "complete-load-foreign"
        else:
            call = "offload-past-extent"
        self.step({"op": "host_bad", "call": call, "request": r})

    def teardown(self) -> None:
        if self.sink is not None:
            self.sink.finished(self.world)


def host_machine(impls: Sequence[Impl], sink: TraceSink | None = None) -> type[HostMachine]:
    """The machine over the given implementations (the spec alone: the oracle only)."""
    return type("HostMachineOf", (HostMachine,), {"impls": tuple(impls), "sink": sink})
