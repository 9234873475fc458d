#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# data_run.sh DEFAULT_DATA_DIR COMMAND [ARG]...
# Runs COMMAND with every "@DATA@" in its arguments replaced by the project's
# data directory: $SPECKV_DATA_DIR when set and not empty, else
# DEFAULT_DATA_DIR (CMake's SPECKV_DATA_DIR, <source tree>/data). Tests that
# take a model or trace path on their command line run through this, so
# SPECKV_DATA_DIR overrides their data at test time like everyone else's.
set -u
[ $# -ge 2 ] || { echo "usage: data_run.sh DEFAULT_DATA_DIR COMMAND [ARG]..." >&2; exit 2; }
dir=${SPECKV_DATA_DIR:-$1}
shift
if [ ! -d "$dir" ]; then
    echo "data_run.sh: data directory $dir not found (the repository's data/, or SPECKV_DATA_DIR=DIR)" >&2
    exit 1
fi
export SPECKV_DATA_DIR=$dir
args=()
for a in "$@"; do args+=("${a//@DATA@/$dir}"); done
exec "${args[@]}"
