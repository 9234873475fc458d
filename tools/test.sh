#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# README command 2: the whole test suite. Builds and runs:
#   release  every test (unit, C API, CLI, install, ABI, fuzz replay, codec, ...)
#   asan     every test again under AddressSanitizer + UndefinedBehaviorSanitizer
#   tsan     the concurrency tests under ThreadSanitizer
# Tests that need what the machine lacks exit 77 and are reported as SKIPPED
# (listed at the end), never counted as passed.
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh || exit 1
jobs=${JOBS:-$(nproc)}
status=0
summary=()
run() {  # run PRESET "BUILD TARGETS (empty: all)" [ctest args...]
  local preset=$1 targets=$2; shift 2
  echo "=== [$preset] configure + build"
  cmake --preset "$preset" >/dev/null || { summary+=("$preset: configure FAILED"); status=1; return; }
  # shellcheck disable=SC2086
  cmake --build --preset "$preset" -j "$jobs" ${targets:+--target $targets} ||
    { summary+=("$preset: build FAILED"); status=1; return; }
  echo "=== [$preset] test"
  local log=build/$preset/ctest.log
  ctest --preset "$preset" -j "$jobs" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || status=1
  summary+=("$preset: $(grep -E 'tests passed' "$log" | tail -1)")
  local skipped
  skipped=$(grep -E '\*\*\*Skipped|Not Run|Disabled' "$log" || true)
  [ -z "$skipped" ] || summary+=("$preset skipped:" "$skipped")
}
run release ""
run asan "" -LE 'install|bindings|fpga|readme|dlopen'
run tsan "concurrency_tests c_api_test tiers_concurrency_tests"
echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
exit $status
