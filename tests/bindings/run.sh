#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs one binding's tests against a freshly built libspeckv, offline.
#   run.sh KIND LIBRARY BUILD_DIR        KIND: rust | go | python
# Everything the toolchains write (cargo target, Go caches) goes under
# BUILD_DIR. Exits 77 (ctest: SKIP) when the toolchain is missing.
set -eu
kind=$1 lib=$2 build=$3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export SPECKV_LIB="$lib"

need() {
    command -v "$1" >/dev/null 2>&1 || { echo "SKIP: $1 not found"; exit 77; }
}

case $kind in
rust)
    need cargo
    export CARGO_TARGET_DIR="$build/rust-target" CARGO_NET_OFFLINE=true
    # A private CARGO_HOME keeps CI off ~/.cargo; there are no crates to fetch.
    export CARGO_HOME="${SPECKV_CARGO_HOME:-$build/cargo-home}"
    cd "$root/bindings/rust"
    exec cargo test --offline --locked --quiet
    ;;
go)
    need go
    export GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local GOENV=off CGO_ENABLED=1 \
        GOCACHE="$build/go/cache" GOPATH="$build/go/path" GODEBUG=cgocheck=1
    cd "$root/bindings/go"
    go vet ./...
    exec go test -count=1 ./...
    ;;
python)
    need python3
    export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
    cd "$root/bindings/python"
    exec python3 -m unittest discover -s tests -t . -v
    ;;
*)
    echo "usage: run.sh rust|go|python LIBRARY BUILD_DIR" >&2
    exit 2
    ;;
esac
