"""Steps that once proved with the function they are about replaced now fail without it.

A proof step that still proves with the function under test replaced by an unknown one (or
by a constant) proves nothing about that function (docs/theorems.md, "Definitional
check").  Each case here replaces one spec function a theorem executes and checks that the
theorem no longer proves, at the step that depends on it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from livetail.spec import geometry as geo
from livetail.spec import slots
from livetail.verify.theorems import run_theorem
from livetail.verify.theorems.prover.terms import uninterpreted


@contextlib.contextmanager
def constant(module: Any, attribute: str, value: bool) -> Iterator[None]:
    """Within the block ``module.attribute`` answers ``value`` whatever its arguments."""
    original = module.__dict__[attribute]
    setattr(module, attribute, lambda *args, **kwargs: value)
    try:
        yield
    finally:
        setattr(module, attribute, original)


STATE = "[state (W = 2)]"
CASES = [
    (
        "reclaimable-counts-what-reclaim-frees",
        lambda: uninterpreted(slots, "punched"),
        "counted iff reclaim empties the slot of a page that re-enters the queue",
    ),
    (
        "reclaim-exact-with-shared-pages",
        lambda: uninterpreted(geo, "reclaim_bound"),
        f"{STATE} every slot the floor moves past is expired",
    ),
    (
        "events-replay-to-the-names",
        lambda: constant(slots, "stores", True),
        "naming one more page keeps replay = names and the balance",
    ),
    (
        "events-replay-to-the-names",
        lambda: uninterpreted(slots, "stores"),
        "naming one more page keeps replay = names and the balance",
    ),
    (
        "events-replay-to-the-names",
        lambda: uninterpreted(slots, "removes"),
        "a page losing the name keeps replay = names and the balance",
    ),
    (
        "events-replay-to-the-names",
        lambda: constant(slots, "clears", True),
        "reset_names keeps replay = names and the balance, and keeps a pinned page's name",
    ),
    (
        "events-replay-to-the-names",
        lambda: uninterpreted(slots, "clears"),
        "reset_names keeps replay = names and the balance, and keeps a pinned page's name",
    ),
]


@pytest.mark.parametrize(
    "theorem,replaced,step",
    CASES,
    ids=[
        "punched-unknown",
        "reclaim-bound-unknown",
        "stores-always",
        "stores-unknown",
        "removes-unknown",
        "clears-always",
        "clears-unknown",
    ],
)
def test_theorem_fails_at_its_step_with_the_function_replaced(
    theorem: str, replaced: Any, step: str
) -> None:
    with replaced():
        r = run_theorem(theorem, quick=True)
    assert r["verdict"] in ("counterexample", "unknown"), (r["verdict"], r["message"])
    assert r["message"].startswith(step), r["message"]


@pytest.mark.parametrize(
    "theorem",
    [
        "reclaimable-counts-what-reclaim-frees",
        "reclaim-exact-with-shared-pages",
        "events-replay-to-the-names",
    ],
)
def test_theorem_proves_with_the_real_functions(theorem: str) -> None:
    r = run_theorem(theorem, quick=True)
    assert r["verdict"] == "proved", r["message"]


def test_reset_names_decides_by_clears() -> None:
    from livetail import spec

    def named_pool() -> tuple[spec.BlockPool, spec.Coordinator, list[Any]]:
        pool = spec.BlockPool(8)
        c = spec.Coordinator([spec.GroupSpec("full", 2)], pool)
        a = c.new_tables()
        assert c.acquire(a, 4)
        assert c.cache_full_blocks(a, spec.page_keys([1, 2, 3, 4], 2), 4) == 2
        return pool, c, a

    pool, c, a = named_pool()
    assert pool.reset_names() is False  # both named pages pinned: clears(2) is False
    assert (pool.num_cached, pool.name(1)) == (2, (0, pool.name(1)[1]))  # type: ignore[index]
    c.free(a)
    assert pool.reset_names() is True and pool.num_cached == 0
    pool, c, a = named_pool()
    with constant(slots, "clears", True):  # the rule, not the pool's own test, decides
        assert pool.reset_names() is True
    assert pool.num_cached == 0 and pool.name(1) is None
