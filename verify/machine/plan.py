"""Step plans (semantics section 9) in the differential machine: the `plan` op, a plug-in of
the lockstep core (``PLANS``, composed in ``verify/machine/lockstep.py``).

`plan` plans one step over the requests whose bit is set in `mask`, in priority order
starting at request `first` (ascending, wrapping), each asking for `tokens`; then, if given,
acquires `between_tokens` for `between_request` (which may make the plan stale), then applies
the plan. `bad` (1-4) makes it a usage error instead: a table in two requests, a table of
another pool, a plan of another coordinator, a plan applied twice.

The oracle (property `step-plan`) recomputes the plan by definition from the state before:
need_i by blocks_needed_for, released(S) as the distinct pages whose every reference the
tables of S hold; it checks the plan's figures, that a fresh plan applies (the preempted
tables empty and unbound, the stepped ones grown by their tokens, free pages = free_after),
and that a stale or bad plan raises ValueError and changes nothing.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from .side import Outcome, Side, Verdict, call
from .step import Extension, SideStep

PLAN_OPS = ("plan",)
BAD_PLANS = {
    1: "a table in two requests",
    2: "a foreign table",
    3: "another coordinator",
    4: "applied twice",
}


def plan_order(op: dict[str, Any], num_requests: int) -> list[int]:
    rs = [(op["first"] + i) % num_requests for i in range(num_requests)]
    return [r for r in rs if op["mask"] >> r & 1]


def _fields(p: Any) -> tuple[int, int, int, int, int, bool]:
    return (
        int(p.stepped),
        int(p.preempted),
        int(p.pages_taken),
        int(p.pages_released),
        int(p.free_after),
        bool(p.top_fits),
    )


def _attempt(fn: Any, *args: Any) -> tuple[Any, str | None, str]:
    try:
        return fn(*args), None, ""
    except Exception as e:  # an observation to compare across sides
        return None, type(e).__name__, str(e)


def apply_plan_op(world: Any, side: Side, op: dict[str, Any], facts: dict[str, Any]) -> Outcome:
    """Run a `plan` op on one side; returns an Outcome (value: the plan's figures)."""
    order = plan_order(op, world.geometry.num_requests)
    n = op["tokens"]
    facts["order"] = order
    facts["needs"] = [call(side.coord.blocks_needed_for, side.tables[r], n).value for r in order]
    requests: list[tuple[Any, int]] = [(side.tables[r], n) for r in order]
    extents = {r: [int(t.extent) for t in side.tables[r]] for r in order}
    bad = op.get("bad", 0)
    if bad == 1:
        dup = order[0] if order else op["first"] % world.geometry.num_requests
        if not order:
            requests.append((side.tables[dup], n))
        requests.append((side.tables[dup], 1))
    elif bad == 2:
        foreign = side.other_coord.new_tables()
        side.other_coord.acquire(foreign, 1)
        requests.append((foreign, 1))
    coord = side.other_coord if bad == 3 else side.coord
    if bad == 3:
        requests = [(side.other_coord.new_tables(), 1)]
    plan, err, msg = _attempt(coord.plan_step, requests)
    if bad == 2:
        side.other_coord.free(foreign)  # the other pool stays free for the next abuse
    if err is not None:
        return Outcome(error=err, message=msg)
    figures = _fields(plan)
    if "between_request" in op:
        before = side.state()
        side.acquire(op["between_request"], op["between_tokens"])
        mid = side.state()
        # Stale: the queue or a count changed, or a table of the plan did (section 9).
        facts["between_changed"] = (before.pool.queue, before.pool.refs) != (
            mid.pool.queue,
            mid.pool.refs,
        ) or any(before.tables[r] != mid.tables[r] for r in order)
        facts["mid"] = mid

    def note_applied() -> None:  # the machine's shadow of each slot's creation frontier
        for i, r in enumerate(order):
            for g in range(len(side.tables[r])):
                if i < figures[0]:
                    side.note_shape(r, g, extents[r][g] + n)
                else:
                    side.note_free(r, g)
            if i < figures[0] and n > 0:
                side.note_owned(r)

    if bad == 4:
        _, err, _ = _attempt(side.coord.apply_step, plan)
        if err is None:
            note_applied()
        facts["mid"] = side.state()
    _, err, msg = _attempt(side.coord.apply_step, plan)
    if err is not None:
        return Outcome(error=err, message=msg)
    note_applied()
    return Outcome(value=repr(figures))


def _released(before: Any, requests: list[int]) -> int:
    held: dict[int, int] = {}
    for r in requests:
        for t in before.tables[r]:
            for p in t.pages:
                if p:
                    held[p] = held.get(p, 0) + 1
    return sum(1 for p, c in held.items() if c == before.pool.refs[p])


def check_plan_op(world: Any, op: dict[str, Any], s: SideStep) -> list[Verdict]:
    """The `step-plan` verdict for one side's `plan` step."""
    b, a, out, facts = s.before, s.after, s.outcome, s.facts
    order: list[int] = facts.get("order", [])
    needs = facts.get("needs", [])
    problems: list[str] = []
    bad = op.get("bad", 0)
    if bad:
        expect = facts.get("mid", b) if bad == 4 else b
        if out.error != "ValueError":
            problems.append(f"{BAD_PLANS.get(bad, bad)}: got {out}, expected ValueError")
        if a != expect:
            problems.append(f"{BAD_PLANS.get(bad, bad)}: the state changed")
        return [Verdict("step-plan", not problems, "; ".join(problems))]
    if any(not isinstance(x, int) for x in needs):
        ok = out.raised
        return [Verdict("step-plan", ok, "" if ok else f"plan of a bad ask gave {out}")]
    k_best = max(
        k
        for k in range(len(order) + 1)
        if sum(needs[:k]) <= b.pool.num_free + _released(b, order[k:])
    )
    released = _released(b, order[k_best:])
    taken = sum(needs[:k_best])
    top = not order or needs[0] <= b.pool.num_free + _released(b, order[1:])
    want = repr(
        (k_best, len(order) - k_best, taken, released, b.pool.num_free + released - taken, top)
    )
    if facts.get("between_changed"):
        if out.error != "ValueError":
            problems.append(f"a stale plan gave {out}, expected ValueError")
        if a != facts["mid"]:
            problems.append("a stale plan changed the state")
        return [Verdict("step-plan", not problems, "; ".join(problems))]
    if out.raised:
        return [Verdict("step-plan", False, f"a fresh plan raised {out.error}: {out.message}")]
    if out.value != want:
        problems.append(f"plan {out.value}, by definition {want}")
    if a.pool.num_free != b.pool.num_free + released - taken:
        problems.append(f"free pages {a.pool.num_free} after apply, plan said free_after")
    for i, r in enumerate(order):
        for g, (tb, ta) in enumerate(zip(b.tables[r], a.tables[r])):
            if i < k_best:
                if ta.extent != tb.extent + op["tokens"]:
                    problems.append(f"stepped request {r} g{g} extent {ta.extent}")
            elif ta.bound or ta.length:
                problems.append(f"preempted request {r} g{g} not empty and unbound")
    return [Verdict("step-plan", not problems, "; ".join(problems))]


def _check(world: Any, side: Side, op: dict[str, Any], s: SideStep) -> list[Verdict]:
    return check_plan_op(world, op, s)


PLANS = Extension(PLAN_OPS, apply_plan_op, _check)


class PlanRules:
    """Mixed into the differential machine: the `plan` rule."""

    @precondition(lambda self: self.world is not None and self.world.plans)
    @rule(data=st.data())
    def plan(self: Any, data: st.DataObject) -> None:
        n = self.w.geometry.num_requests
        mask = data.draw(st.integers(0, 2**n - 1), label="mask")
        first = data.draw(st.integers(0, n - 1), label="first")
        op: dict[str, Any] = {
            "op": "plan",
            "mask": mask,
            "first": first,
            "tokens": self.tokens(data, first),
        }
        extra = data.draw(st.sampled_from(["none", "none", "stale", "bad"]), label="extra")
        if extra == "stale":
            e = self.request(data)
            op["between_request"] = e
            op["between_tokens"] = self.tokens(data, e)
        elif extra == "bad":
            op["bad"] = data.draw(st.integers(1, 4), label="bad")
        self.step(op)
