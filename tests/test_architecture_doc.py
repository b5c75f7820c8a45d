"""docs/architecture.md names only paths that exist, and every folder it describes."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text()


def test_every_path_the_doc_names_exists() -> None:
    paths = set(
        re.findall(
            r"`((?:native|spec|python|verify|tests|benchmarks|examples|scripts|\.ci)/[\w./<>-]*)`",
            DOC,
        )
    )
    assert paths
    for p in paths:
        if "<" in p:
            continue
        assert (ROOT / p.rstrip("/")).exists(), p


def test_every_theorem_module_is_described() -> None:
    modules = {
        f.name
        for f in (ROOT / "verify" / "theorems").glob("*.py")
        if f.name not in ("__init__.py", "run.py")
    }
    for m in modules:
        assert f"`{m}`" in DOC, m


def test_every_spec_module_with_transitions_is_named() -> None:
    for m in ("geometry.py", "runs.py", "slots.py"):
        assert f"`{m}`" in DOC, m
