"""Argument checks shared by the model's public entry points."""

from __future__ import annotations

import operator
import sys
from typing import TypeVar

from .geometry import INT32_MAX

_T = TypeVar("_T")


def _is_bool(value: object) -> bool:
    """bool or numpy's bool scalar (which numpy < 2.3 gives an __index__)."""
    if isinstance(value, bool):
        return True
    np = sys.modules.get("numpy")  # no numpy loaded: no numpy bool can exist
    return np is not None and isinstance(value, np.bool_)


def integer(name: str, value: object) -> int:
    """An integer argument of any sign: TypeError for non-integers and bool."""
    if _is_bool(value):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None


def count(name: str, value: object) -> int:
    """A non-negative integer argument: TypeError for non-integers and bool, ValueError if < 0."""
    if type(value) is int and value >= 0:  # the common case: a plain int (bool is not one)
        return value
    v = integer(name, value)
    if v < 0:
        raise ValueError(f"{name} must be >= 0, got {v}")
    return v


def bounded(name: str, value: object, low: int, high: int = INT32_MAX) -> int:
    """An integer argument in [low, high]; a value below it (negative or not) is refused with
    the range, as the native module words it (a size of 1 or more is never "must be >= 0")."""
    v = count(name, value) if low == 0 else integer(name, value)
    if not low <= v <= high:
        top = "2**31 - 1" if high == INT32_MAX else str(high)
        raise ValueError(f"{name} must be in [{low}, {top}], got {v}")
    return v


def instance(name: str, value: object, cls: type[_T]) -> _T:
    """The value, when it is a cls; TypeError otherwise."""
    if not isinstance(value, cls):
        raise TypeError(f"{name} must be a {cls.__name__}, not {type(value).__name__}")
    return value
