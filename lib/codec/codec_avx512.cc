// SPDX-License-Identifier: Apache-2.0
// AVX-512 (F/BW/VL) kernels of the codec, 16 lanes with masked tails.
// In an "avx512f,avx512bw,avx512vl,f16c" target region (isa_target.h); only
// reached when the CPU has them. Must equal the scalar kernels bit for bit (docs/codec.md §2–§3).
// Two optional extensions, each behind its own CPUID check: AVX512-VBMI (a
// 64-byte prefix sum for the delta bytes, the exponent index of the FP16
// quantiser on port 5, and the FP16 dequantiser's 128-entry lookup) and
// AVX512-FP16 (FP16 pages dequantised 32 lanes at a time when the scale is a
// normal FP16 number; preferred over the lookup where the CPU has it).
#include "codec/codec_kernels.h"
#include "util/crc32c.h"
#include "speckv.h"

#include "util/cpu.h"
#include "util/isa_target.h"

#if SPECKV_X86_SIMD
#include <immintrin.h>

#include <cstdint>
#include <cstring>

SPECKV_TARGET_BEGIN("avx512f,avx512bw,avx512vl,f16c")

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
// AMD (Zen 4): vpmultishiftqb and vpsrlw issue at the same rate there, and the
// shift form measured faster (94 vs 99 ns per 2048 values), so the VBMI
// index of the quantiser is an Intel choice (port 5 vs port 0, round 3).
bool g_amd = false;

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
    if (g_has_vbmi && !g_amd)
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

// The AVX512-FP16 kernels need the __m512h type without -mavx512fp16, which GCC 12 and
// clang >= 16 provide; with an older clang (the fuzz preset's clang 14) they are left out
// and FP16 pages take the VBMI or the FP32 route, which give the same bytes.
#if defined(__clang__) && __clang_major__ < 16
#define SPECKV_FP16_KERNELS 0
#else
#define SPECKV_FP16_KERNELS 1
#endif

inline bool fp16_scale(uint16_t scale, uint16_t *s16) {
    const uint32_t es = scale >> 7;
    if (scale == 0 || es < 113 || es > 142) return false;
    *s16 = uint16_t(((es - 112) << 10) | ((scale & 0x7Fu) << 3));
    return true;
}

#if SPECKV_FP16_KERNELS
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

#endif  // SPECKV_FP16_KERNELS

// ---- FP16 pages without AVX512-FP16 (e.g. AMD Zen 4): the exact FP32 route.
// q (|q| <= 127) -> int32 -> FP32 is exact; S = the scale field << 16 is the
// FP32 value Ms * 2^(Es - 134), normal for 20 <= Es <= 226; q * S has
// |q| * Ms < 2^15 significant bits and 2^-107 <= |q * S| < 2^107, so the FP32
// product is exact and normal: no rounding, and MXCSR's rounding mode,
// FTZ and DAZ cannot touch it. That is docs §3.4's exact value. vcvtps2ph
// with an immediate RNE (imm8 bit 2 clear: MXCSR.RC ignored; it never
// flushes: MXCSR.FTZ does not apply to it) is the IEEE binary32 -> binary16
// conversion, subnormal results and underflow to a signed zero included, the
// same as fp32bits_to_fp16_sat but for the overflow: IEEE RNE gives +-Inf
// exactly when |x| >= 65520, where §3.4 wants +-65504. Clamping x to
// [-65504, 65504] first gives that (x >= 65520 -> 65504 -> 0x7BFF; x in
// (65504, 65520) rounds to 65504 either way). A zero scale field decodes to
// +0 whatever q is (q * +0 would give -0 for q < 0): handled before.

// 16 values, clamped only when some product can reach 65520: 127 * S >=
// 65520 needs S > 512, and S < 2^(Es - 126), so never when Es <= 135.
template <bool kClamp>
inline __m256i deq16_fp16(__m128i q8, __m512 S) {
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q8)), S);
    if (kClamp) f = _mm512_max_ps(_mm512_min_ps(f, _mm512_set1_ps(65504.f)), _mm512_set1_ps(-65504.f));
    return _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

template <bool kClamp>
void deq_fp16_f32_t(const int8_t *q, size_t n, __m512 S, uint8_t *o) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i a = deq16_fp16<kClamp>(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q + i)), S);
        const __m256i b = deq16_fp16<kClamp>(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q + i + 16)), S);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(o + 2 * i), a);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(o + 2 * i + 32), b);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = tail(n - i);
        _mm256_mask_storeu_epi16(o + 2 * i, m, deq16_fp16<kClamp>(_mm_maskz_loadu_epi8(m, q + i), S));
    }
}

inline __m512 scale_f32(uint16_t scale) { return _mm512_castsi512_ps(_mm512_set1_epi32(int(uint32_t(scale) << 16))); }

void deq_fp16_f32(const int8_t *q, size_t n, uint16_t scale, uint8_t *o) {
    if (scale >= (136u << 7))
        deq_fp16_f32_t<true>(q, n, scale_f32(scale), o);
    else
        deq_fp16_f32_t<false>(q, n, scale_f32(scale), o);
}

// With AVX512-VBMI, long runs of one scale (a page group): the 128 results
// T[k] = FP16(k * S), k = 0..127, computed once by the FP32 route above, then
// one lookup per value: FP16(q * S) = T[|q|] | (q < 0 ? 0x8000 : 0), because
// RNE and the saturation are symmetric in the sign (an underflow of a
// negative q gives -0, as §3.4 says; q = 0 gives T[0] = +0). |q| <= 127
// holds for every q the decoder passes (|q| <= Q <= 127 is checked first).
// T is kept as two 128-byte halves, low and high bytes, for vpermi2b
// (7-bit index: bit 6 picks the register).
struct Fp16Table {
    __m512i lo0, lo1, hi0, hi1;  // low / high bytes of T[0..63], T[64..127]
};

alignas(64) constexpr float kIota128[128] = {
    0,   1,   2,   3,   4,   5,   6,   7,   8,   9,   10,  11,  12,  13,  14,  15,  16,  17,  18,  19,  20,  21,
    22,  23,  24,  25,  26,  27,  28,  29,  30,  31,  32,  33,  34,  35,  36,  37,  38,  39,  40,  41,  42,  43,
    44,  45,  46,  47,  48,  49,  50,  51,  52,  53,  54,  55,  56,  57,  58,  59,  60,  61,  62,  63,  64,  65,
    66,  67,  68,  69,  70,  71,  72,  73,  74,  75,  76,  77,  78,  79,  80,  81,  82,  83,  84,  85,  86,  87,
    88,  89,  90,  91,  92,  93,  94,  95,  96,  97,  98,  99,  100, 101, 102, 103, 104, 105, 106, 107, 108, 109,
    110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127};

__attribute__((target("avx512vbmi,avx512bw,avx512vl,avx512f"))) inline Fp16Table fp16_table(uint16_t scale) {
    const __m512 S = scale_f32(scale);
    // T[k] >= 0: the saturation is min(h, 0x7BFF) on the bits (0x7C00 = +Inf
    // is the only finite-or-Inf pattern above 0x7BFF that can appear).
    const __m512i maxh = _mm512_set1_epi16(0x7BFF);
    // Four named vectors, not an array: GCC kept an array on the stack (a
    // store and a reload on the table's latency path, ahead of every lookup).
    auto words = [&](int k) __attribute__((always_inline)) {
        const __m256i a = _mm512_cvtps_ph(_mm512_mul_ps(_mm512_load_ps(kIota128 + 32 * k), S),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m256i b = _mm512_cvtps_ph(_mm512_mul_ps(_mm512_load_ps(kIota128 + 32 * k + 16), S),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        return _mm512_min_epu16(_mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1), maxh);
    };
    const __m512i w[4] = {words(0), words(1), words(2), words(3)};
    // Even / odd bytes of two vectors of 32 words: the low / high byte planes.
    const __m512i even = _mm512_set_epi8(126, 124, 122, 120, 118, 116, 114, 112, 110, 108, 106, 104, 102, 100, 98, 96,
                                         94, 92, 90, 88, 86, 84, 82, 80, 78, 76, 74, 72, 70, 68, 66, 64, 62, 60, 58, 56,
                                         54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28, 26, 24, 22, 20, 18, 16,
                                         14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi8(even, _mm512_set1_epi8(1));
    return {_mm512_permutex2var_epi8(w[0], even, w[1]), _mm512_permutex2var_epi8(w[2], even, w[3]),
            _mm512_permutex2var_epi8(w[0], odd, w[1]), _mm512_permutex2var_epi8(w[2], odd, w[3])};
}

// 64 values -> 64 FP16 words in two vectors. The qwords of q are first put
// in the order 0 4 1 5 2 6 3 7, so that the in-lane byte interleave of the
// low and high planes (vpunpck{l,h}bw) yields words 0..31 and 32..63 in order.
__attribute__((target("avx512vbmi,avx512bw,avx512vl,avx512f"))) inline void fp16_lookup64(__m512i x,
                                                                                           const Fp16Table &t,
                                                                                           __m512i *w0, __m512i *w1) {
    x = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 4, 1, 5, 2, 6, 3, 7), x);
    const __m512i a = _mm512_abs_epi8(x);
    const __m512i lo = _mm512_permutex2var_epi8(t.lo0, a, t.lo1);
    // high byte | sign of q: ternary-logic table of A | (B & C)
    const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(t.hi0, a, t.hi1), x,
                                                 _mm512_set1_epi8(char(0x80)), 0xF8);
    *w0 = _mm512_unpacklo_epi8(lo, hi);
    *w1 = _mm512_unpackhi_epi8(lo, hi);
}

// Stores are the bound here (4 KiB out per 2 KiB in), and a 64-byte store
// that is not 32-byte aligned costs two (measured on Zen 4: 4 KiB in 49 ns
// instead of 40), so when the output is only 2-byte aligned the first
// vector is a masked one of the w0 < 16 words that reach 32-byte alignment.
__attribute__((target("avx512vbmi,avx512bw,avx512vl,avx512f"))) inline void deq_fp16_lookup(const int8_t *q, size_t n,
                                                                                              const Fp16Table &t,
                                                                                              uint8_t *o) {
    __m512i w0, w1;
    size_t i = 0;
    const uintptr_t mis = reinterpret_cast<uintptr_t>(o) & 31;
    if (mis && !(mis & 1)) {
        i = (32 - mis) / 2;  // < 16 <= n
        fp16_lookup64(_mm512_maskz_loadu_epi8((__mmask64(1) << i) - 1, q), t, &w0, &w1);
        _mm512_mask_storeu_epi16(o, (__mmask32(1) << i) - 1, w0);
    }
    for (; i + 64 <= n; i += 64) {
        fp16_lookup64(_mm512_loadu_si512(q + i), t, &w0, &w1);
        _mm512_storeu_si512(o + 2 * i, w0);
        _mm512_storeu_si512(o + 2 * i + 64, w1);
    }
    if (i < n) {  // zero lanes past n are looked up and not stored
        const size_t k = n - i;
        __mmask32 ma, mb;
        tail64_masks(k, &ma, &mb);
        fp16_lookup64(_mm512_maskz_loadu_epi8((__mmask64(1) << k) - 1, q + i), t, &w0, &w1);
        _mm512_mask_storeu_epi16(o + 2 * i, ma, w0);
        _mm512_mask_storeu_epi16(o + 2 * i + 64, mb, w1);
    }
}

__attribute__((target("avx512vbmi,avx512bw,avx512vl,avx512f"))) void deq_fp16_table(const int8_t *q, size_t n,
                                                                                      uint16_t scale, uint8_t *o) {
    deq_fp16_lookup(q, n, fp16_table(scale), o);
}

// The table costs about as much as 200 values of the FP32 route.
constexpr size_t kFp16TableMin = 256;

void deq_fp16(const int8_t *q, size_t n, uint16_t scale, uint8_t *o) {
    if (scale == 0) {
        std::memset(o, 0, 2 * n);
        return;
    }
    if (g_has_vbmi && n >= kFp16TableMin) return deq_fp16_table(q, n, scale, o);
    deq_fp16_f32(q, n, scale, o);
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

// int8 range check: |int8(b)| <= Q for all bytes, as one unsigned byte max
// of vpabsb (|-128| is 0x80 = 128 > Q) and one compare at the end. Each
// byte is loaded once, by aligned vectors (the stream of a record starts at
// an odd offset; a misaligned 64-byte load costs two line reads); the
// first and last vectors are masked to [b, b + n), masked-out lanes are 0.
bool range_ok_avx512(const uint8_t *b, size_t n, uint32_t Q) {
    if (n == 0) return true;
    const size_t head = reinterpret_cast<uintptr_t>(b) & 63;  // b - head is 64-byte aligned
    const uint8_t *const p = b - head;
    const size_t end = head + n;                               // offsets from p
    __mmask64 m = ~__mmask64(0) << head;
    if (end < 64) m &= (__mmask64(1) << end) - 1;
    __m512i m0 = _mm512_abs_epi8(_mm512_maskz_loadu_epi8(m, p)), m1 = _mm512_setzero_si512();
    size_t i = 64;
    for (; i + 128 <= end; i += 128) {
        m0 = _mm512_max_epu8(m0, _mm512_abs_epi8(_mm512_load_si512(p + i)));
        m1 = _mm512_max_epu8(m1, _mm512_abs_epi8(_mm512_load_si512(p + i + 64)));
    }
    for (; i < end; i += 64) {
        m = end - i >= 64 ? ~__mmask64(0) : (__mmask64(1) << (end - i)) - 1;
        m0 = _mm512_max_epu8(m0, _mm512_abs_epi8(_mm512_maskz_loadu_epi8(m, p + i)));
    }
    return _mm512_cmpgt_epu8_mask(_mm512_max_epu8(m0, m1), _mm512_set1_epi8(char(Q))) == 0;
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
    if (dtype == SPECKV_DTYPE_FP16) {
#if SPECKV_FP16_KERNELS
        if (g_has_fp16 && fp16_scale(scale, &s16)) return deq_fp16_ph(q, n, s16, o);
#endif
        return deq_fp16(q, n, scale, o);
    }
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

// The same for int16 values (b 9..12): |q| * Ms < 2^19, so q * S is exact
// in binary32 as for int8 (docs §13), and store16's conversions apply.
inline __m512 deq16w(__mmask16 m, const int16_t *q, __m512 S) {
    __m256i w = _mm256_maskz_loadu_epi16(m, q);
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(w)), S);
    __mmask16 z = _mm512_cmp_ps_mask(f, _mm512_setzero_ps(), _CMP_EQ_OQ);
    return _mm512_mask_mov_ps(f, z, _mm512_setzero_ps());  // -0 from a zero scale -> +0
}

void dequant_const16_avx512(const int16_t *q, size_t n, uint16_t scale, int dtype, void *out) {
    auto o = static_cast<uint8_t *>(out);
    const size_t esz = dtype == SPECKV_DTYPE_FP32 ? 4 : 2;
    const __m512 S = _mm512_castsi512_ps(_mm512_set1_epi32(int(uint32_t(scale) << 16)));
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail(n - i);
        store16(m, deq16w(m, q + i, S), dtype, o + i * esz);
    }
}

void dequant_row16_avx512(const int16_t *q, size_t C, const uint16_t *scale, int dtype, void *out) {
    auto o = static_cast<uint8_t *>(out);
    const size_t esz = dtype == SPECKV_DTYPE_FP32 ? 4 : 2;
    for (size_t c = 0; c < C; c += 16) {
        __mmask16 m = tail(C - c);
        __m256i s16 = _mm256_maskz_loadu_epi16(m, scale + c);
        __m512 S = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(s16), 16));
        store16(m, deq16w(m, q + c, S), dtype, o + c * esz);
    }
}

// ---- int8 records in one pass (codec_kernels.h: int8_decode_fp16,
// int8_encode_fp16). The record's CRC32C is bound by VPCLMULQDQ, which on
// Zen 4 issues once per 2 cycles at any width but on a unit of its own:
// the quantiser's multiplies and shuffles, and the decoder's range check,
// run beside it (measured: a 512-bit fold pair with vpermb, vpmulhuw,
// vpsrlw or vpabsb takes the fold's 4 cycles). So the encoder folds each
// 64-byte vector of q into the CRC as it leaves the quantiser, and the
// decoder folds, range-checks, dequantises and stores each vector it loads,
// in one pass (crc_range_deq; dst is unspecified when a check fails, which
// the caller then reports). On Intel
// (VPCLMULQDQ on port 5 with the shuffles) round 3 found no gain from this:
// these entries are set on AMD only.
//
// The folding is lib/util/crc32c.cc's (its comment derives the conventions and
// the constants): four 512-bit accumulators 256 bytes apart, or one when a
// quantiser feeds it; then one 128-bit lane, crc32q of the lane from zero,
// crc32q/crc32b of the tail. tests/codec checks every length and offset
// against speckv::crc32c.
#define SPECKV_CRC_TARGET "sse4.2,pclmul,vpclmulqdq,avx512vbmi,avx512bw,avx512vl,avx512f"

// {K_H, K_L} of a fold over D bits (crc32c.h, crc_fold): the constants of lib/crc32c.cc.
using CrcK = crc_fold::FoldK;
constexpr CrcK crc_fold_k(unsigned d) { return crc_fold::fold_k(d); }
static_assert(crc_fold::bitrev32(crc_fold::xpow_mod_p(32)) == 0x82F63B78u);
constexpr CrcK kCrc128 = crc_fold_k(128), kCrc256 = crc_fold_k(256), kCrc384 = crc_fold_k(384),
               kCrc512 = crc_fold_k(512), kCrc1024 = crc_fold_k(1024), kCrc1536 = crc_fold_k(1536),
               kCrc2048 = crc_fold_k(2048);

__attribute__((target(SPECKV_CRC_TARGET), always_inline)) inline __m512i crc_k512(CrcK k) {
    const auto h = static_cast<long long>(k.kh), l = static_cast<long long>(k.kl);
    return _mm512_set_epi64(l, h, l, h, l, h, l, h);
}
__attribute__((target(SPECKV_CRC_TARGET), always_inline)) inline __m512i crc_fold512(__m512i a, __m512i k, __m512i b) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00), _mm512_clmulepi64_epi128(a, k, 0x11), b,
                                     0x96);
}

// The raw register after one 512-bit accumulator z that holds the message up
// to p[i], then p[i..n) (n - i < 64 bytes, read from memory).
__attribute__((target(SPECKV_CRC_TARGET), always_inline)) inline uint32_t crc_finish(__m512i z, const uint8_t *p,
                                                                                       size_t i, size_t n) {
    // Lanes 0..3 of z are 384, 256, 128, 0 bits before p[i]; lane 3's
    // constant is 0, so it is xored in as it is.
    const __m512i kl = _mm512_set_epi64(0, 0, static_cast<long long>(kCrc128.kl), static_cast<long long>(kCrc128.kh),
                                        static_cast<long long>(kCrc256.kl), static_cast<long long>(kCrc256.kh),
                                        static_cast<long long>(kCrc384.kl), static_cast<long long>(kCrc384.kh));
    const __m512i f = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(z, kl, 0x00), _mm512_clmulepi64_epi128(z, kl, 0x11),
                                                _mm512_maskz_mov_epi64(0xC0, z), 0x96);
    const __m256i h = _mm256_xor_si256(_mm512_castsi512_si256(f), _mm512_extracti64x4_epi64(f, 1));
    __m128i x = _mm_xor_si128(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    const __m128i k1 = _mm_set_epi64x(static_cast<long long>(kCrc128.kl), static_cast<long long>(kCrc128.kh));
    for (; i + 16 <= n; i += 16)
        x = _mm_ternarylogic_epi64(_mm_clmulepi64_si128(x, k1, 0x00), _mm_clmulepi64_si128(x, k1, 0x11),
                                   _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + i)), 0x96);
    // The folded lane is congruent to 16 message bytes: crc32q from zero.
    uint64_t r = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
    r = _mm_crc32_u64(r, static_cast<uint64_t>(_mm_extract_epi64(x, 1)));
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        std::memcpy(&v, p + i, 8);
        r = _mm_crc32_u64(r, v);
    }
    for (; i < n; i++) r = _mm_crc32_u8(static_cast<uint32_t>(r), p[i]);
    return static_cast<uint32_t>(r);
}

// A vector loaded once: without this GCC folds the load into both of its
// uses (vpminsb/vpmaxsb and vpternlogq), loading each misaligned 64 bytes twice.
#define SPECKV_IN_REG(v) asm("" : "+v"(v))

// The raw register of q[0..n) after raw register c (n >= 256), and
// *ok = every int8(q_i) in [-Q, Q] (signed byte min/max beside the folds).
__attribute__((target(SPECKV_CRC_TARGET))) inline uint32_t crc_range(uint32_t c, const uint8_t *q, size_t n,
                                                                     uint32_t Q, bool *ok) {
    __m512i a0 = _mm512_loadu_si512(q), a1 = _mm512_loadu_si512(q + 64), a2 = _mm512_loadu_si512(q + 128),
            a3 = _mm512_loadu_si512(q + 192);
    SPECKV_IN_REG(a0);
    SPECKV_IN_REG(a1);
    SPECKV_IN_REG(a2);
    SPECKV_IN_REG(a3);
    __m512i mn0 = _mm512_min_epi8(a0, a1), mn1 = _mm512_min_epi8(a2, a3);
    __m512i mx0 = _mm512_max_epi8(a0, a1), mx1 = _mm512_max_epi8(a2, a3);
    __m512i z0 = _mm512_xor_si512(a0, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(c))));
    __m512i z1 = a1, z2 = a2, z3 = a3;
    size_t i = 256;
    const __m512i k4 = crc_k512(kCrc2048);
    for (; i + 256 <= n; i += 256) {
        a0 = _mm512_loadu_si512(q + i), a1 = _mm512_loadu_si512(q + i + 64);
        a2 = _mm512_loadu_si512(q + i + 128), a3 = _mm512_loadu_si512(q + i + 192);
        SPECKV_IN_REG(a0);
        SPECKV_IN_REG(a1);
        SPECKV_IN_REG(a2);
        SPECKV_IN_REG(a3);
        mn0 = _mm512_min_epi8(mn0, _mm512_min_epi8(a0, a1));
        mn1 = _mm512_min_epi8(mn1, _mm512_min_epi8(a2, a3));
        mx0 = _mm512_max_epi8(mx0, _mm512_max_epi8(a0, a1));
        mx1 = _mm512_max_epi8(mx1, _mm512_max_epi8(a2, a3));
        z0 = crc_fold512(z0, k4, a0);
        z1 = crc_fold512(z1, k4, a1);
        z2 = crc_fold512(z2, k4, a2);
        z3 = crc_fold512(z3, k4, a3);
    }
    // z0 * x^1536 + z1 * x^1024 + z2 * x^512 + z3 (z3 xored in three times: once).
    __m512i z = _mm512_ternarylogic_epi64(crc_fold512(z0, crc_k512(kCrc1536), z3), crc_fold512(z1, crc_k512(kCrc1024), z3),
                                          crc_fold512(z2, crc_k512(kCrc512), z3), 0x96);
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_loadu_si512(q + i);
        SPECKV_IN_REG(a0);
        mn0 = _mm512_min_epi8(mn0, a0);
        mx0 = _mm512_max_epi8(mx0, a0);
        z = crc_fold512(z, crc_k512(kCrc512), a0);
    }
    if (i < n) {  // the range of the last n - i < 64 bytes (zero lanes past n)
        const __m512i t = _mm512_maskz_loadu_epi8((__mmask64(1) << (n - i)) - 1, q + i);
        mn1 = _mm512_min_epi8(mn1, t);
        mx1 = _mm512_max_epi8(mx1, t);
    }
    const __m512i qv = _mm512_set1_epi8(int8_t(Q)), nq = _mm512_set1_epi8(int8_t(-int32_t(Q)));
    *ok = (_mm512_cmpgt_epi8_mask(_mm512_max_epi8(mx0, mx1), qv) |
           _mm512_cmpgt_epi8_mask(nq, _mm512_min_epi8(mn0, mn1))) == 0;
    return crc_finish(z, q, i, n);
}

// ---- int8 decode in one pass (AMD): each 64-byte vector of q is loaded
// once and, in the same iteration, folded into the CRC (VPCLMULQDQ, a unit
// of its own on Zen 4), checked against Q (an unsigned byte max of the
// |q| the lookup makes anyway: |-128| = 128 > Q), looked up in the 128-entry
// table and stored, so the folds and the shuffles and stores overlap instead
// of running as two passes. dst is written before the CRC is known; the
// caller's contract (codec.h decode) leaves dst unspecified on error.

// 64 values -> 64 FP16 words; *amax |= max |q| per byte lane. The byte
// planes are looked up in q's order and interleaved by two vpermt2b (the
// round-5 form, vpermq + vpunpck{l,h}bw, is one shuffle more per vector and
// measured 6 ns slower per page in this loop: the vector pipes are the bound
// here, folds, lookups and store data together). sgn = 0x80 per byte, or 0 for a zero scale
// field, whose table is all +0 and whose values must stay +0 (§3.4).
__attribute__((target(SPECKV_CRC_TARGET), always_inline)) inline void lookup64_fused(__m512i x, const Fp16Table &t,
                                                                                     __m512i sgn, __m512i il0,
                                                                                     __m512i il1, __m512i *amax,
                                                                                     __m512i *w0, __m512i *w1) {
    const __m512i a = _mm512_abs_epi8(x);
    *amax = _mm512_max_epu8(*amax, a);
    const __m512i lo = _mm512_permutex2var_epi8(t.lo0, a, t.lo1);
    const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(t.hi0, a, t.hi1), x, sgn, 0xF8);
    *w0 = _mm512_permutex2var_epi8(lo, il0, hi);
    *w1 = _mm512_permutex2var_epi8(lo, il1, hi);
}

// The raw CRC register c continued over p[0..k), k < 16, by crc32 steps
// (4 at most, so the folds' chain starts ~12 cycles later, not 45).
__attribute__((target(SPECKV_CRC_TARGET), always_inline)) inline uint32_t crc_short(uint32_t c, const uint8_t *p,
                                                                                    size_t k) {
    uint64_t r = c;
    size_t i = 0;
    if (k & 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        r = _mm_crc32_u64(r, v), i += 8;
    }
    if (k & 4) {
        uint32_t v;
        std::memcpy(&v, p + i, 4);
        r = _mm_crc32_u32(uint32_t(r), v), i += 4;
    }
    if (k & 2) {
        uint16_t v;
        std::memcpy(&v, p + i, 2);
        r = _mm_crc32_u16(uint32_t(r), v), i += 2;
    }
    if (k & 1) r = _mm_crc32_u8(uint32_t(r), p[i]);
    return uint32_t(r);
}

// The raw register of q[0..n) after raw register c (n >= 256), *ok = every
// int8(q_i) in [-Q, Q], and the n FP16 values FP16(q_i * S) (scale field
// `scale`, the lookup of deq_fp16_lookup: the same bits) written to o, all
// in one pass. Written whatever the checks find.
__attribute__((target(SPECKV_CRC_TARGET))) uint32_t crc_range_deq(uint32_t c, const uint8_t *q, size_t n, uint32_t Q,
                                                                  uint16_t scale, uint8_t *o, bool *ok) {
    const Fp16Table t = fp16_table(scale);
    const __m512i sgn = _mm512_set1_epi8(scale ? char(0x80) : 0);
    // Words 0..31 / 32..63 of the result: word j = (lo[j], hi[j]); in
    // vpermt2b's index, bit 6 picks hi.
    alignas(64) static constexpr uint8_t kIl[128] = {
        0,  64, 1,  65, 2,  66, 3,  67, 4,  68, 5,  69, 6,  70, 7,  71, 8,  72, 9,  73, 10, 74,
        11, 75, 12, 76, 13, 77, 14, 78, 15, 79, 16, 80, 17, 81, 18, 82, 19, 83, 20, 84, 21, 85,
        22, 86, 23, 87, 24, 88, 25, 89, 26, 90, 27, 91, 28, 92, 29, 93, 30, 94, 31, 95,
        32, 96, 33, 97, 34, 98, 35, 99, 36, 100, 37, 101, 38, 102, 39, 103, 40, 104, 41, 105, 42, 106,
        43, 107, 44, 108, 45, 109, 46, 110, 47, 111, 48, 112, 49, 113, 50, 114, 51, 115, 52, 116, 53, 117,
        54, 118, 55, 119, 56, 120, 57, 121, 58, 122, 59, 123, 60, 124, 61, 125, 62, 126, 63, 127};
    const __m512i il0 = _mm512_load_si512(kIl), il1 = _mm512_load_si512(kIl + 64);
    __m512i amax = _mm512_setzero_si512(), w0, w1;
    // Stores are 2 per 64 values, and a 64-byte store that is not 32-byte
    // aligned costs two (round 5): the first h < 16 values, masked, bring o
    // to 32-byte alignment (when o is even), their CRC by crc32 steps.
    size_t h = 0;
    const uintptr_t mis = reinterpret_cast<uintptr_t>(o) & 31;
    if (mis && !(mis & 1)) {
        h = (32 - mis) / 2;
        lookup64_fused(_mm512_maskz_loadu_epi8((__mmask64(1) << h) - 1, q), t, sgn, il0, il1, &amax, &w0, &w1);
        _mm512_mask_storeu_epi16(o, (__mmask32(1) << h) - 1, w0);
        c = crc_short(c, q, h);
    }
    const uint8_t *p = q + h;
    uint8_t *op = o + 2 * h;
    const size_t m = n - h;  // > 240
    // (A macro, not a lambda: a lambda does not inherit the target attribute.)
#define SPECKV_STEP(v, i)                                                  \
    do {                                                                   \
        lookup64_fused(v, t, sgn, il0, il1, &amax, &w0, &w1);              \
        _mm512_storeu_si512(op + 2 * (i), w0);                             \
        _mm512_storeu_si512(op + 2 * (i) + 64, w1);                        \
    } while (0)
    __m512i a0 = _mm512_loadu_si512(p), z;
    SPECKV_IN_REG(a0);
    size_t i;
    if (m >= 256) {  // four accumulators 256 bytes apart, as crc_range
        __m512i a1 = _mm512_loadu_si512(p + 64), a2 = _mm512_loadu_si512(p + 128), a3 = _mm512_loadu_si512(p + 192);
        SPECKV_IN_REG(a1);
        SPECKV_IN_REG(a2);
        SPECKV_IN_REG(a3);
        SPECKV_STEP(a0, 0);
        SPECKV_STEP(a1, 64);
        SPECKV_STEP(a2, 128);
        SPECKV_STEP(a3, 192);
        __m512i z0 = _mm512_xor_si512(a0, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(c))));
        __m512i z1 = a1, z2 = a2, z3 = a3;
        const __m512i k4 = crc_k512(kCrc2048);
        for (i = 256; i + 256 <= m; i += 256) {
            a0 = _mm512_loadu_si512(p + i), a1 = _mm512_loadu_si512(p + i + 64);
            a2 = _mm512_loadu_si512(p + i + 128), a3 = _mm512_loadu_si512(p + i + 192);
            SPECKV_IN_REG(a0);
            SPECKV_IN_REG(a1);
            SPECKV_IN_REG(a2);
            SPECKV_IN_REG(a3);
            z0 = crc_fold512(z0, k4, a0);
            z1 = crc_fold512(z1, k4, a1);
            z2 = crc_fold512(z2, k4, a2);
            z3 = crc_fold512(z3, k4, a3);
            SPECKV_STEP(a0, i);
            SPECKV_STEP(a1, i + 64);
            SPECKV_STEP(a2, i + 128);
            SPECKV_STEP(a3, i + 192);
        }
        z = _mm512_ternarylogic_epi64(crc_fold512(z0, crc_k512(kCrc1536), z3), crc_fold512(z1, crc_k512(kCrc1024), z3),
                                      crc_fold512(z2, crc_k512(kCrc512), z3), 0x96);
    } else {  // 240 < m < 256: one accumulator
        SPECKV_STEP(a0, 0);
        z = _mm512_xor_si512(a0, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(c))));
        i = 64;
    }
    for (; i + 64 <= m; i += 64) {
        a0 = _mm512_loadu_si512(p + i);
        SPECKV_IN_REG(a0);
        z = crc_fold512(z, crc_k512(kCrc512), a0);
        SPECKV_STEP(a0, i);
    }
    if (i < m) {  // the last m - i < 64 values: zero lanes past n are looked up and not stored
        const size_t k = m - i;
        __mmask32 ma, mb;
        tail64_masks(k, &ma, &mb);
        lookup64_fused(_mm512_maskz_loadu_epi8((__mmask64(1) << k) - 1, p + i), t, sgn, il0, il1, &amax, &w0, &w1);
        _mm512_mask_storeu_epi16(op + 2 * i, ma, w0);
        _mm512_mask_storeu_epi16(op + 2 * i + 64, mb, w1);
    }
#undef SPECKV_STEP
    *ok = _mm512_cmpgt_epu8_mask(amax, _mm512_set1_epi8(char(Q))) == 0;
    return crc_finish(z, p, i, m);
}

__attribute__((target(SPECKV_CRC_TARGET))) uint32_t int8_decode_fp16_avx512(uint32_t crc, const uint8_t *payload,
                                                                              size_t n, uint32_t Q, uint32_t want,
                                                                              void *dst, bool *written) {
    *written = false;
    const uint16_t scale = uint16_t(payload[0] | (payload[1] << 8));
    const auto *q = reinterpret_cast<const int8_t *>(payload + 2);
    uint32_t c;
    bool ok;
    if (n >= kFp16TableMin && g_has_vbmi) {  // the lookup's one pass (always, on the AMD CPUs this runs on)
        c = ~crc_range_deq(_mm_crc32_u16(~crc, scale), payload + 2, n, Q, scale, static_cast<uint8_t *>(dst), &ok);
        *written = c == want && ok;
        return c;
    }
    if (n >= 256) {  // the VBMI lookup switched off (tests): CRC and range in one pass, then the values
        c = ~crc_range(_mm_crc32_u16(~crc, scale), payload + 2, n, Q, &ok);
    } else {  // short pages: the two passes
        c = crc32c(crc, payload, 2 + n);
        ok = range_ok_avx512(payload + 2, n, Q);
    }
    if (c != want || !ok) return c;
    // (The table is made here, not during the folds: measured slower there.)
    dequant_const_avx512(q, n, scale, SPECKV_DTYPE_FP16, dst);
    *written = true;
    return c;
}

// quant_fp16_fast_base with the CRC folded in (n >= 64), one accumulator:
// a fold's latency (clmul + xor, ~5 cycles) is below the quantiser's ~10
// cycles per 64 values. c: the raw register so far; returns the raw one.
template <bool kQ127>
__attribute__((target(SPECKV_CRC_TARGET))) uint32_t quant_crc_fast(const uint8_t *p, size_t n, __m512i P, __m512i rv,
                                                                    __m512i Qv, int8_t *q, uint32_t c) {
    const __m512i k1 = crc_k512(kCrc512);
    __m512i ha = _mm512_loadu_si512(p), hb = _mm512_loadu_si512(p + 64);
    __m512i v = quant64_fp16_core<kQ127>(ha, hb, _mm512_srli_epi16(ha, 10), _mm512_srli_epi16(hb, 10), P, rv, Qv);
    _mm512_storeu_si512(q, v);
    __m512i z = _mm512_xor_si512(v, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(c))));
    size_t i = 64;
    for (; i + 64 <= n; i += 64) {
        ha = _mm512_loadu_si512(p + 2 * i), hb = _mm512_loadu_si512(p + 2 * i + 64);
        v = quant64_fp16_core<kQ127>(ha, hb, _mm512_srli_epi16(ha, 10), _mm512_srli_epi16(hb, 10), P, rv, Qv);
        _mm512_storeu_si512(q + i, v);
        z = crc_fold512(z, k1, v);
    }
    if (i < n) {  // the last n - i < 64 values, CRC'd from memory by crc_finish
        __mmask32 ma, mb;
        tail64_masks(n - i, &ma, &mb);
        ha = _mm512_maskz_loadu_epi16(ma, p + 2 * i), hb = _mm512_maskz_loadu_epi16(mb, p + 2 * i + 64);
        v = quant64_fp16_core<kQ127>(ha, hb, _mm512_srli_epi16(ha, 10), _mm512_srli_epi16(hb, 10), P, rv, Qv);
        _mm512_mask_storeu_epi8(q + i, (__mmask64(1) << (n - i)) - 1, v);
    }
    return crc_finish(z, reinterpret_cast<const uint8_t *>(q), i, n);
}

__attribute__((target(SPECKV_CRC_TARGET))) uint32_t int8_encode_fp16_avx512(const void *h, size_t n, uint32_t es,
                                                                              uint32_t r, uint32_t Q, uint16_t field,
                                                                              int8_t *q, uint32_t crc) {
    const uint32_t c = _mm_crc32_u16(~crc, field);  // the raw register after the scale field
    if (es < 114 || r == 0 || n < 64) {            // quant_const_fp16's other cases, then the CRC
        quant_const_fp16_avx512(h, n, es, r, Q, q);
        return crc32c(~c, q, n);
    }
    const __m512i P = fast_table(es);
    const __m512i rv = _mm512_set1_epi16(short(r)), Qv = _mm512_set1_epi8(char(Q));
    auto p = static_cast<const uint8_t *>(h);
    return ~(Q == 127 ? quant_crc_fast<true>(p, n, P, rv, Qv, q, c) : quant_crc_fast<false>(p, n, P, rv, Qv, q, c));
}

const Kernels kAvx512 = {
    "avx512",          canon_avx512,      absmax_avx512,        colmax_avx512,
    quant_const_avx512, quant_row_avx512, dequant_const_avx512, dequant_row_avx512, undelta_avx512,
    absmax_fp16_avx512, quant_const_fp16_avx512, range_ok_avx512, delta_runs_avx512,
    rice_encode8_scalar, rice_decode8_scalar, rice_encode16_scalar, rice_decode16_scalar,
    srice_encode8_scalar, srice_decode8_scalar, srice_encode16_scalar, srice_decode16_scalar,
    dequant_const16_avx512, dequant_row16_avx512,
    nullptr,           nullptr,  // int8_decode_fp16, int8_encode_fp16: set below on AMD
};

}  // namespace

SPECKV_TARGET_END

// The probe and the table below are baseline code (isa_target.h).
const Kernels *avx512_kernels() {
    static const bool ok = [] {
        const bool base = cpu::has(cpu::kAvx512f | cpu::kAvx512bw | cpu::kAvx512vl | cpu::kF16c);
        if (base) {
            g_has_vbmi = g_det_vbmi = cpu::has(cpu::kAvx512vbmi);
            g_has_fp16 = g_det_fp16 = SPECKV_FP16_KERNELS && cpu::has(cpu::kAvx512fp16);
            g_amd = cpu::is_amd();
        }
        return base;
    }();
    if (!ok) return nullptr;
    // The Rice stages (codec_rice_avx512.cc, codec_srice_avx512.cc) also need BMI2
    // (and VBMI/VBMI2 for split Rice); else the reference.
    static const Kernels table = [] {
        Kernels k = kAvx512;
        if (const RiceKernels *r = rice_avx512_kernels()) {
            k.rice_encode8 = r->encode8;
            k.rice_decode8 = r->decode8;
            k.rice_encode16 = r->encode16;
            k.rice_decode16 = r->decode16;
        }
        if (const RiceKernels *r = srice_avx512_kernels()) {  // §18, also VBMI/VBMI2
            k.srice_encode8 = r->encode8;
            k.srice_decode8 = r->decode8;
            k.srice_encode16 = r->encode16;
            k.srice_decode16 = r->decode16;
        } else if (const RiceKernels *r2 = srice_avx2_kernels()) {  // AVX-512 without VBMI2
            k.srice_decode8 = r2->decode8;
            k.srice_decode16 = r2->decode16;
        }
        if (g_amd && g_det_vbmi && cpu::has(cpu::kVpclmulqdq | cpu::kPclmul | cpu::kSse42)) {
            k.int8_decode_fp16 = int8_decode_fp16_avx512;
            k.int8_encode_fp16 = int8_encode_fp16_avx512;
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
