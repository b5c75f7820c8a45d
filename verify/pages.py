"""Page-indexed sequences (a free queue, the reference counts) stored as runs.

A pool of ``num_blocks`` pages exports its free queue and its reference counts as arrays of
``num_blocks`` entries, but a trace touches only the pages its operations take: the rest of
the queue is one ascending run of never-used pages and the rest of the counts one run of
zeros.  ``Runs`` keeps such a sequence as its maximal runs (ascending by one for a queue,
constant for counts), so the differential machine compares, slices and indexes it at a cost
that follows the pages the trace used, not the pool's size.  Two ``Runs`` of one kind are
equal exactly when the sequences they stand for are equal (maximal runs are canonical).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

QUEUE = 1  # a free queue: runs of ids ascending by one
COUNTS = 0  # reference counts: runs of equal values


class Runs(Sequence[int]):
    """An immutable int sequence as maximal runs ``value, value + step, ...`` (step 0 or 1)."""

    __slots__ = ("_len", "_starts", "_step", "_values")

    def __init__(self, step: int, starts: tuple[int, ...], values: tuple[int, ...], n: int):
        self._step = step
        self._starts = starts  # index of each run's first entry, ascending, from 0
        self._values = values  # each run's first value
        self._len = n

    @classmethod
    def of(cls, values: Any, step: int) -> Runs:
        """From any int sequence or array (one pass, in numpy when it is an array)."""
        a = np.asarray(values, dtype=np.int64).reshape(-1)
        if a.size == 0:
            return cls(step, (), (), 0)
        breaks = np.flatnonzero(np.diff(a) != step) + 1
        starts = np.concatenate(([0], breaks))
        return cls(step, tuple(starts.tolist()), tuple(a[starts].tolist()), int(a.size))

    def _run_end(self, i: int) -> int:
        return self._starts[i + 1] if i + 1 < len(self._starts) else self._len

    def runs(self) -> Iterator[tuple[int, int, int]]:
        """Each run as (index of its first entry, its first value, its length)."""
        for i, (s, v) in enumerate(zip(self._starts, self._values)):
            yield s, v, self._run_end(i) - s

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Runs: ...

    def __getitem__(self, index: int | slice) -> int | Runs:
        if isinstance(index, slice):
            lo, hi, stride = index.indices(self._len)
            if stride != 1:
                return Runs.of(list(self)[index], self._step)
            return self._cut(lo, max(lo, hi))
        i = index + self._len if index < 0 else index
        if not 0 <= i < self._len:
            raise IndexError("Runs index out of range")
        r = bisect.bisect_right(self._starts, i) - 1
        return self._values[r] + self._step * (i - self._starts[r])

    def _cut(self, lo: int, hi: int) -> Runs:
        """Entries [lo, hi): the runs that overlap it, trimmed (still maximal)."""
        if lo >= hi:
            return Runs(self._step, (), (), 0)
        first = bisect.bisect_right(self._starts, lo) - 1
        last = bisect.bisect_left(self._starts, hi)
        starts = [max(s, lo) - lo for s in self._starts[first:last]]
        values = [
            v + self._step * (max(s, lo) - s)
            for s, v in zip(self._starts[first:last], self._values[first:last])
        ]
        return Runs(self._step, tuple(starts), tuple(values), hi - lo)

    def __iter__(self) -> Iterator[int]:
        for _s, v, n in self.runs():
            if self._step:
                yield from range(v, v + n)
            else:
                yield from (v,) * n

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Runs) and other._step == self._step:
            return (self._len, self._starts, self._values) == (
                other._len,
                other._starts,
                other._values,
            )
        if isinstance(other, (Runs, list, tuple)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self._step, self._len, self._starts, self._values))

    def __repr__(self) -> str:
        head = list(self[:12])
        return f"Runs({head}{' ...' if self._len > 12 else ''}, len={self._len})"

    def __str__(self) -> str:
        return shown(self)

    def nonzero(self) -> dict[int, int]:
        """Index -> value of every non-zero entry (counts: the pinned pages)."""
        out: dict[int, int] = {}
        for s, v, n in self.runs():
            if v == 0 and self._step == 0:
                continue  # a run of zeros: most of a pool's pages
            for i in range(n):
                if v + self._step * i:
                    out[s + i] = v + self._step * i
        return out

    def intervals(self) -> list[tuple[int, int]]:
        """A queue's values as sorted half-open intervals [lo, hi) (one per run)."""
        assert self._step == QUEUE
        return sorted((v, v + n) for _, v, n in self.runs())


def shown(seq: Sequence[int]) -> str:
    """A queue or counts in a failure message: in full when short."""
    return str(list(seq)) if len(seq) <= 64 else repr(seq)


def same(a: Sequence[int], b: Sequence[int]) -> bool:
    """Sequence equality across Runs, lists and tuples."""
    if isinstance(a, Runs):
        return a == b
    if isinstance(b, Runs):
        return b == a
    return list(a) == list(b)


def distinct_outside(queue: Runs, low: int, high: int, taken: Sequence[int]) -> str:
    """'' if the queue's ids are distinct, within [low, high) and none of `taken`; else why."""
    spans = queue.intervals()
    for (_lo, hi), (nlo, _) in zip(spans, spans[1:]):
        if nlo < hi:
            return f"free queue holds page {nlo} twice"
    if spans and (spans[0][0] < low or spans[-1][1] > high):
        return f"free queue holds a page outside [{low}, {high})"
    starts = [lo for lo, _ in spans]
    for p in taken:
        i = bisect.bisect_right(starts, p) - 1
        if i >= 0 and p < spans[i][1]:
            return f"free queue holds page {p}, which has a reference"
    return ""
