"""The machinery of the prefix-caching theorems: layouts, bounds, and runs of the spec.

A ``World`` is a run of the spec's own classes (``livetail.spec``) recorded as trace ops;
``points`` yields every state of a prompt computed chunk by chunk (then evictions, frees,
duplicates, sharing) and ``walk`` calls a check in each, over every configuration inside
the bounds below.  The theorems are in ``verify/theorems/prefix.py`` and, through
``worlds/host.py``, ``host_offload.py`` and ``host_loads.py``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from livetail import spec

from ..prover.prover import Prover
from ..prover.query import Values
from ..prover.theorem import TraceBuilder
from ..prover.traces import ops_trace

Op = dict[str, Any]
Name = tuple[int, bytes]

DOC = 0
"""Every run uses document 0 of the trace machine (docs/traces.md, "Operations")."""
SHARED_PREFIX = 24


def doc_tokens(doc: int, n: int) -> list[int]:
    """Token ids of the trace machine's document `doc` (``verify/machine_oracle.py``)."""
    return [i if i < SHARED_PREFIX else 1_000_003 * (doc + 1) + i for i in range(n)]


_KEYS: dict[tuple[int, int, int], list[bytes]] = {}


def doc_keys(doc: int, tokens: int, base: int) -> list[bytes]:
    """The standard key chain over the full base pages of the document's first tokens."""
    k = (doc, tokens // base, base)
    if k not in _KEYS:
        _KEYS[k] = spec.page_keys(doc_tokens(doc, (tokens // base) * base), base)
    return _KEYS[k]


# --- bounds, and what the runs covered (reported as notes) -------------------------------------

WALK_MAX_N = 2  # match, claim, boundary: prompts of N <= 2*lcm + 1 tokens
WALK_QUICK = 1  # ... match and claim: N <= lcm + 1 with --quick (the host-tier walks' bound)
WALK_EXHAUSTIVE = 4  # ... every chunking for N <= 4
CHARGE_FIRST = 3  # admission with a hit: the rest of the chunk, first <= 3*lcm + 1
CHARGE_EXTRA = 2  # ... the decode reserve, extra <= 2*lcm + 1
HIT_MAX_N = 3  # property 8: prompts of N <= 3*lcm + 1 tokens
HIT_EXHAUSTIVE = 8  # ... every chunking for N <= 8
HIT_EXHAUSTIVE_QUICK = 6  # ... for N <= 6 with --quick (N = 7, 8: the chunkings beyond it)

COVERAGE: dict[str, int] = {}
"""Counts of the interesting cases a run met, so a report shows none passed vacuously."""


def _count(key: str, n: int = 1) -> None:
    COVERAGE[key] = COVERAGE.get(key, 0) + n


def _exhaust(p: Prover, search: Callable[[], tuple[int, Values | None]]) -> None:
    COVERAGE.clear()
    p.exhaust("every configuration within the bounds", search)
    p.note("coverage", dict(sorted(COVERAGE.items())))


# --- layouts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class G:
    """One group spec: kind, page size, window (sliding only), live tail (sliding only)."""

    kind: str
    B: int
    W: int | None = None
    live: bool = False

    def group_spec(self) -> Any:
        return spec.GroupSpec(self.kind, self.B, self.W, self.live)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "block_size": self.B}
        if self.W is not None:
            d["sliding_window"] = self.W
        if self.live:
            d["live_tail_alloc"] = True
        return d

    def full_allocation(self) -> G:
        return G(self.kind, self.B, self.W, False)

    def resume(self) -> int:
        """Slots behind a boundary a match needs: R = ceil((W-1)/B), the state group's W
        being 2, written out here rather than taken from the spec (-1: every slot)."""
        if self.kind == "full":
            return -1
        W = 2 if self.W is None else self.W
        return -(-(W - 1) // self.B)

    def __str__(self) -> str:
        if self.kind != "sliding":
            return f"{self.kind}(B={self.B})"
        return f"{'live' if self.live else 'sliding'}(B={self.B},W={self.W})"


Layout = tuple[G, ...]


class Aligned(tuple[G, ...]):
    """A layout whose coordinator takes an alignment (semantics 13.9) above its lcm."""

    alignment: int

    def __new__(cls, groups: Sequence[G], alignment: int) -> Aligned:
        out = super().__new__(cls, groups)
        out.alignment = alignment
        return out


def alignment_of(layout: Layout) -> int | None:
    """The coordinator's alignment for the layout: None for the lcm."""
    return getattr(layout, "alignment", None)


def like(layout: Layout, groups: Sequence[G]) -> Layout:
    """`groups` with `layout`'s alignment."""
    a = alignment_of(layout)
    return tuple(groups) if a is None else Aligned(groups, a)


def full(B: int) -> G:
    return G("full", B)


def state(B: int) -> G:
    return G("state", B)


def sliding(B: int, W: int, live: bool = False) -> G:
    return G("sliding", B, W, live)


def describe(layout: Layout) -> str:
    a = alignment_of(layout)
    return " + ".join(map(str, layout)) + ("" if a is None else f", alignment {a}")


def lcm_of(layout: Layout) -> int:
    """The boundary step: the lcm of the page sizes, or the layout's alignment if it has one."""
    out = 1
    for g in layout:
        out = out * g.B // math.gcd(out, g.B)
    return alignment_of(layout) or out


def base_of(layout: Layout) -> int:
    out = 0
    for g in layout:
        out = math.gcd(out, g.B)
    return out


# The match, claim and boundary theorems: every kind, page sizes 1 to 4, live tail with holes
# (m > R), degenerate live tail (R >= m), W = 1 (R = 0), plain sliding, and one or two state
# groups (whose support is not monotone).
LAYOUTS: list[Layout] = [
    (full(2),),
    (state(2),),
    (sliding(1, 2),),
    (sliding(1, 2, True), full(2)),
    (sliding(1, 2, True), full(4)),
    (sliding(1, 3, True), full(4)),
    (sliding(1, 1, True), full(3)),
    (sliding(2, 3, True), full(4)),
    (sliding(1, 2, True), state(2)),
    (sliding(1, 2, True), state(1), full(3)),
    (sliding(2, 2), state(2)),
    (full(1), state(2)),
    (sliding(1, 4, True), full(2)),
    (sliding(1, 1), state(1), full(2)),
]

# Property 8: the layouts above, two live groups, a live group of page size 3, lcm 6, and
# coordinators aligned above their lcm.
HIT_LAYOUTS: list[Layout] = [
    *LAYOUTS,
    (sliding(1, 2, True), sliding(2, 3, True), full(4)),
    (sliding(3, 4, True), sliding(2, 2)),
    (sliding(1, 3, True), state(2), full(3)),
    (sliding(1, 1, True), sliding(1, 2, True), state(2)),
    # Alignments above the lcm (semantics 13.9): hits, resume pages and sliding and state
    # names on their multiples only; full groups still name every slot.
    Aligned((sliding(1, 2, True), full(1)), 4),
    Aligned((full(2), sliding(1, 2)), 4),
    Aligned((sliding(2, 3, True), state(2)), 4),
    Aligned((sliding(1, 3, True), full(1)), 3),
]

# The admission charge with a hit: every live-tail shape, and each kind beside one.
CHARGE_LAYOUTS: list[Layout] = [
    (full(2),),
    (state(2),),
    (sliding(2, 3),),
    (sliding(1, 2, True), full(2)),
    (sliding(1, 2, True), full(4)),
    (sliding(1, 3, True), full(4)),
    (sliding(1, 1, True), full(3)),
    (sliding(2, 3, True), full(4)),
    (sliding(1, 2, True), state(1), full(3)),
    (sliding(3, 4, True), sliding(2, 2)),
    (sliding(1, 4, True), full(2)),
]


def chunkings(N: int, L: int, exhaustive_upto: int) -> list[tuple[int, ...]]:
    """Chunk ends (increasing, the last is N).

    Every chunking for N <= exhaustive_upto; else one chunk, token by token, ending on every,
    every other (from the first or the second) or no lcm multiple, one token either side of
    every lcm multiple, and every even token.
    """
    if N <= exhaustive_upto:
        inner = range(1, N)
        return [(*c, N) for r in range(N) for c in itertools.combinations(inner, r)]
    mults = list(range(L, N, L))
    cands: list[list[int]] = [
        [],
        list(range(1, N)),
        mults,
        mults[1::2],
        mults[::2],
        [x - 1 for x in mults],
        [x + 1 for x in mults],
        list(range(2, N, 2)),
    ]
    return sorted({tuple(sorted({x for x in c if 0 < x < N} | {N})) for c in cands})


def prompt_lengths(upto: int, L: int, base: int) -> list[int]:
    """Prompts to match: 0, and each lcm multiple up to `upto` and one base page less."""
    out = {0}
    for j in range(1, upto // L + 1):
        out |= {j * L, j * L - base}
    return sorted(out)


# --- a run of the spec, recorded as trace ops ------------------------------------------------


class World:
    """A coordinator over one pool, `num_requests` table sets, and the ops run so far."""

    def __init__(self, layout: Layout, num_blocks: int, num_requests: int = 4) -> None:
        self.layout = layout
        self.num_blocks = num_blocks
        self.num_requests = num_requests
        self.coord = spec.Coordinator(
            [g.group_spec() for g in layout],
            spec.BlockPool(num_blocks),
            alignment=alignment_of(layout),
        )
        self.pool = self.coord.pool
        self.tables = [self.coord.new_tables() for _ in range(num_requests)]
        self.ops: list[Op] = []
        # When each current name was registered (page -> sequence number).
        self.registered: dict[int, int] = {}
        self.seq = 0
        self.taken = 0  # pages acquires took from the free queue
        self.peak = 0  # the most pages pinned after an acquire

    @property
    def base(self) -> int:
        return int(self.coord.base_block_size)

    @property
    def lcm(self) -> int:
        return int(self.coord.lcm_block_size)

    def keys(self, tokens: int) -> list[bytes]:
        return doc_keys(DOC, tokens, self.base)

    def copy(self, requests: Sequence[int] | None = None) -> World:
        """An independent copy (the coordinator's managers and specs are stateless: shared).

        With `requests`, only those requests' tables are copied: the others stay this
        world's own, bound to its pool, so the copy may run operations on those requests
        only (an operation of the coordinator touches only the tables it is given).
        """
        old = self.pool
        pool = _clone(old)
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.pool = pool
        new.coord = _clone(self.coord, old, pool, deep=False)
        new.tables = [
            [_clone(t, old, pool) for t in ts] if requests is None or r in requests else ts
            for r, ts in enumerate(self.tables)
        ]
        new.ops = list(self.ops)
        new.registered = dict(self.registered)
        return new

    def do(self, op: Op) -> Any:
        """Run one trace op as the trace machine does; returns what the call returned."""
        self.ops.append(op)
        kind = op["op"]
        ts = self.tables[op["request"]]
        c = self.coord
        if kind == "acquire":
            free = self.pool.num_free
            ok = c.acquire(ts, op["tokens"])
            self.taken += free - self.pool.num_free
            self.peak = max(self.peak, self.pool.num_pinned)
            return ok
        if kind == "cache":
            before = dict(self.pool._name_of)
            named = c.cache_full_blocks(ts, self.keys(op["tokens"]), op["tokens"])
            for page, name in self.pool._name_of.items():
                if before.get(page) != name:
                    self.registered[page] = self.seq
                    self.seq += 1
            return named
        if kind == "reclaim":
            return c.reclaim_expired(ts, op["frontier"])
        if kind == "free":
            c.free(ts)
            return None
        if kind == "claim":
            m = c.match_prefix(self.keys(op["tokens"]))
            c.blocks_consumed_by_claim(m)
            c.claim(ts, m)
            return m
        raise ValueError(f"op {kind!r} is not used here")

    def chunk(self, r: int, start: int, end: int) -> bool:
        """An engine's forward step: acquire the chunk, name its pages, then reclaim."""
        if not self.do({"op": "acquire", "request": r, "tokens": end - start}):
            return False
        self.do({"op": "cache", "request": r, "doc": DOC, "tokens": end})
        self.do({"op": "reclaim", "request": r, "frontier": end})
        return True

    def compute(self, r: int, ends: Sequence[int]) -> bool:
        start = 0
        for e in ends:
            if not self.chunk(r, start, e):
                return False
            start = e
        return True

    def snapshot(self) -> tuple[Any, ...]:
        """Everything a read-only call must leave alone, order included."""
        pool = self.pool
        tables = tuple(
            (
                tuple(t.slots),
                t.tail_available,
                t.reclaim_floor,
                t.named_upto,
                t.pool is pool,
                t.pool is None,
                t.block_size,
            )
            for ts in self.tables
            for t in ts
        )
        return (
            tuple(pool.free_queue()),
            tuple(pool.ref_counts()),
            tuple(pool._name_of.items()),
            tuple((name, tuple(pages)) for name, pages in pool._pages_named.items()),
            tables,
        )

    def names(self) -> tuple[Any, ...]:
        pool = self.pool
        return (
            tuple(pool._name_of.items()),
            tuple((name, tuple(pages)) for name, pages in pool._pages_named.items()),
        )

    def values(self, problem: str, then: Sequence[Op] = (), **extra: Any) -> Values:
        """A failure: the layout, pool, ops so far (plus `then`) and what went wrong."""
        return {
            "layout": describe(self.layout),
            "groups": [g.to_dict() for g in self.layout],
            "num_blocks": self.num_blocks,
            "num_requests": self.num_requests,
            **({} if alignment_of(self.layout) is None else {"alignment": self.coord.alignment}),
            "ops": [dict(op) for op in [*self.ops, *then]],
            **extra,
            "problem": problem,
        }


def _clone(obj: Any, old: Any = None, new: Any = None, deep: bool = True) -> Any:
    """A copy of a spec object whose state is lists, dicts (of lists) and immutable values;
    an attribute that is `old` (by identity) becomes `new`."""
    d = obj.__dict__.copy()
    for k, v in d.items():
        if old is not None and v is old:
            d[k] = new
        elif not deep:
            continue
        elif type(v) is list:
            d[k] = v.copy()
        elif type(v) is dict:
            v = d[k] = v.copy()
            for key, x in v.items():
                if type(x) is list:
                    v[key] = x.copy()
    out = object.__new__(type(obj))
    out.__dict__ = d
    return out


class Prefixes:
    """Worlds after request 0 computed a chunking's first chunks, by their ends: a chunking
    continues a copy of the world of its longest prefix computed so far instead of
    recomputing it (the same ops, so the same world)."""

    def __init__(self, fresh: World) -> None:
        self.done: dict[tuple[int, ...], World] = {(): fresh}

    def compute(self, ends: Sequence[int]) -> World | None:
        """A world where request 0 computed `ends` (None if a chunk did not fit the pool)."""
        ends = tuple(ends)
        k = len(ends)
        while ends[:k] not in self.done:
            k -= 1
        w = self.done[ends[:k]].copy()
        for i in range(k, len(ends)):
            if not w.chunk(0, ends[i - 1] if i else 0, ends[i]):
                return None
            self.done[ends[: i + 1]] = w.copy()
        return w


def claim_op(r: int, tokens: int, **between: int) -> Op:
    return {"op": "claim", "request": r, "doc": DOC, "tokens": tokens, **between}


def pages_ever(layout: Layout, N: int) -> int:
    """An upper bound on the pages computing N tokens allocates: one per slot it creates."""
    return sum(-(-N // g.B) for g in layout)


def probes(layout: Layout, max_n: int) -> Prefixes:
    """Runs of request 0 alone in a pool where nothing is evicted, for _peak_and_total."""
    return Prefixes(World(layout, 2 + pages_ever(layout, max_n), 1))


def _peak_and_total(probe: Prefixes, ends: Sequence[int]) -> tuple[int, int]:
    """(peak pages pinned, pages allocated) when request 0 computes `ends` in a big pool
    (`probes`): the peak is after a chunk's acquire, before its reclaim."""
    w = probe.compute(ends)
    assert w is not None
    return w.peak, w.taken


def _trace_builder(name: str) -> TraceBuilder:
    """The failing run's ops (ending with the claim or admission it was checked by)."""

    def build(
        verdict: str, found: Sequence[tuple[str, Values]], variant: str | None
    ) -> list[dict[str, Any]]:
        out = []
        for _step, v in found:
            if "ops" not in v:
                continue
            out.append(
                ops_trace(
                    v["groups"],
                    v["num_blocks"],
                    v["num_requests"],
                    v["ops"],
                    f"{name} {verdict}: {v['problem']}",
                    name,
                    variant,
                    v,
                    alignment=v.get("alignment"),
                )
            )
        return out

    return build


# --- the walk: a prompt computed, then evictions, frees, duplicates, sharing -----------------


def _evict(w: World, r: int) -> Iterator[World]:
    """Request r acquires a token at a time: each allocation pops the oldest free pages."""
    for _ in range(2 * w.num_blocks):
        if w.pool.num_free == 0 or not w.do({"op": "acquire", "request": r, "tokens": 1}):
            return
        yield w


def points(
    layout: Layout, ends: Sequence[int], num_blocks: int, prefixes: Prefixes | None = None
) -> Iterator[World]:
    """Every state the match and claim theorems check (callers must not change them).

    Request 0 computes ``ends``, naming then reclaiming after each chunk; then, each from that
    state: (E) request 1 allocates a token at a time while request 0 holds its pages; (F)
    the same after request 0 frees; (D) request 1 computes the same prompt in one chunk while
    request 0 holds or after it freed (two pages per name; in a small pool request 1 evicts
    request 0's pages and names its own), then frees; (S) request 2 claims request 0's
    prompt, request 0 frees, request 2 frees.  Request 3 stays fresh for the checks' claims.
    `prefixes` (of worlds of this layout and pool) shares chunks with other chunkings.
    """
    N = ends[-1]
    prefixes = prefixes or Prefixes(World(layout, num_blocks))
    for i in range(1, len(ends) + 1):
        computed = prefixes.compute(ends[:i])
        if computed is None:
            return
        w = computed
        yield w
    yield from _evict(w.copy(), 1)
    f = w.copy()
    f.do({"op": "free", "request": 0})
    yield f
    yield from _evict(f, 1)
    for free_first in (False, True):
        d = w.copy()
        if free_first:
            d.do({"op": "free", "request": 0})
        if d.chunk(1, 0, N):
            yield d
            d.do({"op": "free", "request": 1})
            yield d
    s = w
    s.do(claim_op(2, N))
    yield s
    s.do({"op": "free", "request": 0})
    yield s
    s.do({"op": "free", "request": 2})
    yield s


Check = Callable[[World, Sequence[int]], "Values | None"]


def walk(
    layouts: Sequence[Layout], max_n: int, exhaustive_upto: int, check: Check
) -> tuple[int, Values | None]:
    """`check(world, prompt lengths)` in every state of every configuration."""
    cases = 0
    for layout in layouts:
        L, base = lcm_of(layout), base_of(layout)
        probe = probes(layout, max_n * L + 1)
        prefixes: dict[int, Prefixes] = {}
        for N in range(1, max_n * L + 2):
            prompts = prompt_lengths(N + L, L, base)
            for ends in chunkings(N, L, exhaustive_upto):
                peak, total = _peak_and_total(probe, ends)
                # Tight: request 0's own allocations evict pages it reclaimed (1 + peak);
                # roomy: nothing request 0 released is popped before request 1 allocates.
                for num_blocks in sorted({1 + peak, 2 + total}):
                    if num_blocks not in prefixes:
                        prefixes[num_blocks] = Prefixes(World(layout, num_blocks))
                    for w in points(layout, ends, num_blocks, prefixes[num_blocks]):
                        cases += len(prompts)
                        _count("states")
                        failure = check(w, prompts)
                        if failure is not None:
                            return cases, failure
    return cases, None


def supports(g: G, gi: int, T: int, keys: Sequence[bytes], base: int, named: set[Name]) -> bool:
    """Section 8, by definition: the slots group g needs to resume at T all carry names."""
    k = g.B // base
    b = T // g.B
    R = g.resume()
    low = 0 if R < 0 else max(0, b - R)
    return all((gi, keys[(j + 1) * k - 1]) in named for j in range(low, b))
