"""Theorems as data: name, plain-words statement, formula script, expected verdict, kills."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .prover import Prover
from .query import DEFAULT_RLIMIT, Values

EXPECTED = ("proved", "witness")
VERDICTS = ("proved", "witness", "counterexample", "unknown", "error")
"""``error``: no verdict, the environment failed (the wall-clock guard, a crashed process)."""

# (verdict, [(step name, values)], variant) -> trace dicts ready for ``trace.write_trace``
TraceBuilder = Callable[[str, Sequence[tuple[str, Values]], str | None], list[dict[str, Any]]]


@dataclass(frozen=True)
class Theorem:
    name: str
    statement: str  # plain words, README-ready; says "bounded" and the bounds where it is
    guarantee: str  # what it guarantees an engine
    check: Callable[[Prover], None]
    expected: str = "proved"
    kills: tuple[str, ...] = ()  # variants of verify/variants.py it must reject
    bounded: bool = False  # exhaustive over small configurations instead of unbounded
    trace: TraceBuilder | None = None
    cost: float = 1.0  # rough seconds, so the runner can start the longest first
    rlimit: int | None = None  # Z3 resource units for all its queries; None: DEFAULT_RLIMIT
    # The spec/runs.py transitions it executes on symbolic state (function names), if any.
    executes: tuple[str, ...] = ()
    # Refute first: run the script once searching every step's small domain before any
    # unbounded query (run_theorem).  False for a theorem that makes queries of its own
    # outside prove steps (the range theorems): each prove step still searches first.
    refute_first: bool = True

    def __post_init__(self) -> None:
        if self.expected not in EXPECTED:
            raise ValueError(f"{self.name}: expected must be one of {EXPECTED}")
        if self.rlimit is not None and self.rlimit < 1:
            raise ValueError(f"{self.name}: rlimit must be >= 1")

    @property
    def budget(self) -> int:
        """The theorem's rlimit budget: its measured one, or the default."""
        return DEFAULT_RLIMIT if self.rlimit is None else self.rlimit


THEOREMS: dict[str, Theorem] = {}


def theorem(
    name: str,
    statement: str,
    guarantee: str,
    *,
    expected: str = "proved",
    kills: Sequence[str] = (),
    bounded: bool = False,
    trace: TraceBuilder | None = None,
    cost: float = 1.0,
    rlimit: int | None = None,
    executes: Sequence[str] = (),
    refute_first: bool = True,
) -> Callable[[Callable[[Prover], None]], Callable[[Prover], None]]:
    """Register ``check`` as a theorem (module import order is report order).

    ``rlimit`` is the theorem's budget of Z3 resource units, set from measured use with a
    margin (``livetail rlimits`` measures every theorem); without it, ``DEFAULT_RLIMIT``.
    """

    def register(check: Callable[[Prover], None]) -> Callable[[Prover], None]:
        if name in THEOREMS:
            raise ValueError(f"duplicate theorem name {name!r}")
        THEOREMS[name] = Theorem(
            name=name,
            statement=" ".join(statement.split()),
            guarantee=" ".join(guarantee.split()),
            check=check,
            expected=expected,
            kills=tuple(kills),
            bounded=bounded,
            trace=trace,
            cost=cost,
            rlimit=rlimit,
            executes=tuple(executes),
            refute_first=refute_first,
        )
        return check

    return register
