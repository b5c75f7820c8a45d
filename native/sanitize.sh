#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer run of the native tests, reports always shown.
#
#   native/sanitize.sh                 # the native subset (below)
#   native/sanitize.sh tests/test_differential.py -k native   # any pytest arguments
#
# Run it from an environment with the test dependencies (pip install '.[test]'). It builds
# the extension with LIVETAIL_SANITIZE=ON in its own build directory and installs it into its
# own directory (build/sanitize/site, put first on PYTHONPATH; the environment's normal
# livetail is untouched), then, with the ASan runtime and libstdc++ preloaded:
#  1. the controls (tests/sanitize_control.py): a heap read past the end and a signed
#     overflow in test-only code of the sanitized module; each must be reported in the log
#     directory, or the script fails (the instrumented build would not be in use);
#  2. the tests. ASan reports go to files (log_path); UBSan, loaded beside the ASan runtime,
#     writes to stderr, so pytest runs with --capture=sys (fd 2 is never captured) and its
#     output is kept in the log directory too. On any failure, or any report at all, the
#     script prints the reports and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

py="${PYTHON:-python}"
cxx="${CXX:-g++}"
work="${LIVETAIL_SANITIZE_DIR:-build/sanitize}"
logs="$work/logs"
if [ "$#" -eq 0 ]; then
  set -- tests/test_native_*.py tests/test_api_*.py tests/test_prefix.py
fi

echo "== sanitize: build (LIVETAIL_SANITIZE=ON, $work)"
rm -rf "$work/site" "$logs"
mkdir -p "$logs"
# install.strip=false: scikit-build-core strips on install, which would drop the symbols
# and debug lines the reports name (the module itself is built with NOSTRIP and -g).
"$py" -m pip install --quiet --no-deps --target "$work/site" . \
  -Ccmake.define.LIVETAIL_SANITIZE=ON -Cinstall.strip=false -Cbuild-dir="$work/cmake"
work="$(cd "$work" && pwd)"
logs="$work/logs"

# libstdc++ too: python does not link it, and ASan's __cxa_throw interceptor aborts at the
# first C++ exception without it. Leaks: off, CPython keeps objects alive until exit.
preload="$("$cxx" -print-file-name=libasan.so) $("$cxx" -print-file-name=libstdc++.so)"

sanitized() {  # sanitized LOGDIR command...: run with the runtime, reports into LOGDIR
  local dir="$1"
  shift
  mkdir -p "$dir"
  env LD_PRELOAD="$preload" PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}" \
    ASAN_OPTIONS="detect_leaks=0:log_path=$dir/asan" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$dir/ubsan" \
    LIVETAIL_HYPOTHESIS_PROFILE="${LIVETAIL_HYPOTHESIS_PROFILE:-ci}" \
    "$@"
}

show() {  # show DIR: print every report in DIR
  local f
  for f in "$1"/*; do
    [ -e "$f" ] || continue
    echo "---- $f"
    cat "$f"
  done
}

echo "== sanitize: controls (each must be reported, readably)"
control() {  # control TEST PATTERN...: the test must fail and leave a report matching each
  local dir="$logs/control-$1" test="$1" pattern
  shift
  if sanitized "$dir" "$py" -m pytest -q -p no:cacheprovider --capture=sys \
    "tests/sanitize_control.py::$test" >"$dir.out" 2>&1; then
    echo "control $test passed: the bad access was not caught"
    cat "$dir.out"
    return 1
  fi
  for pattern in "$@"; do
    if ! grep -qs -- "$pattern" "$dir"/* "$dir.out"; then
      echo "control $test: no report line matching '$pattern' in $dir"
      echo "(no report: is the sanitized module in use? no function or file:line: stripped?)"
      cat "$dir.out"
      show "$dir"
      return 1
    fi
  done
  echo "control $test: caught, report in $dir:"
  for pattern in "$@"; do
    cat "$dir"/* "$dir.out" 2>/dev/null | grep -m1 -- "$pattern" || true
  done
}
# Each report must name the kind, and its top frame the function and file:line of the bad
# access (a stripped module gives only "(_core.abi3.so+0x...)").
control test_heap_read_past_the_end_is_reported "AddressSanitizer: heap-buffer-overflow" \
  "#0 0x[0-9a-f]* in livetail::control_read_past_the_end() .*native/python/sanitize_control.cpp:[0-9]"
control test_signed_integer_overflow_is_reported \
  "native/python/sanitize_control.cpp:[0-9]*:[0-9]*: runtime error: signed integer overflow" \
  "#0 0x[0-9a-f]* in livetail::control_signed_overflow() .*native/python/sanitize_control.cpp:[0-9]"

echo "== sanitize: tests ($*)"
status=0
sanitized "$logs/tests" "$py" -m pytest -q -p no:cacheprovider --capture=sys "$@" \
  2>&1 | tee "$logs/tests.out" || status=$?
if [ "$status" -ne 0 ] || [ -n "$(ls -A "$logs/tests")" ] ||
  grep -q "runtime error:" "$logs/tests.out"; then
  echo "sanitizer run FAILED (pytest exit $status); reports in $logs/tests and $logs/tests.out:"
  show "$logs/tests"
  grep -A30 "runtime error:" "$logs/tests.out" || true
  exit 1
fi
echo "sanitizer run passed: no report in $logs/tests"
