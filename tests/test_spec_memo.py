"""The int memo of the geometry's closed forms: invisible except for speed.

A memoised closed form answers a call with the int Arith and plain ints from its memo; every
other call runs the function itself, and patching the module (as the wrong variants and the
definitional check do) clears the memo, so the patched geometry is what the model sees.
"""

from __future__ import annotations

import numpy as np
import pytest
import z3
from livetail.spec import geometry as geo
from livetail.verify.z3arith import Z3


def test_a_patched_closed_form_reaches_a_memoised_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    args = (0, 4, 9, 2, 1, 2)  # first, new, f, W, B, A: slots 0..3 at frontier 9
    before = geo.live_count(*args)
    assert before == 2  # the two resume slots; slots 0..3 are out of the window
    assert geo.live_count(*args) == before  # answered from the memo
    monkeypatch.setattr(geo, "slid_out", lambda f, W, B, ar=geo.INT: 0)
    assert geo.live_count(*args) == 4  # every slot inside the window now
    monkeypatch.undo()
    assert geo.live_count(*args) == before


def test_memoised_and_unmemoised_agree_on_ints() -> None:
    for first in range(4):
        for new in range(4):
            for f in range(12):
                args = (first, new, f, 3, 2, 4)
                assert geo.live_count(*args) == geo.live_count.__wrapped__(*args)
                assert geo.live_count(*args, geo.INT) == geo.live_count.__wrapped__(*args)


def test_other_numbers_and_ariths_run_the_function_itself() -> None:
    x = np.int64(3)
    assert type(geo.new_slots(0, 2, x)) is np.int64
    assert geo.tail_after(0, 2, True) == geo.tail_after.__wrapped__(0, 2, True)
    n = z3.Int("n")
    term = geo.new_slots(0, 2, n, Z3)
    assert isinstance(term, z3.ArithRef)
    assert z3.simplify(z3.substitute(term, (n, z3.IntVal(5)))).as_long() == 3
