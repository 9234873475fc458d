// SPDX-License-Identifier: Apache-2.0
// The codec's scalar kernels (codec_kernels.h) and their table: FP16/BF16
// conversions, canonical values, quantisation and its inverse, the delta
// stage. The reference every SIMD table must equal byte for byte
// (docs/codec.md cites the section of each).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>  // baseline on x86-64: no ISA flag needed
#endif

#include "codec/codec.h"
#include "codec/codec_kernels.h"
#include "codec/le_bytes.h"
#include "util/crc32c.h"
#include "util/status.h"

namespace speckv::codec {

// ------------------------------------------------------------ FP helpers

uint16_t fp32_to_fp16_rne(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    uint32_t a = u & 0x7FFFFFFFu, sgn = (u >> 16) & 0x8000u;
    if (a > 0x7F800000u) return uint16_t(sgn | 0x7E00u);
    if (a >= 0x477FF000u) return uint16_t(sgn | 0x7C00u);
    return fp32bits_to_fp16_sat(u);
}
float fp16_to_fp32(uint16_t h) {
    uint32_t u;
    canon_scalar(SPECKV_DTYPE_FP16, &h, 1, &u);
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
uint16_t fp32_to_bf16_rne(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x40u);
    return fp32bits_to_bf16(u);
}
float bf16_to_fp32(uint16_t h) {
    uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// ---------------------------------------------------------- scalar kernels

bool canon_scalar(int dtype, const void *src, size_t n, uint32_t *u) {
    bool finite = true;
    if (dtype == SPECKV_DTYPE_FP32) {
        std::memcpy(u, src, n * 4);
    } else if (dtype == SPECKV_DTYPE_BF16) {
        auto p = static_cast<const uint8_t *>(src);
        for (size_t i = 0; i < n; i++) u[i] = uint32_t(get16(p + 2 * i)) << 16;
    } else {
        auto p = static_cast<const uint8_t *>(src);
        for (size_t i = 0; i < n; i++) u[i] = fp16_bits_to_u32(get16(p + 2 * i));
    }
    for (size_t i = 0; i < n; i++) finite &= (u[i] & 0x7FFFFFFFu) < 0x7F800000u;
    return finite;
}

static uint32_t absmax_scalar(const uint32_t *u, size_t n) {
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) m = std::max(m, u[i] & 0x7FFFFF00u);
    return m;
}

static void colmax_scalar(const uint32_t *u, size_t T, size_t C, uint32_t *out) {
    for (size_t c = 0; c < C; c++) out[c] = 0;
    for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < C; c++) out[c] = std::max(out[c], u[t * C + c] & 0x7FFFFF00u);
}

void quant_const_scalar(const uint32_t *u, size_t n, uint32_t es, uint32_t r, uint32_t Q, int8_t *q) {
    for (size_t i = 0; i < n; i++) q[i] = int8_t(quant_one(u[i], es, r, Q));
}

void quant_row_scalar(const uint32_t *u, size_t C, const uint32_t *es, const uint32_t *r, uint32_t Q,
                      int8_t *q) {
    for (size_t c = 0; c < C; c++) q[c] = int8_t(quant_one(u[c], es[c], r[c], Q));
}

// §6.0 decoder side: s_i = int8(s_{i-1} + byte_i) (or byte_i), all |s_i| <= Q.
bool undelta_scalar(const uint8_t *b, size_t n, bool delta, uint32_t Q, int8_t *s) {
    uint8_t prev = 0;
    bool ok = true;
    const int32_t q = int32_t(Q);
    for (size_t i = 0; i < n; i++) {
        uint8_t v = delta ? uint8_t(prev + b[i]) : b[i];
        ok &= int8_t(v) <= q && int8_t(v) >= -q;
        s[i] = int8_t(v);
        prev = v;
    }
    return ok;
}

static inline void store_dtype(uint32_t bits, int dtype, void *out, size_t i) {
    auto o = static_cast<uint8_t *>(out);
    if (dtype == SPECKV_DTYPE_FP32) {
        put32(o + 4 * i, bits);
    } else if (dtype == SPECKV_DTYPE_BF16) {
        put16(o + 2 * i, fp32bits_to_bf16(bits));
    } else {
        put16(o + 2 * i, bits ? fp32bits_to_fp16_sat(bits) : 0);
    }
}

void dequant_const_scalar(const int8_t *q, size_t n, uint16_t scale, int dtype, void *out) {
    for (size_t i = 0; i < n; i++) store_dtype(dequant_bits(q[i], scale), dtype, out, i);
}

void dequant_row_scalar(const int8_t *q, size_t C, const uint16_t *scale, int dtype, void *out) {
    for (size_t c = 0; c < C; c++) store_dtype(dequant_bits(q[c], scale[c]), dtype, out, c);
}

void dequant_const16_scalar(const int16_t *q, size_t n, uint16_t scale, int dtype, void *out) {
    for (size_t i = 0; i < n; i++) store_dtype(dequant_bits(q[i], scale), dtype, out, i);
}

void dequant_row16_scalar(const int16_t *q, size_t C, const uint16_t *scale, int dtype, void *out) {
    for (size_t c = 0; c < C; c++) store_dtype(dequant_bits(q[c], scale[c]), dtype, out, c);
}

// FP16 one-group fast path. canon (§2) is monotonic in |h| and so is the
// 0x7FFFFF00 mask: the maximum of the canonical values is the canonical value
// of the largest magnitude (bits h & 0x7FFF compare like magnitudes).
bool absmax_fp16_scalar(const void *h, size_t n, uint32_t *amax) {
    auto p = static_cast<const uint8_t *>(h);
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) m = std::max(m, uint32_t(get16(p + 2 * i)) & 0x7FFFu);
    *amax = fp16_bits_to_u32(uint16_t(m)) & 0x7FFFFF00u;
    return m < 0x7C00u;
}

void quant_const_fp16_scalar(const void *h, size_t n, uint32_t es, uint32_t r, uint32_t Q, int8_t *q) {
    auto p = static_cast<const uint8_t *>(h);
    for (size_t i = 0; i < n; i++) q[i] = int8_t(quant_one(fp16_bits_to_u32(get16(p + 2 * i)), es, r, Q));
}

// The delta bytes and run starts (codec_kernels.h), in one pass of 16-byte
// vectors shifted in registers (SSE2 is baseline on x86-64).
void delta_runs_scalar(const uint8_t *s, size_t n, bool delta, uint8_t *db, uint64_t *rsm) {
    size_t i = 0;
    const size_t words = n / 64 + 1;
    if (rsm) std::memset(rsm, 0, words * 8);
#if defined(__SSE2__)
    __m128i prev = _mm_setzero_si128(), dprev = prev;
    for (; i + 16 <= n; i += 16) {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i));
        const __m128i d = delta ? _mm_sub_epi8(x, _mm_or_si128(_mm_slli_si128(x, 1), _mm_srli_si128(prev, 15))) : x;
        _mm_storeu_si128(reinterpret_cast<__m128i *>(db + i), d);
        if (rsm && i) {  // the bits of the previous 16 bytes, which need these
            const __m128i n1 = _mm_or_si128(_mm_srli_si128(dprev, 1), _mm_slli_si128(d, 15));
            const __m128i n2 = _mm_or_si128(_mm_srli_si128(dprev, 2), _mm_slli_si128(d, 14));
            const __m128i e = _mm_and_si128(_mm_cmpeq_epi8(dprev, n1), _mm_cmpeq_epi8(dprev, n2));
            const size_t j = i - 16;
            rsm[j / 64] |= uint64_t(uint32_t(_mm_movemask_epi8(e))) << (j % 64);
        }
        prev = x, dprev = d;
    }
#endif
    for (size_t k = i; k < n; k++) db[k] = delta ? uint8_t(s[k] - (k ? s[k - 1] : 0)) : s[k];
    if (!rsm) return;
    // The bits the vector loop left: the last 16 bytes it wrote, and the tail.
    for (size_t j = i >= 16 ? i - 16 : 0; j + 2 < n; j++)
        if (db[j] == db[j + 1] && db[j] == db[j + 2]) rsm[j / 64] |= uint64_t(1) << (j % 64);
}

bool range_ok_scalar(const uint8_t *b, size_t n, uint32_t Q) {
    bool ok = true;
    const int32_t q = int32_t(Q);
    for (size_t i = 0; i < n; i++) ok &= int8_t(b[i]) <= q && int8_t(b[i]) >= -q;
    return ok;
}

const Kernels kScalarKernels = {
    "scalar",          canon_scalar,     absmax_scalar,        colmax_scalar,     quant_const_scalar,
    quant_row_scalar, dequant_const_scalar, dequant_row_scalar, undelta_scalar,
    absmax_fp16_scalar, quant_const_fp16_scalar, range_ok_scalar,      delta_runs_scalar,
    rice_encode8_scalar, rice_decode8_scalar, rice_encode16_scalar, rice_decode16_scalar,
    srice_encode8_scalar, srice_decode8_scalar, srice_encode16_scalar, srice_decode16_scalar,
    dequant_const16_scalar, dequant_row16_scalar,
    nullptr,           nullptr,
};
}  // namespace speckv::codec
