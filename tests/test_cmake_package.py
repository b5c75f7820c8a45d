"""The C++ package: a consumer builds against livetail::core both by add_subdirectory and
by find_package(livetail CONFIG) after cmake --install, sets no C++ standard itself, and
finds no cache entry forced on it (issue 12 item 3). Its second program, engine_loop.cpp,
is the complete engine loop docs/cpp.md walks through: it runs and prints exactly
engine_loop.out, the same loop on the spec and the binding prints the same lines, and every
C++ block of docs/cpp.md is quoted from it verbatim."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

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


def _engine_loop_in_python(impl: ModuleType) -> list[str]:
    """engine_loop.cpp's run_engine(), line for line, on the Python API of `impl`."""
    chunk, decode = 8, 2
    pool = impl.BlockPool(24, events=True)
    host = impl.HostPool(32, events=True)
    specs = [impl.GroupSpec("full", 8), impl.GroupSpec("sliding", 2, 3, live_tail_alloc=True)]
    coord = impl.Coordinator(specs, pool, host=host)
    base = coord.base_block_size

    class Request:
        def __init__(self, rid: int, arrival: int, prompt: list[int]) -> None:
            self.id, self.arrival, self.done = rid, arrival, 0
            self.keys = impl.page_keys(prompt, base)
            self.prompt = [*prompt, 7]
            self.tables = coord.new_tables()

        def next(self) -> int:
            n = len(self.prompt)
            return min(chunk, n - self.done) if self.done < n else 1

    prompts = [range(100, 124), range(500, 540), range(900, 1100), range(100, 116)]
    arriving = [Request(i + 1, a, list(p)) for i, (a, p) in enumerate(zip((0, 0, 1, 14), prompts))]
    waiting: list[Request] = []
    running: list[Request] = []
    out: list[str] = []
    counts = {"GPU": [0, 0], "CPU": [0, 0]}
    finished = rejected = preempted = loaded = offloaded = hits = 0
    step = 0
    while arriving or waiting or running:
        while arriving and arriving[0].arrival <= step:
            waiting.append(arriving.pop(0))
        plan = coord.plan_step([(r.tables, r.next()) for r in running])
        if not plan.top_fits:
            out.append(f"step {step}: reject request {running[0].id}")
            coord.free(running.pop(0).tables)
            rejected += 1
            step += 1
            continue
        coord.apply_step(plan)
        while len(running) > plan.stepped:
            r = running.pop()
            out.append(f"step {step}: preempt request {r.id}")
            r.done = 0
            waiting.insert(0, r)
            preempted += 1
        room = plan.free_after
        admitted, loads = [], []
        while waiting:
            r = waiting[0]
            m = coord.match_prefix(r.keys)
            first = min(chunk, len(r.prompt) - m.num_tokens)
            charge = coord.blocks_consumed_by_claim(m) + coord.blocks_needed_for_sequential(
                r.tables, first, 1
            )
            if charge > room:
                break
            room -= charge
            load = coord.claim(r.tables, m)
            from_host = 0 if load is None else len(load.host_pages)
            if load is not None:
                loads.append(load)
            out.append(
                f"step {step}: admit request {r.id}, hit {m.num_tokens} tokens, "
                f"{from_host} pages from the host"
            )
            loaded += from_host
            r.done = m.num_tokens
            hits += m.num_tokens
            admitted.append(r)
            running.append(waiting.pop(0))
        for r in admitted:
            assert coord.acquire(r.tables, r.next())
        for load in loads:
            coord.complete_load(load)
        for r in running:
            r.done += r.next()
            coord.cache_full_blocks(r.tables, r.keys, r.done)
            copy = coord.plan_offload(r.tables, r.done)
            if copy is not None:
                offloaded += len(copy.host_pages)
                coord.complete_offload(copy)
            coord.reclaim_expired(r.tables, r.done)
        for r in list(reversed(running)):
            if r.done == len(r.prompt) + decode:
                coord.free(r.tables)
                running.remove(r)
                finished += 1
        for p in (pool, host):
            for kind, tier, _group, keys, *_ in p.take_events():
                if kind in ("stored", "removed"):
                    counts[tier][kind == "removed"] += len(keys)
        out.append(
            f"step {step}: running {len(running)} waiting {len(waiting)} "
            f"pinned {pool.num_pinned} free {pool.num_free}"
        )
        step += 1
    (gs, gr), (cs, cr) = counts["GPU"], counts["CPU"]
    return [
        *out,
        f"finished {finished} rejected {rejected} preempted {preempted}",
        f"hit tokens {hits} offloaded {offloaded} loaded {loaded}",
        f"events GPU stored {gs} removed {gr}, CPU stored {cs} removed {cr}",
        f"pool free {pool.num_free} of {pool.num_blocks - 1}, "
        f"host free {host.num_free} of {host.num_blocks - 1}",
    ]


def test_engine_loop_output_is_what_the_spec_and_the_binding_do(impl: ModuleType) -> None:
    # The C++ program's figures are the semantics': the same loop on the executable spec
    # (and on the Python binding) prints the same lines.
    assert _engine_loop_in_python(impl) == ENGINE_LOOP_OUT.splitlines()[:-12]
