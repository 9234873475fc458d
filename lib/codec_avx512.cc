// AVX-512 (F/BW/VL) kernels of the codec, 16 lanes with masked tails.
// Compiled with -mavx512f -mavx512bw -mavx512vl; only reached when the CPU
// has them. Must equal the scalar kernels bit for bit (docs/codec.md §2–§3).
// Two optional extensions, each behind its own CPUID check: AVX512-VBMI (a
// 64-byte prefix sum for the delta bytes) and AVX512-FP16 (FP16 pages
// dequantised 32 lanes at a time when the scale is a normal FP16 number).
#include "codec_kernels.h"
#include "speckv.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <cpuid.h>
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

// ---- FP16-input fast path (page / token groups): no canonical buffer.

bool absmax_fp16_avx512(const void *h, size_t n, uint32_t *amax) {
    auto p = static_cast<const uint8_t *>(h);
    const __m512i absm = _mm512_set1_epi16(0x7FFF);
    __m512i m0 = _mm512_setzero_si512(), m1 = m0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        m0 = _mm512_max_epu16(m0, _mm512_and_si512(_mm512_loadu_si512(p + 2 * i), absm));
        m1 = _mm512_max_epu16(m1, _mm512_and_si512(_mm512_loadu_si512(p + 2 * i + 64), absm));
    }
    for (; i < n; i += 32) {
        __mmask32 m = n - i >= 32 ? __mmask32(0xFFFFFFFFu) : __mmask32((1u << (n - i)) - 1);
        m0 = _mm512_max_epu16(m0, _mm512_and_si512(_mm512_maskz_loadu_epi16(m, p + 2 * i), absm));
    }
    m0 = _mm512_max_epu16(m0, m1);
    __m256i x = _mm256_max_epu16(_mm512_castsi512_si256(m0), _mm512_extracti64x4_epi64(m0, 1));
    __m128i y = _mm_max_epu16(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
    // max of 8 u16 = not(min of not): phminposuw
    y = _mm_minpos_epu16(_mm_xor_si128(y, _mm_set1_epi16(-1)));
    const uint16_t mh = uint16_t(~uint32_t(_mm_cvtsi128_si32(y)));
    uint32_t u;
    canon_scalar(SPECKV_DTYPE_FP16, &mh, 1, &u);
    *amax = u & 0x7FFFFF00u;
    return mh < 0x7C00u;
}

// docs §3.3 on 32 FP16 elements in 16-bit lanes. For an FP16 element with
// exponent field e and fraction f, let m = f | (e ? 1024 : 0) and e' = max(e, 1):
// its canonical M * 2^(E-142) equals m * 2^(e'-25) (subnormals included), so
// P / 2^(t-1) = m * R / 2^s with s = Es - e' - 87, and when s >= 16,
// floor(m*R / 2^s) = floor(hi16(m*R) / 2^(s-16)): the same r as the 32-bit
// formula (a shift count >= 16 gives 0, as t - 1 >= 32 does). s >= 16 holds
// for every element when Es >= 104: a normal element has E <= Em and
// Es >= Em - 7, so s = (t - 1) - 5 >= 18; a subnormal one has s = Es - 88.
inline __m512i quant32_fp16(__m512i h, __m512i es88, __m512i r, __m512i Q) {
    // Same arithmetic in fewer operations: with a = |h| and e1m = max(e, 1) - 1
    // (a saturating subtract), m = a - (e1m << 10) and s - 16 = es88 - e1m
    // (es88 = Es - 104); (rr + 1) >> 1 is vpavgw with zero (rr <= 2046: no
    // 16-bit overflow in either form); the sign by a masked subtract.
    const __m512i zero = _mm512_setzero_si512();
    const __m512i a = _mm512_and_si512(h, _mm512_set1_epi16(0x7FFF));
    const __m512i e1m = _mm512_subs_epu16(_mm512_srli_epi16(a, 10), _mm512_set1_epi16(1));
    const __m512i m = _mm512_sub_epi16(a, _mm512_slli_epi16(e1m, 10));
    const __m512i cnt = _mm512_sub_epi16(es88, e1m);  // s - 16 = Es - 103 - e' >= 0
    const __m512i rr = _mm512_srlv_epi16(_mm512_mulhi_epu16(m, r), cnt);
    const __m512i mag = _mm512_min_epu16(_mm512_avg_epu16(rr, zero), Q);
    return _mm512_mask_sub_epi16(mag, _mm512_movepi16_mask(h), zero, mag);
}

// Two vectors of 32 int16 lanes (all in [-127, 127]) -> 64 int8 in order.
inline __m512i pack64(__m512i a, __m512i b) {
    return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), _mm512_packs_epi16(a, b));
}

void quant_const_fp16_avx512(const void *h, size_t n, uint32_t es, uint32_t r, uint32_t Q, int8_t *q) {
    auto p = static_cast<const uint8_t *>(h);
    if (es < 104 || r == 0) {  // all-subnormal page (or zero scale): the general formula
        quant_const_fp16_scalar(h, n, es, r, Q, q);
        return;
    }
    const __m512i es87 = _mm512_set1_epi16(short(es - 104)), rv = _mm512_set1_epi16(short(r)),
                  Qv = _mm512_set1_epi16(short(Q));
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512i a = quant32_fp16(_mm512_loadu_si512(p + 2 * i), es87, rv, Qv);
        __m512i b = quant32_fp16(_mm512_loadu_si512(p + 2 * i + 64), es87, rv, Qv);
        _mm512_storeu_si512(q + i, pack64(a, b));
    }
    for (; i < n; i += 32) {
        __mmask32 m = n - i >= 32 ? __mmask32(0xFFFFFFFFu) : __mmask32((1u << (n - i)) - 1);
        __m512i a = quant32_fp16(_mm512_maskz_loadu_epi16(m, p + 2 * i), es87, rv, Qv);
        _mm256_mask_storeu_epi8(q + i, m, _mm512_cvtepi16_epi8(a));
    }
}

// ---- AVX512-FP16: q * S computed in binary16. When S is a normal FP16
// number (scale exponent 113..142) S and q (|q| <= 127) are exact in FP16 and
// |q * S| >= 2^-14 is normal, so one RNE multiply gives the same bits as the
// exact FP32 product rounded to FP16 (docs §3.4); overflow (Inf) is clamped
// to +-65504, which is the saturation rule. q = 0 gives +0 (S > 0).
bool g_det_fp16 = false, g_has_fp16 = false;

inline bool fp16_scale(uint16_t scale, uint16_t *s16) {
    const uint32_t es = scale >> 7;
    if (scale == 0 || es < 113 || es > 142) return false;
    *s16 = uint16_t(((es - 112) << 10) | ((scale & 0x7Fu) << 3));
    return true;
}

// Without the clamp when 128 * S <= 65504: no product can reach Inf then
// (|q| <= 128, and an exact product <= 65504 rounds to at most 65504).
template <bool kClamp>
__attribute__((target("avx512fp16,avx512bw,avx512vl,avx512f"))) inline __m512h deq_one(__m512h a, __m512h S, __m512h hi,
                                                                                     __m512h lo) {
    return kClamp ? _mm512_max_ph(_mm512_min_ph(_mm512_mul_ph(a, S), hi), lo) : _mm512_mul_ph(a, S);
}

template <bool kClamp>
__attribute__((target("avx512fp16,avx512bw,avx512vl,avx512f"))) inline void deq_fp16_ph_t(const int8_t *q, size_t n,
                                                                                          uint16_t s16, uint8_t *o) {
    const __m512h S = _mm512_castsi512_ph(_mm512_set1_epi16(short(s16)));
    const __m512h hi = _mm512_castsi512_ph(_mm512_set1_epi16(0x7BFF)), lo = _mm512_castsi512_ph(_mm512_set1_epi16(short(0xFBFF)));
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512h a = _mm512_cvtepi16_ph(_mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + i))));
        __m512h b = _mm512_cvtepi16_ph(_mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + i + 32))));
        _mm512_storeu_si512(o + 2 * i, _mm512_castph_si512(deq_one<kClamp>(a, S, hi, lo)));
        _mm512_storeu_si512(o + 2 * i + 64, _mm512_castph_si512(deq_one<kClamp>(b, S, hi, lo)));
    }
    for (; i < n; i += 32) {
        __mmask32 m = n - i >= 32 ? __mmask32(0xFFFFFFFFu) : __mmask32((1u << (n - i)) - 1);
        __m512h a = _mm512_cvtepi16_ph(_mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m, q + i)));
        _mm512_mask_storeu_epi16(o + 2 * i, m, _mm512_castph_si512(deq_one<kClamp>(a, S, hi, lo)));
    }
}

__attribute__((target("avx512fp16,avx512bw,avx512vl,avx512f"))) void deq_fp16_ph(const int8_t *q, size_t n,
                                                                                   uint16_t s16, uint8_t *o) {
    // s16 is a normal FP16 number: 128 * S <= 65504 iff S <= 511.75, i.e. its
    // exponent field is below 24 (S < 512).
    if (((s16 >> 10) & 31u) < 24u)
        deq_fp16_ph_t<false>(q, n, s16, o);
    else
        deq_fp16_ph_t<true>(q, n, s16, o);
}

// ---- AVX512-VBMI: wrapping byte prefix sum, 64 bytes per step (log-step
// lane shifts by vpermb with a zeroing mask), plus the |s| <= Q check.
bool g_det_vbmi = false, g_has_vbmi = false;

__attribute__((target("avx512vbmi,avx512bw,avx512f"))) bool undelta_vbmi(const uint8_t *b, size_t n, bool delta,
                                                                          uint32_t Q, int8_t *s) {
    const __m512i qv = _mm512_set1_epi8(int8_t(Q)), nq = _mm512_set1_epi8(int8_t(-int32_t(Q)));
    const __m512i iota = _mm512_set_epi8(63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45,
                                         44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26,
                                         25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6,
                                         5, 4, 3, 2, 1, 0);
    const __m512i i1 = _mm512_sub_epi8(iota, _mm512_set1_epi8(1)), i2 = _mm512_sub_epi8(iota, _mm512_set1_epi8(2)),
                  i4 = _mm512_sub_epi8(iota, _mm512_set1_epi8(4)), i8 = _mm512_sub_epi8(iota, _mm512_set1_epi8(8)),
                  i16 = _mm512_sub_epi8(iota, _mm512_set1_epi8(16)), i32 = _mm512_sub_epi8(iota, _mm512_set1_epi8(32));
    const __m512i last = _mm512_set1_epi8(63);
    __m512i carry = _mm512_setzero_si512(), mn = carry, mx = carry;
    for (size_t i = 0; i < n; i += 64) {
        const __mmask64 m = n - i >= 64 ? ~__mmask64(0) : (__mmask64(1) << (n - i)) - 1;
        __m512i x = _mm512_maskz_loadu_epi8(m, b + i);
        if (delta) {
            x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0x1), i1, x));
            x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0x3), i2, x));
            x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0xF), i4, x));
            x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0xFF), i8, x));
            x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0xFFFF), i16, x));
            x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0xFFFFFFFFull), i32, x));
            x = _mm512_add_epi8(x, carry);
            carry = _mm512_permutexvar_epi8(last, x);
        }
        mn = _mm512_mask_min_epi8(mn, m, mn, x);  // lanes past n keep 0 (in range)
        mx = _mm512_mask_max_epi8(mx, m, mx, x);
        _mm512_mask_storeu_epi8(s + i, m, x);
    }
    return (_mm512_cmpgt_epi8_mask(mx, qv) | _mm512_cmpgt_epi8_mask(nq, mn)) == 0;
}

// int8 range check: byte min/max over the stream, one compare at the end.
bool range_ok_avx512(const uint8_t *b, size_t n, uint32_t Q) {
    __m512i mn = _mm512_setzero_si512(), mx = mn, mn1 = mn, mx1 = mn;
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        const __m512i x = _mm512_loadu_si512(b + i), y = _mm512_loadu_si512(b + i + 64);
        mn = _mm512_min_epi8(mn, x), mx = _mm512_max_epi8(mx, x);
        mn1 = _mm512_min_epi8(mn1, y), mx1 = _mm512_max_epi8(mx1, y);
    }
    for (; i < n; i += 64) {  // zero-filled tail lanes are in range
        const __mmask64 m = n - i >= 64 ? ~__mmask64(0) : (__mmask64(1) << (n - i)) - 1;
        const __m512i x = _mm512_maskz_loadu_epi8(m, b + i);
        mn = _mm512_min_epi8(mn, x), mx = _mm512_max_epi8(mx, x);
    }
    mn = _mm512_min_epi8(mn, mn1), mx = _mm512_max_epi8(mx, mx1);
    return (_mm512_cmpgt_epi8_mask(mx, _mm512_set1_epi8(int8_t(Q))) |
            _mm512_cmpgt_epi8_mask(_mm512_set1_epi8(int8_t(-int32_t(Q))), mn)) == 0;
}

bool undelta_avx512(const uint8_t *b, size_t n, bool delta, uint32_t Q, int8_t *s) {
    return g_has_vbmi ? undelta_vbmi(b, n, delta, Q, s) : undelta_sse(b, n, delta, Q, s);
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
    uint16_t s16;
    if (dtype == SPECKV_DTYPE_FP16 && g_has_fp16 && fp16_scale(scale, &s16)) return deq_fp16_ph(q, n, s16, o);
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
    quant_const_avx512, quant_row_avx512, dequant_const_avx512, dequant_row_avx512, undelta_avx512,
    absmax_fp16_avx512, quant_const_fp16_avx512, range_ok_avx512,
};

}  // namespace

const Kernels *avx512_kernels() {
    static const bool ok = [] {
        const bool base = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
        if (base) {
            // CPUID.(7,0): ECX bit 1 AVX512_VBMI, EDX bit 23 AVX512_FP16.
            unsigned a, b, c, d;
            if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
                g_has_vbmi = g_det_vbmi = (c >> 1) & 1u;
                g_has_fp16 = g_det_fp16 = (d >> 23) & 1u;
            }
        }
        return base;
    }();
    return ok ? &kAvx512 : nullptr;
}

bool avx512_extensions(int on) {
    if (!avx512_kernels()) return false;
    if (on >= 0) {
        g_has_vbmi = g_det_vbmi && on;
        g_has_fp16 = g_det_fp16 && on;
    }
    return g_has_vbmi || g_has_fp16;
}

}  // namespace speckv::codec

#else
namespace speckv::codec {
const Kernels *avx512_kernels() { return nullptr; }
bool avx512_extensions(int) { return false; }
}  // namespace speckv::codec
#endif
