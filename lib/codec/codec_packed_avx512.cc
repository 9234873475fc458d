// SPDX-License-Identifier: Apache-2.0
// AVX-512 (F, BW, VL) + F16C + FMA + BMI2 kernels of the fixed-width packed
// presets (docs/codec.md §19), in a target region (isa_target.h); reached only
// when the CPU has them (packed_avx512_kernels() checks). 16 values per step
// (two PEXT / PDEP of 8); pages whose rows are not a multiple of 16 values go
// to the AVX2 table. Bytes and values equal the reference's (codec_packed.cc).
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

const PackedKernels *g_narrow = &kPackedScalar;  // C % 16 != 0: the AVX2 table (set by the probe)

SPECKV_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx2,f16c,fma,bmi,bmi2")

bool to_f32_512(int dtype, const void *src, size_t n, float *x) {
    size_t i = 0;
    __mmask16 bad = 0;
    const __m512i e32 = _mm512_set1_epi32(0x7F800000);
    if (dtype == SPECKV_DTYPE_FP16) {
        auto h = static_cast<const uint16_t *>(src);
        const __m256i e16 = _mm256_set1_epi16(0x7C00);
        __m256i b16 = _mm256_setzero_si256();
        for (; i + 16 <= n; i += 16) {
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(h + i));
            b16 = _mm256_or_si256(b16, _mm256_cmpeq_epi16(_mm256_and_si256(v, e16), e16));
            _mm512_storeu_ps(x + i, _mm512_cvtph_ps(v));
        }
        if (!_mm256_testz_si256(b16, b16)) return false;
    } else if (dtype == SPECKV_DTYPE_BF16) {
        auto h = static_cast<const uint16_t *>(src);
        for (; i + 16 <= n; i += 16) {
            const __m512i u = _mm512_slli_epi32(
                _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(h + i))), 16);
            bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, e32), e32);
            _mm512_storeu_si512(x + i, u);
        }
    } else {
        auto f = static_cast<const uint32_t *>(src);
        for (; i + 16 <= n; i += 16) {
            const __m512i u = _mm512_loadu_si512(f + i);
            bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, e32), e32);
            _mm512_storeu_si512(x + i, u);
        }
    }
    if (bad) return false;
    const size_t es = dtype_size(dtype);
    return i == n || g_narrow->to_f32(dtype, static_cast<const uint8_t *>(src) + i * es, n - i, x + i);
}

inline void minmax_run(const float *x, size_t n, float *mn, float *mx) {
    __m512 a = _mm512_loadu_ps(x), b = a;
    for (size_t i = 16; i < n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        a = _mm512_min_ps(a, v);
        b = _mm512_max_ps(b, v);
    }
    *mn = _mm512_reduce_min_ps(a);
    *mx = _mm512_reduce_max_ps(b);
}

void minmax_512(const float *x, size_t T, size_t C, unsigned group, float *mn, float *mx) {
    if (C % 16) return g_narrow->minmax(x, T, C, group, mn, mx);
    if (group == kGroupPage) return minmax_run(x, T * C, mn, mx);
    if (group == kGroupToken) {
        for (size_t t = 0; t < T; t++) minmax_run(x + t * C, C, mn + t, mx + t);
        return;
    }
    for (size_t c = 0; c < C; c += 16) {
        __m512 a = _mm512_loadu_ps(x + c), b = a;
        for (size_t t = 1; t < T; t++) {
            const __m512 v = _mm512_loadu_ps(x + t * C + c);
            a = _mm512_min_ps(a, v);
            b = _mm512_max_ps(b, v);
        }
        _mm512_storeu_ps(mn + c, a);
        _mm512_storeu_ps(mx + c, b);
    }
}

// 16 values -> their q bytes (§19.3).
inline __m128i quant16(__m512 x, __m512 z, __m512 inv, __m512i qmax) {
    __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_sub_ps(x, z), inv));  // RNE (MXCSR default)
    q = _mm512_min_epi32(_mm512_max_epi32(q, _mm512_setzero_si512()), qmax);
    return _mm512_cvtepi32_epi8(q);
}

template <unsigned B>
inline void put16(__m128i q, uint64_t mask, uint8_t *dst) {
    if constexpr (B == 4) {  // no PEXT: q[2k] + 16 q[2k+1] per 16-bit lane, then narrowed
        const __m128i p = _mm_maddubs_epi16(q, _mm_set1_epi16(0x1001));
        _mm_storel_epi64(reinterpret_cast<__m128i *>(dst), _mm_packus_epi16(p, p));
        return;
    }
    const uint64_t p0 = _pext_u64(uint64_t(_mm_cvtsi128_si64(q)), mask);
    const uint64_t p1 = _pext_u64(uint64_t(_mm_extract_epi64(q, 1)), mask);
    if constexpr (B == 8) {
        std::memcpy(dst, &p0, 8);
        std::memcpy(dst + 8, &p1, 8);
        return;
    }
    const uint64_t lo = p0 | (p1 << (8 * B % 64));  // 16 values = 2B bytes, LSB first
    if constexpr (2 * B <= 8) {
        std::memcpy(dst, &lo, 2 * B);
    } else {
        std::memcpy(dst, &lo, 8);
        const uint64_t hi = p1 >> ((64 - 8 * B) % 64);
        std::memcpy(dst + 8, &hi, 2 * B - 8);
    }
}

template <unsigned B>
void encode_b(const float *x, size_t T, size_t C, unsigned group, const float *z, const float *inv, uint8_t *dst) {
    const uint64_t mask = 0x0101010101010101ull * ((1u << B) - 1u);
    const __m512i qmax = _mm512_set1_epi32((1 << B) - 1);
    for (size_t t = 0; t < T; t++) {
        const float *xr = x + t * C;
        if (group == kGroupChannel) {
            for (size_t c = 0; c < C; c += 16, dst += 2 * B)
                put16<B>(quant16(_mm512_loadu_ps(xr + c), _mm512_loadu_ps(z + c), _mm512_loadu_ps(inv + c), qmax),
                         mask, dst);
        } else {
            const size_t g = group == kGroupPage ? 0 : t;
            const __m512 zv = _mm512_set1_ps(z[g]), iv = _mm512_set1_ps(inv[g]);
            for (size_t c = 0; c < C; c += 16, dst += 2 * B) put16<B>(quant16(_mm512_loadu_ps(xr + c), zv, iv, qmax), mask, dst);
        }
    }
}

void encode_512(const float *x, size_t T, size_t C, unsigned bits, unsigned group, const float *z, const float *inv,
                uint8_t *dst) {
    if (C % 16) return g_narrow->encode(x, T, C, bits, group, z, inv, dst);
    switch (bits) {
        case 3: return encode_b<3>(x, T, C, group, z, inv, dst);
        case 4: return encode_b<4>(x, T, C, group, z, inv, dst);
        case 5: return encode_b<5>(x, T, C, group, z, inv, dst);
        case 6: return encode_b<6>(x, T, C, group, z, inv, dst);
        case 7: return encode_b<7>(x, T, C, group, z, inv, dst);
        default: return encode_b<8>(x, T, C, group, z, inv, dst);
    }
}

// 16 values (2B bytes at src) -> FP32 (§19.5: fma, one rounding).
// `wide`: 16 bytes at src may be read (one load; no partial-width load
// through the stack, which stalls store forwarding for b = 3, 5, 6, 7).
template <unsigned B>
inline __m512 dequant16(const uint8_t *src, __m512 s, __m512 z, bool wide) {
    const uint64_t mask = 0x0101010101010101ull * ((1u << B) - 1u);
    const uint64_t keep = B == 8 ? ~0ull : (1ull << (8 * B % 64)) - 1ull;
    uint64_t w0 = 0, w1 = 0;
    if (wide) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src));
        w0 = uint64_t(_mm_cvtsi128_si64(v)) & keep;
        w1 = uint64_t(_mm_cvtsi128_si64(_mm_srli_si128(v, B))) & keep;
    } else {
        std::memcpy(&w0, src, B);
        std::memcpy(&w1, src + B, B);
    }
    const __m128i b = _mm_set_epi64x(int64_t(_pdep_u64(w1, mask)), int64_t(_pdep_u64(w0, mask)));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b)), s, z);
}

// b = 4 without PDEP: d holds a 16-byte chunk's bytes one per dword
// (VPMOVZXBD); byte k holds value 2k in its low nibble and 2k+1 in its high
// one (§19.4). Values 16h .. 16h + 15 land one per dword, each byte in two
// lanes, the odd lane shifted down 4: the bits above the nibble are left for
// a lookup that reads only the low 4 (VPERMPS) to ignore.
inline __m512i nibbles16(__m512i d, unsigned h) {
    const __m512i lo8 = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i odd4 = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
    return _mm512_srlv_epi32(_mm512_permutexvar_epi32(_mm512_add_epi32(lo8, _mm512_set1_epi32(8 * h)), d), odd4);
}

// 16 FP32 results -> 16 FP16 or BF16 fields (round to nearest even).
template <bool kSat>
inline __m256i to16(__m512 y, int dtype) {
    if (dtype == SPECKV_DTYPE_FP16) {
        const __m512 lim = _mm512_set1_ps(65504.0f);
        if (kSat) y = _mm512_min_ps(_mm512_max_ps(y, _mm512_sub_ps(_mm512_setzero_ps(), lim)), lim);
        return _mm512_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    const __m512i u = _mm512_castps_si512(y);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
    return _mm512_cvtepi32_epi16(r);
}

template <bool kSat>
inline void store16(__m512 y, int dtype, uint8_t *o) {
    if (dtype == SPECKV_DTYPE_FP32)
        _mm512_storeu_ps(reinterpret_cast<float *>(o), y);
    else
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(o), to16<kSat>(y, dtype));
}

// b = 4, C a multiple of 32, a scale and zero point per channel (K): 32
// values (16 bytes) a step, so every load stays inside the stream.
template <bool kSat, int kDtype>
void decode4_ch(const uint8_t *src, size_t T, size_t C, const float *s, const float *z, uint8_t *o) {
    constexpr size_t es = kDtype == SPECKV_DTYPE_FP32 ? 4 : 2;
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // 32 channels at a time down all the rows: their s and z stay in registers.
    for (size_t c = 0; c < C; c += 32) {
        const __m512 s0 = _mm512_loadu_ps(s + c), s1 = _mm512_loadu_ps(s + c + 16);
        const __m512 z0 = _mm512_loadu_ps(z + c), z1 = _mm512_loadu_ps(z + c + 16);
        const uint8_t *in = src + c / 2;
        uint8_t *oc = o + c * es;
        for (size_t t = 0; t < T; t++, in += C / 2, oc += C * es) {
            // VPERMPS of 0..15 masks the nibble and converts it to float in
            // one op (3 per 16 values where mask, shift, widening and
            // conversion took 4.5).
            const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(in)));
            const __m512 y0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(nibbles16(d, 0), iota), s0, z0);
            const __m512 y1 = _mm512_fmadd_ps(_mm512_permutexvar_ps(nibbles16(d, 1), iota), s1, z1);
            store16<kSat>(y0, kDtype, oc);
            store16<kSat>(y1, kDtype, oc + 16 * es);
        }
    }
}

// b = 4 with one (s, z) per token or page (V): the 16 possible outputs of a
// row are computed once (the same fma and conversion as above, so the same
// bits) and each value is looked up: one VPERMW per 32 values (VPERMPS per 16
// for FP32) instead of a conversion, an fma and a rounding per 16. Each source
// byte goes to two lanes, the odd one shifted down 4; the table holds its 16
// entries twice (VPERMW reads 5 index bits), so the bits above the nibble
// never need masking.
template <bool kSat, int kDtype>
void decode4_lut(const uint8_t *src, size_t T, size_t C, unsigned group, const float *s, const float *z, uint8_t *o) {
    constexpr size_t es = kDtype == SPECKV_DTYPE_FP32 ? 4 : 2;
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // word lane i takes source word i / 2; odd lanes shift by 4
    const __m512i dup16 = _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                                                             16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 1);
    const __m512i odd4w = _mm512_set1_epi32(4 << 16);
    __m512i tbl = _mm512_setzero_si512();
    for (size_t t = 0; t < T; t++) {
        if (t == 0 || group != kGroupPage) {  // the table, in registers (no store-to-load round trip)
            const size_t g = group == kGroupPage ? 0 : t;
            const __m512 y = _mm512_fmadd_ps(iota, _mm512_set1_ps(s[g]), _mm512_set1_ps(z[g]));
            if constexpr (kDtype == SPECKV_DTYPE_FP32)
                tbl = _mm512_castps_si512(y);
            else
                tbl = _mm512_broadcast_i64x4(to16<kSat>(y, kDtype));
        }
        for (size_t c = 0; c < C; c += 32, src += 16, o += 32 * es) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src));
            if constexpr (kDtype == SPECKV_DTYPE_FP32) {
                const __m512 tf = _mm512_castsi512_ps(tbl);
                const __m512i d = _mm512_cvtepu8_epi32(v);
                _mm512_storeu_ps(o, _mm512_permutexvar_ps(nibbles16(d, 0), tf));
                _mm512_storeu_ps(o + 64, _mm512_permutexvar_ps(nibbles16(d, 1), tf));
            } else {
                const __m512i w = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(v));
                const __m512i q = _mm512_srlv_epi16(_mm512_permutexvar_epi16(dup16, w), odd4w);
                _mm512_storeu_si512(o, _mm512_permutexvar_epi16(q, tbl));
            }
        }
    }
}

// b = 3 and 5 without PDEP (codec_packed_fields.h): a PSHUFB places each
// value's bytes in its lane, VPSRLVD / VPSRLVW bring its field to bit 0.
// The kernels decode rows [t0, t1); kCheck: loads near the stream's end are
// masked (split_rows).
using packed35::kDw;
using packed35::kOver;
using packed35::kW;
using packed35::split_rows;

// 16 bytes at p; kCheck: those before `end` only (a masked load reads nothing past it).
template <bool kCheck>
inline __m128i load16(const uint8_t *p, const uint8_t *end) {
    if constexpr (kCheck) {
        const size_t n = size_t(end - p);
        return _mm_maskz_loadu_epi8(n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u), p);
    }
    return _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
}

template <unsigned B, bool kMask, bool kCheck>
inline __m512i fields16(const uint8_t *p, const uint8_t *end, __m512i shuf, __m512i sh) {
    const __m512i v = _mm512_broadcast_i32x4(load16<kCheck>(p, end));
    const __m512i d = _mm512_srlv_epi32(_mm512_shuffle_epi8(v, shuf), sh);
    return kMask ? _mm512_and_si512(d, _mm512_set1_epi32((1 << B) - 1)) : d;
}

template <unsigned B, bool kCheck>
inline __m512i fields32w(const uint8_t *p, const uint8_t *end, __m512i shuf, __m512i sh) {
    __m512i v;
    if constexpr (B == 3) {
        v = _mm512_broadcast_i32x4(load16<kCheck>(p, end));
    } else {
        const __m256i a = _mm256_broadcastsi128_si256(load16<kCheck>(p, end));
        const __m256i b = _mm256_broadcastsi128_si256(load16<kCheck>(p + 8, end));
        v = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
    }
    return _mm512_srlv_epi16(_mm512_shuffle_epi8(v, shuf), sh);
}

// b = 3, 5, one (s, z) per channel (K): W = 16 or 32 channels at a time down
// the rows (their s and z in registers), 16 values per step: fields, convert,
// the fma, the output conversion.
template <unsigned B, bool kSat, int kDtype, size_t W, bool kCheck>
void decode35_ch(const uint8_t *src, size_t t0, size_t t1, size_t T, size_t C, const float *s, const float *z,
                 uint8_t *o) {
    constexpr size_t es = kDtype == SPECKV_DTYPE_FP32 ? 4 : 2;
    const uint8_t *const end = src + T * C * B / 8;
    const __m512i shuf = _mm512_load_si512(kDw<B>.shuf), sh = _mm512_load_si512(kDw<B>.sh);
    const size_t rb = C * B / 8;
    for (size_t c = 0; c < C; c += W) {
        const __m512 s0 = _mm512_loadu_ps(s + c), z0 = _mm512_loadu_ps(z + c);
        const __m512 s1 = W == 32 ? _mm512_loadu_ps(s + c + 16) : s0, z1 = W == 32 ? _mm512_loadu_ps(z + c + 16) : z0;
        const uint8_t *in = src + t0 * rb + c * B / 8;
        uint8_t *oc = o + (t0 * C + c) * es;
        for (size_t t = t0; t < t1; t++, in += rb, oc += C * es) {
            const __m512i d0 = fields16<B, true, kCheck>(in, end, shuf, sh);
            store16<kSat>(_mm512_fmadd_ps(_mm512_cvtepi32_ps(d0), s0, z0), kDtype, oc);
            if constexpr (W == 32) {
                const __m512i d1 = fields16<B, true, kCheck>(in + 2 * B, end, shuf, sh);
                store16<kSat>(_mm512_fmadd_ps(_mm512_cvtepi32_ps(d1), s1, z1), kDtype, oc + 16 * es);
            }
        }
    }
}

// b = 3, 5, one (s, z) per token or page (V), C a multiple of 32 (16 for FP32
// out): the 2^b possible outputs of a row computed once (the same fma and
// conversion, so the same bits) and looked up, one VPERMW per 32 values
// (FP16, BF16) or a VPERMPS / VPERMT2PS per 16 (FP32).
template <unsigned B, bool kSat, int kDtype, bool kCheck>
void decode35_lut(const uint8_t *src, size_t t0, size_t t1, size_t T, size_t C, unsigned group, const float *s,
                  const float *z, uint8_t *o) {
    constexpr size_t es = kDtype == SPECKV_DTYPE_FP32 ? 4 : 2;
    const uint8_t *const end = src + T * C * B / 8;
    src += t0 * C * B / 8;
    o += t0 * C * es;
    const __m512 i0 = B == 3 ? _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7)
                             : _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 i1 = _mm512_add_ps(i0, _mm512_set1_ps(16.0f));
    if constexpr (kDtype == SPECKV_DTYPE_FP32) {
        const __m512i shuf = _mm512_load_si512(kDw<B>.shuf), sh = _mm512_load_si512(kDw<B>.sh);
        __m512 ta = _mm512_setzero_ps(), tb = ta;
        for (size_t t = t0; t < t1; t++) {
            if (t == t0 || group != kGroupPage) {
                const size_t g = group == kGroupPage ? 0 : t;
                const __m512 sv = _mm512_set1_ps(s[g]), zv = _mm512_set1_ps(z[g]);
                ta = _mm512_fmadd_ps(i0, sv, zv);
                if constexpr (B == 5) tb = _mm512_fmadd_ps(i1, sv, zv);
            }
            for (size_t c = 0; c < C; c += 16, src += 2 * B, o += 64) {
                // index bits only: VPERMPS reads 4 (the 8 entries twice), VPERMT2PS 5
                const __m512i q = fields16<B, false, kCheck>(src, end, shuf, sh);
                if constexpr (B == 3)
                    _mm512_storeu_ps(o, _mm512_permutexvar_ps(q, ta));
                else
                    _mm512_storeu_ps(o, _mm512_permutex2var_ps(ta, q, tb));
            }
        }
    } else {
        const __m512i shuf = _mm512_load_si512(kW<B>.shuf), sh = _mm512_load_si512(kW<B>.sh);
        __m512i tbl = _mm512_setzero_si512();
        for (size_t t = t0; t < t1; t++) {
            if (t == t0 || group != kGroupPage) {
                const size_t g = group == kGroupPage ? 0 : t;
                const __m512 sv = _mm512_set1_ps(s[g]), zv = _mm512_set1_ps(z[g]);
                const __m256i h0 = to16<kSat>(_mm512_fmadd_ps(i0, sv, zv), kDtype);
                const __m256i h1 = B == 3 ? h0 : to16<kSat>(_mm512_fmadd_ps(i1, sv, zv), kDtype);
                tbl = _mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1);
            }
            for (size_t c = 0; c < C; c += 32, src += 4 * B, o += 64) {
                const __m512i q = fields32w<B, kCheck>(src, end, shuf, sh);
                _mm512_storeu_si512(o, _mm512_permutexvar_epi16(q, tbl));
            }
        }
    }
}

// b = 3, 5, one (s, z) per row, FP16 or BF16 out, C % 32 == 16: the fma per value.
template <unsigned B, bool kSat, int kDtype, bool kCheck>
void decode35_row(const uint8_t *src, size_t t0, size_t t1, size_t T, size_t C, unsigned group, const float *s,
                  const float *z, uint8_t *o) {
    constexpr size_t es = kDtype == SPECKV_DTYPE_FP32 ? 4 : 2;
    const uint8_t *const end = src + T * C * B / 8;
    src += t0 * C * B / 8;
    o += t0 * C * es;
    const __m512i shuf = _mm512_load_si512(kDw<B>.shuf), sh = _mm512_load_si512(kDw<B>.sh);
    for (size_t t = t0; t < t1; t++) {
        const size_t g = group == kGroupPage ? 0 : t;
        const __m512 sv = _mm512_set1_ps(s[g]), zv = _mm512_set1_ps(z[g]);
        for (size_t c = 0; c < C; c += 16, src += 2 * B, o += 16 * es) {
            const __m512i d = fields16<B, true, kCheck>(src, end, shuf, sh);
            store16<kSat>(_mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sv, zv), kDtype, o);
        }
    }
}

template <unsigned B, bool kSat, int kDtype>
void decode35(const uint8_t *src, size_t T, size_t C, unsigned group, const float *s, const float *z, uint8_t *o) {
    split_rows(T, C * B / 8, kOver<B>, [&](auto check, size_t t0, size_t t1) {
        constexpr bool kCheck = decltype(check)::value;
        if (group == kGroupChannel)
            return C % 32 == 0 ? decode35_ch<B, kSat, kDtype, 32, kCheck>(src, t0, t1, T, C, s, z, o)
                               : decode35_ch<B, kSat, kDtype, 16, kCheck>(src, t0, t1, T, C, s, z, o);
        if (kDtype == SPECKV_DTYPE_FP32 || C % 32 == 0)
            return decode35_lut<B, kSat, kDtype, kCheck>(src, t0, t1, T, C, group, s, z, o);
        return decode35_row<B, kSat, kDtype, kCheck>(src, t0, t1, T, C, group, s, z, o);
    });
}

template <unsigned B, bool kSat>
void decode_b(const uint8_t *src, size_t T, size_t C, unsigned group, const float *s, const float *z, int dtype,
              void *out) {
    const size_t es = dtype_size(dtype);
    auto o = static_cast<uint8_t *>(out);
    const uint8_t *const base = src;
    const size_t total = T * C * B / 8;  // a 16-byte load at src stays inside while src - base + 16 <= total
    if constexpr (B == 3 || B == 5) {  // no PDEP; C % 16 == 0 here
        if (dtype == SPECKV_DTYPE_FP16) return decode35<B, kSat, SPECKV_DTYPE_FP16>(src, T, C, group, s, z, o);
        if (dtype == SPECKV_DTYPE_BF16) return decode35<B, kSat, SPECKV_DTYPE_BF16>(src, T, C, group, s, z, o);
        return decode35<B, kSat, SPECKV_DTYPE_FP32>(src, T, C, group, s, z, o);
    }
    if constexpr (B == 4) {
        if (C % 32 == 0) {  // no PDEP; dtype and grouping resolved once, outside the loops
            const bool ch = group == kGroupChannel;
            if (dtype == SPECKV_DTYPE_FP16)
                return ch ? decode4_ch<kSat, SPECKV_DTYPE_FP16>(src, T, C, s, z, o)
                          : decode4_lut<kSat, SPECKV_DTYPE_FP16>(src, T, C, group, s, z, o);
            if (dtype == SPECKV_DTYPE_BF16)
                return ch ? decode4_ch<kSat, SPECKV_DTYPE_BF16>(src, T, C, s, z, o)
                          : decode4_lut<kSat, SPECKV_DTYPE_BF16>(src, T, C, group, s, z, o);
            return ch ? decode4_ch<kSat, SPECKV_DTYPE_FP32>(src, T, C, s, z, o)
                      : decode4_lut<kSat, SPECKV_DTYPE_FP32>(src, T, C, group, s, z, o);
        }
    }
    for (size_t t = 0; t < T; t++) {
        if (group == kGroupChannel) {
            for (size_t c = 0; c < C; c += 16, src += 2 * B, o += 16 * es)
                store16<kSat>(dequant16<B>(src, _mm512_loadu_ps(s + c), _mm512_loadu_ps(z + c), size_t(src - base) + 16 <= total), dtype, o);
        } else {
            const size_t g = group == kGroupPage ? 0 : t;
            const __m512 sv = _mm512_set1_ps(s[g]), zv = _mm512_set1_ps(z[g]);
            for (size_t c = 0; c < C; c += 16, src += 2 * B, o += 16 * es)
                store16<kSat>(dequant16<B>(src, sv, zv, size_t(src - base) + 16 <= total), dtype, o);
        }
    }
}

// On a 64-byte boundary (where it was before the FP16 encoder joined this
// file): its loops keep their place in the cache lines whatever the code
// before it becomes (decode speed moved with that placement, §19.10's notes).
[[gnu::aligned(64)]] void decode_512(const uint8_t *src, size_t T, size_t C, unsigned bits, unsigned group,
                                     const float *s, const float *z, int dtype, void *out, bool sat) {
    if (C % 16) return g_narrow->decode(src, T, C, bits, group, s, z, dtype, out, sat);
    switch (bits) {
        case 3: return sat ? decode_b<3, true>(src, T, C, group, s, z, dtype, out) : decode_b<3, false>(src, T, C, group, s, z, dtype, out);
        case 4: return sat ? decode_b<4, true>(src, T, C, group, s, z, dtype, out) : decode_b<4, false>(src, T, C, group, s, z, dtype, out);
        case 5: return sat ? decode_b<5, true>(src, T, C, group, s, z, dtype, out) : decode_b<5, false>(src, T, C, group, s, z, dtype, out);
        case 6: return sat ? decode_b<6, true>(src, T, C, group, s, z, dtype, out) : decode_b<6, false>(src, T, C, group, s, z, dtype, out);
        case 7: return sat ? decode_b<7, true>(src, T, C, group, s, z, dtype, out) : decode_b<7, false>(src, T, C, group, s, z, dtype, out);
        default: return sat ? decode_b<8, true>(src, T, C, group, s, z, dtype, out) : decode_b<8, false>(src, T, C, group, s, z, dtype, out);
    }
}

// 16 (s16, z16) pairs per step.
bool params_512(const uint8_t *p, size_t G, float top, float *s, float *z, bool *sat) {
    size_t g = 0;
    __mmask16 bad = 0, over = 0;
    const __m512 tv = _mm512_set1_ps(top), lim = _mm512_set1_ps(65000.0f);
    const __m512i e = _mm512_set1_epi32(0x7C00), sm = _mm512_set1_epi32(0x8000);
    for (; g + 16 <= G; g += 16) {
        const __m512i v = _mm512_loadu_si512(p + 4 * g);
        const __m512i zv = _mm512_srli_epi32(v, 16);
        bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(v, e), e) | _mm512_cmpeq_epi32_mask(_mm512_and_si512(zv, e), e) |
               _mm512_test_epi32_mask(v, sm);
        const __m512 sf = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)), zf = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(zv));
        _mm512_storeu_ps(s + g, sf);
        _mm512_storeu_ps(z + g, zf);
        over |= _mm512_cmp_ps_mask(_mm512_add_ps(_mm512_mul_ps(tv, sf), zf), lim, _CMP_GT_OQ);
    }
    if (bad) return false;
    bool rest = false;
    if (g < G && !g_narrow->params(p + 4 * g, G - g, top, s + g, z + g, &rest)) return false;
    *sat = rest || over != 0;
    return true;
}

// §19.2 for 16 groups per step (as make_params_avx2).
bool make_params_512(const float *mn, const float *mx, size_t G, unsigned bits, uint8_t *pairs, float *z, float *inv) {
    size_t g = 0;
    const __m512 lim = _mm512_set1_ps(65504.0f), nlim = _mm512_set1_ps(-65504.0f), zero = _mm512_setzero_ps();
    const __m512 top = _mm512_set1_ps(float((1u << bits) - 1u)), one = _mm512_set1_ps(1.0f);
    for (; g + 16 <= G; g += 16) {
        const __m512 a = _mm512_loadu_ps(mn + g), b = _mm512_loadu_ps(mx + g);
        if ((_mm512_cmp_ps_mask(a, nlim, _CMP_GE_OQ) & _mm512_cmp_ps_mask(b, lim, _CMP_LE_OQ)) != 0xFFFF) return false;
        const __m256i z16 = _mm512_cvtps_ph(_mm512_add_ps(a, zero), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
        const __m512 zf = _mm512_cvtph_ps(z16);
        const __m512 sv = _mm512_div_ps(_mm512_sub_ps(b, zf), top);
        const __mmask16 pos = _mm512_cmp_ps_mask(sv, zero, _CMP_GT_OQ);
        const __m256i s16 = _mm256_maskz_mov_epi16(pos, _mm512_cvtps_ph(sv, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC));
        const __m512 sf = _mm512_cvtph_ps(s16);
        _mm512_storeu_ps(z + g, zf);
        _mm512_storeu_ps(inv + g, _mm512_maskz_div_ps(pos, one, sf));
        // (s, z) pairs in group order: interleave the 16-bit halves, 128-bit lane by lane
        const __m256i lo = _mm256_unpacklo_epi16(s16, z16), hi = _mm256_unpackhi_epi16(s16, z16);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(pairs + 4 * g), _mm256_permute2x128_si256(lo, hi, 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(pairs + 4 * g + 32), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
    return g == G || g_narrow->make_params(mn + g, mx + g, G - g, bits, pairs + 4 * g, z + g, inv + g);
}

// FP16 input, b = 4, C % 32 == 0 (after the first passes of
// codec_packed_fp16_avx512.cc): 64 values a step. 16 q dwords -> with two PACKSSDW, one PACKUSWB,
// a byte minimum with 15 and MADDUBS, 32 words q[2k] + 16 q[2k+1], lane k of
// 4 holding pairs 2k, 2k+1, 8+2k, 9+2k, 16+2k, 17+2k, 24+2k, 25+2k; one VPERMW
// puts them in order and VPMOVWB narrows them. The clamp is the AVX2 one
// (codec_packed_avx2.cc, quant_fp16): the same bytes.
inline __m512i quant16d(const uint16_t *h, __m512 z, __m512 inv) {
    const __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(h)));
    return _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_sub_ps(x, z), inv));  // RNE (MXCSR default)
}
inline void put4x64(const uint16_t *h, __m512 z0, __m512 i0, __m512 z1, __m512 i1, __m512 z2, __m512 i2, __m512 z3,
                    __m512 i3, uint8_t *dst) {
    const __m512i p01 = _mm512_packs_epi32(quant16d(h, z0, i0), quant16d(h + 16, z1, i1));
    const __m512i p23 = _mm512_packs_epi32(quant16d(h + 32, z2, i2), quant16d(h + 48, z3, i3));
    const __m512i b = _mm512_min_epu8(_mm512_packus_epi16(p01, p23), _mm512_set1_epi8(15));
    const __m512i m = _mm512_maddubs_epi16(b, _mm512_set1_epi16(0x1001));
    // output pair p is word 8 ((p % 8) / 2) + 2 (p / 8) + p % 2
    const __m512i ord = _mm512_set_epi16(31, 30, 23, 22, 15, 14, 7, 6, 29, 28, 21, 20, 13, 12, 5, 4, 27, 26, 19, 18,
                                         11, 10, 3, 2, 25, 24, 17, 16, 9, 8, 1, 0);
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst), _mm512_cvtepi16_epi8(_mm512_permutexvar_epi16(ord, m)));
}

void quant4_fp16_512(const uint16_t *h, size_t T, size_t C, unsigned group, const float *z, const float *inv,
                     uint8_t *dst) {
    const size_t n = T * C;
    size_t i = 0;
    if (group == kGroupChannel) {
        if (C == 32) {
            const __m512 z0 = _mm512_loadu_ps(z), z1 = _mm512_loadu_ps(z + 16);
            const __m512 i0 = _mm512_loadu_ps(inv), i1 = _mm512_loadu_ps(inv + 16);
            for (; i + 64 <= n; i += 64, dst += 32) put4x64(h + i, z0, i0, z1, i1, z0, i0, z1, i1, dst);
        } else if (C % 64 == 0) {
            for (size_t c = 0; i < n; i += 64, dst += 32, c = c + 64 == C ? 0 : c + 64)
                put4x64(h + i, _mm512_loadu_ps(z + c), _mm512_loadu_ps(inv + c), _mm512_loadu_ps(z + c + 16),
                        _mm512_loadu_ps(inv + c + 16), _mm512_loadu_ps(z + c + 32), _mm512_loadu_ps(inv + c + 32),
                        _mm512_loadu_ps(z + c + 48), _mm512_loadu_ps(inv + c + 48), dst);
        }
    } else if (group == kGroupToken && C == 32) {
        for (size_t t = 0; i + 64 <= n; i += 64, dst += 32, t += 2) {
            const __m512 za = _mm512_set1_ps(z[t]), ia = _mm512_set1_ps(inv[t]);
            const __m512 zb = _mm512_set1_ps(z[t + 1]), ib = _mm512_set1_ps(inv[t + 1]);
            put4x64(h + i, za, ia, za, ia, zb, ib, zb, ib, dst);
        }
    } else if (C % 64 == 0) {
        for (size_t t = 0; t < T; t++) {
            const size_t g = group == kGroupPage ? 0 : t;
            const __m512 zb = _mm512_set1_ps(z[g]), ib = _mm512_set1_ps(inv[g]);
            for (size_t c = 0; c < C; c += 64, i += 64, dst += 32) put4x64(h + i, zb, ib, zb, ib, zb, ib, zb, ib, dst);
        }
    }
    if (i < n) {  // the last row of an odd T (C = 32), or C % 64 == 32 with several rows a page
        // the general loop: 32 values a step, (z, inv) per 16
        for (; i < n; i += 32, dst += 16) {
            const size_t t = i / C, c = i % C, g = group == kGroupPage ? 0 : t;
            const bool ch = group == kGroupChannel;
            const __m512 za = ch ? _mm512_loadu_ps(z + c) : _mm512_set1_ps(z[g]);
            const __m512 ia = ch ? _mm512_loadu_ps(inv + c) : _mm512_set1_ps(inv[g]);
            const __m512 zb = ch ? _mm512_loadu_ps(z + c + 16) : za, ib = ch ? _mm512_loadu_ps(inv + c + 16) : ia;
            const __m512i p = _mm512_packs_epi32(quant16d(h + i, za, ia), quant16d(h + i + 16, zb, ib));
            const __m512i b = _mm512_min_epu8(_mm512_packus_epi16(p, p), _mm512_set1_epi8(15));
            const __m512i m = _mm512_maddubs_epi16(b, _mm512_set1_epi16(0x1001));
            // with p23 = p01: lane k words 0-3 = pairs 2k, 2k+1, 8+2k, 9+2k (16 pairs)
            const __m512i ord = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 27, 26, 19, 18, 11, 10,
                                                 3, 2, 25, 24, 17, 16, 9, 8, 1, 0);
            _mm_storeu_si128(reinterpret_cast<__m128i *>(dst),
                             _mm256_castsi256_si128(_mm512_cvtepi16_epi8(_mm512_permutexvar_epi16(ord, m))));
        }
    }
}

SPECKV_TARGET_END

// FP16 input: b = 4 with C % 32 == 0 here (after the min / max and parameter
// passes of codec_packed_fp16_avx512.cc), everything else as the AVX2 table
// does it.
int encode_fp16_512(const uint16_t *h, size_t T, size_t C, unsigned bits, unsigned group, uint8_t *payload,
                    uint16_t *keys, float *z, float *inv) {
    if (!g_narrow->encode_fp16) return -1;
    if (bits != 4 || C % 32) return g_narrow->encode_fp16(h, T, C, bits, group, payload, keys, z, inv);
    const size_t G = group == kGroupPage ? 1 : group == kGroupChannel ? C : T;
    if (!packed_fp16_params_avx512(h, T, C, bits, group, payload, keys, z, inv)) return 0;
    quant4_fp16_512(h, T, C, group, z, inv, payload + 4 * G);
    return 1;
}

const PackedKernels kPacked512 = {"avx512", to_f32_512, minmax_512, encode_512, decode_512, params_512,
                                  make_params_512, encode_fp16_512};

}  // namespace

// Baseline code: the probe.
const PackedKernels *packed_avx512_kernels() {
    if (!cpu::has(cpu::kAvx512f | cpu::kAvx512bw | cpu::kAvx512vl | cpu::kAvx2 | cpu::kF16c | cpu::kFma | cpu::kBmi |
                  cpu::kBmi2))
        return nullptr;
    static const PackedKernels *table = [] {
        if (const PackedKernels *k = packed_avx2_kernels()) g_narrow = k;
        return &kPacked512;
    }();
    return table;
}

}  // namespace speckv::codec

#else
namespace speckv::codec {
const PackedKernels *packed_avx512_kernels() { return nullptr; }
}  // namespace speckv::codec
#endif
