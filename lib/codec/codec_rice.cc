// SPDX-License-Identifier: Apache-2.0
// The codec's reference Rice stage (docs/codec.md §6.2): bit I/O, the per-block
// choice of k, the encoder and the decoder, for 8- and 16-bit symbols. Every
// kernel table's rice_encode8/16 and rice_decode8/16 must equal these
// (codec_kernels.h); codec_ref.cc reaches them through the table.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>  // baseline on x86-64: no ISA flag needed
#endif

#include "codec/codec.h"
#include "codec/codec_kernels.h"
#include "util/crc32c.h"
#include "util/status.h"

namespace speckv::codec {

// ------------------------------------------------------------ bit I/O (§6.2)

namespace {

class BitWriter {
public:
    BitWriter(uint8_t *p, size_t cap) : p_(p), cap_(cap) {}
    // Appends the low `n` (<= 32) bits of v, LSB first. Returns false on overflow.
    bool put(uint32_t v, unsigned n) {
        acc_ |= uint64_t(v) << fill_;
        fill_ += n;
        if (fill_ >= 32) {
            if (len_ + 8 <= cap_) {
                std::memcpy(p_ + len_, &acc_, 8);  // little-endian host; only 4 bytes count
            } else {
                if (len_ + 4 > cap_) return false;
                for (int i = 0; i < 4; i++) p_[len_ + size_t(i)] = uint8_t(acc_ >> (8 * i));
            }
            len_ += 4;
            acc_ >>= 32;
            fill_ -= 32;
        }
        return true;
    }
    bool flush() {
        while (fill_ > 0) {
            if (len_ == cap_) return false;
            p_[len_++] = uint8_t(acc_);
            acc_ >>= 8;
            fill_ = fill_ > 8 ? fill_ - 8 : 0;
        }
        return true;
    }
    size_t size() const { return len_; }

private:
    uint8_t *p_;
    size_t cap_, len_ = 0;
    uint64_t acc_ = 0;
    unsigned fill_ = 0;
};

// Branch-free: delta signs are random, a branch here mispredicts half the time.
inline uint32_t zigzag(int32_t d) { return (uint32_t(d) << 1) ^ uint32_t(d >> 31); }
inline int32_t unzigzag(uint32_t z) { return int32_t(z >> 1) ^ -int32_t(z & 1); }

constexpr size_t kRiceBlock = 64;
constexpr unsigned kRiceEsc = 15;

// Block bit counts for k = 0..7 (§6.2), argmin with ties to the smallest k.
// Symbols z < 512 (all of them when b <= 8) add a precomputed row of the 8
// costs (one vector add); larger ones use the formula.
struct RiceCostTable {
    uint16_t c[6][512][8];  // [W - 4][z][k]
    RiceCostTable() {
        for (unsigned w = 0; w < 6; w++)
            for (uint32_t z = 0; z < 512; z++)
                for (unsigned k = 0; k < 8; k++) {
                    uint32_t u = z >> k;
                    c[w][z][k] = uint16_t(u < kRiceEsc ? u + 1 + k : kRiceEsc + w + 4);
                }
    }
};

static inline unsigned rice_best_k(const uint32_t *z, size_t m, unsigned W) {
    uint32_t cost[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (W <= 9) {
        static const RiceCostTable table;
        const uint16_t(*row)[8] = table.c[W - 4];
        uint16_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // <= 64 * 28, fits
        for (size_t i = 0; i < m; i++)
            for (unsigned k = 0; k < 8; k++) acc[k] = uint16_t(acc[k] + row[z[i]][k]);
        for (unsigned k = 0; k < 8; k++) cost[k] = acc[k];
    } else {
        for (unsigned k = 0; k < 8; k++) {
            uint32_t c = 0;
            for (size_t i = 0; i < m; i++) {
                uint32_t u = z[i] >> k;
                c += u < kRiceEsc ? u + 1 + k : kRiceEsc + W;
            }
            cost[k] = c;
        }
    }
    unsigned bk = 0;
    for (unsigned k = 1; k < 8; k++)
        if (cost[k] < cost[bk]) bk = k;
    return bk;
}

// Thread-local buffers of the Rice stage: z values (one per symbol) and a
// padded copy of the bit stream, so the hot loops never test for the end.
struct RiceScratch {
    std::vector<uint16_t> z;
    std::vector<uint8_t> bits;
};
RiceScratch &rice_scratch() {
    thread_local RiceScratch r;
    return r;
}

constexpr size_t kRiceSlack = 256 + 16;

inline void store64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }
inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// §6.2. Returns bytes written or 0 if it does not fit in cap.
// Two passes: z_i for the whole page (no loop-carried work but the delta),
// then per block the best k and the codes, packed by a branch-free writer
// into a padded scratch buffer (stores 8 bytes at a time), copied out at the end.
template <class Sym>
size_t rice_encode(const Sym *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap) {
    const unsigned W = bits + 1;
    RiceScratch &R = rice_scratch();
    if (R.z.size() < n + kRiceBlock) R.z.resize(n + kRiceBlock);
    // Checked once per block: a block (<= 3 + 64 * 28 bits = 225 bytes) plus
    // the 8-byte store may run past cap into the slack before that check.
    if (R.bits.size() < cap + kRiceSlack) R.bits.resize(cap + kRiceSlack);
    uint16_t *z = R.z.data();
    if (delta) {
        z[0] = uint16_t(zigzag(int32_t(s[0])));
        for (size_t i = 1; i < n; i++) z[i] = uint16_t(zigzag(int32_t(s[i]) - int32_t(s[i - 1])));
    } else {
        for (size_t i = 0; i < n; i++) z[i] = uint16_t(zigzag(int32_t(s[i])));
    }
    uint8_t *const o0 = R.bits.data();
    uint8_t *o = o0;
    const uint8_t *const olim = o0 + cap;  // bytes fully written beyond this: does not fit
    uint64_t acc = 0;
    unsigned fill = 0;
    auto put = [&](uint64_t code, unsigned len) {
        acc |= code << fill;
        fill += len;
        store64(o, acc);
        o += fill >> 3;
        acc >>= (fill & ~7u);
        fill &= 7;
    };
    uint32_t zb[kRiceBlock];
    for (size_t b0 = 0; b0 < n; b0 += kRiceBlock) {
        const size_t m = std::min(kRiceBlock, n - b0);
        for (size_t i = 0; i < m; i++) zb[i] = z[b0 + i];
        const unsigned bk = rice_best_k(zb, m, W);
        put(bk, 3);
        const uint32_t lowmask = (1u << bk) - 1;
        for (size_t i = 0; i < m; i++) {
            const uint32_t zi = zb[i];
            const uint32_t u = zi >> bk;
            if (__builtin_expect(u < kRiceEsc, 1))
                put(((1u << u) - 1) | ((zi & lowmask) << (u + 1)), u + 1 + bk);
            else
                put(((1u << kRiceEsc) - 1) | (uint64_t(zi) << kRiceEsc), kRiceEsc + W);
        }
        if (o > olim) return 0;  // at most 64 * 28 + 3 bits per block: within the slack
    }
    const size_t len = size_t(o - o0) + (fill ? 1 : 0);
    if (len > cap) return 0;
    std::memcpy(dst, o0, len);
    return len;
}

// §6.2 decoder. The serial loop only extracts z (its critical path is
// ctz -> add -> shift); unzigzag, the delta prefix and the range checks run
// afterwards over the whole page. The stream is read from a zero-padded copy,
// so a refill never tests the end; an overrun is caught by the consumed-bit
// count after each block (reading zeros past the end cannot hide it).
template <class Sym>
int rice_decode(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, Sym *s) {
    const unsigned W = bits + 1;
    const int32_t Q = (1 << (bits - 1)) - 1;
    const uint32_t zmax = uint32_t(4 * Q);
    RiceScratch &R = rice_scratch();
    if (R.z.size() < n + kRiceBlock) R.z.resize(n + kRiceBlock);
    // An overrun is only detected at the end of its block: up to 225 bytes
    // past len, plus the 8-byte refill load, must read as zeros.
    if (R.bits.size() < len + kRiceSlack) R.bits.resize(len + kRiceSlack);
    uint8_t *const pb = R.bits.data();
    if (len) std::memcpy(pb, p, len);  // p may be null when len is 0
    std::memset(pb + len, 0, kRiceSlack);
    uint16_t *const z = R.z.data();
    const uint64_t total_bits = uint64_t(len) * 8;
    const uint32_t escmask = (1u << W) - 1;
    uint64_t buf = 0;
    unsigned nb = 0;
    size_t pos = 0;  // bytes loaded into buf
    auto refill = [&] {
        buf |= load64(pb + pos) << nb;
        pos += (63 - nb) >> 3;
        nb |= 56;
    };
    uint32_t bad = 0;
    for (size_t b0 = 0; b0 < n; b0 += kRiceBlock) {
        const size_t m = std::min(kRiceBlock, n - b0);
        if (nb < 32) refill();
        const unsigned k = unsigned(buf & 7);
        buf >>= 3, nb -= 3;
        const uint32_t lowmask = (1u << k) - 1;
        uint16_t *zo = z + b0;
        size_t i = 0;
        for (; i + 2 <= m; i += 2) {  // one refill (>= 56 bits) serves two symbols (<= 28 each)
            if (nb < 56) refill();
            for (int r = 0; r < 2; r++) {
                const uint32_t w = uint32_t(buf);
                const unsigned u = unsigned(__builtin_ctz(~w | (1u << kRiceEsc)));
                uint32_t zi;
                unsigned used;
                if (__builtin_expect(u < kRiceEsc, 1)) {
                    zi = (uint32_t(u) << k) | ((w >> (u + 1)) & lowmask);
                    used = u + 1 + k;
                } else {
                    zi = (w >> kRiceEsc) & escmask;
                    used = kRiceEsc + W;
                }
                buf >>= used, nb -= used;
                zo[i + size_t(r)] = uint16_t(zi);
            }
        }
        if (i < m) {
            if (nb < 32) refill();
            const uint32_t w = uint32_t(buf);
            const unsigned u = unsigned(__builtin_ctz(~w | (1u << kRiceEsc)));
            uint32_t zi;
            unsigned used;
            if (u < kRiceEsc) {
                zi = (uint32_t(u) << k) | ((w >> (u + 1)) & lowmask);
                used = u + 1 + k;
            } else {
                zi = (w >> kRiceEsc) & escmask;
                used = kRiceEsc + W;
            }
            buf >>= used, nb -= used;
            zo[i] = uint16_t(zi);
        }
        if (uint64_t(pos) * 8 - nb > total_bits)
            return fail(SPECKV_ECORRUPT, "codec: Rice stream truncated in block %zu", b0 / kRiceBlock);
    }
    // Values, delta and range (§6.2: z <= 4Q and |s_i| <= Q).
    if (delta) {
        int32_t prev = 0;
        for (size_t i = 0; i < n; i++) {
            const uint32_t zi = z[i];
            const int32_t v = unzigzag(zi) + prev;
            bad |= uint32_t(zi > zmax) | uint32_t(v > Q) | uint32_t(v < -Q);
            s[i] = Sym(v);
            prev = v;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            const uint32_t zi = z[i];
            const int32_t v = unzigzag(zi);
            bad |= uint32_t(zi > zmax) | uint32_t(v > Q) | uint32_t(v < -Q);
            s[i] = Sym(v);
        }
    }
    if (bad) {
        // Cold path: the first offending symbol for the message.
        int32_t prev = 0;
        for (size_t i = 0; i < n; i++) {
            const int32_t v = unzigzag(z[i]) + (delta ? prev : 0);
            if (z[i] > zmax || v > Q || v < -Q)
                return fail(SPECKV_ECORRUPT, "codec: Rice symbol %zu out of range (z %u > 4Q = %u or value %d beyond +-%d)",
                            i, unsigned(z[i]), zmax, v, Q);
            prev = v;
        }
        return fail(SPECKV_ECORRUPT, "codec: Rice symbol out of range");
    }
    const uint64_t used = uint64_t(pos) * 8 - nb;
    if ((used + 7) / 8 != len)
        return fail(SPECKV_ECORRUPT, "codec: Rice stream has %zu trailing bytes", size_t(len - (used + 7) / 8));
    if (used & 7) {
        uint8_t last = p[len - 1];
        if (last >> (used & 7)) return fail(SPECKV_ECORRUPT, "codec: non-zero padding bits in Rice stream");
    }
    return SPECKV_OK;
}

}  // namespace

// The reference Rice stage of b <= 8 (codec_kernels.h): the definition every
// table's rice_encode8 / rice_decode8 must equal.
size_t rice_encode8_scalar(const int8_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap) {
    return rice_encode(s, n, delta, bits, dst, cap);
}
int rice_decode8_scalar(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int8_t *s) {
    return rice_decode(p, len, n, delta, bits, s);
}
size_t rice_encode16_scalar(const int16_t *s, size_t n, bool delta, unsigned bits, uint8_t *dst, size_t cap) {
    return rice_encode(s, n, delta, bits, dst, cap);
}
int rice_decode16_scalar(const uint8_t *p, size_t len, size_t n, bool delta, unsigned bits, int16_t *s) {
    return rice_decode(p, len, n, delta, bits, s);
}

}  // namespace speckv::codec
