// SPDX-License-Identifier: Apache-2.0
// Page generators shared by the codec tests: random, edge-case and real K/V.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "codec/codec.h"
#include "speckv.h"

namespace codec_test {

using speckv::codec::Mode;

// The SIMD implementations this CPU can run.
inline std::vector<speckv::codec::Impl> simd_impls() {
    std::vector<speckv::codec::Impl> v;
    for (auto i : {speckv::codec::Impl::avx2, speckv::codec::Impl::avx512})
        if (speckv::codec::impl_available(i)) v.push_back(i);
    return v;
}

// Encodes with scalar and `impl`, decodes each with both; all must agree.
inline void cross_check(speckv::codec::Impl impl, Mode m, int dtype, const std::vector<uint8_t> &src, uint32_t C) {
    namespace c = speckv::codec;
    using c::Impl;
    std::vector<uint8_t> r0(c::max_record_size(src.size())), r1(r0.size());
    size_t l0 = 0, l1 = 0;
    REQUIRE(c::encode(m, dtype, src.data(), src.size(), {C}, r0.data(), r0.size(), &l0, Impl::scalar) == SPECKV_OK);
    REQUIRE(c::encode(m, dtype, src.data(), src.size(), {C}, r1.data(), r1.size(), &l1, impl) == SPECKV_OK);
    if (l0 != l1 || std::memcmp(r0.data(), r1.data(), l0) != 0) {
        INFO("impl " << c::impl_name(impl) << " mode " << c::mode_name(m) << " dtype " << dtype << " n "
                     << src.size() << " C " << C);
        REQUIRE(l0 == l1);
        REQUIRE(std::memcmp(r0.data(), r1.data(), l0) == 0);
    }
    std::vector<uint8_t> d0(src.size()), d1(src.size());
    size_t n0 = 0, n1 = 0;
    REQUIRE(c::decode(r0.data(), l0, d0.data(), d0.size(), &n0, Impl::scalar) == SPECKV_OK);
    REQUIRE(c::decode(r0.data(), l0, d1.data(), d1.size(), &n1, impl) == SPECKV_OK);
    REQUIRE(n0 == n1);
    if (d0 != d1) {
        INFO("decode differs: impl " << c::impl_name(impl) << " mode " << c::mode_name(m) << " dtype " << dtype);
        REQUIRE(d0 == d1);
    }
}

inline std::vector<uint8_t> to_bytes(const std::vector<float> &x, int dtype) {
    namespace c = speckv::codec;
    std::vector<uint8_t> b(x.size() * c::dtype_size(dtype));
    for (size_t i = 0; i < x.size(); i++) {
        if (dtype == SPECKV_DTYPE_FP32) {
            std::memcpy(&b[4 * i], &x[i], 4);
        } else {
            uint16_t h = dtype == SPECKV_DTYPE_FP16 ? c::fp32_to_fp16_rne(x[i]) : c::fp32_to_bf16_rne(x[i]);
            std::memcpy(&b[2 * i], &h, 2);
        }
    }
    return b;
}

inline float value_at(const uint8_t *b, int dtype, size_t i) {
    namespace c = speckv::codec;
    if (dtype == SPECKV_DTYPE_FP32) {
        float f;
        std::memcpy(&f, b + 4 * i, 4);
        return f;
    }
    uint16_t h;
    std::memcpy(&h, b + 2 * i, 2);
    return dtype == SPECKV_DTYPE_FP16 ? c::fp16_to_fp32(h) : c::bf16_to_fp32(h);
}

// A page of raw bit patterns of `dtype`, of one of several kinds, including
// the nasty ones: all-zero, subnormals, -0, maxima, NaN/Inf, tiny/huge, random bits.
inline std::vector<uint8_t> random_page(std::mt19937_64 &rng, int dtype, size_t n, int kind) {
    namespace c = speckv::codec;
    const size_t esz = c::dtype_size(dtype);
    std::vector<uint8_t> b(n * esz);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::uniform_int_distribution<uint32_t> u32;
    std::vector<float> x(n);
    float scale = std::ldexp(1.0f, int(u32(rng) % 24) - 12);
    switch (kind % 8) {
        case 0:  // gaussian
            for (auto &v : x) v = nd(rng) * scale;
            break;
        case 1:  // gaussian with outlier channels
            for (size_t i = 0; i < n; i++) x[i] = nd(rng) * scale * ((i % 32 == 3) ? 40.f : 1.f);
            break;
        case 2:  // smooth + runs (delta/RLE friendly)
            for (size_t i = 0; i < n; i++) x[i] = (i / 16 % 3 == 0) ? 0.f : std::sin(float(i) * 0.01f) * scale;
            break;
        case 3:  // all zero / -0
            for (size_t i = 0; i < n; i++) x[i] = (i & 1) ? -0.f : 0.f;
            break;
        default:
            break;
    }
    if (kind % 8 < 4) {
        b = to_bytes(x, dtype);
    } else {
        // raw bit patterns: random (may hold NaN/Inf), and edge sets
        for (size_t i = 0; i < n; i++) {
            uint32_t r = u32(rng);
            if (kind % 8 == 5) {  // finite random bits
                if (esz == 2) r = (r & 0xFFFF) % 0x7C00 | (r & 0x8000);
                if (dtype == SPECKV_DTYPE_BF16) r = ((r & 0x7FFF) % 0x7F80) | (r & 0x8000);
                if (esz == 4) r = (r & 0x7FFFFFFF) % 0x7F800000 | (r & 0x80000000);
            } else if (kind % 8 == 6) {  // small exponent window around a random centre
                uint32_t e = (esz == 4 || dtype == SPECKV_DTYPE_BF16) ? 20 + u32(rng) % 200 : 1 + u32(rng) % 29;
                if (esz == 4) r = (r & 0x807FFFFF) | (((e + r % 3) & 0xFF) << 23);
                else if (dtype == SPECKV_DTYPE_BF16) r = (r & 0x807F) | (((e + r % 3) & 0xFF) << 7);
                else r = (r & 0x83FF) | (((e + r % 3) % 31) << 10);
            } else if (kind % 8 == 7) {  // subnormals and zeros mixed with a few normals
                if (esz == 4) r = (r % 5 == 0) ? (r & 0x80FFFFFF) : (r & 0x807FFFFF);
                else if (dtype == SPECKV_DTYPE_BF16) r = (r % 5 == 0) ? (r & 0x80FF) : (r & 0x807F);
                else r = (r % 5 == 0) ? (r & 0x87FF) : (r & 0x83FF);
            }
            std::memcpy(&b[i * esz], &r, esz);
        }
    }
    return b;
}

}  // namespace codec_test
