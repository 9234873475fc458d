#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Only speckv_* symbols (and the version node) may be exported by the .so.
set -eu
lib=$1
bad=$(nm -D --defined-only "$lib" | awk '$2 != "A" && $3 !~ /^speckv_/ {print $3}')
n=$(nm -D --defined-only "$lib" | awk '$3 ~ /^speckv_/' | wc -l)
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
if [ -n "$bad" ]; then echo "symbols.sh: non-speckv symbols exported:"; echo "$bad"; exit 1; fi
if [ "$n" -lt 20 ]; then echo "symbols.sh: only $n speckv_ symbols exported (expected the whole API)"; exit 1; fi
case "$soname" in libspeckv.so.0) ;; *) echo "symbols.sh: SONAME is '$soname', expected libspeckv.so.0"; exit 1;; esac
echo "symbols.sh: $n speckv_* symbols, nothing else; SONAME $soname"
