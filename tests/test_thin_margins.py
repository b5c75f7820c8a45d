"""Direct tests, with exact expected values, for what only a long random campaign or one
kept trace caught before: the host tier's stored-event parents, ``reset_names``' counters,
``decode_step``'s argument checks, how ``evict_names`` closes its event batch, and the
router index's boundary search on layouts with two full-attention groups of different
page sizes."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import livetail
import livetail.spec as spec
import pytest
from livetail.events import encode_batch, group_layout, to_vllm_events
from livetail.router import PrefixIndex

MODULES = pytest.mark.parametrize("m", [spec, livetail], ids=["spec", "native"])


def _ev(events: list[Any], keys: list[bytes]) -> list[tuple[Any, ...]]:
    """Events with keys as their index in ``keys`` (None for no key)."""
    ix = {k: i for i, k in enumerate(keys)}
    return [
        (e[0], e[1], e[2], [ix[k] for k in e[3]], None if e[4] is None else ix[e[4]], e[5])
        for e in events
    ]


# -- the host tier's stored-event parents ---------------------------------------------------


@MODULES
def test_host_stored_events_take_the_parent_of_the_named_device_slot_before_them(
    m: ModuleType,
) -> None:
    pool, host = m.BlockPool(64, events=True), m.HostPool(64, events=True)
    specs = [
        m.GroupSpec("full", 4),
        m.GroupSpec("sliding", 2, sliding_window=5, live_tail_alloc=True),
    ]
    c = m.Coordinator(specs, pool, host=host)
    keys = list(m.page_keys(list(range(1, 25)), 2))  # base pages of 2 tokens: 12 keys
    ts = c.new_tables()
    assert c.acquire(ts, 24)
    c.cache_full_blocks(ts, keys, 24)
    pool.take_events()
    c.complete_offload(c.plan_offload(ts, 12))
    # Group 0 (B=4): slot s is base key 2s+1; group 1 (B=2): slot s is base key s.
    assert _ev(host.take_events(), keys) == [
        ("stored", "CPU", 0, [1, 3, 5], None, 0),
        ("stored", "CPU", 1, [0, 1, 2, 3, 4, 5], None, 0),
    ]
    c.complete_offload(c.plan_offload(ts, 24))
    # The slot before each run is named on the device (and on the host): its key is the
    # parent, as a router chains the run after it.
    assert _ev(host.take_events(), keys) == [
        ("stored", "CPU", 0, [7, 9, 11], 5, 3),
        ("stored", "CPU", 1, [6, 7, 8, 9, 10, 11], 5, 6),
    ]


@MODULES
def test_host_stored_events_have_no_parent_across_a_hole(m: ModuleType) -> None:
    pool, host = m.BlockPool(64, events=True), m.HostPool(64, events=True)
    # Live tail, W=3: R = 1 resume slot behind every 4-token boundary; the others are holes.
    specs = [
        m.GroupSpec("full", 4),
        m.GroupSpec("sliding", 2, sliding_window=3, live_tail_alloc=True),
    ]
    c = m.Coordinator(specs, pool, host=host)
    keys = list(m.page_keys(list(range(1, 25)), 2))
    ts = c.new_tables()
    assert c.acquire(ts, 24)
    assert [int(p) for p in ts[1].page_ids()] == [0, 7, 0, 8, 0, 9, 0, 10, 0, 11, 0, 12]
    c.cache_full_blocks(ts, keys, 24)
    pool.take_events()
    c.complete_offload(c.plan_offload(ts, 24))
    assert _ev(host.take_events(), keys) == [
        ("stored", "CPU", 0, [1, 3, 5, 7, 9, 11], None, 0),
        *[("stored", "CPU", 1, [s], None, s) for s in (1, 3, 5, 7, 9, 11)],
    ]


# -- reset_names' counters -------------------------------------------------------------------


@MODULES
def test_reset_names_counts_every_named_page_and_every_distinct_name(m: ModuleType) -> None:
    pool = m.BlockPool(32, events=True)
    c = m.Coordinator([m.GroupSpec("full", 4)], pool)
    keys = list(m.page_keys(list(range(12)), 4))
    a, b = c.new_tables(), c.new_tables()
    assert c.acquire(a, 12) and c.acquire(b, 8)
    c.cache_full_blocks(a, keys, 12)  # 3 names on pages 1-3
    c.cache_full_blocks(b, keys, 8)  # the same 2 names again on pages 4, 5: no new name
    assert pool.reset_names() is False  # named pages pinned: nothing changes
    c.free(a)
    c.free(b)
    pool.take_events()
    before = pool.stats()
    assert {k: before[k] for k in ("pages_named", "names_stored", "pages_evicted")} == {
        "pages_named": 5,
        "names_stored": 3,
        "pages_evicted": 0,
    }
    assert (before["names_removed"], before["num_cached"], before["num_names"]) == (0, 5, 3)
    queue = [int(p) for p in pool.free_queue()]
    assert pool.reset_names() is True
    after = pool.stats()
    assert after["pages_evicted"] == 5  # every named page lost its name
    assert after["names_removed"] == 3  # every distinct name went
    assert (after["num_cached"], after["num_cached_free"], after["num_names"]) == (0, 0, 0)
    assert after["pages_named"] == 5 and after["names_stored"] == 3  # monotone, unchanged
    assert after["num_names"] == after["names_stored"] - after["names_removed"]
    assert after["num_cached"] == after["pages_named"] - after["pages_evicted"]
    assert {k: after[k] for k in ("pages_allocated", "pages_released", "num_free")} == {
        k: before[k] for k in ("pages_allocated", "pages_released", "num_free")
    }
    assert [int(p) for p in pool.free_queue()] == queue
    assert [tuple(e) for e in pool.take_events()] == [("cleared", "GPU", -1, (), None, None, ())]
    # A second reset drops nothing: the counters stay, one more cleared event.
    assert pool.reset_names() is True
    assert {k: pool.stats()[k] for k in ("pages_evicted", "names_removed")} == {
        "pages_evicted": 5,
        "names_removed": 3,
    }


# -- evict_names closes its event batch ------------------------------------------------------


@MODULES
def test_each_evict_names_call_is_its_own_removed_event(m: ModuleType) -> None:
    pool = m.BlockPool(8, events=True)
    c = m.Coordinator([m.GroupSpec("full", 4)], pool)
    keys = list(m.page_keys(list(range(20)), 4))
    ts = c.new_tables()
    assert c.acquire(ts, 20)
    c.cache_full_blocks(ts, keys, 20)  # pages 1-5 named keys 0-4
    c.free(ts)
    pool.take_events()
    assert pool.evict_names([1]) == 1
    assert pool.evict_names([2]) == 1
    assert pool.evict_names([3, 4]) == 2
    # An allocation that evicts next: its own removed event too (free queue: 4 3 2 1 6 7 5;
    # the unnamed ones first, then page 5 with key 4).
    other = c.new_tables()
    assert c.acquire(other, 28)
    assert _ev(pool.take_events(), keys) == [
        ("removed", "GPU", 0, [0], None, None),
        ("removed", "GPU", 0, [1], None, None),
        ("removed", "GPU", 0, [2, 3], None, None),
        ("removed", "GPU", 0, [4], None, None),
    ]


@MODULES
def test_evict_names_then_a_naming_then_evict_names_keep_three_events(m: ModuleType) -> None:
    pool = m.BlockPool(16, events=True)
    c = m.Coordinator([m.GroupSpec("full", 4)], pool)
    keys = list(m.page_keys(list(range(16)), 4))
    ts = c.new_tables()
    assert c.acquire(ts, 16)
    c.cache_full_blocks(ts, keys, 8)
    assert pool.evict_names([2]) == 1
    assert pool.evict_names([5, 6, 2]) == 0  # nothing named there: no event, no batch
    c.cache_full_blocks(ts, keys, 16)  # slots 2, 3 (slot 1 is not revisited)
    assert pool.evict_names([1]) == 1
    assert _ev(pool.take_events(), keys) == [
        ("stored", "GPU", 0, [0, 1], None, 0),
        ("removed", "GPU", 0, [1], None, None),
        ("stored", "GPU", 0, [2, 3], 1, 2),
        ("removed", "GPU", 0, [0], None, None),
    ]


# -- decode_step's argument checks (native) --------------------------------------------------


def _three() -> list[Any]:
    return [
        livetail.GroupSpec("full", 64),
        livetail.GroupSpec("sliding", 8, sliding_window=12, live_tail_alloc=True),
        livetail.GroupSpec("state", 16),
    ]


def _snapshot(pool: Any, reqs: list[list[Any]]) -> object:
    return (
        pool.free_queue().tolist(),
        pool.ref_counts().tolist(),
        [[(t.page_ids().tolist(), t.tail_available, t.reclaim_floor) for t in ts] for ts in reqs],
    )


def test_decode_step_accepts_the_frontier_the_acquire_reaches_and_not_one_more() -> None:
    pool = livetail.BlockPool(512)
    c = livetail.Coordinator(_three(), pool)
    r = c.new_tables()
    assert c.acquire(r, 100)
    with pytest.raises(ValueError) as e:
        c.decode_step([r], [102])
    assert str(e.value) == (
        "requests[0][0]: num_computed_tokens = 102 is above the extent the acquire leaves"
    )
    assert [t.extent for t in r] == [100] * 3
    assert c.decode_step([r], [101]) == (1, 8)
    assert [t.extent for t in r] == [101] * 3


def test_decode_step_refuses_every_bad_table_by_name_and_changes_nothing() -> None:
    pool = livetail.BlockPool(512)
    host = livetail.HostPool(64)
    c = livetail.Coordinator(_three(), pool, host=host)
    reqs = [c.new_tables() for _ in range(3)]
    for ts in reqs:
        assert c.acquire(ts, 100)
    twin = livetail.Coordinator(_three(), pool)
    foreign = twin.new_tables()
    assert twin.acquire(foreign, 100)
    split = c.new_tables()
    assert c.acquire(split, 100)
    assert c.managers[0].acquire(pool, split[0], 64)  # group 0 runs ahead
    r0, r1, r2 = reqs
    cases = [
        (
            [r0, split],
            "requests[1][1]: table has extent 100, the request's first table 164: "
            "one request's tables cover the same tokens",
        ),
        (
            [r0, foreign],
            "requests[1][0]: table is bound to another coordinator (a table is used "
            "only through the coordinator that bound it, until it is freed)",
        ),
        (
            [[r2[1], r2[0], r2[2]]],
            "requests[0][0]: table was filled by a group with block_size 8, not 64",
        ),
        ([r0, [r1[0], r1[1], r0[2]]], "requests[1][2]: table appears twice in the batch"),
    ]
    everyone = [*reqs, foreign, split]
    for requests, message in cases:
        before = _snapshot(pool, everyone)
        with pytest.raises(ValueError) as e:
            c.decode_step(requests, [100] * len(requests))
        assert str(e.value) == message
        assert _snapshot(pool, everyone) == before
    # A request whose table spans 2**31 - 1 tokens cannot take one more.
    big = livetail.Coordinator([livetail.GroupSpec("full", 2**31 - 1)], livetail.BlockPool(4))
    bt = big.new_tables()
    assert big.acquire(bt, 2**31 - 1)
    with pytest.raises(ValueError) as e:
        big.decode_step([bt], [0])
    assert str(e.value).startswith("requests[0][0]: num_tokens = 1 would make the table span")
    assert bt[0].extent == 2**31 - 1


def test_decode_step_refuses_a_request_with_a_pending_load() -> None:
    pool, host = livetail.BlockPool(64), livetail.HostPool(64)
    c = livetail.Coordinator([livetail.GroupSpec("full", 4)], pool, host=host)
    keys = livetail.page_keys(list(range(8)), 4)
    ts = c.new_tables()
    assert c.acquire(ts, 8)
    c.cache_full_blocks(ts, keys, 8)
    c.complete_offload(c.plan_offload(ts, 8))
    c.free(ts)
    assert pool.evict_names([1, 2]) == 2  # the device copies go: the hit is on the host
    fresh = c.new_tables()
    load = c.claim(fresh, c.match_prefix(keys))
    assert load is not None and fresh[0].extent == 8
    before = _snapshot(pool, [fresh])
    with pytest.raises(ValueError) as e:
        c.decode_step([fresh], [8])
    assert str(e.value).startswith("requests[0][0]: table has a pending load")
    assert _snapshot(pool, [fresh]) == before
    c.complete_load(load)
    assert c.decode_step([fresh], [8]) == (1, 0)


# -- the router's boundary search with two full groups of different page sizes ----------------

TWO_FULL = [("full", 4, None), ("full", 8, None), ("sliding", 4, 6)]  # lcm 8, R = 2


def _engine(m: ModuleType, order: list[tuple[str, int, int | None]]) -> Any:
    specs = [m.GroupSpec(k, b, w) for k, b, w in order]
    return m.Coordinator(specs, m.BlockPool(64, events=True))


def _feed(index: PrefixIndex, c: Any, seq: int) -> None:
    maps = to_vllm_events(c.pool.take_events(), group_layout(c.specs))
    assert index.apply("e", encode_batch(maps, 0, ts=0.0), seq)


@MODULES
@pytest.mark.parametrize("order", ["full4-first", "full8-first"])
@pytest.mark.parametrize(
    ("evict", "want"),
    [
        ({}, 48),  # every name there: the whole 48-token prompt
        ({4: [5]}, 16),  # the B=4 group lacks slot 5 (tokens 20-23): boundary 16
        ({8: [4]}, 32),  # the B=8 group lacks slot 4 (tokens 32-39): boundary 32
        ({4: [5], 8: [4]}, 16),  # both: the shorter wins, whichever group comes first
        ({4: [9], 8: [1]}, 8),  # the B=8 group is the shorter one
        ({8: [0]}, 0),
        ({"sliding": [11]}, 40),  # the sliding group lacks slot 11: boundary 48 loses it
        ({"sliding": [6]}, 48),  # slot 6 only breaks boundary 32: 48 is still whole
    ],
)
def test_two_full_groups_of_different_sizes_answer_the_shorter_run(
    m: ModuleType, order: str, evict: dict[Any, list[int]], want: int
) -> None:
    layout = TWO_FULL if order == "full4-first" else [TWO_FULL[1], TWO_FULL[0], TWO_FULL[2]]
    c = _engine(m, layout)
    tokens = list(range(1, 49))
    keys = list(m.page_keys(tokens, c.base_block_size))
    ts = c.new_tables()
    assert c.acquire(ts, 48)
    c.cache_full_blocks(ts, keys, 48)
    index, numpy_only = PrefixIndex(), PrefixIndex()
    numpy_only._native = False
    _feed(index, c, 0)
    group_of = {("full", 4): 0, ("full", 8): 1, "sliding": 2}
    where = {
        g: i
        for i, (k, b, _) in enumerate(layout)
        for g in ([(k, b)] if k == "full" else ["sliding"])
    }
    assert sorted(where.values()) == sorted(group_of.values())
    pages = []
    for what, slots in evict.items():
        g = where[("full", what) if isinstance(what, int) else what]
        pages += [int(ts[g].page_ids()[s]) for s in slots]
    if pages:
        assert c.pool.evict_names(pages) == len(pages)
    numpy_only.apply("e", encode_batch(to_vllm_events([], group_layout(c.specs))), 0)
    _feed(index, c, 1)
    assert int(c.match_prefix(keys).num_tokens) == want
    assert index.match(tokens) == {"e": want}
    c.free(ts)


@MODULES
def test_two_full_groups_native_numpy_and_the_engine_agree_after_any_one_eviction(
    m: ModuleType,
) -> None:
    """Every page of every group evicted in turn (a fresh engine each time), every prompt
    length that is a boundary: the native search, the numpy loops and the engine's own
    match_prefix give the same answer."""
    tokens = list(range(1, 49))
    seen = set()
    for g in range(3):
        for s in range(12 if g != 1 else 6):
            c = _engine(m, TWO_FULL)
            keys = list(m.page_keys(tokens, c.base_block_size))
            ts = c.new_tables()
            assert c.acquire(ts, 48)
            c.cache_full_blocks(ts, keys, 48)
            index, numpy_only = PrefixIndex(), PrefixIndex()
            numpy_only._native = False
            layout = group_layout(c.specs)
            first = encode_batch(to_vllm_events(c.pool.take_events(), layout), 0, ts=0.0)
            assert c.pool.evict_names([int(ts[g].page_ids()[s])]) == 1
            second = encode_batch(to_vllm_events(c.pool.take_events(), layout), 0, ts=0.0)
            for ix in (index, numpy_only):
                assert ix.apply("e", first, 0) and ix.apply("e", second, 1)
            for n in range(8, 49, 8):
                want = int(c.match_prefix(keys[: n // c.base_block_size]).num_tokens)
                assert index.match(tokens[:n]) == numpy_only.match(tokens[:n]) == {"e": want}
                seen.add(want)
    assert seen == {0, 8, 16, 24, 32, 40, 48}
