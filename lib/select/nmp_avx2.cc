// SPDX-License-Identifier: Apache-2.0
// AVX2 + F16C + FMA scoring kernel of the near-memory selector. In an
// "avx2,f16c,fma" target region (isa_target.h), -ffp-contract=off (lib/select/CMakeLists.txt); reached only after
// the runtime check in avx2_score_pages(). Must equal score_pages_scalar() bit for
// bit: same lanes, same accumulators, same reduction tree (docs/selection.md §2.3).
// The min/max choice is a vblendvps on the query's own sign bit; the summaries
// of the next pages are prefetched while it computes, as in the AVX-512 kernel.
#include "select/nmp_kernels.h"

#include "util/cpu.h"
#include "util/isa_target.h"

#if SPECKV_X86_SIMD
#include <immintrin.h>

SPECKV_TARGET_BEGIN("avx2,f16c,fma")

namespace speckv::nmp {
namespace {

// v = a0 + a1 (lanes l and l+8 of the 16-lane order), then
// r = ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7)).
inline float reduce(__m256 a0, __m256 a1) {
    const __m256 a = _mm256_add_ps(a0, a1);
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));  // t_i = a_i + a_{i+4}
    __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));                                   // u0 = t0+t2, u1 = t1+t3
    __m128 r = _mm_add_ss(u, _mm_shuffle_ps(u, u, 1));                               // u0 + u1
    return _mm_cvtss_f32(r);
}

inline __m256 load_f16(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}

// One 8-channel chunk at channel i of PB pages x HB heads into `acc`: per
// head and page one blend (min where the query's sign bit is set, else max)
// and one FMA.
template <int PB, int HB>
[[gnu::always_inline]] inline void chunk(const float *q, uint32_t D, const uint16_t *const *pay, size_t goff,
                                         uint32_t C, uint32_t i, __m256 (&acc)[PB][HB]) {
    __m256 lo[PB], hi[PB];
#pragma GCC unroll 8
    for (int p = 0; p < PB; p++) {
        lo[p] = load_f16(pay[p] + goff + i);
        hi[p] = load_f16(pay[p] + C + goff + i);
    }
#pragma GCC unroll 8
    for (int j = 0; j < HB; j++) {
        const __m256 qv = _mm256_loadu_ps(q + size_t(j) * D + i);
#pragma GCC unroll 8
        for (int p = 0; p < PB; p++) acc[p][j] = _mm256_fmadd_ps(qv, _mm256_blendv_ps(hi[p], lo[p], qv), acc[p][j]);
    }
}

// PB pages x HB query heads of one KV head at once: each query chunk is loaded
// once for PB pages, each summary chunk converted once for HB heads, and
// 2*PB*HB independent FMA chains hide the FMA latency. acc0 takes even
// 8-channel chunks (lanes 0-7), acc1 odd ones (lanes 8-15). The arithmetic of
// one (page, head) is the same whatever PB and HB are.
// `q`: query of the block's first head; `goff`: the KV head's first channel;
// out[p * H + j] for p < PB, j < HB.
template <int PB, int HB>
inline void block(const float *q, uint32_t D, const uint16_t *const *pay, size_t goff, uint32_t C, float *out,
                  uint32_t H, Ahead &ahead) {
    __m256 acc[2][PB][HB];
#pragma GCC unroll 8
    for (int p = 0; p < PB; p++)
#pragma GCC unroll 8
        for (int j = 0; j < HB; j++) acc[0][p][j] = acc[1][p][j] = _mm256_setzero_ps();
    uint32_t i = 0;
    for (; i + 16 <= D; i += 16) {
        ahead.tick();
        chunk<PB, HB>(q, D, pay, goff, C, i, acc[0]);
        chunk<PB, HB>(q, D, pay, goff, C, i + 8, acc[1]);
    }
    if (i < D) {
        ahead.tick();
        chunk<PB, HB>(q, D, pay, goff, C, i, acc[0]);
    }
#pragma GCC unroll 8
    for (int p = 0; p < PB; p++)
#pragma GCC unroll 8
        for (int j = 0; j < HB; j++) out[size_t(p) * H + j] = reduce(acc[0][p][j], acc[1][p][j]);
}

// All heads of one KV head for PB pages (HB blocks of <= 4 heads).
template <int PB>
inline void group(const float *qa, uint32_t D, uint32_t qpk, const uint16_t *const *pay, uint32_t g, uint32_t C,
                  float *out, uint32_t H, Ahead &ahead) {
    const size_t goff = size_t(g) * D;
    uint32_t j = 0;
    for (; j + 4 <= qpk; j += 4)
        block<PB, 4>(qa + (size_t(g) * qpk + j) * D, D, pay, goff, C, out + size_t(g) * qpk + j, H, ahead);
    const float *qr = qa + (size_t(g) * qpk + j) * D;
    float *o = out + size_t(g) * qpk + j;
    switch (qpk - j) {
        case 3: block<PB, 3>(qr, D, pay, goff, C, o, H, ahead); break;
        case 2: block<PB, 2>(qr, D, pay, goff, C, o, H, ahead); break;
        case 1: block<PB, 1>(qr, D, pay, goff, C, o, H, ahead); break;
        default: break;
    }
}

void score_pages_avx2(const KernelArgs &a) {
    const uint32_t D = a.head_dim, C = a.kv_heads * a.head_dim, H = a.kv_heads * a.q_per_kv;
    const float *q = a.query->q.data();
    // Pages per step: enough chains for the FMA latency within 16 registers.
    const size_t pairs = a.q_per_kv == 1 ? a.n / 2 : 0;
    const size_t blocks = (pairs + (a.n - 2 * pairs)) * (a.q_per_kv / 4 + (a.q_per_kv % 4 != 0));
    Ahead ahead(a, blocks * a.kv_heads * ((D + 15) / 16));
    size_t p = 0;
    for (; p < 2 * pairs; p += 2)
        for (uint32_t g = 0; g < a.kv_heads; g++) group<2>(q, D, 1, a.payload + p, g, C, a.out + p * H, H, ahead);
    for (; p < a.n; p++)
        for (uint32_t g = 0; g < a.kv_heads; g++)
            group<1>(q, D, a.q_per_kv, a.payload + p, g, C, a.out + p * H, H, ahead);
    for (size_t i = 0; i < a.n; i++)
        for (uint32_t g = 0; g < a.kv_heads; g++)
            a.gmax[i * a.kv_heads + g] = group_max(a.out + i * H + size_t(g) * a.q_per_kv, a.q_per_kv);
}

}  // namespace

SPECKV_TARGET_END

// The probe and the table below are baseline code (isa_target.h).
ScorePagesFn avx2_score_pages() {
    static const bool ok = cpu::has(cpu::kAvx2 | cpu::kF16c | cpu::kFma);
    return ok ? &score_pages_avx2 : nullptr;
}

}  // namespace speckv::nmp

#else
namespace speckv::nmp {
ScorePagesFn avx2_score_pages() { return nullptr; }
}  // namespace speckv::nmp
#endif
