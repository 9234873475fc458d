// SPDX-License-Identifier: Apache-2.0
// AVX-512 (F + F16C + FMA) scoring kernel of the near-memory selector.
// In an "avx512f,f16c,fma" target region (isa_target.h), -ffp-contract=off (lib/select/CMakeLists.txt);
// reached only after the runtime check in avx512_score_pages(). One ZMM
// accumulator holds the 16 lanes of the order in docs/selection.md §2.3, so
// it equals score_pages_scalar() and the AVX2 kernel bit for bit.
//
// Cost model (why it looks like this, measured in docs/selection.md §6.2): at
// 4-8 query heads per KV head the scoring is bound by the vector ports, not
// by memory. Per head and 16 channels it issues one blend (min or max by the
// query's sign, a k-mask loaded from memory) and one FMA; the FP16 -> FP32
// conversion of a summary chunk is shared by up to 8 heads; 16 sums are
// reduced together by a transposed tree (30 shuffles + 15 adds instead of ~8
// ops each) and their group maxima taken in registers; and the summaries of
// the next pages are prefetched into L2 while the arithmetic runs (Ahead).
#include "select/nmp_kernels.h"

#include "util/cpu.h"
#include "util/isa_target.h"

#if SPECKV_X86_SIMD
#include <immintrin.h>

SPECKV_TARGET_BEGIN("avx512f,f16c,fma")

namespace speckv::nmp {
namespace {

// v_l = a_l + a_{l+8}, then ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7)).
inline float reduce(__m512 a) {
    const __m256 v = _mm256_add_ps(_mm512_castps512_ps256(a),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    const __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));
    return _mm_cvtss_f32(_mm_add_ss(u, _mm_shuffle_ps(u, u, 1)));
}

// The same tree for 16 accumulators at once: lane j of the result is
// reduce(a[j]). Each level adds two shuffled vectors, pairing exactly the
// lanes reduce() pairs (distance 8, 4, 2, 1).
inline __m512 reduce16(const __m512 *a) {
    // Levels 3 and 4 leave the sum of input 4i + r in lane 4r + i, so the
    // inputs go in transposed: x[4i + r] = a[4r + i].
    __m512 b[8];
#pragma GCC unroll 8
    for (int m = 0; m < 8; m++) {
        const int i0 = 2 * m, i1 = 2 * m + 1;
        const __m512 x0 = a[4 * (i0 % 4) + i0 / 4], x1 = a[4 * (i1 % 4) + i1 / 4];
        // lanes 0-7: x0 (l) + x0 (l+8); lanes 8-15: the same for x1.
        b[m] = _mm512_add_ps(_mm512_shuffle_f32x4(x0, x1, 0x44), _mm512_shuffle_f32x4(x0, x1, 0xEE));
    }
    __m512 c[4];
#pragma GCC unroll 4
    for (int m = 0; m < 4; m++)  // quarter r: (v_l + v_{l+4}) of input 4m + r
        c[m] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * m], b[2 * m + 1], 0x88),
                             _mm512_shuffle_f32x4(b[2 * m], b[2 * m + 1], 0xDD));
    // quarter r: [t0+t2, t1+t3] of inputs 4*(2m)+r, then of 4*(2m+1)+r.
    const __m512 d0 = _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x44), _mm512_shuffle_ps(c[0], c[1], 0xEE));
    const __m512 d1 = _mm512_add_ps(_mm512_shuffle_ps(c[2], c[3], 0x44), _mm512_shuffle_ps(c[2], c[3], 0xEE));
    // quarter r, element i: (t0+t2) + (t1+t3) of input 4i + r.
    return _mm512_add_ps(_mm512_shuffle_ps(d0, d1, 0x88), _mm512_shuffle_ps(d0, d1, 0xDD));
}

// A mask straight from memory (kmovw k, m16: a load, no vector-port uop;
// compilers otherwise go through a GPR and spend a port-5 kmov).
[[gnu::always_inline]] inline __mmask16 load_mask(const uint16_t *p) {
#if defined(__GNUC__)
    __mmask16 k;
    __asm__("kmovw %1, %0" : "=k"(k) : "m"(*p));
    return k;
#else
    return _cvtu32_mask16(*p);
#endif
}

// group_max() of every run of HB lanes (HB = 2, 4, 8) in all its lanes: NaN
// lanes become -inf, a butterfly of maxima, then + 0 turns -0 into +0.
template <int HB>
inline __m512 run_max(__m512 r) {
    r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q), r, _mm512_set1_ps(-std::numeric_limits<float>::infinity()));
    if constexpr (HB >= 8) r = _mm512_max_ps(r, _mm512_shuffle_f32x4(r, r, 0xB1));  // lanes l, l ^ 4
    if constexpr (HB >= 4) r = _mm512_max_ps(r, _mm512_shuffle_ps(r, r, 0x4E));     // l, l ^ 2
    r = _mm512_max_ps(r, _mm512_shuffle_ps(r, r, 0xB1));                            // l, l ^ 1
    return _mm512_add_ps(r, _mm512_setzero_ps());
}

inline __m512 load_f16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
}

// PB pages x HB query heads of one KV head: each summary chunk is converted
// once for HB heads, each query chunk (and its sign mask) loaded once for PB
// pages, and PB*HB independent FMA chains hide the FMA latency. The
// arithmetic of one (page, head) is the same whatever PB and HB are.
// `q`, `neg`: query and sign masks of the block's first head; `goff`: the KV
// head's first channel; out[p * H + j] for p < PB, j < HB. With `gmax` (a
// block of all HB heads of the group), also gmax[p * G] = group_max() of
// page p's HB sums, from the registers.
template <int PB, int HB>
inline void block(const float *q, const uint16_t *neg, uint32_t D, uint32_t W, const uint16_t *const *pay,
                  size_t goff, uint32_t C, float *out, uint32_t H, Ahead &ahead, float *gmax = nullptr,
                  uint32_t G = 0) {
    __m512 acc[PB * HB];
#pragma GCC unroll 16
    for (int x = 0; x < PB * HB; x++) acc[x] = _mm512_setzero_ps();
    for (uint32_t i = 0, w = 0; i < D; i += 16, w++) {
        ahead.tick();
        __m512 lo[PB], hi[PB];
#pragma GCC unroll 8
        for (int p = 0; p < PB; p++) {
            lo[p] = load_f16(pay[p] + goff + i);
            hi[p] = load_f16(pay[p] + C + goff + i);
        }
#pragma GCC unroll 8
        for (int j = 0; j < HB; j++) {
            const __m512 qv = _mm512_loadu_ps(q + size_t(j) * D + i);
            const __mmask16 k = load_mask(neg + size_t(j) * W + w);
#pragma GCC unroll 8
            for (int p = 0; p < PB; p++)
                acc[p * HB + j] = _mm512_fmadd_ps(qv, _mm512_mask_blend_ps(k, hi[p], lo[p]), acc[p * HB + j]);
        }
    }
    if constexpr (PB * HB == 16) {
        alignas(64) float r[16];
        const __m512 sums = reduce16(acc);
        _mm512_store_ps(r, sums);
#pragma GCC unroll 8
        for (int p = 0; p < PB; p++)
#pragma GCC unroll 8
            for (int j = 0; j < HB; j++) out[size_t(p) * H + j] = r[p * HB + j];
        if constexpr (HB == 2 || HB == 4 || HB == 8) {
            if (gmax) {  // the block holds every head of its group
                _mm512_store_ps(r, run_max<HB>(sums));
#pragma GCC unroll 8
                for (int p = 0; p < PB; p++) gmax[size_t(p) * G] = r[p * HB];
            }
        }
    } else {
#pragma GCC unroll 8
        for (int p = 0; p < PB; p++)
#pragma GCC unroll 8
            for (int j = 0; j < HB; j++) out[size_t(p) * H + j] = reduce(acc[p * HB + j]);
    }
}

// All heads of KV head g for 4 pages (PB = 4) or 1 page (PB = 1): blocks of
// 8 heads (2 pages at a time), then of 4, then the rest.
template <int PB>
inline void group(const QueryForm &qf, uint32_t qpk, const uint16_t *const *pay, uint32_t g, uint32_t C, float *out,
                  uint32_t H, Ahead &ahead, float *gmax, uint32_t G) {
    const uint32_t D = qf.head_dim, W = qf.words();
    const size_t goff = size_t(g) * D;
    auto qat = [&](uint32_t j) { return qf.q.data() + (size_t(g) * qpk + j) * D; };
    auto nat = [&](uint32_t j) { return qf.neg.data() + (size_t(g) * qpk + j) * W; };
    float *o = out + size_t(g) * qpk;
    if constexpr (PB == 4) {  // one block of 16 sums holds the group: its maxima from the registers
        if (qpk == 8) {
            block<2, 8>(qat(0), nat(0), D, W, pay, goff, C, o, H, ahead, gmax + g, G);
            block<2, 8>(qat(0), nat(0), D, W, pay + 2, goff, C, o + 2 * size_t(H), H, ahead,
                        gmax + 2 * size_t(G) + g, G);
            return;
        }
        if (qpk == 4) {
            block<4, 4>(qat(0), nat(0), D, W, pay, goff, C, o, H, ahead, gmax + g, G);
            return;
        }
    }
    uint32_t j = 0;
    for (; j + 8 <= qpk; j += 8) {
        if constexpr (PB == 4) {
            block<2, 8>(qat(j), nat(j), D, W, pay, goff, C, o + j, H, ahead);
            block<2, 8>(qat(j), nat(j), D, W, pay + 2, goff, C, o + 2 * size_t(H) + j, H, ahead);
        } else {
            block<1, 8>(qat(j), nat(j), D, W, pay, goff, C, o + j, H, ahead);
        }
    }
    if (j + 4 <= qpk) {
        block<PB, 4>(qat(j), nat(j), D, W, pay, goff, C, o + j, H, ahead);
        j += 4;
    }
    switch (qpk - j) {
        case 3: block<PB, 3>(qat(j), nat(j), D, W, pay, goff, C, o + j, H, ahead); break;
        case 2: block<PB, 2>(qat(j), nat(j), D, W, pay, goff, C, o + j, H, ahead); break;
        case 1: block<PB, 1>(qat(j), nat(j), D, W, pay, goff, C, o + j, H, ahead); break;
        default: break;
    }
    for (int p = 0; p < PB; p++) gmax[size_t(p) * G + g] = group_max(o + size_t(p) * H, qpk);
}

// Blocks group<PB>() runs per KV head: its 16-channel steps are D/16 each.
constexpr size_t blocks(uint32_t qpk, int pb) {
    return (pb == 4 ? 2 : 1) * (qpk / 8) + (qpk % 8 >= 4) + (qpk % 4 != 0);
}

void score_pages_avx512(const KernelArgs &a) {
    const uint32_t D = a.head_dim, C = a.kv_heads * D, H = a.kv_heads * a.q_per_kv;
    const size_t ticks =
        (a.n / 4 * blocks(a.q_per_kv, 4) + a.n % 4 * blocks(a.q_per_kv, 1)) * a.kv_heads * (D / 16);
    Ahead ahead(a, ticks);
    size_t p = 0;
    for (; p + 4 <= a.n; p += 4)
        for (uint32_t g = 0; g < a.kv_heads; g++)
            group<4>(*a.query, a.q_per_kv, a.payload + p, g, C, a.out + p * H, H, ahead, a.gmax + p * a.kv_heads,
                     a.kv_heads);
    for (; p < a.n; p++)
        for (uint32_t g = 0; g < a.kv_heads; g++)
            group<1>(*a.query, a.q_per_kv, a.payload + p, g, C, a.out + p * H, H, ahead, a.gmax + p * a.kv_heads,
                     a.kv_heads);
}

}  // namespace

SPECKV_TARGET_END

// The probe and the table below are baseline code (isa_target.h).
ScorePagesFn avx512_score_pages() {
    static const bool ok = cpu::has(cpu::kAvx512f | cpu::kF16c | cpu::kFma);
    return ok ? &score_pages_avx512 : nullptr;
}

}  // namespace speckv::nmp

#else
namespace speckv::nmp {
ScorePagesFn avx512_score_pages() { return nullptr; }
}  // namespace speckv::nmp
#endif
