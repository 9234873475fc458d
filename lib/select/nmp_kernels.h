// SPDX-License-Identifier: Apache-2.0
// Scoring kernels of the near-memory selector (lib/select/nmp.cc: scalar reference,
// lib/select/nmp_avx2.cc: AVX2 + F16C, lib/select/nmp_avx512.cc: AVX-512). Every kernel
// follows the summation order of docs/selection.md §2.3, so all return
// identical floats.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace speckv::nmp {

// The query in the forms the kernels read, built once per score_pages call.
//   q:     q_heads * head_dim floats, head-major (a copy of the caller's).
//   neg:   per head, words() 16-bit sign masks: bit l of neg[h * words() + i]
//          = signbit(q[h * head_dim + 16 i + l]) (the AVX-512 blend masks).
struct QueryForm {
    uint32_t q_heads = 0, head_dim = 0;
    std::vector<float> q;
    std::vector<uint16_t> neg;
    QueryForm(const float *q, uint32_t q_heads, uint32_t head_dim);
    uint32_t words() const { return (head_dim + 15) / 16; }
};

// A kernel writes the raw bound sums of `n` pages for every query head,
//   out[p * q_heads + h] = Σ_c q_h[c] * (signbit(q_h[c]) ? min_p[c] : max_p[c])
// over the channels of h's KV head, and for every page and KV head group
//   gmax[p * kv_heads + g] = group_max(out + p * q_heads + g * q_per_kv, q_per_kv).
// Per (page, head): 16 lanes (lane = c mod 16), channels in order within a
// lane, per channel one
//   a = fma(q[c], signbit(q[c]) ? min[c] : max[c], a)
// then v_l = a_l + a_{l+8}, then ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7))
// (docs/selection.md §2.3): one ZMM accumulator, or two YMM ones taking
// alternate 8-channel chunks.
// `payload[p]` points to page p's FP16 minima (channels) then maxima (channels).
// `ahead[0..n_ahead)` are summaries (whole, `summary_bytes` each) the caller
// will score next: a kernel may prefetch them into cache while it works, so
// that the memory reads overlap the arithmetic. Hints only; may be NULL/0.
struct KernelArgs {
    uint32_t kv_heads = 0, head_dim = 0, q_per_kv = 0;
    const QueryForm *query = nullptr;
    const uint16_t *const *payload = nullptr;
    size_t n = 0;
    float *out = nullptr;   // n * q_heads
    float *gmax = nullptr;  // n * kv_heads
    const uint8_t *const *ahead = nullptr;
    size_t n_ahead = 0;
    size_t summary_bytes = 0;
};
using ScorePagesFn = void (*)(const KernelArgs &a);

// The largest of r[0..n) that is not NaN (-inf if none), a zero as +0. Both
// rules make it independent of the order the values are compared in, so a
// SIMD tree gives the same float as this loop.
inline float group_max(const float *r, uint32_t n) {
    float b = -std::numeric_limits<float>::infinity();
    for (uint32_t j = 0; j < n; j++)
        if (r[j] > b) b = r[j];
    return b + 0.0f;
}

// Prefetches the summaries a kernel's caller scores next (KernelArgs::ahead)
// into L2 while the kernel computes: tick() once per step of the kernel's
// inner loop issues `lines / ticks` cache lines on average (16.16 fixed
// point). Spread out like this the requests overlap the arithmetic; issued
// in bursts they wait for fill buffers and stall the loop.
class Ahead {
public:
    Ahead(const KernelArgs &a, size_t ticks) : ptr_(a.ahead), n_(a.ahead ? a.n_ahead : 0), bytes_(a.summary_bytes) {
        const size_t lines = n_ * ((bytes_ + 63) / 64 + 1);
        const size_t rate = ticks ? (lines << 16) / ticks + 1 : 0;
        rate_ = uint32_t(rate < (size_t(1) << 24) ? rate : (size_t(1) << 24));
    }
    [[gnu::always_inline]] void tick() {
        acc_ += rate_;
        while (acc_ >= 0x10000) {
            acc_ -= 0x10000;
            if (cur_ >= end_ && !next()) {
                rate_ = 0;
                return;
            }
            __builtin_prefetch(reinterpret_cast<const void *>(cur_), 0, 2);  // prefetcht1: to L2
            cur_ += 64;
        }
    }

private:
    bool next() {
        while (s_ < n_ && !ptr_[s_]) s_++;
        if (s_ == n_) return false;
        const uintptr_t b = reinterpret_cast<uintptr_t>(ptr_[s_++]);
        cur_ = b & ~uintptr_t(63);
        end_ = b + bytes_;
        return true;
    }
    const uint8_t *const *ptr_;
    size_t n_, bytes_, s_ = 0;
    uintptr_t cur_ = 0, end_ = 0;
    uint32_t acc_ = 0, rate_ = 0;
};

// The reference: plain C++, std::fma, any head_dim.
void score_pages_scalar(const KernelArgs &a);

// The AVX2 kernel, or nullptr when this CPU (or this build) lacks AVX2+F16C+FMA.
// Handles head_dim % 8 == 0; the caller uses the scalar kernel otherwise.
ScorePagesFn avx2_score_pages();

// The AVX-512 kernel (AVX512F + F16C), or nullptr. Handles head_dim % 16 == 0.
ScorePagesFn avx512_score_pages();

}  // namespace speckv::nmp
