"""Sparse naming (semantics 13.4) and the coordinator's alignment (13.9), exact values.

A B=8 W=12 sliding group has R = ceil(11 / 8) = 2 resume pages. At alignment A = 32 tokens
(q = 4 pages per boundary) only the 2 slots behind each multiple of 32 can serve a match, so
only slots s with s mod 4 >= 2 take names; at the default alignment (the lcm, 8: q = 1 <= R)
every full slot does, as before.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

TOKENS = list(range(200))


def as_list(a: Any) -> list[int]:
    return [int(x) for x in a]


def coordinator(impl: ModuleType, live: bool, alignment: int | None, blocks: int = 64) -> Any:
    spec = impl.GroupSpec("sliding", 8, sliding_window=12, live_tail_alloc=live)
    return impl.Coordinator([spec], impl.BlockPool(blocks), alignment=alignment)


def named_slots(c: Any, table: Any) -> list[int]:
    return [j for j, p in enumerate(as_list(table.page_ids())) if p and c.pool.name(p) is not None]


def prefill(c: Any, impl: ModuleType, n: int = 200) -> tuple[list[Any], list[bytes], int]:
    ts = c.new_tables()
    keys = impl.page_keys(TOKENS[:n], 8)
    assert c.acquire(ts, n)
    return ts, keys, c.cache_full_blocks(ts, keys, n)


BEHIND_32 = [2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23]  # s mod 4 >= 2, s < 25


@pytest.mark.parametrize("live", [True, False])
def test_a_live_group_at_alignment_32_names_only_the_slots_behind_its_multiples(
    impl: ModuleType, live: bool
) -> None:
    c = coordinator(impl, live, 32)
    assert (c.lcm_block_size, c.alignment) == (8, 32)
    ts, keys, named = prefill(c, impl)
    assert named == 12
    assert named_slots(c, ts[0]) == BEHIND_32
    # Live tail: the 12 resume pages plus slot 24, still in the window at 200 (slid_out = 23).
    assert c.pool.num_pinned == (13 if live else 25)
    # Hits land on multiples of 32: 192 (slots 22, 23 named), not 200.
    assert c.match_prefix(keys).num_tokens == 192


@pytest.mark.parametrize("live", [True, False])
def test_at_the_default_alignment_every_full_slot_is_named(impl: ModuleType, live: bool) -> None:
    c = coordinator(impl, live, None)
    assert c.alignment == 8
    ts, keys, named = prefill(c, impl)
    assert named == 25  # q = 1 <= R = 2: every slot is behind a boundary
    assert named_slots(c, ts[0]) == list(range(25))
    assert c.pool.num_pinned == 25  # with R >= q live tail keeps every slot
    assert c.match_prefix(keys).num_tokens == 200


def test_freed_unnamed_pages_join_the_queue_front_and_are_reused_before_any_name(
    impl: ModuleType,
) -> None:
    c = coordinator(impl, False, 32, blocks=40)
    ts, keys, _ = prefill(c, impl)
    # Slot s holds page s + 1; pages of slots behind a multiple of 32 carry names.
    assert as_list(ts[0].page_ids()) == list(range(1, 26))
    c.free(ts)
    # Released last slot first: each unnamed page goes on the front (a stack), each named
    # one to the back; the never-used pages 26..39 sit between.
    unnamed = [1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22, 25]
    named = [24, 23, 20, 19, 16, 15, 12, 11, 8, 7, 4, 3]
    assert as_list(c.pool.free_queue()) == unnamed + list(range(26, 40)) + named
    assert c.pool.num_cached == 12
    # A second request of 200 tokens takes the 13 unnamed pages and 12 never-used ones: no
    # name is evicted, and the first prompt still hits at 192.
    other = c.new_tables()
    assert c.acquire(other, 200)
    assert as_list(other[0].page_ids()) == unnamed + list(range(26, 38))
    assert c.pool.num_cached == 12
    assert c.match_prefix(keys).num_tokens == 192


def test_a_state_group_names_only_a_chunk_end_on_a_multiple_of_the_alignment(
    impl: ModuleType,
) -> None:
    c = impl.Coordinator(
        [impl.GroupSpec("full", 8), impl.GroupSpec("state", 8)], impl.BlockPool(64), alignment=32
    )
    ts = c.new_tables()
    keys = impl.page_keys(TOKENS[:64], 8)
    assert c.acquire(ts, 24)
    assert c.cache_full_blocks(ts, keys, 24) == 3  # full slots 0-2; state slot 2 ends at 24
    assert c.acquire(ts, 8)
    assert c.cache_full_blocks(ts, keys, 32) == 2  # full slot 3 and state slot 3 (ends at 32)
    assert named_slots(c, ts[1]) == [3]
    assert c.match_prefix(keys).num_tokens == 32


def test_offload_takes_the_slots_behind_multiples_of_the_alignment(impl: ModuleType) -> None:
    spec = impl.GroupSpec("sliding", 8, sliding_window=12)
    c = impl.Coordinator([spec], impl.BlockPool(64), impl.HostPool(32), alignment=32)
    ts, _, _ = prefill(c, impl)
    plan = c.plan_offload(ts, 200)
    assert as_list(plan.slots) == BEHIND_32
    assert as_list(plan.device_pages) == [s + 1 for s in BEHIND_32]


@pytest.mark.parametrize(
    "alignment,error,message",
    [
        (
            12,
            ValueError,
            r"alignment must be a multiple of the lcm of the block sizes \(8\), got 12",
        ),
        (0, ValueError, r"alignment must be in \[1, 2\*\*31 - 1\], got 0"),
        (2**31, ValueError, "alignment"),
        (-8, ValueError, "alignment"),
        (True, TypeError, "alignment"),
        ("32", TypeError, "alignment"),
    ],
)
def test_a_bad_alignment_is_refused_by_name(
    impl: ModuleType, alignment: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        coordinator(impl, True, alignment)


def test_the_alignment_is_keyword_only_and_shows_in_the_repr(impl: ModuleType) -> None:
    spec = impl.GroupSpec("full", 8)
    with pytest.raises(TypeError):
        impl.Coordinator([spec], impl.BlockPool(4), None, 32)
    c = impl.Coordinator([spec], impl.BlockPool(4), alignment=32)
    assert repr(c).endswith(", alignment=32)")
    assert "alignment" not in repr(impl.Coordinator([spec], impl.BlockPool(4), alignment=8))
