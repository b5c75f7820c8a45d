"""Semantics 13.6 in the differential machine: fork and copy_tail (ops of ``verify/trace.py``),
their oracle and their Hypothesis rules; a plug-in of the lockstep core (``FORKS``, composed in
``verify/machine/lockstep.py``).

The oracle (property ``fork``) is written from the semantics alone, on the state before:

- ``fork``: a request whose tables cover different extents is a ValueError that changes
  nothing; else request ``into`` (fresh before) ends with tables equal to request
  ``request``'s (pages, holes, tail, floor, extent, bound), every real page of them has one
  more reference, the queue is unchanged, and the call returns, per group, the partially
  written last slot (``len - 1`` when the tail room is positive), else -1;
- ``copy_tail``: the groups whose tail slot holds a page with count >= 2, in group order,
  take the queue's first pages, one each; when the queue is shorter, None and nothing
  changed; else each such slot holds its new page (count 1), the shared page has one
  reference fewer, and the call returns the ``(group, shared page, new page)`` copies.

Conservation (counts = holders), the retention rule, the table shapes and live tail are
checked after every step by the core, so a fork that forgets a reference or a copy that
drops the wrong one is caught there as well.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from .side import Outcome, Side, Verdict, call, state_diff
from .step import Extension, SideStep

FORK_OPS = ("fork", "copy_tail")


def _apply(world: Any, side: Side, op: dict[str, Any], facts: dict[str, Any]) -> Outcome:
    r = op["request"]
    if op["op"] == "copy_tail":
        return call(side.coord.copy_tail, side.tables[r])
    into = op["into"]
    if into >= len(side.tables) or into == r:
        return Outcome(error="NoSuchRequest", message=f"into={into}")
    if any(t.is_bound or len(t) for t in side.tables[into]):
        return Outcome(error="IntoNotFresh", message=f"request {into} holds tables")
    try:
        tables, tails = side.coord.fork(side.tables[r])
    except Exception as e:  # an observation to compare, like every call
        return Outcome(error=type(e).__name__, message=str(e))
    side.tables[into] = list(tables)
    side.created[into] = [list(c) for c in side.created[r]]
    side.owned[into] = [bool(t.is_bound) for t in tables]
    return Outcome(str([int(a) for a in tails]))


def _refs(refs: Any) -> list[int]:
    return [int(x) for x in refs]


def check_fork_op(world: Any, side: Side, op: dict[str, Any], s: SideStep) -> list[Verdict]:
    b, a, out = s.before, s.after, s.outcome
    problems: list[str] = []
    r = op["request"]

    def unchanged(what: str) -> None:
        if a != b:
            problems.append(f"{what} changed state: " + "; ".join(state_diff(b, a)))

    if op["op"] == "fork":
        into = op["into"]
        if out.error in ("NoSuchRequest", "IntoNotFresh"):
            unchanged("a fork the machine refused")
        elif b.split(r):
            if out.error != "ValueError":
                problems.append(f"fork of tables of different extents gave {out}")
            unchanged("a rejected fork")
        elif out.raised:
            problems.append(f"fork raised {out}: {out.message}")
        else:
            src = b.tables[r]
            tails = [t.length - 1 if t.tail > 0 else -1 for t in src]
            if out.value != str(tails):
                problems.append(f"fork returned {out.value}, expected tail slots {tails}")
            if a.tables[into] != src or a.tables[r] != src:
                problems.append("the fork's tables are not the source's")
            refs = _refs(b.pool.refs)
            for t in src:
                for p in t.pages:
                    if p:
                        refs[p] += 1
            if _refs(a.pool.refs) != refs:
                problems.append("counts after the fork are not one more per real slot")
            if a.pool.queue != b.pool.queue:
                problems.append("the fork moved the free queue")
    else:
        src = b.tables[r]
        if b.split(r):
            if out.error != "ValueError":
                problems.append(f"copy_tail of tables of different extents gave {out}")
            unchanged("a rejected copy_tail")
            return [Verdict("fork", not problems, "; ".join(problems))]
        refs = _refs(b.pool.refs)
        shared = [
            (g, t.pages[-1])
            for g, t in enumerate(src)
            if t.tail > 0 and t.pages[-1] and refs[t.pages[-1]] >= 2
        ]
        queue = list(b.pool.queue)
        if len(shared) > len(queue):
            if out.value is not None or out.raised:
                problems.append(f"copy_tail short of pages returned {out}, expected None")
            unchanged("a copy_tail short of pages")
        else:
            copies = [(g, p, queue[i]) for i, (g, p) in enumerate(shared)]
            if out.value != repr(copies):
                problems.append(f"copy_tail returned {out}, expected {copies}")
            for g, old, new in copies:
                refs[old] -= 1
                refs[new] = 1
                if a.tables[r][g].pages[-1] != new:
                    problems.append(f"group {g}'s tail slot holds not its new page {new}")
            if _refs(a.pool.refs) != refs:
                problems.append("counts after copy_tail are not the copies'")
            if list(a.pool.queue) != queue[len(copies) :]:
                problems.append("copy_tail did not take the queue's first pages")
    return [Verdict("fork", not problems, "; ".join(problems))]


FORKS = Extension(FORK_OPS, _apply, check_fork_op)


class ForkRules:
    """Mixed into the differential machine (``verify/machine/rules.py``)."""

    @precondition(lambda self: self.world is not None and self.world.forks)
    @rule(data=st.data())
    def fork(self: Any, data: st.DataObject) -> None:
        """Fork a request into another (freed first if it holds tables), then copy tails."""
        n = self.world.geometry.num_requests
        if n < 2:
            return
        r = self.request(data)
        into = data.draw(st.sampled_from([i for i in range(n) if i != r]), label="into")
        if any(t.bound or t.length for t in self.world.state().tables[into]):
            self.step({"op": "free", "request": into})
            if self.world.state().split(into):
                for g in range(len(self.world.geometry.groups)):
                    self.step({"op": "group_free", "request": into, "group": g})
        self.step({"op": "fork", "request": r, "into": into})
        for who in data.draw(st.sampled_from([[], [into], [r, into], [into, r]]), label="copy"):
            self.step({"op": "copy_tail", "request": who})

    @precondition(lambda self: self.world is not None and self.world.forks)
    @rule(data=st.data())
    def copy_tail(self: Any, data: st.DataObject) -> None:
        self.step({"op": "copy_tail", "request": self.request(data)})
