// SPDX-License-Identifier: Apache-2.0
// The AVX-512 table's int8 records in one pass (AVX-512 + VBMI + VPCLMULQDQ,
// AMD only): the record's CRC32C folded beside the quantiser, or beside the
// decoder's range check and lookup. Why and how: the comment below.
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
#include "codec/codec_avx512_common.h"

namespace speckv::codec {
namespace {

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

}  // namespace
}  // namespace speckv::codec

SPECKV_TARGET_END

namespace speckv::codec {
// Baseline code (isa_target.h). AMD only: see above.
const Int8Kernels *int8_avx512_kernels() {
    static const Int8Kernels k = {int8_decode_fp16_avx512, int8_encode_fp16_avx512};
    static const bool ok = cpu::is_amd() && cpu::has(cpu::kAvx512f | cpu::kAvx512bw | cpu::kAvx512vl | cpu::kF16c |
                                                     cpu::kAvx512vbmi | cpu::kVpclmulqdq | cpu::kPclmul | cpu::kSse42);
    return ok ? &k : nullptr;
}
}  // namespace speckv::codec

#else
namespace speckv::codec {
const Int8Kernels *int8_avx512_kernels() { return nullptr; }
}  // namespace speckv::codec
#endif
