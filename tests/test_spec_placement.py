"""The placement loop native acquire runs, written with the spec's hot-path functions,
gives real pages to exactly the slots the slot-by-slot definition calls live."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from livetail.spec import geometry as g


def placed(slots: int, tail: int, n: int, W: int, B: int, A: int) -> list[bool]:
    """The slots [slots, end) managers.cpp's append_slots fills, in its loop order."""
    end = g.slots_after(slots, tail, B, n)
    real = [False] * (end - slots)
    h = slots
    if A > 0:
        f = g.frontier_after(slots, tail, B, n)
        h = g.first_live_slot(slots, end, f, W, B)
        m, kept = g.period(A, B), g.kept_per_period(W, B, A)
        p0 = g.period_start(slots, m)
        while p0 < h:
            for i in range(g.resume_run_begin(p0, m, kept, slots), g.resume_run_end(p0, m, h)):
                assert not real[i - slots]  # each slot visited once
                real[i - slots] = True
            p0 = g.next_period(p0, m)
    for i in range(h, end):
        real[i - slots] = True
    return real


@given(
    B=st.integers(1, 9),
    W=st.integers(1, 40),
    mult=st.integers(0, 6),
    slots=st.integers(0, 30),
    tail=st.integers(0, 8),
    n=st.integers(1, 120),
)
def test_placement_loop_fills_exactly_the_live_slots(
    B: int, W: int, mult: int, slots: int, tail: int, n: int
) -> None:
    tail = 0 if slots == 0 else tail % B
    A = mult * B
    new = g.new_slots(tail, B, n)
    f = g.extent(slots, tail, B) + n
    assert placed(slots, tail, n, W, B, A) == g.live_slots_by_definition(slots, new, f, W, B, A)


def test_placement_example_keeps_the_resume_slots_of_each_period() -> None:
    # B=1, W=3 (R=2), A=4 (m=4): 12 fresh slots at frontier 12; the window at 12 covers
    # slots 10, 11; each period keeps its last 2 slots.
    assert placed(0, 0, 12, 3, 1, 4) == [s % 4 >= 2 or s >= 10 for s in range(12)]
    assert g.period_start(13, 4) == 12
    assert g.first_live_slot(0, 12, 12, 3, 1) == 10
    assert g.resume_run_begin(8, 4, 2, 9) == 10
    assert g.resume_run_end(8, 4, 10) == 10
