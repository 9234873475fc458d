#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Installs the build tree into a scratch prefix, then builds and runs a tiny C
# consumer against the *installed* package: via pkg-config (shared, with an
# rpath instead of LD_LIBRARY_PATH, and static) and via CMake's
# find_package(speckv) from a C-only project (shared and static). A release
# build installs stripped (SPECKV_INSTALL_STRIP).
set -eu
build=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in include/speckv.h lib/libspeckv.so.0 lib/libspeckv.a bin/speckv lib/pkgconfig/speckv.pc \
         lib/cmake/speckv/speckvConfig.cmake lib/cmake/speckv/speckvConfigVersion.cmake \
         share/doc/speckv/LICENSE share/doc/speckv/NOTICE; do
    [ -e "$prefix/$f" ] || { echo "install: missing $f"; exit 1; }
done
# Man pages and bash completion where man(1) and bash-completion look.
for f in share/man/man1/speckv.1 share/man/man3/speckv.3 share/bash-completion/completions/speckv; do
    [ -s "$prefix/$f" ] || { echo "install: missing $f"; exit 1; }
done
MANPATH=$prefix/share/man man -w speckv | grep -qx "$prefix/share/man/man1/speckv.1" ||
    { echo "install: man speckv does not find the installed page"; exit 1; }
MANPATH=$prefix/share/man MANWIDTH=80 man -P cat 3 speckv 2>&1 | grep -q 'speckv_pool_open' ||
    { echo "install: man 3 speckv does not show the C API"; exit 1; }
bash --norc --noprofile -c '. "$1" && complete -p speckv' _ "$prefix/share/bash-completion/completions/speckv" \
    >/dev/null || { echo "install: the bash completion does not load"; exit 1; }
# Nothing but the public header is installed.
[ "$(ls "$prefix/include")" = "speckv.h" ] || { echo "install: unexpected headers"; ls "$prefix/include"; exit 1; }

# Stripped when the build says so (release presets), with the debug info left
# in the build tree.
if grep -q '^SPECKV_INSTALL_STRIP:BOOL=ON' "$build/CMakeCache.txt"; then
    for f in lib/libspeckv.so.0 bin/speckv; do
        if readelf -S --wide "$prefix/$f" | grep -q '\.debug_info'; then
            echo "install: $f still carries debug info (SPECKV_INSTALL_STRIP is ON)"; exit 1
        fi
    done
    echo "install: stripped, libspeckv.so.0 $(stat -L -c %s "$prefix/lib/libspeckv.so.0") bytes" \
         "(build tree: $(stat -L -c %s "$build/lib/libspeckv.so.0") bytes)"
fi

# 1. pkg-config, shared
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -std=c99 -Wall -Werror $(pkg-config --cflags speckv) "$src/consumer.c" -o "$work/consumer_pc" $(pkg-config --libs speckv)
LD_LIBRARY_PATH=$prefix/lib "$work/consumer_pc"
# 1a. the same with an rpath (README "Install"): runs without LD_LIBRARY_PATH
cc -std=c99 -Wall -Werror $(pkg-config --cflags speckv) "$src/consumer.c" -o "$work/consumer_rpath" \
   $(pkg-config --libs speckv) -Wl,-rpath,"$(pkg-config --variable=libdir speckv)"
env -u LD_LIBRARY_PATH "$work/consumer_rpath"
# 1b. pkg-config, static
cc -std=c99 $(pkg-config --cflags speckv) "$src/consumer.c" -o "$work/consumer_static" \
   "$prefix/lib/libspeckv.a" $(pkg-config --libs-only-l --static speckv | sed 's/-lspeckv//')
"$work/consumer_static"

# 2. find_package from a C-only project: CMake's build rpath finds the shared
# library (no LD_LIBRARY_PATH), and the static one links with the C driver.
cmake -S "$src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log"
cmake --build "$work/cmake-build" >>"$work/cmake.log" || { cat "$work/cmake.log"; exit 1; }
env -u LD_LIBRARY_PATH "$work/cmake-build/consumer"
"$work/cmake-build/consumer_static"
echo "install: pkg-config (shared, rpath, static) and find_package (shared, static, C only) consumers built and ran"
