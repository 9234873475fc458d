// SPDX-License-Identifier: Apache-2.0
// The codec's reference: record layout, dispatch to a kernel table,
// RLE, scales, encode and decode (docs/codec.md is the specification; every
// line here that computes a byte cites the section it implements). The
// scalar kernels are in codec_scalar.cc, the Rice stage in codec_rice.cc.
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

namespace {


// Per-thread scratch so the per-page path does not allocate once warm.
struct Scratch {
    std::vector<uint32_t> u;
    std::vector<int8_t> q, s;
    std::vector<int16_t> wq, ws;  // b > 8
    std::vector<uint32_t> amax, es, r;
    std::vector<uint16_t> scales;
};
// Behind a pointer: the library's static TLS block stays small enough for
// dlopen (util/status.h has an initial-exec variable; tests/symbols.sh).
Scratch &scratch() {
    thread_local std::unique_ptr<Scratch> s;
    if (!s) s = std::make_unique<Scratch>();
    return *s;
}

}  // namespace

size_t dtype_size(int dtype) {
    switch (dtype) {
        case SPECKV_DTYPE_OPAQUE: return 1;
        case SPECKV_DTYPE_FP16:
        case SPECKV_DTYPE_BF16: return 2;
        case SPECKV_DTYPE_FP32: return 4;
        default: return 0;
    }
}

size_t Header::decoded_bytes() const { return size_t(count) * dtype_size(dtype); }


// ------------------------------------------------------------ dispatch

bool impl_available(Impl impl) {
    switch (impl) {
        case Impl::scalar:
        case Impl::best: return true;
        case Impl::avx2: return avx2_kernels() != nullptr;
        case Impl::avx512: return avx512_kernels() != nullptr;
    }
    return false;
}

const char *impl_name(Impl impl) {
    switch (impl) {
        case Impl::scalar: return "scalar";
        case Impl::avx2: return "avx2";
        case Impl::avx512: return "avx512";
        case Impl::best: return "best";
    }
    return "?";
}

static const Kernels *kernels_for(Impl impl) {
    static const Kernels *best = [] {
        if (auto k = avx512_kernels()) return k;
        if (auto k = avx2_kernels()) return k;
        return &kScalarKernels;
    }();
    switch (impl) {
        case Impl::scalar: return &kScalarKernels;
        case Impl::avx2: return avx2_kernels();
        case Impl::avx512: return avx512_kernels();
        case Impl::best: return best;
    }
    return nullptr;
}

// ------------------------------------------------------ RLE (§6.1), scales, raw

namespace {

// §6.1. b = delta bytes, rsm = their run-start bits (delta_runs). Returns
// bytes written or 0 if over cap. The greedy parse of the spec: a literal
// stops at 128 bytes, at the end, or where a run of >= 3 equal bytes starts
// (the next set bit).
size_t rle_encode(const uint8_t *b, size_t n, const uint64_t *rsm, uint8_t *dst, size_t cap) {
    auto is_run = [&](size_t j) { return (rsm[j / 64] >> (j % 64)) & 1; };
    // The first set bit in [j, lim), or lim.
    auto next_run = [&](size_t j, size_t lim) {
        while (j < lim) {
            const uint64_t w = rsm[j / 64] >> (j % 64);
            if (w) return std::min(lim, j + size_t(__builtin_ctzll(w)));
            j = (j / 64 + 1) * 64;
        }
        return lim;
    };
    size_t o = 0, i = 0;
    while (i < n) {
        if (is_run(i)) {
            size_t r = 3;
            while (i + r < n && r < 130 && b[i + r] == b[i]) r++;
            if (o + 2 > cap) return 0;
            dst[o++] = uint8_t(0x80 | (r - 3));
            dst[o++] = b[i];
            i += r;
            continue;
        }
        const size_t j = next_run(i + 1, std::min(n, i + 128));
        const size_t len = j - i;
        if (o + 1 + len > cap) return 0;
        dst[o++] = uint8_t(len - 1);
        std::memcpy(dst + o, b + i, len);
        o += len;
        i = j;
    }
    return o;
}

int rle_decode(const uint8_t *p, size_t len, uint8_t *out, size_t n) {
    size_t i = 0, o = 0;
    while (o < n) {
        if (i >= len) return fail(SPECKV_ECORRUPT, "codec: RLE stream ends after %zu of %zu bytes", o, n);
        uint8_t c = p[i++];
        if (c < 0x80) {
            size_t l = size_t(c) + 1;
            if (l > n - o) return fail(SPECKV_ECORRUPT, "codec: RLE literal of %zu runs past %zu bytes", l, n);
            if (l > len - i) return fail(SPECKV_ECORRUPT, "codec: RLE literal of %zu runs past the payload", l);
            if (i + 128 <= len)
                std::memcpy(out + o, p + i, 128);  // fixed size: vector moves; `out` has 128 bytes of slack
            else
                std::memcpy(out + o, p + i, l);
            i += l;
            o += l;
        } else {
            size_t l = size_t(c & 0x7F) + 3;
            if (l > n - o) return fail(SPECKV_ECORRUPT, "codec: RLE run of %zu runs past %zu bytes", l, n);
            if (i >= len) return fail(SPECKV_ECORRUPT, "codec: RLE run without its value byte");
            std::memset(out + o, p[i++], l);
            o += l;
        }
    }
    if (i != len) return fail(SPECKV_ECORRUPT, "codec: %zu bytes after the RLE stream", len - i);
    return SPECKV_OK;
}

// R = floor(0x7FFFFF / Ms) for Ms = 128..255 (§3.3): a table, not a division.
struct RecipTable {
    uint32_t r[128];
    constexpr RecipTable() : r() {
        for (uint32_t m = 0; m < 128; m++) r[m] = 0x7FFFFFu / (128 + m);
    }
};
constexpr RecipTable kRecip;

// ceil_div(x, 256 * Q) with Q = 2^(bits-1) - 1 a constant per case, so the
// compiler multiplies instead of dividing (x < 2^28).
template <uint32_t kD>
inline uint32_t ceil_div_c(uint32_t x) {
    return (x + kD - 1) / kD;
}
inline uint32_t ceil_div_q(uint32_t x, unsigned bits) {
    switch (bits) {
        case 3: return ceil_div_c<256 * 3>(x);
        case 4: return ceil_div_c<256 * 7>(x);
        case 5: return ceil_div_c<256 * 15>(x);
        case 6: return ceil_div_c<256 * 31>(x);
        case 7: return ceil_div_c<256 * 63>(x);
        case 8: return ceil_div_c<256 * 127>(x);
        case 9: return ceil_div_c<256 * 255>(x);
        case 10: return ceil_div_c<256 * 511>(x);
        case 11: return ceil_div_c<256 * 1023>(x);
        default: return ceil_div_c<256 * 2047>(x);  // 12
    }
}

// Group scale (§3.1, §3.2, §3.3). Returns false if out of range (-> raw).
bool make_scale(uint32_t A, unsigned bits, uint16_t *field, uint32_t *es, uint32_t *r) {
    if (A < 0x800000u) {
        *field = 0, *es = 0, *r = 0;
        return true;
    }
    uint32_t Em = A >> 23;
    if (Em < 27 || Em > 226) return false;
    uint32_t Mm = 0x8000u | ((A >> 8) & 0x7FFFu);
    uint32_t L = bits - 1;
    uint32_t j = L;
    uint32_t Ms = ceil_div_q(Mm << j, bits);
    if (Ms >= 256) {
        j = L - 1;
        Ms = ceil_div_q(Mm << j, bits);
    }
    uint32_t Es = Em - j;
    *field = uint16_t((Es << 7) | (Ms & 0x7F));
    *es = Es;
    *r = kRecip.r[Ms - 128];  // = 0x7FFFFF / Ms, 128 <= Ms <= 255
    return true;
}

size_t write_raw(int dtype, const void *src, size_t src_bytes, uint8_t *dst) {
    size_t es = dtype_size(dtype);
    uint8_t *h = dst;
    std::memset(h, 0, kHeaderSize);
    put16(h, kMagic);
    h[2] = kFormatVersion;
    h[3] = uint8_t(Mode::raw);
    h[4] = uint8_t(dtype);
    put32(h + 8, uint32_t(src_bytes / es));
    put16(h + 12, 1);
    put32(h + 16, uint32_t(src_bytes));
    std::memcpy(dst + kHeaderSize, src, src_bytes);
    uint32_t crc = crc32c(0, h, 20);
    crc = crc32c(crc, dst + kHeaderSize, src_bytes);
    put32(h + 20, crc);
    return kHeaderSize + src_bytes;
}

}  // namespace

// out[c * rows + r] = in[r * cols + c]: the columnar scan order of §5 (and
// back, with rows and cols swapped). 8 x 8 byte tiles in SSE2 registers
// (baseline on x86-64) when both sides are multiples of 8; else per byte.
static void transpose_bytes(const int8_t *in, size_t rows, size_t cols, int8_t *out) {
#if defined(__SSE2__)
    if (rows % 8 == 0 && cols % 8 == 0) {
        for (size_t r = 0; r < rows; r += 8)
            for (size_t c = 0; c < cols; c += 8) {
                const int8_t *p = in + r * cols + c;
                __m128i x[8];
                for (int i = 0; i < 8; i++) x[i] = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(p + size_t(i) * cols));
                const __m128i a0 = _mm_unpacklo_epi8(x[0], x[1]), a1 = _mm_unpacklo_epi8(x[2], x[3]);
                const __m128i a2 = _mm_unpacklo_epi8(x[4], x[5]), a3 = _mm_unpacklo_epi8(x[6], x[7]);
                const __m128i b0 = _mm_unpacklo_epi16(a0, a1), b1 = _mm_unpackhi_epi16(a0, a1);
                const __m128i b2 = _mm_unpacklo_epi16(a2, a3), b3 = _mm_unpackhi_epi16(a2, a3);
                const __m128i y[4] = {_mm_unpacklo_epi32(b0, b2), _mm_unpackhi_epi32(b0, b2),
                                      _mm_unpacklo_epi32(b1, b3), _mm_unpackhi_epi32(b1, b3)};
                int8_t *o = out + c * rows + r;  // column c + j of the tile: 8 bytes at o + j * rows
                for (int j = 0; j < 4; j++) {
                    _mm_storel_epi64(reinterpret_cast<__m128i *>(o + size_t(2 * j) * rows), y[j]);
                    _mm_storel_epi64(reinterpret_cast<__m128i *>(o + size_t(2 * j + 1) * rows), _mm_srli_si128(y[j], 8));
                }
            }
        return;
    }
#endif
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) out[c * rows + r] = in[r * cols + c];
}

// The same for 16-bit values (b 9..12): 8 x 8 tiles of int16 in SSE2
// registers when both sides are multiples of 8; else per value.
static void transpose16(const int16_t *in, size_t rows, size_t cols, int16_t *out) {
#if defined(__SSE2__)
    if (rows % 8 == 0 && cols % 8 == 0) {
        for (size_t r = 0; r < rows; r += 8)
            for (size_t c = 0; c < cols; c += 8) {
                const int16_t *p = in + r * cols + c;
                __m128i x[8];
                for (int i = 0; i < 8; i++) x[i] = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + size_t(i) * cols));
                const __m128i a0 = _mm_unpacklo_epi16(x[0], x[1]), a1 = _mm_unpackhi_epi16(x[0], x[1]);
                const __m128i a2 = _mm_unpacklo_epi16(x[2], x[3]), a3 = _mm_unpackhi_epi16(x[2], x[3]);
                const __m128i a4 = _mm_unpacklo_epi16(x[4], x[5]), a5 = _mm_unpackhi_epi16(x[4], x[5]);
                const __m128i a6 = _mm_unpacklo_epi16(x[6], x[7]), a7 = _mm_unpackhi_epi16(x[6], x[7]);
                const __m128i b0 = _mm_unpacklo_epi32(a0, a2), b1 = _mm_unpackhi_epi32(a0, a2);
                const __m128i b2 = _mm_unpacklo_epi32(a1, a3), b3 = _mm_unpackhi_epi32(a1, a3);
                const __m128i b4 = _mm_unpacklo_epi32(a4, a6), b5 = _mm_unpackhi_epi32(a4, a6);
                const __m128i b6 = _mm_unpacklo_epi32(a5, a7), b7 = _mm_unpackhi_epi32(a5, a7);
                // column c + j of the tile: rows r..r+7 at out + (c + j) * rows + r
                const __m128i y[8] = {_mm_unpacklo_epi64(b0, b4), _mm_unpackhi_epi64(b0, b4), _mm_unpacklo_epi64(b1, b5),
                                      _mm_unpackhi_epi64(b1, b5), _mm_unpacklo_epi64(b2, b6), _mm_unpackhi_epi64(b2, b6),
                                      _mm_unpacklo_epi64(b3, b7), _mm_unpackhi_epi64(b3, b7)};
                for (int j = 0; j < 8; j++)
                    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + (c + size_t(j)) * rows + r), y[j]);
            }
        return;
    }
#endif
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) out[c * rows + r] = in[r * cols + c];
}

// Writes the header of a quantised record but its CRC (bytes 0..19).
static void write_header(Mode mode, int dtype, const Params &P, size_t n, size_t C, uint32_t plen, uint8_t *dst) {
    uint8_t *h = dst;
    put16(h, kMagic);
    h[2] = kFormatVersion;
    h[3] = uint8_t(mode);
    h[4] = uint8_t(dtype);
    h[5] = P.bits;
    h[6] = P.group;
    h[7] = uint8_t(P.order | (P.entropy << 2));
    put32(h + 8, uint32_t(n));
    put16(h + 12, uint16_t(C));
    put16(h + 14, 0);
    put32(h + 16, plen);
}

// Writes the header of a quantised record whose payload (plen bytes) is in place.
static size_t finish_record(Mode mode, int dtype, const Params &P, size_t n, size_t C, uint32_t plen, uint8_t *dst) {
    write_header(mode, dtype, P, n, C, plen, dst);
    uint32_t crc = crc32c(0, dst, 20);
    crc = crc32c(crc, dst + kHeaderSize, plen);
    put32(dst + 20, crc);
    return kHeaderSize + plen;
}

// §13: b = 9..12, 16-bit quantised values, Rice or split Rice (§18) only. Scalar on every
// implementation but the Rice stage (the table's rice_encode16; the scales,
// canonical values and group data are already in scratch, made by the
// implementation's kernels, which are bit-identical).
static int encode_wide(const Kernels *K, Mode mode, int dtype, const void *src, size_t src_bytes, const Params &P,
                       size_t C, size_t G, uint8_t *dst, size_t *out_len) {
    Scratch &S = scratch();
    const size_t n = src_bytes / dtype_size(dtype), T = n / C;
    const uint32_t Q = (1u << (P.bits - 1)) - 1;
    S.wq.resize(n);
    int16_t *q = S.wq.data();
    const uint32_t *u = S.u.data();
    for (size_t t = 0, i = 0; t < T; t++)
        for (size_t c = 0; c < C; c++, i++) {
            const size_t g = P.group == kGroupPage ? 0 : P.group == kGroupChannel ? c : t;
            q[i] = int16_t(quant_one(u[i], S.es[g], S.r[g], Q));
        }
    const int16_t *s = q;
    if (P.order == kOrderColumnar && C > 1) {
        S.ws.resize(n);
        for (size_t t = 0; t < T; t++)
            for (size_t c = 0; c < C; c++) S.ws[c * T + t] = q[t * C + c];
        s = S.ws.data();
    }
    uint8_t *payload = dst + kHeaderSize;
    for (size_t g = 0; g < G; g++) put16(payload + 2 * g, S.scales[g]);
    const size_t budget = src_bytes - 1 - 2 * G;
    const auto enc16 = P.entropy == kEntropySplitRice ? K->srice_encode16 : K->rice_encode16;
    const size_t slen = enc16(s, n, P.order != kOrderNone, P.bits, payload + 2 * G, budget);
    if (slen == 0) {
        *out_len = write_raw(dtype, src, src_bytes, dst);
        return SPECKV_OK;
    }
    *out_len = finish_record(mode, dtype, P, n, C, uint32_t(2 * G + slen), dst);
    return SPECKV_OK;
}

// ------------------------------------------------------------------ encode

int encode(Mode mode, int dtype, const void *src, size_t src_bytes, Layout layout, uint8_t *dst,
           size_t cap, size_t *out_len, Impl impl) {
    if (size_t(mode) >= size_t(kModeCount)) return fail(SPECKV_EINVAL, "codec: unknown mode %d", int(mode));
    return encode_params(mode, mode_params(mode), dtype, src, src_bytes, layout, dst, cap, out_len, impl);
}

int encode_params(Mode mode, Params P, int dtype, const void *src, size_t src_bytes, Layout layout, uint8_t *dst,
                  size_t cap, size_t *out_len, Impl impl) {
    if (!src || !dst || !out_len) return fail(SPECKV_EINVAL, "codec: NULL argument to encode");
    size_t esz = dtype_size(dtype);
    if (!esz) return fail(SPECKV_EINVAL, "codec: unknown dtype %d", dtype);
    if (size_t(mode) >= size_t(kModeCount)) return fail(SPECKV_EINVAL, "codec: unknown mode %d", int(mode));
    if (src_bytes == 0 || src_bytes % esz)
        return fail(SPECKV_EINVAL, "codec: %zu bytes is not a whole number of %zu-byte elements", src_bytes, esz);
    size_t n = src_bytes / esz;
    if (n > kMaxElements) return fail(SPECKV_EINVAL, "codec: %zu elements exceed the limit %u", n, kMaxElements);
    if (cap < max_record_size(src_bytes))
        return fail(SPECKV_EINVAL, "codec: dst capacity %zu < max_record_size %zu", cap, max_record_size(src_bytes));
    const Kernels *K = kernels_for(impl);
    if (!K) return fail(SPECKV_ENOTSUP, "codec: implementation %s not available on this CPU", impl_name(impl));

    if (mode == Mode::raw || dtype == SPECKV_DTYPE_OPAQUE) {
        *out_len = write_raw(dtype, src, src_bytes, dst);
        return SPECKV_OK;
    }
    const bool wide_ok = P.bits <= 8 || P.entropy == kEntropyRice || P.entropy == kEntropySplitRice;
    const bool packed_ok = P.entropy != kEntropyPacked || (P.bits <= 8 && P.order == kOrderNone);
    if (P.bits < 3 || P.bits > 12 || !wide_ok || !packed_ok || P.group > kGroupToken || P.order > kOrderColumnar ||
        P.entropy > kEntropyPacked)
        return fail(SPECKV_EINVAL, "codec: invalid parameters b=%u group=%u order=%u entropy=%u", P.bits, P.group,
                    P.order, P.entropy);
    const uint32_t Q = (1u << (P.bits - 1)) - 1;
    size_t C = layout.channels;
    if (C == 0 || C > 65535 || n % C) C = 1;
    const size_t T = n / C;

    // §19: the asymmetric quantiser, values packed at b bits (codec_packed.cc).
    if (P.entropy == kEntropyPacked) {
        const size_t G = P.group == kGroupPage ? 1 : P.group == kGroupChannel ? C : T;
        const size_t plen = packed_payload_len(n, G, P.bits);
        // §7: raw when the record would not be shorter than the raw one.
        size_t got = plen < src_bytes ? packed_encode_payload(impl, dtype, src, n, C, P, dst + kHeaderSize) : 0;
        if (got == 0) {
            *out_len = write_raw(dtype, src, src_bytes, dst);
            return SPECKV_OK;
        }
        *out_len = finish_record(mode, dtype, P, n, C, uint32_t(got), dst);
        return SPECKV_OK;
    }

    // int8 and the like (FP16, b <= 8, one scale per page, bytes, no delta):
    // the maximum, then the scale and the q bytes straight into the record.
    // No scratch memory. The same checks and bytes as the general path below.
    if (dtype == SPECKV_DTYPE_FP16 && P.bits <= 8 && P.group == kGroupPage && P.entropy == kEntropyBytes &&
        P.order == kOrderNone) {
        uint32_t amax, es, r;
        uint16_t field;
        // Raw when: a non-finite value; 2 * G >= raw payload (n = 1); the
        // scale out of range; n > budget = 2n - 3 (n < 3).
        if (!K->absmax_fp16(src, n, &amax) || n < 3 || !make_scale(amax, P.bits, &field, &es, &r)) {
            *out_len = write_raw(dtype, src, src_bytes, dst);
            return SPECKV_OK;
        }
        put16(dst + kHeaderSize, field);
        int8_t *q = reinterpret_cast<int8_t *>(dst + kHeaderSize + 2);
        if (K->int8_encode_fp16) {  // the CRC rides on the quantiser (codec_kernels.h)
            write_header(mode, dtype, P, n, C, uint32_t(2 + n), dst);
            put32(dst + 20, K->int8_encode_fp16(src, n, es, r, Q, field, q, crc32c(0, dst, 20)));
            *out_len = kHeaderSize + 2 + n;
            return SPECKV_OK;
        }
        K->quant_const_fp16(src, n, es, r, Q, q);
        *out_len = finish_record(mode, dtype, P, n, C, uint32_t(2 + n), dst);
        return SPECKV_OK;
    }

    Scratch &S = scratch();
    S.q.resize(n);
    int8_t *q = S.q.data();
    size_t G = P.group == kGroupPage ? 1 : P.group == kGroupChannel ? C : T;
    const size_t raw_payload = src_bytes;
    uint8_t *payload = dst + kHeaderSize;
    const size_t budget = raw_payload - 1 - 2 * std::min(G, raw_payload / 2);  // record must be shorter than raw
    // FP16 with one scale per page or per token, b <= 8: straight from the
    // FP16 bits (same values as canon + absmax + quant_const, docs §2-§3).
    const bool direct = dtype == SPECKV_DTYPE_FP16 && P.bits <= 8 && P.group != kGroupChannel;
    if (direct) {
        S.amax.resize(G);
        auto h = static_cast<const uint8_t *>(src);
        const size_t gl = n / G;  // elements per group
        bool finite = true;
        for (size_t g = 0; g < G; g++) finite &= K->absmax_fp16(h + 2 * g * gl, gl, &S.amax[g]);
        if (!finite || 2 * G >= raw_payload) {
            *out_len = write_raw(dtype, src, src_bytes, dst);
            return SPECKV_OK;
        }
    } else {
        S.u.resize(n);
        if (!K->canon(dtype, src, n, S.u.data())) {
            *out_len = write_raw(dtype, src, src_bytes, dst);
            return SPECKV_OK;
        }
        if (2 * G >= raw_payload) {
            *out_len = write_raw(dtype, src, src_bytes, dst);
            return SPECKV_OK;
        }
        S.amax.resize(G);
        const uint32_t *u = S.u.data();
        if (P.group == kGroupPage) {
            S.amax[0] = K->absmax(u, n);
        } else if (P.group == kGroupChannel) {
            K->colmax(u, T, C, S.amax.data());
        } else {
            for (size_t t = 0; t < T; t++) S.amax[t] = K->absmax(u + t * C, C);
        }
    }
    S.es.resize(G);
    S.r.resize(G);
    S.scales.resize(G);
    for (size_t g = 0; g < G; g++) {
        if (!make_scale(S.amax[g], P.bits, &S.scales[g], &S.es[g], &S.r[g])) {
            *out_len = write_raw(dtype, src, src_bytes, dst);
            return SPECKV_OK;
        }
    }
    if (P.bits > 8) return encode_wide(K, mode, dtype, src, src_bytes, P, C, G, dst, out_len);
    uint8_t *stream = payload + 2 * G;
    const bool delta = P.order != kOrderNone;
    // int8 (bytes, no delta): the q bytes are the stream; quantise in place.
    const bool in_place = P.entropy == kEntropyBytes && !delta;
    if (in_place) {
        if (n > budget) {
            *out_len = write_raw(dtype, src, src_bytes, dst);
            return SPECKV_OK;
        }
        q = reinterpret_cast<int8_t *>(stream);
    }
    if (direct) {
        auto h = static_cast<const uint8_t *>(src);
        const size_t gl = n / G;
        for (size_t g = 0; g < G; g++) K->quant_const_fp16(h + 2 * g * gl, gl, S.es[g], S.r[g], Q, q + g * gl);
    } else {
        const uint32_t *u = S.u.data();
        if (P.group == kGroupPage) {
            K->quant_const(u, n, S.es[0], S.r[0], Q, q);
        } else if (P.group == kGroupChannel) {
            for (size_t t = 0; t < T; t++) K->quant_row(u + t * C, C, S.es.data(), S.r.data(), Q, q + t * C);
        } else {
            for (size_t t = 0; t < T; t++) K->quant_const(u + t * C, C, S.es[t], S.r[t], Q, q + t * C);
        }
    }

    // Scan order (§5).
    const int8_t *s = q;
    if (P.order == kOrderColumnar && C > 1) {
        S.s.resize(n);
        int8_t *so = S.s.data();
        transpose_bytes(q, T, C, so);
        s = so;
    }

    for (size_t g = 0; g < G; g++) put16(payload + 2 * g, S.scales[g]);
    size_t slen = 0;
    if (P.entropy == kEntropyRice) {
        slen = K->rice_encode8(s, n, delta, P.bits, stream, budget);
    } else if (P.entropy == kEntropySplitRice) {
        slen = K->srice_encode8(s, n, delta, P.bits, stream, budget);
    } else if (in_place) {
        slen = n;
    } else {
        // Bytes of d_i mod 256 (§6.0), and the run starts for RLE (§6.1).
        thread_local std::vector<uint8_t> dbv;
        thread_local std::vector<uint64_t> rsv;
        dbv.resize(n);
        const bool rle = P.entropy == kEntropyRle;
        if (rle) rsv.resize(n / 64 + 1);
        uint8_t *db = dbv.data();
        K->delta_runs(reinterpret_cast<const uint8_t *>(s), n, delta, db, rle ? rsv.data() : nullptr);
        if (rle) {
            slen = rle_encode(db, n, rsv.data(), stream, budget);
        } else if (n <= budget) {
            std::memcpy(stream, db, n);
            slen = n;
        }
    }
    if (slen == 0) {
        *out_len = write_raw(dtype, src, src_bytes, dst);
        return SPECKV_OK;
    }
    *out_len = finish_record(mode, dtype, P, n, C, uint32_t(2 * G + slen), dst);
    return SPECKV_OK;
}

// ------------------------------------------------------------------ decode

int peek_header(const uint8_t *rec, size_t len, Header *out) {
    if (!rec || !out) return fail(SPECKV_EINVAL, "codec: NULL argument to peek_header");
    if (len < kHeaderSize) return fail(SPECKV_ECORRUPT, "codec: record of %zu bytes is shorter than the %zu-byte header", len, kHeaderSize);
    if (get16(rec) != kMagic) return fail(SPECKV_ECORRUPT, "codec: bad magic 0x%04x", get16(rec));
    if (rec[2] != kFormatVersion) return fail(SPECKV_ECORRUPT, "codec: unknown format version %u", rec[2]);
    Header h{};
    if (rec[3] >= kModeCount) return fail(SPECKV_ECORRUPT, "codec: unknown mode id %u", rec[3]);
    h.mode = Mode(rec[3]);
    h.dtype = rec[4];
    if (h.dtype > SPECKV_DTYPE_FP32) return fail(SPECKV_ECORRUPT, "codec: unknown dtype %u", h.dtype);
    h.params = Params{rec[5], rec[6], uint8_t(rec[7] & 3), uint8_t((rec[7] >> 2) & 7)};  // §19: entropy bits 2-4
    h.count = get32(rec + 8);
    h.channels = get16(rec + 12);
    h.payload_len = get32(rec + 16);
    h.crc = get32(rec + 20);
    if (get16(rec + 14) != 0) return fail(SPECKV_ECORRUPT, "codec: reserved header bytes are not zero");
    if (h.count == 0 || h.count > kMaxElements) return fail(SPECKV_ECORRUPT, "codec: element count %u out of range", h.count);
    if (h.channels == 0 || h.count % h.channels) return fail(SPECKV_ECORRUPT, "codec: channels %u do not divide count %u", h.channels, h.count);
    const size_t esz = dtype_size(h.dtype);
    const size_t raw = size_t(h.count) * esz;
    if (h.mode == Mode::raw) {
        if (rec[5] || rec[6] || rec[7]) return fail(SPECKV_ECORRUPT, "codec: raw record with quantiser fields set");
        if (h.payload_len != raw) return fail(SPECKV_ECORRUPT, "codec: raw payload length %u != %zu", h.payload_len, raw);
    } else {
        if (h.dtype == SPECKV_DTYPE_OPAQUE) return fail(SPECKV_ECORRUPT, "codec: opaque dtype in a quantised record");
        if (h.params.bits < 3 || h.params.bits > 12) return fail(SPECKV_ECORRUPT, "codec: quantiser bits %u out of 3..12", h.params.bits);
        if (h.params.bits > 8 && h.params.entropy != kEntropyRice && h.params.entropy != kEntropySplitRice)
            return fail(SPECKV_ECORRUPT, "codec: %u-bit values need the Rice stage", h.params.bits);
        if (h.params.group > kGroupToken) return fail(SPECKV_ECORRUPT, "codec: unknown group kind %u", h.params.group);
        // §18: entropy 3 (split Rice) is valid; §19: entropy 4 (packed, order 0, b <= 8);
        // scan order 3, entropy 5-7 and bits 5-7 are not.
        if ((rec[7] & 3) == 3 || (rec[7] >> 5) || h.params.entropy > kEntropyPacked)
            return fail(SPECKV_ECORRUPT, "codec: unknown flags 0x%02x", rec[7]);
        if (h.params.entropy == kEntropyPacked && (h.params.order != kOrderNone || h.params.bits > 8))
            return fail(SPECKV_ECORRUPT, "codec: packed record with flags 0x%02x and b = %u", rec[7], h.params.bits);
        size_t G = h.params.group == kGroupPage ? 1 : h.params.group == kGroupChannel ? h.channels : h.count / h.channels;
        if (h.payload_len < 2 * G || h.payload_len > raw)
            return fail(SPECKV_ECORRUPT, "codec: payload length %u inconsistent with %zu scales / %zu raw bytes", h.payload_len, G, raw);
    }
    if (size_t(h.payload_len) > len - kHeaderSize)
        return fail(SPECKV_ECORRUPT, "codec: record claims %u payload bytes, only %zu present", h.payload_len, len - kHeaderSize);
    *out = h;
    return SPECKV_OK;
}

// FP16, b <= 8, one scale per page, bytes, no delta, a payload of one scale
// field and the values, and a valid scale field (§8): int8's checks in
// decode() other than the CRC and the values' range.
static bool int8_shape(const Header &h, const uint8_t *payload) {
    if (h.mode == Mode::raw || h.dtype != SPECKV_DTYPE_FP16 || h.params.bits > 8 || h.params.group != kGroupPage ||
        h.params.order != kOrderNone || h.params.entropy != kEntropyBytes || h.payload_len != 2 + size_t(h.count))
        return false;
    const uint16_t f = get16(payload);
    return f == 0 || (!(f & 0x8000u) && (f >> 7) >= 20 && (f >> 7) <= 226);
}

int decode(const uint8_t *rec, size_t len, void *dst, size_t cap, size_t *out_bytes, Impl impl) {
    if (!rec || !dst || !out_bytes) return fail(SPECKV_EINVAL, "codec: NULL argument to decode");
    Header h;
    if (int rc = peek_header(rec, len, &h)) return rc;
    if (h.record_len() != len)
        return fail(SPECKV_ECORRUPT, "codec: record length %zu != header's %zu", len, h.record_len());
    uint32_t crc = crc32c(0, rec, 20);
    // An int8 record that passes every other check below may take the
    // table's one-pass path, which writes dst while it checks the CRC and
    // the values' range; if either fails (dst then unspecified, codec.h),
    // the checks below report what failed, with the reference's message.
    const Kernels *K8 = kernels_for(impl);
    bool done = false;
    if (K8 && K8->int8_decode_fp16 && int8_shape(h, rec + kHeaderSize) && cap >= h.decoded_bytes())
        crc = K8->int8_decode_fp16(crc, rec + kHeaderSize, h.count, (1u << (h.params.bits - 1)) - 1, h.crc, dst, &done);
    else
        crc = crc32c(crc, rec + kHeaderSize, h.payload_len);
    if (crc != h.crc) return fail(SPECKV_ECORRUPT, "codec: CRC32C mismatch (stored %08x, computed %08x)", h.crc, crc);
    if (done) return *out_bytes = h.decoded_bytes(), SPECKV_OK;
    const size_t out = h.decoded_bytes();
    if (cap < out) return fail(SPECKV_ERANGE, "codec: output capacity %zu < decoded size %zu", cap, out);
    const Kernels *K = kernels_for(impl);
    if (!K) return fail(SPECKV_ENOTSUP, "codec: implementation %s not available on this CPU", impl_name(impl));
    const uint8_t *payload = rec + kHeaderSize;
    if (h.mode == Mode::raw) {
        std::memcpy(dst, payload, out);
        *out_bytes = out;
        return SPECKV_OK;
    }
    const Params P = h.params;
    const size_t n = h.count, C = h.channels, T = n / C;
    if (P.entropy == kEntropyPacked) {  // §19
        if (int rc = packed_decode_payload(impl, P, h.dtype, n, C, payload, h.payload_len, dst)) return rc;
        *out_bytes = out;
        return SPECKV_OK;
    }
    const size_t G = P.group == kGroupPage ? 1 : P.group == kGroupChannel ? C : T;
    const int32_t Q = (1 << (P.bits - 1)) - 1;
    Scratch &S = scratch();
    S.scales.resize(G);
    // §8: scale exponents in [20, 226]; §13: [27 - L, 226] when b > 8.
    const uint32_t emin = P.bits > 8 ? 27u - (P.bits - 1u) : 20u;
    for (size_t g = 0; g < G; g++) {
        uint16_t f = get16(payload + 2 * g);
        uint32_t e = f >> 7;
        if (f != 0 && ((f & 0x8000u) || e < emin || e > 226))
            return fail(SPECKV_ECORRUPT, "codec: scale %zu = 0x%04x out of range", g, f);
        S.scales[g] = f;
    }
    const uint8_t *stream = payload + 2 * G;
    const size_t slen = h.payload_len - 2 * G;
    const size_t esz = dtype_size(h.dtype);
    if (P.bits > 8) {  // §13: int16 values; the Rice stage and the dequantiser are table entries
        S.ws.resize(n);
        const auto dec16 = P.entropy == kEntropySplitRice ? K->srice_decode16 : K->rice_decode16;
        if (int rc = dec16(stream, slen, n, P.order != kOrderNone, P.bits, S.ws.data())) return rc;
        const int16_t *q = S.ws.data();
        if (P.order == kOrderColumnar && C > 1) {
            S.wq.resize(n);
            transpose16(S.ws.data(), C, T, S.wq.data());
            q = S.wq.data();
        }
        auto o = static_cast<uint8_t *>(dst);
        if (P.group == kGroupPage) {
            K->dequant_const16(q, n, S.scales[0], h.dtype, o);
        } else if (P.group == kGroupChannel) {
            for (size_t t = 0; t < T; t++) K->dequant_row16(q + t * C, C, S.scales.data(), h.dtype, o + t * C * esz);
        } else {
            for (size_t t = 0; t < T; t++) K->dequant_const16(q + t * C, C, S.scales[t], h.dtype, o + t * C * esz);
        }
        *out_bytes = out;
        return SPECKV_OK;
    }
    const bool delta = P.order != kOrderNone;
    const int8_t *s;
    if (P.entropy == kEntropyBytes && !delta) {
        // int8: the stream is the quantised values; check them where they are.
        if (slen != n) return fail(SPECKV_ECORRUPT, "codec: byte stream of %zu bytes for %zu values", slen, n);
        if (!K->range_ok(stream, n, uint32_t(Q))) {
            for (size_t i = 0; i < n; i++)  // the first bad value for the message (cold path)
                if (int8_t(stream[i]) > Q || int8_t(stream[i]) < -Q)
                    return fail(SPECKV_ECORRUPT, "codec: value %d at %zu outside [-%d, %d]", int8_t(stream[i]), i, Q, Q);
            return fail(SPECKV_ECORRUPT, "codec: value outside [-%d, %d]", Q, Q);
        }
        s = reinterpret_cast<const int8_t *>(stream);
    } else if (S.s.resize(n + 128), s = S.s.data(), P.entropy >= kEntropyRice) {  // +128: RLE literal slack
        const auto dec8 = P.entropy == kEntropySplitRice ? K->srice_decode8 : K->rice_decode8;
        if (int rc = dec8(stream, slen, n, delta, P.bits, S.s.data())) return rc;
    } else {
        const uint8_t *bytes = stream;
        if (P.entropy == kEntropyRle) {
            if (int rc = rle_decode(stream, slen, reinterpret_cast<uint8_t *>(S.s.data()), n)) return rc;
            bytes = reinterpret_cast<const uint8_t *>(S.s.data());
        } else if (slen != n) {
            return fail(SPECKV_ECORRUPT, "codec: byte stream of %zu bytes for %zu values", slen, n);
        }
        if (!K->undelta(bytes, n, delta, uint32_t(Q), S.s.data())) {
            // Find the first bad value for the message (cold path).
            uint8_t prev = 0;
            for (size_t i = 0; i < n; i++) {
                uint8_t v = delta ? uint8_t(prev + bytes[i]) : bytes[i];
                if (int8_t(v) > Q || int8_t(v) < -Q)
                    return fail(SPECKV_ECORRUPT, "codec: value %d at %zu outside [-%d, %d]", int8_t(v), i, Q, Q);
                prev = v;
            }
            return fail(SPECKV_ECORRUPT, "codec: value outside [-%d, %d]", Q, Q);
        }
    }
    const int8_t *q = s;
    if (P.order == kOrderColumnar && C > 1) {
        S.q.resize(n);
        int8_t *qc = S.q.data();
        transpose_bytes(s, C, T, qc);
        q = qc;
    }
    auto o = static_cast<uint8_t *>(dst);
    if (P.group == kGroupPage) {
        K->dequant_const(q, n, S.scales[0], h.dtype, o);
    } else if (P.group == kGroupChannel) {
        for (size_t t = 0; t < T; t++) K->dequant_row(q + t * C, C, S.scales.data(), h.dtype, o + t * C * esz);
    } else {
        for (size_t t = 0; t < T; t++) K->dequant_const(q + t * C, C, S.scales[t], h.dtype, o + t * C * esz);
    }
    *out_bytes = out;
    return SPECKV_OK;
}

// ------------------------------------------------------------ scratch buffers

void grow(std::vector<uint8_t> &v, size_t n) {
    if (v.size() < n) v.resize(n);
}
void grow(std::vector<uint16_t> &v, size_t n) {
    if (v.size() < n) v.resize(n);
}
void grow(std::vector<uint32_t> &v, size_t n) {
    if (v.size() < n) v.resize(n);
}

}  // namespace speckv::codec
