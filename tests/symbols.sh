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
# The library has an initial-exec TLS variable (lib/util/status.h), so its whole
# TLS block must fit the static TLS that glibc keeps free for dlopen (python,
# Rust and Go load the library at run time): at 1,682 bytes python's dlopen failed
# with "cannot allocate memory in static TLS block". Big per-thread scratch
# lives behind a pointer (1,080 bytes loads); keep the block at most 1,152.
tls=$(readelf -lW "$lib" | awk '$1 == "TLS" {print $6}')
tls=$((${tls:-0}))
if [ "$tls" -gt 1152 ]; then
    echo "symbols.sh: the TLS block is $tls bytes (over 1152): move per-thread scratch behind a pointer"; exit 1
fi
echo "symbols.sh: $n speckv_* symbols, nothing else; SONAME $soname; TLS block $tls bytes"
