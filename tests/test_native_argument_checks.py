"""Every ``throw std::invalid_argument`` of the native sources is hit by a test.

The sites are read from the sources (file, first string literal of the thrown message, in
source order): a new site fails ``test_every_site_is_listed`` until it gets a case here. Each
case calls the native module so that exactly that site throws, and checks the ValueError's
message. The few sites no Python call reaches name the C++ or sanitizer test that hits them,
which must still contain the call. The core's ``fail(name, what)`` helper (src/fail.h) is a site
too: its case is one of the calls that reach it (its other callers have their own tests)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import livetail
import numpy as np
import pytest
from livetail import _core

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [
    *sorted((ROOT / "native/src").glob("*.cpp")),
    *sorted((ROOT / "native/src").glob("*.h")),
    *sorted((ROOT / "native/python").glob("*")),
]


def sites() -> list[tuple[str, str]]:
    """(file relative to native/, first string literal of the message) per throw, in order."""
    out = []
    for path in SOURCES:
        if path.suffix not in (".cpp", ".inc", ".h"):
            continue
        text = path.read_text()
        for m in re.finditer(r"throw std::invalid_argument\(", text):
            stmt = text[m.end() : text.index(";", m.end())]
            lit = re.search(r'"((?:[^"\\]|\\.)*)"', stmt)
            out.append((str(path.relative_to(ROOT / "native")), lit.group(1) if lit else ""))
    return out


def _coord(groups: int = 2, host: bool = False) -> tuple[Any, Any]:
    pool = livetail.BlockPool(64)
    specs = [livetail.GroupSpec("full", 4), livetail.GroupSpec("sliding", 4, sliding_window=5)]
    h = livetail.HostPool(8) if host else None
    return pool, livetail.Coordinator(specs[:groups], pool, host=h)


def _acquired() -> tuple[Any, Any, list[Any]]:
    pool, c = _coord()
    ts = c.new_tables()
    assert c.acquire(ts, 8)
    return pool, c, ts


def _twin_free() -> None:
    pool, c, ts = _acquired()
    livetail.Coordinator(c.specs, pool).free(ts)


def _apply_twice() -> None:
    _, c, ts = _acquired()
    plan = c.plan_step([(ts, 1)])
    c.apply_step(plan)
    c.apply_step(plan)


def _place_full() -> None:
    table = np.zeros((2, 2), np.uint64)
    _core._router_place(table, 1, np.array([1, 2, 3], np.uint64), np.array([1, 2, 3], np.int32))


_U64 = np.array([5], np.uint64)
_PRESENCE = np.zeros((2, 1), np.uint8)
_ROWS = np.array([1], np.int32)
_RULES = np.array([[4, -1, 0, 0]], np.int64)


def _release_twice() -> None:
    _, c, tables = _acquired()
    h = c.detach(tables)
    c.release_detached(h)
    c.release_detached(h)


# (file, literal) -> one (call, message start) per site with that key, in source order;
# or a str: the test file (relative to the project) whose text must hold the given call.
CASES: dict[tuple[str, str], list[tuple[Callable[[], Any], str] | tuple[str, str]]] = {
    ("src/fail.h", " "): [
        (_twin_free, "tables[0] is bound to another coordinator"),
    ],
    ("src/pool.cpp", "num_blocks must be in [1, 2**31 - 1], got "): [
        (lambda: livetail.BlockPool(2**31), "num_blocks must be in [1, 2**31 - 1], got 2147483648"),
    ],
    ("src/pool.cpp", "page must be in [0, num_blocks), got "): [
        (lambda: livetail.BlockPool(4).ref_count(4), "page must be in [0, num_blocks), got 4"),
        (lambda: livetail.BlockPool(4).name(7), "page must be in [0, num_blocks), got 7"),
    ],
    ("src/pool.cpp", "k must be >= 0, got "): [
        ("native/tests/test_pool.cpp", "pool.allocate(-1, out)"),
    ],
    ("src/pool.cpp", "pages["): [
        ("native/tests/test_pool.cpp", "pool.free(Pages{1, 1})"),
        (lambda: livetail.BlockPool(4).evict_names([2, 0]), "pages[1] = 0 is the null page"),
    ],
    ("python/bind_table.inc", "width = "): [
        (
            lambda: livetail.page_ids_batch(_acquired()[2], width=1),
            "width = 1 is below the longest table (2)",
        ),
    ],
    ("python/bind_router.inc", "table must have shape (2**bits, 2)"): [
        (
            lambda: _core._router_lookup(np.zeros((4, 2), np.uint64), 3, _U64),
            "table must have shape (2**bits, 2)",
        ),
    ],
    ("python/bind_router.inc", "rows must hold one row per hash"): [
        (
            lambda: _core._router_place(
                np.zeros((4, 2), np.uint64), 2, np.array([1, 2], np.uint64), _ROWS
            ),
            "rows must hold one row per hash",
        ),
    ],
    ("python/bind_router.inc", "rows must be >= 1"): [
        (
            lambda: _core._router_place(
                np.zeros((4, 2), np.uint64), 2, _U64, np.array([0], np.int32)
            ),
            "rows must be >= 1",
        ),
    ],
    ("python/bind_router.inc", "table: no free slot left"): [
        (_place_full, "table: no free slot left"),
    ],
    ("python/bind_router.inc", "lcm must be a multiple of base in [1, 2**31 - 1]"): [
        (
            lambda: _core._router_longest(_PRESENCE, _ROWS, 4, 6, _RULES),
            "lcm must be a multiple of base",
        ),
        (
            lambda: _core._router_longest_many(
                _PRESENCE, _ROWS, 4, np.array([6], np.int64), _RULES, np.array([1], np.int64)
            ),
            "lcm must be a multiple of base",
        ),
    ],
    ("python/bind_router.inc", "rules must have shape (groups, 4)"): [
        (
            lambda: _core._router_longest(_PRESENCE, _ROWS, 4, 4, np.zeros((1, 2), np.int64)),
            "rules must have shape (groups, 4)",
        ),
        (
            lambda: _core._router_longest_many(
                _PRESENCE,
                _ROWS,
                4,
                np.array([4], np.int64),
                np.zeros((1, 2), np.int64),
                np.array([1], np.int64),
            ),
            "rules must have shape (groups, 4)",
        ),
    ],
    ("python/bind_router.inc", "rules: a group's size, resume, column or chunk is out of range"): [
        (
            lambda: _core._router_longest(
                _PRESENCE, _ROWS, 4, 4, np.array([[4, -1, 1, 0]], np.int64)
            ),
            "rules: a group's size, resume, column or chunk is out of range",
        ),
        (
            lambda: _core._router_longest_many(
                _PRESENCE,
                _ROWS,
                4,
                np.array([4], np.int64),
                np.array([[4, -1, 1, 0]], np.int64),
                np.array([1], np.int64),
            ),
            "rules: a group's size, resume, column or chunk is out of range",
        ),
    ],
    ("python/bind_router.inc", "rows: a row outside presence"): [
        (
            lambda: _core._router_longest(_PRESENCE, np.array([2], np.int32), 4, 4, _RULES),
            "rows: a row outside presence",
        ),
        (
            lambda: _core._router_longest_many(
                _PRESENCE,
                np.array([2], np.int32),
                4,
                np.array([4], np.int64),
                _RULES,
                np.array([1], np.int64),
            ),
            "rows: a row outside presence",
        ),
    ],
    ("python/bind_router.inc", "ends must hold one end per lcm"): [
        (
            lambda: _core._router_longest_many(
                _PRESENCE, _ROWS, 4, np.array([4], np.int64), _RULES, np.array([1, 1], np.int64)
            ),
            "ends must hold one end per lcm",
        ),
    ],
    ("python/bind_router.inc", "ends must be ascending and at most the rules' count"): [
        (
            lambda: _core._router_longest_many(
                _PRESENCE, _ROWS, 4, np.array([4], np.int64), _RULES, np.array([2], np.int64)
            ),
            "ends must be ascending and at most the rules' count",
        ),
    ],
    ("python/bind_coordinator.inc", "alignment must be in [1, 2**31 - 1], got 0"): [
        (
            lambda: livetail.Coordinator(
                [livetail.GroupSpec("full", 4)], livetail.BlockPool(4), alignment=0
            ),
            "alignment must be in [1, 2**31 - 1], got 0",
        ),
    ],
    ("python/bind_coordinator.inc", " must hold one table per group ("): [
        (
            lambda: _acquired()[1].decode_step([[livetail.BlockTable()]], [0]),
            "requests[0] must hold one table per group (2), got 1",
        ),
    ],
    ("python/bind_plan.inc", " must hold one table per group ("): [
        (
            lambda: _acquired()[1].plan_step([([livetail.BlockTable()], 1)]),
            "requests[0] tables must hold one table per group (2), got 1",
        ),
    ],
    ("python/binding.cpp", " is too large"): [
        (lambda: _acquired()[1].acquire(_acquired()[2], 2**70), "num_tokens is too large"),
    ],
    ("python/binding.cpp", " must be >= 0"): [
        (lambda: _acquired()[1].acquire(_acquired()[2], -3), "num_tokens must be >= 0, got -3"),
    ],
    ("python/binding.cpp", " must be in ["): [
        (lambda: livetail.HostPool(-2), "num_blocks must be in [1, 2**31 - 1], got -2"),
    ],
    ("python/binding.cpp", " holds a value that is too large"): [
        (
            lambda: livetail.BlockPool(4).evict_names(np.array([2**64 - 1], np.uint64)),
            "pages holds a value that is too large",
        ),
    ],
    ("python/binding.cpp", "["): [
        (
            lambda: livetail.BlockPool(4).evict_names(np.array([1, -1], np.int64)),
            "pages[1] must be >= 0",
        ),
    ],
    ("python/binding.cpp", " must hold one frontier per request ("): [
        (
            lambda: _acquired()[1].decode_step([_acquired()[2]], [1, 2]),
            "num_computed_tokens must hold one frontier per request (1), got 2",
        ),
    ],
    ("python/stats.cpp", "take_events: the pool was built with events=False"): [
        (lambda: livetail.BlockPool(4).take_events(), "take_events: the pool was built with"),
    ],
    ("python/sanitize_control.cpp", "kind must be 'heap-buffer-overflow' or "): [
        # The test-only control of the sanitizer build (not in this module): no argument of
        # the library; native/sanitize.sh calls it with the two kinds it knows.
        ("native/sanitize.sh", "sanitize_control"),
    ],
    ("python/bind_prefix.inc", "keys["): [
        (
            lambda: _coord()[1].match_prefix([b"short"]),
            "keys[0] must be a bytes object of length 32",
        ),
    ],
    ("python/bind_prefix.inc", "token ids must be in [0, 4294967295], got "): [
        (
            lambda: livetail.page_keys([1, 2**32], 1),
            "token ids must be in [0, 4294967295], got 4294967296",
        ),
    ],
    ("python/bind_prefix.inc", "base_block_size must be in [1, 2**31 - 1], got "): [
        (lambda: livetail.page_keys([1], 0), "base_block_size must be in [1, 2**31 - 1], got 0"),
    ],
}


def test_every_site_is_listed() -> None:
    found: dict[tuple[str, str], int] = {}
    for key in sites():
        found[key] = found.get(key, 0) + 1
    assert found == {k: len(v) for k, v in CASES.items()}


@pytest.mark.parametrize(
    ("key", "i"), [(k, i) for k, v in CASES.items() for i in range(len(v))], ids=str
)
def test_the_site_throws_a_value_error_with_its_message(key: tuple[str, str], i: int) -> None:
    call, message = CASES[key][i]
    if isinstance(call, str):  # reached from C++ (or the sanitizer build) only
        assert message in (ROOT / call).read_text()
        return
    with pytest.raises(ValueError) as e:
        call()
    assert str(e.value).startswith(message), str(e.value)
