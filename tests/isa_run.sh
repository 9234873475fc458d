#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Runs a test with the library's dispatch capped at one instruction-set level (lib/util/cpu.h,
# SPECKV_ISA), or reports it skipped (exit 77) when this CPU cannot run that level:
#   isa_run.sh avx512|avx2|baseline COMMAND [ARGS...]
# avx512: the native dispatch, on a CPU with AVX-512 F/BW/VL (the codec's AVX-512 table's need);
# avx2: SPECKV_ISA=avx2, on a CPU with AVX2, F16C and FMA; baseline: SPECKV_ISA=baseline, anywhere.
# tests/CMakeLists.txt (speckv_kernel_test) registers each kernel test once per level, so an
# AVX-512 machine also proves the AVX2 and scalar paths, and an AVX2-only machine lists the
# AVX-512 runs as skipped instead of passing them empty.
set -u
level=$1
shift
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
case $(uname -m) in x86_64|amd64) ;; *)
  [ "$level" = baseline ] || { echo "SKIP: not x86-64: no $level kernels on this CPU"; exit 77; } ;;
esac
case $level in
  avx512)
    has avx512f avx512bw avx512vl || { echo "SKIP: this CPU has no AVX-512 F/BW/VL: the AVX-512 kernels were not tested here"; exit 77; }
    export SPECKV_ISA=native ;;
  avx2)
    has avx2 f16c fma || { echo "SKIP: this CPU has no AVX2/F16C/FMA: the AVX2 kernels were not tested here"; exit 77; }
    export SPECKV_ISA=avx2 ;;
  baseline) export SPECKV_ISA=baseline ;;
  *) echo "isa_run.sh: unknown level '$level' (avx512, avx2, baseline)" >&2; exit 2 ;;
esac
echo "isa_run.sh: SPECKV_ISA=$SPECKV_ISA"
exec "$@"
