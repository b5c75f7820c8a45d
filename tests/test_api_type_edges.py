"""Wrong types are TypeErrors and wrong values ValueErrors naming the argument (README: "Bad
input raises ValueError (TypeError for a wrong type) naming the argument"), with the same
message on the spec and the native module: keys given as ``str``, sizes below 1 (never
"must be >= 0" where 0 is refused too), ``Coordinator(specs, None)``, ``claim`` without or
with a wrong match."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import livetail
import livetail.spec as spec
import pytest

MODULES = [spec, livetail]


def _raised(call: Callable[[], Any]) -> tuple[type, str]:
    try:
        call()
    except Exception as e:  # the type and message are what is compared
        return type(e), str(e)
    raise AssertionError("no exception")


def _same(make: Callable[[ModuleType], Callable[[], Any]]) -> tuple[type, str]:
    """The exception both modules raise; they must be the same type and message."""
    [a, b] = [_raised(make(m)) for m in MODULES]
    assert a == b
    return a


def _world(m: ModuleType) -> tuple[Any, Any, Any]:
    pool = m.BlockPool(32)
    c = m.Coordinator([m.GroupSpec("full", 4), m.GroupSpec("sliding", 4, sliding_window=5)], pool)
    tables = c.new_tables()
    c.acquire(tables, 8)
    return pool, c, tables


def _keys(m: ModuleType) -> list[bytes]:
    return list(m.page_keys(list(range(8)), 4))


@pytest.mark.parametrize(
    ("call", "exc", "message"),
    [
        ("cache", TypeError, "keys must be a list or tuple of 32-byte bytes, not str"),
        ("match", TypeError, "keys must be a list or tuple of 32-byte bytes, not str"),
        ("cache-str-items", TypeError, "keys[1] must be a bytes object, not str"),
        ("match-str-items", TypeError, "keys[1] must be a bytes object, not str"),
        ("match-short-key", ValueError, "keys[1] must be a bytes object of length 32, got 5"),
        ("cache-short-key", ValueError, "keys[1] must be a bytes object of length 32, got 5"),
    ],
)
def test_keys_of_a_wrong_type_are_type_errors_of_a_wrong_length_value_errors(
    call: str, exc: type, message: str
) -> None:
    def make(m: ModuleType) -> Callable[[], Any]:
        pool, c, tables = _world(m)
        k = _keys(m)
        if call == "cache":
            return lambda: c.cache_full_blocks(tables, "ab" * 16, 8)
        if call == "match":
            return lambda: c.match_prefix("ab" * 32)
        if call.endswith("str-items"):
            bad: list[Any] = [k[0], "x" * 32]
        else:
            bad = [k[0], b"short"]
        if call.startswith("cache"):
            return lambda: c.cache_full_blocks(tables, bad, 8)
        return lambda: c.match_prefix(bad)

    assert _same(make) == (exc, message)


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("BlockPool(-1)", "num_blocks must be in [1, 2**31 - 1], got -1"),
        ("BlockPool(0)", "num_blocks must be in [1, 2**31 - 1], got 0"),
        ("HostPool(-1)", "num_blocks must be in [1, 2**31 - 1], got -1"),
        ("GroupSpec('full', -3)", "block_size must be in [1, 2**31 - 1], got -3"),
        (
            "GroupSpec('sliding', 4, sliding_window=-1)",
            "sliding_window must be in [1, 2**31 - 1], got -1",
        ),  # noqa: E501
        ("FullAttentionManager(-2)", "block_size must be in [1, 2**31 - 1], got -2"),
        ("SlidingWindowManager(4, -4)", "sliding_window must be in [1, 2**31 - 1], got -4"),
        ("StateManager(-2)", "block_size must be in [1, 2**31 - 1], got -2"),
        ("BlockPool(-2**70)", f"num_blocks must be in [1, 2**31 - 1], got {-(2**70)}"),
        # 0 is a valid alignment: its bound is >= 0.
        ("SlidingWindowManager(4, 4, -1)", "live_alloc_alignment must be >= 0, got -1"),
    ],
)
def test_a_size_below_one_names_the_range_not_must_be_at_least_zero(
    what: str, message: str
) -> None:
    assert _same(lambda m: lambda: eval(what, {}, vars(m))) == (ValueError, message)


def test_coordinator_with_pool_none_names_the_pool() -> None:
    def make(m: ModuleType) -> Callable[[], Any]:
        return lambda: m.Coordinator([m.GroupSpec("full", 4)], None)

    assert _same(make) == (TypeError, "pool must be a BlockPool, not NoneType")


def test_claim_without_a_match_or_with_a_wrong_one_names_match() -> None:
    for m in MODULES:
        _, c, _ = _world(m)
        exc, msg = _raised(lambda: c.claim("x"))  # noqa: B023
        assert exc is TypeError
        assert msg.endswith("claim() missing 1 required positional argument: 'match'")

    def make(m: ModuleType) -> Callable[[], Any]:
        _, c, _ = _world(m)
        return lambda: c.claim([m.BlockTable(), m.BlockTable()], "x")

    assert _same(make) == (TypeError, "match must be a PrefixMatch, not str")

    def make_none(m: ModuleType) -> Callable[[], Any]:
        _, c, _ = _world(m)
        return lambda: c.claim([m.BlockTable(), m.BlockTable()], None)

    assert _same(make_none) == (TypeError, "match must be a PrefixMatch, not NoneType")


def test_a_claim_with_a_good_match_still_claims() -> None:
    for m in MODULES:
        pool, c, tables = _world(m)
        c.cache_full_blocks(tables, _keys(m), 8)
        match = c.match_prefix(_keys(m))
        fresh = c.new_tables()
        assert c.claim(fresh, match) is None
        assert [t.extent for t in fresh] == [match.num_tokens] * 2
        assert match.num_tokens == 8
