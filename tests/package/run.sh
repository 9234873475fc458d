#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Builds the Debian packages with `cpack -G DEB` from the build tree into a
# scratch folder and checks them without installing anything system-wide:
# names, versions, Depends (dpkg-shlibdeps), the shlibs file and ldconfig, the
# file split (library / -dev / tools, no file in two packages), stripped
# binaries; then unpacks all three into a scratch root and builds the C
# consumer against it with pkg-config and find_package, and runs the CLI.
#   run.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) work=$3
for t in cpack dpkg-deb dpkg-shlibdeps dpkg; do
    command -v "$t" >/dev/null || { echo "SKIP: $t not found (tools/install-deps.sh: dpkg-dev)"; exit 77; }
done
fail() { echo "package: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
arch=$(dpkg --print-architecture)
(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/out" >cpack.log 2>&1) ||
    { cat "$work/cpack.log"; fail "cpack -G DEB failed"; }
lib=$work/out/libspeckv0_${version}_$arch.deb
dev=$work/out/libspeckv-dev_${version}_$arch.deb
tools=$work/out/speckv_${version}_$arch.deb
for d in "$lib" "$dev" "$tools"; do [ -s "$d" ] || { ls "$work/out"; fail "missing $(basename "$d")"; }; done
[ "$(ls "$work/out"/*.deb | wc -l)" = 3 ] || { ls "$work/out"; fail "expected exactly 3 packages"; }

field() { dpkg-deb -f "$1" "$2"; }
for d in "$lib" "$dev" "$tools"; do
    [ "$(field "$d" Version)" = "$version" ] || fail "$(basename "$d"): Version $(field "$d" Version)"
    [ "$(field "$d" Architecture)" = "$arch" ] || fail "$(basename "$d"): Architecture"
    [ -n "$(field "$d" Description)" ] && [ -n "$(field "$d" Maintainer)" ] || fail "$(basename "$d"): no Description/Maintainer"
done
[ "$(field "$lib" Package)" = libspeckv0 ] && [ "$(field "$dev" Package)" = libspeckv-dev ] &&
    [ "$(field "$tools" Package)" = speckv ] || fail "package names"
[ "$(field "$lib" Section)" = libs ] && [ "$(field "$dev" Section)" = libdevel ] || fail "sections"

# Depends: the library's and the CLI's from dpkg-shlibdeps (the Debian 12
# runtime packages of liburing, libnuma, libdaxctl, libstdc++); -dev needs
# exactly this libspeckv0 and the -dev packages the static library names.
deps_has() {  # PACKAGE.deb NAME...
    local deps; deps=$(field "$1" Depends)
    shift
    for n in "$@"; do
        tr ',|' '\n\n' <<<"$deps" | sed 's/^ *//; s/ .*//' | grep -qxF "$n" || fail "Depends lacks $n: $deps"
    done
}
deps_has "$lib" libc6 libstdc++6 libgcc-s1 liburing2 libnuma1 libdaxctl1 libssl3 libhiredis0.14
deps_has "$tools" libc6 libstdc++6 liburing2 libnuma1 libdaxctl1 libssl3
deps_has "$dev" libtomlplusplus-dev liburing-dev libnuma-dev libdaxctl-dev libssl-dev
field "$dev" Depends | grep -q "libspeckv0 (= $version)" || fail "-dev does not depend on libspeckv0 (= $version)"
if field "$tools" Depends | grep -q libspeckv; then fail "the CLI links the library statically, yet depends on it"; fi
echo "package: Depends libspeckv0: $(field "$lib" Depends)"
echo "package: Depends speckv: $(field "$tools" Depends)"
# The runtime library tells dpkg-shlibdeps of its users what to depend on,
# and runs ldconfig when installed.
dpkg-deb -I "$lib" shlibs | grep -q "^libspeckv 0 libspeckv0 (>= $version)" ||
    { dpkg-deb -I "$lib" shlibs || true; fail "libspeckv0 has no shlibs line"; }
dpkg-deb -I "$lib" postinst | grep -q ldconfig || fail "libspeckv0 does not run ldconfig"

# Contents: each file in the package it belongs to, none in two.
files() { dpkg-deb -c "$1" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\./||' | sort; }
files "$lib" >"$work/lib.txt"; files "$dev" >"$work/dev.txt"; files "$tools" >"$work/tools.txt"
expect() {  # LIST FILE...
    local list=$1; shift
    for f in "$@"; do grep -qx "$f" "$work/$list.txt" || { cat "$work/$list.txt"; fail "$list package lacks $f"; }; done
}
expect lib usr/lib/libspeckv.so.0 "usr/lib/libspeckv.so.$version" usr/share/doc/speckv/LICENSE usr/share/doc/speckv/NOTICE
expect dev usr/include/speckv.h usr/lib/libspeckv.so usr/lib/libspeckv.a usr/lib/pkgconfig/speckv.pc \
    usr/lib/cmake/speckv/speckvConfig.cmake usr/lib/cmake/speckv/speckvConfigVersion.cmake \
    usr/lib/cmake/speckv/speckvTargets.cmake usr/share/man/man3/speckv.3
expect tools usr/bin/speckv usr/share/man/man1/speckv.1 usr/share/bash-completion/completions/speckv
[ "$(wc -l <"$work/lib.txt")" = 4 ] || { cat "$work/lib.txt"; fail "libspeckv0 carries more than the library and its licence"; }
dups=$(sort "$work/lib.txt" "$work/dev.txt" "$work/tools.txt" | uniq -d)
[ -z "$dups" ] || fail "files in two packages: $dups"

# Unpack all three into a scratch root, as dpkg would under /.
root=$work/root
for d in "$lib" "$dev" "$tools"; do dpkg-deb -x "$d" "$root"; done
for f in "usr/lib/libspeckv.so.$version" usr/bin/speckv usr/lib/libspeckv.a; do
    if readelf -S --wide "$root/$f" | grep -q '\.debug_info'; then fail "$f carries debug info"; fi
done
if grep -rq speckv_cli "$root/usr/lib/cmake/speckv"; then fail "the CMake package exports the CLI"; fi
"$root/usr/bin/speckv" --version | grep -q "$version" || fail "speckv --version"
MANPATH=$root/usr/share/man man -w speckv | grep -qx "$root/usr/share/man/man1/speckv.1" || fail "man -w speckv"
# The C consumer of tests/install against the unpacked -dev and library.
export PKG_CONFIG_PATH=$root/usr/lib/pkgconfig
[ "$(pkg-config --variable=prefix speckv)" = "$root/usr/lib/pkgconfig/../.." ] ||
    [ "$(readlink -f "$(pkg-config --variable=prefix speckv)")" = "$(readlink -f "$root/usr")" ] || fail "pkg-config prefix"
cc -std=c99 -Wall -Werror $(pkg-config --cflags speckv) "$src/tests/install/consumer.c" -o "$work/consumer" \
    $(pkg-config --libs speckv)
LD_LIBRARY_PATH=$root/usr/lib "$work/consumer"
cmake -S "$src/tests/install" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$root/usr" >"$work/cmake.log" 2>&1 &&
    cmake --build "$work/cmake-build" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "find_package consumer"; }
env -u LD_LIBRARY_PATH "$work/cmake-build/consumer"
"$work/cmake-build/consumer_static"
echo "package: $(basename "$lib") $(stat -c %s "$lib") B, $(basename "$dev") $(stat -c %s "$dev") B," \
     "$(basename "$tools") $(stat -c %s "$tools") B: contents, Depends, shlibs and consumers ok"
