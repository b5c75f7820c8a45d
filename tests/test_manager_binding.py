"""A table a coordinator bound (its acquire or claim) changes only through that coordinator
or its own managers (``coordinator.managers``), until it is freed: a manager made on its own,
or another coordinator's, is refused with a ValueError and nothing changes. Spec and native
alike (docs/decisions.md, "Who may act on a table")."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import livetail
import livetail.spec as spec
import pytest

MESSAGE = (
    "table is bound to a coordinator: act on it through that coordinator or its managers "
    "(coordinator.managers) until it is freed"
)


def _state(pool: Any, tables: list[Any]) -> object:
    return (
        [int(p) for p in pool.free_queue()],
        [int(r) for r in pool.ref_counts()],
        [([int(p) for p in t.page_ids()], t.tail_available, t.reclaim_floor) for t in tables],
    )


def _world(m: ModuleType) -> tuple[Any, Any, list[Any]]:
    pool = m.BlockPool(64)
    specs = [m.GroupSpec("full", 4), m.GroupSpec("sliding", 4, sliding_window=5)]
    c = m.Coordinator(specs, pool)
    tables = c.new_tables()
    assert c.acquire(tables, 20)
    return pool, c, tables


def _bare(m: ModuleType, g: int) -> Any:
    return m.FullAttentionManager(4) if g == 0 else m.SlidingWindowManager(4, 5)


@pytest.mark.parametrize("m", [spec, livetail], ids=["spec", "native"])
@pytest.mark.parametrize("call", ["free", "acquire", "reclaim", "acquire-0"])
@pytest.mark.parametrize("who", ["bare", "other-coordinator"])
def test_a_manager_not_of_the_binding_coordinator_is_refused(
    m: ModuleType, call: str, who: str
) -> None:
    pool, c, tables = _world(m)
    other = m.Coordinator(c.specs, pool)
    mgrs = [_bare(m, 0), _bare(m, 1)] if who == "bare" else other.managers
    before = _state(pool, tables)
    for g in (0, 1):
        mg, t = mgrs[g], tables[g]
        with pytest.raises(ValueError) as e:
            if call == "free":
                mg.free(pool, t)
            elif call == "acquire":
                mg.acquire(pool, t, 4)
            elif call == "acquire-0":
                mg.acquire(pool, t, 0)
            else:
                mg.reclaim_expired(pool, t, 20)
        assert str(e.value) == MESSAGE
    assert _state(pool, tables) == before
    assert [t.is_bound for t in tables] == [True, True]
    # Queries change nothing: any manager of the same group may ask.
    assert mgrs[1].blocks_needed_for(tables[1], 4) == 1
    assert mgrs[1].blocks_reclaimable_at(tables[1], 20) == 4


@pytest.mark.parametrize("m", [spec, livetail], ids=["spec", "native"])
def test_the_coordinators_own_managers_may_act_and_a_free_table_is_anyones(m: ModuleType) -> None:
    pool, c, tables = _world(m)
    own = c.managers
    assert own[1].reclaim_expired(pool, tables[1], 20) == 4
    assert own[0].acquire(pool, tables[0], 4)  # one group runs ahead (a split request)
    own[0].free(pool, tables[0])
    own[1].free(pool, tables[1])
    assert pool.num_free == 63
    # Freed, the tables belong to no coordinator: a bare manager binds one and frees it.
    bare = _bare(m, 0)
    assert bare.acquire(pool, tables[0], 8)
    assert pool.num_free == 61
    bare.free(pool, tables[0])
    assert pool.num_free == 63
    # A table a bare manager bound is no coordinator's: the coordinator may take it.
    assert bare.acquire(pool, tables[0], 8)
    assert own[1].acquire(pool, tables[1], 8)
    assert c.acquire(tables, 4)
    with pytest.raises(ValueError, match="bound to a coordinator"):
        bare.free(pool, tables[0])
    c.free(tables)
    assert pool.num_free == 63
