"""Section 7, property 9 (retention): unbounded over the pool's queue rules, and bounded,
exhaustive over the spec.

``retention-queue-invariant`` executes the rules of ``spec/slots.py`` that decide where each
page an allocation takes comes from, whether it loses its name, and where a released page
goes, on a free queue of symbolic length in the spec's two parts, and proves the
retention rule as an inductive invariant of that queue.  ``retention-bounded`` runs the
spec's own classes (queue, reference counts, names, their glue included) over every short
operation sequence on a small pool.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail import spec
from livetail.spec import slots

from ..z3arith import Z3
from .prover.prover import Prover
from .prover.query import Values
from .prover.symbols import Term, indicator, ints
from .prover.theorem import theorem
from .prover.traces import fails_on_spec, ops_trace
from .worlds.prefix import _clone

# --- item 9: retention --------------------------------------------------------------------

POOL_PAGES = 5  # non-null pages
MAX_OPS = 5


def _retention_ops(held: list[int], unnamed_held: list[int]) -> Iterator[tuple[str, Any]]:
    for k in (1, 2, 3):
        yield ("alloc", k)
    for p in held:
        yield ("free", (p,))
    if len(held) > 1:
        yield ("free", tuple(held))
    for p in unnamed_held:
        yield ("name", p)


def _retention_search() -> tuple[int, Values | None]:
    cases = 0
    key = 0

    def walk(pool: Any, held: list[int], order: list[int], ops: list[Any]) -> Values | None:
        # order: named free pages in the order they entered the queue (the model).
        nonlocal cases, key
        if len(ops) == MAX_OPS:
            return None
        unnamed_held = [p for p in held if not pool._is_cached(p)]
        for op in _retention_ops(held, unnamed_held):
            p2, h2, o2 = _clone(pool), list(held), list(order)
            kind, arg = op
            if kind == "alloc":
                queue = p2.free_queue()
                unnamed_free = sum(1 for q in queue if not p2._is_cached(q))
                named_before = {q for q in queue if p2._is_cached(q)}
                got = p2._allocate(arg)
                if got is None:
                    continue
                cases += 1
                dropped = [q for q in got if q in named_before]
                expected = o2[: max(0, arg - unnamed_free)]
                if sorted(dropped) != sorted(expected) or any(p2._is_cached(q) for q in got):
                    return {
                        "ops": repr([*ops, op]),
                        "dropped": repr(dropped),
                        "expected": repr(expected),
                        "unnamed_free": unnamed_free,
                    }
                o2 = o2[len(expected) :]
                h2 = h2 + got
            elif kind == "free":
                p2._release(list(arg))
                for q in reversed(arg):
                    if p2._is_cached(q):
                        o2.append(q)
                h2 = [q for q in h2 if q not in arg]
            else:
                key += 1
                p2._set_name(arg, (0, key.to_bytes(32, "little")))
            bad = walk(p2, h2, o2, [*ops, op])
            if bad is not None:
                return bad
        return None

    bad = walk(spec.BlockPool(POOL_PAGES + 1), [], [], [])
    return cases, bad


@theorem(
    "retention-bounded",
    f"""Bounded, exhaustive over the spec's BlockPool: every sequence of up to {MAX_OPS}
    operations on a pool of {POOL_PAGES} pages, each an allocation of 1, 2 or 3 pages, a
    release of one held page or of every held page as one batch, or naming a held unnamed
    page. Every successful allocation of k pages drops exactly the names of the
    max(0, k - u) oldest named free pages (u = unnamed free pages before it; oldest = the
    earliest to have re-entered the queue) and no other name.""",
    """An allocation evicts a prefix-cache name only when no unnamed page is free, and then
    the oldest first: sliding-window churn reuses its own pages instead of flushing cached
    prefixes.""",
    bounded=True,
    cost=3,
    rlimit=2_000_000,
)
def retention_bounded(p: Prover) -> None:
    p.exhaust(f"every op sequence of length <= {MAX_OPS}, pool of {POOL_PAGES}", _retention_search)


# --- item 9, unbounded: the free queue's order over the pool's executed rules -------------
#
# The spec's free queue (spec/pool.py, spec/pool_state.py) is a stack of unnamed released
# pages, top first, then an ordered queue (one linked list split at the ordered queue's
# first page).  A queue here is those two parts with symbolic lengths: `front`
# pages on the stack, `queue` pages behind it, and a named flag for every position (0 is the
# head).  The invariant's shape is `ordered`: every stack page unnamed, the ordered queue's
# first `unnamed` pages unnamed and the rest named.  Each transition is the spec's glue (take
# the page at a position out, put one on the stack's top or the queue's back) around the
# rules of spec/slots.py, which decide where; the theorem then asks of the queue after, at a
# symbolic position, that it has the invariant's shape with its own count of unnamed pages.


@dataclass(frozen=True)
class Queue:
    front: Term  # pages on the stack of unnamed released pages (positions 0 .. front - 1)
    queue: Term  # pages in the ordered queue behind it
    unnamed: Term  # how many of the ordered queue's pages carry no name
    named: Callable[[Term], Term]  # does the page at position x carry a name?


def ordered(front: Term, unnamed: Term, queue: Term) -> Queue:
    """A queue of the invariant's shape: unnamed pages first, then `queue - unnamed` named."""
    return Queue(front, queue, unnamed, lambda x: x >= front + unnamed)


def shaped(q: Queue, x: Term) -> Term:
    """At position x, `q` has the invariant's shape (and its counts are consistent)."""
    inside = z3.And(x >= 0, x < q.front + q.queue)
    counts = z3.And(q.front >= 0, q.unnamed >= 0, q.unnamed <= q.queue)
    return z3.And(counts, z3.Implies(inside, q.named(x) == (x >= q.front + q.unnamed)))


def pick(c: Term, a: Queue, b: Queue) -> Queue:
    """Queue `a` where `c` holds, else `b` (a rule's decision on symbolic state)."""
    c = _term(c)
    return Queue(
        z3.If(c, a.front, b.front),
        z3.If(c, a.queue, b.queue),
        z3.If(c, a.unnamed, b.unnamed),
        lambda x: z3.If(c, a.named(x), b.named(x)),
    )


def taken_out(q: Queue, p: Term) -> Queue:
    """The queue without the page at position p; the rest keep their order (`q` of the
    invariant's shape, which says whether the page was one of the queue's unnamed ones)."""
    on_stack = p < q.front
    return Queue(
        q.front - indicator(on_stack),
        q.queue - indicator(z3.Not(on_stack)),
        q.unnamed - indicator(z3.And(p >= q.front, p < q.front + q.unnamed)),
        lambda x: q.named(z3.If(x >= p, x + 1, x)),
    )


def joined(q: Queue, named: Term, front: Term) -> Queue:
    """The queue after a page (named or not) joins it: on the stack's top if `front`, else
    at the ordered queue's back."""
    top = Queue(q.front + 1, q.queue, q.unnamed, lambda x: z3.If(x == 0, named, q.named(x - 1)))
    end = q.front + q.queue
    back = Queue(
        q.front,
        q.queue + 1,
        q.unnamed + indicator(z3.Not(named)),
        lambda x: z3.If(x == end, named, q.named(x)),
    )
    return pick(front, top, back)


def _term(b: Any) -> Term:
    return z3.BoolVal(b) if isinstance(b, bool) else b


def allocation_step(pre: Queue) -> tuple[Term, Term, Term, Term, Queue]:
    """One page of an allocation, by the rules: (whether it comes off the stack, the
    position taken, whether the page handed out keeps a name, whether a name was dropped,
    the queue after)."""
    top = _term(slots.from_front(pre.front, pre.queue, Z3))
    at = z3.If(top, 0, pre.front)  # the stack's top, else the ordered queue's head
    had = pre.named(at)
    gone = z3.And(had, _term(slots.evicts(had, Z3)))
    return top, at, z3.And(had, z3.Not(gone)), gone, taken_out(pre, at)


# --- counterexamples as traces ---------------------------------------------------------------


def _queue_ops(values: Values, extra: int) -> tuple[list[dict[str, Any]], int] | None:
    """Ops that leave the free queue of a counterexample (F, U, Q; `extra` more never-used
    unnamed pages) on a pool of one full group of page size 1 (a token is a page): request 0
    takes and names the Q - U named pages, request 1 takes the F stack pages, both are freed.
    Request 2 took one page first, named if the values say so (the page a release returns).
    Returns the ops and the pool's size."""
    f, u, q = (int(values.get(k, -1)) for k in ("F", "U", "Q"))
    if f < 0 or u < 0 or q < u:
        return None
    ops: list[dict[str, Any]] = []
    if "named" in values:
        ops.append({"op": "acquire", "request": 2, "tokens": 1})
        if int(values["named"]) == 1:
            ops.append({"op": "cache", "request": 2, "doc": 1, "tokens": 1})
    for r, tokens in ((0, q - u), (1, f)):
        if tokens:
            ops.append({"op": "acquire", "request": r, "tokens": tokens})
    if q - u:
        ops.append({"op": "cache", "request": 0, "doc": 0, "tokens": q - u})
    ops += [{"op": "free", "request": r} for r, held in ((1, f), (0, q - u)) if held]
    return ops, 1 + f + q + extra + ("named" in values)


def _queue_trace(
    step: str, values: Values, variant: str | None, extra: int
) -> dict[str, Any] | None:
    built = _queue_ops(values, extra)
    if built is None:
        return None
    ops, num_blocks = built
    if "named" in values:
        ops.append({"op": "free", "request": 2})  # the release the step is about
    elif step.startswith("evict_names"):
        return None  # the page's id depends on the queue: not a fixed op
    else:
        ops.append({"op": "acquire", "request": 2, "tokens": 1})  # an allocation's page
    groups = [{"kind": "full", "block_size": 1}]
    name = "retention-queue-invariant"
    title, summary = f"{name} counterexample: {step}", f"counterexample of {step}"
    trace = ops_trace(groups, num_blocks, 3, ops, title, name, variant, values, summary)
    return trace if fails_on_spec(trace) else None


def queue_traces(
    verdict: str, found: Sequence[tuple[str, Values]], variant: str | None
) -> list[dict[str, Any]]:
    """The counterexample's free queue built by acquires, names and frees, then the step's
    operation (one page allocated, or request 2's page released), kept if the spec as it is
    now fails it; a queue with one more never-used page behind is tried when the
    counterexample's own does not show (the retention check needs an unnamed page behind a
    named one)."""
    if verdict != "counterexample":
        return []
    out = []
    for step, values in found:
        for extra in (0, 1):
            try:
                tr = _queue_trace(step, values, variant, extra)
            except Exception:  # the values map onto no ops the spec accepts
                tr = None
            if tr is not None:
                out.append(tr)
                break
    return out


@theorem(
    "retention-queue-invariant",
    """Executes the pool's queue rules (spec/slots.py from_front and evicts for each page an
    allocation takes, joins_front for each page a release or evict_names puts back,
    claim_takes for a claim) on a free queue in the spec's two parts with symbolic
    lengths: a stack of F released pages, then an ordered queue of Q pages, each position
    named or not. Symbolic: F, Q, the queue's count U of unnamed pages, the position a claim
    or evict_names takes, the released page's name flag, the allocation's page index i and
    the unnamed pages u free when it began; unbounded in all of them. Invariant (retention
    on): every stack page is unnamed and the ordered queue is U unnamed pages then Q - U
    named ones. It holds for a new pool and after reset_names, and every transition keeps it:
    an allocation's page (the stack's top while it has one, else the ordered queue's head),
    a release (an unnamed page on the stack, a named one at the back: named pages keep their
    age order), a claim taking any free page out, evict_names moving a free page to the
    stack unnamed. From it: each page an allocation takes is the free queue's head, leaves
    unnamed, and drops a name exactly when no unnamed page is free, then the oldest; after i
    pages u - i unnamed pages remain free (at least 0) and max(0, i - u) names were dropped,
    so an allocation of k drops a name only when fewer than k unnamed pages are free, the
    oldest first. With retention off every page joins the back (one FIFO queue). Naming
    is no queue transition: the pool names only pinned pages (it asserts so).""",
    """Sliding-window churn reuses its own unnamed pages; a cached prefix is evicted only
    when no unnamed page is free, oldest first, however long the pool and its queue.""",
    kills=("alloc-queue-before-front", "alloc-keeps-name", "named-release-joins-front"),
    trace=queue_traces,
    cost=1,
    rlimit=2_000_000,
    executes=("slots.from_front", "slots.evicts", "slots.joins_front", "slots.claim_takes"),
)
def retention_queue(p: Prover) -> None:
    f, u, n, x, at, ref, flag = ints("F U Q x at ref named")
    # The released page's name flag, an Int (0: unnamed, 1: named) so that the small-domain
    # search, which confirms its models over the Int symbols, decides it too.
    named = flag == 1
    pre = ordered(f, u, n)
    hyps = [f >= 0, u >= 0, u <= n]
    show = {"F": f, "U": u, "Q": n, "x": x}

    p.prove("a new pool's queue has the shape", shaped(ordered(0, n, n), x), [n >= 0], show)
    cleared = Queue(f, n, n, lambda _: z3.BoolVal(False))
    p.prove("reset_names keeps the shape", shaped(cleared, x), hyps, show)

    # An allocation's next page (a page is free: F + Q >= 1).
    top, taken, kept, dropped, post = allocation_step(pre)
    one = [*hyps, f + n >= 1]
    show1 = {**show, "taken": taken}
    p.prove("an allocation takes the free queue's head", taken == 0, one, show1)
    p.prove("the side it takes from holds a page", z3.If(top, f >= 1, n >= 1), one, show1)
    p.prove("the page it hands out carries no name", z3.Not(kept), one, show1)
    p.prove("the queue after an allocation's page has the shape", shaped(post, x), one, show1)
    p.prove(
        "it drops a name exactly when no unnamed page is free, the oldest",
        z3.And(dropped == (f + u == 0), z3.Implies(dropped, taken == f + u)),
        one,
        show1,
    )

    # A whole allocation, by induction over its pages: before page i, max(0, u0 - i) unnamed
    # pages are free and max(0, i - u0) names were dropped.
    u0, i, d = ints("u0 i dropped_before")
    mx = Z3.max
    p.prove(
        "before an allocation's first page, u0 unnamed pages are free and no name dropped",
        z3.And(mx(0, u0 - 0) == u0, mx(0, 0 - u0) == 0),
        [u0 >= 0],
        {"u0": u0},
    )
    before = [*one, u0 >= 0, i >= 0, f + u == mx(0, u0 - i), d == mx(0, i - u0)]
    p.prove(
        "after each page of an allocation, the unnamed and dropped counts follow",
        z3.And(
            post.front + post.unnamed == mx(0, u0 - (i + 1)),
            d + indicator(dropped) == mx(0, i + 1 - u0),
        ),
        before,
        {**show1, "u0": u0, "i": i},
    )

    # A release of a page whose count dropped to 0 (named or not), retention on.
    back = joined(pre, named, slots.joins_front(named, True, Z3))
    released = [*hyps, flag >= 0, flag <= 1]
    p.prove("a release keeps the shape", shaped(back, x), released, {**show, "named": flag})
    p.prove(
        "with retention off every page joins the back",
        z3.Not(_term(slots.joins_front(named, False, Z3))),
        [flag >= 0, flag <= 1],
        {"named": flag},
    )

    # A claim takes a free page (count 0) out wherever it is.
    in_queue = [*hyps, at >= 0, at < f + n, ref == 0]
    claimed = pick(slots.claim_takes(ref, Z3), taken_out(pre, at), pre)
    show2 = {**show, "at": at}
    p.prove("a claim takes the free page out", _term(slots.claim_takes(ref, Z3)), in_queue, show2)
    p.prove("a claim keeps the shape", shaped(claimed, x), in_queue, show2)

    # evict_names on a named free page: it loses its name and goes where an unnamed release
    # goes (retention on).
    evicted = [*hyps, at >= f + u, at < f + n]
    goes = slots.joins_front(False, True, Z3)
    stays = Queue(f, n, u + 1, lambda y: z3.And(y != at, pre.named(y)))
    moved = pick(goes, joined(taken_out(pre, at), z3.BoolVal(False), True), stays)
    p.prove("evict_names keeps the shape", shaped(moved, x), evicted, show2)

