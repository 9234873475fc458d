// SPDX-License-Identifier: Apache-2.0
// How an ISA-specific file is compiled: the rule (README "CPUs and instruction sets").
//
// Every file of the library is compiled for the x86-64 baseline: no -m flag
// that widens the instruction set is given to any translation unit. A file of
// kernels for a wider ISA (codec_avx2.cc, nmp_avx512.cc, ...) includes every
// header it needs FIRST, then opens a target region:
//
//     #include <vector>            // all includes above the region
//     #include "util/isa_target.h"
//     SPECKV_TARGET_BEGIN("avx2,f16c")
//     ... kernels, in an anonymous namespace ...
//     SPECKV_TARGET_END
//     ... the table and the probe (cpu::has), baseline code ...
//
// Why: inline functions and templates from headers (std::vector's
// _M_default_append, std::min, the project's own inline helpers) are emitted
// in every object that uses them as weak (COMDAT) copies, and the linker keeps
// ONE copy for the whole library. If a file were compiled with -mavx512bw, its
// copy could be the one kept, and the scalar code of every other file would
// then execute AVX-512 instructions on CPUs without them (SIGILL). Functions
// defined inside the region get the wider target; templates and inline
// functions declared in headers above it keep the baseline wherever they are
// instantiated, so every weak copy is safe. The probe and the table after the
// region are baseline code too, so nothing runs before the CPU check.
// tools/check-isa.sh verifies the built library: no function outside the
// ISA-specific files contains an instruction beyond the baseline.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SPECKV_X86_SIMD 1
#define SPECKV_ISA_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define SPECKV_TARGET_BEGIN(isa) SPECKV_ISA_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define SPECKV_TARGET_END SPECKV_ISA_PRAGMA(clang attribute pop)
#else
#define SPECKV_TARGET_BEGIN(isa) SPECKV_ISA_PRAGMA(GCC push_options) SPECKV_ISA_PRAGMA(GCC target(isa))
#define SPECKV_TARGET_END SPECKV_ISA_PRAGMA(GCC pop_options)
#endif
#else
#define SPECKV_X86_SIMD 0
#endif
