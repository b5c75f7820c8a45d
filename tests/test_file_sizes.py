"""No source file of the project is over 600 lines (tests aside).

Source: Python (``.py``, ``.pyi``), C and C++ (``.c``, ``.cc``, ``.cpp``, ``.cxx``, ``.h``,
``.hh``, ``.hpp``, ``.inc``), shell (``.sh``), CMake (``CMakeLists.txt``, ``.cmake``) and every
file under ``.ci/``; not tests/, not docs or data files. The list is the files git tracks
(``git ls-files``) in a git checkout, else the files found by walking the source directories;
if neither gives a list, the test fails rather than check nothing.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600
SOURCE_SUFFIXES = {
    ".py", ".pyi", ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".inc", ".sh", ".cmake"
}
# Directories the walk (no git) looks in: every top-level directory git tracks but tests/
# and docs/, plus the files at the top.
SOURCE_DIRS = ("python", "spec", "verify", "native", "benchmarks", "examples", "scripts", ".ci")
# Never source: what builds, installs and tools leave in the tree (all in .gitignore).
SKIPPED_DIRS = {
    "__pycache__", ".git", ".venv", "venv", "build", "dist", "_skbuild", ".hypothesis",
    ".pytest_cache", ".mypy_cache", ".ruff_cache", ".livetail", ".benchmarks",
}


def is_source(path: str) -> bool:
    """Whether a path relative to the checkout (``/`` separated) is a source file that counts."""
    parts = path.split("/")
    if parts[0] == "tests":
        return False
    if parts[0] == ".ci" and len(parts) > 1:
        return True
    name = parts[-1]
    return name == "CMakeLists.txt" or os.path.splitext(name)[1] in SOURCE_SUFFIXES


def git_files() -> list[str] | None:
    """The files git tracks here (present on disk), or None if this is not a git checkout."""
    try:
        top = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--show-toplevel"],
            capture_output=True, text=True, check=False,
        )
    except OSError:  # no git on PATH
        return None
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != ROOT:
        return None
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.decode()
    # A tracked file deleted in the working tree is on its way out: nothing to count.
    return [p for p in listed.split("\0") if p and (ROOT / p).is_file()]


def walked_files() -> list[str]:
    """The files under SOURCE_DIRS and at the top of the checkout, build outputs aside."""
    missing = [d for d in SOURCE_DIRS if not (ROOT / d).is_dir()]
    if missing:
        pytest.fail(f"not a git checkout, and no {', '.join(missing)} under {ROOT} to walk")
    out = [p.name for p in ROOT.iterdir() if p.is_file()]
    for top in SOURCE_DIRS:
        for dirpath, dirnames, filenames in os.walk(ROOT / top):
            dirnames[:] = [
                d for d in dirnames if d not in SKIPPED_DIRS and not d.endswith(".egg-info")
            ]
            rel = Path(dirpath).relative_to(ROOT).as_posix()
            out.extend(f"{rel}/{f}" for f in filenames)
    return out


def source_files() -> tuple[str, list[str]]:
    """(how the list was made, the source files); fails if no list can be made."""
    files = git_files()
    how = "git ls-files"
    if files is None:
        files, how = walked_files(), "a walk of " + ", ".join(SOURCE_DIRS)
    sources = sorted(p for p in files if is_source(p))
    if not sources:
        pytest.fail(f"no source files found by {how} under {ROOT}: nothing would be checked")
    return how, sources


def count_lines(path: Path) -> int:
    """Lines as ``wc -l`` counts them, plus a last line without its newline."""
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def test_no_source_file_is_over_600_lines() -> None:
    how, sources = source_files()
    over = [(p, n) for p in sources if (n := count_lines(ROOT / p)) > MAX_LINES]
    assert over == [], f"over {MAX_LINES} lines (files from {how}):\n" + "\n".join(
        f"  {p}: {n}" for p, n in over
    )


def test_the_checked_files_include_every_kind_of_source() -> None:
    _, sources = source_files()
    for path in (
        "python/livetail/vllm/__init__.py",
        "native/src/coordinator.cpp",
        "native/include/livetail/router.h",
        "native/python/bind_router.inc",
        "native/sanitize.sh",
        "CMakeLists.txt",
        ".ci/run",
        ".ci/native",
        "benchmarks/vllm_side_by_side.py",
    ):
        assert path in sources, path
    assert not [p for p in sources if p.startswith(("tests/", "docs/"))]


def test_what_counts_as_source() -> None:
    assert is_source("spec/coordinator.py")
    assert is_source("native/cmake/livetailConfig.cmake")
    assert is_source("native/CMakeLists.txt")
    assert is_source(".ci/run")
    assert is_source("scripts/vllm_env.sh")
    assert not is_source("tests/test_file_sizes.py")
    assert not is_source("tests/cmake_consumer/CMakeLists.txt")
    assert not is_source("docs/campaign.md")
    assert not is_source("README.md")
    assert not is_source("pyproject.toml")
    assert not is_source("scripts/vllm_env_requirements.txt")
    assert not is_source("docs/vllm_side_by_side.png")


def test_the_walk_finds_every_file_git_tracks() -> None:
    # The fallback for a checkout without git must miss no source file git would list.
    files = git_files()
    if files is None:
        pytest.skip("not a git checkout: the walk is what the size test used")
    missing = sorted(p for p in set(files) - set(walked_files()) if is_source(p))
    assert missing == []


def test_lines_are_counted_as_wc_does(tmp_path: Path) -> None:
    for data, n in ((b"", 0), (b"a\n", 1), (b"a\nb", 2), (b"a\n\n", 2), (b"\n" * 601, 601)):
        (tmp_path / "f").write_bytes(data)
        assert count_lines(tmp_path / "f") == n
