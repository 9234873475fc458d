// SPDX-License-Identifier: Apache-2.0
// CPU feature probe and the SPECKV_ISA cap (cpu.h). Compiled for the x86-64
// baseline like every file outside the ISA-specific kernels.
#include "util/cpu.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define SPECKV_CPU_X86 1
#endif

namespace speckv::cpu {
namespace {

constexpr uint32_t kAvx512All = kAvx512f | kAvx512bw | kAvx512vl | kAvx512vbmi | kAvx512vbmi2 | kAvx512fp16;

uint32_t probe() {
    uint32_t f = 0;
#if defined(SPECKV_CPU_X86)
    __builtin_cpu_init();
    // __builtin_cpu_supports also checks that the OS saves the vector state
    // (XCR0) for AVX and AVX-512; the bits read from CPUID directly below are
    // only taken together with one of those.
    auto on = [&f](bool b, uint32_t bit) { f |= b ? bit : 0; };
    on(__builtin_cpu_supports("sse4.2"), kSse42);
    on(__builtin_cpu_supports("pclmul"), kPclmul);
    on(__builtin_cpu_supports("popcnt"), kPopcnt);
    on(__builtin_cpu_supports("bmi"), kBmi);
    on(__builtin_cpu_supports("bmi2"), kBmi2);
    on(__builtin_cpu_supports("avx2"), kAvx2);
    on(__builtin_cpu_supports("fma"), kFma);
    on(__builtin_cpu_supports("vpclmulqdq"), kVpclmulqdq);
    on(__builtin_cpu_supports("avx512f"), kAvx512f);
    on(__builtin_cpu_supports("avx512bw"), kAvx512bw);
    on(__builtin_cpu_supports("avx512vl"), kAvx512vl);
    on(__builtin_cpu_supports("avx512vbmi"), kAvx512vbmi);
    on(__builtin_cpu_supports("avx512vbmi2"), kAvx512vbmi2);
    unsigned a, b, c, d;
    // F16C: CPUID.1:ECX bit 29 (not every compiler's __builtin_cpu_supports knows it).
    if (__get_cpuid(1, &a, &b, &c, &d) && ((c >> 29) & 1u) && (f & kAvx2)) f |= kF16c;
    // AVX512_FP16: CPUID.(7,0):EDX bit 23.
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 23) & 1u) && (f & kAvx512bw)) f |= kAvx512fp16;
    // LZCNT (ABM): CPUID.80000001h:ECX bit 5.
    if (__get_cpuid(0x80000001u, &a, &b, &c, &d) && ((c >> 5) & 1u)) f |= kLzcnt;
    if (!(f & kAvx512f)) f &= ~kAvx512All;  // the extensions mean nothing without the base
#endif
    return f;
}

struct State {
    uint32_t features;
    const char *cap;
};

State init() {
    const uint32_t f = probe();
    const char *env = std::getenv("SPECKV_ISA");
    if (!env || !*env || std::strcmp(env, "native") == 0) return {f, "native"};
    if (std::strcmp(env, "avx2") == 0) return {f & ~kAvx512All, "avx2"};
    if (std::strcmp(env, "baseline") == 0 || std::strcmp(env, "scalar") == 0) return {0, "baseline"};
    // A misspelt cap must not silently run the widest kernels the user meant to
    // avoid: take the safest reading and say so once.
    std::fprintf(stderr, "speckv: SPECKV_ISA='%s' is not native, avx2 or baseline; using baseline\n", env);
    return {0, "baseline"};
}

const State &state() {
    static const State s = init();
    return s;
}

}  // namespace

uint32_t features() { return state().features; }

const char *cap_name() { return state().cap; }

bool is_amd() {
#if defined(SPECKV_CPU_X86)
    __builtin_cpu_init();
    return __builtin_cpu_is("amd");
#else
    return false;
#endif
}

}  // namespace speckv::cpu
