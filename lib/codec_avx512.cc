// AVX-512 (F/BW/VL) kernels of the codec, 16 lanes with masked tails.
// Compiled with -mavx512f -mavx512bw -mavx512vl; only reached when the CPU
// has them. Must equal the scalar kernels bit for bit (docs/codec.md §2–§3).
#include "codec_kernels.h"
#include "speckv.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>

namespace speckv::codec {
namespace {

inline __mmask16 tail(size_t k) { return k >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << k) - 1); }

bool canon_avx512(int dtype, const void *src, size_t n, uint32_t *u) {
    const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF), lim = _mm512_set1_epi32(0x7F7FFFFF);
    __mmask16 bad = 0;
    auto p = static_cast<const uint8_t *>(src);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail(n - i);
        __m512i v;
        if (dtype == SPECKV_DTYPE_FP32) {
            v = _mm512_maskz_loadu_epi32(m, p + 4 * i);
            bad |= _mm512_mask_cmpgt_epi32_mask(m, _mm512_and_si512(v, absm), lim);
        } else if (dtype == SPECKV_DTYPE_BF16) {
            __m256i h = _mm256_maskz_loadu_epi16(m, p + 2 * i);
            v = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
            bad |= _mm512_mask_cmpgt_epi32_mask(m, _mm512_and_si512(v, absm), lim);
        } else {
            __m256i h = _mm256_maskz_loadu_epi16(m, p + 2 * i);
            __m256i e = _mm256_and_si256(h, _mm256_set1_epi16(0x7C00));
            bad |= __mmask16(_mm256_mask_cmpeq_epi16_mask(m, e, _mm256_set1_epi16(0x7C00)));
            v = _mm512_castps_si512(_mm512_cvtph_ps(h));
        }
        _mm512_mask_storeu_epi32(u + i, m, v);
    }
    return bad == 0;
}

uint32_t absmax_avx512(const uint32_t *u, size_t n) {
    const __m512i mask = _mm512_set1_epi32(0x7FFFFF00);
    __m512i m0 = _mm512_setzero_si512();
    for (size_t i = 0; i < n; i += 16) {
        __m512i v = _mm512_maskz_loadu_epi32(tail(n - i), u + i);
        m0 = _mm512_max_epu32(m0, _mm512_and_si512(v, mask));
    }
    return _mm512_reduce_max_epu32(m0);
}

void colmax_avx512(const uint32_t *u, size_t T, size_t C, uint32_t *out) {
    const __m512i mask = _mm512_set1_epi32(0x7FFFFF00);
    for (size_t c = 0; c < C; c++) out[c] = 0;
    for (size_t t = 0; t < T; t++) {
        const uint32_t *row = u + t * C;
        for (size_t c = 0; c < C; c += 16) {
            __mmask16 m = tail(C - c);
            __m512i o = _mm512_maskz_loadu_epi32(m, out + c);
            __m512i v = _mm512_and_si512(_mm512_maskz_loadu_epi32(m, row + c), mask);
            _mm512_mask_storeu_epi32(out + c, m, _mm512_max_epu32(o, v));
        }
    }
}

inline __m512i quant16(__m512i u, __m512i es30, __m512i r, __m512i Q) {
    __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
    __m512i E = _mm512_srli_epi32(a, 23);
    __m512i M = _mm512_or_si512(_mm512_set1_epi32(0x8000),
                                _mm512_and_si512(_mm512_srli_epi32(a, 8), _mm512_set1_epi32(0x7FFF)));
    __m512i P = _mm512_mullo_epi32(M, r);
    __m512i rr = _mm512_srlv_epi32(P, _mm512_sub_epi32(es30, E));
    __m512i mag = _mm512_srli_epi32(_mm512_add_epi32(rr, _mm512_set1_epi32(1)), 1);
    mag = _mm512_min_epu32(mag, Q);
    __m512i s = _mm512_srai_epi32(u, 31);
    return _mm512_sub_epi32(_mm512_xor_si512(mag, s), s);
}

void quant_const_avx512(const uint32_t *u, size_t n, uint32_t es, uint32_t r, uint32_t Q, int8_t *q) {
    const __m512i es30 = _mm512_set1_epi32(int(30 + es)), rv = _mm512_set1_epi32(int(r)),
                  Qv = _mm512_set1_epi32(int(Q));
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail(n - i);
        __m512i v = quant16(_mm512_maskz_loadu_epi32(m, u + i), es30, rv, Qv);
        _mm_mask_storeu_epi8(q + i, m, _mm512_cvtepi32_epi8(v));
    }
}

void quant_row_avx512(const uint32_t *u, size_t C, const uint32_t *es, const uint32_t *r, uint32_t Q,
                      int8_t *q) {
    const __m512i Qv = _mm512_set1_epi32(int(Q)), k30 = _mm512_set1_epi32(30);
    for (size_t c = 0; c < C; c += 16) {
        __mmask16 m = tail(C - c);
        __m512i v = quant16(_mm512_maskz_loadu_epi32(m, u + c),
                            _mm512_add_epi32(_mm512_maskz_loadu_epi32(m, es + c), k30),
                            _mm512_maskz_loadu_epi32(m, r + c), Qv);
        _mm_mask_storeu_epi8(q + c, m, _mm512_cvtepi32_epi8(v));
    }
}

inline __m512 deq16(__mmask16 m, const int8_t *q, __m512 S) {
    __m128i b = _mm_maskz_loadu_epi8(m, q);
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)), S);
    __mmask16 z = _mm512_cmp_ps_mask(f, _mm512_setzero_ps(), _CMP_EQ_OQ);
    return _mm512_mask_mov_ps(f, z, _mm512_setzero_ps());  // -0 from a zero scale -> +0
}

inline void store16(__mmask16 m, __m512 f, int dtype, uint8_t *o) {
    if (dtype == SPECKV_DTYPE_FP32) {
        _mm512_mask_storeu_ps(o, m, f);
    } else if (dtype == SPECKV_DTYPE_BF16) {
        __m512i u = _mm512_castps_si512(f);
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        __m512i h = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
        _mm256_mask_storeu_epi16(o, m, _mm512_cvtepi32_epi16(h));
    } else {
        __m256i h = _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256i inf = _mm256_cmpeq_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)), _mm256_set1_epi16(0x7C00));
        _mm256_mask_storeu_epi16(o, m, _mm256_add_epi16(h, inf));  // Inf -> 65504
    }
}

void dequant_const_avx512(const int8_t *q, size_t n, uint16_t scale, int dtype, void *out) {
    auto o = static_cast<uint8_t *>(out);
    const size_t esz = dtype == SPECKV_DTYPE_FP32 ? 4 : 2;
    const __m512 S = _mm512_castsi512_ps(_mm512_set1_epi32(int(uint32_t(scale) << 16)));
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail(n - i);
        store16(m, deq16(m, q + i, S), dtype, o + i * esz);
    }
}

void dequant_row_avx512(const int8_t *q, size_t C, const uint16_t *scale, int dtype, void *out) {
    auto o = static_cast<uint8_t *>(out);
    const size_t esz = dtype == SPECKV_DTYPE_FP32 ? 4 : 2;
    for (size_t c = 0; c < C; c += 16) {
        __mmask16 m = tail(C - c);
        __m256i s16 = _mm256_maskz_loadu_epi16(m, scale + c);
        __m512 S = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(s16), 16));
        store16(m, deq16(m, q + c, S), dtype, o + c * esz);
    }
}

const Kernels kAvx512 = {
    "avx512",          canon_avx512,      absmax_avx512,        colmax_avx512,
    quant_const_avx512, quant_row_avx512, dequant_const_avx512, dequant_row_avx512, undelta_sse,
};

}  // namespace

const Kernels *avx512_kernels() {
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl");
    return ok ? &kAvx512 : nullptr;
}

}  // namespace speckv::codec

#else
namespace speckv::codec {
const Kernels *avx512_kernels() { return nullptr; }
}  // namespace speckv::codec
#endif
