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


def count(name: str, value: object) -> int:
    """A non-negative integer argument: TypeError for non-integers and bool, ValueError if < 0."""
    if type(value) is int and value >= 0:  # the common case: a plain int (bool is not one)
        return value
    if _is_bool(value):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}")
    try:
        v = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
    if v < 0:
        raise ValueError(f"{name} must be >= 0, got {v}")
    return v


def bounded(name: str, value: object, low: int, high: int = INT32_MAX) -> int:
    """An integer argument in [low, high]."""
    v = count(name, value) if low >= 0 else operator.index(value)  # type: ignore[arg-type]
    if not low <= v <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {v}")
    return v


def instance(name: str, value: object, cls: type[_T]) -> _T:
    """The value, when it is a cls; TypeError otherwise."""
    if not isinstance(value, cls):
        raise TypeError(f"{name} must be a {cls.__name__}, not {type(value).__name__}")
    return value
