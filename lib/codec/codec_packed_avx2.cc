// SPDX-License-Identifier: Apache-2.0
// AVX2 + F16C + FMA + BMI2 kernels of the fixed-width packed presets
// (docs/codec.md §19), in a target region (isa_target.h); reached only when the
// CPU has all four (packed_avx2_kernels() checks). Bytes and values equal the
// reference's (codec_packed.cc): the same binary32 operations, each correctly
// rounded, in the same order; 8 values of b bits are one PEXT / PDEP.
#include <cstring>

#include "codec/codec.h"
#include "codec/codec_kernels.h"
#include "codec/codec_packed_fields.h"
#include "util/cpu.h"
#include "speckv.h"

#include "util/isa_target.h"

#if SPECKV_X86_SIMD
#include <immintrin.h>

namespace speckv::codec {

namespace {

SPECKV_TARGET_BEGIN("avx2,f16c,fma,bmi,bmi2")

bool to_f32_avx2(int dtype, const void *src, size_t n, float *x) {
    size_t i = 0;
    __m256i bad = _mm256_setzero_si256();
    if (dtype == SPECKV_DTYPE_FP16) {
        auto h = static_cast<const uint16_t *>(src);
        const __m128i e16 = _mm_set1_epi16(0x7C00);
        __m128i b16 = _mm_setzero_si128();
        for (; i + 8 <= n; i += 8) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(h + i));
            b16 = _mm_or_si128(b16, _mm_cmpeq_epi16(_mm_and_si128(v, e16), e16));
            _mm256_storeu_ps(x + i, _mm256_cvtph_ps(v));
        }
        if (!_mm_testz_si128(b16, b16)) return false;
    } else if (dtype == SPECKV_DTYPE_BF16) {
        auto h = static_cast<const uint16_t *>(src);
        const __m256i e32 = _mm256_set1_epi32(0x7F800000);
        for (; i + 8 <= n; i += 8) {
            const __m256i u = _mm256_slli_epi32(
                _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(h + i))), 16);
            bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(u, e32), e32));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(x + i), u);
        }
    } else {
        auto f = static_cast<const uint32_t *>(src);
        const __m256i e32 = _mm256_set1_epi32(0x7F800000);
        for (; i + 8 <= n; i += 8) {
            const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(f + i));
            bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(u, e32), e32));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(x + i), u);
        }
    }
    if (!_mm256_testz_si256(bad, bad)) return false;
    const size_t es = dtype_size(dtype);
    return i == n || packed_to_f32_scalar(dtype, static_cast<const uint8_t *>(src) + i * es, n - i, x + i);
}

inline float hmin8(__m256 v) {
    __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_min_ps(m, _mm_movehl_ps(m, m));
    m = _mm_min_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}
inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

// Minimum and maximum of n values (n % 8 == 0, n >= 8).
inline void minmax_run(const float *x, size_t n, float *mn, float *mx) {
    __m256 a = _mm256_loadu_ps(x), b = a;
    for (size_t i = 8; i < n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        a = _mm256_min_ps(a, v);
        b = _mm256_max_ps(b, v);
    }
    *mn = hmin8(a);
    *mx = hmax8(b);
}

void minmax_avx2(const float *x, size_t T, size_t C, unsigned group, float *mn, float *mx) {
    if (C % 8) return packed_minmax_scalar(x, T, C, group, mn, mx);
    if (group == kGroupPage) return minmax_run(x, T * C, mn, mx);
    if (group == kGroupToken) {
        for (size_t t = 0; t < T; t++) minmax_run(x + t * C, C, mn + t, mx + t);
        return;
    }
    for (size_t c = 0; c < C; c += 8) {
        __m256 a = _mm256_loadu_ps(x + c), b = a;
        for (size_t t = 1; t < T; t++) {
            const __m256 v = _mm256_loadu_ps(x + t * C + c);
            a = _mm256_min_ps(a, v);
            b = _mm256_max_ps(b, v);
        }
        _mm256_storeu_ps(mn + c, a);
        _mm256_storeu_ps(mx + c, b);
    }
}

// 8 values -> their q bytes (§19.3), in the low 64 bits (value i in byte i).
inline __m128i quant8(__m256 x, __m256 z, __m256 inv, __m256i qmax) {
    __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_sub_ps(x, z), inv));  // RNE (MXCSR default)
    q = _mm256_min_epi32(_mm256_max_epi32(q, _mm256_setzero_si256()), qmax);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    return _mm_packus_epi16(w, w);
}

// 8 q bytes (each < 2^B) -> B bytes, LSB first (§19.4). PEXT here: a SIMD
// b = 4 pack (maddubs) measured 10 % slower on Zen 4, where PEXT is one uop.
template <unsigned B>
inline uint64_t pack8(__m128i q, uint64_t mask) {
    return _pext_u64(uint64_t(_mm_cvtsi128_si64(q)), mask);
}

template <unsigned B>
void encode_b(const float *x, size_t T, size_t C, unsigned group, const float *z, const float *inv, uint8_t *dst) {
    const uint64_t mask = 0x0101010101010101ull * ((1u << B) - 1u);
    const __m256i qmax = _mm256_set1_epi32((1 << B) - 1);
    for (size_t t = 0; t < T; t++) {
        const float *xr = x + t * C;
        if (group == kGroupChannel) {
            for (size_t c = 0; c < C; c += 8, dst += B) {
                const uint64_t p = pack8<B>(
                    quant8(_mm256_loadu_ps(xr + c), _mm256_loadu_ps(z + c), _mm256_loadu_ps(inv + c), qmax), mask);
                std::memcpy(dst, &p, B);
            }
        } else {
            const size_t g = group == kGroupPage ? 0 : t;
            const __m256 zv = _mm256_set1_ps(z[g]), iv = _mm256_set1_ps(inv[g]);
            for (size_t c = 0; c < C; c += 8, dst += B) {
                const uint64_t p = pack8<B>(quant8(_mm256_loadu_ps(xr + c), zv, iv, qmax), mask);
                std::memcpy(dst, &p, B);
            }
        }
    }
}

void encode_avx2(const float *x, size_t T, size_t C, unsigned bits, unsigned group, const float *z, const float *inv,
                 uint8_t *dst) {
    if (C % 8) return packed_encode_scalar(x, T, C, bits, group, z, inv, dst);
    switch (bits) {
        case 3: return encode_b<3>(x, T, C, group, z, inv, dst);
        case 4: return encode_b<4>(x, T, C, group, z, inv, dst);
        case 5: return encode_b<5>(x, T, C, group, z, inv, dst);
        case 6: return encode_b<6>(x, T, C, group, z, inv, dst);
        case 7: return encode_b<7>(x, T, C, group, z, inv, dst);
        default: return encode_b<8>(x, T, C, group, z, inv, dst);
    }
}

// 8 values of one chunk (B bytes at src) -> FP32 (§19.5: fma, one rounding).
// `wide`: 8 bytes at src may be read (one load; a partial-width load through
// the stack would stall store forwarding for b = 3, 5, 6, 7).
template <unsigned B>
inline __m256 dequant8(const uint8_t *src, __m256 s, __m256 z, bool wide) {
    const uint64_t mask = 0x0101010101010101ull * ((1u << B) - 1u);
    uint64_t w = 0;
    if (wide) {
        std::memcpy(&w, src, 8);
        if (B < 8) w &= (1ull << (8 * B % 64)) - 1ull;
    } else {
        std::memcpy(&w, src, B);
    }
    const __m256i q = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(_pdep_u64(w, mask))));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), s, z);
}

template <bool kSat>
inline void store8(__m256 y, int dtype, uint8_t *o) {
    if (dtype == SPECKV_DTYPE_FP16) {
        const __m256 lim = _mm256_set1_ps(65504.0f);
        if (kSat) y = _mm256_min_ps(_mm256_max_ps(y, _mm256_sub_ps(_mm256_setzero_ps(), lim)), lim);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(o), _mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    } else if (dtype == SPECKV_DTYPE_BF16) {
        const __m256i u = _mm256_castps_si256(y);
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
        const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
        const __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(o), p);
    } else {
        _mm256_storeu_ps(reinterpret_cast<float *>(o), y);
    }
}

// b = 4, C a multiple of 16: 16 values from 8 bytes without PDEP (slow,
// microcoded, on AMD CPUs before Zen 3, which have AVX2 but not AVX-512).
// Byte k holds value 2k in its low nibble and 2k+1 in its high one (§19.4).
template <bool kSat, int kDtype>
void decode4(const uint8_t *src, size_t T, size_t C, unsigned group, const float *s, const float *z, uint8_t *o) {
    constexpr size_t es = kDtype == SPECKV_DTYPE_FP32 ? 4 : 2;
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (size_t t = 0; t < T; t++) {
        const bool ch = group == kGroupChannel;
        const size_t g = group == kGroupPage ? 0 : t;
        const __m256 sr = _mm256_set1_ps(ch ? 0.0f : s[g]), zr = _mm256_set1_ps(ch ? 0.0f : z[g]);
        for (size_t c = 0; c < C; c += 16, src += 8, o += 16 * es) {
            const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(src));
            const __m128i v = _mm_unpacklo_epi8(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
            const __m256 y0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)), ch ? _mm256_loadu_ps(s + c) : sr,
                                              ch ? _mm256_loadu_ps(z + c) : zr);
            const __m256 y1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8))),
                                              ch ? _mm256_loadu_ps(s + c + 8) : sr, ch ? _mm256_loadu_ps(z + c + 8) : zr);
            store8<kSat>(y0, kDtype, o);
            store8<kSat>(y1, kDtype, o + 8 * es);
        }
    }
}

// 8 FP32 results -> 8 FP16 or BF16 fields (round to nearest even), as store8.
template <bool kSat, int kDtype>
inline __m128i to16x8(__m256 y) {
    if constexpr (kDtype == SPECKV_DTYPE_FP16) {
        const __m256 lim = _mm256_set1_ps(65504.0f);
        if (kSat) y = _mm256_min_ps(_mm256_max_ps(y, _mm256_sub_ps(_mm256_setzero_ps(), lim)), lim);
        return _mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    } else {
        const __m256i u = _mm256_castps_si256(y);
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
        const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
        return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    }
}

// b = 4, C a multiple of 16, one (s, z) per channel (K): 16 channels at a
// time down all the rows, so their scales and zero points stay in registers
// (a row of 32 or 64 channels would need 8 or 16 of them), 16 values a step.
template <bool kSat, int kDtype>
void decode4_ch(const uint8_t *src, size_t T, size_t C, const float *s, const float *z, uint8_t *out) {
    constexpr size_t es = kDtype == SPECKV_DTYPE_FP32 ? 4 : 2;
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (size_t c = 0; c < C; c += 16) {
        const __m256 s0 = _mm256_loadu_ps(s + c), s1 = _mm256_loadu_ps(s + c + 8);
        const __m256 z0 = _mm256_loadu_ps(z + c), z1 = _mm256_loadu_ps(z + c + 8);
        const uint8_t *in = src + c / 2;
        uint8_t *o = out + c * es;
        if constexpr (kDtype != SPECKV_DTYPE_FP32) {
            // 16-bit out: byte k widened to a dword gives value 2k (& 0x0F) and 2k+1 (>> 4),
            // computed with the even and the odd channels' s and z; one 16-bit interleave
            // puts the results in order (fewer µops than unpacking the nibbles first).
            const __m256i ev = _mm256_setr_epi32(0, 2, 4, 6, 8 - 8, 10 - 8, 12 - 8, 14 - 8);
            const __m256i od = _mm256_setr_epi32(1, 3, 5, 7, 9 - 8, 11 - 8, 13 - 8, 15 - 8);
            // lanes 0-3 from s0/z0 (channels 0..7), lanes 4-7 from s1/z1 (channels 8..15)
            const __m256 se = _mm256_blend_ps(_mm256_permutevar8x32_ps(s0, ev), _mm256_permutevar8x32_ps(s1, ev), 0xF0);
            const __m256 so = _mm256_blend_ps(_mm256_permutevar8x32_ps(s0, od), _mm256_permutevar8x32_ps(s1, od), 0xF0);
            const __m256 ze = _mm256_blend_ps(_mm256_permutevar8x32_ps(z0, ev), _mm256_permutevar8x32_ps(z1, ev), 0xF0);
            const __m256 zo = _mm256_blend_ps(_mm256_permutevar8x32_ps(z0, od), _mm256_permutevar8x32_ps(z1, od), 0xF0);
            const __m256i m4d = _mm256_set1_epi32(0x0F);
            for (size_t t = 0; t < T; t++, in += C / 2, o += C * es) {
                const __m256i d = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(in)));
                const __m128i e = to16x8<kSat, kDtype>(_mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(d, m4d)), se, ze));
                const __m128i f = to16x8<kSat, kDtype>(_mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(d, 4)), so, zo));
                _mm_storeu_si128(reinterpret_cast<__m128i *>(o), _mm_unpacklo_epi16(e, f));
                _mm_storeu_si128(reinterpret_cast<__m128i *>(o + 16), _mm_unpackhi_epi16(e, f));
            }
            continue;
        }
        for (size_t t = 0; t < T; t++, in += C / 2, o += C * es) {
            const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(in));
            const __m128i v = _mm_unpacklo_epi8(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
            const __m256 y0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)), s0, z0);
            const __m256 y1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8))), s1, z1);
            store8<kSat>(y0, kDtype, o);
            store8<kSat>(y1, kDtype, o + 8 * es);
        }
    }
}

// b = 4, C a multiple of 32, one (s, z) per token or page (V), FP16 or BF16
// out: the 16 possible outputs of a row are computed once (the same fma and
// rounding as decode4, so the same bits) and each value is looked up. A
// 16-bit table does not fit one PSHUFB, so it is split in its low and high
// bytes (one 16-byte table each, in both lanes): per 32 values two PSHUFBs
// and two byte interleaves replace 4 x (widen, convert, fma, round).
template <bool kSat, int kDtype>
void decode4_lut(const uint8_t *src, size_t T, size_t C, unsigned group, const float *s, const float *z, uint8_t *o) {
    const __m256 i0 = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), i1 = _mm256_setr_ps(8, 9, 10, 11, 12, 13, 14, 15);
    const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10,
                                           12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i m0f = _mm256_set1_epi16(0x0F), mf0 = _mm256_set1_epi16(0xF0);
    __m256i tl = _mm256_setzero_si256(), th = tl;
    for (size_t t = 0; t < T; t++) {
        if (t == 0 || group != kGroupPage) {  // the row's table, in registers
            const size_t g = group == kGroupPage ? 0 : t;
            const __m256 sv = _mm256_set1_ps(s[g]), zv = _mm256_set1_ps(z[g]);
            const __m256i h = _mm256_shuffle_epi8(  // lane k: low bytes, high bytes of entries 8k..8k+7
                // (parenthesised: clang's _mm256_inserti128_si256 is a macro, and the
                // template arguments' comma would split its arguments)
                _mm256_inserti128_si256(_mm256_castsi128_si256((to16x8<kSat, kDtype>(_mm256_fmadd_ps(i0, sv, zv)))),
                                        (to16x8<kSat, kDtype>(_mm256_fmadd_ps(i1, sv, zv))), 1),
                split);
            tl = _mm256_permute4x64_epi64(h, 0x88);  // low bytes of entries 0..15, in both lanes
            th = _mm256_permute4x64_epi64(h, 0xDD);  // high bytes
        }
        for (size_t c = 0; c < C; c += 32, src += 16, o += 64) {
            // word k = byte k widened: value 2k (low nibble) in its low byte, 2k+1 in its high byte
            const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src)));
            const __m256i idx = _mm256_or_si256(_mm256_and_si256(w, m0f), _mm256_slli_epi16(_mm256_and_si256(w, mf0), 4));
            const __m256i lo = _mm256_shuffle_epi8(tl, idx), hi = _mm256_shuffle_epi8(th, idx);
            const __m256i a = _mm256_unpacklo_epi8(lo, hi), b = _mm256_unpackhi_epi8(lo, hi);  // 0-7|16-23, 8-15|24-31
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o), _mm256_permute2x128_si256(a, b, 0x20));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o + 32), _mm256_permute2x128_si256(a, b, 0x31));
        }
    }
}

// b = 3 and 5 without PDEP (codec_packed_fields.h; PDEP is microcoded, slow,
// on AMD CPUs before Zen 3): a PSHUFB places each value's bytes in its dword,
// VPSRLVD brings its field to bit 0.
using packed35::kDw;
using packed35::kOver;
using packed35::kW3Avx2;
using packed35::safe_at;
using packed35::split_rows;

// 16 values (2B bytes at p; 16 bytes read) -> two ymm of dwords, values 0-7
// and 8-15 (kMask: the field alone; else garbage above it).
template <unsigned B, bool kMask>
inline void fields8x2(const uint8_t *p, __m256i sh0, __m256i sh1, __m256i sh, __m256i *d0, __m256i *d1) {
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    *d0 = _mm256_srlv_epi32(_mm256_shuffle_epi8(v, sh0), sh);
    *d1 = _mm256_srlv_epi32(_mm256_shuffle_epi8(v, sh1), sh);
    if constexpr (kMask) {
        const __m256i m = _mm256_set1_epi32((1 << B) - 1);
        *d0 = _mm256_and_si256(*d0, m);
        *d1 = _mm256_and_si256(*d1, m);
    }
}

// b = 3, 5, one (s, z) per channel (K), C a multiple of 16: 16 channels at a
// time down the rows [t0, t1) (their s and z in registers), 16 values a step.
// kCheck: loads near the stream's end go through safe_at (split_rows).
template <unsigned B, bool kSat, int kDtype, bool kCheck>
void decode35_ch(const uint8_t *src, size_t t0, size_t t1, size_t T, size_t C, const float *s, const float *z,
                 uint8_t *out) {
    constexpr size_t es = kDtype == SPECKV_DTYPE_FP32 ? 4 : 2;
    const uint8_t *const end = src + T * C * B / 8;
    const __m256i sh0 = _mm256_load_si256(reinterpret_cast<const __m256i *>(kDw<B>.shuf));
    const __m256i sh1 = _mm256_load_si256(reinterpret_cast<const __m256i *>(kDw<B>.shuf + 32));
    const __m256i sh = _mm256_load_si256(reinterpret_cast<const __m256i *>(kDw<B>.sh));
    alignas(16) uint8_t buf[32];
    const size_t rb = C * B / 8;
    for (size_t c = 0; c < C; c += 16) {
        const __m256 s0 = _mm256_loadu_ps(s + c), s1 = _mm256_loadu_ps(s + c + 8);
        const __m256 z0 = _mm256_loadu_ps(z + c), z1 = _mm256_loadu_ps(z + c + 8);
        const uint8_t *in = src + t0 * rb + c * B / 8;
        uint8_t *o = out + (t0 * C + c) * es;
        for (size_t t = t0; t < t1; t++, in += rb, o += C * es) {
            __m256i d0, d1;
            fields8x2<B, true>(kCheck ? safe_at(in, end, 16, buf) : in, sh0, sh1, sh, &d0, &d1);
            store8<kSat>(_mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), s0, z0), kDtype, o);
            store8<kSat>(_mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), s1, z1), kDtype, o + 8 * es);
        }
    }
}

// b = 3, 5, one (s, z) per token or page (V), C a multiple of 16: the fma per
// value, except FP32 out with b = 3, where the row's 8 outputs are one ymm and
// a VPERMPS looks each value up (it reads 3 index bits: no mask).
template <unsigned B, bool kSat, int kDtype, bool kCheck>
void decode35_row(const uint8_t *src, size_t t0, size_t t1, size_t T, size_t C, unsigned group, const float *s,
                  const float *z, uint8_t *o) {
    constexpr size_t es = kDtype == SPECKV_DTYPE_FP32 ? 4 : 2;
    constexpr bool kLut = B == 3 && kDtype == SPECKV_DTYPE_FP32;
    const uint8_t *const end = src + T * C * B / 8;
    src += t0 * C * B / 8;
    o += t0 * C * es;
    const __m256i sh0 = _mm256_load_si256(reinterpret_cast<const __m256i *>(kDw<B>.shuf));
    const __m256i sh1 = _mm256_load_si256(reinterpret_cast<const __m256i *>(kDw<B>.shuf + 32));
    const __m256i sh = _mm256_load_si256(reinterpret_cast<const __m256i *>(kDw<B>.sh));
    const __m256 iota = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    alignas(16) uint8_t buf[32];
    for (size_t t = t0; t < t1; t++) {
        const size_t g = group == kGroupPage ? 0 : t;
        const __m256 sv = _mm256_set1_ps(s[g]), zv = _mm256_set1_ps(z[g]);
        const __m256 tbl = kLut ? _mm256_fmadd_ps(iota, sv, zv) : sv;
        for (size_t c = 0; c < C; c += 16, src += 2 * B, o += 16 * es) {
            __m256i d0, d1;
            fields8x2<B, !kLut>(kCheck ? safe_at(src, end, 16, buf) : src, sh0, sh1, sh, &d0, &d1);
            if constexpr (kLut) {
                _mm256_storeu_ps(reinterpret_cast<float *>(o), _mm256_permutevar8x32_ps(tbl, d0));
                _mm256_storeu_ps(reinterpret_cast<float *>(o + 32), _mm256_permutevar8x32_ps(tbl, d1));
            } else {
                store8<kSat>(_mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), sv, zv), kDtype, o);
                store8<kSat>(_mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), sv, zv), kDtype, o + 8 * es);
            }
        }
    }
}

// b = 3, one (s, z) per token or page (V), C a multiple of 32, FP16 or BF16
// out: the row's 8 outputs computed once (the same fma and rounding, so the
// same bits), their low and high bytes one 16-byte table (PSHUFB index q and
// q + 8); 32 values a step: word fields by PSHUFB and a multiply (no 16-bit
// variable shift on AVX2), packed to bytes, two lookups, two interleaves.
template <bool kSat, int kDtype, bool kCheck>
void decode3_lut(const uint8_t *src, size_t t0, size_t t1, size_t T, size_t C, unsigned group, const float *s,
                 const float *z, uint8_t *o) {
    const uint8_t *const end = src + T * C * 3 / 8;
    src += t0 * C * 3 / 8;
    o += t0 * C * 2;
    const __m256i shA = _mm256_load_si256(reinterpret_cast<const __m256i *>(kW3Avx2.shuf));
    const __m256i shB = _mm256_load_si256(reinterpret_cast<const __m256i *>(kW3Avx2.shuf + 32));
    const __m256i muA = _mm256_load_si256(reinterpret_cast<const __m256i *>(kW3Avx2.mul));
    const __m256i muB = _mm256_load_si256(reinterpret_cast<const __m256i *>(kW3Avx2.mul + 16));
    const __m128i split = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m256 iota = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i eight = _mm256_set1_epi8(8);
    alignas(16) uint8_t buf[32];
    __m256i tbl = _mm256_setzero_si256();
    for (size_t t = t0; t < t1; t++) {
        if (t == t0 || group != kGroupPage) {  // low bytes of entries 0-7, then their high bytes, in both lanes
            const size_t g = group == kGroupPage ? 0 : t;
            const __m128i h = to16x8<kSat, kDtype>(_mm256_fmadd_ps(iota, _mm256_set1_ps(s[g]), _mm256_set1_ps(z[g])));
            tbl = _mm256_broadcastsi128_si256(_mm_shuffle_epi8(h, split));
        }
        for (size_t c = 0; c < C; c += 32, src += 12, o += 64) {
            const __m256i v = _mm256_broadcastsi128_si256(
                _mm_loadu_si128(reinterpret_cast<const __m128i *>(kCheck ? safe_at(src, end, 16, buf) : src)));
            const __m256i a = _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(v, shA), muA), 13);  // values 0-15
            const __m256i b = _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(v, shB), muB), 13);  // 16-31
            const __m256i q = _mm256_packus_epi16(a, b);  // lane 0: 0-7, 16-23; lane 1: 8-15, 24-31
            const __m256i lo = _mm256_shuffle_epi8(tbl, q), hi = _mm256_shuffle_epi8(tbl, _mm256_or_si256(q, eight));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o), _mm256_unpacklo_epi8(lo, hi));       // values 0-15
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o + 32), _mm256_unpackhi_epi8(lo, hi));  // 16-31
        }
    }
}

template <unsigned B, bool kSat, int kDtype>
void decode35(const uint8_t *src, size_t T, size_t C, unsigned group, const float *s, const float *z, uint8_t *o) {
    split_rows(T, C * B / 8, kOver<B>, [&](auto check, size_t t0, size_t t1) {
        constexpr bool kCheck = decltype(check)::value;
        if (group == kGroupChannel) return decode35_ch<B, kSat, kDtype, kCheck>(src, t0, t1, T, C, s, z, o);
        if constexpr (B == 3 && kDtype != SPECKV_DTYPE_FP32)
            if (C % 32 == 0) return decode3_lut<kSat, kDtype, kCheck>(src, t0, t1, T, C, group, s, z, o);
        return decode35_row<B, kSat, kDtype, kCheck>(src, t0, t1, T, C, group, s, z, o);
    });
}

template <unsigned B, bool kSat>
void decode_b(const uint8_t *src, size_t T, size_t C, unsigned group, const float *s, const float *z, int dtype,
              void *out) {
    const size_t es = dtype_size(dtype);
    auto o = static_cast<uint8_t *>(out);
    if constexpr (B == 3 || B == 5) {
        if (C % 16 == 0) {  // no PDEP
            if (dtype == SPECKV_DTYPE_FP16) return decode35<B, kSat, SPECKV_DTYPE_FP16>(src, T, C, group, s, z, o);
            if (dtype == SPECKV_DTYPE_BF16) return decode35<B, kSat, SPECKV_DTYPE_BF16>(src, T, C, group, s, z, o);
            return decode35<B, kSat, SPECKV_DTYPE_FP32>(src, T, C, group, s, z, o);
        }
    }
    if constexpr (B == 4) {
        if (C % 32 == 0 && group != kGroupChannel && dtype != SPECKV_DTYPE_FP32) {
            if (dtype == SPECKV_DTYPE_FP16) return decode4_lut<kSat, SPECKV_DTYPE_FP16>(src, T, C, group, s, z, o);
            return decode4_lut<kSat, SPECKV_DTYPE_BF16>(src, T, C, group, s, z, o);
        }
        if (C % 16 == 0 && group == kGroupChannel) {
            if (dtype == SPECKV_DTYPE_FP16) return decode4_ch<kSat, SPECKV_DTYPE_FP16>(src, T, C, s, z, o);
            if (dtype == SPECKV_DTYPE_BF16) return decode4_ch<kSat, SPECKV_DTYPE_BF16>(src, T, C, s, z, o);
            return decode4_ch<kSat, SPECKV_DTYPE_FP32>(src, T, C, s, z, o);
        }
        if (C % 16 == 0) {
            if (dtype == SPECKV_DTYPE_FP16) return decode4<kSat, SPECKV_DTYPE_FP16>(src, T, C, group, s, z, o);
            if (dtype == SPECKV_DTYPE_BF16) return decode4<kSat, SPECKV_DTYPE_BF16>(src, T, C, group, s, z, o);
            return decode4<kSat, SPECKV_DTYPE_FP32>(src, T, C, group, s, z, o);
        }
    }
    const uint8_t *const base = src;
    const size_t total = T * C * B / 8;  // an 8-byte load at src stays inside while src - base + 8 <= total
    for (size_t t = 0; t < T; t++) {
        if (group == kGroupChannel) {
            for (size_t c = 0; c < C; c += 8, src += B, o += 8 * es)
                store8<kSat>(dequant8<B>(src, _mm256_loadu_ps(s + c), _mm256_loadu_ps(z + c), size_t(src - base) + 8 <= total), dtype, o);
        } else {
            const size_t g = group == kGroupPage ? 0 : t;
            const __m256 sv = _mm256_set1_ps(s[g]), zv = _mm256_set1_ps(z[g]);
            for (size_t c = 0; c < C; c += 8, src += B, o += 8 * es)
                store8<kSat>(dequant8<B>(src, sv, zv, size_t(src - base) + 8 <= total), dtype, o);
        }
    }
}

// On a 64-byte boundary: its loops keep their place in the cache lines
// whatever the code around it becomes (decode speed moved with that).
[[gnu::aligned(64)]] void decode_avx2(const uint8_t *src, size_t T, size_t C, unsigned bits, unsigned group,
                                      const float *s, const float *z, int dtype, void *out, bool sat) {
    if (C % 8) return packed_decode_scalar(src, T, C, bits, group, s, z, dtype, out, sat);
    switch (bits) {
        case 3: return sat ? decode_b<3, true>(src, T, C, group, s, z, dtype, out) : decode_b<3, false>(src, T, C, group, s, z, dtype, out);
        case 4: return sat ? decode_b<4, true>(src, T, C, group, s, z, dtype, out) : decode_b<4, false>(src, T, C, group, s, z, dtype, out);
        case 5: return sat ? decode_b<5, true>(src, T, C, group, s, z, dtype, out) : decode_b<5, false>(src, T, C, group, s, z, dtype, out);
        case 6: return sat ? decode_b<6, true>(src, T, C, group, s, z, dtype, out) : decode_b<6, false>(src, T, C, group, s, z, dtype, out);
        case 7: return sat ? decode_b<7, true>(src, T, C, group, s, z, dtype, out) : decode_b<7, false>(src, T, C, group, s, z, dtype, out);
        default: return sat ? decode_b<8, true>(src, T, C, group, s, z, dtype, out) : decode_b<8, false>(src, T, C, group, s, z, dtype, out);
    }
}

// 8 (s16, z16) pairs per step: F16C conversions (exact), checks on the bits.
bool params_avx2(const uint8_t *p, size_t G, float top, float *s, float *z, bool *sat) {
    size_t g = 0;
    __m256i bad = _mm256_setzero_si256();
    __m256 over = _mm256_setzero_ps();
    const __m256 tv = _mm256_set1_ps(top), lim = _mm256_set1_ps(65000.0f);
    const __m256i e = _mm256_set1_epi32(0x7C00), sm = _mm256_set1_epi32(0x8000), lo = _mm256_set1_epi32(0xFFFF);
    for (; g + 8 <= G; g += 8) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 4 * g));
        const __m256i sv = _mm256_and_si256(v, lo), zv = _mm256_srli_epi32(v, 16);
        bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(sv, e), e));
        bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(zv, e), e));
        bad = _mm256_or_si256(bad, _mm256_and_si256(sv, sm));
        const __m256i pk = _mm256_permute4x64_epi64(_mm256_packus_epi32(sv, zv), 0xD8);  // s0..7 | z0..7
        const __m256 sf = _mm256_cvtph_ps(_mm256_castsi256_si128(pk)), zf = _mm256_cvtph_ps(_mm256_extracti128_si256(pk, 1));
        _mm256_storeu_ps(s + g, sf);
        _mm256_storeu_ps(z + g, zf);
        over = _mm256_or_ps(over, _mm256_cmp_ps(_mm256_add_ps(_mm256_mul_ps(tv, sf), zf), lim, _CMP_GT_OQ));
    }
    if (!_mm256_testz_si256(bad, bad)) return false;
    bool rest = false;
    if (g < G && !packed_params_scalar(p + 4 * g, G - g, top, s + g, z + g, &rest)) return false;
    *sat = rest || _mm256_movemask_ps(over) != 0;
    return true;
}

// §19.2 for 8 groups per step: F16C's directed conversions are the
// directed roundings of §19.2; mn + 0 turns -0 into +0 (z16 0x8000 -> 0).
bool make_params_avx2(const float *mn, const float *mx, size_t G, unsigned bits, uint8_t *pairs, float *z, float *inv) {
    size_t g = 0;
    const __m256 lim = _mm256_set1_ps(65504.0f), nlim = _mm256_set1_ps(-65504.0f), zero = _mm256_setzero_ps();
    const __m256 top = _mm256_set1_ps(float((1u << bits) - 1u)), one = _mm256_set1_ps(1.0f);
    for (; g + 8 <= G; g += 8) {
        const __m256 a = _mm256_loadu_ps(mn + g), b = _mm256_loadu_ps(mx + g);
        const __m256 ok = _mm256_and_ps(_mm256_cmp_ps(a, nlim, _CMP_GE_OQ), _mm256_cmp_ps(b, lim, _CMP_LE_OQ));
        if (_mm256_movemask_ps(ok) != 0xFF) return false;
        const __m128i z16 = _mm256_cvtps_ph(_mm256_add_ps(a, zero), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
        const __m256 zf = _mm256_cvtph_ps(z16);
        const __m256 sv = _mm256_div_ps(_mm256_sub_ps(b, zf), top);
        const __m256 pos = _mm256_cmp_ps(sv, zero, _CMP_GT_OQ);
        const __m128i s16 = _mm_and_si128(_mm256_cvtps_ph(sv, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC),
                                          _mm_packs_epi32(_mm256_castsi256_si128(_mm256_castps_si256(pos)),
                                                          _mm256_extracti128_si256(_mm256_castps_si256(pos), 1)));
        const __m256 sf = _mm256_cvtph_ps(s16);
        const __m256 iv = _mm256_and_ps(_mm256_div_ps(one, sf), pos);
        _mm256_storeu_ps(z + g, zf);
        _mm256_storeu_ps(inv + g, iv);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(pairs + 4 * g), _mm_unpacklo_epi16(s16, z16));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(pairs + 4 * g + 16), _mm_unpackhi_epi16(s16, z16));
    }
    return g == G || packed_make_params_scalar(mn + g, mx + g, G - g, bits, pairs + 4 * g, z + g, inv + g);
}

SPECKV_TARGET_END

const PackedKernels kPackedAvx2 = {"avx2", to_f32_avx2, minmax_avx2, encode_avx2, decode_avx2, params_avx2,
                                   make_params_avx2, packed_encode_fp16_avx2};

}  // namespace

// Baseline code: the probe.
const PackedKernels *packed_avx2_kernels() {
    if (!cpu::has(cpu::kAvx2 | cpu::kF16c | cpu::kFma | cpu::kBmi | cpu::kBmi2)) return nullptr;
    return &kPackedAvx2;
}

}  // namespace speckv::codec

#else
namespace speckv::codec {
const PackedKernels *packed_avx2_kernels() { return nullptr; }
}  // namespace speckv::codec
#endif
