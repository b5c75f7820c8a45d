"""The lockstep core of the differential machine: implementations in lockstep, checked every step.

``LockstepCore`` runs one operation (an op dict of ``verify/trace.py``) on every
implementation (normally the spec and the native module), compares their full state and
every query's answer, and checks the section-7 properties on each side
(``verify/machine/checks.py``) against an *oracle* written from ``semantics.md`` alone
(``verify/machine/oracle.py``: it never calls the spec, so a wrong spec variant cannot bend
it).  Ops of a plug-in (``Extension``: names, plans) are run and judged by the plug-in; the
core imports none of them: ``verify/machine/lockstep.py`` composes them into ``Lockstep``,
which replay (``verify/replay.py``) uses directly and ``differential_machine``
(``verify/machine/rules.py``) wraps in a Hypothesis ``RuleBasedStateMachine``.

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
``one-request``     a coordinator op on a request whose tables' extents differ raised
                    ValueError (an admission: its charge did, so it was deferred) and
                    changed nothing
``valid-call``      a valid call did not raise
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .. import events as counters_events
from ..trace import Geometry, Op
from .bad_calls import BAD_CALLS
from .checks import LockstepChecks
from .oracle import SHARED_PREFIX, GroupRule, Shape, doc_keys, doc_tokens, oracle_sequential
from .side import Impl, Outcome, Side, State, call
from .step import Extension, Query, SideStep, StepReport, recorded_trace

INT32_MAX = 2**31 - 1


class LockstepCore(LockstepChecks):
    """Every implementation advanced by the same ops; `run` checks one step.

    The core runs the ops of ``verify/trace.py`` that are not a plug-in's; a subclass lists
    its plug-ins in ``extensions`` (``verify/machine/lockstep.py``: names and plans).
    """

    extensions: tuple[Extension, ...] = ()

    def __init__(self, geometry: Geometry, impls: Sequence[Impl]) -> None:
        if not impls:
            raise ValueError("need at least one implementation")
        self.plugged = {kind: ext for ext in self.extensions for kind in ext.ops}
        self.geometry = geometry
        self.rules = [GroupRule.of(g, geometry.align) for g in geometry.groups]
        self.sides = [Side(i, geometry) for i in impls]
        # Prefix ops run only when every side has section 8.
        self.prefix = all(side.prefix for side in self.sides)
        for side in self.sides:
            side.read_names = self.prefix
        self.named = False  # a cache op ran: pages may carry names
        # Plan ops run only when every side has section 9.
        self.plans = all(hasattr(side.coord, "plan_step") for side in self.sides)
        # Detach ops run only when every side has section 12's deferred free.
        self.detach = self.prefix and all(hasattr(side.coord, "detach") for side in self.sides)
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
            n = op["tokens"]
            keys = doc_keys(op["doc"], n, self.geometry.base)
            if op.get("with_tokens", False):
                toks = doc_tokens(op["doc"], n)
                return call(side.coord.cache_full_blocks, ts, keys, n, toks)
            return call(side.coord.cache_full_blocks, ts, keys, n)
        if kind == "claim":
            return self._claim(side, r, op, facts)
        if kind == "bad":
            bad = BAD_CALLS.get(op["call"])
            if bad is None:
                return Outcome(error="UnknownBadCall", message=op["call"])
            return call(bad.run, side, r, op["group"])
        plug = self.plugged.get(kind)
        if plug is not None:
            return plug.apply(self, side, op, facts)
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
        charge = call(side.coord.blocks_needed_for_sequential, ts, chunk, reserve)
        facts["sequential"] = charge.value
        facts["sequential_error"] = charge.error
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
        lcm = self.geometry.align  # the alignment: hits and resume pages sit on its multiples
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

    # -- traces ----------------------------------------------------------------------------

    def to_trace(
        self, origin: str, variant: str | None = None, title: str | None = None
    ) -> dict[str, Any]:
        """The ops run so far as a trace (observed = the first failing step, if any)."""
        return recorded_trace(self.geometry, self.ops, self.failure, origin, variant, title)

