#!/bin/bash
# Installs the build tree into a scratch prefix, then builds and runs a tiny C
# consumer against the *installed* package twice: via pkg-config and via
# CMake's find_package(speckv).
set -eu
build=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in include/speckv.h lib/libspeckv.so.0 lib/libspeckv.a bin/speckv lib/pkgconfig/speckv.pc \
         lib/cmake/speckv/speckvConfig.cmake lib/cmake/speckv/speckvConfigVersion.cmake; do
    [ -e "$prefix/$f" ] || { echo "install: missing $f"; exit 1; }
done
# Nothing but the public header is installed.
[ "$(ls "$prefix/include")" = "speckv.h" ] || { echo "install: unexpected headers"; ls "$prefix/include"; exit 1; }

# 1. pkg-config, shared
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -std=c99 -Wall -Werror $(pkg-config --cflags speckv) "$src/consumer.c" -o "$work/consumer_pc" $(pkg-config --libs speckv)
LD_LIBRARY_PATH=$prefix/lib "$work/consumer_pc"
# 1b. pkg-config, static
cc -std=c99 $(pkg-config --cflags speckv) "$src/consumer.c" -o "$work/consumer_static" \
   "$prefix/lib/libspeckv.a" $(pkg-config --libs-only-l --static speckv | sed 's/-lspeckv//')
"$work/consumer_static"

# 2. find_package
cmake -S "$src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log"
cmake --build "$work/cmake-build" >>"$work/cmake.log"
LD_LIBRARY_PATH=$prefix/lib "$work/cmake-build/consumer"
echo "install: pkg-config (shared, static) and find_package consumers built and ran"
