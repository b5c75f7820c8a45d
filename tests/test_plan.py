"""Step plans (semantics section 9) on both implementations: exact figures, bad input."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest


def ids(a: Any) -> list[int]:
    return [int(x) for x in a]


def full(impl: ModuleType, num_blocks: int) -> Any:
    return impl.Coordinator([impl.GroupSpec("full", 4)], impl.BlockPool(num_blocks))


def fields(p: Any) -> tuple[int, int, int, int, int, bool]:
    return (p.stepped, p.preempted, p.pages_taken, p.pages_released, p.free_after, p.top_fits)


def state(c: Any, requests: list[list[Any]]) -> tuple[Any, ...]:
    return (
        ids(c.pool.free_queue()),
        ids(c.pool.ref_counts()),
        [
            [(ids(t.page_ids()), t.tail_available, t.reclaim_floor, t.is_bound) for t in ts]
            for ts in requests
        ],
    )


def test_a_step_that_fits_steps_every_request(impl: ModuleType) -> None:
    c = full(impl, 10)
    a, b = c.new_tables(), c.new_tables()
    p = c.plan_step([(a, 16), (b, 16)])
    assert fields(p) == (2, 0, 8, 0, 1, True)
    c.apply_step(p)
    assert (ids(a[0].page_ids()), ids(b[0].page_ids()), c.pool.num_free) == (
        [1, 2, 3, 4],
        [5, 6, 7, 8],
        1,
    )


def test_the_lowest_priority_request_is_preempted_when_the_pool_is_short(
    impl: ModuleType,
) -> None:
    c = full(impl, 10)
    a, b = c.new_tables(), c.new_tables()
    c.apply_step(c.plan_step([(a, 16), (b, 16)]))
    # a needs 5 pages for 20 more tokens, b 4; 1 free: preempting b releases 4, 5 <= 1 + 4.
    p = c.plan_step([(a, 20), (b, 16)])
    assert fields(p) == (1, 1, 5, 4, 0, True)
    c.apply_step(p)
    # b's pages 5..8 went back to the queue front (unnamed), a's acquire took them.
    assert ids(a[0].page_ids()) == list(range(1, 10))
    assert (len(b[0]), b[0].is_bound, c.pool.num_free) == (0, False, 0)


def test_preemption_frees_lowest_priority_first_then_steps(impl: ModuleType) -> None:
    c = full(impl, 10)
    reqs = [c.new_tables() for _ in range(3)]
    for ts in reqs:
        assert c.acquire(ts, 8)  # pages 1 2, 3 4, 5 6
    top = c.new_tables()
    p = c.plan_step([(top, 36), *[(ts, 0) for ts in reqs]])
    # need 9; free 3; releasing C gives 5, B and C 7, all three 9.
    assert fields(p) == (1, 3, 9, 6, 0, True)
    c.apply_step(p)
    # C freed first (5, 6 to the front), then B (3, 4), then A (1, 2): queue 1..9.
    assert ids(top[0].page_ids()) == list(range(1, 10))


def shared_prefix(impl: ModuleType) -> tuple[Any, Any, Any]:
    """Pool of 8: request a computed 8 tokens (pages 1, 2, named), b claimed them."""
    c = full(impl, 8)
    keys = impl.page_keys(list(range(8)), 4)
    a, b = c.new_tables(), c.new_tables()
    assert c.acquire(a, 8)
    c.cache_full_blocks(a, keys, 8)
    c.claim(b, c.match_prefix(keys))
    assert ids(c.pool.ref_counts())[1:3] == [2, 2]
    return c, a, b


def test_a_shared_page_counts_only_when_every_holder_is_preempted(impl: ModuleType) -> None:
    c, a, b = shared_prefix(impl)
    top = c.new_tables()
    # need 6, 1, 1; free 5. Preempting b alone releases nothing (a still holds 1, 2);
    # preempting a and b releases both pages once: 6 <= 5 + 2.
    p = c.plan_step([(top, 24), (a, 4), (b, 4)])
    assert fields(p) == (1, 2, 6, 2, 1, True)
    c.apply_step(p)
    # b freed (1, 2 still held), then a: 1, 2 are named, so they join the back (2 first) and
    # the acquire takes the never-used 3..7 before evicting 2.
    assert ids(top[0].page_ids()) == [3, 4, 5, 6, 7, 2]
    assert c.pool.num_free == 1


def test_a_fresh_high_priority_request_after_shared_ones_preempts_nothing(
    impl: ModuleType,
) -> None:
    c, a, b = shared_prefix(impl)
    top = c.new_tables()
    p = c.plan_step([(a, 4), (b, 4), (top, 24)])
    assert fields(p) == (2, 1, 2, 0, 3, True)


def test_a_request_that_cannot_fit_even_alone_is_flagged(impl: ModuleType) -> None:
    c = full(impl, 4)
    t = c.new_tables()
    before = state(c, [t])
    p = c.plan_step([(t, 16)])
    assert fields(p) == (0, 1, 0, 0, 3, False)
    c.apply_step(p)
    assert state(c, [t]) == before


def test_an_empty_plan_changes_nothing(impl: ModuleType) -> None:
    c = full(impl, 4)
    p = c.plan_step([])
    assert fields(p) == (0, 0, 0, 0, 3, True)
    c.apply_step(p)
    assert c.pool.num_free == 3


@pytest.mark.parametrize("change", ["pool", "tail", "other-request"])
def test_a_stale_plan_raises_and_changes_nothing(impl: ModuleType, change: str) -> None:
    c = full(impl, 10)
    a, other = c.new_tables(), c.new_tables()
    assert c.acquire(a, 6)  # 2 pages, 2 tokens of tail room
    p = c.plan_step([(a, 4)])
    if change == "pool":
        c.reclaim_expired(a, 6)  # full group: nothing changes, then a real change:
        c.free(a)
    elif change == "tail":
        assert c.acquire(a, 1)  # tail room only: no page taken, but a's shape changed
    else:
        assert c.acquire(other, 4)  # a table outside the plan takes a page
    before = state(c, [a, other])
    with pytest.raises(ValueError, match="stale"):
        c.apply_step(p)
    assert state(c, [a, other]) == before


def test_a_plan_applies_once(impl: ModuleType) -> None:
    c = full(impl, 10)
    a = c.new_tables()
    p = c.plan_step([(a, 0)])
    c.apply_step(p)
    with pytest.raises(ValueError, match="applied"):
        c.apply_step(p)


def test_a_plan_of_another_coordinator_is_rejected(impl: ModuleType) -> None:
    c, d = full(impl, 10), full(impl, 10)
    a = c.new_tables()
    p = d.plan_step([(a, 4)])
    before = state(c, [a])
    with pytest.raises(ValueError, match="another coordinator"):
        c.apply_step(p)
    assert state(c, [a]) == before


def test_a_table_in_two_requests_is_a_value_error(impl: ModuleType) -> None:
    c = impl.Coordinator(
        [impl.GroupSpec("full", 4), impl.GroupSpec("sliding", 4, sliding_window=4)],
        impl.BlockPool(10),
    )
    a, b = c.new_tables(), c.new_tables()
    with pytest.raises(ValueError, match="two requests"):
        c.plan_step([(a, 4), ([b[0], a[1]], 4)])


def test_a_foreign_table_is_a_value_error(impl: ModuleType) -> None:
    c, d = full(impl, 10), full(impl, 10)
    foreign = d.new_tables()
    assert d.acquire(foreign, 4)
    with pytest.raises(ValueError, match="another pool"):
        c.plan_step([(c.new_tables(), 4), (foreign, 4)])


@pytest.mark.parametrize(
    ("requests", "error"),
    [(None, TypeError), ([5], TypeError), ([("x", 4)], TypeError), ("bad-count", ValueError)],
)
def test_malformed_requests_are_rejected(
    impl: ModuleType, requests: Any, error: type[Exception]
) -> None:
    c = full(impl, 10)
    if requests == "bad-count":
        requests = [(c.new_tables(), -1)]
    with pytest.raises(error):
        c.plan_step(requests)


def test_apply_of_something_else_is_a_type_error(impl: ModuleType) -> None:
    with pytest.raises(TypeError):
        full(impl, 10).apply_step(None)
