"""The spec's geometry on ints: exact values from the semantics, closed forms vs definitions."""

from __future__ import annotations

import itertools

import pytest
from livetail.spec import geometry as geo


def test_ceil_div_rounds_up_only_when_there_is_a_remainder() -> None:
    assert [geo.ceil_div(a, 4) for a in range(0, 10)] == [0, 1, 1, 1, 1, 2, 2, 2, 2, 3]


def test_ceil_div_of_int32_max_does_not_need_a_wider_intermediate() -> None:
    # The textbook (a + b - 1) // b would pass 2**31 - 1 here; the result itself fits.
    assert geo.ceil_div(2**31 - 1, 3) == 715827883


@pytest.mark.parametrize(
    ("W", "B", "R"), [(1, 8, 0), (2, 8, 1), (9, 8, 1), (10, 8, 2), (12, 8, 2), (511, 128, 4)]
)
def test_resume_pages_hold_the_last_window_minus_one_tokens(W: int, B: int, R: int) -> None:
    assert geo.resume_pages(W, B) == R


def test_slid_out_counts_pages_wholly_before_the_next_query_window() -> None:
    # B=8, W=12: after f tokens the next query reads from f-11.
    assert [geo.slid_out(f, 12, 8) for f in (0, 11, 12, 18, 19, 26, 27)] == [0, 0, 0, 0, 1, 1, 2]


def test_live_count_reference_figure_8192_tokens_keeps_64_of_1024_slots() -> None:
    assert geo.live_count(0, 1024, 8192, 12, 8, 256) == 64
    live = geo.live_slots_by_definition(0, 1024, 8192, 12, 8, 256)
    assert [s for s, r in enumerate(live) if r] == sorted(
        {1022, 1023} | {s for s in range(1024) if s % 32 >= 30}
    )


def test_blocks_needed_reference_figures_17_and_19_tokens() -> None:
    assert geo.blocks_needed(0, 0, 17, 12, 8, 256) == 3
    assert geo.blocks_needed(0, 0, 19, 12, 8, 256) == 2


def test_sequential_charge_17_then_2_is_3_while_combined_is_2() -> None:
    assert geo.blocks_needed_sequential(0, 0, 17, 2, 12, 8, 256) == 3
    assert geo.blocks_needed(0, 0, 17 + 2, 12, 8, 256) == 2


def test_w1_live_chunk_ending_on_a_page_boundary_is_all_holes() -> None:
    assert geo.resume_pages(1, 8) == 0
    assert geo.blocks_needed(0, 0, 64, 1, 8, 16) == 0
    assert geo.blocks_needed(0, 0, 65, 1, 8, 16) == 1


def test_live_tail_degenerates_to_full_allocation_when_resume_pages_cover_the_alignment() -> None:
    # R = ceil(23/8) = 3 >= m = 16/8 = 2: every slot is live.
    assert geo.blocks_needed(0, 0, 8192, 24, 8, 16) == 1024


@pytest.mark.parametrize(
    ("tail", "n", "expected"), [(5, 3, 2), (5, 5, 0), (0, 8, 0), (0, 9, 7), (3, 4, 7)]
)
def test_tail_after_acquire(tail: int, n: int, expected: int) -> None:
    assert geo.tail_after(tail, 8, n) == expected


def test_fits_int32_is_the_slot_limit_not_the_token_limit() -> None:
    # n = 2**31 - 1 at B=2 gives 2**30 slots spanning 2**31 tokens: rejected.
    assert not geo.fits_int32(0, 0, 2, 2**31 - 1)
    assert geo.fits_int32(0, 0, 2, 2**31 - 2)
    assert geo.fits_int32(0, 0, 1, 2**31 - 1)
    assert not geo.fits_int32(1, 0, 1, 2**31 - 1)


def test_closed_form_equals_slot_by_slot_definition_on_a_grid() -> None:
    mismatches = [
        (B, W, m, first, new, f)
        for B, W, m in itertools.product(range(1, 5), range(1, 14), range(1, 5))
        for first in range(0, 9)
        for new in range(1, 7)
        for f in range(0, (first + new) * B + 1)
        if geo.live_count(first, new, f, W, B, m * B)
        != sum(geo.live_slots_by_definition(first, new, f, W, B, m * B))
    ]
    assert mismatches == []


def test_live_count_with_live_tail_off_is_every_new_slot() -> None:
    assert geo.live_count(3, 10, 40, 2, 4, 0) == 10
    assert geo.live_slots_by_definition(3, 10, 40, 2, 4, 0) == [True] * 10


@pytest.mark.parametrize("A", [geo.RUNNING, geo.CHECKPOINT, 0])
def test_state_take_is_live_count_over_an_acquires_new_slots(A: int) -> None:
    """native geometry.h counts a live-tail state group's acquire by state_take (semantics
    13.5): equal to live_count with the window W = 2 over every run's new slots."""
    for B in range(1, 7):
        for first in range(0, 5):
            for tail in range(0, B if first else 1):
                for n in range(tail + 1, tail + 4 * B + 2):
                    new = geo.new_slots(tail, B, n)
                    f = geo.extent(first, tail, B) + n
                    want = geo.live_count(first, new, f, 2, B, A) if A else new
                    assert geo.state_take(new, A) == want, (A, B, first, tail, n)
