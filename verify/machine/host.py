"""Host tier (semantics section 10) in lockstep, with the data oracle (section 7 item 11).

Two layers, as for the device machine (``verify/machine/lockstep.py`` and ``rules.py``):

* ``HostWorld`` (here) runs one host op (``host_*`` op dicts of ``verify/trace.py``) on every
  implementation (normally the spec and the native module): requests compute chunks
  (acquire, name, reclaim, as an engine does), offload (plan, then complete or abort), are
  freed, come back through a match across tiers and a claim with loads, and complete their
  loads; plus usage errors.  After every op the implementations' full state must agree:
  device and host queues, reference counts, name counts, tables, the plans' arrays, events
  of both tiers and both pools' counters.  ``livetail replay`` and the minimizer drive it
  from a trace; ``run_trace`` (``verify/machine/lockstep.py``) picks it for a trace whose
  geometry has ``host_blocks``.
* ``host_machine`` (``verify/machine/host_rules.py``) wraps it in a Hypothesis
  ``RuleBasedStateMachine`` whose rules draw the ops; a failing run becomes a trace through
  ``TraceSink``.

One implementation's side (``HostSide``) and the step records are in
``verify/machine/host_side.py``.

The data oracle tracks what each device and host page holds, written here from the
semantics alone: computing a chunk writes each real slot's position content into its page,
a completed offload copies device -> host page by the plan, a completed load host ->
device. After every op it checks that every named page holds its name's content (spec
side, where names are visible), that every slot a query of a request can read holds the
content of its position (a hole there is a failure), and that an offload plan holds
exactly the reachable named pages whose names the host lacked.

Property names (traces, replay output, docs/traces.md):

``agree``             every implementation returned the same and holds the same state,
                      events and counters
``host-data``         the data oracle: named pages hold their names' content, every slot a
                      query reads holds its position's content
``offload-set``       an offload plan holds exactly the reachable named pages the host lacked
``valid-call``        a valid call did not raise
``ends-once``         completing or aborting an ended plan raised ValueError, changed nothing
``claim``             a failed claim raised ValueError and changed nothing, and failed only
                      on too few free device pages (or tables in use)
``free-aborts-load``  free aborted the request's pending load; completing it then raised
                      ValueError and changed nothing
``usage-error``       a ``host_bad`` call raised ValueError and changed nothing
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..trace import HOST_BAD_CALLS, Geometry, Op, trace_geometry
from .host_side import (
    STATE_PARTS,
    Content,
    HostSide,
    HostSideStep,
    HostStepReport,
    _attempt,
    _ints,
    _short,
    _show,
    describe_outcome,
    plan_arrays,
)
from .oracle import doc_keys
from .side import Impl, Verdict
from .step import describe_op, recorded_trace, run_ops


class HostWorld:
    """Every implementation advanced by the same host ops; `run` checks one op."""

    def __init__(self, geometry: Geometry, impls: Sequence[Impl], *, lines: bool = False) -> None:
        """`lines`: keep each side's state lines per step (replay prints them)."""
        if not impls:
            raise ValueError("need at least one implementation")
        if geometry.host_blocks is None:
            raise ValueError("a host-tier world needs geometry.host_blocks")
        self.geometry = geometry
        self.layout = [
            (g.kind, g.block_size, g.sliding_window, g.live_tail_alloc) for g in geometry.groups
        ]
        self.base = geometry.base
        self.align = geometry.align  # boundaries: its multiples (semantics 13.9)
        self.sides = [HostSide.build(i, geometry) for i in impls]
        n = geometry.num_requests
        self.doc = list(range(n))  # distinct prompts beyond a shared prefix
        self.computed = [0] * n
        self.ops: list[Op] = []
        self.failure: HostStepReport | None = None
        self.lines = lines
        for s in self.sides:  # set-up events are nobody's step
            s.pool.take_events()
            s.host.take_events()

    @property
    def reference(self) -> HostSide:
        return self.sides[0]

    def pending_load(self, r: int) -> bool:
        return self.reference.loads[r] is not None

    def fresh(self, r: int) -> bool:
        return not any(t.is_bound or len(t) for t in self.reference.tables[r])

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
        C = self.geometry.groups[g].attention_chunk_size
        if kind == "chunked" and C is not None:  # section 13.2: keys [floor(c / C) * C, c]
            lo = c // C * C
        return range(lo // B, (c - 1) // B + 1) if c > lo else range(0)

    def reachable(self, r: int, n: int, side: HostSide) -> list[tuple[int, int]]:
        """(group, slot) of the reachable named slots up to n (section 10), group then slot."""
        out = []
        for g, (kind, B, W, _) in enumerate(self.layout):
            if kind == "full":
                slots = list(range(n // B))
            else:
                R = 1 if kind == "state" or W is None else -(-(W - 1) // B)
                C = self.geometry.groups[g].attention_chunk_size
                wanted = {
                    j
                    for T in range(self.align, n + 1, self.align)
                    for j in range(
                        T // C * C // B if C is not None else max(0, T // B - R), T // B
                    )
                }
                slots = sorted(wanted)
            t = side.tables[r][g]
            for j in slots:
                p = int(t.page_ids()[j])
                if p and side.pool._name(p) is not None:
                    out.append((g, j))
        return out

    # -- the step ----------------------------------------------------------------------

    def run(self, op: Op) -> HostStepReport:
        """Apply `op` on every side, compare, check; records the op (and any failure)."""
        self.ops.append(dict(op))
        steps = []
        for s in self.sides:
            st_ = HostSideStep(s.label, None)
            try:
                st_.outcome = self._apply(s, op, st_)
            except Exception as e:  # a call the step did not expect to raise
                st_.outcome = f"raise {type(e).__name__}"
                st_.require(
                    "valid-call", False, f"{describe_op(op)} raised {type(e).__name__}: {e}"
                )
            steps.append(st_)
        self._advance(op, steps[0].outcome)
        for s, st_ in zip(self.sides, steps):
            st_.observed = (
                s.state(),
                (s.pool.take_events(), s.host.take_events()),
                (s.coord.stats(), s.host.stats()),
            )
            if self.lines:
                st_.lines = s.summary(op.get("request", 0))
            problems = self.content_problems(s)
            more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
            st_.require("host-data", not problems, "; ".join(problems[:3]) + more)
        report = HostStepReport(len(self.ops) - 1, dict(op), steps, self._agree(steps))
        if not report.ok and self.failure is None:
            self.failure = report
        return report

    def _agree(self, steps: list[HostSideStep]) -> Verdict:
        ref = steps[0]
        problems = []
        for s in steps[1:]:
            if s.outcome != ref.outcome:
                problems.append(
                    f"{ref.label} returned {describe_outcome(ref.outcome)}, "
                    f"{s.label} {describe_outcome(s.outcome)}"
                )
            (st_a, ev_a, ct_a), (st_b, ev_b, ct_b) = ref.observed, s.observed
            for part, a, b in zip(STATE_PARTS, st_a, st_b):
                if a != b:
                    problems.append(f"{part} {a} vs {b}")
            if ev_a != ev_b:
                problems.append(f"events {_short(ev_a)} vs {_short(ev_b)}")
            for tier, a, b in zip(("device", "host"), ct_a, ct_b):
                keys = [k for k in sorted({*a, *b}) if a.get(k) != b.get(k)]
                if keys:
                    problems.append(
                        f"{tier} counters "
                        + ", ".join(f"{k} {a.get(k)} vs {b.get(k)}" for k in keys)
                    )
        return Verdict("agree", not problems, "; ".join(problems[:4]))

    def _advance(self, op: Op, ref: Any) -> None:
        """The world's own bookkeeping, from the reference side's outcome."""
        kind = op["op"]
        if not isinstance(ref, dict):
            return
        r = op.get("request", 0)
        if kind == "host_compute" and ref.get("acquired"):
            self.computed[r] += op["tokens"]
        elif kind == "host_claim" and ref.get("raised") is None and ref["match"][0] > 0:
            self.doc[r] = op["doc"]
            self.computed[r] = ref["match"][0]
        elif kind == "host_free":
            self.computed[r] = 0

    # -- applying ops --------------------------------------------------------------------

    def _apply(self, s: HostSide, op: Op, st_: HostSideStep) -> Any:
        kind = op["op"]
        r = op.get("request", 0)
        if kind == "host_compute":
            return self._compute(s, r, op["tokens"], st_)
        if kind == "host_offload":
            n = min(op["tokens"], self.computed[r])
            return self._offload(s, r, n, st_, op.get("max_pages"))
        if kind in ("host_complete_offload", "host_abort_offload"):
            return self._end_offload(s, op["plan"], kind == "host_complete_offload", st_)
        if kind == "host_claim":
            return self._claim(s, r, op["doc"], op["tokens"], st_)
        if kind == "host_complete_load":
            return self._complete_load(s, r, st_)
        if kind == "host_evict":
            return self._evict(s, op["tokens"])
        if kind == "host_free":
            return self._free(s, r, st_)
        if kind == "host_bad":
            return self._bad(s, op["call"], r, st_)
        raise ValueError(f"not a host op: {kind!r}")

    def _compute(self, s: HostSide, r: int, n: int, st_: HostSideStep) -> Any:
        """Acquire a chunk, compute it (write its pages), name, reclaim: an engine step."""
        if self.pending_load(r):
            return "skipped: the engine completes a load before computing past it"
        c0 = self.computed[r]
        ts = s.tables[r]
        ok, err = _attempt(s.coord.acquire, ts, n)
        st_.require("valid-call", err is None, f"a valid acquire raised {err}")
        if not ok:
            return {"acquired": ok}
        for g, t in enumerate(ts):
            B = self.layout[g][1]
            ids = _ints(t.page_ids())
            for j in range(c0 // B, (c0 + n - 1) // B + 1):
                if ids[j]:
                    s.content[ids[j]] = self.position_content(r, g, j, c0 + n)
        keys = doc_keys(self.doc[r], c0 + n, self.base)
        named = s.coord.cache_full_blocks(ts, keys, c0 + n)
        back = s.coord.reclaim_expired(ts, c0 + n)
        return {"acquired": True, "named": int(named), "reclaimed": int(back)}

    def _offload(
        self, s: HostSide, r: int, n: int, st_: HostSideStep, max_pages: int | None = None
    ) -> Any:
        want = None
        if s.is_spec:
            host_names = set(s.host._pages_named)
            want = [
                (g, j)
                for g, j in self.reachable(r, n, s)
                if s.pool._name(int(s.tables[r][g].page_ids()[j])) not in host_names
            ]
            if max_pages is not None and max_pages < len(want):
                # Section 13.7: the first max_pages by the aligned boundary each slot first
                # serves (lowest first), then group, then slot; listed by group then slot.
                def first_boundary(e: tuple[int, int]) -> tuple[int, int, int]:
                    return (e[1] * self.layout[e[0]][1] // self.align + 1, *e)

                chosen = set(sorted(want, key=first_boundary)[:max_pages])
                want = [e for e in want if e in chosen]
        if max_pages is None:
            plan, err = _attempt(s.coord.plan_offload, s.tables[r], n)
        else:
            plan, err = _attempt(lambda: s.coord.plan_offload(s.tables[r], n, max_pages=max_pages))
        st_.require("valid-call", err is None, f"a valid plan_offload raised {err}")
        if plan is not None:
            s.offloads.append(plan)
            got = list(zip(_ints(plan.groups), _ints(plan.slots)))
            # Oracle: exactly the reachable named pages whose names the host lacked.
            if want is not None:
                st_.require("offload-set", got == want, f"offload plan {got}, reachable {want}")
        return {"tokens": n, "plan": plan_arrays(plan)}

    def _end_offload(self, s: HostSide, back: int, complete: bool, st_: HostSideStep) -> Any:
        """Complete or abort the plan `back` places before the latest (0: the latest)."""
        k = len(s.offloads) - 1 - back
        if k < 0:
            return f"skipped: {len(s.offloads)} offload plan(s)"
        plan = s.offloads[k]
        pending = str(plan.state) == "pending"
        fn = s.coord.complete_offload if complete else s.coord.abort_offload
        before = s.state()
        _, err = _attempt(fn, plan)
        if err is None and complete:  # the engine copied each device page to its host page
            for dp, hp in zip(_ints(plan.device_pages), _ints(plan.host_pages)):
                s.hcontent[hp] = s.content.get(dp, ("garbage",))
        if not pending:
            st_.require(
                "ends-once",
                err == "ValueError" and s.state() == before,
                f"ending a plan that ended raised {err}"
                + ("" if s.state() == before else " and changed the state"),
            )
        else:
            st_.require("valid-call", err is None, f"ending a pending plan raised {err}")
        return {"plan": k, "raised": err}

    def _claim(self, s: HostSide, r: int, d: int, tokens: int, st_: HostSideStep) -> Any:
        """A freed request comes back: match across tiers, then claim with loads."""
        fresh = not any(t.is_bound or len(t) for t in s.tables[r])
        keys = doc_keys(d, tokens, self.base)
        m = s.coord.match_prefix(keys)
        hit = (int(m.num_tokens), [_ints(p) for p in m.pages], [_ints(p) for p in m.host_pages])
        consumed, _ = _attempt(s.coord.blocks_consumed_by_claim, m)
        free = int(s.pool.num_free)
        before = s.state()
        plan, err = _attempt(s.coord.claim, s.tables[r], m)
        if err is not None and err != "ValueError":
            st_.require("valid-call", False, f"claim raised {err}")
        elif err is not None:
            st_.require(
                "claim", s.state() == before, "a claim raised ValueError and changed the state"
            )
            st_.require(
                "claim",
                not fresh or (consumed is not None and consumed > free),
                f"a claim failed with enough free pages ({consumed} of {free})",
            )
        else:
            st_.require("claim", fresh, "a claim into tables in use went through")
            if plan is not None:
                s.loads[r] = plan
                for dp in _ints(plan.device_pages):
                    s.content[dp] = ("unloaded", dp)  # fresh: holds nothing until the copy
        return {"match": hit, "consumed": consumed, "raised": err, "load": plan_arrays(plan)}

    def _complete_load(self, s: HostSide, r: int, st_: HostSideStep) -> Any:
        plan = s.loads[r]
        if plan is None:
            return "skipped: no pending load"
        _, err = _attempt(s.coord.complete_load, plan)
        st_.require("valid-call", err is None, f"complete_load of a pending load raised {err}")
        if err is None:  # the engine copied each host page into its device page
            for hp, dp in zip(_ints(plan.host_pages), _ints(plan.device_pages)):
                s.content[dp] = s.hcontent.get(hp, ("garbage",))
            s.loads[r] = None
        return {"raised": err}

    def _evict(self, s: HostSide, tokens: int) -> Any:
        """Another request takes up to `tokens` tokens (as many as fit) and leaves: its
        allocation evicts old device names."""
        ts = s.coord.new_tables()
        k = tokens
        while k and s.coord.blocks_needed_for(ts, k) > s.pool.num_free:
            k -= 1
        ok = s.coord.acquire(ts, k)
        for t in ts:  # what it computed is garbage to the oracle
            for p in _ints(t.page_ids()):
                if p:
                    s.content[p] = ("scratch", p)
        s.coord.free(ts)
        return {"tokens": k, "acquired": bool(ok)}

    def _free(self, s: HostSide, r: int, st_: HostSideStep) -> Any:
        plan = s.loads[r]
        s.coord.free(s.tables[r])
        s.loads[r] = None
        if plan is not None:
            st_.require(
                "free-aborts-load",
                str(plan.state) == "aborted",
                f"free left its pending load {plan.state}",
            )
            before = s.state()
            _, err = _attempt(s.coord.complete_load, plan)
            st_.require(
                "free-aborts-load",
                err == "ValueError" and s.state() == before,
                f"completing a freed load raised {err}"
                + ("" if s.state() == before else " and changed the state"),
            )
            return {"aborted load": True}
        return {"aborted load": False}

    def _bad(self, s: HostSide, call: str, r: int, st_: HostSideStep) -> Any:
        """Usage errors: ValueError, nothing changed."""
        before = s.state()
        if call == "offload-without-host":
            _, err = _attempt(s.bare.plan_offload, s.bare.new_tables(), 0)
        elif call == "complete-offload-foreign":
            if not s.offloads:
                return "skipped: no offload plan"
            _, err = _attempt(s.other.complete_offload, s.offloads[-1])
        elif call == "complete-load-foreign":
            if s.loads[r] is None:
                return "skipped: no pending load"
            _, err = _attempt(s.other.complete_load, s.loads[r])
        elif call == "offload-past-extent":
            _, err = _attempt(s.coord.plan_offload, s.tables[r], self.computed[r] + 1_000)
        else:
            raise ValueError(f"unknown host_bad call {call!r}; known: {HOST_BAD_CALLS}")
        changed = s.state() != before
        st_.require(
            "usage-error",
            err == "ValueError" and not changed,
            f"usage error {call} gave {err}" + (" and changed the state" if changed else ""),
        )
        return {"raised": err}

    # -- the data oracle -------------------------------------------------------------------

    def content_problems(self, s: HostSide) -> list[str]:
        out = []
        if s.is_spec:
            for p, name in s.pool._name_of.items():
                if s.content.get(p) != name:
                    out.append(f"device page {p} named {name[0]} holds other")
            for hp, name in s.host._name_of.items():
                if s.hcontent.get(hp) != name:
                    out.append(f"host page {hp} named {name[0]} holds other")
        for r in range(self.geometry.num_requests):
            c = self.computed[r]
            if c == 0 or s.loads[r] is not None:
                continue  # nothing computed, or the engine must not read before the load
            for g, t in enumerate(s.tables[r]):
                ids = _ints(t.page_ids())
                for j in self.read_slots(g, c):
                    if j >= len(ids) or ids[j] == 0:
                        out.append(f"request {r} group {g} slot {j}: a query reads a hole")
                        continue
                    got = s.content.get(ids[j])
                    want = self.position_content(r, g, j, c)
                    if got != want:
                        out.append(
                            f"request {r} group {g} slot {j} holds {_show(got)}, not {_show(want)}"
                        )
        return out

    # -- traces ----------------------------------------------------------------------------

    def to_trace(
        self, origin: str, variant: str | None = None, title: str | None = None
    ) -> dict[str, Any]:
        """The ops run so far as a trace (observed = the first failing step, if any)."""
        return recorded_trace(
            self.geometry,
            self.ops,
            self.failure,
            origin,
            variant,
            title,
            tier="host tier",
            untitled="recorded host-tier run",
            describe=describe_outcome,
        )


def run_host_trace(
    trace: dict[str, Any], impls: Sequence[Impl], *, stop_at_failure: bool = True
) -> tuple[HostWorld, list[HostStepReport]]:
    """Run a (validated) host-tier trace's ops in lockstep; stops after the first failure."""
    world = HostWorld(trace_geometry(trace), impls)
    return world, run_ops(world, trace["ops"], stop_at_failure)
