"""What only the native module has: numpy output, batch export, reprs, lifetimes, stubs."""

from __future__ import annotations

import gc
import weakref
from importlib import resources

import livetail
import numpy as np
import pytest
from livetail import (
    BlockPool,
    BlockTable,
    Coordinator,
    FullAttentionManager,
    GroupSpec,
    SlidingWindowManager,
    StateManager,
)


def live_table(tokens: int = 8192) -> tuple[BlockPool, BlockTable, SlidingWindowManager]:
    pool, t, m = BlockPool(2**16), BlockTable(), SlidingWindowManager(8, 12, 256)
    assert m.acquire(pool, t, tokens)
    return pool, t, m


# --- numpy output ------------------------------------------------------------------------------


def test_page_ids_are_a_fresh_1d_int32_copy_with_holes_as_zero() -> None:
    _, t, _ = live_table()
    a = t.page_ids()
    assert isinstance(a, np.ndarray)
    assert (a.dtype, a.ndim, a.shape) == (np.int32, 1, (1024,))
    assert a.flags.c_contiguous and a.flags.writeable
    assert int(np.count_nonzero(a)) == 64
    a[:] = -1  # a copy: the table is untouched
    assert int(t.page_ids()[30]) == 1


def test_page_ids_of_an_empty_table_is_an_empty_int32_array() -> None:
    a = BlockTable().page_ids()
    assert (a.dtype, a.shape) == (np.int32, (0,))


def test_free_queue_and_ref_counts_are_int32_arrays() -> None:
    pool, t, m = live_table(16)
    q, r = pool.free_queue(), pool.ref_counts()
    assert (q.dtype, q.shape) == (np.int32, (pool.num_free,))
    assert (r.dtype, r.shape) == (np.int32, (pool.num_blocks,))
    assert q[:3].tolist() == [3, 4, 5]
    assert r[:4].tolist() == [0, 1, 1, 0]


# --- batch export --------------------------------------------------------------------------------


def test_page_ids_batch_stacks_tables_padded_with_holes() -> None:
    pool, m = BlockPool(64), FullAttentionManager(4)
    a, b, c = BlockTable(), BlockTable(), BlockTable()
    m.acquire(pool, a, 12)
    m.acquire(pool, b, 4)
    out = livetail.page_ids_batch([a, b, c])
    assert (out.dtype, out.shape) == (np.int32, (3, 3))
    assert out.tolist() == [[1, 2, 3], [4, 0, 0], [0, 0, 0]]
    wide = livetail.page_ids_batch((a, b), width=5)
    assert wide.tolist() == [[1, 2, 3, 0, 0], [4, 0, 0, 0, 0]]
    assert livetail.page_ids_batch([]).shape == (0, 0)
    assert livetail.page_ids_batch([c], width=np.int64(2)).tolist() == [[0, 0]]


def test_page_ids_batch_rows_equal_each_tables_page_ids() -> None:
    pool = BlockPool(2**16)
    c = Coordinator(
        [GroupSpec("full", 256), GroupSpec("sliding", 8, sliding_window=12, live_tail_alloc=True)],
        pool,
    )
    tables = c.new_tables()
    c.acquire(tables, 5000)
    c.reclaim_expired(tables, 4000)
    out = livetail.page_ids_batch(tables)
    for row, t in zip(out, tables):
        assert row[: len(t)].tolist() == t.page_ids().tolist()
        assert not row[len(t) :].any()


def test_page_ids_batch_rejects_a_width_below_the_longest_table() -> None:
    pool, t, _ = live_table(64)
    with pytest.raises(ValueError, match="width"):
        livetail.page_ids_batch([t], width=7)
    with pytest.raises(ValueError, match="width"):
        livetail.page_ids_batch([t], width=-1)
    with pytest.raises(TypeError, match="width"):
        livetail.page_ids_batch([t], width=8.0)
    with pytest.raises(TypeError, match="tables"):
        livetail.page_ids_batch([t, pool])
    with pytest.raises(TypeError, match="tables"):
        livetail.page_ids_batch(t)


# --- reprs ---------------------------------------------------------------------------------------


def test_reprs_name_the_state() -> None:
    pool, t, m = live_table(8192)
    assert repr(pool) == "BlockPool(num_blocks=65536, num_free=65471, num_pinned=64)"
    assert repr(t) == (
        "BlockTable(len=1024, num_real_pages=64, tail_available=0, reclaim_floor=0, "
        "extent=8192, is_bound=True)"
    )
    assert (
        repr(m) == "SlidingWindowManager(block_size=8, sliding_window=12, live_alloc_alignment=256)"
    )
    assert repr(FullAttentionManager(16)) == "FullAttentionManager(block_size=16)"
    assert repr(StateManager(16)) == "StateManager(block_size=16)"
    spec = GroupSpec("sliding", 8, sliding_window=12, live_tail_alloc=True)
    assert repr(spec) == "GroupSpec('sliding', 8, sliding_window=12, live_tail_alloc=True)"
    assert repr(GroupSpec("full", 256)) == "GroupSpec('full', 256)"
    c = Coordinator([GroupSpec("full", 256)], BlockPool(4))
    assert repr(c) == (
        "Coordinator([GroupSpec('full', 256)], BlockPool(num_blocks=4, num_free=3, num_pinned=0))"
    )


def test_group_specs_compare_by_value() -> None:
    assert GroupSpec("sliding", 8, 12) == GroupSpec("sliding", 8, sliding_window=12)
    assert GroupSpec("sliding", 8, 12) != GroupSpec("sliding", 8, 12, True)
    assert hash(GroupSpec("full", 8)) == hash(GroupSpec("full", 8))
    c = Coordinator([GroupSpec("full", 8), GroupSpec("state", 8)], BlockPool(4))
    assert c.specs == [GroupSpec("full", 8), GroupSpec("state", 8)]


def test_table_reports_its_block_size_and_pool_while_bound() -> None:
    pool, t, m = live_table(100)
    assert (t.block_size, t.pool) == (8, pool)
    m.free(pool, t)
    assert (t.block_size, t.pool) == (0, None)


def test_manager_base_class_is_not_constructible() -> None:
    with pytest.raises(TypeError):
        livetail.Manager()
    assert isinstance(StateManager(4), livetail.Manager)


def test_classes_are_final() -> None:
    with pytest.raises(TypeError):
        type("Sub", (BlockTable,), {})


# --- lifetimes ----------------------------------------------------------------------------------


def test_bound_table_keeps_its_pool_alive() -> None:
    pool, t, m = live_table(64)
    ref = weakref.ref(pool)
    del pool
    gc.collect()
    assert ref() is not None
    assert t.pool is ref()
    m.free(t.pool, t)  # the pool is still usable through the table
    gc.collect()
    assert ref() is None  # free let go of it


def test_unbound_table_holds_no_pool() -> None:
    pool = BlockPool(8)
    ref = weakref.ref(pool)
    t = BlockTable()
    FullAttentionManager(4).acquire(pool, t, 0)  # a no-op binds nothing
    del pool
    gc.collect()
    assert ref() is None
    assert t.pool is None


def test_coordinator_keeps_its_pool_alive_and_binds_tables_to_it() -> None:
    pool = BlockPool(64)
    ref = weakref.ref(pool)
    c = Coordinator([GroupSpec("full", 4), GroupSpec("sliding", 4, 4)], pool)
    del pool
    gc.collect()
    assert c.pool is ref()
    tables = c.new_tables()
    c.acquire(tables, 8)
    assert all(t.pool is ref() for t in tables)
    # The coordinator's own managers outlive it; a bound table changes only through them.
    full, sliding = c.managers
    del c
    gc.collect()
    assert ref() is not None  # the tables still hold it
    tables[0].pool  # noqa: B018
    with pytest.raises(ValueError, match="bound to a coordinator"):
        FullAttentionManager(4).free(ref(), tables[0])
    full.free(ref(), tables[0])
    sliding.free(ref(), tables[1])
    gc.collect()
    assert ref() is None


def test_decode_step_binds_tables_to_the_coordinators_pool() -> None:
    pool = BlockPool(64)
    ref = weakref.ref(pool)
    c = Coordinator([GroupSpec("full", 4)], pool)
    del pool
    tables = c.new_tables()
    assert c.decode_step([tables], [0]) == (1, 0)
    del c
    gc.collect()
    assert tables[0].pool is ref() and ref() is not None


# --- package ------------------------------------------------------------------------------------


def test_package_exposes_version_and_ships_stubs() -> None:
    assert livetail.__version__ == livetail._core.__version__
    assert livetail.__version__.count(".") == 2
    files = resources.files("livetail")
    assert files.joinpath("py.typed").is_file()
    stub = files.joinpath("_core.pyi").read_text()
    for name in (
        "class BlockPool",
        "class BlockTable",
        "class FullAttentionManager(Manager)",
        "class SlidingWindowManager(Manager)",
        "class StateManager(Manager)",
        "class GroupSpec",
        "class Coordinator",
        "def page_ids_batch(",
        "def decode_step(",
        "num_tokens: SupportsIndex",
    ):
        assert name in stub


def test_every_public_name_is_exported() -> None:
    for name in livetail.__all__:
        assert getattr(livetail, name) is not None


class ClearsOnIndex:
    """A count whose __index__ empties a list: conversion must not leave dangling tables."""

    def __init__(self, victim: list[object], value: int) -> None:
        self.victim, self.value = victim, value

    def __index__(self) -> int:
        self.victim.clear()
        gc.collect()
        return self.value


def test_counts_are_converted_before_tables_are_read() -> None:
    c = Coordinator([GroupSpec("full", 4), GroupSpec("state", 4)], BlockPool(64))
    tables = c.new_tables()
    with pytest.raises(ValueError, match="tables"):
        c.acquire(tables, ClearsOnIndex(tables, 8))
    inner = c.new_tables()
    with pytest.raises(ValueError, match="one table per group"):
        c.decode_step([inner], [ClearsOnIndex(inner, 0)])
    rows = [BlockTable()]
    assert livetail.page_ids_batch(rows, width=ClearsOnIndex(rows, 3)).shape == (0, 3)
