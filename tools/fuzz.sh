#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The long fuzzing campaign (tests/fuzz/README.md): builds every fuzz target with libFuzzer
# (the `fuzz` preset: clang, ASan + UBSan, from the library's own source lists) and runs each
# until it has run RUNS inputs (default 10,000,000) or SECONDS have passed (default 600),
# whichever comes first. CI only replays the committed corpora (label `fuzz`).
#   [RUNS=N] tools/fuzz.sh [SECONDS [TARGET...]]
# The campaign issues 25 and 28 ask for: `tools/fuzz.sh 3600` (10 M inputs or an hour per target).
# New inputs go to build/fuzz/corpus/TARGET (the committed corpus under tests/fuzz/corpus is
# read, not written); crashes to build/fuzz/crashes/. Each target's final line of statistics is
# printed; add a crash input to the committed corpus with its fix.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
runs=${RUNS:-10000000}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_pool_image fuzz_uri_config fuzz_codec_decode fuzz_codec_roundtrip fuzz_trace_reader fuzz_cold_file fuzz_remote)
need=()
for p in clang libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" || exit 1
fi
cmake --preset fuzz >/dev/null || exit 1
cmake --build --preset fuzz -j "${JOBS:-$(nproc)}" || exit 1
mkdir -p build/fuzz/crashes
status=0
for t in "${targets[@]}"; do
  corpus=${t#fuzz_}
  mkdir -p "build/fuzz/corpus/$t"
  max_len=()
  [ "$t" = fuzz_pool_image ] && max_len=(-max_len=4096)
  echo "=== $t: ${secs}s"
  start=$(date +%s)
  "build/fuzz/tests/fuzz/$t" -max_total_time="$secs" -runs="$runs" "${max_len[@]}" -print_final_stats=1 \
    -artifact_prefix="build/fuzz/crashes/$t-" "build/fuzz/corpus/$t" "tests/fuzz/corpus/$corpus" \
    > "build/fuzz/$t.log" 2>&1
  rc=$?
  grep -E '^#[0-9]+' "build/fuzz/$t.log" | tail -1   # executions, coverage, corpus, exec/s
  grep -E '^stat::number_of_executed_units' "build/fuzz/$t.log" | tail -1
  echo "$t: $(( $(date +%s) - start )) s"
  if [ $rc -ne 0 ]; then
    status=1
    echo "$t: FOUND A CRASH (exit $rc), see build/fuzz/$t.log and build/fuzz/crashes/"
    grep -E 'ERROR|SUMMARY' "build/fuzz/$t.log" | head -5
  fi
done
exit $status
