"""The retention rule (semantics section 2, property 9): named free pages wait at the back."""

from __future__ import annotations

from types import ModuleType
from typing import Any


def ids(a: Any) -> list[int]:
    return [int(x) for x in a]


def named_request(impl: ModuleType, retention: bool) -> tuple[Any, Any, list[bytes]]:
    """Pool of 8, one full group of 4 tokens: a request of 12 tokens names its first 2 pages."""
    c = impl.Coordinator([impl.GroupSpec("full", 4)], impl.BlockPool(8, retention=retention))
    keys = impl.page_keys(list(range(8)), 4)
    ts = c.new_tables()
    assert c.acquire(ts, 12)  # pages 1, 2, 3
    assert c.cache_full_blocks(ts, keys, 12) == 2  # slots 0, 1 named; slot 2 has no key
    c.free(ts)
    return c, ts, keys


def test_freed_named_pages_join_the_back_and_unnamed_ones_the_front(impl: ModuleType) -> None:
    c, _, _ = named_request(impl, True)
    # Released 3 (unnamed: front), then 2 and 1 (named: back).
    assert ids(c.pool.free_queue()) == [3, 4, 5, 6, 7, 2, 1]
    assert (c.pool.num_cached, c.pool.num_cached_free) == (2, 2)


def test_allocation_evicts_a_name_only_when_no_unnamed_page_is_free(impl: ModuleType) -> None:
    c, ts, keys = named_request(impl, True)
    assert c.acquire(ts, 20)  # 5 pages: every unnamed free page, no name dropped
    assert ids(ts[0].page_ids()) == [3, 4, 5, 6, 7]
    assert c.pool.num_cached == 2
    assert c.match_prefix(keys).num_tokens == 8
    other = c.new_tables()
    assert c.acquire(other, 4)  # one more page: the oldest named one (2) loses its name
    assert ids(other[0].page_ids()) == [2]
    assert c.pool.num_cached == 1
    assert c.match_prefix(keys).num_tokens == 4  # slot 0 (page 1) still named


def churn(impl: ModuleType, retention: bool) -> tuple[Any, list[bytes], list[int]]:
    """After the named request: another takes 5 pages, frees them, and a third takes one."""
    c, ts, keys = named_request(impl, retention)
    assert c.acquire(ts, 20)
    c.free(ts)  # five unnamed pages, released last slot first
    other = c.new_tables()
    assert c.acquire(other, 4)
    return c, keys, ids(other[0].page_ids())


def test_unnamed_churn_reuses_its_own_pages_and_keeps_the_prefix(impl: ModuleType) -> None:
    c, keys, taken = churn(impl, True)
    # Slots held 3..7, released 7 first, each pushed on the front: [3, 4, 5, 6, 7, 2, 1].
    assert taken == [3]
    assert ids(c.pool.free_queue()) == [4, 5, 6, 7, 2, 1]
    assert c.match_prefix(keys).num_tokens == 8


def test_without_retention_unnamed_churn_evicts_the_prefix(impl: ModuleType) -> None:
    c, keys, taken = churn(impl, False)
    # Slots held 4, 5, 6, 7, 3, released 3 first, each appended: [2, 1, 3, 7, 6, 5, 4].
    assert taken == [2]
    assert ids(c.pool.free_queue()) == [1, 3, 7, 6, 5, 4]
    assert c.match_prefix(keys).num_tokens == 4


def test_claiming_a_named_free_page_takes_it_from_the_back(impl: ModuleType) -> None:
    c, _, keys = named_request(impl, True)
    m = c.match_prefix(keys)
    assert m.num_tokens == 8
    assert c.blocks_consumed_by_claim(m) == 2
    ts = c.new_tables()
    c.claim(ts, m)
    assert ids(ts[0].page_ids()) == [1, 2]
    assert ids(c.pool.free_queue()) == [3, 4, 5, 6, 7]
