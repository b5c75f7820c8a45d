"""The C++ package: a consumer builds against livetail::core both by add_subdirectory and
by find_package(livetail CONFIG) after cmake --install, sets no C++ standard itself, and
finds no cache entry forced on it (issue 12 item 3)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONSUMER = Path(__file__).parent / "cmake_consumer"
EXPECTED = "charge 163 acquired 1 pinned 160 live slots 1024\ninvalid_argument\nfree 65535\n"


def _cmake() -> str:
    # The test extra installs cmake into the environment; prefer that one.
    here = Path(sys.executable).parent / "cmake"
    found = str(here) if here.exists() else shutil.which("cmake")
    assert found, "cmake is part of the test extra"
    return found


def _run(*args: str | Path) -> str:
    out = subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": "2"},
    )
    assert out.returncode == 0, f"{' '.join(map(str, args))}\n{out.stdout}\n{out.stderr}"
    return out.stdout


def _cache(build: Path, name: str) -> str | None:
    m = re.search(rf"^{name}:\w+=(.*)$", (build / "CMakeCache.txt").read_text(), re.M)
    return m.group(1) if m else None


def test_consumer_by_add_subdirectory_gets_cxx20_and_no_forced_cache(tmp_path: Path) -> None:
    cmake, build = _cmake(), tmp_path / "build"
    _run(cmake, "-S", CONSUMER, "-B", build, f"-DLIVETAIL_SOURCE_DIR={ROOT}")
    # A sub-project leaves the parent's build type alone and installs nothing by default.
    assert _cache(build, "CMAKE_BUILD_TYPE") in (None, "")
    assert _cache(build, "LIVETAIL_INSTALL") == "OFF"
    _run(cmake, "--build", build)
    assert _run(build / "consumer") == EXPECTED


def test_consumer_by_find_package_after_cmake_install(tmp_path: Path) -> None:
    cmake, prefix = _cmake(), tmp_path / "prefix"
    lib_build, app_build = tmp_path / "livetail-build", tmp_path / "app-build"
    _run(cmake, "-S", ROOT, "-B", lib_build)
    assert _cache(lib_build, "CMAKE_BUILD_TYPE") == "Release"  # top level: Release by default
    _run(cmake, "--build", lib_build)
    _run(cmake, "--install", lib_build, "--prefix", prefix)
    installed = {p.relative_to(prefix).as_posix() for p in prefix.rglob("*") if p.is_file()}
    libdir = next(p.split("/")[0] for p in installed if p.endswith("liblivetail_core.a"))
    assert {
        "include/livetail/coordinator.h",
        "include/livetail/livetail.h",
        "include/livetail/pool.h",
        f"{libdir}/liblivetail_core.a",
        f"{libdir}/cmake/livetail/livetailConfig.cmake",
        f"{libdir}/cmake/livetail/livetailConfigVersion.cmake",
        f"{libdir}/cmake/livetail/livetailTargets.cmake",
    } <= installed
    _run(cmake, "-S", CONSUMER, "-B", app_build, f"-DCMAKE_PREFIX_PATH={prefix}")
    _run(cmake, "--build", app_build)
    assert _run(app_build / "consumer") == EXPECTED


def test_umbrella_header_includes_every_public_header() -> None:
    include = ROOT / "native" / "include" / "livetail"
    headers = sorted(p.name for p in include.glob("*.h") if p.name != "livetail.h")
    umbrella = (include / "livetail.h").read_text()
    assert [f'#include "livetail/{h}"' for h in headers] == [
        line for line in umbrella.splitlines() if line.startswith("#include")
    ]
    assert "#include <livetail/livetail.h>" in (CONSUMER / "main.cpp").read_text()
