// SPDX-License-Identifier: Apache-2.0
// The AVX-512 packed encoder's first passes on FP16 pages (docs/codec.md
// §19.10): the minimum and maximum keys of channel groups 32 channels a
// vector, and §19.2's parameters 16 groups a step. The AVX2 passes
// (codec_packed_fp16_avx2.cc) did both 8 or 16 lanes wide; on a core with
// full-width AVX-512 the min / max pass and the two divisions per group cost
// half as much per lane at 512 bits. Token and page groups keep the AVX2 key
// pass (its transposing folds). Part of the AVX-512 table
// (codec_packed_avx512.cc), in its own target region; reached only when
// packed_avx512_kernels() is not null. The keys and parameters are the AVX2
// passes' (the codec tests compare every table's records).
#include <cstddef>
#include <cstdint>

#include "codec/codec.h"
#include "codec/codec_kernels.h"
#include "util/isa_target.h"

#if SPECKV_X86_SIMD
#include <immintrin.h>

namespace speckv::codec {

SPECKV_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx2,f16c,fma")

namespace {

inline __m512i ld32(const uint16_t *h) { return _mm512_loadu_si512(h); }

// Channel groups, C % 32 == 0: the key triples (smax, umin, umax of the FP16
// bits, as the AVX2 pass defines them) of 32 channels a vector, down the rows
// in two chains.
void keys_ch_512(const uint16_t *h, size_t T, size_t C, uint16_t *k) {
    const size_t G = C;
    for (size_t c = 0; c < C; c += 32) {
        __m512i sm = ld32(h + c), un = sm, ux = sm;
        size_t t = 1;
        if (T >= 3) {
            __m512i sm2 = ld32(h + C + c), un2 = sm2, ux2 = sm2;
            for (t = 2; t + 2 <= T; t += 2) {
                const __m512i a = ld32(h + t * C + c), b = ld32(h + (t + 1) * C + c);
                sm = _mm512_max_epi16(sm, a), un = _mm512_min_epu16(un, a), ux = _mm512_max_epu16(ux, a);
                sm2 = _mm512_max_epi16(sm2, b), un2 = _mm512_min_epu16(un2, b), ux2 = _mm512_max_epu16(ux2, b);
            }
            sm = _mm512_max_epi16(sm, sm2), un = _mm512_min_epu16(un, un2), ux = _mm512_max_epu16(ux, ux2);
        }
        for (; t < T; t++) {
            const __m512i a = ld32(h + t * C + c);
            sm = _mm512_max_epi16(sm, a), un = _mm512_min_epu16(un, a), ux = _mm512_max_epu16(ux, a);
        }
        _mm512_storeu_si512(k + c, sm);
        _mm512_storeu_si512(k + G + c, un);
        _mm512_storeu_si512(k + 2 * G + c, ux);
    }
}

// §19.2 from the key triples of G groups, 16 a step, the checks as the AVX2
// pass's params_from_keys (false on a non-finite value); the rest (G % 16)
// one at a time by the AVX2 pass's tail.
bool params_from_keys_512(const uint16_t *k, size_t G, unsigned bits, uint8_t *pairs, float *z, float *inv) {
    const uint16_t *ksm = k, *kun = k + G, *kux = k + 2 * G;
    const __m256i e_pos = _mm256_set1_epi16(0x7BFF), e_neg = _mm256_set1_epi16(int16_t(0xFC00)),
                  nz = _mm256_set1_epi16(int16_t(0x8000));
    const __m512 zero = _mm512_setzero_ps(), top = _mm512_set1_ps(float((1u << bits) - 1u)), one = _mm512_set1_ps(1.0f);
    __mmask16 bad = 0;
    size_t g = 0;
    for (; g + 16 <= G; g += 16) {
        const __m256i sm = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ksm + g));
        const __m256i un = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(kun + g));
        const __m256i ux = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(kux + g));
        // a value with exponent 31: smax above 0x7BFF, or umax at or above 0xFC00
        bad |= _mm256_cmpgt_epi16_mask(sm, e_pos) | _mm256_cmpge_epu16_mask(ux, e_neg);
        const __m256i mxh = _mm256_mask_mov_epi16(sm, _mm256_movepi16_mask(sm), un);   // smax < 0: umin
        __m256i mnh = _mm256_mask_mov_epi16(un, _mm256_movepi16_mask(ux), ux);         // umax >= 0x8000: umax
        mnh = _mm256_mask_mov_epi16(mnh, _mm256_cmpeq_epi16_mask(mnh, nz), _mm256_setzero_si256());  // -0 -> +0
        const __m512 zf = _mm512_cvtph_ps(mnh), mx = _mm512_cvtph_ps(mxh);
        const __m512 sv = _mm512_div_ps(_mm512_sub_ps(mx, zf), top);
        const __mmask16 pos = _mm512_cmp_ps_mask(sv, zero, _CMP_GT_OQ);
        const __m256i s16 = _mm256_maskz_mov_epi16(pos, _mm512_cvtps_ph(sv, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC));
        const __m512 iv = _mm512_maskz_div_ps(pos, one, _mm512_cvtph_ps(s16));
        _mm512_storeu_ps(z + g, zf);
        _mm512_storeu_ps(inv + g, iv);
        const __m256i lo = _mm256_unpacklo_epi16(s16, mnh), hi = _mm256_unpackhi_epi16(s16, mnh);  // 0-3|8-11, 4-7|12-15
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(pairs + 4 * g), _mm256_permute2x128_si256(lo, hi, 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(pairs + 4 * g + 32), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
    if (bad) return false;
    return packed_fp16_params_from_keys_tail(k, G, g, bits, pairs, z, inv);
}

}  // namespace

bool packed_fp16_params_avx512(const uint16_t *h, size_t T, size_t C, unsigned bits, unsigned group, uint8_t *pairs,
                               uint16_t *keys, float *z, float *inv) {
    const size_t G = group == kGroupPage ? 1 : group == kGroupChannel ? C : T;
    if (group == kGroupChannel && C % 32 == 0)
        keys_ch_512(h, T, C, keys);
    else
        packed_fp16_keys_avx2(h, T, C, group, keys);
    return params_from_keys_512(keys, G, bits, pairs, z, inv);
}

SPECKV_TARGET_END

}  // namespace speckv::codec

#endif
