"""Coordinator.decode_step: the batched decode equals the loop of single calls it documents."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from livetail import BlockPool, BlockTable, Coordinator, GroupSpec


def specs() -> list[GroupSpec]:
    return [
        GroupSpec("full", 64),
        GroupSpec("sliding", 8, sliding_window=12, live_tail_alloc=True),
        GroupSpec("state", 16),
    ]


def state(pool: BlockPool, requests: list[list[BlockTable]]) -> object:
    return (
        pool.free_queue().tolist(),
        pool.ref_counts().tolist(),
        [
            [(t.page_ids().tolist(), t.tail_available, t.reclaim_floor, t.is_bound) for t in ts]
            for ts in requests
        ],
    )


def single_calls(c: Coordinator, requests: list[list[BlockTable]], fronts: list[int]) -> tuple:
    """The documented meaning of decode_step, spelled out."""
    stepped = reclaimed = 0
    for tables, f in zip(requests, fronts):
        if not c.acquire(tables, 1):
            break
        reclaimed += c.reclaim_expired(tables, f)
        stepped += 1
    return stepped, reclaimed


class Twin:
    """Two identical engines: one decodes in batches, the other with single calls."""

    def __init__(self, num_blocks: int, prompts: list[int]) -> None:
        self.sides = []
        for _ in range(2):
            pool = BlockPool(num_blocks)
            c = Coordinator(specs(), pool)
            reqs = [c.new_tables() for _ in prompts]
            for tables, n in zip(reqs, prompts):
                assert c.acquire(tables, n)
            self.sides.append((pool, c, reqs))

    def step(self, order: list[int], lag: list[int]) -> tuple:
        (pa, ca, ra), (pb, cb, rb) = self.sides
        fronts = [max(0, ra[i][0].extent + 1 - lag[i]) for i in order]
        got = ca.decode_step([ra[i] for i in order], fronts)
        want = single_calls(cb, [rb[i] for i in order], fronts)
        assert got == want
        assert state(pa, ra) == state(pb, rb)
        return got


def test_batched_decode_equals_single_calls_over_a_long_generation() -> None:
    rng = random.Random(7)
    twin = Twin(2**14, [rng.randrange(1, 3000) for _ in range(12)])
    for _ in range(300):
        order = list(range(12))
        rng.shuffle(order)
        twin.step(order, [rng.choice([0, 1, 5, 40]) for _ in range(12)])


def test_batched_decode_stops_at_the_first_request_the_pool_cannot_serve() -> None:
    # 4 pages per request at first, 27 free; frontier 0 reclaims nothing, so the pool runs dry.
    twin = Twin(40, [15, 15, 15])
    results = [twin.step([0, 1, 2], [10**6] * 3) for _ in range(80)]
    stepped = [s for s, _ in results]
    assert stepped[0] == 3
    assert 0 < stepped.index(next(s for s in stepped if s < 3)) < 79
    assert twin.sides[0][0].num_free <= 1


def test_decode_step_returns_steps_and_reclaimed_pages() -> None:
    pool = BlockPool(2**12)
    c = Coordinator(specs(), pool)
    reqs = [c.new_tables() for _ in range(2)]
    for ts in reqs:
        c.acquire(ts, 1000)
    assert [t.num_real_pages for t in reqs[0]] == [16, 32, 63]
    # Frontier 1000: the live group keeps slots 123, 124 and the new 125; the state group
    # keeps its last page.
    assert c.decode_step(reqs, [1000, 1000]) == (2, 2 * (30 + 62))
    assert [t.num_real_pages for t in reqs[0]] == [16, 3, 1]


@pytest.mark.parametrize(
    "dtype",
    [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64],
)
def test_decode_step_reads_numpy_frontiers_like_a_list(dtype: Any) -> None:
    twin = Twin(2**12, [100, 300, 555])
    (pa, ca, ra), (pb, cb, rb) = twin.sides
    fronts = [100, 50, 0]
    assert ca.decode_step(ra, np.array(fronts, dtype=dtype)) == cb.decode_step(rb, fronts)
    assert state(pa, ra) == state(pb, rb)
    strided = np.array([101, -5, 51, -5, 1, -5], dtype=np.int64)[::2]
    assert ca.decode_step(ra, strided) == cb.decode_step(rb, [101, 51, 1])
    assert state(pa, ra) == state(pb, rb)


class World:
    def __init__(self) -> None:
        self.pool = BlockPool(512)
        self.c = Coordinator(specs(), self.pool)
        self.reqs = [self.c.new_tables() for _ in range(3)]
        for ts in self.reqs:
            self.c.acquire(ts, 100)

    def check(self, kind: type[Exception], *args: object, match: str | None = None) -> None:
        before = state(self.pool, self.reqs)
        with pytest.raises(kind, match=match):
            self.c.decode_step(*args)
        assert state(self.pool, self.reqs) == before


def test_decode_step_with_bad_arguments_raises_and_changes_nothing() -> None:
    w = World()
    r = w.reqs
    w.check(ValueError, r, [100, 100, 102], match="num_computed_tokens")  # past extent + 1
    w.check(ValueError, r, [100, 100, -1], match="num_computed_tokens")
    w.check(ValueError, r, [100, 100], match="num_computed_tokens")  # one per request
    w.check(TypeError, r, [100, 100, 1.5], match="num_computed_tokens")
    w.check(TypeError, r, [100, 100, True], match="num_computed_tokens")
    w.check(TypeError, r, np.array([1, 1, 1], dtype=np.float64), match="num_computed_tokens")
    w.check(TypeError, r, np.array([1, 1, 1], dtype=np.float16), match="num_computed_tokens")
    w.check(TypeError, r, np.array([1, 1, 1], dtype=np.complex64), match="num_computed_tokens")
    w.check(ValueError, r, np.array([1, 1, -1], dtype=np.int8), match="num_computed_tokens")
    w.check(ValueError, r, np.array([1, 1, 102], dtype=np.uint8), match="num_computed_tokens")
    w.check(TypeError, r, np.array([True, True, True]), match="num_computed_tokens")
    w.check(TypeError, r, np.zeros((3, 1), dtype=np.int64), match="num_computed_tokens")
    w.check(ValueError, r, np.array([1, 1, -1], dtype=np.int64), match="num_computed_tokens")
    w.check(ValueError, r, np.array([1, 1, 2**64 - 1], dtype=np.uint64), match="too large")
    w.check(ValueError, [r[0], r[1], r[0]], [100, 100, 100], match="twice")
    w.check(ValueError, [r[0], r[1], [r[2][0], r[2][0], r[2][2]]], [100] * 3, match="twice")
    w.check(ValueError, [r[0], r[1], r[2][:2]], [100] * 3, match="one table per group")
    w.check(TypeError, [r[0], r[1], r[2][0]], [100] * 3, match="requests")
    w.check(TypeError, [r[0], r[1], [r[2][0], r[2][1], "t"]], [100] * 3, match="BlockTable")
    w.check(TypeError, 5, [100], match="requests")
    other = Coordinator(specs(), BlockPool(512))
    alien = other.new_tables()
    other.acquire(alien, 10)
    w.check(ValueError, [r[0], alien], [100, 10], match="pool")


def test_decode_step_of_no_requests_does_nothing() -> None:
    w = World()
    assert w.c.decode_step([], []) == (0, 0)
    assert w.c.decode_step((), np.array([], dtype=np.int64)) == (0, 0)
