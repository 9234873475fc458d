// SPDX-License-Identifier: Apache-2.0
// AVX2 (+F16C) kernels of the codec, in an "avx2,f16c" target region
// (isa_target.h); only reached when the CPU has both (avx2_kernels() checks). Must equal the
// scalar kernels bit for bit (docs/codec.md §2–§3).
#include "codec/codec_kernels.h"
#include "speckv.h"

#include "util/cpu.h"
#include "util/isa_target.h"

#if SPECKV_X86_SIMD
#include <immintrin.h>

#include <algorithm>
#include <cstring>

SPECKV_TARGET_BEGIN("avx2,f16c")

namespace speckv::codec {
namespace {

inline bool all_finite(__m256i u) {
    __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
    __m256i bad = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7F7FFFFF));
    return _mm256_testz_si256(bad, bad);
}

bool canon_avx2(int dtype, const void *src, size_t n, uint32_t *u) {
    size_t i = 0;
    __m256i badacc = _mm256_setzero_si256();
    const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF), lim = _mm256_set1_epi32(0x7F7FFFFF);
    auto track = [&](__m256i v) {
        badacc = _mm256_or_si256(badacc, _mm256_cmpgt_epi32(_mm256_and_si256(v, absm), lim));
    };
    if (dtype == SPECKV_DTYPE_FP32) {
        auto p = static_cast<const uint8_t *>(src);
        for (; i + 8 <= n; i += 8) {
            __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 4 * i));
            track(v);
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(u + i), v);
        }
    } else if (dtype == SPECKV_DTYPE_BF16) {
        auto p = static_cast<const uint8_t *>(src);
        for (; i + 8 <= n; i += 8) {
            __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 2 * i));
            __m256i v = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
            track(v);
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(u + i), v);
        }
    } else {
        auto p = static_cast<const uint8_t *>(src);
        for (; i + 8 <= n; i += 8) {
            __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 2 * i));
            // Inf/NaN detected on the FP16 bits: vcvtph2ps quiets NaNs, the
            // pattern is irrelevant because such a page is stored raw.
            __m128i e = _mm_and_si128(h, _mm_set1_epi16(0x7C00));
            __m128i bad16 = _mm_cmpeq_epi16(e, _mm_set1_epi16(0x7C00));
            badacc = _mm256_or_si256(badacc, _mm256_cvtepi16_epi32(bad16));
            __m256 f = _mm256_cvtph_ps(h);
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(u + i), _mm256_castps_si256(f));
        }
    }
    bool ok = _mm256_testz_si256(badacc, badacc);
    if (i < n) {
        auto p = static_cast<const uint8_t *>(src);
        ok &= canon_scalar(dtype, p + i * (dtype == SPECKV_DTYPE_FP32 ? 4 : 2), n - i, u + i);
    }
    return ok;
}

inline uint32_t hmax(__m256i m) {
    __m128i x = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    x = _mm_max_epu32(x, _mm_shuffle_epi32(x, 0x4E));
    x = _mm_max_epu32(x, _mm_shuffle_epi32(x, 0xB1));
    return uint32_t(_mm_cvtsi128_si32(x));
}

uint32_t absmax_avx2(const uint32_t *u, size_t n) {
    const __m256i mask = _mm256_set1_epi32(0x7FFFFF00);
    __m256i m0 = _mm256_setzero_si256(), m1 = m0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_epu32(m0, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(u + i)), mask));
        m1 = _mm256_max_epu32(m1, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(u + i + 8)), mask));
    }
    uint32_t m = hmax(_mm256_max_epu32(m0, m1));
    for (; i < n; i++) m = std::max(m, u[i] & 0x7FFFFF00u);
    return m;
}

void colmax_avx2(const uint32_t *u, size_t T, size_t C, uint32_t *out) {
    const __m256i mask = _mm256_set1_epi32(0x7FFFFF00);
    for (size_t c = 0; c < C; c++) out[c] = 0;
    for (size_t t = 0; t < T; t++) {
        const uint32_t *row = u + t * C;
        size_t c = 0;
        for (; c + 8 <= C; c += 8) {
            __m256i o = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(out + c));
            __m256i v = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(row + c)), mask);
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + c), _mm256_max_epu32(o, v));
        }
        for (; c < C; c++) out[c] = std::max(out[c], row[c] & 0x7FFFFF00u);
    }
}

// docs §3.3 on 8 lanes.
inline __m256i quant8(__m256i u, __m256i es30, __m256i r, __m256i Q) {
    __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
    __m256i E = _mm256_srli_epi32(a, 23);
    __m256i M = _mm256_or_si256(_mm256_set1_epi32(0x8000),
                                _mm256_and_si256(_mm256_srli_epi32(a, 8), _mm256_set1_epi32(0x7FFF)));
    __m256i P = _mm256_mullo_epi32(M, r);
    __m256i sh = _mm256_sub_epi32(es30, E);  // t-1; >=32 or negative -> 0
    __m256i rr = _mm256_srlv_epi32(P, sh);
    __m256i mag = _mm256_srli_epi32(_mm256_add_epi32(rr, _mm256_set1_epi32(1)), 1);
    mag = _mm256_min_epu32(mag, Q);
    __m256i s = _mm256_srai_epi32(u, 31);
    return _mm256_sub_epi32(_mm256_xor_si256(mag, s), s);
}

inline __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
    __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    __m256i x = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline __m256i ld(const uint32_t *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }

void quant_const_avx2(const uint32_t *u, size_t n, uint32_t es, uint32_t r, uint32_t Q, int8_t *q) {
    const __m256i es30 = _mm256_set1_epi32(int(30 + es)), rv = _mm256_set1_epi32(int(r)),
                  Qv = _mm256_set1_epi32(int(Q));
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i x = pack32(quant8(ld(u + i), es30, rv, Qv), quant8(ld(u + i + 8), es30, rv, Qv),
                           quant8(ld(u + i + 16), es30, rv, Qv), quant8(ld(u + i + 24), es30, rv, Qv));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(q + i), x);
    }
    if (i < n) quant_const_scalar(u + i, n - i, es, r, Q, q + i);
}

void quant_row_avx2(const uint32_t *u, size_t C, const uint32_t *es, const uint32_t *r, uint32_t Q, int8_t *q) {
    const __m256i Qv = _mm256_set1_epi32(int(Q)), k30 = _mm256_set1_epi32(30);
    auto one = [&](size_t c) { return quant8(ld(u + c), _mm256_add_epi32(ld(es + c), k30), ld(r + c), Qv); };
    size_t c = 0;
    for (; c + 32 <= C; c += 32) {
        __m256i x = pack32(one(c), one(c + 8), one(c + 16), one(c + 24));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(q + c), x);
    }
    if (c < C) quant_row_scalar(u + c, C - c, es + c, r + c, Q, q + c);
}

// 8 products q*S as floats (exact, docs §3.4); -0 from a zero scale -> +0.
inline __m256 deq8(const int8_t *q, __m256 S) {
    __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(q));
    __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), S);
    return _mm256_andnot_ps(_mm256_cmp_ps(f, _mm256_setzero_ps(), _CMP_EQ_OQ), f);
}

inline void store8(__m256 f, int dtype, uint8_t *o) {
    if (dtype == SPECKV_DTYPE_FP32) {
        _mm256_storeu_ps(reinterpret_cast<float *>(o), f);
    } else if (dtype == SPECKV_DTYPE_BF16) {
        __m256i u = _mm256_castps_si256(f);
        __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
        __m256i h = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
        __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(o), p);
    } else {
        __m128i h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m128i inf = _mm_cmpeq_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7FFF)), _mm_set1_epi16(0x7C00));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(o), _mm_add_epi16(h, inf));  // Inf -> 65504
    }
}

inline __m256 scale_ps(uint16_t s) { return _mm256_castsi256_ps(_mm256_set1_epi32(int(uint32_t(s) << 16))); }

// FP16 output, one scale: the exact FP32 route of codec_dequant_avx512.cc (q * S is
// exact in FP32; vcvtps2ph with an immediate RNE is IEEE binary32 ->
// binary16, subnormals included, MXCSR's rounding, FTZ and DAZ not
// involved). Only the overflow differs from §3.4 (Inf instead of +-65504,
// for |x| >= 65520): x is clamped to [-65504, 65504] first, which RNE maps
// to +-65504 as §3.4 does, and only for scales where 127 * S can reach
// 65520 (Es >= 136). A zero scale field decodes to +0 (q * +0 would be -0
// for q < 0), before any product. 16 values per step, no fix-ups.
template <bool kClamp>
inline __m128i deq8_fp16(const int8_t *q, __m256 S) {
    __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(q)))), S);
    if (kClamp) f = _mm256_max_ps(_mm256_min_ps(f, _mm256_set1_ps(65504.f)), _mm256_set1_ps(-65504.f));
    return _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

template <bool kClamp>
void deq_fp16_avx2_t(const int8_t *q, size_t n, uint16_t scale, uint8_t *o) {
    const __m256 S = scale_ps(scale);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m128i a = deq8_fp16<kClamp>(q + i, S), b = deq8_fp16<kClamp>(q + i + 8, S);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(o + 2 * i), _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1));
    }
    if (i + 8 <= n) {
        _mm_storeu_si128(reinterpret_cast<__m128i *>(o + 2 * i), deq8_fp16<kClamp>(q + i, S));
        i += 8;
    }
    if (i < n) dequant_const_scalar(q + i, n - i, scale, SPECKV_DTYPE_FP16, o + 2 * i);
}

void dequant_const_avx2(const int8_t *q, size_t n, uint16_t scale, int dtype, void *out) {
    auto o = static_cast<uint8_t *>(out);
    if (dtype == SPECKV_DTYPE_FP16) {
        if (scale == 0)
            std::memset(o, 0, 2 * n);
        else if (scale >= (136u << 7))
            deq_fp16_avx2_t<true>(q, n, scale, o);
        else
            deq_fp16_avx2_t<false>(q, n, scale, o);
        return;
    }
    const size_t esz = dtype == SPECKV_DTYPE_FP32 ? 4 : 2;
    const __m256 S = scale_ps(scale);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) store8(deq8(q + i, S), dtype, o + i * esz);
    if (i < n) dequant_const_scalar(q + i, n - i, scale, dtype, o + i * esz);
}

void dequant_row_avx2(const int8_t *q, size_t C, const uint16_t *scale, int dtype, void *out) {
    auto o = static_cast<uint8_t *>(out);
    const size_t esz = dtype == SPECKV_DTYPE_FP32 ? 4 : 2;
    size_t c = 0;
    for (; c + 8 <= C; c += 8) {
        __m128i s16 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(scale + c));
        __m256 S = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(s16), 16));
        store8(deq8(q + c, S), dtype, o + c * esz);
    }
    if (c < C) dequant_row_scalar(q + c, C - c, scale + c, dtype, o + c * esz);
}

bool absmax_fp16_avx2(const void *h, size_t n, uint32_t *amax) {
    auto p = static_cast<const uint8_t *>(h);
    const __m256i absm = _mm256_set1_epi16(0x7FFF);
    __m256i m0 = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        m0 = _mm256_max_epu16(m0, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 2 * i)), absm));
    __m128i y = _mm_max_epu16(_mm256_castsi256_si128(m0), _mm256_extracti128_si256(m0, 1));
    y = _mm_minpos_epu16(_mm_xor_si128(y, _mm_set1_epi16(-1)));  // max of 8 = ~min of ~
    uint32_t mh = ~uint32_t(_mm_cvtsi128_si32(y)) & 0xFFFFu;
    for (; i < n; i++) {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        mh = std::max(mh, uint32_t(v & 0x7FFFu));
    }
    *amax = fp16_bits_to_u32(uint16_t(mh)) & 0x7FFFFF00u;
    return mh < 0x7C00u;
}

void quant_const_fp16_avx2(const void *h, size_t n, uint32_t es, uint32_t r, uint32_t Q, int8_t *q) {
    auto p = static_cast<const uint8_t *>(h);
    const __m256i es30 = _mm256_set1_epi32(int(30 + es)), rv = _mm256_set1_epi32(int(r)),
                  Qv = _mm256_set1_epi32(int(Q));
    auto cv = [&](size_t j) {
        return _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 2 * j))));
    };
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i x = pack32(quant8(cv(i), es30, rv, Qv), quant8(cv(i + 8), es30, rv, Qv), quant8(cv(i + 16), es30, rv, Qv),
                           quant8(cv(i + 24), es30, rv, Qv));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(q + i), x);
    }
    if (i < n) quant_const_fp16_scalar(p + 2 * i, n - i, es, r, Q, q + i);
}

// int8 range check: byte min/max over the stream, one compare at the end.
bool range_ok_avx2(const uint8_t *b, size_t n, uint32_t Q) {
    __m256i mn = _mm256_setzero_si256(), mx = mn, mn1 = mn, mx1 = mn;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b + i));
        const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b + i + 32));
        mn = _mm256_min_epi8(mn, x), mx = _mm256_max_epi8(mx, x);
        mn1 = _mm256_min_epi8(mn1, y), mx1 = _mm256_max_epi8(mx1, y);
    }
    mn = _mm256_min_epi8(mn, mn1), mx = _mm256_max_epi8(mx, mx1);
    __m128i lo = _mm_min_epi8(_mm256_castsi256_si128(mn), _mm256_extracti128_si256(mn, 1));
    __m128i hi = _mm_max_epi8(_mm256_castsi256_si128(mx), _mm256_extracti128_si256(mx, 1));
    const __m128i qv = _mm_set1_epi8(int8_t(Q)), nq = _mm_set1_epi8(int8_t(-int32_t(Q)));
    const __m128i bad = _mm_or_si128(_mm_cmpgt_epi8(hi, qv), _mm_cmpgt_epi8(nq, lo));
    return _mm_testz_si128(bad, bad) && range_ok_scalar(b + i, n - i, Q);
}

const Kernels kAvx2 = {
    "avx2",          canon_avx2,      absmax_avx2,        colmax_avx2,
    quant_const_avx2, quant_row_avx2, dequant_const_avx2, dequant_row_avx2, undelta_sse,
    absmax_fp16_avx2, quant_const_fp16_avx2, range_ok_avx2, delta_runs_scalar,
    rice_encode8_scalar, rice_decode8_scalar, rice_encode16_scalar, rice_decode16_scalar,
    srice_encode8_scalar, srice_decode8_scalar, srice_encode16_scalar, srice_decode16_scalar,
    dequant_const16_scalar, dequant_row16_scalar,
    nullptr,         nullptr,
};

}  // namespace

// Wrapping byte prefix sum, 16 bytes at a time (log-step shifts), plus the
// |s| <= Q check. Shared by the AVX2 and AVX-512 tables.
bool undelta_sse(const uint8_t *b, size_t n, bool delta, uint32_t Q, int8_t *s) {
    const __m128i qv = _mm_set1_epi8(int8_t(Q)), nq = _mm_set1_epi8(int8_t(-int32_t(Q)));
    const __m128i last = _mm_set1_epi8(15);
    __m128i carry = _mm_setzero_si128(), bad = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b + i));
        if (delta) {
            x = _mm_add_epi8(x, _mm_slli_si128(x, 1));
            x = _mm_add_epi8(x, _mm_slli_si128(x, 2));
            x = _mm_add_epi8(x, _mm_slli_si128(x, 4));
            x = _mm_add_epi8(x, _mm_slli_si128(x, 8));
            x = _mm_add_epi8(x, carry);
            carry = _mm_shuffle_epi8(x, last);
        }
        bad = _mm_or_si128(bad, _mm_or_si128(_mm_cmpgt_epi8(x, qv), _mm_cmpgt_epi8(nq, x)));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(s + i), x);
    }
    bool ok = _mm_testz_si128(bad, bad);
    uint8_t prev = uint8_t(_mm_cvtsi128_si32(carry));
    const int32_t q = int32_t(Q);
    for (; i < n; i++) {
        uint8_t v = delta ? uint8_t(prev + b[i]) : b[i];
        ok &= int8_t(v) <= q && int8_t(v) >= -q;
        s[i] = int8_t(v);
        prev = v;
    }
    return ok;
}

SPECKV_TARGET_END

// The probe and the table below are baseline code (isa_target.h).
const Kernels *avx2_kernels() {
    if (!cpu::has(cpu::kAvx2 | cpu::kF16c)) return nullptr;
    // The split Rice decoder (codec_srice_avx2.cc) also needs POPCNT; else the reference.
    static const Kernels table = [] {
        Kernels k = kAvx2;
        if (const RiceKernels *r = srice_avx2_kernels()) {
            k.srice_decode8 = r->decode8;
            k.srice_decode16 = r->decode16;
        }
        return k;
    }();
    return &table;
}

}  // namespace speckv::codec

#else
namespace speckv::codec {
const Kernels *avx2_kernels() { return nullptr; }
}  // namespace speckv::codec
#endif
