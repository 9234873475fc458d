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

// ---- FP16 input: the whole payload without an FP32 copy of the page.
//
// Minimum and maximum on the FP16 bits h, three running reductions: smax
// (signed 16-bit max), umin and umax (unsigned). Positive values order as
// their bits, negative ones in reverse, and every negative h is above every
// positive one unsigned, below it signed. So the group's maximum is smax when
// smax >= 0 (a positive value or +0 exists), else umin (all negative: the
// smallest magnitude); its minimum is umax when umax >= 0x8000 (a negative
// value exists: the largest magnitude), else umin. A non-finite value
// (exponent 31) is above every finite one of its sign in these orders, so
// the page has one iff some group's smax >= 0x7C00 or umax >= 0xFC00. Which
// zero a group of zeros reports is unspecified (PackedKernels::minmax).
struct Red16 {
    __m256i smax, umin, umax;
};
inline void red_init(Red16 &r, __m256i v) { r.smax = r.umin = r.umax = v; }
inline void red_add(Red16 &r, __m256i v) {
    r.smax = _mm256_max_epi16(r.smax, v);
    r.umin = _mm256_min_epu16(r.umin, v);
    r.umax = _mm256_max_epu16(r.umax, v);
}
inline __m256i ld16(const uint16_t *h) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(h)); }

// The 16 lanes of r -> one key triple (PHMINPOSUW finds an unsigned minimum;
// maxima are minima of the complemented order).
inline void red_fold(const Red16 &r, uint16_t *k) {
    const __m128i x7 = _mm_set1_epi16(0x7FFF), ff = _mm_set1_epi16(-1);
    const __m128i sm = _mm_max_epi16(_mm256_castsi256_si128(r.smax), _mm256_extracti128_si256(r.smax, 1));
    const __m128i un = _mm_min_epu16(_mm256_castsi256_si128(r.umin), _mm256_extracti128_si256(r.umin, 1));
    const __m128i ux = _mm_max_epu16(_mm256_castsi256_si128(r.umax), _mm256_extracti128_si256(r.umax, 1));
    k[0] = uint16_t(_mm_cvtsi128_si32(_mm_minpos_epu16(_mm_xor_si128(sm, x7))) ^ 0x7FFF);
    k[1] = uint16_t(_mm_cvtsi128_si32(_mm_minpos_epu16(un)));
    k[2] = uint16_t(~_mm_cvtsi128_si32(_mm_minpos_epu16(_mm_xor_si128(ux, ff))));
}

// §19.2 from the key triples of G groups (smax at k, umin at k + G, umax at
// k + 2G): false on a non-finite value. The group minimum is an FP16 value,
// so rounding it down to FP16 gives itself (z16 = its bits, -0 -> +0); the
// rest is make_params_avx2's arithmetic on the same FP32 values.
bool params_from_keys(const uint16_t *k, size_t G, unsigned bits, uint8_t *pairs, float *z, float *inv) {
    const uint16_t *ksm = k, *kun = k + G, *kux = k + 2 * G;
    size_t g = 0;
    const __m128i e_pos = _mm_set1_epi16(0x7BFF), e_neg = _mm_set1_epi16(int16_t(0xFC00)),
                  nz = _mm_set1_epi16(int16_t(0x8000)), zero16 = _mm_setzero_si128();
    const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(float((1u << bits) - 1u)),
                 one = _mm256_set1_ps(1.0f);
    __m128i bad = zero16;
    for (; g + 8 <= G; g += 8) {
        const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i *>(ksm + g));
        const __m128i un = _mm_loadu_si128(reinterpret_cast<const __m128i *>(kun + g));
        const __m128i ux = _mm_loadu_si128(reinterpret_cast<const __m128i *>(kux + g));
        bad = _mm_or_si128(bad, _mm_cmpgt_epi16(sm, e_pos));
        bad = _mm_or_si128(bad, _mm_cmpeq_epi16(_mm_max_epu16(ux, e_neg), ux));
        const __m128i mxh = _mm_blendv_epi8(sm, un, _mm_srai_epi16(sm, 15));  // smax < 0: umin
        __m128i mnh = _mm_blendv_epi8(un, ux, _mm_srai_epi16(ux, 15));       // umax >= 0x8000: umax
        mnh = _mm_andnot_si128(_mm_cmpeq_epi16(mnh, nz), mnh);               // -0 -> +0
        const __m256 zf = _mm256_cvtph_ps(mnh), b = _mm256_cvtph_ps(mxh);
        const __m256 sv = _mm256_div_ps(_mm256_sub_ps(b, zf), top);
        const __m256 pos = _mm256_cmp_ps(sv, zero, _CMP_GT_OQ);
        const __m128i s16 = _mm_and_si128(_mm256_cvtps_ph(sv, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC),
                                          _mm_packs_epi32(_mm256_castsi256_si128(_mm256_castps_si256(pos)),
                                                          _mm256_extracti128_si256(_mm256_castps_si256(pos), 1)));
        const __m256 iv = _mm256_and_ps(_mm256_div_ps(one, _mm256_cvtph_ps(s16)), pos);
        _mm256_storeu_ps(z + g, zf);
        _mm256_storeu_ps(inv + g, iv);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(pairs + 4 * g), _mm_unpacklo_epi16(s16, mnh));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(pairs + 4 * g + 16), _mm_unpackhi_epi16(s16, mnh));
    }
    if (!_mm_testz_si128(bad, bad)) return false;
    for (; g < G; g++) {
        const uint16_t sm = ksm[g], un = kun[g], ux = kux[g];
        if (int16_t(sm) > 0x7BFF) return false;
        const uint16_t mxh = int16_t(sm) < 0 ? un : sm, mnh = ux >= 0x8000u ? ux : un;
        const float mn = _cvtsh_ss(mnh), mx = _cvtsh_ss(mxh);
        if (!packed_make_params_scalar(&mn, &mx, 1, bits, pairs + 4 * g, z + g, inv + g)) return false;
    }
    return true;
}

// Token groups, 16 rows at a time: each row's 16 lanes, then a transpose
// that reduces as it goes (16-bit, 32-bit, 64-bit interleaves, then the
// 128-bit halves): lane i of the result is row i's, 4 operations per pair
// of vectors instead of a PHMINPOSUW fold per row.
template <int L>
inline __m256i lo_of(__m256i a, __m256i b) {
    if constexpr (L == 1) return _mm256_unpacklo_epi16(a, b);
    if constexpr (L == 2) return _mm256_unpacklo_epi32(a, b);
    if constexpr (L == 3) return _mm256_unpacklo_epi64(a, b);
    return _mm256_permute2x128_si256(a, b, 0x20);
}
template <int L>
inline __m256i hi_of(__m256i a, __m256i b) {
    if constexpr (L == 1) return _mm256_unpackhi_epi16(a, b);
    if constexpr (L == 2) return _mm256_unpackhi_epi32(a, b);
    if constexpr (L == 3) return _mm256_unpackhi_epi64(a, b);
    return _mm256_permute2x128_si256(a, b, 0x31);
}
template <int L>
inline Red16 fold2(const Red16 &a, const Red16 &b) {
    return {_mm256_max_epi16(lo_of<L>(a.smax, b.smax), hi_of<L>(a.smax, b.smax)),
            _mm256_min_epu16(lo_of<L>(a.umin, b.umin), hi_of<L>(a.umin, b.umin)),
            _mm256_max_epu16(lo_of<L>(a.umax, b.umax), hi_of<L>(a.umax, b.umax))};
}
// 2^L rows of C values at h -> their reductions (L = 4: lane i is row i's).
template <int L>
inline Red16 rows_red(const uint16_t *h, size_t C) {
    if constexpr (L == 0) {
        Red16 r;
        red_init(r, ld16(h));
        for (size_t i = 16; i < C; i += 16) red_add(r, ld16(h + i));
        return r;
    } else {
        return fold2<L>(rows_red<L - 1>(h, C), rows_red<L - 1>(h + (size_t(1) << (L - 1)) * C, C));
    }
}

// Pass 1: the key triples of every group (C % 16 == 0).
void keys_fp16(const uint16_t *h, size_t T, size_t C, unsigned group, uint16_t *k) {
    const size_t G = group == kGroupPage ? 1 : group == kGroupChannel ? C : T;
    Red16 r;
    if (group == kGroupChannel) {
        for (size_t c = 0; c < C; c += 16) {
            red_init(r, ld16(h + c));
            size_t t = 1;
            if (T >= 3) {  // two chains
                Red16 r2;
                red_init(r2, ld16(h + C + c));
                for (t = 2; t + 2 <= T; t += 2) red_add(r, ld16(h + t * C + c)), red_add(r2, ld16(h + (t + 1) * C + c));
                r.smax = _mm256_max_epi16(r.smax, r2.smax);
                r.umin = _mm256_min_epu16(r.umin, r2.umin);
                r.umax = _mm256_max_epu16(r.umax, r2.umax);
            }
            for (; t < T; t++) red_add(r, ld16(h + t * C + c));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(k + c), r.smax);
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(k + G + c), r.umin);
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(k + 2 * G + c), r.umax);
        }
        return;
    }
    size_t g = 0;
    if (group == kGroupToken)
        for (; g + 16 <= G; g += 16, h += 16 * C) {
            r = rows_red<4>(h, C);
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(k + g), r.smax);
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(k + G + g), r.umin);
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(k + 2 * G + g), r.umax);
        }
    const size_t run = group == kGroupPage ? T * C : C;
    for (; g < G; g++, h += run) {
        red_init(r, ld16(h));
        size_t i = 16;
        if (run >= 32) {  // two chains
            Red16 r2;
            red_init(r2, ld16(h + 16));
            for (i = 32; i + 32 <= run; i += 32) red_add(r, ld16(h + i)), red_add(r2, ld16(h + i + 16));
            r.smax = _mm256_max_epi16(r.smax, r2.smax);
            r.umin = _mm256_min_epu16(r.umin, r2.umin);
            r.umax = _mm256_max_epu16(r.umax, r2.umax);
        }
        for (; i < run; i += 16) red_add(r, ld16(h + i));
        uint16_t t3[3];
        red_fold(r, t3);
        k[g] = t3[0], k[G + g] = t3[1], k[2 * G + g] = t3[2];
    }
}

// 16 FP16 values -> 16 q words (saturated to int16; lanes: values 0-3, 8-11 |
// 4-7, 12-15), with (z, inv) for values 0-7 in z0/i0 and 8-15 in z1/i1.
inline __m256i quant16w(const uint16_t *h, __m256 z0, __m256 i0, __m256 z1, __m256 i1) {
    const __m256 x0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(h)));
    const __m256 x1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(h + 8)));
    const __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_sub_ps(x0, z0), i0));  // RNE (MXCSR default)
    const __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_sub_ps(x1, z1), i1));
    return _mm256_packs_epi32(q0, q1);
}

// 32 values at h (in order) -> their 16 b = 4 bytes, with (z, inv) for
// values 8k..8k+7 at zp + 8k, ip + 8k (one group per channel) or zb, ib (one
// for all 32): bytes of the q values (packus: lanes 0-3, 8-11, 16-19, 24-27 |
// 4-7, 12-15, 20-23, 28-31), their byte minimum with 15, q[2k] + 16 q[2k+1]
// per 16-bit lane (MADDUBS), then the pairs in order: the result's 16-bit
// lanes hold the 16 bytes (0-7 | 8-15).
inline __m256i pack4x32(__m256i w0, __m256i w1) {
    const __m256i b = _mm256_min_epu8(_mm256_packus_epi16(w0, w1), _mm256_set1_epi8(15));
    return _mm256_permutevar8x32_epi32(_mm256_maddubs_epi16(b, _mm256_set1_epi16(0x1001)),
                                       _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
inline __m256i pack4x32_ch(const uint16_t *h, const float *zp, const float *ip) {
    return pack4x32(
        quant16w(h, _mm256_loadu_ps(zp), _mm256_loadu_ps(ip), _mm256_loadu_ps(zp + 8), _mm256_loadu_ps(ip + 8)),
        quant16w(h + 16, _mm256_loadu_ps(zp + 16), _mm256_loadu_ps(ip + 16), _mm256_loadu_ps(zp + 24),
                 _mm256_loadu_ps(ip + 24)));
}
inline __m256i pack4x32_bc(const uint16_t *h, __m256 zb, __m256 ib) {
    return pack4x32(quant16w(h, zb, ib, zb, ib), quant16w(h + 16, zb, ib, zb, ib));
}
// Two 32-value results -> 32 bytes; one -> 16 bytes.
inline void store4x64(__m256i p0, __m256i p1, uint8_t *dst) {
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst), _mm256_permute4x64_epi64(_mm256_packus_epi16(p0, p1), 0xD8));
}
inline void store4x32(__m256i p, uint8_t *dst) {
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst),
                     _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi16(p, p), 0x08)));
}

// b = 4, C % 32 == 0: 64 values a step (two rows when C = 32).
void quant4_fp16(const uint16_t *h, size_t T, size_t C, unsigned group, const float *z, const float *inv,
                 uint8_t *dst) {
    if (group == kGroupChannel) {
        if (C == 32) {
            size_t t = 0;
            for (; t + 2 <= T; t += 2, h += 64, dst += 32)
                store4x64(pack4x32_ch(h, z, inv), pack4x32_ch(h + 32, z, inv), dst);
            if (t < T) store4x32(pack4x32_ch(h, z, inv), dst);
            return;
        }
        for (size_t t = 0; t < T; t++) {
            size_t c = 0;
            for (; c + 64 <= C; c += 64, h += 64, dst += 32)
                store4x64(pack4x32_ch(h, z + c, inv + c), pack4x32_ch(h + 32, z + c + 32, inv + c + 32), dst);
            if (c < C) store4x32(pack4x32_ch(h, z + c, inv + c), dst), h += 32, dst += 16;
        }
        return;
    }
    if (group == kGroupToken && C == 32) {
        size_t t = 0;
        for (; t + 2 <= T; t += 2, h += 64, dst += 32)
            store4x64(pack4x32_bc(h, _mm256_broadcast_ss(z + t), _mm256_broadcast_ss(inv + t)),
                      pack4x32_bc(h + 32, _mm256_broadcast_ss(z + t + 1), _mm256_broadcast_ss(inv + t + 1)), dst);
        if (t < T) store4x32(pack4x32_bc(h, _mm256_broadcast_ss(z + t), _mm256_broadcast_ss(inv + t)), dst);
        return;
    }
    for (size_t t = 0; t < T; t++) {
        const size_t g = group == kGroupPage ? 0 : t;
        const __m256 zb = _mm256_broadcast_ss(z + g), ib = _mm256_broadcast_ss(inv + g);
        size_t c = 0;
        for (; c + 64 <= C; c += 64, h += 64, dst += 32)
            store4x64(pack4x32_bc(h, zb, ib), pack4x32_bc(h + 32, zb, ib), dst);
        if (c < C) store4x32(pack4x32_bc(h, zb, ib), dst), h += 32, dst += 16;
    }
}

// Pass 2 (§19.3, §19.4). The clamp to [0, 2^b - 1] is the saturating packs
// and a byte minimum: a t = (x - z) * inv below 0 gives 0, one at or above
// 2^b - 1 gives 2^b - 1, like the reference, except t >= 2^31 (CVTPS2DQ's
// 0x80000000). That t cannot occur: x - z <= mx - z = d and s >= d / (2^b - 1)
// with three roundings in between keep t below (2^b - 1)(1 + 2^-21).
// Other b (and b = 4 with C % 32 == 16): 16 values a step, two PEXT.
template <unsigned B>
void quant_fp16(const uint16_t *h, size_t T, size_t C, unsigned group, const float *z, const float *inv,
                uint8_t *dst) {
    if (B == 4 && C % 32 == 0) return quant4_fp16(h, T, C, group, z, inv, dst);
    const uint64_t mask = 0x0101010101010101ull * ((1u << B) - 1u);
    const __m128i qm = _mm_set1_epi8(int8_t((1u << B) - 1u));
    for (size_t t = 0; t < T; t++) {
        const size_t g = group == kGroupPage ? 0 : t;
        const __m256 zr = _mm256_broadcast_ss(z + g), ir = _mm256_broadcast_ss(inv + g);
        for (size_t c = 0; c < C; c += 16, h += 16, dst += 2 * B) {
            const bool ch = group == kGroupChannel;
            const __m256i w = quant16w(h, ch ? _mm256_loadu_ps(z + c) : zr, ch ? _mm256_loadu_ps(inv + c) : ir,
                                       ch ? _mm256_loadu_ps(z + c + 8) : zr, ch ? _mm256_loadu_ps(inv + c + 8) : ir);
            const __m128i b =
                _mm_min_epu8(_mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1)), qm);
            // b: values 0-3, 8-11, 4-7, 12-15
            const __m128i o = _mm_shuffle_epi32(b, 0xD8);
            const uint64_t lo = _pext_u64(uint64_t(_mm_cvtsi128_si64(o)), mask);
            const uint64_t hi = _pext_u64(uint64_t(_mm_extract_epi64(o, 1)), mask);
            std::memcpy(dst, &lo, B);
            std::memcpy(dst + B, &hi, B);
        }
    }
}

}  // namespace

bool packed_fp16_params_avx2(const uint16_t *h, size_t T, size_t C, unsigned bits, unsigned group, uint8_t *pairs,
                             uint16_t *keys, float *z, float *inv) {
    const size_t G = group == kGroupPage ? 1 : group == kGroupChannel ? C : T;
    keys_fp16(h, T, C, group, keys);
    return params_from_keys(keys, G, bits, pairs, z, inv);
}

namespace {

int encode_fp16_avx2(const uint16_t *h, size_t T, size_t C, unsigned bits, unsigned group, uint8_t *payload,
                     uint16_t *keys, float *z, float *inv) {
    if (C % 16) return -1;
    const size_t G = group == kGroupPage ? 1 : group == kGroupChannel ? C : T;
    if (!packed_fp16_params_avx2(h, T, C, bits, group, payload, keys, z, inv)) return 0;
    uint8_t *dst = payload + 4 * G;
    switch (bits) {
        case 3: quant_fp16<3>(h, T, C, group, z, inv, dst); break;
        case 4: quant_fp16<4>(h, T, C, group, z, inv, dst); break;
        case 5: quant_fp16<5>(h, T, C, group, z, inv, dst); break;
        case 6: quant_fp16<6>(h, T, C, group, z, inv, dst); break;
        case 7: quant_fp16<7>(h, T, C, group, z, inv, dst); break;
        default: quant_fp16<8>(h, T, C, group, z, inv, dst); break;
    }
    return 1;
}

SPECKV_TARGET_END

const PackedKernels kPackedAvx2 = {"avx2", to_f32_avx2, minmax_avx2, encode_avx2, decode_avx2, params_avx2,
                                   make_params_avx2, encode_fp16_avx2};

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
