// Hostile records for the decoder RTL: mutations of valid records (bit flips,
// header fields, stream bytes, truncation, extension, and Rice streams: k
// fields, long unary runs and escapes past 4Q, padding bits, one byte short
// or long), most with the CRC recomputed so that the checks behind the CRC are
// reached, plus random bytes.
#pragma once
#include <cstdint>
#include <vector>

#include "crc32c.h"
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

// A mutated copy of `rec` (a valid record).
inline std::vector<uint8_t> mutate(Gen &g, const std::vector<uint8_t> &rec) {
    std::vector<uint8_t> r = rec;
    bool fix = g.below(4) != 0;
    const bool rice = r.size() > 26 && ((r[7] >> 2) & 3) == 2;
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
