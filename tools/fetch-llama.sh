#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# fetch-llama.sh DEST
# Fetches llama.cpp for bindings/llama.cpp (the speckv adapter, its tests and
# benchmark) from the npm registry, pinned, and lays it out under DEST:
#   DEST/include/       llama.h, llama-cpp.h and ggml's headers (from the git
#                       bundle in node-llama-cpp, at the release it names)
#   DEST/lib/           prebuilt libllama.v0.4.0.so, libggml*.so (x86-64 Linux,
#                       CPU; the CPU backend variants are loaded at run time)
#   DEST/llama.cpp/     the llama.cpp source tree of that release (gguf-py, docs;
#                       COMMIT names the bundle's commit; no .git)
#   DEST/STAMP          what was fetched; a later run with the same pins is a no-op
# Each tarball's SHA-512 must equal both the registry's dist.integrity and the
# value recorded below: a tarball that changed under the same version fails.
# Exit status: 0 done, 2 npm or the registry unreachable (callers skip the
# llama.cpp tests), 1 anything else (integrity mismatch, bad archive).
set -euo pipefail

dest=${1:?usage: fetch-llama.sh DEST}
# The pins: package@version and its sha512 (the npm integrity string).
pkg_src="node-llama-cpp@3.21.1"
sri_src="sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg=="
pkg_bin="@node-llama-cpp/linux-x64@3.21.1"
sri_bin="sha512-Totj6RTDMGo3FoK2yNUaz/oGmZD0olAqTrRluFUWmu0kW2i9TOzHSW0OWCAiGkzRCVX0WsU2CyUQo/W2NYtdPA=="
# (bindings/llama.cpp/fetch_integrity_test.sh sets SPECKV_LLAMA_SRI_SRC to a wrong value: the fetch must fail)
sri_src=${SPECKV_LLAMA_SRI_SRC:-$sri_src}
stamp="$pkg_src $sri_src $pkg_bin $sri_bin"

if [ -f "$dest/STAMP" ] && [ "$(cat "$dest/STAMP")" = "$stamp" ] && [ -f "$dest/lib/libllama.v0.4.0.so" ]; then
  exit 0
fi
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "fetch-llama.sh: prebuilt llama.cpp libraries exist for Linux x86-64 only (this is $(uname -s)-$(uname -m))" >&2
  exit 2
fi
for t in npm node git tar; do
  command -v $t >/dev/null || { echo "fetch-llama.sh: '$t' not found (tools/install-deps.sh installs it)" >&2; exit 2; }
done

work="$dest/.fetch"
rm -rf "$work"
mkdir -p "$work"

# sha512 of a file as an npm integrity string.
sri_of() { node -e 'const c=require("crypto"),f=require("fs");process.stdout.write("sha512-"+c.createHash("sha512").update(f.readFileSync(process.argv[1])).digest("base64"))' "$1"; }

registry_check() {  # registry_check PKG@VER RECORDED_SRI: the registry must list the recorded hash
  local spec=$1 want=$2 reg
  if ! reg=$(npm view "$spec" dist.integrity 2>"$work/npm.err"); then
    echo "fetch-llama.sh: npm view $spec failed (registry unreachable?):" >&2
    tail -3 "$work/npm.err" >&2
    return 2
  fi
  if [ "$reg" != "$want" ]; then
    echo "fetch-llama.sh: $spec: the registry's integrity $reg is not the recorded $want" >&2
    return 1
  fi
}
fetch() {  # fetch PKG@VER RECORDED_SRI -> prints the tarball path
  local spec=$1 want=$2 tgz got
  if ! tgz=$(cd "$work" && npm pack --silent "$spec" 2>"$work/npm.err" | tail -1); then
    echo "fetch-llama.sh: npm pack $spec failed:" >&2
    tail -3 "$work/npm.err" >&2
    return 2
  fi
  got=$(sri_of "$work/$tgz")
  if [ "$got" != "$want" ]; then
    echo "fetch-llama.sh: $spec: the tarball's sha512 $got is not the recorded $want" >&2
    return 1
  fi
  echo "$work/$tgz"
}

# Both registry entries first (cheap), then the downloads.
rc=0
registry_check "$pkg_src" "$sri_src" || rc=$?
[ $rc -eq 0 ] || exit $rc
registry_check "$pkg_bin" "$sri_bin" || rc=$?
[ $rc -eq 0 ] || exit $rc
src_tgz=$(fetch "$pkg_src" "$sri_src") || rc=$?
[ $rc -eq 0 ] || exit $rc
bin_tgz=$(fetch "$pkg_bin" "$sri_bin") || rc=$?
[ $rc -eq 0 ] || exit $rc

mkdir -p "$work/src" "$work/bin"
tar xzf "$src_tgz" -C "$work/src" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
tar xzf "$bin_tgz" -C "$work/bin" package/bins/linux-x64
grep -q '"tag": "v0.4.0"' "$work/src/package/llama/llama.cpp.info.json" || {
  echo "fetch-llama.sh: the bundle is not llama.cpp release v0.4.0:" >&2
  cat "$work/src/package/llama/llama.cpp.info.json" >&2; exit 1; }

rm -rf "$dest/llama.cpp" "$dest/include" "$dest/lib"
git -c advice.detachedHead=false clone -q "$work/src/package/llama/gitRelease.bundle" "$dest/llama.cpp"
git -C "$dest/llama.cpp" rev-parse HEAD > "$dest/llama.cpp/COMMIT"
rm -rf "$dest/llama.cpp/.git"   # its history (34 MB) is not needed here
mkdir -p "$dest/include" "$dest/lib"
cp "$dest/llama.cpp/include/"*.h "$dest/llama.cpp/ggml/include/"*.h "$dest/include/"
cp "$work/bin/package/bins/linux-x64/"lib*.so "$dest/lib/"
rm -rf "$work"
echo "$stamp" > "$dest/STAMP"
echo "fetch-llama.sh: llama.cpp v0.4.0 (node-llama-cpp 3.21.1) in $dest"
