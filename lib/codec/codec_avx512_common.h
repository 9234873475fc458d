// SPDX-License-Identifier: Apache-2.0
// What the AVX-512 files of the codec share: codec_avx512.cc (the table, the
// probe, the delta / range stages), codec_quant_avx512.cc (the quantisers),
// codec_dequant_avx512.cc (the dequantisers) and codec_int8_avx512.cc (int8
// records in one pass with their CRC). Include it INSIDE their target region
// (after SPECKV_TARGET_BEGIN("avx512f,avx512bw,avx512vl,f16c")), with
// <immintrin.h>, <cstdint> and codec/codec_kernels.h included above the
// region. The inline helpers have internal linkage, so each object keeps its
// own copy compiled for its own region (isa_target.h, tools/check_isa.py);
// the entries declared here are each defined in one of the four files.
#pragma once

// The AVX512-FP16 kernels need the __m512h type without -mavx512fp16, which GCC 12 and
// clang >= 16 provide; with an older clang (the fuzz preset's clang 14) they are left out
// and FP16 pages take the VBMI or the FP32 route, which give the same bytes.
#if defined(__clang__) && __clang_major__ < 16
#define SPECKV_FP16_KERNELS 0
#else
#define SPECKV_FP16_KERNELS 1
#endif

namespace speckv::codec {

// Set by the probe in codec_avx512.cc. g_has_vbmi / g_has_fp16: the optional
// extensions in use (avx512_extensions switches them off for tests). g_amd:
// AMD (Zen 4), where vpmultishiftqb and vpsrlw issue at the same rate and
// the shift form measured faster (94 vs 99 ns per 2048 values), so the VBMI
// index of the quantiser is an Intel choice (port 5 vs port 0, round 3).
// Hidden, as their definition is: read directly, not through the GOT.
extern __attribute__((visibility("hidden"))) bool g_has_vbmi, g_has_fp16, g_amd;

// codec_quant_avx512.cc
bool canon_avx512(int dtype, const void *src, size_t n, uint32_t *u);
uint32_t absmax_avx512(const uint32_t *u, size_t n);
void colmax_avx512(const uint32_t *u, size_t T, size_t C, uint32_t *out);
void quant_const_avx512(const uint32_t *u, size_t n, uint32_t es, uint32_t r, uint32_t Q, int8_t *q);
void quant_row_avx512(const uint32_t *u, size_t C, const uint32_t *es, const uint32_t *r, uint32_t Q, int8_t *q);
bool absmax_fp16_avx512(const void *h, size_t n, uint32_t *amax);
void quant_const_fp16_avx512(const void *h, size_t n, uint32_t es, uint32_t r, uint32_t Q, int8_t *q);
// codec_dequant_avx512.cc
void dequant_const_avx512(const int8_t *q, size_t n, uint16_t scale, int dtype, void *out);
void dequant_row_avx512(const int8_t *q, size_t C, const uint16_t *scale, int dtype, void *out);
void dequant_const16_avx512(const int16_t *q, size_t n, uint16_t scale, int dtype, void *out);
void dequant_row16_avx512(const int16_t *q, size_t C, const uint16_t *scale, int dtype, void *out);
// codec_avx512.cc
bool range_ok_avx512(const uint8_t *b, size_t n, uint32_t Q);

namespace {

inline __mmask16 tail(size_t k) { return k >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << k) - 1); }

// ---- The FP16 quantiser's core (codec_quant_avx512.cc, and the one-pass
// encoder of codec_int8_avx512.cc).

// The common case Es >= 114 (max |x| above ~2^-7), in 9 instead of 13 vector
// ops per 32 values, none of them a shift by a variable count. For an
// element with exponent field e >= 1 let m = f | 1024 and c = s - 16 =
// Es - 103 - e as in quant32_fp16 (codec_quant_avx512.cc; c >= 2: e <= Em - 112 <= Es - 105), and
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

// P[e] = 1 << (14 - c), c = Es - 103 - e: 14 - c = e + 117 - Es; a count
// outside 0..15 (c > 14, or c < -1, no element there) shifts to 0; P[0] = 0.
inline __m512i fast_table(uint32_t es) {
    const __m512i iota = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13,
                                          12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i cnt = _mm512_sub_epi16(iota, _mm512_set1_epi16(short(es - 117)));
    return _mm512_maskz_sllv_epi16(__mmask32(0xFFFFFFFEu), _mm512_set1_epi16(1), cnt);
}

// ---- The FP16 dequantiser's 128-entry table (codec_dequant_avx512.cc, and
// the one-pass decoder of codec_int8_avx512.cc).

inline __m512 scale_f32(uint16_t scale) { return _mm512_castsi512_ps(_mm512_set1_epi32(int(uint32_t(scale) << 16))); }

// With AVX512-VBMI, long runs of one scale (a page group): the 128 results
// T[k] = FP16(k * S), k = 0..127, computed once by the FP32 route (codec_dequant_avx512.cc), then
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

// The table costs about as much as 200 values of the FP32 route.
constexpr size_t kFp16TableMin = 256;

}  // namespace
}  // namespace speckv::codec
