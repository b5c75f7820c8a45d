"""Sections 2 and 7 (properties 6 and 9): the pool's own transitions on a symbolic pool.

``pool-transitions-keep-the-queue`` executes ``spec/pool_state.py``'s functions, the very
code ``BlockPool``'s methods call, on a pool of symbolic size whose state is Z3 arrays
(counts, queue links, names, holder counts): each transition runs once on that state and
the theorem reads the arrays it leaves.  The invariant is per page (local): it is assumed
at the pages a transition touches and their neighbours, and proved at a symbolic page of
the state after, so it holds for every page of every pool (an inductive invariant over
any sequence of these transitions).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import pool_state as ps
from livetail.spec.pool import COUNTERS

from ..z3mem import Z3MEM
from .prover.prover import Prover
from .prover.symbols import indicator, ints
from .prover.theorem import theorem

OUT = ps.OUT


def pool(retention: Any = True) -> SimpleNamespace:
    """A symbolic pool of N pages (N >= 1), its state unbounded arrays."""
    arr = z3.ArraySort(z3.IntSort(), z3.IntSort())
    return SimpleNamespace(
        _num_blocks=z3.Int("N"),
        _retention=retention,
        _ref=z3.Const("ref", arr),
        _nxt=z3.Const("nxt", arr),
        _prv=z3.Const("prv", arr),
        _name_of=z3.Const("name_of", arr),
        _pages_named=z3.Const("holders", arr),
        _tokens_of=z3.Const("tokens_of", arr),
        _free=z3.Int("free"),
        _mid=z3.Int("mid"),
        # A ghost, the theorem's own (the pool has none): a rank increasing along the queue,
        # which rules out a ring of queued pages that does not pass the sentinel.
        _rank=z3.Const("rank", arr),
        _version=z3.Int("version"),
        _counters={k: z3.Int(k) for k in COUNTERS},
    )


def snapshot(st: SimpleNamespace) -> SimpleNamespace:
    out = copy.copy(st)
    out._counters = dict(st._counters)
    return out


def is_page(s: SimpleNamespace, y: Any) -> Any:
    return z3.And(y >= 1, y < s._num_blocks)


def queued(s: SimpleNamespace, y: Any) -> Any:
    """Is page y in the free queue (its link set)?"""
    return z3.And(is_page(s, y), s._nxt[y] != OUT)


def node(s: SimpleNamespace, y: Any) -> Any:
    """The sentinel 0 or a queued page."""
    return z3.Or(y == 0, queued(s, y))


def named(s: SimpleNamespace, y: Any) -> Any:
    return s._name_of[y] != 0


def links(s: SimpleNamespace, y: Any) -> Any:
    """A node's links are nodes that link back to it."""
    n, p = s._nxt[y], s._prv[y]
    in_range = z3.And(n >= 0, n < s._num_blocks, p >= 0, p < s._num_blocks)
    back = z3.And(s._prv[n] == y, s._nxt[p] == y, node(s, n), node(s, p))
    return z3.Implies(node(s, y), z3.And(in_range, back))


def counted(s: SimpleNamespace, y: Any) -> Any:
    """A page is queued iff its count is 0 (both links OUT otherwise)."""
    free = s._ref[y] == 0
    return z3.Implies(
        is_page(s, y),
        z3.And(s._ref[y] >= 0, (s._nxt[y] != OUT) == free, (s._prv[y] != OUT) == free),
    )


def ordered(s: SimpleNamespace, y: Any) -> Any:
    """Retention: no unnamed page behind a named one anywhere in the queue."""
    nxt = s._nxt[y]
    keep = z3.Or(nxt == 0, named(s, nxt))
    return z3.Implies(z3.And(queued(s, y), named(s, y)), keep)


def ranked(s: SimpleNamespace, y: Any) -> Any:
    nxt = s._nxt[y]
    return z3.Implies(z3.And(queued(s, y), nxt != 0), s._rank[nxt] > s._rank[y])


def inv(s: SimpleNamespace, y: Any, order: bool = True) -> Any:
    mid = z3.Or(s._mid == 0, queued(s, s._mid))
    parts = [links(s, y), counted(s, y), ranked(s, y), mid]
    return z3.And(*parts, ordered(s, y)) if order else z3.And(*parts)


def reranked(post: SimpleNamespace, p: Any) -> SimpleNamespace:
    """The ghost rank after a transition that linked page p (if it did): below its successor,
    or above its predecessor at the tail."""
    out = snapshot(post)
    nxt, prv, rank = post._nxt[p], post._prv[p], post._rank
    out._rank = z3.Store(rank, p, z3.If(nxt != 0, rank[nxt] - 1, rank[prv] + 1))
    return out


def around(s: SimpleNamespace, ys: Sequence[Any]) -> list[Any]:
    """The points whose invariant a step's proof uses: each y, its links, the sentinels'."""
    pts = [0, s._nxt[0], s._prv[0], s._mid, s._prv[s._mid]]
    for y in ys:
        pts += [y, s._nxt[y], s._prv[y], s._prv[s._prv[y]]]
    return pts


def hyps_at(s: SimpleNamespace, ys: Sequence[Any]) -> list[Any]:
    N = s._num_blocks
    base = [N >= 1, s._free >= 0, s._ref[0] == 0, s._name_of[0] == 0]
    return [*base, *(inv(s, y) for y in around(s, ys))]


def frame(pre: SimpleNamespace, post: SimpleNamespace, p: Any, x: Any) -> Any:
    """Page x other than p keeps its count and queue membership."""
    same = z3.And(post._ref[x] == pre._ref[x], queued(post, x) == queued(pre, x))
    return z3.Implies(x != p, same)


def conserved(pre: SimpleNamespace, post: SimpleNamespace, p: Any) -> Any:
    """The free count moves by p's membership change, and the counters' pinned count
    (allocated + claimed from the queue - released) by the opposite."""
    moved = indicator(queued(post, p)) - indicator(queued(pre, p))
    c0, c1 = pre._counters, post._counters
    pinned = [c1[k] - c0[k] for k in ("pages_allocated", "pages_claimed_free", "pages_released")]
    return z3.And(post._free - pre._free == moved, pinned[0] + pinned[1] - pinned[2] == -moved)


def _check(
    p: Prover,
    label: str,
    pre: Any,
    post: Any,
    page: Any,
    hyps: list[Any],
    show: Any,
    order: bool = True,
) -> None:
    x = z3.Int("x")
    show = {**show, "x": x}
    hyps = [*hyps, *(inv(pre, y) for y in (x, pre._nxt[x], pre._prv[x]))]
    post = reranked(post, page)
    p.prove(f"{label}: the invariant holds at every page after", inv(post, x, order), hyps, show)
    p.prove(
        f"{label}: every other page keeps its count and place",
        frame(pre, post, page, x),
        hyps,
        show,
    )
    p.prove(
        f"{label}: the free count and the counters follow", conserved(pre, post, page), hyps, show
    )


@theorem(
    "pool-transitions-keep-the-queue",
    """Executes the pool's own transitions (spec/pool_state.py: take, release, share,
    requeue_unnamed, pin, set_name, drop_name, clear_names, which BlockPool's methods
    call) on a pool of N pages whose reference counts, free-queue links, names and name
    holder counts are unbounded Z3 arrays, N, the free count and the counters unbounded.
    Invariant, per page: a page is in the free queue iff its count is 0, a queued page's
    links are queued pages or sentinels that link back to it (one list behind the null page
    0; a ghost rank increasing along it rules out a ring that misses page 0), and (retention
    on) no unnamed page is behind a named one. Each transition keeps it at every page,
    changes no other page's count or membership, and moves the free count by the page's
    membership change and the counters' pinned count (pages_allocated + pages_claimed_free -
    pages_released) by the opposite, so free + pinned = N - 1 after any sequence. An
    allocation takes the queue's head, gives it count 1 and no name; a release drops one
    reference and puts a page freed at the head (unnamed) or the back (named); a claim takes
    a free page out wherever it is; a pin (an offload copy or a fork) leaves the queue alone;
    a name's holder count moves with the pages taking and losing it, and the name is new
    (stored) or gone (removed) exactly at count 0.""",
    """The pool's own code (not a model of it) never leaks a page, never double-counts one,
    never leaves a held page in the free queue and keeps cached prefixes behind unnamed
    pages, for every pool size and every state the operations reach.""",
    kills=(
        "unlink-keeps-back-link",
        "release-frees-at-one",
        "claim-leaves-page-queued",
        "requeue-keeps-name-at-back",
        "drop-name-keeps-holder",
    ),
    cost=3,
    rlimit=8_300_000,
    executes=(
        "pool_state.take",
        "pool_state.release",
        "pool_state.share",
        "pool_state.requeue_unnamed",
        "pool_state.pin",
        "pool_state.set_name",
        "pool_state.drop_name",
        "pool_state.clear_names",
    ),
)
def pool_transitions(p: Prover) -> None:
    mem = Z3MEM
    pre = pool(True)
    N = pre._num_blocks
    page = z3.Int("p")

    # An allocation's next page: the queue holds one.
    st = snapshot(pre)
    got, lost, removed, name = ps.take(st, mem)
    hyps = [*hyps_at(pre, [got]), pre._free >= 1, pre._nxt[0] != 0]
    show = {"N": N, "page": got, "free": pre._free, "mid": pre._mid}
    head = pre._nxt[0]
    p.prove(
        "take: the page is the queue's head, was free and leaves held and unnamed",
        z3.And(got == head, queued(pre, got), st._ref[got] == 1, st._name_of[got] == 0),
        hyps,
        show,
    )
    _check(p, "take", pre, st, got, hyps, show)

    # A release of one reference to a held page.
    st = snapshot(pre)
    freed = ps.release(st, page, mem)
    hyps = [*hyps_at(pre, [page]), is_page(pre, page), pre._ref[page] >= 1]
    show = {"N": N, "p": page, "count": pre._ref[page], "named": pre._name_of[page]}
    where = z3.If(named(pre, page), st._prv[0] == page, st._nxt[0] == page)
    p.prove(
        "release: one reference goes; a page freed joins the head (unnamed) or the back",
        z3.And(
            st._ref[page] == pre._ref[page] - 1,
            z3.Implies(freed, where),
            freed == (pre._ref[page] == 1),
        ),
        hyps,
        show,
    )
    _check(p, "release", pre, st, page, hyps, show)

    # A claim's reference to a matched page (free or held).
    st = snapshot(pre)
    ps.share(st, page, mem)
    hyps = [*hyps_at(pre, [page]), is_page(pre, page)]
    show = {"N": N, "p": page, "count": pre._ref[page]}
    p.prove(
        "share: one more reference, the page out of the queue",
        z3.And(st._ref[page] == pre._ref[page] + 1, z3.Not(queued(st, page))),
        hyps,
        show,
    )
    _check(p, "share", pre, st, page, hyps, show)

    # An offload copy's reference to a held device page.
    st = snapshot(pre)
    ps.pin(st, page, mem)
    hyps = [*hyps_at(pre, [page]), is_page(pre, page), pre._ref[page] >= 1]
    _check(p, "pin", pre, st, page, hyps, {"N": N, "p": page})

    # evict_names on a free named page: the name goes, the page moves to the head.
    st = snapshot(pre)
    ps.drop_name(st, page, True, mem)
    ps.requeue_unnamed(st, page, mem)
    hyps = [*hyps_at(pre, [page]), is_page(pre, page), pre._ref[page] == 0, named(pre, page)]
    show = {"N": N, "p": page, "name": pre._name_of[page]}
    p.prove(
        "evict_names: a free page that lost its name is at the head, unnamed",
        z3.And(st._nxt[0] == page, st._name_of[page] == 0),
        hyps,
        show,
    )
    _check(p, "evict_names", pre, st, page, hyps, show)

    # Names: a pinned unnamed page takes one; a named page loses its own.
    k, tok = ints("k tokens")
    st = snapshot(pre)
    new = ps.set_name(st, page, k, tok, True, mem)
    hyps = [*hyps_at(pre, [page]), is_page(pre, page), pre._ref[page] >= 1, k != 0]
    hyps += [pre._name_of[page] == 0]
    show = {"N": N, "p": page, "name": k, "holders": pre._pages_named[k]}
    _names(p, "set_name", pre, st, page, hyps, show)
    p.prove(
        "set_name: the name is new exactly when no page held it",
        new == (pre._pages_named[k] == 0),
        hyps,
        show,
    )
    _check(p, "set_name", pre, st, page, hyps, show)

    st = snapshot(pre)
    gone, name = ps.drop_name(st, page, True, mem)
    hyps = [*hyps_at(pre, [page]), is_page(pre, page), pre._ref[page] >= 1, named(pre, page)]
    hyps += [pre._pages_named[pre._name_of[page]] >= 1]
    show = {"N": N, "p": page, "name": pre._name_of[page]}
    _names(p, "drop_name", pre, st, page, hyps, show)
    p.prove(
        "drop_name: the name is gone exactly when its last page lost it",
        gone == (st._pages_named[name] == 0),
        hyps,
        show,
    )
    _check(p, "drop_name", pre, st, page, hyps, show)

    st = snapshot(pre)
    ps.clear_names(st, z3.Int("named_pages"), z3.Int("names"), mem)
    x = z3.Int("x")
    hyps = hyps_at(pre, [x])
    p.prove(
        "clear_names: no page keeps a name, no name a holder",
        z3.And(st._name_of[x] == 0, st._pages_named[x] == 0),
        hyps,
        {"x": x},
    )
    # No page is named after: the order holds (nothing is behind a named page).
    _check(p, "clear_names", pre, st, z3.Int("none"), hyps, {"N": N}, order=False)


def _names(
    p: Prover, label: str, pre: Any, post: Any, page: Any, hyps: list[Any], show: Any
) -> None:
    """Only page's name changes, and every name's holder count moves with it."""
    x, k = ints("x k_any")
    moved = indicator(post._name_of[page] == k) - indicator(pre._name_of[page] == k)
    claim = z3.And(
        z3.Implies(x != page, post._name_of[x] == pre._name_of[x]),
        z3.Implies(k != 0, post._pages_named[k] - pre._pages_named[k] == moved),
    )
    p.prove(
        f"{label}: a name's holder count moves with the pages holding it",
        claim,
        hyps,
        {**show, "x": x, "k": k},
    )
