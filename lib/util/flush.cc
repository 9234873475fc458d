// SPDX-License-Identifier: Apache-2.0
#include "util/flush.h"

#include <atomic>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define SPECKV_X86 1
#endif

namespace speckv {

namespace {
constexpr uintptr_t kLine = 64;

#ifdef SPECKV_X86
enum Insn { kClflush, kClflushopt, kClwb };

Insn detect() {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return kClflush;
    if (b & (1u << 24)) return kClwb;
    if (b & (1u << 23)) return kClflushopt;
    return kClflush;
}

const Insn g_insn = detect();
const bool g_has_clflushopt = [] {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 23));
}();

__attribute__((target("clwb"))) void wb_clwb(uintptr_t a, uintptr_t end) {
    for (; a < end; a += kLine) _mm_clwb(reinterpret_cast<void *>(a));
}
__attribute__((target("clflushopt"))) void wb_clflushopt(uintptr_t a, uintptr_t end) {
    for (; a < end; a += kLine) _mm_clflushopt(reinterpret_cast<void *>(a));
}
void wb_clflush(uintptr_t a, uintptr_t end) {
    for (; a < end; a += kLine) _mm_clflush(reinterpret_cast<const void *>(a));
}
#endif
}  // namespace

void writeback_range(const void *p, size_t n) {
#ifdef SPECKV_X86
    uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~(kLine - 1), end = reinterpret_cast<uintptr_t>(p) + n;
    if (n) {
        switch (g_insn) {
            case kClwb: wb_clwb(a, end); break;
            case kClflushopt: wb_clflushopt(a, end); break;
            case kClflush: wb_clflush(a, end); break;
        }
    }
    _mm_sfence();
#else
    (void)p, (void)n;
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

void invalidate_range(const void *p, size_t n) {
#ifdef SPECKV_X86
    uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~(kLine - 1), end = reinterpret_cast<uintptr_t>(p) + n;
    if (n) {
        if (g_has_clflushopt) wb_clflushopt(a, end);  // not CLWB: it may keep the line cached
        else wb_clflush(a, end);
    }
    _mm_mfence();
#else
    (void)p, (void)n;
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

const char *writeback_insn() {
#ifdef SPECKV_X86
    return g_insn == kClwb ? "clwb" : g_insn == kClflushopt ? "clflushopt" : "clflush";
#else
    return "none";
#endif
}

}  // namespace speckv
