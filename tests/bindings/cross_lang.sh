#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The same scenario in every language, on one pool file, in sequence:
# C -> Rust -> Go -> Python. Each process verifies the blocks every earlier one
# listed in the handles file (live ones hold their known bytes, freed ones are
# SPECKV_EBADHANDLE), does its own open/alloc 3/write/prefetch/access/stats/
# free 1/close/reopen/verify, and appends its handles. Handles are plain
# uint64 and survive across processes.
# Sharing: each prints the chained hashes of the same token blocks with both
# algorithms ("hash ALGO EXTRA BLOCK HEX"), which must be identical in every
# language; finds every block the earlier ones published (by hash, tenant 7
# only); publishes one of its own; and publishes the block all of them compute,
# which only the first one (C) gets, the others receiving its handle.
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
shared="$work/shared.txt"

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

# Each program's stdout is kept: its "hash" lines are compared below.
run() {
    name=$1
    shift
    if ! "$@" >"$work/$name.out"; then
        cat "$work/$name.out"
        echo "cross_lang: the $name scenario failed" >&2
        exit 1
    fi
    grep -v '^hash ' "$work/$name.out" || true
    grep '^hash ' "$work/$name.out" >"$work/$name.hashes" || true
}
run c "$scenario_c" "$pool" "$list" 1 "$shared"
run rust "$build/rust-target/debug/examples/scenario" "$pool" "$list" 2 "$shared"
run go env GODEBUG=cgocheck=1 "$work/scenario_go" "$pool" "$list" 3 "$shared"
run python env PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$root/bindings/python" \
    python3 "$here/scenario.py" "$pool" "$list" 4 "$shared"

# 2 algorithms x (no extra, extra) x 4 chained blocks, identical everywhere.
if [ "$(grep -c . "$work/c.hashes")" != 16 ]; then
    echo "cross_lang: C printed $(grep -c . "$work/c.hashes") block hashes, expected 16" >&2
    exit 1
fi
for l in rust go python; do
    if ! cmp -s "$work/c.hashes" "$work/$l.hashes"; then
        echo "cross_lang: $l computes other block hashes than C:" >&2
        diff "$work/c.hashes" "$work/$l.hashes" >&2 || true
        exit 1
    fi
done
if [ "$(cut -d' ' -f5 "$work/c.hashes" | sort -u | grep -c .)" != 16 ]; then
    echo "cross_lang: the 16 block hashes are not all different" >&2
    exit 1
fi

n=$(grep -c . "$list")
langs=$(cut -d' ' -f1 "$list" | uniq | tr '\n' ' ')
if [ "$n" != 12 ] || [ "$langs" != "c rust go python " ]; then
    echo "cross_lang: expected 12 blocks from c rust go python, got $n from: $langs" >&2
    exit 1
fi
# One block of each language's own, and the common one, published by C only.
pub=$(cut -d' ' -f1,2 "$shared" | tr '\n' ' ')
if [ "$pub" != "c 3 c 4 rust 3 go 3 python 3 " ]; then
    echo "cross_lang: expected published blocks 'c 3 c 4 rust 3 go 3 python 3', got: $pub" >&2
    exit 1
fi
echo "cross_lang: ok: $langs all agree on $pool, on 16 block hashes and on 5 published blocks"
