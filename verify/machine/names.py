"""Semantics section 12 in the differential machine: reset_names, evict_names, detach and
release_detached (ops of ``verify/trace.py``), their oracle and their Hypothesis rules; a
plug-in of the lockstep core (``NAMES``, composed in ``verify/machine/lockstep.py``).

The oracle (property ``names``) is written from the semantics alone, on the state before:

- ``reset_names``: False and nothing changed while a named page is pinned; else True, every
  name gone, queue, counts and tables as they were;
- ``evict_names``: an id outside ``[1, num_blocks)`` is a ValueError that changes nothing;
  else the named pages of the list (first occurrences) lose their names, the free ones move
  to the queue's front in list order, nothing else moves, and the call returns their number;
- ``detach``: the request's tables end empty and unbound, no page moves, no count drops,
  the handle holds one reference per real slot;
- ``release_detached``: the handle's references drop in the order ``free`` would have
  dropped them at detach time (groups in order, each table's last slot first), pages that
  reach count 0 join the queue by the retention rule (section 2); a second release is a
  ValueError that changes nothing.

The state invariant of section 2's retention rule (property ``retention``: every unnamed free
page precedes every named one) is checked after every step, in ``verify/machine/checks.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from ..retention import expected_queue
from .side import Outcome, Side, Verdict, call, state_diff
from .step import Extension, SideStep

NAME_OPS = ("reset_names", "evict_names", "detach", "release_detached")


# --- applying ops -----------------------------------------------------------------------


def apply_names_op(side: Side, op: dict[str, Any]) -> Outcome:
    kind = op["op"]
    if kind == "reset_names":
        return call(side.pool.reset_names)
    if kind == "evict_names":
        return call(side.pool.evict_names, list(op["pages"]))
    if kind == "detach":
        r = op["request"]
        ts = side.tables[r]
        order = tuple(p for t in ts for p in reversed([int(x) for x in t.page_ids()]) if p)
        try:
            handle = side.coord.detach(ts)
        except Exception as e:  # an observation to compare, like every call
            return Outcome(error=type(e).__name__, message=str(e))
        side.handles.append((handle, order))
        side.released.append(False)
        for g in range(len(ts)):
            side.note_free(r, g)
        return Outcome(int(handle.num_pages))
    i = op["handle"]
    if i >= len(side.handles):
        return Outcome(error="NoSuchHandle", message=f"{len(side.handles)} handles detached")
    out = call(side.coord.release_detached, side.handles[i][0])
    if not out.raised:
        side.released[i] = True
    return out


# --- the oracle -----------------------------------------------------------------------------


def released_queue(
    queue: Sequence[int], refs: Sequence[int], names: Mapping[int, Any], order: tuple[int, ...]
) -> tuple[list[int], list[int]]:
    """Queue and counts after dropping one reference per entry of `order`, in that order."""
    counts = list(refs)
    zero = []
    for p in order:
        counts[p] -= 1
        if counts[p] == 0:
            zero.append(p)
    named = {p for p in zero if p in names}
    return expected_queue(queue, zero, named), counts


def check_names_op(world: Any, side: Side, op: dict[str, Any], s: SideStep) -> list[Verdict]:
    b, a, out = s.before, s.after, s.outcome
    kind = op["op"]
    problems: list[str] = []

    def unchanged(what: str) -> None:
        if a != b:
            problems.append(f"{what} changed state: " + "; ".join(state_diff(b, a)))

    if kind == "reset_names":
        pinned = [p for p, _ in b.pool.names if b.pool.refs[p] >= 1]
        if pinned:
            if out.value is not False:
                problems.append(f"reset with named page {pinned[0]} pinned returned {out}")
            unchanged("a refused reset")
        else:
            if out.value is not True:
                problems.append(f"reset with no named page pinned returned {out}")
            if (a.pool.queue, a.pool.refs, a.tables, a.held) != (
                b.pool.queue,
                b.pool.refs,
                b.tables,
                b.held,
            ):
                problems.append("reset moved a page: " + "; ".join(state_diff(b, a)))
            if a.pool.names:
                problems.append("a name survived the reset")
    elif kind == "evict_names":
        nb = len(b.pool.refs)
        ids: list[int] = op["pages"]
        if any(not 1 <= p < nb for p in ids):
            if out.error != "ValueError":
                problems.append(f"evict_names({ids}) gave {out}, expected raise ValueError")
            unchanged("a rejected evict_names")
        else:
            dropped: list[int] = []
            had = dict(b.pool.names)
            for p in ids:
                if p in had and p not in dropped:
                    dropped.append(p)
            moved = [p for p in dropped if b.pool.refs[p] == 0]
            queue = moved + [q for q in b.pool.queue if q not in moved]
            names = tuple((p, n) for p, n in b.pool.names if p not in dropped)
            if out.value != len(dropped):
                problems.append(f"evict_names({ids}) returned {out}, expected {len(dropped)}")
            if list(a.pool.queue) != queue:
                problems.append(f"queue {list(a.pool.queue)}, expected {queue}")
            if a.pool.names != names:
                problems.append("names after evict_names differ from the list's")
            if (a.pool.refs, a.tables, a.held) != (b.pool.refs, b.tables, b.held):
                problems.append("evict_names changed counts or tables")
    elif kind == "detach":
        r = op["request"]
        pages = sorted(p for t in b.tables[r] for p in t.pages if p)
        if out.raised:
            problems.append(f"detach raised {out}: {out.message}")
        else:
            if out.value != len(pages):
                problems.append(f"detach held {out.value} references, the tables {len(pages)}")
            if any(t.length or t.bound or t.tail or t.floor for t in a.tables[r]):
                problems.append("detach left a table non-empty or bound")
            if (a.pool.queue, a.pool.refs, a.pool.names) != (
                b.pool.queue,
                b.pool.refs,
                b.pool.names,
            ):
                problems.append("detach moved a page or changed a count")
            if sorted(a.held) != sorted([*b.held, *pages]):
                problems.append("the handle does not hold the tables' pages")
    elif kind == "release_detached":
        i = op["handle"]
        if i >= len(side.handles):
            if out.error != "NoSuchHandle":
                problems.append(f"release of a missing handle gave {out}")
            unchanged("a missing handle")
        elif out.raised:
            if out.error != "ValueError":
                problems.append(f"a second release gave {out}, expected raise ValueError")
            unchanged("a second release")
        else:
            order = side.handles[i][1]
            queue, refs = released_queue(b.pool.queue, b.pool.refs, dict(b.pool.names), order)
            back = sum(1 for p in set(order) if refs[p] == 0)
            if out.value != back:
                problems.append(f"release_detached returned {out}, {back} pages re-entered")
            if list(a.pool.queue) != queue:
                problems.append(f"queue {list(a.pool.queue)}, expected {queue}")
            if list(a.pool.refs) != refs:
                problems.append("counts after the release differ from one drop per reference")
    return [Verdict("names", not problems, "; ".join(problems))]


def _apply(world: Any, side: Side, op: dict[str, Any], facts: dict[str, Any]) -> Outcome:
    return apply_names_op(side, op)


NAMES = Extension(NAME_OPS, _apply, check_names_op)


# --- rules ------------------------------------------------------------------------------------


class NameRules:
    """Mixed into the differential machine (``verify/machine/rules.py``)."""

    @precondition(lambda self: self.world is not None and self.world.prefix)
    @rule(data=st.data())
    def evict_names(self: Any, data: st.DataObject) -> None:
        """evict_names on a few pages, mostly named ones; one time in four reset_names."""
        if data.draw(st.integers(0, 3), label="reset instead") == 0:
            self.step({"op": "reset_names"})
            return
        s = self.world.state()
        nb = self.world.geometry.num_blocks
        named = [p for p, _ in s.pool.names]
        pool = named or list(range(1, nb)) or [0]
        pages = data.draw(st.lists(st.sampled_from(pool), max_size=6), label="pages")
        if data.draw(st.integers(0, 9), label="bad id") == 0:
            pages.insert(data.draw(st.integers(0, len(pages))), data.draw(st.sampled_from([0, nb])))
        elif data.draw(st.booleans(), label="an unnamed page too") and nb > 1:
            pages.append(data.draw(st.integers(1, nb - 1)))
        self.step({"op": "evict_names", "pages": pages})

    @precondition(lambda self: self.world is not None and self.world.detach)
    @rule(data=st.data())
    def detach(self: Any, data: st.DataObject) -> None:
        before = len(self.world.reference.handles)
        self.step({"op": "detach", "request": self.request(data)})
        n = len(self.world.reference.handles)
        # A detach of a request whose tables' extents differ raised: it made no handle.
        if n > before and data.draw(st.booleans(), label="release now"):
            self.step({"op": "release_detached", "handle": n - 1})

    @precondition(
        lambda self: (
            self.world is not None and self.world.detach and len(self.world.reference.handles) > 0
        )
    )
    @rule(data=st.data())
    def release_detached(self: Any, data: st.DataObject) -> None:
        ref = self.world.reference
        pending = [i for i, done in enumerate(ref.released) if not done]
        # Mostly a pending handle; sometimes one released already (a ValueError).
        pick = data.draw(st.sampled_from(pending or [0]) | st.integers(0, len(ref.handles) - 1))
        self.step({"op": "release_detached", "handle": pick})
