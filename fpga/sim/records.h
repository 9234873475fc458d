// SPDX-License-Identifier: Apache-2.0
// Hostile records for the decoder RTL: mutations of valid records (bit flips,
// header fields, stream bytes, truncation, extension, and Rice streams: k
// fields, long unary runs and escapes past 4Q, padding bits, one byte short
// or long; split-Rice streams: every section's bits and padding, and streams
// re-written with other k, b, order, escapes of values < 15 and zero runs of
// any length before an escape's one-bit), most with the CRC recomputed so
// that the checks behind the CRC are reached, plus random bytes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "util/crc32c.h"
#include "pages.h"

namespace fpga_sim {

inline void fix_crc(std::vector<uint8_t> &r) {
    if (r.size() < 24) return;
    uint32_t c = speckv::crc32c(0, r.data(), 20);
    c = speckv::crc32c(c, r.data() + 24, r.size() - 24);
    for (int i = 0; i < 4; i++) r[20 + i] = uint8_t(c >> (8 * i));
}

inline void put32le(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = uint8_t(v >> (8 * i));
}

inline uint32_t get32le(const uint8_t *p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t(p[3]) << 24); }

// ------------------------------------------------ split Rice (docs/codec.md §18), page scale

// The symbols of a split-Rice record: k per block, z per symbol, and where
// the sections are (stream offsets: Low, Unary, Escape, end).
struct SplitSyms {
    unsigned b = 0;
    std::vector<unsigned> k;
    std::vector<uint32_t> z;
    size_t lo = 0, un = 0, es = 0, end = 0;
    uint32_t maxrun = 0;  // longest run of zero-bits before a one-bit in Unary
};

// Parses the stream of a record with one scale as §18 says; false if it is
// not well formed (the mutator then falls back to a bit flip).
inline bool split_parse(const std::vector<uint8_t> &r, SplitSyms *o) {
    if (r.size() < 27 || ((r[7] >> 2) & 3) != 3 || r[6] != 0 || r[5] < 3 || r[5] > 12) return false;
    const uint32_t n = get32le(&r[8]);
    if (n == 0 || n > (1u << 16) || r.size() != 24 + size_t(get32le(&r[16]))) return false;
    const uint8_t *s = r.data() + 26;
    const size_t slen = r.size() - 26, nb = (n + 63) / 64, nk = (nb + 1) / 2;
    if (slen < nk) return false;
    o->b = r[5];
    o->k.assign(nb, 0);
    uint64_t lowbits = 0;
    for (size_t j = 0; j < nb; j++) {
        o->k[j] = (s[j / 2] >> (4 * (j % 2))) & 15;
        if (o->k[j] >= 8) return false;
        lowbits += o->k[j] * std::min<uint64_t>(64, n - 64 * j);
    }
    o->lo = nk;
    o->un = nk + size_t((lowbits + 7) / 8);
    if (o->un > slen) return false;
    auto bit = [&](uint64_t p) { return (s[p / 8] >> (p % 8)) & 1; };
    uint64_t lp = uint64_t(o->lo) * 8, up = uint64_t(o->un) * 8, ep = 0;
    std::vector<uint32_t> v(n);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t c = 0;
        while (up < slen * 8 && !bit(up)) c++, up++;
        if (up >= slen * 8) return false;
        up++;
        v[i] = c;
        o->maxrun = std::max(o->maxrun, c);
    }
    o->es = size_t((up + 7) / 8);
    ep = uint64_t(o->es) * 8;
    const unsigned W = o->b + 1;
    o->z.assign(n, 0);
    for (uint32_t i = 0; i < n; i++) {
        const unsigned k = o->k[i / 64];
        uint32_t low = 0, hi = v[i];
        for (unsigned t = 0; t < k; t++, lp++) low |= uint32_t(bit(lp)) << t;
        if (v[i] >= 15) {
            hi = 0;
            for (unsigned t = 0; t + k < W; t++, ep++) {
                if (ep >= slen * 8) return false;
                hi |= uint32_t(bit(ep)) << t;
            }
        }
        o->z[i] = (hi << k) | low;
    }
    o->end = size_t((ep + 7) / 8);
    return o->end == slen;
}

// A split-Rice stream of s.k and s.z: symbol i is written as an escape when
// its z >> k >= 15 or force[i] (an escape field of z >> k in W - k bits, none
// when k >= W, masked to the field), with extra[i] more zero-bits before its
// one-bit (a run past the 15 of a valid stream).
inline std::vector<uint8_t> split_write(const SplitSyms &s, const std::vector<uint8_t> &force,
                                        const std::vector<uint32_t> &extra) {
    struct BitW {
        std::vector<uint8_t> b;
        uint64_t n = 0;
        void put(uint64_t v, unsigned len) {
            for (unsigned i = 0; i < len; i++, n++) {
                if (n % 8 == 0) b.push_back(0);
                if ((v >> i) & 1) b.back() |= uint8_t(1u << (n % 8));
            }
        }
        void zeros(uint64_t len) {
            for (uint64_t i = 0; i < len; i++, n++)
                if (n % 8 == 0) b.push_back(0);
        }
    } K, L, U, E;
    const unsigned W = s.b + 1;
    for (unsigned k : s.k) K.put(k, 4);
    for (size_t i = 0; i < s.z.size(); i++) {
        const unsigned k = s.k[i / 64];
        const uint32_t u = s.z[i] >> k;
        L.put(s.z[i] & ((1u << k) - 1), k);
        if (u >= 15 || force[i]) {
            U.zeros(15 + extra[i]);
            U.put(1, 1);
            if (W > k) E.put(u & ((1u << (W - k)) - 1), W - k);
        } else {
            U.put(uint64_t(1) << u, u + 1);
        }
    }
    std::vector<uint8_t> out = K.b;
    for (auto *x : {&L, &U, &E}) out.insert(out.end(), x->b.begin(), x->b.end());
    return out;
}

// Puts `stream` after the record's scale field; payload length and CRC fixed up.
inline void split_replace(std::vector<uint8_t> &r, const std::vector<uint8_t> &stream) {
    r.resize(26);
    r.insert(r.end(), stream.begin(), stream.end());
    put32le(&r[16], uint32_t(r.size() - 24));
    fix_crc(r);
}

// A split-Rice record changed where the decoder's section checks look; CRC fixed.
inline std::vector<uint8_t> mutate_split(Gen &g, const std::vector<uint8_t> &rec) {
    std::vector<uint8_t> r = rec;
    SplitSyms s;
    const size_t sl = r.size() - 26;
    if (!split_parse(r, &s)) {
        r[26 + g.below(uint32_t(sl))] ^= uint8_t(1u << g.below(8));
        fix_crc(r);
        return r;
    }
    const size_t n = s.z.size();
    auto flip_in = [&](size_t a, size_t b) {  // one bit of stream bytes [a, b)
        if (b > a) r[26 + a + g.below(uint32_t(b - a))] ^= uint8_t(1u << g.below(8));
    };
    std::vector<uint8_t> force(n, 0);
    std::vector<uint32_t> extra(n, 0);
    switch (g.below(13)) {
        case 0: flip_in(0, sl); break;                                            // any bit
        case 1: r[26 + g.below(uint32_t(s.lo))] ^= uint8_t(1u << g.below(8)); break;  // a K field, or its padding
        case 2: flip_in(s.lo, s.un); break;                                       // Low bits / padding
        case 3: flip_in(s.un, s.es); break;                                       // Unary: a one-bit more or less
        case 4: flip_in(s.es, s.end); break;                                      // Escape bits / padding
        case 5: r.back() |= uint8_t(0x80u >> g.below(3)); break;                  // padding of the last section
        case 6: {                                                                 // zeros over Unary bytes
            size_t a = s.un + g.below(uint32_t(s.es - s.un)), m = 1 + g.below(40);
            for (size_t i = a; i < s.es && i < a + m; i++) r[26 + i] = 0;
            break;
        }
        case 7: {  // escapes of any value (also < 15), with zero runs past 15 (some very long)
            for (uint32_t t = 0, m = 1 + g.below(8); t < m; t++) {
                size_t i = g.below(uint32_t(n));
                force[i] = 1;
                extra[i] = g.below(4) == 0 ? 0 : g.below(3) == 0 ? 200 + g.below(3000) : g.below(40);
            }
            split_replace(r, split_write(s, force, extra));
            break;
        }
        case 8: {  // other k for some blocks (not the encoder's argmin: still valid)
            for (uint32_t t = 0, m = 1 + g.below(3); t < m; t++) s.k[g.below(uint32_t(s.k.size()))] = g.below(8);
            split_replace(r, split_write(s, force, extra));
            break;
        }
        case 9: {  // other b (3..8): W and Q change, z kept
            s.b = 3 + g.below(6);
            r[5] = uint8_t(s.b);
            if (g.below(2))
                for (uint32_t t = 0, m = 1 + g.below(4); t < m; t++) force[g.below(uint32_t(n))] = 1;
            split_replace(r, split_write(s, force, extra));
            break;
        }
        case 10: r[7] ^= 1; break;                                                // order none <-> linear
        case 11: {  // escapes with runs of 60..450 zero-bits among a few neighbours: the symbols of
                    // one decoder beat need more bits than its Unary view holds, each one-bit still in it
            size_t i0 = g.below(uint32_t(n));
            for (uint32_t t = 0, m = 2 + g.below(6); t < m; t++) {
                size_t i = std::min(n - 1, i0 + g.below(24));
                force[i] = 1;
                extra[i] = 60 + g.below(390);
            }
            split_replace(r, split_write(s, force, extra));
            break;
        }
        default:                                                                  // a byte short / more
            if (g.below(2)) r.pop_back();
            else r.push_back(g.below(2) ? 0 : uint8_t(g.u32()));
            put32le(&r[16], uint32_t(r.size() - 24));
            break;
    }
    fix_crc(r);
    return r;
}

// A mutated copy of `rec` (a valid record).
inline std::vector<uint8_t> mutate(Gen &g, const std::vector<uint8_t> &rec) {
    std::vector<uint8_t> r = rec;
    bool fix = g.below(4) != 0;
    const bool rice = r.size() > 26 && ((r[7] >> 2) & 3) == 2;
    const bool split = r.size() > 26 && ((r[7] >> 2) & 3) == 3;
    if (split && g.below(3) != 0) return mutate_split(g, r);
    switch (g.below(rice ? 11 : 9)) {
        case 0:  // bit flips anywhere
            for (uint32_t k = 0, m = 1 + g.below(3); k < m; k++) r[g.below(uint32_t(r.size()))] ^= uint8_t(1u << g.below(8));
            break;
        case 1: {  // one header field set to an edge or random value
            static const uint8_t offs[] = {0, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 16, 17, 19};
            uint8_t o = offs[g.below(sizeof offs)];
            static const uint8_t vals[] = {0, 1, 2, 3, 4, 7, 8, 9, 11, 12, 13, 14, 15, 0x10, 0x7F, 0x80, 0xFF};
            r[o] = g.below(2) ? vals[g.below(sizeof vals)] : uint8_t(g.u32());
            break;
        }
        case 2:  // stream bytes (after the scale) changed: RLE control bytes, values
            if (r.size() > 26)
                for (uint32_t k = 0, m = 1 + g.below(4); k < m; k++) r[26 + g.below(uint32_t(r.size() - 26))] = uint8_t(g.u32());
            break;
        case 3: {  // truncated, payload length kept (or fixed up)
            size_t cut = 1 + g.below(uint32_t(std::min<size_t>(r.size() - 1, 200)));
            r.resize(r.size() - cut);
            if (fix && g.below(2) && r.size() >= 24) put32le(&r[16], uint32_t(r.size() - 24));
            break;
        }
        case 4: {  // extended by junk, payload length kept (or fixed up)
            for (uint32_t k = 0, m = 1 + g.below(100); k < m; k++) r.push_back(uint8_t(g.u32()));
            if (fix && g.below(2)) put32le(&r[16], uint32_t(r.size() - 24));
            break;
        }
        case 5:  // scale field
            if (r.size() >= 26) {
                r[24] = uint8_t(g.u32());
                r[25] = uint8_t(g.u32());
            }
            break;
        case 6: {  // element count / channels changed consistently-looking
            uint32_t n = g.below(3) == 0 ? (1u << 24) + g.below(3) - 1 : 1 + g.below(5000);
            put32le(&r[8], n);
            if (g.below(2)) { r[12] = uint8_t(g.below(9)); r[13] = 0; }
            break;
        }
        case 7:  // quantiser bits / flags / group shuffled
            r[5] = uint8_t(g.below(14));
            r[6] = uint8_t(g.below(4));
            r[7] = uint8_t(g.below(16) | (g.below(8) == 0 ? 0x10 : 0));
            break;
        case 8:  // a short record
            r.resize(g.below(30));
            break;
        default: {  // Rice stream (§6.2), CRC always fixed: the stream checks must catch it
            size_t s0 = 26, sl = r.size() - s0;
            switch (g.below(6)) {
                case 0:  // one bit of the stream
                    r[s0 + g.below(uint32_t(sl))] ^= uint8_t(1u << g.below(8));
                    break;
                case 1:  // the first block's k field (bits 0..2 of the stream)
                    r[s0] ^= uint8_t(1 + g.below(7));
                    break;
                case 2:  // padding bits of the last byte set
                    r.back() |= uint8_t(0x80u >> g.below(4));
                    break;
                case 3:  // one byte short, payload length fixed up
                    r.pop_back();
                    put32le(&r[16], uint32_t(r.size() - 24));
                    break;
                case 4:  // one zero byte more, payload length fixed up
                    r.push_back(g.below(2) ? 0 : uint8_t(g.u32()));
                    put32le(&r[16], uint32_t(r.size() - 24));
                    break;
                default: {  // a run of one-bits: 15-bit unary escapes, z = 2^W - 1 > 4Q
                    size_t at = s0 + g.below(uint32_t(sl)), m = 1 + g.below(12);
                    for (size_t i = at; i < r.size() && i < at + m; i++) r[i] = 0xFF;
                    break;
                }
            }
            fix_crc(r);
            return r;
        }
    }
    if (fix) fix_crc(r);
    return r;
}

inline std::vector<uint8_t> random_record(Gen &g) {
    std::vector<uint8_t> r(1 + g.below(300));
    for (auto &b : r) b = uint8_t(g.u32());
    if (r.size() >= 24 && g.below(2)) {
        r[0] = 0x53, r[1] = 0x4B, r[2] = 1;
        fix_crc(r);
    }
    return r;
}

}  // namespace fpga_sim
