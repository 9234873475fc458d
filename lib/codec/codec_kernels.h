// SPDX-License-Identifier: Apache-2.0
// The data-parallel steps of the codec, one table per implementation
// (scalar reference, AVX2, AVX-512). Every table must give bit-identical
// results to the scalar one; tests/codec/codec_simd_test.cc checks it.
// The serial steps (RLE, layout) live in codec_ref.cc and are shared by all
// implementations; the Rice stage is a table entry (the reference in
// codec_rice.cc, an AVX-512 + BMI2 one in codec_rice_avx512.cc), and so is the
// split Rice stage of §18 (the reference in codec_srice.cc, an AVX-512 one
// in codec_srice_avx512.cc).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "codec/codec.h"

namespace speckv::codec {

struct Kernels {
    const char *name;
    // src (n elements of dtype) -> canonical FP32 bit patterns (docs §2).
    // Returns false if any element is Inf or NaN.
    bool (*canon)(int dtype, const void *src, size_t n, uint32_t *u);
    // max over i of (u[i] & 0x7FFFFF00), sign ignored (caller applies E>=1 rule).
    uint32_t (*absmax)(const uint32_t *u, size_t n);
    // out[c] = max over rows of (u[t*C+c] & 0x7FFFFF00), rows 0..T-1.
    void (*colmax)(const uint32_t *u, size_t T, size_t C, uint32_t *out);
    // Quantise n elements with one scale (es = scale exponent Es, r = R).
    void (*quant_const)(const uint32_t *u, size_t n, uint32_t es, uint32_t r, uint32_t Q, int8_t *q);
    // Quantise one row of C elements, element c with es[c], r[c].
    void (*quant_row)(const uint32_t *u, size_t C, const uint32_t *es, const uint32_t *r, uint32_t Q,
                      int8_t *q);
    // Dequantise n values with one scale field (BF16 bits), writing dtype at out.
    void (*dequant_const)(const int8_t *q, size_t n, uint16_t scale, int dtype, void *out);
    // Dequantise one row of C values, element c with scale[c].
    void (*dequant_row)(const int8_t *q, size_t C, const uint16_t *scale, int dtype, void *out);
    // §6.0 decoder: s_i = int8(s_{i-1} + b_i) if delta else int8(b_i), for all
    // n; returns false if any |s_i| > Q (s is fully written either way).
    bool (*undelta)(const uint8_t *b, size_t n, bool delta, uint32_t Q, int8_t *s);
    // FP16 input, one scale for n elements (page or token group): the same
    // results as canon + absmax / canon + quant_const, without the canonical
    // buffer. absmax_fp16 sets *amax = max(u & 0x7FFFFF00) and returns false
    // if any element is Inf or NaN (then *amax is unspecified).
    bool (*absmax_fp16)(const void *h, size_t n, uint32_t *amax);
    // (es, r) is the scale made (§3.2-§3.3) from these n elements' maximum,
    // as every caller passes it; the AVX-512 fast path relies on it.
    void (*quant_const_fp16)(const void *h, size_t n, uint32_t es, uint32_t r, uint32_t Q, int8_t *q);
    // true iff every int8(b[i]) is in [-Q, Q] (the §6.0 check of a stream
    // without delta, which is then its own quantised values: no copy).
    bool (*range_ok)(const uint8_t *b, size_t n, uint32_t Q);
    // §5/§6.0 encoder: db_i = s_i - s_{i-1} mod 256 (s_{-1} = 0) if delta,
    // else s_i; and, if rsm is not null, the run starts of db for §6.1: bit
    // j % 64 of rsm[j / 64] is set iff j + 2 < n and db_j == db_{j+1} ==
    // db_{j+2} (rsm: n / 64 + 1 words, all written).
    void (*delta_runs)(const uint8_t *s, size_t n, bool delta, uint8_t *db, uint64_t *rsm);
    // §6.2 Rice stage of b <= 8 values (int8 symbols s, in scan order).
    // rice_encode8: the stream of s (delta: of s_i - s_{i-1}) in dst, returns
    // its length, or 0 if it is longer than cap. rice_decode8: parses a
    // stream of len bytes (untrusted) into n values; SPECKV_OK, or
    // SPECKV_ECORRUPT with the reference's message for every record the
    // reference rejects (a fast table may hand a suspect stream to the
    // reference, which then decides). Every table: the reference's bytes
    // and values.
    size_t (*rice_encode8)(const int8_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap);
    int (*rice_decode8)(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int8_t *s);
    // The same for b 9..12 (§13: int16 symbols).
    size_t (*rice_encode16)(const int16_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap);
    int (*rice_decode16)(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int16_t *s);
    // §18 split Rice stage, the same contract as the four above (int8
    // symbols for b <= 8, int16 for b 9..12). The reference is
    // lib/codec/codec_srice.cc; a fast table may hand a stream it does not accept
    // outright to the reference, which then decides.
    size_t (*srice_encode8)(const int8_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap);
    int (*srice_decode8)(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int8_t *s);
    size_t (*srice_encode16)(const int16_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap);
    int (*srice_decode16)(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int16_t *s);
    // dequant_const / dequant_row for int16 values (b 9..12, §13): |q| <= 2047.
    void (*dequant_const16)(const int16_t *q, size_t n, uint16_t scale, int dtype, void *out);
    void (*dequant_row16)(const int16_t *q, size_t C, const uint16_t *scale, int dtype, void *out);
    // Optional, null where a table has none (the caller then takes its
    // general path). The int8 record shape (FP16, b <= 8, one scale per
    // page, bytes, no delta; payload = a valid scale field, then n values):
    // int8_decode_fp16 continues `crc` (the header's CRC32C) over the payload,
    // checks every int8(q_i) is in [-Q, Q] and decodes the n values into
    // dst[0, 2n), in one pass where it can: *written = true iff the CRC equals
    // `want`, every value is in range and dst holds the n decoded values;
    // otherwise dst[0, 2n) is unspecified (never anything outside it) and the
    // caller reports the error. Returns the payload's CRC. int8_encode_fp16 is
    // quant_const_fp16 into q, returning the CRC32C continued from `crc` over
    // the scale field (2 bytes, little-endian) and then those n bytes.
    uint32_t (*int8_decode_fp16)(uint32_t crc, const uint8_t *payload, size_t n, uint32_t Q, uint32_t want, void *dst,
                                 bool *written);
    uint32_t (*int8_encode_fp16)(const void *h, size_t n, uint32_t es, uint32_t r, uint32_t Q, uint16_t field, int8_t *q,
                                 uint32_t crc);
};

extern const Kernels kScalarKernels;
// Defined only when built for x86-64; null entries otherwise.
const Kernels *avx2_kernels();
const Kernels *avx512_kernels();
// The AVX-512 table's optional VBMI / FP16 kernels (used when the CPU has
// them). on = 1: use when present, 0: base AVX-512 only (tests compare
// both), -1: query. Returns whether any extension is in use. Not thread-safe
// against concurrent codec calls: for tests and benchmarks only.
bool avx512_extensions(int on);

// Scalar definitions used by the SIMD files for tails.
bool canon_scalar(int dtype, const void *src, size_t n, uint32_t *u);
void quant_const_scalar(const uint32_t *u, size_t n, uint32_t es, uint32_t r, uint32_t Q, int8_t *q);
void quant_row_scalar(const uint32_t *u, size_t C, const uint32_t *es, const uint32_t *r, uint32_t Q,
                      int8_t *q);
void dequant_const_scalar(const int8_t *q, size_t n, uint16_t scale, int dtype, void *out);
void dequant_row_scalar(const int8_t *q, size_t C, const uint16_t *scale, int dtype, void *out);
void dequant_const16_scalar(const int16_t *q, size_t n, uint16_t scale, int dtype, void *out);
void dequant_row16_scalar(const int16_t *q, size_t C, const uint16_t *scale, int dtype, void *out);
bool undelta_scalar(const uint8_t *b, size_t n, bool delta, uint32_t Q, int8_t *s);
bool absmax_fp16_scalar(const void *h, size_t n, uint32_t *amax);
void quant_const_fp16_scalar(const void *h, size_t n, uint32_t es, uint32_t r, uint32_t Q, int8_t *q);
bool range_ok_scalar(const uint8_t *b, size_t n, uint32_t Q);
void delta_runs_scalar(const uint8_t *s, size_t n, bool delta, uint8_t *db, uint64_t *rsm);
size_t rice_encode8_scalar(const int8_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap);
int rice_decode8_scalar(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int8_t *s);
size_t rice_encode16_scalar(const int16_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap);
int rice_decode16_scalar(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int16_t *s);
size_t srice_encode8_scalar(const int8_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap);
int srice_decode8_scalar(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int8_t *s);
size_t srice_encode16_scalar(const int16_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap);
int srice_decode16_scalar(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int16_t *s);
// The AVX-512BW + BMI2 Rice stage (lib/codec/codec_rice_avx512.cc), b <= 8 and 9..12; null when not
// built for x86-64 or the CPU lacks AVX-512BW/VL or BMI2.
struct RiceKernels {
    size_t (*encode8)(const int8_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap);
    int (*decode8)(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int8_t *s);
    size_t (*encode16)(const int16_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap);
    int (*decode16)(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int16_t *s);
};
const RiceKernels *rice_avx512_kernels();
// The AVX-512 F/BW/VL/VBMI/VBMI2 + BMI2 split Rice stage (§18,
// lib/codec/codec_srice_avx512.cc), same shape; null when not built for x86-64 or
// the CPU lacks any of those.
const RiceKernels *srice_avx512_kernels();
// The AVX2 + POPCNT split Rice decoder (lib/codec/codec_srice_avx2.cc; its
// encoders are the reference's); null when not built for x86-64 or the CPU
// lacks them.
const RiceKernels *srice_avx2_kernels();
// The AVX-512 table's one-pass int8 records (lib/codec/codec_int8_avx512.cc:
// Kernels::int8_decode_fp16 / int8_encode_fp16); null when not built for
// x86-64, on a CPU that lacks AVX-512 F/BW/VL/VBMI, VPCLMULQDQ, PCLMUL or
// SSE4.2, or on one that is not AMD's (where they measured no gain).
struct Int8Kernels {
    uint32_t (*decode_fp16)(uint32_t crc, const uint8_t *payload, size_t n, uint32_t Q, uint32_t want, void *dst,
                            bool *written);
    uint32_t (*encode_fp16)(const void *h, size_t n, uint32_t es, uint32_t r, uint32_t Q, uint16_t field, int8_t *q,
                            uint32_t crc);
};
const Int8Kernels *int8_avx512_kernels();
// 16-byte SSE2 prefix sum used by both SIMD tables (codec_avx2.cc).
bool undelta_sse(const uint8_t *b, size_t n, bool delta, uint32_t Q, int8_t *s);

// ---- §19 fixed-width packed presets (asymmetric quantiser, FP16 scale and
// zero point per group, values bit-packed at b bits). One table per
// implementation; every table gives the reference's bytes and values
// (lib/codec/codec_packed.cc is the reference; tests/codec/codec_packed_test.cc
// compares). A page is T rows x C channels; group 0 page (G = 1), 1 channel
// (G = C), 2 token (G = T).
struct PackedKernels {
    const char *name;
    // n elements of dtype -> their exact FP32 values; false if any is Inf/NaN
    // (x is then unspecified).
    bool (*to_f32)(int dtype, const void *src, size_t n, float *x);
    // The minimum and maximum of every group (G entries each). Which zero a
    // group of zeros reports (+0 or -0) is unspecified: §19.2 makes the
    // parameters from them the same either way.
    void (*minmax)(const float *x, size_t T, size_t C, unsigned group, float *mn, float *mx);
    // §19.3 + §19.4: quantises the page with group g's (z[g], inv[g]) and
    // writes the ceil(T*C*bits/8) bytes of the packed stream at dst (padding 0).
    void (*encode)(const float *x, size_t T, size_t C, unsigned bits, unsigned group, const float *z,
                   const float *inv, uint8_t *dst);
    // §19.5: the values of a packed stream (ceil(T*C*bits/8) bytes) as dtype
    // at out, with group g's scale s[g] and zero point z[g] (FP32 values of
    // the FP16 fields).
    // sat: false when no value can exceed 65504 (every fma(2^b - 1, s, z) <=
    // 65504): FP16 output needs no saturation then (the result is the same).
    void (*decode)(const uint8_t *src, size_t T, size_t C, unsigned bits, unsigned group, const float *s,
                   const float *z, int dtype, void *out, bool sat);
    // §19.5 parameter fields: G (s16, z16) pairs at p -> their FP32 values.
    // false if any s16 is negative or not finite, or any z16 is not finite.
    // *sat: whether decode needs its `sat` (some top * s + z > 65000, top =
    // 2^b - 1; conservative, so the rounding of that test does not matter).
    bool (*params)(const uint8_t *p, size_t G, float top, float *s, float *z, bool *sat);
    // §19.2 for G groups: writes the (s16, z16) pairs at `pairs` and zf, inv;
    // false if a group is outside the FP16 range (the page is then raw).
    bool (*make_params)(const float *mn, const float *mx, size_t G, unsigned bits, uint8_t *pairs, float *z,
                        float *inv);
    // FP16 input, the whole payload (§19.2-§19.4: G pairs, then the packed
    // stream) in two reads of the FP16 page and no FP32 copy; the same bytes
    // as to_f32 + minmax + make_params + encode. 1: done; 0: the page must be
    // raw (a non-finite value); -1: a shape it does not take (the caller uses
    // the four kernels above). keys: 3G entries of scratch; z, inv: G each.
    // Null in tables without it.
    int (*encode_fp16)(const uint16_t *h, size_t T, size_t C, unsigned bits, unsigned group, uint8_t *payload,
                       uint16_t *keys, float *z, float *inv);
};
extern const PackedKernels kPackedScalar;
// AVX2 + F16C + FMA + BMI2 (lib/codec/codec_packed_avx2.cc) and AVX-512 F/BW/VL +
// F16C + FMA + BMI2 (lib/codec/codec_packed_avx512.cc); null when not built for
// x86-64 or the CPU lacks any of those.
const PackedKernels *packed_avx2_kernels();
const PackedKernels *packed_avx512_kernels();
// The AVX2 table's FP16 encoder without its last pass (C % 16 == 0): the G
// pairs at `pairs`, z and inv; false: the page must be raw. For the AVX-512
// table's b = 4 encoder; only where packed_avx2_kernels() is not null.
bool packed_fp16_params_avx2(const uint16_t *h, size_t T, size_t C, unsigned bits, unsigned group, uint8_t *pairs,
                             uint16_t *keys, float *z, float *inv);
// Its first pass alone: the key triples of the G groups (smax at keys, umin
// at keys + G, umax at keys + 2G; codec_packed_fp16_avx2.cc says what they are).
void packed_fp16_keys_avx2(const uint16_t *h, size_t T, size_t C, unsigned group, uint16_t *keys);
// Its parameters of groups g .. G - 1 from their key triples, one at a time
// (the tail of both tables' vector loops): false on a non-finite value.
bool packed_fp16_params_from_keys_tail(const uint16_t *k, size_t G, size_t g, unsigned bits, uint8_t *pairs, float *z,
                                       float *inv);
// The same as packed_fp16_params_avx2, AVX-512 wide (channel-group keys 32
// channels a vector, the parameters 16 groups a step; the same bytes). For
// the AVX-512 table (lib/codec/codec_packed_fp16_avx512.cc); only where
// packed_avx512_kernels() is not null.
bool packed_fp16_params_avx512(const uint16_t *h, size_t T, size_t C, unsigned bits, unsigned group, uint8_t *pairs,
                               uint16_t *keys, float *z, float *inv);
// The AVX2 table's FP16 encoder (lib/codec/codec_packed_fp16_avx2.cc; its
// PackedKernels::encode_fp16).
int packed_encode_fp16_avx2(const uint16_t *h, size_t T, size_t C, unsigned bits, unsigned group, uint8_t *payload,
                            uint16_t *keys, float *z, float *inv);
// The scalar kernels, for the SIMD tables' odd shapes.
void packed_encode_scalar(const float *x, size_t T, size_t C, unsigned bits, unsigned group, const float *z,
                          const float *inv, uint8_t *dst);
void packed_decode_scalar(const uint8_t *src, size_t T, size_t C, unsigned bits, unsigned group, const float *s,
                          const float *z, int dtype, void *out, bool sat);
bool packed_to_f32_scalar(int dtype, const void *src, size_t n, float *x);
void packed_minmax_scalar(const float *x, size_t T, size_t C, unsigned group, float *mn, float *mx);
bool packed_params_scalar(const uint8_t *p, size_t G, float top, float *s, float *z, bool *sat);
bool packed_make_params_scalar(const float *mn, const float *mx, size_t G, unsigned bits, uint8_t *pairs, float *z,
                               float *inv);

// The §19 record body (codec_packed.cc), called by encode_params / decode.
// packed_encode_payload writes the G (scale, zero point) pairs and the packed
// stream at payload and returns their length, or 0 when the page must be
// stored raw (a non-finite value, or a group outside the FP16 range).
// packed_decode_payload checks and decodes them (SPECKV_ECORRUPT with a
// message for a bad payload).
size_t packed_payload_len(size_t n, size_t G, unsigned bits);
size_t packed_encode_payload(Impl impl, int dtype, const void *src, size_t n, size_t C, const Params &P,
                             uint8_t *payload);
int packed_decode_payload(Impl impl, const Params &P, int dtype, size_t n, size_t C, const uint8_t *payload,
                          size_t plen, void *dst);
// The table a call with `impl` uses ("scalar", "avx2", "avx512").
const char *packed_impl_name(Impl impl);
// §19.2 helpers (tests).
uint16_t packed_f32_to_f16_dir(float f, bool up);
void packed_params(float mn, float mx, unsigned bits, uint16_t *s16, uint16_t *z16, float *sf, float *zf, float *inv);

// FP16 bits -> canonical FP32 pattern u (docs §2), exact.
inline uint32_t fp16_bits_to_u32(uint16_t h) {
    uint32_t s = h >> 15, e = (h >> 10) & 31u, f = h & 1023u;
    if (e == 31) return (s << 31) | 0x7F800000u | (f << 13);
    if (e == 0) {
        if (f == 0) return s << 31;
        uint32_t p = 31u - uint32_t(__builtin_clz(f));
        return (s << 31) | ((p + 103u) << 23) | (((f << (10 - p)) & 1023u) << 13);
    }
    return (s << 31) | ((e + 112u) << 23) | (f << 13);
}

// One element, exactly as docs §3.3 / §3.4 state it (|q| <= 2047: b up to 12).
inline int32_t quant_one(uint32_t u, uint32_t es, uint32_t r, uint32_t Q) {
    uint32_t a = u & 0x7FFFFFFFu;
    uint32_t E = a >> 23;
    if (E == 0 || r == 0) return 0;
    uint32_t M = 0x8000u | ((a >> 8) & 0x7FFFu);
    uint32_t P = M * r;
    int32_t sh = 30 + int32_t(es) - int32_t(E);  // t - 1
    uint32_t rr = (sh >= 32 || sh < 0) ? 0 : (P >> sh);
    uint32_t mag = (rr + 1) >> 1;
    if (mag > Q) mag = Q;
    return (u >> 31) ? -int32_t(mag) : int32_t(mag);
}

// The exact FP32 pattern of q * S (docs §3.4), S = BF16 scale field.
inline uint32_t dequant_bits(int32_t q, uint16_t scale) {
    if (q == 0 || scale == 0) return 0;
    uint32_t sgn = q < 0 ? 1u : 0u;
    uint32_t mq = uint32_t(q < 0 ? -int32_t(q) : int32_t(q));
    uint32_t Ms = 0x80u | (scale & 0x7Fu);
    uint32_t Es = scale >> 7;
    uint32_t v = mq * Ms;
    uint32_t p = 31u - uint32_t(__builtin_clz(v));
    return (sgn << 31) | ((Es - 7 + p) << 23) | ((v << (23 - p)) & 0x7FFFFFu);
}

// FP32 pattern (finite) -> FP16 RNE, saturating to +-65504 (docs §3.4).
inline uint16_t fp32bits_to_fp16_sat(uint32_t u) {
    uint32_t sgn = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7FFFFFFFu;
    if (a >= 0x477FF000u) return uint16_t(sgn | 0x7BFFu);  // >= 65520 would round to Inf
    if (a >= 0x38800000u) {                                 // normal FP16 result (>= 2^-14)
        uint32_t lsb = (a >> 13) & 1u;
        uint32_t r = (a + 0xFFFu + lsb) >> 13;              // RNE on the low 13 bits
        return uint16_t(sgn | (r - (112u << 10)));
    }
    if (a < 0x33000000u) return uint16_t(sgn);              // < 2^-25: rounds to 0 (ties to even)
    // subnormal FP16 result: value = m * 2^(E-150); unit 2^-24
    uint32_t E = a >> 23;
    uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    uint32_t sh = 126u - E;                                 // 14..24 : m >> sh is in units of 2^-24
    uint32_t half = 1u << (sh - 1);
    uint32_t rem = m & ((1u << sh) - 1u);
    uint32_t r = m >> sh;
    if (rem > half || (rem == half && (r & 1u))) r++;
    return uint16_t(sgn | r);
}

inline uint16_t fp32bits_to_bf16(uint32_t u) { return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16); }

// Grows a scratch buffer of an ISA-specific file to at least n elements (never
// shrinks). Out of line (codec_ref.cc) so that no ISA-specific file instantiates
// std::vector's growth code: see isa_target.h.
void grow(std::vector<uint8_t> &v, size_t n);
void grow(std::vector<uint16_t> &v, size_t n);
void grow(std::vector<uint32_t> &v, size_t n);

}  // namespace speckv::codec
