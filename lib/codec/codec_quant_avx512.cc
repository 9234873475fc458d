// SPDX-License-Identifier: Apache-2.0
// AVX-512 (F/BW/VL) quantisers of the codec (docs/codec.md §3.2-§3.3): the
// canonical FP32 input (canon, absmax, colmax, one scale or one per column)
// and the FP16 input's fast path, which skips the canonical buffer (the
// exponent index on AVX512-VBMI on Intel). Entries of the table in
// codec_avx512.cc; must equal the scalar kernels bit for bit.
#include "codec/codec_kernels.h"
#include "speckv.h"

#include "util/isa_target.h"

#if SPECKV_X86_SIMD
#include <immintrin.h>

#include <cstdint>
#include <cstring>

SPECKV_TARGET_BEGIN("avx512f,avx512bw,avx512vl,f16c")
#include "codec/codec_avx512_common.h"

namespace speckv::codec {

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

namespace {

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

}  // namespace

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

namespace {

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

void quant_fp16_fast(const uint8_t *p, size_t n, uint32_t es, uint32_t r, uint32_t Q, int8_t *q) {
    const __m512i P = fast_table(es);
    const __m512i rv = _mm512_set1_epi16(short(r)), Qv = _mm512_set1_epi8(char(Q));
    if (g_has_vbmi && !g_amd)
        Q == 127 ? quant_fp16_fast_vbmi<true>(p, n, P, rv, Qv, q) : quant_fp16_fast_vbmi<false>(p, n, P, rv, Qv, q);
    else
        Q == 127 ? quant_fp16_fast_base<true>(p, n, P, rv, Qv, q) : quant_fp16_fast_base<false>(p, n, P, rv, Qv, q);
}

}  // namespace

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

}  // namespace speckv::codec

SPECKV_TARGET_END
#endif
