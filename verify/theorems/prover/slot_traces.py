"""Counterexamples of the theorems over the slot rules (``spec/slots.py``) as replayable traces.

Each theorem's ``trace=`` builder turns the values of a counterexample (a symbolic slot, its
table's runs, a band, a reference count, a naming frontier, a step plan's free pages) into
candidate op sequences of ``verify/trace.py``, sizes taken from the values: the geometry
(B, W, m), the table's slot counts and tail room, the frontiers, the number of holders of a
page.  Each candidate is run on the spec as it is when the builder runs (under the variant
the theorem refuted, when there is one) and the first that fails there is kept, with what
the machine observed; a counterexample no candidate realises gives no trace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ...trace import make_trace
from .query import Values
from .theorem import TraceBuilder
from .traces import ORIGIN, geometry_of, groups_for, observed, spec_coordinator

Candidate = tuple[list[dict[str, Any]], int, int, list[dict[str, Any]]]
"""groups, num_blocks, num_requests, ops: one trace to try."""

Candidates = Callable[[str, Mapping[str, Any]], Iterator[Candidate]]


def _geometry(step: str, v: Mapping[str, Any]) -> dict[str, Any] | None:
    """Group kind (from the step's label), B, W and m of a counterexample, or None."""
    g = geometry_of(step, v)
    if g is None or g["B"] < 1 or g["W"] < 1 or g["m"] < 1:
        return None
    return g


def _failure(trace: dict[str, Any], impl: str) -> Any:
    """The first failing step of `trace` on `impl` (the spec as it is now), or None."""
    from ...machine import implementations, run_trace

    world, _ = run_trace(trace, implementations(impl))
    return world.failure


def slot_traces(theorem: str, candidates: Candidates, impl: str = "spec") -> TraceBuilder:
    """The ``trace=`` builder: per counterexample, the first candidate that fails on `impl`.

    ``impl="both"``: the failure shows only as a disagreement with the native module (the
    machine compares which pages carry names, it does not predict them); the trace records
    it in ``observed`` and is replayed with ``--impl both``.
    """

    def build(
        verdict: str, found: Sequence[tuple[str, Values]], variant: str | None
    ) -> list[dict[str, Any]]:
        from ...machine.side import NativeUnavailable

        if verdict != "counterexample":
            return []
        out: list[dict[str, Any]] = []
        for step, values in found:
            for groups, num_blocks, num_requests, ops in candidates(step, values):
                try:
                    trace = make_trace(
                        groups,
                        num_blocks,
                        num_requests,
                        ops,
                        title=f"{theorem} counterexample: {step}",
                        origin=ORIGIN,
                        variant=variant,
                        observed=observed(theorem, ops, f"counterexample of {step}", values),
                    )
                    failure = _failure(trace, impl)
                except ValueError:  # the values do not map onto ops the spec accepts
                    continue
                except NativeUnavailable:  # impl "both" without the native module
                    return out
                if failure is not None:
                    trace["observed"].update(
                        step=failure.index,
                        properties=failure.failed_properties(),
                        failures=[*trace["observed"]["failures"], *failure.failures],
                        implementations=[side.label for side in failure.sides],
                    )
                    out.append(trace)
                    break
        return out

    return build


def _pool(groups: Sequence[Mapping[str, Any]], slots: int) -> int:
    """A pool roomy enough for `slots` slots of every group (the traces' points are not
    shortfalls)."""
    return 1 + 2 * len(groups) * (slots + 2)


# --- reclaim-slots-follow-runs --------------------------------------------------------------


def reclaim_candidates(step: str, v: Mapping[str, Any]) -> Iterator[Candidate]:
    """A table of the counterexample's two runs and tail room, its floor, then reclaim(f) twice.

    The runs are acquired as two acquires (the first fills count0 whole slots), else as one;
    a floor above 0 is set by a first reclaim at the least frontier whose bound reaches it.
    """
    g = _geometry(step, v)
    if g is None:
        return
    B = g["B"]
    count0, count1 = int(v.get("count0", 0)), int(v.get("count1", 0))
    tail, floor, f = int(v.get("tail", 0)), int(v.get("floor", 0)), int(v["f"])
    slots = count0 + count1
    extent = slots * B - tail
    if min(count0, count1, tail, floor, f) < 0 or tail >= max(B, 1) or f > extent or extent < 1:
        return
    groups = groups_for(g)
    splits = [[count0 * B, extent - count0 * B]] if 0 < count0 * B < extent else []
    for chunks in [*splits, [extent]]:
        ops = [{"op": "group_acquire", "request": 0, "group": 0, "tokens": n} for n in chunks]
        f0 = _floor_frontier(groups, chunks, floor)
        if f0 is None:
            continue
        if f0 > 0:
            ops.append({"op": "group_reclaim", "request": 0, "group": 0, "frontier": f0})
        reclaim = {"op": "group_reclaim", "request": 0, "group": 0, "frontier": f}
        yield groups, _pool(groups, slots), 1, [*ops, reclaim, dict(reclaim)]


def _floor_frontier(groups: list[dict[str, Any]], chunks: list[int], floor: int) -> int | None:
    """The least frontier whose reclaim bound reaches `floor` on the table `chunks` build."""
    if floor == 0:
        return 0
    coord = spec_coordinator(groups, _pool(groups, sum(chunks)))
    table = coord.new_tables()[0]
    mgr = coord.managers[0]
    for n in chunks:
        mgr.acquire(coord.pool, table, n)
    extent = sum(chunks)
    return next((f0 for f0 in range(extent + 1) if mgr._reclaim_bound(table, f0) >= floor), None)


# --- reclaimable-counts-what-reclaim-frees --------------------------------------------------


def reclaimable_candidates(step: str, v: Mapping[str, Any]) -> Iterator[Candidate]:
    """A band [lo, hi) holding slot s, its page held by `ref` holders, then its reclaim.

    Held alone (ref <= 1): a sliding group (B = 1, W = 1: the bound at frontier f is slot f)
    acquires the band's slots and is reclaimed up to lo first; the machine asks
    blocks_reclaimable_at of the table after each step, then reclaim runs at the extent.
    Shared (ref >= 2): a sliding group (B = 1, W = 2: a claim of T tokens shares slot T - 1)
    computes and names s + 1 tokens, ref - 1 other requests claim them, and the first request
    computes one token more, which brings slot s into its band.
    """
    s, lo, hi, ref = (int(v.get(k, 0)) for k in ("s", "lo", "hi", "ref"))
    if min(s, lo, hi) < 0:
        return
    if ref <= 1:
        groups = [{"kind": "sliding", "block_size": 1, "sliding_window": 1}]
        top = max(hi, s + 1, lo + 1)
        ops = [{"op": "group_acquire", "request": 0, "group": 0, "tokens": top}]
        if lo > 0:
            ops.append({"op": "group_reclaim", "request": 0, "group": 0, "frontier": lo})
        ops.append({"op": "group_reclaim", "request": 0, "group": 0, "frontier": top})
        yield groups, _pool(groups, top), 1, ops
        return
    holders = min(ref, 8)
    T = s + 1
    groups = [{"kind": "sliding", "block_size": 1, "sliding_window": 2}]
    ops = [
        {"op": "acquire", "request": 0, "tokens": T},
        {"op": "cache", "request": 0, "doc": 0, "tokens": T},
    ]
    ops += [{"op": "claim", "request": r, "doc": 0, "tokens": T} for r in range(1, holders)]
    ops += [
        {"op": "acquire", "request": 0, "tokens": 1},
        {"op": "reclaim", "request": 0, "frontier": T + 1},
    ]
    yield groups, _pool(groups, holders * (T + 1)), holders, ops


# --- naming-reaches-every-resume-page -------------------------------------------------------


def naming_candidates(step: str, v: Mapping[str, Any]) -> Iterator[Candidate]:
    """A table of the counterexample's extent named up to n, then another request's claim.

    The naming cursor u is set by a first cache_full_blocks of u pages; the claim matches
    the document up to n, which the pages named now must serve.
    """
    g = _geometry(step, v)
    if g is None:
        return
    B = g["B"]
    slots, tail = int(v.get("slots", 0)), int(v.get("tail", 0))
    n, u = int(v.get("n", 0)), int(v.get("u", 0))
    extent = slots * B - tail
    if min(slots, tail, n, u) < 0 or tail >= B or n > extent or n < 1 or u * B > n:
        return
    groups = groups_for(g)
    ops = [{"op": "acquire", "request": 0, "tokens": extent}]
    for cursor in ([u * B] if u > 0 else []) + [n]:
        ops.append({"op": "cache", "request": 0, "doc": 0, "tokens": cursor})
    ops.append({"op": "claim", "request": 1, "doc": 0, "tokens": n})
    yield groups, _pool(groups, 2 * slots), 2, ops


# --- step-plan-apply-never-fails ------------------------------------------------------------


def plan_candidates(step: str, v: Mapping[str, Any]) -> Iterator[Candidate]:
    """Two requests of the counterexample's table shapes, exactly F free pages, one plan.

    Request i acquires its table's extent (one run of count0_i slots less the tail room);
    a page held outside the plan (c_i >= 2) is a named page a third request claims.  The
    plan op asks the same tokens of both requests: n_0, else n_1.
    """
    g = _geometry(step, v)
    if g is None:
        return
    B = g["B"]
    extents, holders = [], []
    for i in range(2):
        count, tail = int(v.get(f"count0_{i}", 0)), int(v.get(f"tail_{i}", 0))
        extents.append(count * B - tail)
        holders.append(int(v.get(f"c_{i}", 1)))
        if count < 0 or tail < 0 or (count > 0 and tail >= B) or (count == 0 and tail > 0):
            return
    F = int(v.get("F", 0))
    if F < 0 or max(holders) > 2:
        return
    groups = groups_for(g)
    ops: list[dict[str, Any]] = []
    for i, extent in enumerate(extents):
        if extent > 0:
            ops.append({"op": "acquire", "request": i, "tokens": extent})
        if holders[i] == 2:
            ops.append({"op": "cache", "request": i, "doc": i, "tokens": extent})
            ops.append({"op": "claim", "request": 2, "doc": i, "tokens": extent})
    coord = spec_coordinator(groups, _pool(groups, sum(extents) + 4))
    tables = [coord.new_tables() for _ in range(3)]
    for ts, extent in zip(tables, extents):
        if extent > 0:
            coord.acquire(ts, extent)
    pinned = coord.pool.num_pinned
    for n in dict.fromkeys([int(v.get("n_0", 0)), int(v.get("n_1", 0))]):
        if n >= 0:
            plan = {"op": "plan", "mask": 3, "first": 0, "tokens": n}
            yield groups, 1 + pinned + F, 3 if 2 in holders else 2, [*ops, plan]


# --- events-replay-to-the-names -------------------------------------------------------------


def events_candidates(step: str, v: Mapping[str, Any]) -> Iterator[Candidate]:
    """One name carried by `holders` pages, then they lose it one by one.

    Each of `holders` requests computes the same one-page document and names it (a full
    group, B = 1); then evict_names takes the name off each request's page in turn, or
    every request is freed and one allocation of every free page evicts them all.  A
    removed event sent while a copy remains leaves the pool dropping a name it no longer
    lists when the next copy goes.
    """
    holders = min(int(v.get("holders", 0)), 8)
    if holders < 1:
        return
    groups = [{"kind": "full", "block_size": 1}]
    named: list[dict[str, Any]] = []
    for r in range(holders):
        named.append({"op": "acquire", "request": r, "tokens": 1})
        named.append({"op": "cache", "request": r, "doc": 0, "tokens": 1})
    evict = [{"op": "evict_names", "pages": [p]} for p in _pages(groups, holders)]
    yield groups, 2 * holders + 2, holders + 1, [*named, *evict]
    frees = [{"op": "free", "request": r} for r in range(holders)]
    take_all = {"op": "acquire", "request": holders, "tokens": holders + 1}
    yield groups, holders + 2, holders + 1, [*named, *frees, take_all]


def _pages(groups: list[dict[str, Any]], holders: int) -> list[int]:
    """The page each of `holders` requests' one-token acquire takes (the spec's order)."""
    coord = spec_coordinator(groups, 2 * holders + 2)
    out = []
    for _ in range(holders):
        ts = coord.new_tables()
        coord.acquire(ts, 1)
        out.append(int(ts[0].slots[0]))
    return out


# --- reclaim-exact-with-shared-pages --------------------------------------------------------


def shared_reclaim_candidates(step: str, v: Mapping[str, Any]) -> Iterator[Candidate]:
    """A table of the counterexample's runs (``reclaim_candidates``), else, when its first
    run's pages have c >= 2 holders, a table whose slot count0 - 1 is shared by c holders
    (``reclaimable_candidates``)."""
    yield from reclaim_candidates(step, v)
    holders, count0 = int(v.get("c", 1)), int(v.get("count0", 0))
    if holders >= 2 and count0 >= 1:
        shared = {"s": count0 - 1, "lo": 0, "hi": count0, "ref": holders}
        yield from reclaimable_candidates(step, shared)


def first_of(*builders: TraceBuilder) -> TraceBuilder:
    """A ``trace=`` builder: the traces of the first of `builders` that gives any."""

    def build(
        verdict: str, found: Sequence[tuple[str, Values]], variant: str | None
    ) -> list[dict[str, Any]]:
        for b in builders:
            out = b(verdict, found, variant)
            if out:
                return out
        return []

    return build


# --- references-equal-holders-per-page ------------------------------------------------------


def free_candidates(step: str, v: Mapping[str, Any]) -> Iterator[Candidate]:
    """A table of n slots holding the page in slot a, h other holders, then free.

    A full group (B = 1: every slot real) acquires the slots; with h >= 1 it names them and
    h other requests claim them (a full group's claim shares every page), so each page of
    the table has h holders besides it.
    """
    n, a, h = (int(v.get(k, 0)) for k in ("n", "a", "h"))
    slots = max(n, a + 1, 1)
    holders = min(max(h, 0), 8)
    groups = [{"kind": "full", "block_size": 1}]
    ops: list[dict[str, Any]] = [{"op": "acquire", "request": 0, "tokens": slots}]
    if holders:
        ops.append({"op": "cache", "request": 0, "doc": 0, "tokens": slots})
        ops += [
            {"op": "claim", "request": r, "doc": 0, "tokens": slots} for r in range(1, holders + 1)
        ]
    ops.append({"op": "free", "request": 0})
    yield groups, slots + 2, holders + 1, ops


def fork_candidates(step: str, v: Mapping[str, Any]) -> Iterator[Candidate]:
    """A table of n slots (a full group, B = 2, one token short of n pages: a shared tail),
    forked into a second request, whose tail copy follows; then the source is freed."""
    n = max(int(v.get("n", 0)), int(v.get("a", 0)) + 1, 1)
    slots = min(n, 16)
    groups = [{"kind": "full", "block_size": 2}]
    ops: list[dict[str, Any]] = [
        {"op": "acquire", "request": 0, "tokens": 2 * slots - 1},
        {"op": "fork", "request": 0, "into": 1},
        {"op": "copy_tail", "request": 1},
        {"op": "free", "request": 0},
    ]
    yield groups, 2 * slots + 3, 2, ops


def per_page_candidates(step: str, v: Mapping[str, Any]) -> Iterator[Candidate]:
    """references-equal-holders-per-page's candidates: a fork's for the fork and copy_tail
    steps, a free's for the others."""
    if step.startswith(("fork", "copy_tail")):
        yield from fork_candidates(step, v)
    else:
        yield from free_candidates(step, v)
