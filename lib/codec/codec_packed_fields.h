// SPDX-License-Identifier: Apache-2.0
// Index tables of the b = 3 and b = 5 SIMD decoders of the packed presets
// (docs/codec.md §19.4, §19.10), shared by codec_packed_avx2.cc and
// codec_packed_avx512.cc; built at compile time. 16 values are 2b bytes and
// 32 values 4b bytes, both byte-aligned; each value's field lies in one byte
// or two adjacent ones. A PSHUFB (the same 16 source bytes in every 128-bit
// lane) puts those bytes in the value's lane, a per-lane shift brings the
// field to bit 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace speckv::codec::packed35 {

// 16 values -> dword i = value i, shifted down by sh[i] (then masked). Dword
// i reads source bytes shuf[4i], shuf[4i + 1] of its lane (0x80: zero).
// The AVX2 decoders use the two halves (values 0-7, 8-15) as two ymm.
template <unsigned B>
struct DwTab {
    alignas(64) uint8_t shuf[64];
    alignas(64) uint32_t sh[16];
};
template <unsigned B>
constexpr DwTab<B> make_dw() {
    DwTab<B> r{};
    for (unsigned i = 0; i < 16; i++) {
        const unsigned bit = B * i, m = bit / 8, s = bit % 8;
        r.shuf[4 * i] = uint8_t(m);
        r.shuf[4 * i + 1] = s + B > 8 ? uint8_t(m + 1) : uint8_t(0x80);
        r.shuf[4 * i + 2] = r.shuf[4 * i + 3] = 0x80;
        r.sh[i] = s;
    }
    return r;
}
template <unsigned B>
inline constexpr DwTab<B> kDw = make_dw<B>();

// 32 values -> word i = value i in its low B bits after a right shift by
// sh[i] (AVX-512 VPSRLVW; garbage above: VPERMW reads 5 index bits, so b = 3
// uses a table repeated 4 times). Lanes 0-1 read bytes 0-15 of the chunk;
// lanes 2-3 bytes 0-15 (b = 3) or 8-23 (b = 5).
template <unsigned B>
struct WTab {
    alignas(64) uint8_t shuf[64];
    alignas(64) uint16_t sh[32];
};
template <unsigned B>
constexpr WTab<B> make_w() {
    WTab<B> r{};
    for (unsigned i = 0; i < 32; i++) {
        const unsigned base = (B == 5 && i >= 16) ? 8 : 0, bit = B * i, m = bit / 8 - base, s = bit % 8;
        r.shuf[2 * i] = uint8_t(m);
        r.shuf[2 * i + 1] = s + B > 8 ? uint8_t(m + 1) : uint8_t(0x80);
        r.sh[i] = uint16_t(s);
    }
    return r;
}
template <unsigned B>
inline constexpr WTab<B> kW = make_w<B>();

// b = 3, AVX2 (no 16-bit variable shift): 32 values from bytes 0-11, word i
// (two ymm: values 0-15, 16-31) multiplied by mul[i] = 2^(13 - s) puts the
// field in bits 13-15 (the bits above it fall off), a shift right by 13
// leaves it alone.
struct W3Avx2 {
    alignas(64) uint8_t shuf[64];
    alignas(64) uint16_t mul[32];
};
constexpr W3Avx2 make_w3_avx2() {
    W3Avx2 r{};
    for (unsigned i = 0; i < 32; i++) {
        const unsigned bit = 3 * i, m = bit / 8, s = bit % 8;
        r.shuf[2 * i] = uint8_t(m);
        r.shuf[2 * i + 1] = s + 3 > 8 ? uint8_t(m + 1) : uint8_t(0x80);
        r.mul[i] = uint16_t(1u << (13 - s));
    }
    return r;
}
inline constexpr W3Avx2 kW3Avx2 = make_w3_avx2();

// Bytes from a chunk's start that its wide loads may touch, and the most they
// read past its end: 16 from 16 values (2b bytes: 10 or 6 past), 16 or 24
// from 32 values (4b bytes: 4 past).
template <unsigned B>
inline constexpr size_t kNeedW = B == 5 ? 24 : 16;
template <unsigned B>
inline constexpr size_t kOver = 16 - 2 * B;

// The chunk at p, or (near the end of the stream, where a wide load would
// read past it) a zero-padded copy in buf (32 bytes).
inline const uint8_t *safe_at(const uint8_t *p, const uint8_t *end, size_t need, uint8_t *buf) {
    if (__builtin_expect(size_t(end - p) >= need, 1)) return p;
    std::memset(buf, 0, 32);
    std::memcpy(buf, p, size_t(end - p));
    return buf;
}

// Calls f(kCheck, t0, t1) for the rows [0, T - R) with kCheck false (wide
// loads stay inside the stream) and [T - R, T) with kCheck true (loads that
// may reach past the stream's end are made safe): R rows of rb bytes hold the
// `over` bytes a load may read past the end of a row. The checks stay out of
// the loops of all but the last rows.
template <class F>
inline void split_rows(size_t T, size_t rb, size_t over, F &&f) {
    const size_t R = T < (over + rb - 1) / rb ? T : (over + rb - 1) / rb;
    if (T > R) f(std::false_type{}, size_t(0), T - R);
    f(std::true_type{}, T - R, T);
}

}  // namespace speckv::codec::packed35
