// SPDX-License-Identifier: Apache-2.0
// The CPU features speckv dispatches on, probed once, and the cap that the
// environment variable SPECKV_ISA puts on them for the whole library.
//
// Every runtime ISA check in lib/ goes through cpu::has(): the codec, the
// split-Rice and Rice stages, the selection kernels and CRC32C. So
//   SPECKV_ISA=baseline   x86-64 baseline only (SSE2): every kernel's scalar path
//   SPECKV_ISA=avx2       AVX2-class CPU: no AVX-512 (and no AVX-512-only paths)
//   SPECKV_ISA=native     (or unset) whatever the CPU has
// lets an AVX-512 machine run the suite the way an AVX2-only or a pre-AVX2
// machine would (tests/CMakeLists.txt does, for the tests that reach kernels).
// A cap can only take features away: it never enables what the CPU lacks.
#pragma once
#include <cstdint>

namespace speckv::cpu {

enum Feature : uint32_t {
    kSse42 = 1u << 0,
    kPclmul = 1u << 1,
    kPopcnt = 1u << 2,
    kLzcnt = 1u << 3,
    kBmi = 1u << 4,
    kBmi2 = 1u << 5,
    kAvx2 = 1u << 6,
    kF16c = 1u << 7,
    kFma = 1u << 8,
    kVpclmulqdq = 1u << 9,
    kAvx512f = 1u << 10,
    kAvx512bw = 1u << 11,
    kAvx512vl = 1u << 12,
    kAvx512vbmi = 1u << 13,
    kAvx512vbmi2 = 1u << 14,
    kAvx512fp16 = 1u << 15,
};

// The features present after the cap (a bit set of Feature).
uint32_t features();

// True when every feature in `mask` is present after the cap.
inline bool has(uint32_t mask) { return (features() & mask) == mask; }

// True on an AMD CPU (some kernels are chosen per vendor; see codec.md §14.5).
bool is_amd();

// The cap in force: "native", "avx2" or "baseline".
const char *cap_name();

}  // namespace speckv::cpu
