"""The README's alignment figures (semantics 13.9) are what benchmarks/live_tail_alignment.py
measures now, and they say what the semantics says they must."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _script() -> ModuleType:
    path = ROOT / "benchmarks" / "live_tail_alignment.py"
    spec = importlib.util.spec_from_file_location("live_tail_alignment", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_readme_table_is_the_scripts_output() -> None:
    readme = (ROOT / "README.md").read_text()
    start, end = "<!-- alignment-table:start -->\n", "\n<!-- alignment-table:end -->"
    block = readme[readme.index(start) + len(start) : readme.index(end)]
    assert block == _script().table()


def test_the_figures_follow_the_geometry() -> None:
    # R = ceil(127 / 16) = 8 resume pages; q = A / 16 pages per boundary; 512 slots.
    rows = {r["A"]: r for r in _script().figures()}
    # A = 16 (q = 1 <= R): every slot is a resume page, live tail saves nothing.
    assert rows[16] == {"A": 16, "off": 512, "on": 512, "named": 512, "kept": 8}
    # A = 256 (q = 16): 8 of every 16 slots; A = 1024 (q = 64): 8 of every 64.
    assert rows[256] == {"A": 256, "off": 512, "on": 256, "named": 256, "kept": 8}
    assert rows[1024] == {"A": 1024, "off": 512, "on": 64, "named": 64, "kept": 8}
