// AVX-512 (F/BW/VL) kernels of the codec, 16 lanes with masked tails.
// Compiled with -mavx512f -mavx512bw -mavx512vl; only reached when the CPU
// has them. Must equal the scalar kernels bit for bit (docs/codec.md §2–§3).
// Two optional extensions, each behind its own CPUID check: AVX512-VBMI (a
// 64-byte prefix sum for the delta bytes, and the exponent index of the FP16
// quantiser on port 5) and AVX512-FP16 (FP16 pages dequantised 32 lanes at a
// time when the scale is a normal FP16 number).
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
    // This is the first read of the page (in L2 or beyond, not L1), which
    // bounds this pass: ask for the first 1 KiB at once, then stay 1 KiB
    // ahead, never past the page (measured per 4 KiB page in L2: 61 -> 49 ns).
    constexpr size_t kAhead = 1024;
    for (size_t k = 0; k < kAhead && k < 2 * n; k += 64)
        _mm_prefetch(reinterpret_cast<const char *>(p + k), _MM_HINT_T0);
    size_t i = 0;
    for (; 2 * i + 128 + kAhead <= 2 * n; i += 64) {
        _mm_prefetch(reinterpret_cast<const char *>(p + 2 * i + kAhead), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char *>(p + 2 * i + kAhead + 64), _MM_HINT_T0);
        m0 = _mm512_max_epu16(m0, _mm512_and_si512(_mm512_loadu_si512(p + 2 * i), absm));
        m1 = _mm512_max_epu16(m1, _mm512_and_si512(_mm512_loadu_si512(p + 2 * i + 64), absm));
    }
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
    *amax = fp16_bits_to_u32(mh) & 0x7FFFFF00u;
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

// The common case Es >= 114 (max |x| above ~2^-7), in 9 instead of 13 vector
// ops per 32 values, none of them a shift by a variable count. For an
// element with exponent field e >= 1 let m = f | 1024 and c = s - 16 =
// Es - 103 - e as in quant32_fp16 (c >= 2: e <= Em - 112 <= Es - 105), and
// y = hi16(m * R) < 2^11. Then r = y >> c and
//   mag = (r + 1) >> 1 = floor((y + 2^c) / 2^(c+1)) = floor((y * 2^(14-c) + 2^14) / 2^15),
// which is vpmulhrsw(y, P) with P = 2^(14 - c) (<= 2^12), or P = 0 when
// c > 14 (then y + 2^c < 2^(c+1): mag = 0, and vpmulhrsw(y, 0) = 0). For
// e = 0 (subnormal or zero) P = 0 too: its true r is floor(f * R / 2^(Es - 88))
// = 0 since f * R < 2^26 <= 2^(Es - 88). P is looked up by vpermw from an
// index whose low 5 bits are e (vpermw ignores the bits above). Per 64 values
// the magnitudes (<= 1024) are packed to bytes with signed saturation (so
// >= 127 becomes 127), clamped to Q when Q < 127, and negated under the 64
// sign bits by a masked byte subtract.
template <bool kQ127>
inline __m512i quant64_fp16_core(__m512i ha, __m512i hb, __m512i ia, __m512i ib, __m512i P, __m512i r, __m512i Q) {
    const __m512i c400 = _mm512_set1_epi16(0x400), c7ff = _mm512_set1_epi16(0x7FF), zero = _mm512_setzero_si512();
    // m = (h | 0x400) & 0x7FF: ternary-logic table of (A | B) & C.
    const __m512i ma = _mm512_ternarylogic_epi32(ha, c400, c7ff, 0xA8);
    const __m512i mb = _mm512_ternarylogic_epi32(hb, c400, c7ff, 0xA8);
    const __m512i ga = _mm512_mulhrs_epi16(_mm512_mulhi_epu16(ma, r), _mm512_permutexvar_epi16(ia, P));
    const __m512i gb = _mm512_mulhrs_epi16(_mm512_mulhi_epu16(mb, r), _mm512_permutexvar_epi16(ib, P));
    __m512i mag = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), _mm512_packs_epi16(ga, gb));
    if (!kQ127) mag = _mm512_min_epu8(mag, Q);
    const __mmask64 neg = _mm512_kunpackd(__mmask64(_mm512_movepi16_mask(hb)), __mmask64(_mm512_movepi16_mask(ha)));
    return _mm512_mask_sub_epi8(mag, neg, zero, mag);
}

// The last n % 64 values: zero lanes quantise to 0 and are not stored.
inline void tail64_masks(size_t k, __mmask32 *ma, __mmask32 *mb) {
    *ma = k >= 32 ? __mmask32(0xFFFFFFFFu) : __mmask32((1u << k) - 1);
    *mb = k <= 32 ? __mmask32(0) : __mmask32((1u << (k - 32)) - 1);
}

// Base AVX-512: the index is h >> 10.
template <bool kQ127>
void quant_fp16_fast_base(const uint8_t *p, size_t n, __m512i P, __m512i rv, __m512i Qv, int8_t *q) {
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512i ha = _mm512_loadu_si512(p + 2 * i), hb = _mm512_loadu_si512(p + 2 * i + 64);
        _mm512_storeu_si512(q + i, quant64_fp16_core<kQ127>(ha, hb, _mm512_srli_epi16(ha, 10),
                                                            _mm512_srli_epi16(hb, 10), P, rv, Qv));
    }
    if (i < n) {
        __mmask32 ma, mb;
        tail64_masks(n - i, &ma, &mb);
        const __m512i ha = _mm512_maskz_loadu_epi16(ma, p + 2 * i), hb = _mm512_maskz_loadu_epi16(mb, p + 2 * i + 64);
        const __m512i v = quant64_fp16_core<kQ127>(ha, hb, _mm512_srli_epi16(ha, 10), _mm512_srli_epi16(hb, 10), P, rv, Qv);
        _mm512_mask_storeu_epi8(q + i, (__mmask64(1) << (n - i)) - 1, v);
    }
}

// AVX512-VBMI: the index by vpmultishiftqb (port 5) instead of a shift
// (port 0, which the sign masks already load): bits 10..17 of each word into
// its low byte (high byte: the same, ignored), e in bits 0..4.
template <bool kQ127>
__attribute__((target("avx512vbmi,avx512bw,avx512vl,avx512f"))) void quant_fp16_fast_vbmi(
    const uint8_t *p, size_t n, __m512i P, __m512i rv, __m512i Qv, int8_t *q) {
    const __m512i ctl = _mm512_set1_epi64(0x3A3A2A2A1A1A0A0ALL);  // bytes 10,10,26,26,42,42,58,58
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512i ha = _mm512_loadu_si512(p + 2 * i), hb = _mm512_loadu_si512(p + 2 * i + 64);
        _mm512_storeu_si512(q + i, quant64_fp16_core<kQ127>(ha, hb, _mm512_multishift_epi64_epi8(ctl, ha),
                                                            _mm512_multishift_epi64_epi8(ctl, hb), P, rv, Qv));
    }
    if (i < n) {
        __mmask32 ma, mb;
        tail64_masks(n - i, &ma, &mb);
        const __m512i ha = _mm512_maskz_loadu_epi16(ma, p + 2 * i), hb = _mm512_maskz_loadu_epi16(mb, p + 2 * i + 64);
        const __m512i v = quant64_fp16_core<kQ127>(ha, hb, _mm512_multishift_epi64_epi8(ctl, ha),
                                                   _mm512_multishift_epi64_epi8(ctl, hb), P, rv, Qv);
        _mm512_mask_storeu_epi8(q + i, (__mmask64(1) << (n - i)) - 1, v);
    }
}

bool g_det_vbmi = false, g_has_vbmi = false;

// P[e] = 1 << (14 - c), c = Es - 103 - e: 14 - c = e + 117 - Es; a count
// outside 0..15 (c > 14, or c < -1, no element there) shifts to 0; P[0] = 0.
inline __m512i fast_table(uint32_t es) {
    const __m512i iota = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13,
                                          12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i cnt = _mm512_sub_epi16(iota, _mm512_set1_epi16(short(es - 117)));
    return _mm512_maskz_sllv_epi16(__mmask32(0xFFFFFFFEu), _mm512_set1_epi16(1), cnt);
}

void quant_fp16_fast(const uint8_t *p, size_t n, uint32_t es, uint32_t r, uint32_t Q, int8_t *q) {
    const __m512i P = fast_table(es);
    const __m512i rv = _mm512_set1_epi16(short(r)), Qv = _mm512_set1_epi8(char(Q));
    if (g_has_vbmi)
        Q == 127 ? quant_fp16_fast_vbmi<true>(p, n, P, rv, Qv, q) : quant_fp16_fast_vbmi<false>(p, n, P, rv, Qv, q);
    else
        Q == 127 ? quant_fp16_fast_base<true>(p, n, P, rv, Qv, q) : quant_fp16_fast_base<false>(p, n, P, rv, Qv, q);
}

void quant_const_fp16_avx512(const void *h, size_t n, uint32_t es, uint32_t r, uint32_t Q, int8_t *q) {
    auto p = static_cast<const uint8_t *>(h);
    if (es < 104 || r == 0) {  // all-subnormal page (or zero scale): the general formula
        quant_const_fp16_scalar(h, n, es, r, Q, q);
        return;
    }
    if (es >= 114) return quant_fp16_fast(p, n, es, r, Q, q);
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

// One 64-byte step of the prefix sum (carry = the previous s in every byte).
__attribute__((target("avx512vbmi,avx512bw,avx512f"))) inline __m512i prefix64(__m512i x, __m512i carry,
                                                                                 const __m512i idx[6]) {
    x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0x1), idx[0], x));
    x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0x3), idx[1], x));
    x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0xF), idx[2], x));
    x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0xFF), idx[3], x));
    x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0xFFFF), idx[4], x));
    x = _mm512_add_epi8(x, _mm512_maskz_permutexvar_epi8(~__mmask64(0xFFFFFFFFull), idx[5], x));
    return _mm512_add_epi8(x, carry);
}

__attribute__((target("avx512vbmi,avx512bw,avx512f"))) bool undelta_vbmi(const uint8_t *b, size_t n, bool delta,
                                                                          uint32_t Q, int8_t *s) {
    const __m512i qv = _mm512_set1_epi8(int8_t(Q)), nq = _mm512_set1_epi8(int8_t(-int32_t(Q)));
    const __m512i iota = _mm512_set_epi8(63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45,
                                         44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26,
                                         25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6,
                                         5, 4, 3, 2, 1, 0);
    const __m512i idx[6] = {_mm512_sub_epi8(iota, _mm512_set1_epi8(1)), _mm512_sub_epi8(iota, _mm512_set1_epi8(2)),
                            _mm512_sub_epi8(iota, _mm512_set1_epi8(4)), _mm512_sub_epi8(iota, _mm512_set1_epi8(8)),
                            _mm512_sub_epi8(iota, _mm512_set1_epi8(16)), _mm512_sub_epi8(iota, _mm512_set1_epi8(32))};
    const __m512i last = _mm512_set1_epi8(63);
    __m512i carry = _mm512_setzero_si512(), mn = carry, mx = carry;
    size_t i = 0;
    // Whole vectors without a lane mask, so the six constant shift masks stay
    // in mask registers (with the tail mask too, the compiler rebuilt them
    // every step: 6 kmovq more on port 5, which the vpermb already load).
    if (delta) {
        for (; i + 64 <= n; i += 64) {
            const __m512i x = prefix64(_mm512_loadu_si512(b + i), carry, idx);
            carry = _mm512_permutexvar_epi8(last, x);
            mn = _mm512_min_epi8(mn, x), mx = _mm512_max_epi8(mx, x);
            _mm512_storeu_si512(s + i, x);
        }
    } else {
        for (; i + 64 <= n; i += 64) {
            const __m512i x = _mm512_loadu_si512(b + i);
            mn = _mm512_min_epi8(mn, x), mx = _mm512_max_epi8(mx, x);
            _mm512_storeu_si512(s + i, x);
        }
    }
    if (i < n) {
        const __mmask64 m = (__mmask64(1) << (n - i)) - 1;
        __m512i x = _mm512_maskz_loadu_epi8(m, b + i);
        if (delta) x = prefix64(x, carry, idx);
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

// §5/§6.0/§6.1 encoder side in 64-byte steps. Each vector is loaded exactly
// where the quantiser stored it (a narrower or offset load of bytes just
// stored is not forwarded from the store: it waits for the store to reach L1;
// measured, that was most of this pass) and shifted across lanes in
// registers. eq bit j = (d_j == d_{j+1}) comes from one byte compare per 64
// bytes; a run starts at j iff eq_j and eq_{j+1}: one rsm word from two
// masks, the next one lending its bit 0.
// Bytes x shifted up by one, with byte 63 of prev in front.
inline __m512i up1(__m512i x, __m512i prev) {
    return _mm512_alignr_epi8(x, _mm512_alignr_epi64(x, prev, 6), 15);
}
// Bytes d shifted down by one, with byte 0 of next at the end.
inline __m512i down1(__m512i d, __m512i next) {
    return _mm512_alignr_epi8(_mm512_alignr_epi64(next, d, 2), d, 1);
}

void delta_runs_avx512(const uint8_t *s, size_t n, bool delta, uint8_t *db, uint64_t *rsm) {
    __m512i prev = _mm512_setzero_si512(), dprev = prev;
    uint64_t eprev = 0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512i x = _mm512_loadu_si512(s + i);
        const __m512i d = delta ? _mm512_sub_epi8(x, up1(x, prev)) : x;
        _mm512_storeu_si512(db + i, d);
        if (rsm && i) {
            const uint64_t e = _mm512_cmpeq_epi8_mask(dprev, down1(dprev, d));
            if (i >= 128) rsm[i / 64 - 2] = eprev & ((eprev >> 1) | (e << 63));
            eprev = e;
        }
        prev = x, dprev = d;
    }
    // The last k = n - i < 64 bytes (maybe none) in one masked vector; lanes
    // past n only reach bits j with j + 2 >= n, which are cleared.
    const size_t k = n - i;
    const __mmask64 m = (__mmask64(1) << k) - 1;
    const __m512i x = _mm512_maskz_loadu_epi8(m, s + i);
    const __m512i d = delta ? _mm512_sub_epi8(x, up1(x, prev)) : x;
    _mm512_mask_storeu_epi8(db + i, m, d);
    if (!rsm) return;
    const __m512i zero = _mm512_setzero_si512();
    const uint64_t et = _mm512_cmpeq_epi8_mask(d, down1(d, zero));
    if (i) {
        const uint64_t e = _mm512_cmpeq_epi8_mask(dprev, down1(dprev, d));
        if (i >= 128) rsm[i / 64 - 2] = eprev & ((eprev >> 1) | (e << 63));
        // bits 62, 63 look at bytes i, i + 1
        rsm[i / 64 - 1] = e & ((e >> 1) | (et << 63)) & (k >= 2 ? ~0ull : k ? ~0ull >> 1 : ~0ull >> 2);
    }
    rsm[i / 64] = et & (et >> 1) & (k > 2 ? (__mmask64(1) << (k - 2)) - 1 : 0);
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
    absmax_fp16_avx512, quant_const_fp16_avx512, range_ok_avx512, delta_runs_avx512,
    rice_encode8_scalar, rice_decode8_scalar, rice_encode16_scalar, rice_decode16_scalar,
    srice_encode8_scalar, srice_decode8_scalar, srice_encode16_scalar, srice_decode16_scalar,
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
    if (!ok) return nullptr;
    // The Rice stage (codec_rice_avx512.cc) also needs BMI2; else the reference.
    static const Kernels table = [] {
        Kernels k = kAvx512;
        if (const RiceKernels *r = rice_avx512_kernels()) {
            k.rice_encode8 = r->encode8;
            k.rice_decode8 = r->decode8;
            k.rice_encode16 = r->encode16;
            k.rice_decode16 = r->decode16;
        }
        return k;
    }();
    return &table;
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
