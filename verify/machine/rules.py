"""The Hypothesis machine over ``Lockstep``: the request life cycle and its abuses as rules.

``differential_machine`` builds a ``RuleBasedStateMachine`` whose rules draw ops
(``verify/trace.py``) and run them through ``Lockstep`` (``verify/machine/lockstep.py``: the
core with its plug-ins, whose rules ``PlanRules`` and ``NameRules`` are mixed in here); a
failing run (after shrinking) becomes a trace through ``TraceSink``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from ..trace import Geometry, GroupGeometry, Op
from .bad_calls import BAD_CALLS
from .forks import ForkRules
from .lockstep import Lockstep
from .names import NameRules
from .oracle import SHARED_PREFIX
from .plan import PlanRules
from .side import Impl
from .sink import TraceSink
from .step import StepFailure

PAGE_SIZES = (1, 2, 3, 4, 8, 16)
# "live" twice: live-tail groups are where holes, resume pages and the sequential charge live.
# "state_live" / "state_ckpt": state groups with live tail, without and with checkpoints
# (Mamba "align" mode, section 13.5).
GROUP_KINDS = (
    "full", "live", "sliding", "live", "state", "chunked", "state_live", "state_ckpt"
)


@st.composite
def geometries(draw: st.DrawFn) -> Geometry:
    """1-4 groups of mixed kinds and page sizes, windows around B and the lcm, a small pool;
    in half the draws an alignment of 2 or 4 lcms (semantics 13.9: sparser resume pages and
    names, hits on its multiples), else the lcm."""
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
        elif kind == "chunked":  # C a multiple of B: one page, around the lcm, or a few pages
            C = B * draw(st.sampled_from(sorted({1, 2, 3, max(1, lcm // B), 2 * lcm // B})))
            groups.append(GroupGeometry("chunked", B, None, False, C))
        elif kind in ("state_live", "state_ckpt"):  # Mamba "align" mode (section 13.5)
            groups.append(GroupGeometry("state", B, None, True, None, kind == "state_ckpt"))
        else:
            groups.append(GroupGeometry(kind, B))
    k = draw(st.sampled_from([1, 1, 2, 4]))
    return Geometry(
        tuple(groups),
        draw(st.integers(1, 64)),
        draw(st.integers(1, 4)),
        alignment=None if k == 1 else k * lcm,
    )


def differential_machine(
    impls: Sequence[Impl], sink: TraceSink | None = None
) -> type[RuleBasedStateMachine]:
    """A RuleBasedStateMachine class driving `impls` in lockstep (spec first)."""
    impl_list = list(impls)
    trace_sink = sink if sink is not None else TraceSink()

    class DifferentialMachine(PlanRules, NameRules, ForkRules, RuleBasedStateMachine):
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
            lcm = geo.align  # the alignment: fills to its multiples
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
                op: Op = {"op": "cache", "request": r, "doc": r % 2, "tokens": low}
                if data.draw(st.booleans(), label="with token ids"):
                    op["with_tokens"] = True
                self.step(op)
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
                if self.w.state().split(r):
                    # A ValueError (tables of unequal extent): free group by group instead,
                    # so that the coordinator can use the request's tables again.
                    for g in range(len(self.w.geometry.groups)):
                        self.step({"op": "group_free", "request": r, "group": g})

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
            op: Op = {"op": "cache", "request": r, "doc": r % 2, "tokens": n}
            if data.draw(st.booleans(), label="with token ids"):
                op["with_tokens"] = True  # section 12: names carry the slots' token ids
            self.step(op)
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
            lcm = self.w.geometry.align
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
