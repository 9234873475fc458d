// SPDX-License-Identifier: Apache-2.0
// The fixed-width packed presets (docs/codec.md §19): the worked example's
// bytes, the quantiser's bounds, the record sizes, SIMD == reference on random
// and edge-case pages, and the decoder's rejections.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "codec/codec.h"
#include "codec/codec_kernels.h"
#include "codec_test_util.h"
#include "util/crc32c.h"
#include "speckv.h"

namespace c = speckv::codec;
using c::Impl;
using c::Mode;

namespace {

const Mode kPacked[] = {Mode::k3p, Mode::v3p, Mode::k4p, Mode::v4p, Mode::k5p, Mode::v5p};

std::vector<uint8_t> enc(Mode m, int dtype, const std::vector<uint8_t> &src, uint32_t C, Impl impl = Impl::scalar) {
    std::vector<uint8_t> r(c::max_record_size(src.size()));
    size_t len = 0;
    REQUIRE(c::encode(m, dtype, src.data(), src.size(), {C}, r.data(), r.size(), &len, impl) == SPECKV_OK);
    r.resize(len);
    return r;
}

void recrc(std::vector<uint8_t> &r) {
    uint32_t crc = speckv::crc32c(0, r.data(), 20);
    crc = speckv::crc32c(crc, r.data() + c::kHeaderSize, r.size() - c::kHeaderSize);
    std::memcpy(r.data() + 20, &crc, 4);
}

int dec(const std::vector<uint8_t> &r, std::vector<uint8_t> *out, Impl impl = Impl::scalar) {
    size_t n = 0;
    return c::decode(r.data(), r.size(), out->data(), out->size(), &n, impl);
}

// A copy of a record that ends where an unreadable page begins: a decoder
// that reads past the record's last byte faults.
struct Guarded {
    uint8_t *map = nullptr, *rec = nullptr;
    size_t len = 0;
    explicit Guarded(const std::vector<uint8_t> &r) {
        const size_t pg = size_t(sysconf(_SC_PAGESIZE)), data = (r.size() + pg - 1) / pg * pg;
        len = data + pg;
        void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(m != MAP_FAILED);
        map = static_cast<uint8_t *>(m);
        REQUIRE(mprotect(map + data, pg, PROT_NONE) == 0);
        rec = map + data - r.size();
        std::memcpy(rec, r.data(), r.size());
    }
    ~Guarded() { munmap(map, len); }
    Guarded(const Guarded &) = delete;
    Guarded &operator=(const Guarded &) = delete;
};

}  // namespace

TEST_CASE("packed: directed FP16 rounding of the parameters (§19.2)") {
    CHECK(c::packed_f32_to_f16_dir(1.0f, true) == 0x3C00);
    CHECK(c::packed_f32_to_f16_dir(1.0f + std::ldexp(1.0f, -12), true) == 0x3C01);
    CHECK(c::packed_f32_to_f16_dir(1.0f + std::ldexp(1.0f, -12), false) == 0x3C00);
    CHECK(c::packed_f32_to_f16_dir(-1.0f - std::ldexp(1.0f, -12), false) == 0xBC01);
    CHECK(c::packed_f32_to_f16_dir(-1.0f - std::ldexp(1.0f, -12), true) == 0xBC00);
    CHECK(c::packed_f32_to_f16_dir(std::ldexp(1.0f, -30), true) == 0x0001);   // up to the least subnormal
    CHECK(c::packed_f32_to_f16_dir(std::ldexp(1.0f, -30), false) == 0x0000);
    CHECK(c::packed_f32_to_f16_dir(-std::ldexp(1.0f, -30), false) == 0x8001);
    CHECK(c::packed_f32_to_f16_dir(std::ldexp(3.0f, -24), true) == 0x0003);    // exact subnormal
    CHECK(c::packed_f32_to_f16_dir(65504.0f, true) == 0x7BFF);
    // Parameters: z <= min, z + (2^b - 1) s >= max, canonical zeros.
    uint16_t s16, z16;
    float sf, zf, inv;
    c::packed_params(-0.0f, -0.0f, 4, &s16, &z16, &sf, &zf, &inv);
    CHECK(s16 == 0);
    CHECK(z16 == 0);
    CHECK(inv == 0.0f);
    c::packed_params(-1.3f, 2.7f, 4, &s16, &z16, &sf, &zf, &inv);
    CHECK(zf <= -1.3f);
    CHECK(std::fma(15.0f, sf, zf) >= 2.7f);
}

TEST_CASE("packed: worked example (§19.6)") {
    // FP16 [1.0, -0.5, 0.25, 3.0], v4p, C = 4: one token group.
    const uint16_t h[4] = {0x3C00, 0xB800, 0x3400, 0x4200};
    std::vector<uint8_t> src(8);
    std::memcpy(src.data(), h, 8);
    auto r = enc(Mode::v4p, SPECKV_DTYPE_FP16, src, 4);
    // z = -0.5 (B800); d = 3.5; s = 3.5 / 15 = 0.2333.. -> FP16 up 0x3378 (0.23339844)
    const uint8_t want_payload[] = {0x78, 0x33, 0x00, 0xB8, 0x06, 0xF3};
    REQUIRE(r.size() == c::kHeaderSize + sizeof want_payload);
    CHECK(r[3] == uint8_t(Mode::v4p));
    CHECK(r[5] == 4);
    CHECK(r[6] == c::kGroupToken);
    CHECK(r[7] == 0x10);  // flags: entropy 4 in bits 2-4
    CHECK(std::memcmp(r.data() + c::kHeaderSize, want_payload, sizeof want_payload) == 0);
    std::vector<uint8_t> out(8);
    REQUIRE(dec(r, &out) == SPECKV_OK);
    uint16_t o[4];
    std::memcpy(o, out.data(), 8);
    // q = 6, 0, 3, 15: -0.5 + q * 0.23339844 -> FP16 RNE
    CHECK(o[0] == c::fp32_to_fp16_rne(std::fma(6.0f, c::fp16_to_fp32(0x3378), -0.5f)));
    CHECK(o[1] == 0xB800);
    CHECK(o[3] == c::fp32_to_fp16_rne(std::fma(15.0f, c::fp16_to_fp32(0x3378), -0.5f)));
}

TEST_CASE("packed: record sizes, error bound, bypass") {
    std::mt19937_64 rng(5);
    std::normal_distribution<float> nd(0.f, 1.f);
    const size_t T = 64, C = 32, n = T * C;
    std::vector<float> x(n);
    for (auto &v : x) v = nd(rng);
    auto src = codec_test::to_bytes(x, SPECKV_DTYPE_FP32);
    for (Mode m : kPacked) {
        const auto P = c::mode_params(m);
        auto r = enc(m, SPECKV_DTYPE_FP32, src, uint32_t(C));
        const size_t G = P.group == c::kGroupChannel ? C : T;
        CHECK(r.size() == c::kHeaderSize + 4 * G + n * P.bits / 8);
        std::vector<uint8_t> out(src.size());
        REQUIRE(dec(r, &out) == SPECKV_OK);
        // |x' - x| <= s / 2 (+ rounding slack) per group, s from the record.
        for (size_t i = 0; i < n; i++) {
            const size_t g = P.group == c::kGroupChannel ? i % C : i / C;
            uint16_t s16;
            std::memcpy(&s16, r.data() + c::kHeaderSize + 4 * g, 2);
            const float s = c::fp16_to_fp32(s16);
            CHECK(std::fabs(codec_test::value_at(out.data(), SPECKV_DTYPE_FP32, i) - x[i]) <= 0.5f * s * 1.001f + 1e-6f);
        }
    }
    // FP16 pages of 64 x 32: the ratios of docs §19.
    auto h = codec_test::to_bytes(x, SPECKV_DTYPE_FP16);
    CHECK(enc(Mode::k4p, SPECKV_DTYPE_FP16, h, 32).size() == 24 + 128 + 1024);
    CHECK(enc(Mode::v4p, SPECKV_DTYPE_FP16, h, 32).size() == 24 + 256 + 1024);
    CHECK(enc(Mode::k3p, SPECKV_DTYPE_FP16, h, 32).size() == 24 + 128 + 768);
    // Bypass: Inf, |x| > 65504 in FP32, and pages too small to gain.
    auto big = x;
    big[7] = 70000.f;
    CHECK(enc(Mode::k4p, SPECKV_DTYPE_FP32, codec_test::to_bytes(big, SPECKV_DTYPE_FP32), 32)[3] == 0);
    big[7] = INFINITY;
    CHECK(enc(Mode::v4p, SPECKV_DTYPE_FP32, codec_test::to_bytes(big, SPECKV_DTYPE_FP32), 32)[3] == 0);
    std::vector<uint8_t> one(2, 0x3C);
    CHECK(enc(Mode::k4p, SPECKV_DTYPE_FP16, one, 1)[3] == 0);
}

TEST_CASE("packed: every b 3..8 and group through encode_params; SIMD == scalar") {
    std::mt19937_64 rng(23);
    const int dtypes[] = {SPECKV_DTYPE_FP16, SPECKV_DTYPE_BF16, SPECKV_DTYPE_FP32};
    const size_t sizes[] = {2048, 1024, 4096, 1, 7, 17, 100, 777, 48};
    const uint32_t chans[] = {32, 64, 16, 128, 8, 7, 1, 24, 48};
    auto impls = codec_test::simd_impls();
    for (int p = 0; p < 3000; p++) {
        const int dt = dtypes[rng() % 3];
        const size_t n = sizes[rng() % 9];
        const uint32_t C = chans[rng() % 9];
        auto src = codec_test::random_page(rng, dt, n, int(rng() % 8));
        if (p % 2) {
            const Mode m = kPacked[rng() % 6];
            for (Impl i : impls) codec_test::cross_check(i, m, dt, src, C);
            continue;
        }
        const c::Params P{uint8_t(3 + rng() % 6), uint8_t(rng() % 3), c::kOrderNone, c::kEntropyPacked};
        std::vector<uint8_t> r0(c::max_record_size(src.size())), r1(r0.size()), d0(src.size()), d1(src.size());
        size_t l0 = 0, l1 = 0, o0 = 0, o1 = 0;
        REQUIRE(c::encode_params(Mode::k4p, P, dt, src.data(), src.size(), {C}, r0.data(), r0.size(), &l0,
                                 Impl::scalar) == SPECKV_OK);
        REQUIRE(c::decode(r0.data(), l0, d0.data(), d0.size(), &o0, Impl::scalar) == SPECKV_OK);
        for (Impl i : impls) {
            INFO("impl " << c::impl_name(i) << " b " << int(P.bits) << " group " << int(P.group) << " dtype " << dt
                         << " n " << n << " C " << C);
            REQUIRE(c::encode_params(Mode::k4p, P, dt, src.data(), src.size(), {C}, r1.data(), r1.size(), &l1, i) ==
                    SPECKV_OK);
            REQUIRE(l1 == l0);
            REQUIRE(std::memcmp(r0.data(), r1.data(), l0) == 0);
            REQUIRE(c::decode(r0.data(), l0, d1.data(), d1.size(), &o1, i) == SPECKV_OK);
            REQUIRE(d1 == d0);
        }
    }
    // Parameters the format does not allow: order != none, b > 8.
    std::vector<uint8_t> s(64, 0x11), r(c::max_record_size(64));
    size_t len;
    CHECK(c::encode_params(Mode::k4p, {4, 1, c::kOrderLinear, c::kEntropyPacked}, SPECKV_DTYPE_FP16, s.data(), 64, {8},
                           r.data(), r.size(), &len) == SPECKV_EINVAL);
    CHECK(c::encode_params(Mode::k4p, {9, 1, 0, c::kEntropyPacked}, SPECKV_DTYPE_FP16, s.data(), 64, {8}, r.data(),
                           r.size(), &len) == SPECKV_EINVAL);
}

// b = 3, 4 and 5 have their own SIMD decoders (a per-row lookup table for
// token and page groups, a walk down the columns for channel groups, fields
// by shuffles and shifts, the stream's last bytes through a padded copy):
// every group, dtype and a few widths, with pages that need the FP16
// saturation and pages that don't.
TEST_CASE("packed: b = 3, 4, 5 table and column decoders, every group and dtype; SIMD == scalar") {
    std::mt19937_64 rng(4);
    std::uniform_real_distribution<float> full(-65504.0f, 65504.0f);
    std::normal_distribution<float> nd(0.f, 1.f);
    const int dtypes[] = {SPECKV_DTYPE_FP16, SPECKV_DTYPE_BF16, SPECKV_DTYPE_FP32};
    auto impls = codec_test::simd_impls();
    for (uint8_t b : {uint8_t(3), uint8_t(4), uint8_t(5)})
    for (uint32_t C : {16u, 32u, 48u, 64u, 96u, 128u})
        for (size_t T : {size_t(1), size_t(2), size_t(8), size_t(33), size_t(64)})
            for (int dt : dtypes)
                for (uint8_t g = 0; g < 3; g++)
                    for (int kind = 0; kind < 3; kind++) {
                        std::vector<float> x(C * T);
                        for (auto &v : x) v = kind == 0 ? nd(rng) : kind == 1 ? full(rng) : nd(rng) * 3e-5f;
                        const auto src = codec_test::to_bytes(x, dt);
                        const c::Params P{b, g, c::kOrderNone, c::kEntropyPacked};
                        std::vector<uint8_t> r(c::max_record_size(src.size())), d0(src.size()), d1(src.size());
                        size_t l = 0, o = 0;
                        REQUIRE(c::encode_params(Mode::k4p, P, dt, src.data(), src.size(), {C}, r.data(), r.size(),
                                                 &l, Impl::scalar) == SPECKV_OK);
                        REQUIRE(c::decode(r.data(), l, d0.data(), d0.size(), &o, Impl::scalar) == SPECKV_OK);
                        r.resize(l);
                        const Guarded gr(r);  // the record's last byte is the last readable one
                        for (Impl i : impls) {
                            INFO("impl " << c::impl_name(i) << " b " << int(b) << " C " << C << " T " << T << " dtype "
                                         << dt << " group " << int(g) << " kind " << kind);
                            REQUIRE(c::decode(gr.rec, l, d1.data(), d1.size(), &o, i) == SPECKV_OK);
                            REQUIRE(d1 == d0);
                        }
                    }
}

// FP16 pages with C a multiple of 16 take the SIMD tables' one-piece encoder
// (min/max on the FP16 bits, no FP32 copy, b = 4 packed 64 values a step):
// edge cases per group, for every b and group, against the reference's
// bytes (records equal, raw pages included); BF16 and FP32 pages of the same
// values go through the general kernels and must agree as well.
TEST_CASE("packed: FP16 encoder over edge-case groups, every b, group and dtype; SIMD == scalar") {
    std::mt19937_64 rng(1603);
    std::normal_distribution<float> nd(0.f, 1.f);
    auto impls = codec_test::simd_impls();
    // Special FP16 bit patterns: ±0, smallest/largest subnormal, smallest normal,
    // ±65504, ±Inf, NaNs of both signs.
    const uint16_t special[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8400, 0x7BFF, 0xFBFF,
                                0x3C00, 0xBC00, 0x7BFE, 0xFBFE, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFFFF};
    size_t raw_pages = 0, coded_pages = 0;
    for (uint32_t C : {16u, 32u, 48u, 64u, 96u, 128u})
        for (size_t T : {size_t(1), size_t(3), size_t(8), size_t(33), size_t(64)})
            for (int kind = 0; kind < 12; kind++) {
                std::vector<uint16_t> h(C * T);
                const float sc = std::ldexp(1.0f, int(rng() % 30) - 15);
                for (size_t i = 0; i < h.size(); i++) {
                    const size_t t = i / C, ch = i % C;
                    float v = nd(rng) * sc;
                    switch (kind) {
                        case 0: break;                                             // gaussian
                        case 1: v = std::fabs(v) + 1.0f; break;                    // all positive
                        case 2: v = -std::fabs(v) - 1.0f; break;                   // all negative
                        case 3: v = (t % 2) ? 3.0f : v; break;                     // equal rows
                        case 4: v = (ch % 3) ? -2.5f : v; break;                   // equal channels
                        case 5: v = (i % 2) ? 65504.0f : -65504.0f; break;         // the FP16 extremes
                        case 6: v = (ch % 5 == 0) ? 65504.0f : v * 1e4f; break;    // saturating groups
                        case 7: v = (i % 3 == 0) ? -0.0f : (i % 3 == 1 ? 0.0f : v * 1e-7f); break;  // zeros, subnormals
                        default: break;
                    }
                    h[i] = c::fp32_to_fp16_rne(v);
                    if (kind == 7 && (t + ch) % 7 == 0) h[i] = 0x8000;  // groups of -0 and +0 only
                    if (kind == 8) h[i] = special[rng() % 14];           // finite specials only
                    if (kind == 9) h[i] = uint16_t(rng());               // random bits (NaN/Inf likely)
                    if (kind == 10 && i == (rng() % h.size())) h[i] = special[14 + rng() % 6];  // a rare non-finite
                    if (kind == 11) h[i] = uint16_t(0x8000 | (rng() % 0x7C00));  // all negative bits, any magnitude
                }
                if (kind == 10) h[rng() % h.size()] = special[14 + rng() % 6];  // at least one
                std::vector<float> x(h.size());
                for (size_t i = 0; i < h.size(); i++) x[i] = c::fp16_to_fp32(h[i]);
                for (uint8_t b = 3; b <= 8; b++)
                    for (uint8_t g = 0; g < 3; g++)
                        for (int dt : {SPECKV_DTYPE_FP16, SPECKV_DTYPE_BF16, SPECKV_DTYPE_FP32}) {
                            if (dt != SPECKV_DTYPE_FP16 && (b % 2 == 0 || kind >= 8)) continue;  // keep it short
                            std::vector<uint8_t> src(h.size() * 2);
                            if (dt == SPECKV_DTYPE_FP16)
                                std::memcpy(src.data(), h.data(), src.size());
                            else
                                src = codec_test::to_bytes(x, dt);
                            const c::Params P{b, g, c::kOrderNone, c::kEntropyPacked};
                            std::vector<uint8_t> r0(c::max_record_size(src.size())), r1(r0.size());
                            size_t l0 = 0, l1 = 0;
                            REQUIRE(c::encode_params(Mode::k4p, P, dt, src.data(), src.size(), {C}, r0.data(),
                                                     r0.size(), &l0, Impl::scalar) == SPECKV_OK);
                            (l0 == src.size() + c::kHeaderSize ? raw_pages : coded_pages)++;
                            for (Impl i : impls) {
                                INFO("impl " << c::impl_name(i) << " C " << C << " T " << T << " kind " << kind
                                             << " b " << int(b) << " group " << int(g) << " dtype " << dt);
                                REQUIRE(c::encode_params(Mode::k4p, P, dt, src.data(), src.size(), {C}, r1.data(),
                                                         r1.size(), &l1, i) == SPECKV_OK);
                                REQUIRE(l1 == l0);
                                REQUIRE(std::memcmp(r0.data(), r1.data(), l0) == 0);
                            }
                        }
            }
    // Both outcomes were exercised: raw pages (non-finite values, or records not
    // shorter than raw) and coded ones.
    CHECK(raw_pages > 100);
    CHECK(coded_pages > 1000);
}

TEST_CASE("packed: the decoder rejects bad records, never crashes") {
    std::mt19937_64 rng(9);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x(2048);
    for (auto &v : x) v = nd(rng);
    auto src = codec_test::to_bytes(x, SPECKV_DTYPE_FP16);
    std::vector<uint8_t> out(src.size());
    for (Mode m : kPacked) {
        auto r = enc(m, SPECKV_DTYPE_FP16, src, 32);
        REQUIRE(r[3] == uint8_t(m));
        auto bad = r;
        bad[7] |= 0x20;  // flags bit 5
        recrc(bad);
        CHECK(dec(bad, &out) == SPECKV_ECORRUPT);
        bad = r;
        bad[7] |= 0x01;  // packed with a scan order
        recrc(bad);
        CHECK(dec(bad, &out) == SPECKV_ECORRUPT);
        bad = r;
        bad[7] = 0x14;  // entropy 5
        recrc(bad);
        CHECK(dec(bad, &out) == SPECKV_ECORRUPT);
        bad = r;
        bad[c::kHeaderSize + 1] |= 0x80;  // negative scale
        recrc(bad);
        CHECK(dec(bad, &out) == SPECKV_ECORRUPT);
        bad = r;
        bad[c::kHeaderSize + 3] = 0x7C;  // zero point Inf
        recrc(bad);
        CHECK(dec(bad, &out) == SPECKV_ECORRUPT);
        bad = r;  // one byte short (header says so too)
        bad.pop_back();
        const uint32_t pl = uint32_t(bad.size() - c::kHeaderSize);
        std::memcpy(bad.data() + 16, &pl, 4);
        recrc(bad);
        CHECK(dec(bad, &out) == SPECKV_ECORRUPT);
        // Random byte flips: an error or (CRC collision aside) never a crash.
        for (int k = 0; k < 200; k++) {
            bad = r;
            bad[rng() % bad.size()] ^= uint8_t(1 + rng() % 255);
            if (k % 2) recrc(bad);
            for (Impl i : {Impl::scalar, Impl::best}) {
                size_t n = 0;
                int rc = c::decode(bad.data(), bad.size(), out.data(), out.size(), &n, i);
                CHECK((rc == SPECKV_OK || rc == SPECKV_ECORRUPT || rc == SPECKV_ERANGE));
            }
        }
    }
    // Non-zero padding bits: 7 values of 3 bits = 21 bits, 3 padding bits.
    std::vector<uint8_t> s7 = codec_test::to_bytes({0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f}, SPECKV_DTYPE_FP16);
    auto r = enc(Mode::v3p, SPECKV_DTYPE_FP16, s7, 7);
    REQUIRE(r[3] == uint8_t(Mode::v3p));
    std::vector<uint8_t> o7(14);
    CHECK(dec(r, &o7) == SPECKV_OK);
    r.back() |= 0x80;
    recrc(r);
    CHECK(dec(r, &o7) == SPECKV_ECORRUPT);
}
