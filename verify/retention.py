"""The free queue after a release under the retention rule (semantics section 2).

A page whose count drops to 0 joins the queue's front if it carries no name and its back if
it carries one, in release order. The lockstep machine does not read page names, so its
oracle asks only that the new queue split as `reversed(front) + before + back`, with
`front` and `back` complementary subsequences of the pages released, in release order; the
spec and native sides are also compared page for page, which pins the split.
"""

from __future__ import annotations

from collections.abc import Sequence

from .pages import same, shown


def expected_queue(before: Sequence[int], released: Sequence[int], named: set[int]) -> list[int]:
    """The queue after `released` (release order) re-enter it, `named` ones at the back."""
    front = [p for p in released if p not in named]
    back = [p for p in released if p in named]
    return front[::-1] + list(before) + back


def _splits(before: Sequence[int], after: Sequence[int]) -> list[int]:
    """Every index i with after[i : i + len(before)] == before (len(after) - len(before) + 1
    candidates: the pages released, not the pool, set the cost)."""
    n = len(before)
    return [i for i in range(len(after) - n + 1) if same(after[i : i + n], before)]


def check_release(before: Sequence[int], after: Sequence[int], released: Sequence[int]) -> str:
    """'' if `after` is `before` plus `released` placed by some naming; else what is wrong.

    A split found below places every released page once, so the queue holds exactly the
    pages before plus those released."""
    if len(after) != len(before) + len(released):
        return f"queue {shown(after)} is not the queue before plus the pages released {released}"
    for i in _splits(before, after):
        front = list(after[:i])[::-1]
        back = list(after[i + len(before) :])
        in_front = set(front)
        if front == [p for p in released if p in in_front] and back == [
            p for p in released if p not in in_front
        ]:
            return ""
    return (
        f"queue {shown(after)} is not (unnamed released pages, last first) + queue before + "
        f"(named released pages, in release order) for the release order {list(released)}"
    )
