// SPDX-License-Identifier: Apache-2.0
// CRC32C: every dispatch path (table, SSE4.2 crc32q, PCLMULQDQ and VPCLMULQDQ
// folding) against a bitwise reference written here, over all alignments
// 0..63, every length 0..1100, random lengths up to 70,000, random initial
// values and chained calls.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "util/crc32c.h"

namespace {

using speckv::Crc32cPath;

// Bit at a time, straight from the definition (reflected 0x82F63B78, init and
// final xor ~0), so it shares nothing with lib/crc32c.cc.
uint32_t ref_step(uint32_t reg, uint8_t b) {
    reg ^= b;
    for (int k = 0; k < 8; k++) reg = (reg >> 1) ^ (0x82F63B78u & (0u - (reg & 1u)));
    return reg;
}
uint32_t ref_crc(uint32_t crc, const uint8_t *p, size_t n) {
    uint32_t reg = ~crc;
    for (size_t i = 0; i < n; i++) reg = ref_step(reg, p[i]);
    return ~reg;
}

std::vector<Crc32cPath> paths() {
    std::vector<Crc32cPath> v;
    for (int i = 0; i < speckv::kCrc32cPathCount; i++)
        if (speckv::crc32c_path_available(static_cast<Crc32cPath>(i))) v.push_back(static_cast<Crc32cPath>(i));
    return v;
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto &b : v) b = static_cast<uint8_t>(rng());
    return v;
}

// Restores the dispatch after a test forced a path.
struct RestorePath {
    Crc32cPath was = speckv::crc32c_active_path();
    ~RestorePath() { speckv::crc32c_force_path(was); }
};

}  // namespace

TEST_CASE("CRC32C reference: known vectors (RFC 3720 B.4)") {
    const uint8_t *s = reinterpret_cast<const uint8_t *>("123456789");
    CHECK(ref_crc(0, s, 9) == 0xE3069283u);
    uint8_t z[32] = {}, f[32], inc[32], dec[32];
    for (int i = 0; i < 32; i++) {
        f[i] = 0xFF;
        inc[i] = static_cast<uint8_t>(i);
        dec[i] = static_cast<uint8_t>(31 - i);
    }
    CHECK(ref_crc(0, z, 32) == 0x8A9136AAu);
    CHECK(ref_crc(0, f, 32) == 0x62A8AB43u);
    CHECK(ref_crc(0, inc, 32) == 0x46DD794Eu);
    CHECK(ref_crc(0, dec, 32) == 0x113FDB5Cu);
}

TEST_CASE("CRC32C: known vectors on every path") {
    const char *s = "123456789";
    uint8_t z[32] = {}, f[32], inc[32];
    for (int i = 0; i < 32; i++) {
        f[i] = 0xFF;
        inc[i] = static_cast<uint8_t>(i);
    }
    // A 4 KiB page of zeros and of 0xFF, checked against the reference.
    std::vector<uint8_t> page0(4096, 0), page1(4096, 0xFF);
    for (Crc32cPath p : paths()) {
        CAPTURE(speckv::crc32c_path_name(p));
        CHECK(speckv::crc32c_with(p, 0, s, 9) == 0xE3069283u);
        CHECK(speckv::crc32c_with(p, 0, z, 32) == 0x8A9136AAu);
        CHECK(speckv::crc32c_with(p, 0, f, 32) == 0x62A8AB43u);
        CHECK(speckv::crc32c_with(p, 0, inc, 32) == 0x46DD794Eu);
        CHECK(speckv::crc32c_with(p, 0, s, 0) == 0u);
        CHECK(speckv::crc32c_with(p, 0x12345678u, s, 0) == 0x12345678u);
        CHECK(speckv::crc32c_with(p, 0, page0.data(), 4096) == ref_crc(0, page0.data(), 4096));
        CHECK(speckv::crc32c_with(p, 0, page1.data(), 4096) == ref_crc(0, page1.data(), 4096));
    }
    CHECK(speckv::crc32c(0, s, 9) == 0xE3069283u);
    CHECK(speckv::crc32c_portable(0, s, 9) == 0xE3069283u);
}

TEST_CASE("CRC32C: the dispatch picks the widest path the CPU has, and every path can be forced") {
    const auto ps = paths();
    REQUIRE(!ps.empty());
    CHECK(ps.front() == Crc32cPath::portable);
    CHECK(speckv::crc32c_active_path() == ps.back());
    std::string names;
    for (Crc32cPath p : ps) names += std::string(" ") + speckv::crc32c_path_name(p);
    names += std::string("; crc32c() uses ") + speckv::crc32c_path_name(speckv::crc32c_active_path());
    MESSAGE("CRC32C paths on this CPU:" << names);
    RestorePath restore;
    const auto buf = random_bytes(9000, 7);
    for (Crc32cPath p : ps) {
        CAPTURE(speckv::crc32c_path_name(p));
        REQUIRE(speckv::crc32c_force_path(p));
        CHECK(speckv::crc32c_active_path() == p);
        for (size_t n : {0, 5, 64, 300, 2048, 4096, 9000})
            CHECK(speckv::crc32c(0xA5A5A5A5u, buf.data(), n) == ref_crc(0xA5A5A5A5u, buf.data(), n));
    }
    for (int i = 0; i < speckv::kCrc32cPathCount; i++)
        if (!speckv::crc32c_path_available(static_cast<Crc32cPath>(i)))
            CHECK(!speckv::crc32c_force_path(static_cast<Crc32cPath>(i)));
}

TEST_CASE("CRC32C: every length 0..1100 at every alignment 0..63, random initial values") {
    const size_t kMax = 1100;
    const auto buf = random_bytes(kMax + 64, 1);
    std::mt19937 rng(2);
    const auto ps = paths();
    for (size_t off = 0; off < 64; off++) {
        const uint32_t init = off == 0 ? 0u : static_cast<uint32_t>(rng());
        uint32_t reg = ~init;  // reference register over buf[off, off+n), extended byte by byte
        for (size_t n = 0; n <= kMax; n++) {
            const uint32_t want = ~reg;
            for (Crc32cPath p : ps) {
                const uint32_t got = speckv::crc32c_with(p, init, buf.data() + off, n);
                if (got != want) {  // one CHECK per failure, not 280,000 passing ones
                    CAPTURE(speckv::crc32c_path_name(p));
                    CAPTURE(off);
                    CAPTURE(n);
                    CHECK(got == want);
                }
            }
            if (n < kMax) reg = ref_step(reg, buf[off + n]);
        }
    }
}

TEST_CASE("CRC32C: random lengths up to 70,000, alignments 0..63, random initial values") {
    const size_t kMax = 70000;
    const auto buf = random_bytes(kMax + 64, 3);
    std::mt19937_64 rng(4);
    const auto ps = paths();
    // Lengths at the paths' edges (crc32q 3 x 680-byte stripes, 64/256-byte
    // folding rounds), then random ones.
    std::vector<size_t> lens = {2039, 2040, 2041, 2047, 2048, 2049, 4079, 4080, 4081, 4095, 4096, 4097,
                                6119, 6120, 6121, 65535, 65536, 65537, kMax};
    for (int i = 0; i < 150; i++) lens.push_back(rng() % (kMax + 1));
    for (size_t i = 0; i < lens.size(); i++) {
        const size_t n = lens[i], off = rng() % 64;
        const uint32_t init = static_cast<uint32_t>(rng());
        const uint32_t want = ref_crc(init, buf.data() + off, n);
        for (Crc32cPath p : ps) {
            CAPTURE(speckv::crc32c_path_name(p));
            CAPTURE(n);
            CAPTURE(off);
            CHECK(speckv::crc32c_with(p, init, buf.data() + off, n) == want);
        }
        CHECK(speckv::crc32c(init, buf.data() + off, n) == want);
    }
}

TEST_CASE("CRC32C: chained calls equal one call, whatever the split and the paths") {
    const size_t kLen = 70000;
    const auto buf = random_bytes(kLen + 64, 5);
    std::mt19937_64 rng(6);
    const auto ps = paths();
    for (int round = 0; round < 40; round++) {
        const size_t off = rng() % 64;
        const size_t total = rng() % (kLen + 1);
        const uint8_t *b = buf.data() + off;
        const uint32_t want = ref_crc(0, b, total);
        // Same path for every piece, then a random path per piece.
        for (int mix = 0; mix <= static_cast<int>(ps.size()); mix++) {
            uint32_t c = 0;
            size_t at = 0;
            while (at < total) {
                // Pieces from 0 bytes up to ~6 KiB, biased to small ones.
                const size_t cap = (rng() & 1) ? 70 : 6000;
                const size_t piece = std::min(total - at, static_cast<size_t>(rng() % (cap + 1)));
                const Crc32cPath p = mix < static_cast<int>(ps.size()) ? ps[mix] : ps[rng() % ps.size()];
                c = speckv::crc32c_with(p, c, b + at, piece);
                at += piece;
            }
            CAPTURE(round);
            CAPTURE(mix);
            CHECK(c == want);
        }
    }
    // crc32c(crc32c(0, a, n), b, m) == crc32c(0, ab, n+m) for a page split at every 64th byte.
    for (size_t cut = 0; cut <= 4096; cut += 64)
        CHECK(speckv::crc32c(speckv::crc32c(0, buf.data(), cut), buf.data() + cut, 4096 - cut) ==
              speckv::crc32c(0, buf.data(), 4096));
}

TEST_CASE("CRC32C: a single flipped bit anywhere in a page changes the checksum") {
    auto page = random_bytes(4096, 8);
    for (Crc32cPath p : paths()) {
        CAPTURE(speckv::crc32c_path_name(p));
        const uint32_t good = speckv::crc32c_with(p, 0, page.data(), page.size());
        for (size_t bit = 0; bit < 4096 * 8; bit += 997) {
            page[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
            const uint32_t bad = speckv::crc32c_with(p, 0, page.data(), page.size());
            CHECK(bad != good);
            CHECK(bad == ref_crc(0, page.data(), page.size()));
            page[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
        }
    }
}

TEST_CASE("CRC32C fused copy: every path copies exactly n bytes and returns the CRC of them") {
    const size_t kMax = 70000;
    const auto src = random_bytes(kMax + 64, 9);
    std::vector<uint8_t> dst(kMax + 128);
    std::mt19937_64 rng(10);
    std::vector<size_t> lens;
    for (size_t n = 0; n <= 600; n++) lens.push_back(n);
    for (size_t n : {size_t(1023), size_t(1024), size_t(1025), size_t(2048), size_t(4095), size_t(4096), size_t(4097),
                     size_t(65536), size_t(65537), kMax})
        lens.push_back(n);
    for (int i = 0; i < 60; i++) lens.push_back(rng() % (kMax + 1));
    for (size_t n : lens) {
        const size_t so = rng() % 64, dof = rng() % 64;
        const uint32_t init = static_cast<uint32_t>(rng());
        const uint32_t want = ref_crc(init, src.data() + so, n);
        for (Crc32cPath p : paths()) {
            std::fill(dst.begin(), dst.end(), uint8_t(0x5A));
            const uint32_t got = speckv::crc32c_copy_with(p, init, dst.data() + dof, src.data() + so, n);
            const bool same = std::memcmp(dst.data() + dof, src.data() + so, n) == 0;
            bool fence = true;  // nothing written outside [dof, dof + n)
            for (size_t i = 0; i < dof; i++) fence &= dst[i] == 0x5A;
            for (size_t i = dof + n; i < dst.size(); i++) fence &= dst[i] == 0x5A;
            if (got != want || !same || !fence) {
                CAPTURE(speckv::crc32c_path_name(p));
                CAPTURE(n);
                CAPTURE(so);
                CAPTURE(dof);
                CHECK(got == want);
                CHECK(same);
                CHECK(fence);
            }
        }
    }
    // The dispatched entry point, on the path crc32c() uses.
    std::vector<uint8_t> page(4096);
    CHECK(speckv::crc32c_copy(0, page.data(), src.data(), 4096) == ref_crc(0, src.data(), 4096));
    CHECK(std::memcmp(page.data(), src.data(), 4096) == 0);
}

TEST_CASE("CRC32C: an AVX2-class CPU with VPCLMULQDQ gets the 256-bit folding path") {
    // Under SPECKV_ISA=avx2 on a CPU with VPCLMULQDQ the dispatch must pick
    // vpclmul256 (not the 128-bit path); natively with AVX-512, vpclmul.
    const bool v256 = speckv::crc32c_path_available(Crc32cPath::vpclmul256);
    if (v256 && !speckv::crc32c_path_available(Crc32cPath::vpclmul))
        CHECK(speckv::crc32c_active_path() == Crc32cPath::vpclmul256);
    if (speckv::crc32c_path_available(Crc32cPath::vpclmul)) CHECK(v256);
    const std::string what = v256 ? "available" : "not available";
    MESSAGE("vpclmul256 " << what << " here");
}
