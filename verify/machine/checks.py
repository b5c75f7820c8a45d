"""The section-7 property checks of the differential machine, one method per op kind.

``LockstepChecks`` is the half of the lockstep core (``verify/machine/core.py``) that judges
a step: the slot-by-slot answer to every query, the agreement of the sides, and each property
of the module docstring there, against the oracle of ``verify/machine/oracle.py``; an op of a
plug-in (``Extension``) is judged by the plug-in's own check.
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import events as counters_events
from ..pages import distinct_outside
from ..retention import check_release
from ..trace import Geometry, Op
from .bad_calls import BAD_CALLS
from .oracle import (
    GroupRule,
    oracle_after,
    oracle_bound,
    oracle_live,
    oracle_sequential,
    oracle_take,
)
from .side import CLAIMED, Side, State, Verdict, state_diff
from .step import Extension, Query, SideStep

# Coordinator ops on one request's tables: a ValueError when their extents differ.
SPLIT_CHECKED = ("acquire", "decode", "admit", "reclaim", "free", "cache", "detach")


class LockstepChecks:
    """The checks of a step; the core supplies the geometry, rules, naming flag and plug-ins."""

    geometry: Geometry
    rules: list[GroupRule]
    named: bool  # a cache op ran: pages may carry names
    plugged: Mapping[str, Extension]  # op kind -> the plug-in that judges it

    def oracle_answer(self, q: Query, s: State) -> int | str | None:
        """The slot-by-slot answer to query `q` on state `s`.

        None: no oracle (a count near the int32 limit spans ~2**31 slots), but it must
        answer; "ValueError": it must raise that.
        """
        if q.name != "match" and q.group is None and s.split(q.request):
            return "ValueError"  # a coordinator query of tables of unequal extent
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
            diffs.extend(f"{pair}: {d}" for d in state_diff(ref.after, other.after))
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
        if kind in SPLIT_CHECKED and st_.before.split(op["request"]):
            vs.append(self._check_split(op, st_))
        elif kind in ("acquire", "decode", "group_acquire"):
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
        elif kind in self.plugged:
            vs.extend(self.plugged[kind].check(self, side, op, st_))
        vs.append(self._check_conservation(st_.after))
        vs.append(check_retention(st_.after))
        vs.append(self._check_shape(st_.after))
        vs.append(self._check_live(side, st_.after))
        vs.append(self._check_queries(st_))
        vs.append(Verdict("events", *counters_events.check(side)))
        return vs

    def _check_split(self, op: Op, s: SideStep) -> Verdict:
        """A coordinator call on a request whose tables cover different extents (section 6:
        one request's tables) is a ValueError that changes nothing; an admission's charge
        raises, so it is deferred."""
        problems = []
        if op["op"] == "admit":
            err = s.facts.get("sequential_error")
            if err != "ValueError" or s.outcome.value != "deferred":
                problems.append(f"admit charged {err or s.facts.get('sequential')}: {s.outcome}")
        elif s.outcome.error != "ValueError":
            problems.append(f"{op['op']} gave {s.outcome}, expected raise ValueError")
        if s.after != s.before:
            problems.append("changed state: " + "; ".join(state_diff(s.before, s.after)))
        return Verdict("one-request", not problems, "; ".join(problems))

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
                    "" if a == b else "failed acquire changed: " + "; ".join(state_diff(b, a)),
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
        # A page handed out is written afresh: its prefix-cache name went (section 2).
        still = sorted(set(new_pages) & {q for q, _ in a.pool.names})
        if still:
            problems.append(f"new pages {still} still carry a name")
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
        if rule_.C is not None:  # section 13.2: the slots of the chunk-of-C behind b
            return b - b % (rule_.C // rule_.B)
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
            problems.append("naming pages moved a page: " + "; ".join(state_diff(b, a)))
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
        if matched % geo.align or matched > f["keys"] * geo.base:
            problems.append(f"matched {matched} tokens: not a multiple of {geo.align} in the keys")
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
                diff = "; ".join(state_diff(mid, s.after))
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
        expected = mid.pool.refs.nonzero()  # sparse: the counts before plus the claim's
        for g, pg in enumerate(pages):
            t = s.after.table(r, g)
            for p in pg:
                if p != 0:
                    expected[p] = expected.get(p, 0) + 1
            floor = self._resume_floor(g, len(pg))
            bound = (True, "pool") if pg else (False, "none")
            if (t.pages, t.tail, t.floor, (t.bound, t.bound_to)) != (tuple(pg), 0, floor, bound):
                problems.append(f"g{g} claimed table {t.compact()}, expected {pg} floor {floor}")
        if len(s.after.pool.refs) != len(mid.pool.refs) or s.after.pool.refs.nonzero() != expected:
            problems.append("a claim did not add exactly one reference per matched slot")
        return [Verdict("claim", not problems, "; ".join(problems))]

    def _check_bad(self, op: Op, s: SideStep) -> list[Verdict]:
        bad = BAD_CALLS.get(op["call"])
        expect = bad.expect if bad else "?"
        problems = []
        if s.outcome.error != expect:
            problems.append(f"{op['call']} gave {s.outcome}, expected raise {expect}")
        if s.after != s.before:
            problems.append("changed state: " + "; ".join(state_diff(s.before, s.after)))
        return [Verdict("usage-error", not problems, "; ".join(problems))]

    def _check_conservation(self, s: State) -> Verdict:
        """Counts equal the slots holding each page; the queue is exactly the count-0 pages.

        Sparse: it walks the tables' slots and the pool's runs, never every page id.
        """
        nb = self.geometry.num_blocks
        problems: list[str] = []
        holders: dict[int, int] = {}
        for p in s.held:  # references detached handles hold (section 12)
            holders[p] = holders.get(p, 0) + 1
        for row in s.tables:
            for t in row:
                for p in t.pages:
                    if 0 < p < nb:
                        holders[p] = holders.get(p, 0) + 1
                    elif p != 0:
                        problems.append(f"page id {p} out of range")
        refs = s.pool.refs
        if len(refs) != nb or refs[0:1] != (0,):
            problems.append(f"ref_counts has {len(refs)} entries, page 0 count {list(refs[0:1])}")
        counted = {p: c for p, c in refs.nonzero().items() if 0 < p < nb}
        wrong = sorted(p for p in {*counted, *holders} if counted.get(p, 0) != holders.get(p, 0))
        if wrong:
            p = wrong[0]
            held = holders.get(p, 0)
            problems.append(f"page {p} count {counted.get(p, 0)} but {held} slots hold it")
        zero = min(nb, len(refs)) - 1 - len(counted)  # pages 1.. with count 0
        queue_wrong = distinct_outside(s.pool.queue, 1, nb, list(counted))
        if queue_wrong or len(s.pool.queue) != zero:
            why = f" ({queue_wrong})" if queue_wrong else ""
            problems.append(f"free queue is not exactly the pages with count 0{why}")
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
                    problems.append(f"{key} gave {out}, expected raise ValueError")
            elif out.raised:
                problems.append(f"{key} raised {out.error}: {out.message}")
            elif exp is not None and out.value != exp:
                problems.append(f"{key} = {out.value}, slot by slot {exp}")
        more = f" (+{len(problems) - 4} more)" if len(problems) > 4 else ""
        return Verdict("closed-form", not problems, "; ".join(problems[:4]) + more)


def check_retention(s: State) -> Verdict:
    """Property 9 as a state invariant: no unnamed free page follows a named one.

    Equivalently the queue's last k pages are its k named free pages (a cost that follows
    the named pages, not the pool).
    """
    if not s.pool.names:
        return Verdict("retention", True)
    named = dict(s.pool.names)
    k = sum(1 for p in named if s.pool.refs[p] == 0)
    queue = s.pool.queue
    tail = list(queue[len(queue) - k :]) if k else []
    for i, p in enumerate(tail):
        if p not in named:
            first = next(q for q in tail[:i] if q in named) if i else None
            if first is None:  # a named free page sits earlier in the queue
                first = next(q for q in queue if q in named and q not in tail)
            return Verdict("retention", False, f"unnamed free page {p} follows named page {first}")
    return Verdict("retention", True)
