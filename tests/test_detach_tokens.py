"""Semantics section 12 on both implementations, exact values: deferred free
(Coordinator.detach / release_detached, DetachedTables) and token ids in names
(cache_full_blocks(..., token_ids=...)), including the host tier's copies of them."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest


def ids(a: Any) -> list[int]:
    return [int(x) for x in a]


def mixed(impl: ModuleType, pages: int = 40, host: Any = None) -> Any:
    """full B=4 and a live-tail sliding group B=2, W=3 (lcm 4): 16 tokens take 4 + 4 pages."""
    specs = [impl.GroupSpec("full", 4), impl.GroupSpec("sliding", 2, 3, live_tail_alloc=True)]
    return impl.Coordinator(specs, impl.BlockPool(pages, events=True), host)


TOKENS = list(range(100, 116))


def request(impl: ModuleType, c: Any, n: int = 16, name: bool = True) -> Any:
    ts = c.new_tables()
    assert c.acquire(ts, n)
    if name:
        c.cache_full_blocks(ts, impl.page_keys(TOKENS, 2), n)
    return ts


# --- detach / release_detached -------------------------------------------------------------


def test_detach_empties_the_tables_and_keeps_every_page_pinned(impl: ModuleType) -> None:
    c = mixed(impl)
    ts = request(impl, c)
    assert ids(ts[0].page_ids()) == [1, 2, 3, 4]
    assert ids(ts[1].page_ids()) == [0, 5, 0, 6, 0, 7, 0, 8]
    queue = ids(c.pool.free_queue())
    h = c.detach(ts)
    assert isinstance(h, impl.DetachedTables)
    assert (h.num_pages, h.released) == (8, False)
    for t in ts:
        assert (len(t), t.tail_available, t.reclaim_floor, t.is_bound) == (0, 0, 0, False)
    assert ids(c.pool.free_queue()) == queue
    assert c.pool.num_pinned == 8
    assert c.stats()["pinned_pages"] == [4, 4]  # detached references still pin their pages
    assert c.release_detached(h) == 8
    assert h.released is True
    assert c.stats()["pinned_pages"] == [0, 0]
    assert c.pool.num_pinned == 0


def test_detach_then_release_leaves_the_queue_free_would_have_left(impl: ModuleType) -> None:
    queues = []
    for deferred in (False, True):
        c = mixed(impl)
        ts = request(impl, c)
        other = request(impl, c, 8, name=False)  # unnamed: full [9, 10], sliding [0, 11, 0, 12]
        if deferred:
            h = c.detach(ts)
            assert c.release_detached(h) == 8
        else:
            c.free(ts)
        c.free(other)
        queues.append((ids(c.pool.free_queue()), c.stats()))
    assert queues[0] == queues[1]
    # Named pages at the back in release order (each table's last slot first), unnamed ones
    # at the front (the last released at the head).
    assert queues[1][0] == [11, 12, 9, 10, *range(13, 40), 4, 3, 2, 1, 8, 7, 6, 5]


def test_release_twice_or_by_another_coordinator_is_an_error(impl: ModuleType) -> None:
    c = mixed(impl)
    d = mixed(impl)
    h = c.detach(request(impl, c))
    with pytest.raises(ValueError, match="another coordinator"):
        d.release_detached(h)
    assert c.pool.num_pinned == 8 and h.released is False
    assert c.release_detached(h) == 8
    queue = ids(c.pool.free_queue())
    with pytest.raises(ValueError, match="released already"):
        c.release_detached(h)
    assert ids(c.pool.free_queue()) == queue
    with pytest.raises(TypeError):
        c.release_detached(object())


def test_detach_checks_tables_as_free_does(impl: ModuleType) -> None:
    c = mixed(impl)
    ts = request(impl, c)
    with pytest.raises(ValueError):
        c.detach([ts[0]])
    with pytest.raises(ValueError):
        c.detach([ts[0], ts[0]])
    with pytest.raises(TypeError):
        c.detach([ts[0], 5])
    assert len(ts[0]) == 4 and c.pool.num_pinned == 8
    empty = c.detach(c.new_tables())
    assert (empty.num_pages, c.release_detached(empty)) == (0, 0)


def test_a_shared_page_reenters_only_with_its_last_holder(impl: ModuleType) -> None:
    c = mixed(impl)
    keys = impl.page_keys(TOKENS, 2)
    ts = request(impl, c)
    hit = c.new_tables()
    m = c.match_prefix(keys)
    assert m.num_tokens == 16
    c.claim(hit, m)
    h = c.detach(ts)
    # The claim shares full pages 1-4 and the sliding group's slot 7 (page 8): they stay.
    assert c.release_detached(h) == 3
    assert c.pool.num_pinned == 5
    assert c.stats()["pinned_pages"] == [4, 1]


def test_a_step_plan_made_before_detach_is_stale(impl: ModuleType) -> None:
    c = mixed(impl)
    ts = request(impl, c)
    plan = c.plan_step([(ts, 4)])
    c.detach(ts)
    with pytest.raises(ValueError, match="stale"):
        c.apply_step(plan)


def test_detach_aborts_a_pending_load(impl: ModuleType) -> None:
    host = impl.HostPool(16, events=True)
    c = mixed(impl, host=host)
    keys = impl.page_keys(TOKENS, 2)
    ts = request(impl, c)
    c.complete_offload(c.plan_offload(ts, 16))
    c.free(ts)
    assert c.pool.reset_names() is True  # only the host holds the names now
    hit = c.new_tables()
    load = c.claim(hit, c.match_prefix(keys))
    assert load is not None and load.state == "pending"
    pinned_host = host.num_pinned
    assert pinned_host == load.num_pages == 5
    h = c.detach(hit)
    assert load.state == "aborted"
    assert host.num_pinned == 0
    assert h.num_pages == 5
    assert c.release_detached(h) == 5


# --- token ids in names ---------------------------------------------------------------------


def test_stored_events_carry_the_token_ids_of_their_slots(impl: ModuleType) -> None:
    c = mixed(impl)
    keys = impl.page_keys(TOKENS, 2)
    ts = request(impl, c, name=False)
    assert c.cache_full_blocks(ts, keys, 8, TOKENS) == 4
    assert c.cache_full_blocks(ts, keys, 16, np.array(TOKENS, dtype=np.uint32)) == 4
    k = keys
    assert c.pool.take_events() == [
        ("stored", "GPU", 0, (k[1], k[3]), None, 0, tuple(range(100, 108))),
        ("stored", "GPU", 1, (k[1],), k[0], 1, (102, 103)),
        ("stored", "GPU", 1, (k[3],), k[2], 3, (106, 107)),
        ("stored", "GPU", 0, (k[5], k[7]), k[3], 2, tuple(range(108, 116))),
        ("stored", "GPU", 1, (k[5],), k[4], 5, (110, 111)),
        ("stored", "GPU", 1, (k[7],), k[6], 7, (114, 115)),
    ]
    assert c.pool.name(1) == (0, k[1])


def test_runs_join_only_when_both_parts_carry_tokens_or_neither(impl: ModuleType) -> None:
    c = impl.Coordinator([impl.GroupSpec("full", 2)], impl.BlockPool(20, events=True))
    keys = impl.page_keys(TOKENS, 2)
    a, b = c.new_tables(), c.new_tables()
    assert c.acquire(a, 4) and c.acquire(b, 8)
    assert c.cache_full_blocks(a, keys, 4, TOKENS) == 2  # keys 0, 1 with tokens
    assert c.cache_full_blocks(b, keys, 8) == 4  # keys 2, 3 new, without tokens
    assert c.pool.take_events() == [
        ("stored", "GPU", 0, (keys[0], keys[1]), None, 0, (100, 101, 102, 103)),
        ("stored", "GPU", 0, (keys[2], keys[3]), keys[1], 2, ()),
    ]


def test_bad_token_ids_are_errors_naming_token_ids_and_change_nothing(impl: ModuleType) -> None:
    c = mixed(impl)
    keys = impl.page_keys(TOKENS, 2)
    ts = request(impl, c, name=False)
    for bad, error in (
        (TOKENS[:15], ValueError),
        ([-1] * 16, ValueError),
        ([2**32] * 16, ValueError),
        (["a"] * 16, TypeError),
        (5, TypeError),
    ):
        with pytest.raises(error, match="token_ids"):
            c.cache_full_blocks(ts, keys, 16, bad)
    assert c.pool.num_cached == 0 and c.pool.take_events() == []
    assert c.cache_full_blocks(ts, keys, 16, [2**32 - 1] * 16) == 8


def test_the_host_copies_tokens_on_offload_and_the_device_on_load(impl: ModuleType) -> None:
    host = impl.HostPool(16, events=True)
    c = mixed(impl, host=host)
    keys = impl.page_keys(TOKENS, 2)
    ts = request(impl, c, name=False)
    c.cache_full_blocks(ts, keys, 16, TOKENS)
    c.pool.take_events()
    c.complete_offload(c.plan_offload(ts, 16))
    k = keys
    assert host.take_events() == [
        ("stored", "CPU", 0, (k[1], k[3], k[5], k[7]), None, 0, tuple(TOKENS)),
        # A sliding slot's previous slot is a hole: an offload does not know its key.
        ("stored", "CPU", 1, (k[1],), None, 1, (102, 103)),
        ("stored", "CPU", 1, (k[3],), None, 3, (106, 107)),
        ("stored", "CPU", 1, (k[5],), None, 5, (110, 111)),
        ("stored", "CPU", 1, (k[7],), None, 7, (114, 115)),
    ]
    c.free(ts)
    assert c.pool.reset_names() is True
    c.pool.take_events()
    hit = c.new_tables()
    c.complete_load(c.claim(hit, c.match_prefix(keys)))
    assert c.pool.take_events() == [
        ("stored", "GPU", 0, (k[1], k[3], k[5], k[7]), None, 0, tuple(TOKENS)),
        ("stored", "GPU", 1, (k[7],), k[6], 7, (114, 115)),
    ]


def test_to_vllm_events_sends_an_events_own_token_ids_first() -> None:
    from livetail.events import to_vllm_events

    key, parent = bytes(range(32)), bytes(32)
    layout = [(2, "full_attention", None)]
    own = ("stored", "GPU", 0, (key,), parent, 1, (7, 8))
    bare = ("stored", "GPU", 0, (key,), parent, 1, ())
    old = ("stored", "GPU", 0, (key,), parent, 1)  # a 6-tuple, as before token ids
    prompt = [10, 11, 12, 13]
    maps = to_vllm_events([own, bare, old], layout, token_ids=prompt)
    assert [m["token_ids"] for m in maps] == [[7, 8], [12, 13], [12, 13]]
    maps = to_vllm_events([own, bare], layout)
    assert [m["token_ids"] for m in maps] == [[7, 8], []]
    cleared = to_vllm_events([("cleared", "GPU", -1, (), None, None, ())], layout)
    assert cleared == [{"type": "AllBlocksCleared"}]
