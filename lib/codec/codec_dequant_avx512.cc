// SPDX-License-Identifier: Apache-2.0
// AVX-512 (F/BW/VL) dequantisers of the codec (docs/codec.md §3.4, §13): int8
// and int16 values times a BF16 scale field to FP32, BF16 or FP16. FP16 pages
// take AVX512-FP16 where the CPU has it and the scale is a normal FP16 number,
// else the 128-entry lookup (AVX512-VBMI) for long runs, else the exact FP32
// route. Entries of the table in codec_avx512.cc; must equal the scalar
// kernels bit for bit.
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

namespace {

// ---- AVX512-FP16: q * S computed in binary16. When S is a normal FP16
// number (scale exponent 113..142) S and q (|q| <= 127) are exact in FP16 and
// |q * S| >= 2^-14 is normal, so one RNE multiply gives the same bits as the
// exact FP32 product rounded to FP16 (docs §3.4); overflow (Inf) is clamped
// to +-65504, which is the saturation rule. q = 0 gives +0 (S > 0).

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

void deq_fp16_f32(const int8_t *q, size_t n, uint16_t scale, uint8_t *o) {
    if (scale >= (136u << 7))
        deq_fp16_f32_t<true>(q, n, scale_f32(scale), o);
    else
        deq_fp16_f32_t<false>(q, n, scale_f32(scale), o);
}

// ---- With AVX512-VBMI, long runs of one scale: the 128-entry table of
// codec_avx512_common.h (Fp16Table, fp16_table), one lookup per value.

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

void deq_fp16(const int8_t *q, size_t n, uint16_t scale, uint8_t *o) {
    if (scale == 0) {
        std::memset(o, 0, 2 * n);
        return;
    }
    if (g_has_vbmi && n >= kFp16TableMin) return deq_fp16_table(q, n, scale, o);
    deq_fp16_f32(q, n, scale, o);
}

// ---- Every dtype: 16 values at a time through FP32, converted by store16.

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

}  // namespace

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

namespace {

// The same for int16 values (b 9..12): |q| * Ms < 2^19, so q * S is exact
// in binary32 as for int8 (docs §13), and store16's conversions apply.
inline __m512 deq16w(__mmask16 m, const int16_t *q, __m512 S) {
    __m256i w = _mm256_maskz_loadu_epi16(m, q);
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(w)), S);
    __mmask16 z = _mm512_cmp_ps_mask(f, _mm512_setzero_ps(), _CMP_EQ_OQ);
    return _mm512_mask_mov_ps(f, z, _mm512_setzero_ps());  // -0 from a zero scale -> +0
}

}  // namespace

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

}  // namespace speckv::codec

SPECKV_TARGET_END
#endif
