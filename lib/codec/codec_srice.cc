// SPDX-License-Identifier: Apache-2.0
// Split Rice (docs/codec.md §18, entropy 3): the scalar reference, the
// definition every other implementation of the stage must equal byte for
// byte (records) and value for value (decoded symbols, return codes, error
// messages). It is written to be read next to §18, not to be fast: the SIMD
// paths (codec_srice_avx512.cc) are the fast ones.
//
// The stream of n symbols z_i (zigzag of the §5 deltas, as §6.2) in blocks
// of 64, one k per block, as four byte-aligned sections:
//   K      nb 4-bit fields k_j                       ceil(nb / 2) bytes
//   Low    z_i & (2^k - 1), k bits per symbol        ceil(sum m_j k_j / 8)
//   Unary  min(z_i >> k, 15) zero-bits, one one-bit  up to the n-th one-bit
//   Escape z_i >> k in W - k bits, where >= 15       ceil(sum / 8), maybe 0
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "codec/codec_kernels.h"
#include "speckv.h"
#include "util/status.h"

namespace speckv::codec {

namespace {

constexpr size_t kBlock = 64;
constexpr unsigned kEsc = 15;

inline uint32_t zigzag(int32_t d) { return (uint32_t(d) << 1) ^ uint32_t(d >> 31); }
inline int32_t unzigzag(uint32_t z) { return int32_t(z >> 1) ^ -int32_t(z & 1); }

// §18 "Parameter": the k in 0..7 with the fewest bits for the block, ties to
// the smaller k. An escape costs 16 + W: its unary part ends with a one-bit.
// A symbol z < 512 (every one when b <= 8) adds a precomputed row of its 8
// costs; larger ones (b 9..12) use the formula.
struct CostTable {
    uint16_t c[6][512][8];  // [W - 4][z][k]
    CostTable() {
        for (unsigned w = 0; w < 6; w++)
            for (uint32_t z = 0; z < 512; z++)
                for (unsigned k = 0; k < 8; k++) {
                    const uint32_t u = z >> k;
                    c[w][z][k] = uint16_t(u < kEsc ? u + 1 + k : 16 + w + 4);
                }
    }
};

unsigned best_k(const uint16_t *z, size_t m, unsigned W) {
    uint32_t cost[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (W <= 9) {
        static const CostTable table;
        const uint16_t(*row)[8] = table.c[W - 4];
        uint16_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // <= 64 * 29: fits
        for (size_t i = 0; i < m; i++)
            for (unsigned k = 0; k < 8; k++) acc[k] = uint16_t(acc[k] + row[z[i]][k]);
        for (unsigned k = 0; k < 8; k++) cost[k] = acc[k];
    } else {
        for (size_t i = 0; i < m; i++)
            for (unsigned k = 0; k < 8; k++) {
                const uint32_t u = uint32_t(z[i]) >> k;
                cost[k] += u < kEsc ? u + 1 + k : 16 + W;
            }
    }
    unsigned bk = 0;
    for (unsigned k = 1; k < 8; k++)
        if (cost[k] < cost[bk]) bk = k;
    return bk;
}

// LSB-first bit writer into a section whose size the caller has computed,
// so it never tests for the end (and never writes past it).
class BitSink {
public:
    explicit BitSink(uint8_t *p) : p_(p) {}
    // Appends the low n (<= 24) bits of v (the caller masks v).
    void put(uint32_t v, unsigned n) {
        acc_ |= uint64_t(v) << fill_;
        fill_ += n;
        if (fill_ >= 32) {
            const uint32_t lo = uint32_t(acc_);
            std::memcpy(p_, &lo, 4);  // little-endian host, as the rest of the codec
            p_ += 4;
            acc_ >>= 32;
            fill_ -= 32;
        }
    }
    // The bits left, then zero bits to a whole byte.
    void flush() {
        for (; fill_ > 0; fill_ = fill_ > 8 ? fill_ - 8 : 0) *p_++ = uint8_t(acc_), acc_ >>= 8;
        acc_ = 0;
    }

private:
    uint8_t *p_;
    uint64_t acc_ = 0;
    unsigned fill_ = 0;
};

// LSB-first bit reader over [p, p + len): get() fails instead of reading past it.
class BitSource {
public:
    BitSource(const uint8_t *p, size_t len) : p_(p), len_(len) {}
    bool get(unsigned n, uint32_t *v) {  // n <= 24
        while (fill_ < n) {
            if (pos_ == len_) return false;
            acc_ |= uint64_t(p_[pos_++]) << fill_;
            fill_ += 8;
        }
        *v = uint32_t(acc_ & ((uint64_t(1) << n) - 1));
        acc_ >>= n;
        fill_ -= n;
        return true;
    }
    uint64_t bits_used() const { return uint64_t(pos_) * 8 - fill_; }

private:
    const uint8_t *p_;
    size_t len_, pos_ = 0;
    uint64_t acc_ = 0;
    unsigned fill_ = 0;
};

struct Scratch {
    std::vector<uint16_t> z;
    std::vector<uint8_t> k, v;
};
// Behind a pointer: the library's static TLS block must stay small enough
// for dlopen (status.h has an initial-exec variable), and a Scratch is not.
Scratch &scratch() {
    thread_local std::unique_ptr<Scratch> s;
    if (!s) s = std::make_unique<Scratch>();
    return *s;
}

template <class Sym>
size_t srice_encode(const Sym *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap) {
    const unsigned W = bits + 1;
    const size_t nb = (n + kBlock - 1) / kBlock;
    Scratch &S = scratch();
    S.z.resize(n);
    S.k.resize(nb);
    uint16_t *z = S.z.data();
    for (size_t i = 0; i < n; i++)
        z[i] = uint16_t(zigzag(int32_t(s[i]) - (delta && i ? int32_t(s[i - 1]) : 0)));
    // Every k, then the exact size of each section.
    uint64_t low_bits = 0, unary_bits = 0, esc_bits = 0;
    for (size_t j = 0; j < nb; j++) {
        const size_t b0 = j * kBlock, m = std::min(kBlock, n - b0);
        const unsigned k = best_k(z + b0, m, W);
        S.k[j] = uint8_t(k);
        low_bits += uint64_t(m) * k;
        for (size_t i = b0; i < b0 + m; i++) {
            const uint32_t u = uint32_t(z[i]) >> k;
            unary_bits += std::min(u, kEsc) + 1;
            if (u >= kEsc) esc_bits += W - k;  // >= 4: an escape needs z >= 15 * 2^k, and z < 2^W
        }
    }
    const size_t kb = (nb + 1) / 2, lb = size_t((low_bits + 7) / 8), ub = size_t((unary_bits + 7) / 8),
                 eb = size_t((esc_bits + 7) / 8);
    const size_t total = kb + lb + ub + eb;
    if (total > cap) return 0;
    std::memset(dst, 0, kb);
    for (size_t j = 0; j < nb; j++) dst[j / 2] = uint8_t(dst[j / 2] | (S.k[j] << (4 * (j & 1))));
    BitSink low(dst + kb), unary(dst + kb + lb), esc(dst + kb + lb + ub);
    for (size_t j = 0; j < nb; j++) {
        const size_t b0 = j * kBlock, m = std::min(kBlock, n - b0);
        const unsigned k = S.k[j];
        for (size_t i = b0; i < b0 + m; i++) {
            const uint32_t u = uint32_t(z[i]) >> k;
            low.put(z[i] & ((1u << k) - 1), k);
            unary.put(1u << std::min(u, kEsc), std::min(u, kEsc) + 1);
            if (u >= kEsc) esc.put(u, W - k);
        }
    }
    low.flush();
    unary.flush();
    esc.flush();
    return total;
}

template <class Sym>
int srice_decode(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, Sym *s) {
    const unsigned W = bits + 1;
    const int32_t Q = (1 << (bits - 1)) - 1;
    const uint32_t zmax = uint32_t(4 * Q);
    const size_t nb = (n + kBlock - 1) / kBlock, kb = (nb + 1) / 2;
    Scratch &S = scratch();
    S.z.resize(n);
    S.k.resize(nb);
    S.v.resize(n);
    // K section: k_j <= 7, a zero padding nibble.
    if (len < kb)
        return fail(SPECKV_ECORRUPT, "codec: split Rice stream of %zu bytes is shorter than its K section (%zu bytes)",
                    len, kb);
    uint64_t low_bits = 0;
    for (size_t j = 0; j < nb; j++) {
        const unsigned k = (p[j / 2] >> (4 * (j & 1))) & 15u;
        if (k > 7) return fail(SPECKV_ECORRUPT, "codec: split Rice block %zu has k = %u > 7", j, k);
        S.k[j] = uint8_t(k);
        low_bits += uint64_t(std::min(kBlock, n - j * kBlock)) * k;
    }
    if ((nb & 1) && (p[kb - 1] >> 4))
        return fail(SPECKV_ECORRUPT, "codec: non-zero padding nibble in the split Rice K section");
    // Low section: it must be there; its padding bits are zero.
    const size_t lb = size_t((low_bits + 7) / 8);
    if (len - kb < lb)
        return fail(SPECKV_ECORRUPT,
                    "codec: split Rice stream of %zu bytes is shorter than its K and Low sections (%zu bytes)", len,
                    kb + lb);
    if ((low_bits & 7) && (p[kb + lb - 1] >> (low_bits & 7)))
        return fail(SPECKV_ECORRUPT, "codec: non-zero padding bits in the split Rice Low section");
    // Unary section: v_i = the zero-bits before the i-th one-bit (15 or more:
    // an escape), up to the byte holding the n-th one-bit, whose higher bits are zero.
    size_t i = 0, q = kb + lb, unary_end = 0;
    size_t run = 0;  // zero-bits since the last one-bit
    while (q < len && !unary_end) {
        const size_t nbytes = std::min<size_t>(8, len - q);
        uint64_t w = 0;
        std::memcpy(&w, p + q, nbytes);  // LSB-first: byte q is bits 0..7
        unsigned at = 0;                 // the bits of w below `at` are counted
        while (w) {
            const unsigned t = unsigned(__builtin_ctzll(w));
            run += t - at;
            S.v[i++] = uint8_t(std::min(run, size_t(kEsc)));
            run = 0;
            at = t + 1;
            w &= w - 1;
            if (i == n) {
                const unsigned byte_end = (t / 8 + 1) * 8;  // the rest of t's byte
                if (byte_end < 64 ? (w & ((uint64_t(1) << byte_end) - 1)) : w)
                    return fail(SPECKV_ECORRUPT, "codec: set bits after the last one-bit of the split Rice Unary section");
                unary_end = q + t / 8 + 1;
                break;
            }
        }
        run += 8 * nbytes - at;
        q += nbytes;
    }
    if (!unary_end)
        return fail(SPECKV_ECORRUPT, "codec: split Rice Unary section holds %zu of %zu one-bits", i, n);
    // Low bits and escapes: z_i = (v_i < 15 ? v_i : e_i) * 2^k + low_i.
    BitSource low(p + kb, lb), esc(p + unary_end, len - unary_end);
    for (size_t j = 0; j < nb; j++) {
        const size_t b0 = j * kBlock, m = std::min(kBlock, n - b0);
        const unsigned k = S.k[j];
        // §18: an escape field is W - k bits; a hostile stream may put an
        // escape where W <= k, and then the field is empty (e_i = 0).
        const unsigned ew = W > k ? W - k : 0;
        for (size_t x = b0; x < b0 + m; x++) {
            uint32_t lo = 0, u = S.v[x];
            low.get(k, &lo);  // cannot fail: the section holds sum m_j k_j bits
            if (u >= kEsc && !esc.get(ew, &u))
                return fail(SPECKV_ECORRUPT, "codec: split Rice escape of symbol %zu runs past the payload", x);
            S.z[x] = uint16_t((u << k) | lo);
        }
    }
    const uint64_t esc_bits = esc.bits_used();
    const size_t eb = size_t((esc_bits + 7) / 8);
    if ((esc_bits & 7) && (p[unary_end + eb - 1] >> (esc_bits & 7)))
        return fail(SPECKV_ECORRUPT, "codec: non-zero padding bits in the split Rice Escape section");
    if (unary_end + eb != len)
        return fail(SPECKV_ECORRUPT, "codec: %zu bytes after the split Rice stream", len - unary_end - eb);
    // Values, delta and range (§6.2: z <= 4Q and |s_i| <= Q).
    int32_t prev = 0;
    for (size_t x = 0; x < n; x++) {
        const uint32_t zi = S.z[x];
        const int32_t v = unzigzag(zi) + (delta ? prev : 0);
        if (zi > zmax || v > Q || v < -Q)
            return fail(SPECKV_ECORRUPT,
                        "codec: split Rice symbol %zu out of range (z %u > 4Q = %u or value %d beyond +-%d)", x,
                        unsigned(zi), zmax, v, Q);
        s[x] = Sym(v);
        prev = v;
    }
    return SPECKV_OK;
}

}  // namespace

size_t srice_encode8_scalar(const int8_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap) {
    return srice_encode(s, n, delta, bits, dst, cap);
}
int srice_decode8_scalar(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int8_t *s) {
    return srice_decode(p, len, n, delta, bits, s);
}
size_t srice_encode16_scalar(const int16_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap) {
    return srice_encode(s, n, delta, bits, dst, cap);
}
int srice_decode16_scalar(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int16_t *s) {
    return srice_decode(p, len, n, delta, bits, s);
}

}  // namespace speckv::codec
