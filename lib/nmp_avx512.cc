// AVX-512 (F + F16C + FMA) scoring kernel of the near-memory selector.
// Compiled with -mavx512f -mf16c -mfma -ffp-contract=off (cmake/nmp.cmake);
// reached only after the runtime check in avx512_score_pages(). One ZMM
// accumulator holds the 16 lanes of the order in docs/selection.md §2.3, so
// it equals score_pages_scalar() and the AVX2 kernel bit for bit.
#include "nmp_kernels.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__F16C__) && defined(__FMA__)
#include <cpuid.h>
#include <immintrin.h>

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

inline __m512 load_f16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
}

// PB pages x HB query heads of one KV head; see nmp_avx2.cc block().
template <int PB, int HB>
inline void block(const float *q, uint32_t D, const uint16_t *const *pay, size_t goff, uint32_t C, float *out,
                  uint32_t H) {
    __m512 acc[PB][HB];
#pragma GCC unroll 8
    for (int p = 0; p < PB; p++)
#pragma GCC unroll 8
        for (int j = 0; j < HB; j++) acc[p][j] = _mm512_setzero_ps();
    for (uint32_t i = 0; i < D; i += 16) {
        __m512 lo[PB], hi[PB];
#pragma GCC unroll 8
        for (int p = 0; p < PB; p++) {
            lo[p] = load_f16(pay[p] + goff + i);
            hi[p] = load_f16(pay[p] + C + goff + i);
        }
#pragma GCC unroll 8
        for (int j = 0; j < HB; j++) {
            const __m512 qp = _mm512_loadu_ps(q + size_t(j) * 2 * D + i);
            const __m512 qn = _mm512_loadu_ps(q + size_t(j) * 2 * D + D + i);
#pragma GCC unroll 8
            for (int p = 0; p < PB; p++) {
                acc[p][j] = _mm512_fmadd_ps(qp, hi[p], acc[p][j]);
                acc[p][j] = _mm512_fmadd_ps(qn, lo[p], acc[p][j]);
            }
        }
    }
#pragma GCC unroll 8
    for (int p = 0; p < PB; p++)
#pragma GCC unroll 8
        for (int j = 0; j < HB; j++) out[size_t(p) * H + j] = reduce(acc[p][j]);
}

template <int PB>
inline void group(const float *qs, uint32_t D, uint32_t qpk, const uint16_t *const *pay, uint32_t g, uint32_t C,
                  float *out, uint32_t H) {
    const size_t goff = size_t(g) * D;
    uint32_t j = 0;
    for (; j + 4 <= qpk; j += 4)
        block<PB, 4>(qs + (size_t(g) * qpk + j) * 2 * D, D, pay, goff, C, out + size_t(g) * qpk + j, H);
    const float *qr = qs + (size_t(g) * qpk + j) * 2 * D;
    float *o = out + size_t(g) * qpk + j;
    switch (qpk - j) {
        case 3: block<PB, 3>(qr, D, pay, goff, C, o, H); break;
        case 2: block<PB, 2>(qr, D, pay, goff, C, o, H); break;
        case 1: block<PB, 1>(qr, D, pay, goff, C, o, H); break;
        default: break;
    }
}

void score_pages_avx512(uint32_t kv_heads, uint32_t head_dim, uint32_t q_per_kv, const float *qs,
                        const uint16_t *const *payload, size_t n, float *out) {
    const uint32_t D = head_dim, C = kv_heads * head_dim, H = kv_heads * q_per_kv;
    // 32 registers: 4 pages x 4 heads = 16 accumulators + 8 summary chunks + 2 query chunks.
    size_t p = 0;
    for (; p + 4 <= n; p += 4)
        for (uint32_t g = 0; g < kv_heads; g++) group<4>(qs, D, q_per_kv, payload + p, g, C, out + p * H, H);
    for (; p < n; p++)
        for (uint32_t g = 0; g < kv_heads; g++) group<1>(qs, D, q_per_kv, payload + p, g, C, out + p * H, H);
}

}  // namespace

ScorePagesFn avx512_score_pages() {
    static const bool ok = [] {
        unsigned a, b, c, d;
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") && __get_cpuid(1, &a, &b, &c, &d) &&
               (c & (1u << 29));
    }();
    return ok ? &score_pages_avx512 : nullptr;
}

}  // namespace speckv::nmp

#else
namespace speckv::nmp {
ScorePagesFn avx512_score_pages() { return nullptr; }
}  // namespace speckv::nmp
#endif
