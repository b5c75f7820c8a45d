"""Section 7, property 9 (retention): bounded, exhaustive over the spec.

Retention is procedural (a queue, reference counts), so the theorem runs the spec's own
classes over every configuration inside the stated bounds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from livetail import spec

from .prover.prover import Prover
from .prover.query import Values
from .prover.theorem import theorem
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
