#!/bin/sh
# The same scenario in every language, on one pool file, in sequence:
# C -> Rust -> Go -> Python. Each process verifies the blocks every earlier one
# listed in the handles file (live ones hold their known bytes, freed ones are
# SPECKV_EBADHANDLE), does its own open/alloc 3/write/prefetch/access/stats/
# free 1/close/reopen/verify, and appends its handles. Handles are plain
# uint64 and survive across processes.
#   cross_lang.sh LIBRARY BUILD_DIR SCENARIO_C
# Exits 77 (ctest: SKIP) when cargo, go or python3 is missing.
set -eu
lib=$1 build=$2 scenario_c=$3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
for t in cargo go python3; do
    command -v $t >/dev/null 2>&1 || { echo "SKIP: $t not found"; exit 77; }
done
export SPECKV_LIB="$lib"
work="$build/cross_lang"
rm -rf "$work"
mkdir -p "$work"
pool="$work/scenario.pool"
list="$work/handles.txt"

# Build the Rust and Go programs (offline, caches in the build tree).
(
    cd "$root/bindings/rust"
    CARGO_TARGET_DIR="$build/rust-target" CARGO_HOME="${SPECKV_CARGO_HOME:-$build/cargo-home}" \
        cargo build --offline --locked --quiet --example scenario
)
(
    cd "$root/bindings/go"
    GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local GOENV=off CGO_ENABLED=1 \
        GOCACHE="$build/go/cache" GOPATH="$build/go/path" \
        go build -o "$work/scenario_go" ./cmd/speckv-scenario
)

"$scenario_c" "$pool" "$list" 1
"$build/rust-target/debug/examples/scenario" "$pool" "$list" 2
GODEBUG=cgocheck=1 "$work/scenario_go" "$pool" "$list" 3
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$root/bindings/python" python3 "$here/scenario.py" "$pool" "$list" 4

n=$(grep -c . "$list")
langs=$(cut -d' ' -f1 "$list" | uniq | tr '\n' ' ')
if [ "$n" != 12 ] || [ "$langs" != "c rust go python " ]; then
    echo "cross_lang: expected 12 blocks from c rust go python, got $n from: $langs" >&2
    exit 1
fi
echo "cross_lang: ok: $langs all agree on $pool"
