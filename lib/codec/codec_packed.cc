// SPDX-License-Identifier: Apache-2.0
// The reference of the fixed-width packed presets (docs/codec.md §19): the
// asymmetric quantiser (FP16 scale and zero point per group), the bit
// packing, and the record body. The SIMD tables (codec_packed_avx2.cc,
// codec_packed_avx512.cc) must give these bytes and values exactly.
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "codec/codec.h"
#include "codec/codec_kernels.h"
#include "codec/le_bytes.h"
#include "util/cpu.h"
#include "speckv.h"
#include "util/status.h"

namespace speckv::codec {

namespace {

inline float f32_of(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

}  // namespace

// §19.2: binary32 -> binary16 rounded toward +inf (up) or -inf (!up), for
// finite |f| <= 65504 (the caller's range rule keeps it there).
uint16_t packed_f32_to_f16_dir(float f, bool up) {
    const uint32_t u = bits_of(f), sgn = u >> 31, a = u & 0x7FFFFFFFu;
    uint32_t h, rem;
    if (a >= 0x38800000u) {  // normal binary16 (>= 2^-14): truncate 13 mantissa bits
        h = (((a >> 23) - 112u) << 10) | ((a >> 13) & 0x3FFu);
        rem = a & 0x1FFFu;
    } else if (a >= 0x00800000u) {  // binary16 subnormal: units of 2^-24
        const uint32_t E = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u, sh = 126u - E;  // sh >= 14
        h = sh >= 32 ? 0 : m >> sh;
        rem = sh >= 32 ? m : (m & ((1u << sh) - 1u));
    } else {  // binary32 subnormal or zero: below 2^-126
        h = 0;
        rem = a;
    }
    if (rem && (up != (sgn != 0))) h++;  // away from zero when rounding outward
    return uint16_t((sgn << 15) | h);
}

// §19.2: a group's FP16 zero point and scale from its minimum and maximum,
// and the FP32 values the quantiser uses.
void packed_params(float mn, float mx, unsigned bits, uint16_t *s16, uint16_t *z16, float *sf, float *zf, float *inv) {
    uint16_t z = packed_f32_to_f16_dir(mn, false);
    if (z == 0x8000u) z = 0;  // -0 -> +0
    const float zv = f32_of(fp16_bits_to_u32(z));  // exact (§2)
    const float d = mx - zv;                                // >= 0
    const float sv = d / float((1u << bits) - 1u);          // binary32, RNE
    const uint16_t s = sv > 0.0f ? packed_f32_to_f16_dir(sv, true) : uint16_t(0);
    *z16 = z;
    *s16 = s;
    *zf = zv;
    *sf = f32_of(fp16_bits_to_u32(s));
    *inv = s ? 1.0f / *sf : 0.0f;
}

// ---------------------------------------------------------- scalar kernels

bool packed_to_f32_scalar(int dtype, const void *src, size_t n, float *x) {
    // canon_scalar writes the FP32 patterns (§2, exact): the values' bits.
    static_assert(sizeof(float) == sizeof(uint32_t));
    return canon_scalar(dtype, src, n, reinterpret_cast<uint32_t *>(x));
}

void packed_minmax_scalar(const float *x, size_t T, size_t C, unsigned group, float *mn, float *mx) {
    const size_t G = group == kGroupPage ? 1 : group == kGroupChannel ? C : T;
    for (size_t g = 0; g < G; g++) mn[g] = INFINITY, mx[g] = -INFINITY;
    for (size_t t = 0, i = 0; t < T; t++)
        for (size_t c = 0; c < C; c++, i++) {
            const size_t g = group == kGroupPage ? 0 : group == kGroupChannel ? c : t;
            if (x[i] < mn[g]) mn[g] = x[i];
            if (x[i] > mx[g]) mx[g] = x[i];
        }
}

// §19.3: q = clamp(round_half_even((x - z) * inv), 0, 2^b - 1).
static inline uint32_t quant_packed(float x, float z, float inv, uint32_t qmax) {
    const float t = (x - z) * inv;
    const float r = std::nearbyint(t);  // default rounding mode: to nearest, ties to even
    if (!(r > 0.0f)) return 0;
    return r >= float(qmax) ? qmax : uint32_t(r);
}

void packed_encode_scalar(const float *x, size_t T, size_t C, unsigned bits, unsigned group, const float *z,
                          const float *inv, uint8_t *dst) {
    const uint32_t qmax = (1u << bits) - 1u;
    uint64_t acc = 0;
    unsigned nb = 0;
    for (size_t t = 0, i = 0; t < T; t++)
        for (size_t c = 0; c < C; c++, i++) {
            const size_t g = group == kGroupPage ? 0 : group == kGroupChannel ? c : t;
            acc |= uint64_t(quant_packed(x[i], z[g], inv[g], qmax)) << nb;  // §19.4: LSB first
            nb += bits;
            while (nb >= 8) *dst++ = uint8_t(acc), acc >>= 8, nb -= 8;
        }
    if (nb) *dst = uint8_t(acc);  // zero padding bits
}

static inline void store_out(float y, int dtype, void *out, size_t i) {
    const uint32_t u = bits_of(y);
    switch (dtype) {
        case SPECKV_DTYPE_FP32: std::memcpy(static_cast<uint8_t *>(out) + 4 * i, &u, 4); break;
        case SPECKV_DTYPE_BF16: {
            const uint16_t h = fp32bits_to_bf16(u);
            std::memcpy(static_cast<uint8_t *>(out) + 2 * i, &h, 2);
            break;
        }
        default: {
            const uint16_t h = fp32bits_to_fp16_sat(u);
            std::memcpy(static_cast<uint8_t *>(out) + 2 * i, &h, 2);
            break;
        }
    }
}

void packed_decode_scalar(const uint8_t *src, size_t T, size_t C, unsigned bits, unsigned group, const float *s,
                          const float *z, int dtype, void *out, bool /*sat: always applied*/) {
    const uint32_t mask = (1u << bits) - 1u;
    uint64_t acc = 0;
    unsigned nb = 0;
    for (size_t t = 0, i = 0; t < T; t++)
        for (size_t c = 0; c < C; c++, i++) {
            while (nb < bits) acc |= uint64_t(*src++) << nb, nb += 8;
            const uint32_t q = uint32_t(acc) & mask;
            acc >>= bits;
            nb -= bits;
            const size_t g = group == kGroupPage ? 0 : group == kGroupChannel ? c : t;
            store_out(std::fma(float(q), s[g], z[g]), dtype, out, i);  // §19.5: one rounding
        }
}

bool packed_params_scalar(const uint8_t *p, size_t G, float top, float *s, float *z, bool *sat) {
    unsigned over = 0;
    for (size_t g = 0; g < G; g++) {
        const uint16_t s16 = uint16_t(p[4 * g] | (p[4 * g + 1] << 8)), z16 = uint16_t(p[4 * g + 2] | (p[4 * g + 3] << 8));
        if ((s16 & 0x8000u) || (s16 & 0x7C00u) == 0x7C00u || (z16 & 0x7C00u) == 0x7C00u) return false;
        s[g] = f32_of(fp16_bits_to_u32(s16));
        z[g] = f32_of(fp16_bits_to_u32(z16));
        over |= unsigned(top * s[g] + z[g] > 65000.0f);
    }
    *sat = over != 0;
    return true;
}

bool packed_make_params_scalar(const float *mn, const float *mx, size_t G, unsigned bits, uint8_t *pairs, float *z,
                               float *inv) {
    for (size_t g = 0; g < G; g++) {
        if (!(mn[g] >= -65504.0f) || !(mx[g] <= 65504.0f)) return false;  // §19.2: outside FP16 range -> raw
        uint16_t s16, z16;
        float sf;
        packed_params(mn[g], mx[g], bits, &s16, &z16, &sf, &z[g], &inv[g]);
        pairs[4 * g] = uint8_t(s16), pairs[4 * g + 1] = uint8_t(s16 >> 8);
        pairs[4 * g + 2] = uint8_t(z16), pairs[4 * g + 3] = uint8_t(z16 >> 8);
    }
    return true;
}

const PackedKernels kPackedScalar = {"scalar", packed_to_f32_scalar, packed_minmax_scalar, packed_encode_scalar,
                                     packed_decode_scalar, packed_params_scalar, packed_make_params_scalar,
                                     nullptr};

// ---------------------------------------------------------- record body

namespace {

const PackedKernels *packed_for(Impl impl) {
    static const PackedKernels *best = [] {
        if (auto k = packed_avx512_kernels()) return k;
        if (auto k = packed_avx2_kernels()) return k;
        return &kPackedScalar;
    }();
    switch (impl) {
        case Impl::scalar: return &kPackedScalar;
        case Impl::avx2: return packed_avx2_kernels() ? packed_avx2_kernels() : &kPackedScalar;
        case Impl::avx512: return packed_avx512_kernels() ? packed_avx512_kernels() : &kPackedScalar;
        case Impl::best: return best;
    }
    return &kPackedScalar;
}

struct PackedScratch {
    std::vector<float> x, mn, mx, s, z, inv;
    std::vector<uint16_t> keys;  // encode_fp16's per-group reductions
};
// Behind a pointer: the library's static TLS block must stay small enough for
// dlopen (util/status.h has an initial-exec variable); six vectors in place
// pushed it past what glibc keeps free, and python could no longer load it.
PackedScratch &pscratch() {
    thread_local std::unique_ptr<PackedScratch> s;
    if (!s) s = std::make_unique<PackedScratch>();
    return *s;
}


}  // namespace

const char *packed_impl_name(Impl impl) { return packed_for(impl)->name; }

size_t packed_payload_len(size_t n, size_t G, unsigned bits) { return 4 * G + (n * bits + 7) / 8; }

size_t packed_encode_payload(Impl impl, int dtype, const void *src, size_t n, size_t C, const Params &P,
                             uint8_t *payload) {
    const PackedKernels *K = packed_for(impl);
    PackedScratch &S = pscratch();
    const size_t T = n / C, G = P.group == kGroupPage ? 1 : P.group == kGroupChannel ? C : T;
    if (dtype == SPECKV_DTYPE_FP16 && K->encode_fp16) {
        if (S.z.size() < G) S.z.resize(G), S.inv.resize(G);
        if (S.keys.size() < 3 * G) S.keys.resize(3 * G);
        const int r = K->encode_fp16(static_cast<const uint16_t *>(src), T, C, P.bits, P.group, payload,
                                     S.keys.data(), S.z.data(), S.inv.data());
        if (r >= 0) return r ? packed_payload_len(n, G, P.bits) : 0;
    }
    if (S.x.size() < n) S.x.resize(n);
    if (!K->to_f32(dtype, src, n, S.x.data())) return 0;  // §7: non-finite -> raw
    if (S.mn.size() < G) S.mn.resize(G), S.mx.resize(G), S.s.resize(G), S.z.resize(G), S.inv.resize(G);
    K->minmax(S.x.data(), T, C, P.group, S.mn.data(), S.mx.data());
    if (!K->make_params(S.mn.data(), S.mx.data(), G, P.bits, payload, S.z.data(), S.inv.data())) return 0;
    K->encode(S.x.data(), T, C, P.bits, P.group, S.z.data(), S.inv.data(), payload + 4 * G);
    return packed_payload_len(n, G, P.bits);
}

int packed_decode_payload(Impl impl, const Params &P, int dtype, size_t n, size_t C, const uint8_t *payload,
                          size_t plen, void *dst) {
    const PackedKernels *K = packed_for(impl);
    PackedScratch &S = pscratch();
    const size_t T = n / C, G = P.group == kGroupPage ? 1 : P.group == kGroupChannel ? C : T;
    if (plen != packed_payload_len(n, G, P.bits))
        return fail(SPECKV_ECORRUPT, "codec: packed payload of %zu bytes, %zu expected", plen,
                    packed_payload_len(n, G, P.bits));
    if (S.s.size() < G) S.s.resize(G), S.z.resize(G);
    // Saturation can only matter where fma(2^b - 1, s, z) > 65504; the test
    // (in the params kernel, beside the conversion) is conservative (margin
    // 504, far above float's rounding of the sum at 65504, 2^-8): saturating
    // when not needed changes nothing. As a separate scalar loop it cost ~10 %
    // of a 4 KiB page's decode.
    bool sat = false;
    if (!K->params(payload, G, float((1u << P.bits) - 1u), S.s.data(), S.z.data(), &sat))
        for (size_t g = 0; g < G; g++) {  // the first bad field, for the message (cold path)
            const uint16_t s16 = get16(payload + 4 * g), z16 = get16(payload + 4 * g + 2);
            if ((s16 & 0x8000u) || (s16 & 0x7C00u) == 0x7C00u)
                return fail(SPECKV_ECORRUPT, "codec: packed scale %zu = 0x%04x is negative or not finite", g, s16);
            if ((z16 & 0x7C00u) == 0x7C00u)
                return fail(SPECKV_ECORRUPT, "codec: packed zero point %zu = 0x%04x is not finite", g, z16);
        }
    const size_t tail = (n * P.bits) % 8;
    if (tail && (payload[plen - 1] >> tail))
        return fail(SPECKV_ECORRUPT, "codec: packed stream padding bits are not zero");
    K->decode(payload + 4 * G, T, C, P.bits, P.group, S.s.data(), S.z.data(), dtype, dst, sat);
    return SPECKV_OK;
}

}  // namespace speckv::codec
