#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The C example in README.md must compile against the public header and run.
set -eu
readme=$1 include=$2 libdir=$3 work=$4
mkdir -p "$work/xdg"
awk '/^```c$/ {on=1; next} /^```$/ {if (on) exit} on' "$readme" >"$work/readme_example.c"
[ -s "$work/readme_example.c" ] || { echo "no C example found in README.md"; exit 1; }
cc -std=c99 -Wall -Werror -I"$include" "$work/readme_example.c" -o "$work/readme_example" -L"$libdir" -lspeckv
XDG_RUNTIME_DIR=$work/xdg LD_LIBRARY_PATH=$libdir "$work/readme_example"
echo "README C example: compiled and ran"
