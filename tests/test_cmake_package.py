"""The C++ package: a consumer builds against livetail::core both by add_subdirectory and
by find_package(livetail CONFIG) after cmake --install, sets no C++ standard itself, and
finds no cache entry forced on it (issue 12 item 3). Its second program, engine_loop.cpp,
is the complete engine loop docs/cpp.md walks through: it runs and prints exactly
engine_loop.out, and every C++ block of docs/cpp.md is quoted from it verbatim."""

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
ENGINE_LOOP = CONSUMER / "engine_loop.cpp"
ENGINE_LOOP_OUT = (CONSUMER / "engine_loop.out").read_text()
CPP_DOC = ROOT / "docs" / "cpp.md"


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
    assert _run(build / "engine_loop") == ENGINE_LOOP_OUT


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
    assert _run(app_build / "engine_loop") == ENGINE_LOOP_OUT


def test_umbrella_header_includes_every_public_header() -> None:
    include = ROOT / "native" / "include" / "livetail"
    headers = sorted(p.name for p in include.glob("*.h") if p.name != "livetail.h")
    umbrella = (include / "livetail.h").read_text()
    assert [f'#include "livetail/{h}"' for h in headers] == [
        line for line in umbrella.splitlines() if line.startswith("#include")
    ]
    assert "#include <livetail/livetail.h>" in (CONSUMER / "main.cpp").read_text()


def test_engine_loop_output_states_what_the_doc_says() -> None:
    # The figures docs/cpp.md cites from the run.
    lines = ENGINE_LOOP_OUT.splitlines()
    assert "step 22: reject request 3" in lines
    assert "step 17: preempt request 4" in lines
    assert "step 23: admit request 4, hit 16 tokens, 3 pages from the host" in lines
    assert "finished 3 rejected 1 preempted 1" in lines
    assert "pool free 23 of 23, host free 31 of 31" in lines
    assert lines[-12:] == [
        "negative count: invalid_argument, free 7, extent 0",
        "acquire 20 tokens: false",
        "acquire 6 tokens: true",
        "frontier past the extent: invalid_argument, free 1, extent 6",
        "same table twice: invalid_argument, free 1, extent 6",
        "plan_offload with a full host: none",
        "reset_names while a named page is pinned: false",
        "reclaimed 2",
        "stale plan: invalid_argument, free 3, extent 6",
        "claim into tables in use: invalid_argument, free 3, extent 6",
        "freed: free 7",
        "pool of 0 pages: invalid_argument, free 7, extent 0",
    ]


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", text, re.M | re.S)


def test_cpp_doc_quotes_the_engine_loop_verbatim_and_its_output() -> None:
    doc, source = CPP_DOC.read_text(), ENGINE_LOOP.read_text()
    blocks = _blocks(doc, "cpp")
    assert len(blocks) >= 6
    for block in blocks:
        assert block in source, f"docs/cpp.md quotes code engine_loop.cpp does not have:\n{block}"
    # Together the blocks cover the whole engine loop, from the groups to the events.
    quoted = "".join(blocks)
    for call in (
        "coord.plan_step(", "coord.apply_step(", "coord.match_prefix(",
        "coord.blocks_consumed_by_claim(", "coord.blocks_needed_for_sequential(",
        "coord.claim(", "coord.acquire(", "coord.complete_load(", "coord.cache_full_blocks(",
        "coord.plan_offload(", "coord.complete_offload(", "coord.reclaim_expired(",
        "coord.free(", "pool.events()", "pool.clear_events()", "livetail::page_keys(",
    ):  # fmt: skip
        assert call in quoted, call
    [out] = _blocks(doc, "text")
    assert out == ENGINE_LOOP_OUT
    assert "tests/cmake_consumer/engine_loop.cpp" in doc
