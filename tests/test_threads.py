"""README's threading note: each native call runs whole under the GIL, so threads sharing
one pool cannot corrupt it (though a check-then-acquire sequence is not atomic)."""

from __future__ import annotations

import threading

import livetail


def test_threads_sharing_one_pool_leave_it_consistent() -> None:
    pool = livetail.BlockPool(4096)
    coord = livetail.Coordinator(
        [
            livetail.GroupSpec("full", 16),
            livetail.GroupSpec("sliding", 8, sliding_window=12, live_tail_alloc=True),
        ],
        pool,
    )
    failures: list[BaseException] = []
    acquired = [0] * 4

    def work(i: int) -> None:
        try:
            for n in range(1, 300):
                tables = coord.new_tables()
                if coord.acquire(tables, 37 * n % 900 + 1):
                    acquired[i] += 1
                    coord.reclaim_expired(tables, tables[0].extent)
                    livetail.page_keys(list(range(64)), 16)  # releases the GIL while hashing
                coord.free(tables)
        except BaseException as e:  # pragma: no cover - reported below
            failures.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert acquired == [299] * 4  # at most 4 requests of <= 57 + 16 pages: all fit
    assert pool.num_free == 4095 and pool.num_pinned == 0
    assert sorted(pool.free_queue().tolist()) == list(range(1, 4096))
    assert pool.ref_counts().tolist() == [0] * 4096
