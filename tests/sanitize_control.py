"""Sanitizer controls, run only by ``native/sanitize.sh`` against the ASan + UBSan build.

Each test makes one known bad access through ``_core._sanitizer_control`` (compiled only
into sanitizer builds); the sanitizer must report it and abort the run.  The script runs
each test on its own under pytest, as the real tests run, and fails unless the report is in
its log directory: proof that the instrumented module is the one imported and that pytest's
output capture cannot hide a report. Each report's top frame must also name the function
(``livetail::control_read_past_the_end()``, ``livetail::control_signed_overflow()``) and
its ``native/python/sanitize_control.cpp:LINE``: the sanitized module keeps its symbols.
The file name keeps it out of the default test run.
"""

from __future__ import annotations

from livetail import _core


def test_heap_read_past_the_end_is_reported() -> None:
    _core._sanitizer_control("heap-buffer-overflow")  # type: ignore[attr-defined]


def test_signed_integer_overflow_is_reported() -> None:
    _core._sanitizer_control("signed-integer-overflow")  # type: ignore[attr-defined]
