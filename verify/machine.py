"""The stateful differential machine: several implementations in lockstep, checked every step.

Two layers:

* ``Lockstep`` runs one operation (an op dict of ``verify/trace.py``) on every
  implementation (normally the spec and the native module), compares their full state and
  every query's answer, and checks the section-7 properties on each side against an
  *oracle* written here from ``semantics.md`` alone (it never calls the spec, so a wrong
  spec variant cannot bend it).  Replay (``verify/replay.py``) uses it directly.
* ``differential_machine`` wraps it in a Hypothesis ``RuleBasedStateMachine`` whose rules
  are the request life cycle and its abuses; a failing run (after shrinking) becomes a
  trace through ``TraceSink``.

Property names (used in traces, replay output and docs/traces.md):

``agree``           every implementation returned the same and holds the same state
``conservation``    ref counts = slots pointing at a page; page in queue iff count 0;
                    free + pinned = num_blocks - 1
``table-shape``     floor <= slots, tail < B, extent = slots*B - tail, holes below the
                    floor, bound iff it has slots, and a bound table remembers its
                    group's page size and holds the coordinator's pool
``live-tail``       a slot at or above the floor is real iff live(s, f) at the frontier it
                    was created at (full allocation for non-live groups)
``closed-form``     every blocks_needed_for / _sequential / blocks_reclaimable_at answer
                    equals the slot-by-slot definition
``exact-take``      a successful acquire took exactly blocks_needed_for pages, the front of
                    the free queue, in ascending slot order (groups in index order)
``all-or-nothing``  a failed acquire changed nothing
``shortfall-only``  an acquire fails only when its need exceeds the free pages
``sequential-charge`` an admitted request's chunk and decode acquires take exactly the
                    sequential charge, the decode hold-back is exact and >= 0, the peak
                    stays within the charge
``reclaim``         reclaim released what blocks_reclaimable_at predicted, no real page is
                    left below the bound, the floor moved to the bound, pages re-entered the
                    queue in ascending slot order by the retention rule (unnamed at the
                    front, named at the back)
``free``            free emptied and unbound the table, the last slot's page re-entered first
                    (retention rule as for reclaim)
``usage-error``     a bad call raised the expected exception type and changed nothing
``valid-call``      a valid call did not raise
"""

from __future__ import annotations

import hashlib
import importlib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from . import events as counters_events
from .machine_plan import PLAN_OPS, PlanRules, apply_plan_op, check_plan_op
from .retention import check_release
from .trace import Geometry, GroupGeometry, Op, make_trace, trace_geometry

INT32_MAX = 2**31 - 1


# --- implementations ------------------------------------------------------------------


@dataclass(frozen=True)
class Impl:
    """One implementation under test: a label and a module with the livetail classes."""

    label: str
    module: Any


class NativeUnavailable(RuntimeError):
    """The native extension is not importable in this environment."""


def spec_impl() -> Impl:
    return Impl("spec", importlib.import_module("livetail.spec"))


def native_impl() -> Impl:
    try:
        mod = importlib.import_module("livetail")
        mod.BlockPool  # noqa: B018 - raises when livetail._core cannot be imported
    except ImportError as e:
        raise NativeUnavailable(f"livetail's native module cannot be imported: {e}") from None
    except AttributeError:
        raise NativeUnavailable(
            "livetail has no native module (livetail._core is not built or not importable)"
        ) from None
    return Impl("native", mod)


def native_available() -> bool:
    try:
        native_impl()
    except NativeUnavailable:
        return False
    return True


def implementations(which: str) -> list[Impl]:
    """``spec``, ``native`` or ``both`` (spec first: it is the reference side)."""
    if which == "spec":
        return [spec_impl()]
    if which == "native":
        return [native_impl()]
    if which == "both":
        return [spec_impl(), native_impl()]
    raise ValueError(f"impl must be spec, native or both, not {which!r}")


# --- the oracle: semantics.md sections 2-5, independent of the spec --------------------


@dataclass(frozen=True)
class GroupRule:
    """What the oracle needs of a group: kind, B, W (None: never reclaims), A."""

    kind: str
    B: int
    W: int | None
    A: int

    @staticmethod
    def of(g: GroupGeometry, lcm: int) -> GroupRule:
        if g.kind == "full":
            return GroupRule("full", g.block_size, None, 0)
        if g.kind == "state":
            return GroupRule("state", g.block_size, 2, 0)
        return GroupRule("sliding", g.block_size, g.sliding_window, lcm if g.live_tail_alloc else 0)


def oracle_slid_out(f: int, W: int, B: int) -> int:
    d = f - W + 1
    return d // B if d > 0 else 0


def oracle_live(s: int, f: int, g: GroupRule) -> bool:
    """Section 4, word for word: real if not live-tail, in the window at f, or a resume slot."""
    if g.A == 0 or g.W is None:
        return True
    if s >= oracle_slid_out(f, g.W, g.B):
        return True
    m = g.A // g.B
    R = -(-(g.W - 1) // g.B)
    return s % m >= m - R


@dataclass(frozen=True)
class Shape:
    slots: int
    tail: int


def oracle_after(shape: Shape, n: int, B: int) -> Shape:
    """The table shape after acquire(n) (section 5, steps 1, 2 and 4)."""
    if n <= shape.tail:
        return Shape(shape.slots, shape.tail - n)
    over = n - shape.tail
    new = -(-over // B)
    return Shape(shape.slots + new, 0 if over % B == 0 else B - over % B)


def oracle_take(shape: Shape, n: int, g: GroupRule) -> int:
    """Pages acquire(n) takes, slot by slot."""
    if n <= shape.tail:
        return 0
    after = oracle_after(shape, n, g.B)
    f = shape.slots * g.B - shape.tail + n
    return sum(1 for s in range(shape.slots, after.slots) if oracle_live(s, f, g))


def oracle_sequential(shape: Shape, first: int, extra: int, g: GroupRule) -> int:
    return oracle_take(shape, first, g) + oracle_take(oracle_after(shape, first, g.B), extra, g)


def oracle_bound(f: int, slots: int, g: GroupRule) -> int:
    """Reclaim bound b = min(slid_out(f), slots); 0 for full groups (nothing reclaimed)."""
    if g.W is None:
        return 0
    return min(oracle_slid_out(f, g.W, g.B), slots)


# --- prefix-cache keys (semantics section 8), computed here for every side alike ------------

SHARED_PREFIX = 24
"""Token positions every document shares, so documents also match each other partly."""


def doc_tokens(doc: int, n: int) -> list[int]:
    """The first n token ids of document `doc` (a request's prompt)."""
    return [i if i < SHARED_PREFIX else 1_000_003 * (doc + 1) + i for i in range(n)]


_KEYS: dict[tuple[int, int], list[bytes]] = {}


def doc_keys(doc: int, n: int, base: int) -> list[bytes]:
    """One key per full base page of the document's first n tokens: the standard chain,
    SHA-256(previous key || token ids as little-endian uint32), page 0 from an empty key."""
    keys = _KEYS.setdefault((doc, base), [])
    toks = doc_tokens(doc, (n // base) * base)
    while len(keys) < n // base:
        j = len(keys)
        page = b"".join(t.to_bytes(4, "little") for t in toks[j * base : (j + 1) * base])
        keys.append(hashlib.sha256((keys[-1] if keys else b"") + page).digest())
    return keys[: n // base]


# --- observed state -------------------------------------------------------------------


@dataclass(frozen=True)
class TableState:
    pages: tuple[int, ...]
    tail: int
    floor: int
    extent: int
    bound: bool
    length: int
    real: int
    block_size: int = 0  # remembered by a bound table (0 when unbound)
    bound_to: str = "none"  # "pool", "other pool" or "none": the pool the table holds

    @property
    def shape(self) -> Shape:
        return Shape(self.length, self.tail)

    def compact(self) -> str:
        if not self.bound and self.length == 0:
            return "-"
        ids = [str(p) if p else "." for p in self.pages]
        if len(ids) > 20:
            ids = [*ids[:8], f"...{len(ids) - 16} more...", *ids[-8:]]
        return f"[{' '.join(ids)}] tail={self.tail} floor={self.floor} ext={self.extent}"


@dataclass(frozen=True)
class PoolState:
    num_free: int
    num_pinned: int
    queue: tuple[int, ...]
    refs: tuple[int, ...]
    cached: int = -1  # pages carrying a prefix-cache name (-1: no prefix caching)
    cached_free: int = -1

    def compact(self) -> str:
        q = " ".join(map(str, self.queue[:12])) + (" ..." if len(self.queue) > 12 else "")
        names = f" named={self.cached} (free {self.cached_free})" if self.cached > 0 else ""
        return f"free={self.num_free} pinned={self.num_pinned}{names} queue=[{q}]"


@dataclass(frozen=True)
class State:
    pool: PoolState
    tables: tuple[tuple[TableState, ...], ...]  # [request][group]

    def table(self, r: int, g: int) -> TableState:
        return self.tables[r][g]


def _ints(values: Iterable[Any]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def read_table(t: Any, pool: Any, other_pool: Any) -> TableState:
    held = t.pool
    bound_to = "none" if held is None else "pool" if held is pool else "other pool"
    if held is not None and held is not pool and held is not other_pool:
        bound_to = "unknown pool"
    return TableState(
        pages=_ints(t.page_ids()),
        tail=int(t.tail_available),
        floor=int(t.reclaim_floor),
        extent=int(t.extent),
        bound=bool(t.is_bound),
        length=len(t),
        real=int(t.num_real_pages),
        block_size=int(t.block_size),
        bound_to=bound_to,
    )


@dataclass(frozen=True)
class Outcome:
    """What a call returned (normalised to a plain value) or the exception type it raised."""

    value: Any = None
    error: str | None = None
    message: str = ""

    def __str__(self) -> str:
        return f"raise {self.error}" if self.error else str(self.value)

    @property
    def raised(self) -> bool:
        return self.error is not None


def _normalise(v: Any) -> Any:
    if v is None or isinstance(v, (bool, str)):
        return v
    try:
        return int(v)
    except (TypeError, ValueError):
        return repr(v)


def call(fn: Callable[..., Any], *args: Any) -> Outcome:
    try:
        return Outcome(_normalise(fn(*args)))
    except Exception as e:  # every exception is an observation to compare
        return Outcome(error=type(e).__name__, message=str(e))


@dataclass
class Verdict:
    prop: str
    ok: bool
    detail: str = ""


CLAIMED = -1
"""Shadow creation frontier of a slot brought in by a claim: real iff at or above the floor."""


# --- one implementation's world -------------------------------------------------------


class Side:
    """One implementation's pool, coordinator and tables, plus the shadow the checks need."""

    def __init__(self, impl: Impl, geometry: Geometry) -> None:
        m = impl.module
        self.label = impl.label
        self.mod = m
        self.geometry = geometry
        specs = [
            m.GroupSpec(g.kind, g.block_size, g.sliding_window, g.live_tail_alloc)
            for g in geometry.groups
        ]
        self.pool = m.BlockPool(geometry.num_blocks, events=True)
        self.coord = m.Coordinator(specs, self.pool)
        self.managers = list(self.coord.managers)
        # Another pool and coordinator over it: the target of foreign-pool abuses.
        # Room for one page per group, so a one-token acquire there always binds a table.
        self.other_pool = m.BlockPool(max(geometry.num_blocks, len(geometry.groups) + 1))
        self.other_coord = m.Coordinator(specs, self.other_pool)
        self.tables = [self.coord.new_tables() for _ in range(geometry.num_requests)]
        # Read the pool's name counts (set by Lockstep when every side has section 8).
        self.read_names = False
        # created[r][g][s]: the frontier of the acquire that created slot s (CLAIMED: a claim).
        self.created: list[list[list[int]]] = [
            [[] for _ in geometry.groups] for _ in range(geometry.num_requests)
        ]

    def state(self) -> State:
        p = self.pool
        return State(
            PoolState(
                int(p.num_free),
                int(p.num_pinned),
                _ints(p.free_queue()),
                _ints(p.ref_counts()),
                int(p.num_cached) if self.read_names else -1,
                int(p.num_cached_free) if self.read_names else -1,
            ),
            tuple(tuple(read_table(t, p, self.other_pool) for t in ts) for ts in self.tables),
        )

    def note_shape(self, r: int, g: int, frontier: int) -> None:
        """After an acquire attempt at `frontier`: slots it appended were created there."""
        n = len(self.tables[r][g])
        shadow = self.created[r][g]
        if n < len(shadow):
            del shadow[n:]
        shadow.extend([frontier] * (n - len(shadow)))

    def acquire(self, r: int, n: int) -> Outcome:
        """Coordinator acquire of n tokens for request r, recording the creation frontiers."""
        ts = self.tables[r]
        extents = [int(t.extent) for t in ts]
        out = call(self.coord.acquire, ts, n)
        for g, e in enumerate(extents):
            self.note_shape(r, g, e + n)
        return out

    def note_free(self, r: int, g: int) -> None:
        self.created[r][g] = self.created[r][g][: len(self.tables[r][g])]

    def note_claim(self, r: int) -> None:
        for g, t in enumerate(self.tables[r]):
            self.created[r][g] = [CLAIMED] * len(t)

    @property
    def prefix(self) -> bool:
        """Whether this implementation has prefix caching (semantics section 8)."""
        return hasattr(self.coord, "match_prefix")


# --- bad calls: (expected exception, applicable?, call) ---------------------------------


@dataclass(frozen=True)
class BadCall:
    expect: str
    applicable: Callable[[State, Geometry, int, int], bool]
    run: Callable[[Side, int, int], Any]


def _always(s: State, geo: Geometry, r: int, g: int) -> bool:
    return True


def _bound(s: State, geo: Geometry, r: int, g: int) -> bool:
    return s.table(r, g).bound


def _any_bound(s: State, geo: Geometry, r: int, g: int) -> bool:
    return any(t.bound for t in s.tables[r])


def _two_groups(s: State, geo: Geometry, r: int, g: int) -> bool:
    return len(geo.groups) >= 2


def _other_size(geo: Geometry, g: int) -> int:
    return geo.groups[g].block_size + 1


def _max_extent(side: Side, r: int) -> int:
    return max(int(t.extent) for t in side.tables[r])


BAD_CALLS: dict[str, BadCall] = {
    "acquire-negative": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.acquire(s.tables[r], -1)
    ),
    "acquire-bool": BadCall(
        "TypeError", _always, lambda s, r, g: s.coord.acquire(s.tables[r], True)
    ),
    "acquire-float": BadCall(
        "TypeError", _always, lambda s, r, g: s.coord.acquire(s.tables[r], 1.5)
    ),
    "acquire-past-int32": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.acquire(s.tables[r], 2**31)
    ),
    "acquire-far-past-int32": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.acquire(s.tables[r], 2**40)
    ),
    "needed-negative": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.blocks_needed_for(s.tables[r], -1)
    ),
    "needed-past-int32": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.blocks_needed_for(s.tables[r], 2**31)
    ),
    "sequential-negative": BadCall(
        "ValueError",
        _always,
        lambda s, r, g: s.coord.blocks_needed_for_sequential(s.tables[r], 1, -1),
    ),
    "sequential-bool": BadCall(
        "TypeError",
        _always,
        lambda s, r, g: s.coord.blocks_needed_for_sequential(s.tables[r], False, 1),
    ),
    "sequential-past-int32": BadCall(
        "ValueError",
        _always,
        lambda s, r, g: s.coord.blocks_needed_for_sequential(s.tables[r], 2**30, 2**30),
    ),
    "reclaim-past-extent": BadCall(
        "ValueError",
        _always,
        lambda s, r, g: s.coord.reclaim_expired(s.tables[r], _max_extent(s, r) + 1),
    ),
    "reclaim-negative": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.reclaim_expired(s.tables[r], -1)
    ),
    "tables-too-few": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.acquire(s.tables[r][:-1], 1)
    ),
    "tables-too-many": BadCall(
        "ValueError",
        _always,
        lambda s, r, g: s.coord.acquire([*s.tables[r], s.mod.BlockTable()], 1),
    ),
    "tables-duplicate": BadCall(
        "ValueError",
        _two_groups,
        lambda s, r, g: s.coord.acquire([s.tables[r][0], *s.tables[r][:-1]], 1),
    ),
    "tables-not-tables": BadCall(
        "TypeError", _always, lambda s, r, g: s.coord.acquire([None] * len(s.tables[r]), 1)
    ),
    "free-too-few-tables": BadCall(
        "ValueError", _always, lambda s, r, g: s.coord.free(s.tables[r][:-1])
    ),
    "coordinator-foreign-pool": BadCall(
        "ValueError", _any_bound, lambda s, r, g: s.other_coord.acquire(s.tables[r], 1)
    ),
    "acquire-foreign-pool": BadCall(
        "ValueError",
        _bound,
        lambda s, r, g: s.managers[g].acquire(s.other_pool, s.tables[r][g], 1),
    ),
    "acquire-zero-foreign-pool": BadCall(
        "ValueError",
        _bound,
        lambda s, r, g: s.managers[g].acquire(s.other_pool, s.tables[r][g], 0),
    ),
    "reclaim-foreign-pool": BadCall(
        "ValueError",
        _bound,
        lambda s, r, g: s.managers[g].reclaim_expired(s.other_pool, s.tables[r][g], 0),
    ),
    "free-foreign-pool": BadCall(
        "ValueError", _bound, lambda s, r, g: s.managers[g].free(s.other_pool, s.tables[r][g])
    ),
    "acquire-page-size-mismatch": BadCall(
        "ValueError",
        _bound,
        lambda s, r, g: s.mod.FullAttentionManager(_other_size(s.geometry, g)).acquire(
            s.pool, s.tables[r][g], 1
        ),
    ),
    "needed-page-size-mismatch": BadCall(
        "ValueError",
        _bound,
        lambda s, r, g: s.mod.FullAttentionManager(_other_size(s.geometry, g)).blocks_needed_for(
            s.tables[r][g], 1
        ),
    ),
    "reclaimable-past-extent": BadCall(
        "ValueError",
        _always,
        lambda s, r, g: s.managers[g].blocks_reclaimable_at(
            s.tables[r][g], int(s.tables[r][g].extent) + 1
        ),
    ),
    "reclaimable-uncached-not-bool": BadCall(
        "TypeError",
        _always,
        lambda s, r, g: s.managers[g].blocks_reclaimable_at(s.tables[r][g], 0, 1),
    ),
    "group-acquire-negative": BadCall(
        "ValueError",
        _always,
        lambda s, r, g: s.managers[g].acquire(s.pool, s.tables[r][g], -1),
    ),
    "group-acquire-not-a-table": BadCall(
        "TypeError", _always, lambda s, r, g: s.managers[g].acquire(s.pool, None, 1)
    ),
    "pool-zero-blocks": BadCall("ValueError", _always, lambda s, r, g: s.mod.BlockPool(0)),
    "pool-bool-blocks": BadCall("TypeError", _always, lambda s, r, g: s.mod.BlockPool(True)),
    "spec-sliding-without-window": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.GroupSpec("sliding", 8)
    ),
    "spec-full-with-window": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.GroupSpec("full", 8, 4)
    ),
    "spec-state-live-tail": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.GroupSpec("state", 8, None, True)
    ),
    "spec-unknown-kind": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.GroupSpec("mamba", 8)
    ),
    "spec-zero-block-size": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.GroupSpec("full", 0)
    ),
    "manager-misaligned": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.SlidingWindowManager(8, 12, 12)
    ),
    "manager-zero-window": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.SlidingWindowManager(8, 0)
    ),
    "coordinator-no-groups": BadCall(
        "ValueError", _always, lambda s, r, g: s.mod.Coordinator([], s.pool)
    ),
}


# --- one step -------------------------------------------------------------------------


@dataclass
class SideStep:
    """One implementation's view of one step."""

    label: str
    outcome: Outcome
    before: State
    after: State
    facts: dict[str, Any] = field(default_factory=dict)
    queries: dict[str, Outcome] = field(default_factory=dict)
    # The questions this side was asked, derived from its own state after the step.
    plan: dict[str, Query] = field(default_factory=dict)
    verdicts: list[Verdict] = field(default_factory=list)


@dataclass
class StepReport:
    index: int
    op: Op
    sides: list[SideStep]
    agree: Verdict

    @property
    def failures(self) -> list[str]:
        out = [] if self.agree.ok else [f"agree: {self.agree.detail}"]
        for s in self.sides:
            out.extend(f"{s.label}: {v.prop}: {v.detail}" for v in s.verdicts if not v.ok)
        return out

    @property
    def ok(self) -> bool:
        return not self.failures

    def failed_properties(self) -> list[str]:
        props = [] if self.agree.ok else ["agree"]
        for s in self.sides:
            props.extend(v.prop for v in s.verdicts if not v.ok and v.prop not in props)
        return props


def describe_op(op: Op) -> str:
    args = ", ".join(f"{k}={v}" for k, v in op.items() if k != "op")
    return f"{op['op']}({args})"


class StepFailure(AssertionError):
    """A step diverged or broke a property; carries the report."""

    def __init__(self, report: StepReport) -> None:
        self.report = report
        lines = [f"step {report.index} {describe_op(report.op)} failed:"]
        lines.extend(f"  {f}" for f in report.failures)
        super().__init__("\n".join(lines))


class Lockstep:
    """Every implementation advanced by the same ops; `run` checks one step."""

    def __init__(self, geometry: Geometry, impls: Sequence[Impl]) -> None:
        if not impls:
            raise ValueError("need at least one implementation")
        self.geometry = geometry
        self.rules = [GroupRule.of(g, geometry.lcm) for g in geometry.groups]
        self.sides = [Side(i, geometry) for i in impls]
        # Prefix ops run only when every side has section 8.
        self.prefix = all(side.prefix for side in self.sides)
        for side in self.sides:
            side.read_names = self.prefix
        self.named = False  # a cache op ran: pages may carry names
        # Plan ops run only when every side has section 9.
        self.plans = all(hasattr(side.coord, "plan_step") for side in self.sides)
        self.ops: list[Op] = []
        self.failure: StepReport | None = None

    @property
    def reference(self) -> Side:
        return self.sides[0]

    def state(self) -> State:
        return self.reference.state()

    # -- the step ----------------------------------------------------------------------

    def run(self, op: Op) -> StepReport:
        """Apply `op` on every side, compare, check; records the op (and any failure)."""
        self.ops.append(dict(op))
        steps = []
        for side in self.sides:
            before = side.state()
            facts: dict[str, Any] = {}
            outcome = self._apply(side, op, facts)
            counters_events.observe(side, facts)  # compared by _agree like every fact
            steps.append(SideStep(side.label, outcome, before, side.state(), facts))
        # Each side's questions come from its own new state: a count at the int32 limit of
        # one side's table shape is past the limit of another's once the sides diverge, and
        # the blame must go to the side that diverged. Equal states ask equal questions.
        for side, st_ in zip(self.sides, steps):
            st_.plan = self.query_plan(st_.after, [op.get("request", 0)])
            for r in range(self.geometry.num_requests):
                for q in (Query("needed", r, None, (17,)), Query("sequential", r, None, (17, 2))):
                    st_.plan.setdefault(q.key, q)
            st_.queries = {k: call(q.ask, side) for k, q in st_.plan.items()}
            st_.verdicts = self._check(side, op, st_)
        report = StepReport(len(self.ops) - 1, dict(op), steps, self._agree(steps))
        if not report.ok and self.failure is None:
            self.failure = report
        return report

    # -- applying ops --------------------------------------------------------------------

    def _apply(self, side: Side, op: Op, facts: dict[str, Any]) -> Outcome:
        kind = op["op"]
        r = op.get("request", 0)
        ts = side.tables[r]
        if kind == "admit":
            return self._admit(
                side, r, op["chunk"], op["reserve"], op.get("reclaim_between", False), facts
            )
        if kind in ("acquire", "decode"):
            n = op["tokens"] if kind == "acquire" else 1
            facts["need"] = call(side.coord.blocks_needed_for, ts, n).value
            facts["need_by_group"] = [
                call(m.blocks_needed_for, t, n).value for m, t in zip(side.managers, ts)
            ]
            return side.acquire(r, n)
        if kind == "group_acquire":
            g, n = op["group"], op["tokens"]
            m, t = side.managers[g], ts[op["group"]]
            facts["need"] = call(m.blocks_needed_for, t, n).value
            e = int(t.extent)
            out = call(m.acquire, side.pool, t, n)
            side.note_shape(r, g, e + n)
            return out
        if kind == "reclaim":
            f = op["frontier"]
            facts["predicted"] = [
                call(m.blocks_reclaimable_at, t, f).value for m, t in zip(side.managers, ts)
            ]
            return call(side.coord.reclaim_expired, ts, f)
        if kind == "group_reclaim":
            g, f = op["group"], op["frontier"]
            facts["predicted"] = [call(side.managers[g].blocks_reclaimable_at, ts[g], f).value]
            return call(side.managers[g].reclaim_expired, side.pool, ts[g], f)
        if kind == "free":
            out = call(side.coord.free, ts)
            for g in range(len(ts)):
                side.note_free(r, g)
            return out
        if kind == "group_free":
            g = op["group"]
            out = call(side.managers[g].free, side.pool, ts[g])
            side.note_free(r, g)
            return out
        if kind == "cache":
            self.named = True
            keys = doc_keys(op["doc"], op["tokens"], self.geometry.base)
            return call(side.coord.cache_full_blocks, ts, keys, op["tokens"])
        if kind == "claim":
            return self._claim(side, r, op, facts)
        if kind == "bad":
            bad = BAD_CALLS.get(op["call"])
            if bad is None:
                return Outcome(error="UnknownBadCall", message=op["call"])
            return call(bad.run, side, r, op["group"])
        if kind in PLAN_OPS:
            return apply_plan_op(self, side, op, facts)  # type: ignore[no-any-return]
        return Outcome(error="UnknownOp", message=str(kind))

    def _admit(
        self,
        side: Side,
        r: int,
        chunk: int,
        reserve: int,
        reclaim_between: bool,
        facts: dict[str, Any],
    ) -> Outcome:
        """Engine admission: charge the sequential need; if it fits, run chunk then decode."""
        ts = side.tables[r]
        pool = side.pool
        facts["sequential"] = call(
            side.coord.blocks_needed_for_sequential, ts, chunk, reserve
        ).value
        facts["combined"] = call(side.coord.blocks_needed_for, ts, chunk + reserve).value
        facts["chunk_need"] = call(side.coord.blocks_needed_for, ts, chunk).value
        facts["oracle_sequential"] = sum(
            oracle_sequential(Shape(len(t), int(t.tail_available)), chunk, reserve, g)
            for t, g in zip(ts, self.rules)
        )
        free0 = int(pool.num_free)
        facts["free_before"] = free0
        if not isinstance(facts["sequential"], int) or facts["sequential"] > free0:
            return Outcome("deferred")
        pinned0 = int(pool.num_pinned)
        ok1 = side.acquire(r, chunk)
        facts["chunk_ok"] = ok1.value
        facts["chunk_take"] = free0 - int(pool.num_free)
        peak = int(pool.num_pinned)
        if reclaim_between:
            f = min(int(t.extent) for t in ts)
            facts["reclaimed"] = call(side.coord.reclaim_expired, ts, f).value
        free1 = int(pool.num_free)
        ok2 = side.acquire(r, reserve)
        facts["decode_ok"] = ok2.value
        facts["decode_take"] = free1 - int(pool.num_free)
        facts["peak"] = max(peak, int(pool.num_pinned)) - pinned0
        if ok1.raised:
            return ok1
        if ok2.raised:
            return ok2
        return Outcome("admitted")

    def _claim(self, side: Side, r: int, op: Op, facts: dict[str, Any]) -> Outcome:
        """match_prefix, optionally an acquire elsewhere (may evict), then claim the match."""
        keys = doc_keys(op["doc"], op["tokens"], self.geometry.base)
        facts["keys"] = len(keys)
        before = side.state()
        try:
            match = side.coord.match_prefix(keys)
        except Exception as e:
            facts["match"] = f"raise {type(e).__name__}"
            return Outcome(error=type(e).__name__, message=f"match_prefix: {e}")
        facts["match_read_only"] = side.state() == before
        facts["match_tokens"] = int(match.num_tokens)
        facts["match_pages"] = [[int(p) for p in g] for g in match.pages]
        facts["consumed"] = str(call(side.coord.blocks_consumed_by_claim, match))
        if "between_request" in op:
            other, n = op["between_request"], op["between_tokens"]
            facts["between_acquire"] = str(side.acquire(other, n))
            facts["consumed"] = str(call(side.coord.blocks_consumed_by_claim, match))
        facts["_before_claim"] = side.state()
        out = call(side.coord.claim, side.tables[r], match)
        if not out.raised:
            side.note_claim(r)
        return out

    # -- queries -----------------------------------------------------------------------

    def query_plan(self, s: State, requests: Iterable[int]) -> dict[str, Query]:
        """Queries asked of every side after a step, about the tables of `requests`.

        Derived from the reference side's state: page fills of each table's tail, the lcm,
        the 17-then-2 pair, frontiers across the table.  `run` asks this about the request
        an op touched (with no page shared, no other table's answers can have changed) and
        two coordinator queries about every other request (in case an implementation keeps
        hidden state that goes stale).
        """
        lcm = self.geometry.lcm
        plan: dict[str, Query] = {}

        def add(q: Query) -> None:
            plan[q.key] = q

        base_ns = sorted({0, 1, 17, lcm, lcm + 1, 2 * lcm + 3})
        pairs = sorted({(17, 2), (1, 1), (lcm, 1), (max(lcm - 1, 0), 2), (2 * lcm + 1, 3)})
        for r in requests:
            row = s.tables[r]
            for n in base_ns:
                add(Query("needed", r, None, (n,)))
            for a, b in pairs:
                add(Query("sequential", r, None, (a, b)))
            for g, t in enumerate(row):
                B = self.geometry.groups[g].block_size
                for n in sorted({*base_ns, t.tail, t.tail + 1, t.tail + B}):
                    add(Query("needed", r, g, (n,)))
                for a, b in sorted({*pairs, (t.tail, 1), (t.tail + 1, B)}):
                    add(Query("sequential", r, g, (a, b)))
                for f in sorted({0, t.extent // 2, max(t.extent - 1, 0), t.extent}):
                    add(Query("reclaimable", r, g, (f, 1)))
                add(Query("reclaimable", r, g, (t.extent, 0)))
                add(Query("reclaimable", r, g, (t.extent, 1), "numpy"))
                lim = (INT32_MAX // B - t.length) * B + t.tail
                add(Query("needed", r, g, (lim,), "limit"))
                add(Query("needed", r, g, (lim + 1,), "past-limit"))
                add(Query("sequential", r, g, (lim // 2, lim - lim // 2), "limit"))
                add(Query("sequential", r, g, (lim // 2, lim - lim // 2 + 1), "past-limit"))
            add(Query("needed", r, None, (17,), "numpy"))
            add(Query("sequential", r, None, (17, 2), "numpy"))
            sizes = [gr.block_size for gr in self.geometry.groups]
            lim = min((INT32_MAX // B - t.length) * B + t.tail for B, t in zip(sizes, row))
            add(Query("needed", r, None, (lim,), "limit"))
            add(Query("needed", r, None, (lim + 1,), "past-limit"))
        if self.prefix:
            # What every document would match now: the names, compared side by side.
            longest = max(t.extent for row in s.tables for t in row)
            n = min(longest, 8 * lcm + SHARED_PREFIX)
            for doc in (0, 1):
                add(Query("match", 0, None, (doc, n)))
        return plan

    def oracle_answer(self, q: Query, s: State) -> int | str | None:
        """The slot-by-slot answer to query `q` on state `s`.

        None: no oracle (a count near the int32 limit spans ~2**31 slots), but it must
        answer; "ValueError": it must raise that.
        """
        if q.style == "limit" or q.name == "match":
            return None  # match: no oracle for names, the sides are compared
        if q.style == "past-limit":
            return "ValueError"
        total = 0
        for g in [q.group] if q.group is not None else range(len(self.rules)):
            t, rule_ = s.table(q.request, g), self.rules[g]
            if q.name == "needed":
                total += oracle_take(t.shape, q.args[0], rule_)
            elif q.name == "sequential":
                total += oracle_sequential(t.shape, q.args[0], q.args[1], rule_)
            elif not q.args[1] and self.named:
                return None  # which pages carry names is compared, not predicted
            elif t.bound and q.args[1]:  # reclaimable (count_uncached=False: no names yet)
                b = oracle_bound(q.args[0], t.length, rule_)
                total += sum(1 for p in t.pages[t.floor : b] if p != 0 and s.pool.refs[p] == 1)
        return total

    # -- checks ------------------------------------------------------------------------

    def _agree(self, steps: list[SideStep]) -> Verdict:
        if len(steps) < 2:
            return Verdict("agree", True, "one implementation")
        ref = steps[0]
        diffs: list[str] = []
        for other in steps[1:]:
            pair = f"{ref.label} vs {other.label}"
            if (ref.outcome.value, ref.outcome.error) != (other.outcome.value, other.outcome.error):
                diffs.append(f"{pair}: returned {ref.outcome} vs {other.outcome}")
            diffs.extend(f"{pair}: {d}" for d in _state_diff(ref.after, other.after))
            for k in ref.facts:
                if k.startswith("_"):
                    continue  # a state snapshot: compared through the states themselves
                if ref.facts[k] != other.facts.get(k):
                    diffs.append(f"{pair}: {k} {ref.facts[k]} vs {other.facts.get(k)}")
            for k, a in ref.queries.items():
                if k not in other.queries:
                    continue  # asked of one side only: its state differs, reported above
                b = other.queries[k]
                if (a.value, a.error) != (b.value, b.error):
                    diffs.append(f"{pair}: {k} = {a} vs {b}")
        if diffs:
            more = f" (+{len(diffs) - 6} more)" if len(diffs) > 6 else ""
            return Verdict("agree", False, "; ".join(diffs[:6]) + more)
        return Verdict("agree", True)

    def _check(self, side: Side, op: Op, st_: SideStep) -> list[Verdict]:
        vs: list[Verdict] = []
        kind = op["op"]
        if kind in ("acquire", "decode", "group_acquire"):
            vs.extend(self._check_acquire(op, st_))
        elif kind == "admit":
            vs.extend(self._check_admit(op, st_))
        elif kind in ("reclaim", "group_reclaim"):
            vs.extend(self._check_reclaim(op, st_))
        elif kind in ("free", "group_free"):
            vs.extend(self._check_free(op, st_))
        elif kind == "bad":
            vs.extend(self._check_bad(op, st_))
        elif kind == "cache":
            vs.extend(self._check_cache(op, st_))
        elif kind == "claim":
            vs.extend(self._check_claim(op, st_))
        elif kind in PLAN_OPS:
            vs.extend(check_plan_op(self, op, st_))
        vs.append(self._check_conservation(st_.after))
        vs.append(self._check_shape(st_.after))
        vs.append(self._check_live(side, st_.after))
        vs.append(self._check_queries(st_))
        vs.append(Verdict("events", *counters_events.check(side)))
        return vs

    def _groups_of(self, op: Op) -> list[int]:
        return (
            [op["group"]] if "group" in op and op["op"] != "bad" else list(range(len(self.rules)))
        )

    def _check_acquire(self, op: Op, s: SideStep) -> list[Verdict]:
        r = op["request"]
        n = op["tokens"] if op["op"] != "decode" else 1
        groups = self._groups_of(op)
        b, a = s.before, s.after
        if s.outcome.raised:
            return [
                Verdict(
                    "valid-call",
                    False,
                    f"acquire({n}) raised {s.outcome.error}: {s.outcome.message}",
                )
            ]
        need = s.facts["need"]
        if s.outcome.value is not True:
            return [
                Verdict(
                    "all-or-nothing",
                    a == b,
                    "" if a == b else "failed acquire changed: " + "; ".join(_state_diff(b, a)),
                ),
                Verdict(
                    "shortfall-only",
                    isinstance(need, int) and need > b.pool.num_free,
                    f"acquire({n}) failed with need {need} and {b.pool.num_free} free",
                ),
            ]
        problems: list[str] = []
        taken = b.pool.num_free - a.pool.num_free
        if taken != need:
            problems.append(f"took {taken} pages, blocks_needed_for said {need}")
        new_pages: list[int] = []
        for g in groups:
            tb, ta = b.table(r, g), a.table(r, g)
            exp = oracle_after(tb.shape, n, self.rules[g].B)
            if (ta.length, ta.tail) != (exp.slots, exp.tail):
                problems.append(
                    f"g{g} shape (slots, tail) = ({ta.length}, {ta.tail}), expected "
                    f"({exp.slots}, {exp.tail})"
                )
            if ta.pages[: tb.length] != tb.pages or ta.floor != tb.floor:
                problems.append(f"g{g} acquire changed existing slots or the floor")
            new_pages.extend(p for p in ta.pages[tb.length :] if p != 0)
        if new_pages != list(b.pool.queue[: len(new_pages)]):
            problems.append(
                f"new pages {new_pages} are not the queue front "
                f"{list(b.pool.queue[: len(new_pages)])}"
            )
        if a.pool.queue != b.pool.queue[len(new_pages) :]:
            problems.append("the queue after is not the queue before minus the pages taken")
        others = [
            (rr, g)
            for rr in range(len(b.tables))
            for g in range(len(self.rules))
            if not (rr == r and g in groups)
        ]
        if any(a.table(rr, g) != b.table(rr, g) for rr, g in others):
            problems.append("an acquire changed another table")
        return [Verdict("exact-take", not problems, "; ".join(problems))]

    def _check_admit(self, op: Op, s: SideStep) -> list[Verdict]:
        f = s.facts
        vs = [
            Verdict(
                "closed-form",
                f["sequential"] == f["oracle_sequential"],
                f"blocks_needed_for_sequential({op['chunk']}, {op['reserve']}) = "
                f"{f['sequential']}, slot by slot {f['oracle_sequential']}",
            )
        ]
        if s.outcome.raised or not isinstance(f["sequential"], int):
            what = f"{s.outcome.error}: {s.outcome.message}" if s.outcome.raised else "a query"
            return [*vs, Verdict("valid-call", False, f"admit raised {what}")]
        if s.outcome.value == "deferred":
            ok = s.after == s.before
            return [
                *vs,
                Verdict(
                    "sequential-charge",
                    ok,
                    "" if ok else "a deferred admission changed state",
                ),
            ]
        problems: list[str] = []
        charge = f["sequential"]
        if f["chunk_ok"] is not True or f["decode_ok"] is not True:
            problems.append(
                f"charge {charge} <= {f['free_before']} free, yet chunk acquire returned "
                f"{f['chunk_ok']} and decode acquire returned {f['decode_ok']}"
            )
        taken = f["chunk_take"] + f["decode_take"]
        if taken != charge:
            problems.append(
                f"chunk took {f['chunk_take']} + decode took {f['decode_take']} = {taken}, "
                f"sequential charge {charge}"
            )
        hold = charge - f["chunk_need"]
        if hold < 0 or hold != f["decode_take"]:
            problems.append(
                f"decode hold-back charge - blocks_needed_for(chunk) = {hold}, decode took "
                f"{f['decode_take']}"
            )
        if f["peak"] > charge:
            problems.append(f"peak pinned {f['peak']} above the charge {charge}")
        return [*vs, Verdict("sequential-charge", not problems, "; ".join(problems))]

    def _check_reclaim(self, op: Op, s: SideStep) -> list[Verdict]:
        r, fr = op["request"], op["frontier"]
        if s.outcome.raised:
            return [
                Verdict(
                    "valid-call",
                    False,
                    f"reclaim({fr}) raised {s.outcome.error}: {s.outcome.message}",
                )
            ]
        b, a = s.before, s.after
        problems: list[str] = []
        predicted = sum(x for x in s.facts["predicted"] if isinstance(x, int))
        if s.outcome.value != predicted:
            problems.append(f"released {s.outcome.value}, blocks_reclaimable_at said {predicted}")
        released: list[int] = []
        for g in self._groups_of(op):
            tb, ta = b.table(r, g), a.table(r, g)
            bound = oracle_bound(fr, tb.length, self.rules[g])
            left = [s_ for s_ in range(bound) if ta.pages[s_] != 0]
            if left:
                problems.append(f"g{g} real pages left below the bound {bound} at slots {left}")
            floor = max(tb.floor, bound) if self.rules[g].W is not None else tb.floor
            if ta.floor != floor:
                problems.append(f"g{g} floor {ta.floor}, expected {floor}")
            band = range(tb.floor, max(tb.floor, bound))
            exp = tuple(0 if i in band else p for i, p in enumerate(tb.pages))
            if not left and ta.pages != exp:
                problems.append(f"g{g} pages outside the band [{tb.floor}, {bound}) changed")
            released.extend(tb.pages[i] for i in band if tb.pages[i] != 0)
        # A shared page re-enters the queue only when its last holder lets go.
        freed = [p for p in released if b.pool.refs[p] == 1]
        if s.outcome.value != len(freed):
            problems.append(f"returned {s.outcome.value}, {len(freed)} pages became free")
        wrong = check_release(b.pool.queue, a.pool.queue, freed)
        if wrong:
            problems.append(wrong)
        return [Verdict("reclaim", not problems, "; ".join(problems))]

    def _check_free(self, op: Op, s: SideStep) -> list[Verdict]:
        r = op["request"]
        if s.outcome.raised:
            return [
                Verdict("valid-call", False, f"free raised {s.outcome.error}: {s.outcome.message}")
            ]
        b, a = s.before, s.after
        problems: list[str] = []
        released: list[int] = []
        for g in self._groups_of(op):
            ta = a.table(r, g)
            if (ta.length, ta.tail, ta.floor, ta.extent, ta.bound) != (0, 0, 0, 0, False):
                problems.append(f"g{g} not empty and unbound after free: {ta.compact()}")
            released.extend(reversed([p for p in b.table(r, g).pages if p != 0]))
        freed = [p for p in released if b.pool.refs[p] == 1]
        wrong = check_release(b.pool.queue, a.pool.queue, freed)
        if wrong:
            problems.append(wrong)
        return [Verdict("free", not problems, "; ".join(problems))]

    def _resume_floor(self, g: int, b: int) -> int:
        """Reclaim floor a claim of b slots sets: b - R for sliding and state groups."""
        rule_ = self.rules[g]
        if rule_.W is None:
            return 0
        return max(0, b - (-(-(rule_.W - 1) // rule_.B)))

    def _check_cache(self, op: Op, s: SideStep) -> list[Verdict]:
        r, n = op["request"], op["tokens"]
        b, a = s.before, s.after
        problems: list[str] = []
        past = n > min(t.extent for t in b.tables[r])
        if past and s.outcome.error != "ValueError":
            problems.append(f"cache_full_blocks({n}) past the extent gave {s.outcome}")
        elif not past and s.outcome.raised:
            problems.append(f"cache_full_blocks({n}) raised {s.outcome}: {s.outcome.message}")
        if (a.pool.queue, a.pool.refs, a.tables) != (b.pool.queue, b.pool.refs, b.tables):
            problems.append("naming pages moved a page: " + "; ".join(_state_diff(b, a)))
        named = s.outcome.value if isinstance(s.outcome.value, int) else 0
        if b.pool.cached >= 0 and a.pool.cached - b.pool.cached != named:
            problems.append(f"returned {named}; num_cached went {b.pool.cached} -> {a.pool.cached}")
        return [Verdict("cache", not problems, "; ".join(problems))]

    def _check_claim(self, op: Op, s: SideStep) -> list[Verdict]:
        r = op["request"]
        f = s.facts
        if "match_tokens" not in f:
            return [Verdict("valid-call", False, f"match_prefix raised: {s.outcome.message}")]
        problems: list[str] = []
        if not f["match_read_only"]:
            problems.append("match_prefix changed state")
        matched, pages = f["match_tokens"], f["match_pages"]
        geo = self.geometry
        if matched % geo.lcm or matched > f["keys"] * geo.base:
            problems.append(f"matched {matched} tokens: not a multiple of {geo.lcm} in the keys")
        for g, pg in enumerate(pages):
            b_g = matched // geo.groups[g].block_size
            need = [j >= self._resume_floor(g, b_g) for j in range(b_g)]
            if [p != 0 for p in pg] != need:
                problems.append(f"g{g} matched {pg}: real exactly on slots >= {need.count(False)}")
        mid: State = f["_before_claim"]
        fresh = all(t.length == 0 and not t.bound for t in mid.tables[r])
        stale = f["consumed"].startswith("raise")
        if s.outcome.raised:
            if s.outcome.error != "ValueError":
                problems.append(f"claim gave {s.outcome}, expected ValueError or success")
            if s.after != mid:
                diff = "; ".join(_state_diff(mid, s.after))
                problems.append(f"a failed claim changed state: {diff}")
            if fresh and not stale:
                problems.append(f"claim of a valid match into fresh tables: {s.outcome.message}")
            return [Verdict("claim", not problems, "; ".join(problems))]
        if not fresh or stale:
            problems.append(f"claim succeeded on {'used tables' if not fresh else 'a stale match'}")
        taken = mid.pool.num_free - s.after.pool.num_free
        if str(taken) != f["consumed"]:
            problems.append(
                f"claim took {taken} free pages, blocks_consumed_by_claim said {f['consumed']}"
            )
        extra = [0] * len(mid.pool.refs)
        for g, pg in enumerate(pages):
            t = s.after.table(r, g)
            for p in pg:
                extra[p] += p != 0
            floor = self._resume_floor(g, len(pg))
            bound = (True, "pool") if pg else (False, "none")
            if (t.pages, t.tail, t.floor, (t.bound, t.bound_to)) != (tuple(pg), 0, floor, bound):
                problems.append(f"g{g} claimed table {t.compact()}, expected {pg} floor {floor}")
        if list(s.after.pool.refs) != [x + e for x, e in zip(mid.pool.refs, extra)]:
            problems.append("a claim did not add exactly one reference per matched slot")
        return [Verdict("claim", not problems, "; ".join(problems))]

    def _check_bad(self, op: Op, s: SideStep) -> list[Verdict]:
        bad = BAD_CALLS.get(op["call"])
        expect = bad.expect if bad else "?"
        problems = []
        if s.outcome.error != expect:
            problems.append(f"{op['call']} gave {s.outcome}, expected raise {expect}")
        if s.after != s.before:
            problems.append("changed state: " + "; ".join(_state_diff(s.before, s.after)))
        return [Verdict("usage-error", not problems, "; ".join(problems))]

    def _check_conservation(self, s: State) -> Verdict:
        nb = self.geometry.num_blocks
        problems: list[str] = []
        holders = [0] * nb
        for row in s.tables:
            for t in row:
                for p in t.pages:
                    if 0 < p < nb:
                        holders[p] += 1
                    elif p != 0:
                        problems.append(f"page id {p} out of range")
        if len(s.pool.refs) != nb or s.pool.refs[0:1] != (0,):
            problems.append(
                f"ref_counts has {len(s.pool.refs)} entries, page 0 count {s.pool.refs[0:1]}"
            )
        wrong = [p for p in range(1, min(nb, len(s.pool.refs))) if s.pool.refs[p] != holders[p]]
        if wrong:
            p = wrong[0]
            problems.append(f"page {p} count {s.pool.refs[p]} but {holders[p]} slots hold it")
        zero = {p for p in range(1, min(nb, len(s.pool.refs))) if s.pool.refs[p] == 0}
        if len(set(s.pool.queue)) != len(s.pool.queue) or set(s.pool.queue) != zero:
            problems.append("free queue is not exactly the pages with count 0")
        if s.pool.num_free != len(s.pool.queue) or s.pool.num_free + s.pool.num_pinned != nb - 1:
            problems.append(
                f"free {s.pool.num_free} + pinned {s.pool.num_pinned} != {nb - 1} "
                f"(queue length {len(s.pool.queue)})"
            )
        return Verdict("conservation", not problems, "; ".join(problems))

    def _check_shape(self, s: State) -> Verdict:
        problems: list[str] = []
        for r, row in enumerate(s.tables):
            for g, t in enumerate(row):
                B = self.rules[g].B
                name = f"r{r}g{g}"
                if t.length != len(t.pages):
                    problems.append(f"{name} len {t.length} but {len(t.pages)} page ids")
                if not 0 <= t.floor <= t.length:
                    problems.append(f"{name} floor {t.floor} outside [0, {t.length}]")
                if t.length == 0 and (t.tail, t.floor, t.bound, t.extent) != (0, 0, False, 0):
                    problems.append(f"{name} empty but tail/floor/bound/extent = {t.compact()}")
                if t.length > 0 and not (t.bound and 0 <= t.tail < B):
                    problems.append(f"{name} bound={t.bound} tail={t.tail} with {t.length} slots")
                expect = (B, "pool") if t.bound else (0, "none")
                if (t.block_size, t.bound_to) != expect:
                    problems.append(
                        f"{name} remembers block_size {t.block_size} and holds {t.bound_to}, "
                        f"expected {expect[0]} and {expect[1]}"
                    )
                if t.length > 0 and t.extent != t.length * B - t.tail:
                    problems.append(f"{name} extent {t.extent} != {t.length}*{B}-{t.tail}")
                if t.real != sum(1 for p in t.pages if p):
                    problems.append(f"{name} num_real_pages {t.real} miscounts")
                if any(t.pages[: t.floor]):
                    problems.append(f"{name} real page below the floor {t.floor}")
        return Verdict("table-shape", not problems, "; ".join(problems))

    def _check_live(self, side: Side, s: State) -> Verdict:
        problems: list[str] = []
        for r, row in enumerate(s.tables):
            for g, t in enumerate(row):
                created = side.created[r][g]
                rule_ = self.rules[g]
                for slot in range(t.floor, min(t.length, len(created))):
                    live = created[slot] == CLAIMED or oracle_live(slot, created[slot], rule_)
                    if live != (t.pages[slot] != 0):
                        what = (
                            "hole inside the window or a resume page"
                            if live
                            else "real page that is not live"
                        )
                        problems.append(
                            f"r{r}g{g} slot {slot}: {what} (created at frontier {created[slot]})"
                        )
                        break
        return Verdict("live-tail", not problems, "; ".join(problems[:3]))

    def _check_queries(self, s: SideStep) -> Verdict:
        problems: list[str] = []
        for key, out in s.queries.items():
            exp = self.oracle_answer(s.plan[key], s.after)
            if exp == "ValueError":
                if out.error != "ValueError":
                    problems.append(f"{key} gave {out}, expected raise ValueError (int32 limit)")
            elif out.raised:
                problems.append(f"{key} raised {out.error}: {out.message}")
            elif exp is not None and out.value != exp:
                problems.append(f"{key} = {out.value}, slot by slot {exp}")
        more = f" (+{len(problems) - 4} more)" if len(problems) > 4 else ""
        return Verdict("closed-form", not problems, "; ".join(problems[:4]) + more)

    # -- traces ----------------------------------------------------------------------------

    def to_trace(
        self, origin: str, variant: str | None = None, title: str | None = None
    ) -> dict[str, Any]:
        """The ops run so far as a trace (observed = the first failing step, if any)."""
        observed: dict[str, Any] | None = None
        rep = self.failure
        if rep is not None:
            observed = {
                "step": rep.index,
                "properties": rep.failed_properties(),
                "failures": rep.failures,
                "outcomes": {s.label: str(s.outcome) for s in rep.sides},
                "implementations": [s.label for s in rep.sides],
            }
            if title is None:
                props = ", ".join(rep.failed_properties())
                title = f"{props} at step {rep.index}: {describe_op(rep.op)}"
        ops = self.ops if rep is None else self.ops[: rep.index + 1]
        return make_trace(
            [g.to_dict() for g in self.geometry.groups],
            self.geometry.num_blocks,
            self.geometry.num_requests,
            ops,
            title=title or "recorded run",
            origin=origin,
            variant=variant,
            observed=observed,
        )


def _state_diff(a: State, b: State) -> list[str]:
    out: list[str] = []
    if a.pool != b.pool:
        out.append(f"pool {a.pool.compact()} vs {b.pool.compact()}")
        if a.pool.queue != b.pool.queue:
            out.append(f"free queue {list(a.pool.queue)} vs {list(b.pool.queue)}")
        if a.pool.refs != b.pool.refs:
            out.append(f"ref_counts {list(a.pool.refs)} vs {list(b.pool.refs)}")
        if (a.pool.cached, a.pool.cached_free) != (b.pool.cached, b.pool.cached_free):
            out.append(
                f"num_cached/num_cached_free {a.pool.cached}/{a.pool.cached_free} vs "
                f"{b.pool.cached}/{b.pool.cached_free}"
            )
    for r, (ra, rb) in enumerate(zip(a.tables, b.tables)):
        for g, (ta, tb) in enumerate(zip(ra, rb)):
            if ta != tb:
                out.append(
                    f"r{r}g{g} {ta.compact()} bound={ta.bound} vs {tb.compact()} bound={tb.bound}"
                )
    return out


@dataclass(frozen=True)
class Query:
    """One read-only question asked of every implementation after a step.

    name: ``needed`` (args n), ``sequential`` (first, extra) or ``reclaimable``
    (f, count_uncached as 0/1); group None asks the coordinator, else that group's manager.
    """

    name: str
    request: int
    group: int | None
    args: tuple[int, ...]
    # "": plain ints; "numpy": counts passed as numpy.int64 (decisions: __index__ objects
    # are counts); "limit": the largest count the int32 limit allows (must answer);
    # "past-limit": one more (must raise ValueError).
    style: str = ""

    @property
    def key(self) -> str:
        if self.name == "match":
            return f"match_prefix(doc {self.args[0]}, {self.args[1]} tokens)"
        where = f"r{self.request}" if self.group is None else f"r{self.request}g{self.group}"
        tag = f" [{self.style}]" if self.style else ""
        if self.name == "reclaimable":
            extra = "" if self.args[1] else ", count_uncached=False"
            return f"{where} reclaimable({self.args[0]}{extra}){tag}"
        return f"{where} {self.name}({', '.join(map(str, self.args))}){tag}"

    def ask(self, s: Side) -> Any:
        if self.name == "match":
            m = s.coord.match_prefix(doc_keys(self.args[0], self.args[1], s.geometry.base))
            pages = tuple(tuple(int(p) for p in g) for g in m.pages)
            return repr((int(m.num_tokens), pages, int(s.coord.blocks_consumed_by_claim(m))))
        ts = s.tables[self.request]
        args: tuple[Any, ...] = self.args
        if self.style == "numpy":
            args = tuple(numpy.int64(a) for a in self.args)
        if self.group is None:
            if self.name == "needed":
                return s.coord.blocks_needed_for(ts, *args)
            return s.coord.blocks_needed_for_sequential(ts, *args)
        m, t = s.managers[self.group], ts[self.group]
        if self.name == "needed":
            return m.blocks_needed_for(t, *args)
        if self.name == "sequential":
            return m.blocks_needed_for_sequential(t, *args)
        return m.blocks_reclaimable_at(t, args[0], bool(self.args[1]))


# --- the Hypothesis machine -------------------------------------------------------------

PAGE_SIZES = (1, 2, 3, 4, 8, 16)
# "live" twice: live-tail groups are where holes, resume pages and the sequential charge live.
GROUP_KINDS = ("full", "live", "sliding", "live", "state")


@st.composite
def geometries(draw: st.DrawFn) -> Geometry:
    """1-4 groups of mixed kinds and page sizes, windows around B and the lcm, a small pool."""
    n = draw(st.integers(1, 4))
    kinds = [draw(st.sampled_from(GROUP_KINDS)) for _ in range(n)]
    sizes = [draw(st.sampled_from(PAGE_SIZES)) for _ in range(n)]
    lcm = 1
    for b in sizes:
        lcm = lcm * b // math.gcd(lcm, b)
    groups = []
    for kind, B in zip(kinds, sizes):
        if kind in ("sliding", "live"):
            near = sorted({1, 2, B - 1, B, B + 1, lcm - 1, lcm, lcm + 1, 2 * lcm + 1} - {0})
            W = draw(st.one_of(st.sampled_from(near), st.integers(1, 3 * lcm + 8)))
            groups.append(GroupGeometry("sliding", B, W, kind == "live"))
        else:
            groups.append(GroupGeometry(kind, B))
    return Geometry(tuple(groups), draw(st.integers(1, 64)), draw(st.integers(1, 4)))


class Recorder(Protocol):
    """What a sink needs of a world: its first failure and its trace (Lockstep, HostWorld)."""

    @property
    def failure(self) -> Any: ...

    def to_trace(self, origin: str, variant: str | None = None) -> dict[str, Any]: ...


class TraceSink:
    """Collects the trace of the last failing run (Hypothesis runs the shrunk example last)."""

    def __init__(self, origin: str = "differential", variant: str | None = None) -> None:
        self.origin = origin
        self.variant = variant
        self.last: dict[str, Any] | None = None
        self.examples = 0
        self.on_example: Callable[[int], None] | None = None

    def finished(self, world: Recorder | None) -> None:
        self.examples += 1
        if self.on_example is not None:
            self.on_example(self.examples)
        if world is not None and world.failure is not None:
            self.last = world.to_trace(self.origin, self.variant)


def differential_machine(
    impls: Sequence[Impl], sink: TraceSink | None = None
) -> type[RuleBasedStateMachine]:
    """A RuleBasedStateMachine class driving `impls` in lockstep (spec first)."""
    impl_list = list(impls)
    trace_sink = sink if sink is not None else TraceSink()

    class DifferentialMachine(PlanRules, RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.world: Lockstep | None = None
            self.cached_upto = [0, 0]  # tokens named per document so far: prompts to hit

        # -- helpers -----------------------------------------------------------------

        @property
        def w(self) -> Lockstep:
            assert self.world is not None
            return self.world

        def step(self, op: Op) -> None:
            report = self.w.run(op)
            if not report.ok:
                raise StepFailure(report)

        def request(self, data: st.DataObject) -> int:
            return data.draw(st.integers(0, self.w.geometry.num_requests - 1), label="request")

        def group(self, data: st.DataObject) -> int:
            return data.draw(st.integers(0, len(self.w.geometry.groups) - 1), label="group")

        def tokens(self, data: st.DataObject, r: int, g: int | None = None) -> int:
            """0, 1, exact page fills, lcm fills, random sizes, sizes beyond the free pool."""
            s = self.w.state()
            geo = self.w.geometry
            lcm = geo.lcm
            row = s.tables[r]
            groups = [g] if g is not None else list(range(len(geo.groups)))
            fills = []
            for gi in groups:
                t, B = row[gi], geo.groups[gi].block_size
                fills += [t.tail, t.tail + B, t.tail + 2 * B]
            low = min(t.extent for t in row)
            to_lcm = (-low) % lcm
            max_b = max(geo.groups[gi].block_size for gi in groups)
            w_max = max(gr.sliding_window or 1 for gr in geo.groups)
            styles: dict[str, list[int]] = {
                "small": [1, 0, 2],
                "page": sorted(set(fills)),
                "lcm": [to_lcm, to_lcm + lcm, to_lcm + 2 * lcm],
                "beyond": [min((s.pool.num_free + 1) * max_b, 1024)],
                "window": [17, *(gr.sliding_window or 1 for gr in geo.groups)],
                # Long chunks slide most slots out of a live group's window: holes.
                "long": [to_lcm + 3 * lcm + w_max + 1, 4 * lcm + 1, to_lcm + 2 * lcm - 1],
            }
            style = data.draw(st.sampled_from([*styles, "random"]), label="size")
            if style == "random":
                return data.draw(st.integers(0, 3 * lcm + 24), label="tokens")
            return data.draw(st.sampled_from(styles[style]), label="tokens")

        # -- rules ---------------------------------------------------------------------

        @initialize(geometry=geometries())
        def build(self, geometry: Geometry) -> None:
            self.world = Lockstep(geometry, impl_list)

        @rule(data=st.data())
        def admit(self, data: st.DataObject) -> None:
            r = self.request(data)
            chunk = self.tokens(data, r)
            reserve = data.draw(st.sampled_from([1, 2, 0, 3, 4]), label="reserve")
            between = data.draw(st.booleans(), label="reclaim_between")
            op: Op = {"op": "admit", "request": r, "chunk": chunk, "reserve": reserve}
            if between:
                op["reclaim_between"] = True
            self.step(op)

        @rule(data=st.data())
        def acquire(self, data: st.DataObject) -> None:
            r = self.request(data)
            self.step({"op": "acquire", "request": r, "tokens": self.tokens(data, r)})
            self.maybe_reclaim(data, r)

        @rule(data=st.data())
        def decode(self, data: st.DataObject) -> None:
            r = self.request(data)
            self.step({"op": "decode", "request": r})
            self.maybe_reclaim(data, r)

        def maybe_reclaim(self, data: st.DataObject, r: int) -> None:
            """After a forward step an engine names the chunk's pages, then reclaims."""
            low = min(t.extent for t in self.w.state().tables[r])
            if self.w.prefix and data.draw(st.booleans(), label="cache after"):
                self.step({"op": "cache", "request": r, "doc": r % 2, "tokens": low})
                self.cached_upto[r % 2] = max(self.cached_upto[r % 2], low)
            if data.draw(st.booleans(), label="reclaim after"):
                self.step({"op": "reclaim", "request": r, "frontier": low})

        @rule(data=st.data())
        def reclaim(self, data: st.DataObject) -> None:
            r = self.request(data)
            row = self.w.state().tables[r]
            low = min(t.extent for t in row)
            # The computed frontier (again: a repeat frees nothing), or behind it / the floor.
            f = data.draw(st.sampled_from([low, low, 0]) | st.integers(0, low), label="frontier")
            self.step({"op": "reclaim", "request": r, "frontier": f})

        @rule(data=st.data())
        def free(self, data: st.DataObject) -> None:
            r = self.request(data)
            if data.draw(st.booleans(), label="one group"):
                self.step({"op": "group_free", "request": r, "group": self.group(data)})
            else:
                self.step({"op": "free", "request": r})

        @rule(data=st.data())
        def group_acquire(self, data: st.DataObject) -> None:
            r, g = self.request(data), self.group(data)
            n = self.tokens(data, r, g)
            self.step({"op": "group_acquire", "request": r, "group": g, "tokens": n})

        @rule(data=st.data())
        def group_reclaim(self, data: st.DataObject) -> None:
            r, g = self.request(data), self.group(data)
            ext = self.w.state().table(r, g).extent
            f = data.draw(st.one_of(st.just(ext), st.integers(0, ext)), label="frontier")
            self.step({"op": "group_reclaim", "request": r, "group": g, "frontier": f})

        @rule(data=st.data())
        def bad_call(self, data: st.DataObject) -> None:
            r, g = self.request(data), self.group(data)
            s = self.w.state()
            names = [n for n, b in BAD_CALLS.items() if b.applicable(s, self.w.geometry, r, g)]
            name = data.draw(st.sampled_from(names), label="call")
            self.step({"op": "bad", "call": name, "request": r, "group": g})

        # -- prefix caching (only when every implementation has it) ------------------

        @precondition(lambda self: self.world is not None and self.world.prefix)
        @rule(data=st.data())
        def cache(self, data: st.DataObject) -> None:
            r = self.request(data)
            low = min(t.extent for t in self.w.state().tables[r])
            n = data.draw(st.sampled_from([low, low, low + 1]) | st.integers(0, low))
            self.step({"op": "cache", "request": r, "doc": r % 2, "tokens": n})
            if n <= low:
                self.cached_upto[r % 2] = max(self.cached_upto[r % 2], n)

        @precondition(lambda self: self.world is not None and self.world.prefix)
        @rule(data=st.data())
        def claim(self, data: st.DataObject) -> None:
            """A new request in a recycled slot: match its prompt and claim the hit."""
            r = self.request(data)
            row = self.w.state().tables[r]
            if any(t.bound for t in row) and data.draw(
                st.sampled_from([True, True, True, False]), label="free first"
            ):
                self.step({"op": "free", "request": r})
            lcm = self.w.geometry.lcm
            doc = data.draw(st.sampled_from([r % 2, 1 - r % 2]), label="doc")
            seen = self.cached_upto[doc]
            n = data.draw(
                st.sampled_from([seen, seen + lcm, seen + 1, 4 * lcm + SHARED_PREFIX, lcm])
                | st.integers(0, 8 * lcm + SHARED_PREFIX),
                label="prompt tokens",
            )
            op: Op = {"op": "claim", "request": r, "doc": doc, "tokens": n}
            if data.draw(st.booleans(), label="acquire between"):
                e = self.request(data)
                op["between_request"] = e
                op["between_tokens"] = self.tokens(data, e)
            self.step(op)

        def teardown(self) -> None:
            trace_sink.finished(self.world)

    return DifferentialMachine


def run_trace(
    trace: dict[str, Any], impls: Sequence[Impl], *, stop_at_failure: bool = True
) -> tuple[Any, list[Any]]:
    """Run a (validated) trace's ops in lockstep; stops after the first failing step.

    A host-tier trace (geometry ``host_blocks``) runs on ``machine_host.HostWorld``, any
    other on ``Lockstep``; both worlds and reports answer ``failure``, ``to_trace``,
    ``ok``, ``index`` and ``failed_properties()`` alike.
    """
    geometry = trace_geometry(trace)
    if geometry.host_blocks is not None:
        from .machine_host import run_host_trace

        return run_host_trace(trace, impls, stop_at_failure=stop_at_failure)
    world = Lockstep(geometry, impls)
    reports = []
    for op in trace["ops"]:
        rep = world.run(op)
        reports.append(rep)
        if not rep.ok and stop_at_failure:
            break
    return world, reports
