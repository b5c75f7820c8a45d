"""decode_step and page_ids_batch on the spec, compared with native call for call."""

from __future__ import annotations

import random
from typing import Any

import livetail
import livetail.spec as spec
import numpy as np
import pytest

MODULES = (spec, livetail)


def specs(m: Any) -> list[Any]:
    return [
        m.GroupSpec("full", 16),
        m.GroupSpec("sliding", 8, sliding_window=12, live_tail_alloc=True),
        m.GroupSpec("state", 16),
    ]


def state(pool: Any, reqs: list[list[Any]]) -> object:
    return (
        [int(p) for p in pool.free_queue()],
        [int(c) for c in pool.ref_counts()],
        [
            [([int(p) for p in t.page_ids()], t.tail_available, t.reclaim_floor) for t in ts]
            for ts in reqs
        ],
    )


def outcome(fn: Any, *args: Any) -> object:
    try:
        return fn(*args)
    except (TypeError, ValueError) as e:
        return type(e).__name__


def grid(a: Any) -> list[list[int]]:
    return [[int(x) for x in row] for row in a]


@pytest.mark.parametrize("seed", range(6))
def test_decode_step_and_page_ids_batch_agree_with_native(seed: int) -> None:
    rng = random.Random(seed)
    sides = []
    for m in MODULES:
        pool = m.BlockPool(40 + 25 * seed)
        c = m.Coordinator(specs(m), pool)
        sides.append((m, pool, c, [c.new_tables() for _ in range(4)]))
    for _ in range(60):
        n = rng.choice([0, 1, 7, 16, 33])
        r = rng.randrange(4)
        what = rng.random()
        results = []
        for m, pool, c, reqs in sides:
            if what < 0.3:
                results.append(outcome(c.acquire, reqs[r], n))
            elif what < 0.4:
                results.append(outcome(c.free, reqs[r]))
            else:
                order = [reqs[i] for i in random.Random(n).sample(range(4), 3)]
                fronts = [
                    max(0, min(t.extent for t in ts) + 1 - random.Random(n + k).choice([0, 1, 9]))
                    for k, ts in enumerate(order)
                ]
                if what > 0.9:  # a bad argument: one frontier past the extent + 1, or a repeat
                    fronts[-1] += 5 if n % 2 else 0
                    order[-1] = order[0] if not n % 2 else order[-1]
                array = np.array(fronts, dtype=np.int16) if m is livetail else fronts
                results.append(outcome(c.decode_step, order, array))
            results.append(state(pool, reqs))
            results.append(grid(m.page_ids_batch([t for ts in reqs for t in ts])))
            w = max(len(t) for ts in reqs for t in ts)
            results.append(grid(m.page_ids_batch(reqs[r], w + 2)))
            results.append(outcome(m.page_ids_batch, reqs[0], -1))
        half = len(results) // 2
        assert results[:half] == results[half:]


@pytest.mark.parametrize("m", MODULES, ids=["spec", "native"])
def test_decode_step_bad_arguments_raise_naming_them_and_change_nothing(m: Any) -> None:
    pool = m.BlockPool(200)
    c = m.Coordinator(specs(m), pool)
    reqs = [c.new_tables() for _ in range(2)]
    for ts in reqs:
        c.acquire(ts, 40)
    before = state(pool, reqs)
    for args, kind, name in [
        ((reqs, [41]), ValueError, "num_computed_tokens"),
        ((reqs, [41, 42]), ValueError, "num_computed_tokens"),
        ((reqs, [41, 1.5]), TypeError, "num_computed_tokens"),
        ((reqs, [41, -1]), ValueError, "num_computed_tokens"),
        ((reqs, 7), TypeError, "num_computed_tokens"),
        ((5, [1]), TypeError, "requests"),
        (([reqs[0], reqs[0]], [1, 1]), ValueError, "twice"),
        (([reqs[0][:2], reqs[1]], [1, 1]), ValueError, "one table per group"),
        (([reqs[0], "t"], [1, 1]), TypeError, "requests"),
    ]:
        with pytest.raises(kind, match=name):
            c.decode_step(*args)
        assert state(pool, reqs) == before
    # Request 0 at frontier 41: the full group releases nothing; the sliding group (every slot
    # live: R = 2 >= m = 2) releases slots 0-2, below slid_out = (41 - 12 + 1) // 8 = 3; the
    # state group (W = 2) slots 0-1, below (41 - 2 + 1) // 16 = 2. Request 1 at 0: nothing.
    assert c.decode_step(reqs, [41, 0]) == (2, 3 + 2)
    with pytest.raises(ValueError, match="width"):
        m.page_ids_batch(reqs[0], 1)
    with pytest.raises(TypeError, match="tables"):
        m.page_ids_batch("x")
