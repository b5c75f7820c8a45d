"""Configure, build and run the C++ benchmark: python benchmarks/run_cpp.py

Builds with CMake into build/bench (Release, -O2, LIVETAIL_BUILD_BENCH=ON, no Python
extension) and runs native/bench/bench.cpp, which prints ns per operation.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "bench"


def main() -> int:
    generator = ["-G", "Ninja"] if _has("ninja") else []
    subprocess.run(
        [
            "cmake",
            "-S",
            str(ROOT),
            "-B",
            str(BUILD),
            *generator,
            "-DCMAKE_BUILD_TYPE=Release",
            "-DLIVETAIL_BUILD_BENCH=ON",
            "-DLIVETAIL_BUILD_PYTHON=OFF",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run(
        ["cmake", "--build", str(BUILD), "--target", "livetail_bench"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return subprocess.run([str(BUILD / "livetail_bench")]).returncode


def _has(tool: str) -> bool:
    from shutil import which

    return which(tool) is not None


if __name__ == "__main__":
    sys.exit(main())
