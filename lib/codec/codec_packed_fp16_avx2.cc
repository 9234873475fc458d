// SPDX-License-Identifier: Apache-2.0
// The AVX2 packed encoder of FP16 pages (docs/codec.md §19.10): parameters and
// payload from the FP16 bits, without an FP32 copy of the page. Part of the
// AVX2 table (codec_packed_avx2.cc), in its own target region (isa_target.h);
// reached only when packed_avx2_kernels() is not null.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "codec/codec.h"
#include "codec/codec_kernels.h"
#include "util/isa_target.h"

#if SPECKV_X86_SIMD
#include <immintrin.h>

namespace speckv::codec {

SPECKV_TARGET_BEGIN("avx2,f16c,fma,bmi,bmi2")

namespace {

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
    return packed_fp16_params_from_keys_tail(k, G, g, bits, pairs, z, inv);
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

void packed_fp16_keys_avx2(const uint16_t *h, size_t T, size_t C, unsigned group, uint16_t *keys) {
    keys_fp16(h, T, C, group, keys);
}

bool packed_fp16_params_from_keys_tail(const uint16_t *k, size_t G, size_t g, unsigned bits, uint8_t *pairs, float *z,
                                       float *inv) {
    const uint16_t *ksm = k, *kun = k + G, *kux = k + 2 * G;
    for (; g < G; g++) {
        const uint16_t sm = ksm[g], un = kun[g], ux = kux[g];
        if (int16_t(sm) > 0x7BFF || ux >= 0xFC00u) return false;  // exponent 31 (the scalar check would refuse it too)
        const uint16_t mxh = int16_t(sm) < 0 ? un : sm, mnh = ux >= 0x8000u ? ux : un;
        const float mn = _cvtsh_ss(mnh), mx = _cvtsh_ss(mxh);
        if (!packed_make_params_scalar(&mn, &mx, 1, bits, pairs + 4 * g, z + g, inv + g)) return false;
    }
    return true;
}

bool packed_fp16_params_avx2(const uint16_t *h, size_t T, size_t C, unsigned bits, unsigned group, uint8_t *pairs,
                             uint16_t *keys, float *z, float *inv) {
    const size_t G = group == kGroupPage ? 1 : group == kGroupChannel ? C : T;
    keys_fp16(h, T, C, group, keys);
    return params_from_keys(keys, G, bits, pairs, z, inv);
}

int packed_encode_fp16_avx2(const uint16_t *h, size_t T, size_t C, unsigned bits, unsigned group, uint8_t *payload,
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

}  // namespace speckv::codec

#endif
