// SPDX-License-Identifier: Apache-2.0
// The Rice stage (docs/codec.md §6.2) of every implementation against the
// scalar reference (rice_encode8/16_scalar, rice_decode8/16_scalar): the same
// stream bytes, the same "does not fit", the same decoded values, and on
// corrupt streams the same return code and the same error message. Then
// whole records of every Rice preset through every table, including the
// columnar layouts the 8 x 8 byte transpose handles and those it does not.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "codec/codec_kernels.h"
#include "codec_test_util.h"
#include "speckv.h"
#include "util/status.h"

namespace c = speckv::codec;

namespace {

template <class Sym>
struct Table {
    const char *name;
    size_t (*enc)(const Sym *, size_t, bool, unsigned, uint8_t *, size_t);
    int (*dec)(const uint8_t *, size_t, size_t, bool, unsigned, Sym *);
};

// Every Rice stage this CPU can run, other than the reference itself, and
// the reference: int8 symbols (b <= 8) and int16 (b 9..12).
template <class Sym>
struct Tables;
template <>
struct Tables<int8_t> {
    static std::vector<Table<int8_t>> fast() {
        std::vector<Table<int8_t>> v;
        if (const c::Kernels *k = c::avx2_kernels()) v.push_back({"avx2", k->rice_encode8, k->rice_decode8});
        if (const c::Kernels *k = c::avx512_kernels()) v.push_back({"avx512", k->rice_encode8, k->rice_decode8});
        if (const c::RiceKernels *r = c::rice_avx512_kernels()) v.push_back({"rice_avx512", r->encode8, r->decode8});
        return v;
    }
    static constexpr Table<int8_t> ref = {"scalar", c::rice_encode8_scalar, c::rice_decode8_scalar};
    static constexpr unsigned bmin = 3, bmax = 8;
};
template <>
struct Tables<int16_t> {
    static std::vector<Table<int16_t>> fast() {
        std::vector<Table<int16_t>> v;
        if (const c::Kernels *k = c::avx2_kernels()) v.push_back({"avx2", k->rice_encode16, k->rice_decode16});
        if (const c::Kernels *k = c::avx512_kernels()) v.push_back({"avx512", k->rice_encode16, k->rice_decode16});
        if (const c::RiceKernels *r = c::rice_avx512_kernels()) v.push_back({"rice_avx512", r->encode16, r->decode16});
        return v;
    }
    static constexpr Table<int16_t> ref = {"scalar", c::rice_encode16_scalar, c::rice_decode16_scalar};
    static constexpr unsigned bmin = 9, bmax = 12;
};

// Symbols of b bits (|s| <= Q) of one of several kinds, escapes included.
template <class Sym>
std::vector<Sym> symbols(std::mt19937_64 &rng, size_t n, unsigned bits, int kind) {
    const int Q = (1 << (bits - 1)) - 1;
    std::vector<Sym> s(n);
    std::uniform_int_distribution<int> uq(-Q, Q);
    std::geometric_distribution<int> geo(0.35);
    const int cst = uq(rng);
    int walk = 0;
    for (size_t i = 0; i < n; i++) {
        int v = 0;
        switch (kind) {
            case 0: v = uq(rng); break;                                     // uniform
            case 1: v = std::min(Q, geo(rng)) * ((rng() & 1) ? 1 : -1); break;  // small
            case 2: v = 0; break;                                           // all zero
            case 3: v = cst; break;                                         // all equal
            case 4: v = (i & 1) ? Q : -Q; break;                            // largest steps: escapes
            case 5:                                                         // random walk
                walk = std::clamp(walk + int(rng() % 5) - 2, -Q, Q);
                v = walk;
                break;
            case 6: v = (rng() % 16 == 0) ? ((rng() & 1) ? Q : -Q) : int(rng() % 3) - 1; break;  // bursts
            default: v = (rng() & 1) ? Q : -Q; break;                       // +-Q only
        }
        s[i] = Sym(v);
    }
    return s;
}

constexpr size_t kSizes[] = {1, 2, 3, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200, 1000, 2047, 2048, 2049, 4096};

template <class Sym>
size_t check_encoders(int iters, uint64_t seed) {
    using T = Tables<Sym>;
    auto tables = T::fast();
    if (tables.empty()) return 0;
    std::mt19937_64 rng(seed);
    const unsigned nb = T::bmax - T::bmin + 1;
    size_t streams = 0;
    for (int it = 0; it < iters; it++) {
        const unsigned bits = T::bmin + unsigned(it % int(nb));
        const size_t n = (it % 5 == 4) ? 1 + rng() % 5000 : kSizes[rng() % std::size(kSizes)];
        const bool delta = (it / int(nb)) & 1;
        const int kind = int(rng() % 8);
        auto s = symbols<Sym>(rng, n, bits, kind);
        std::vector<uint8_t> ref(4 * n + 64);
        const size_t rl = T::ref.enc(s.data(), n, delta, bits, ref.data(), ref.size());
        REQUIRE(rl > 0);
        // Capacities: ample, exact, one short, and a random one below.
        const size_t caps[] = {ref.size(), rl, rl - 1, rl ? size_t(rng() % rl) : 0};
        for (size_t cap : caps) {
            std::vector<uint8_t> r0(cap + 64, 0xA5);
            const size_t l0 = T::ref.enc(s.data(), n, delta, bits, r0.data(), cap);
            for (const auto &t : tables) {
                std::vector<uint8_t> r1(cap + 64, 0xA5);
                const size_t l1 = t.enc(s.data(), n, delta, bits, r1.data(), cap);
                INFO(t.name << " bits " << bits << " n " << n << " delta " << delta << " kind " << kind << " cap " << cap);
                REQUIRE(l1 == l0);
                REQUIRE(std::memcmp(r0.data(), r1.data(), l0) == 0);
                // Nothing written past the stream, nothing at all when it does not fit.
                for (size_t i = l1; i < r1.size(); i++) REQUIRE(r1[i] == 0xA5);
            }
            streams++;
        }
    }
    return streams;
}

template <class Sym>
void check_decoders(int iters, uint64_t seed, size_t *ok, size_t *rejected) {
    using T = Tables<Sym>;
    auto tables = T::fast();
    if (tables.empty()) return;
    std::mt19937_64 rng(seed);
    const unsigned nb = T::bmax - T::bmin + 1;
    for (int it = 0; it < iters; it++) {
        const unsigned bits = T::bmin + unsigned(it % int(nb));
        const size_t n = (it % 5 == 4) ? 1 + rng() % 5000 : kSizes[rng() % std::size(kSizes)];
        const bool delta = (it / int(nb)) & 1;
        auto s = symbols<Sym>(rng, n, bits, int(rng() % 8));
        std::vector<uint8_t> st(4 * n + 64);
        st.resize(T::ref.enc(s.data(), n, delta, bits, st.data(), st.size()));
        for (int f = 0; f < 12; f++) {
            std::vector<uint8_t> b = st;
            size_t dn = n;
            unsigned dbits = bits;
            bool ddelta = delta;
            switch (f) {
                case 0: break;  // valid
                case 1: b[rng() % b.size()] ^= uint8_t(1u << (rng() % 8)); break;
                case 2: b[rng() % b.size()] = uint8_t(rng()); break;
                case 3: b.resize(b.size() - std::min(b.size(), size_t(1 + rng() % 40))); break;  // truncated
                case 4: b.push_back(uint8_t(rng() % 2 ? 0 : rng())); break;                      // trailing byte
                case 5: b.back() |= 0x80; break;                                                 // padding bit
                case 6: dn = n + 1 + rng() % 70; break;                                          // lying count
                case 7: dn = std::max<size_t>(1, n - 1 - rng() % std::max<size_t>(1, n / 2)); break;
                case 8: dbits = bits == T::bmax ? bits - 1 : bits + 1; break;                    // other b
                case 9: ddelta = !delta; break;
                case 10:  // garbage of a random length
                    b.resize(rng() % (b.size() + 8));
                    for (auto &x : b) x = uint8_t(rng());
                    break;
                default:  // all ones: escapes / long unary everywhere
                    std::fill(b.begin(), b.end(), uint8_t(0xFF));
                    break;
            }
            // Exactly len bytes on the heap: a read past them is a sanitizer error.
            std::vector<uint8_t> in(b);
            std::vector<Sym> v0(dn), v1(dn);
            const int rc0 = T::ref.dec(in.data(), in.size(), dn, ddelta, dbits, v0.data());
            const std::string e0 = rc0 ? speckv::last_error() : "";
            for (const auto &t : tables) {
                const int rc1 = t.dec(in.data(), in.size(), dn, ddelta, dbits, v1.data());
                INFO(t.name << " case " << f << " bits " << dbits << " n " << dn << " len " << in.size());
                REQUIRE(rc1 == rc0);
                if (rc0 == SPECKV_OK) {
                    REQUIRE(v0 == v1);
                } else {
                    REQUIRE(std::string(speckv::last_error()) == e0);
                }
            }
            (rc0 == SPECKV_OK ? *ok : *rejected)++;
        }
    }
}

}  // namespace

TEST_CASE("codec rice: every encoder equals the reference, stream bytes and does-not-fit") {
    if (Tables<int8_t>::fast().empty()) return;
    CHECK(check_encoders<int8_t>(4000, 2024) == 16000);
    CHECK(check_encoders<int16_t>(2000, 2025) == 8000);
}

TEST_CASE("codec rice: every decoder equals the reference on valid, corrupt and lying streams") {
    if (Tables<int8_t>::fast().empty()) return;
    size_t ok = 0, rejected = 0;
    check_decoders<int8_t>(3000, 4048, &ok, &rejected);
    MESSAGE("rice decode (b <= 8): " << ok << " accepted, " << rejected << " rejected streams compared");
    CHECK(ok > 3000);
    CHECK(rejected > 10000);
    ok = rejected = 0;
    check_decoders<int16_t>(1500, 4049, &ok, &rejected);
    MESSAGE("rice decode (b 9..12): " << ok << " accepted, " << rejected << " rejected streams compared");
    CHECK(ok > 1500);
    CHECK(rejected > 5000);
}

TEST_CASE("codec rice: records of every Rice preset identical on every path") {
    auto impls = codec_test::simd_impls();
    if (impls.empty()) return;
    const c::Mode modes[] = {c::Mode::k8, c::Mode::v8, c::Mode::k6, c::Mode::v6, c::Mode::k5, c::Mode::v5,
                             c::Mode::p8r, c::Mode::k4, c::Mode::v4, c::Mode::vp8, c::Mode::vp6, c::Mode::vp5,
                             c::Mode::k9, c::Mode::k10, c::Mode::k12};
    // (elements, channels): 8 x 8 tiles of the columnar transpose both ways,
    // sides that are not multiples of 8, one row, one column, partial blocks.
    const std::pair<size_t, uint32_t> shapes[] = {{2048, 32}, {2048, 64}, {1024, 32}, {4096, 128}, {2048, 8},
                                                  {2048, 16}, {2040, 24}, {2048, 2048}, {2048, 1}, {777, 7},
                                                  {1000, 40}, {960, 96}, {100, 10}, {64, 8}, {65, 13}};
    const int dtypes[] = {SPECKV_DTYPE_FP16, SPECKV_DTYPE_BF16, SPECKV_DTYPE_FP32};
    std::mt19937_64 rng(77);
    size_t records = 0;
    for (int it = 0; it < 2400; it++) {
        const auto [n, C] = shapes[rng() % std::size(shapes)];
        const int dt = dtypes[it % 3];
        const c::Mode m = modes[rng() % std::size(modes)];
        auto src = codec_test::random_page(rng, dt, n, int(rng() % 8));
        for (c::Impl i : impls) codec_test::cross_check(i, m, dt, src, C);
        records++;
    }
    CHECK(records == 2400);
    // Edge pages (FP16, 64 x 32): all equal, one outlier, alternating +-max
    // (the largest deltas: escapes), -0 and subnormals, a ramp, +-65504.
    std::vector<std::vector<float>> edge;
    edge.emplace_back(2048, 0.37f);
    edge.emplace_back(2048, -1e-3f);
    {
        std::vector<float> x(2048, 0.01f);
        x[777] = 300.f;
        edge.push_back(x);
        for (size_t i = 0; i < 2048; i++) x[i] = (i & 1) ? 65504.f : -65504.f;
        edge.push_back(x);
        for (size_t i = 0; i < 2048; i++) x[i] = ((i / 3) & 1) ? 1.f : -1.f;
        edge.push_back(x);
        for (size_t i = 0; i < 2048; i++) x[i] = (i % 3 == 0) ? -0.f : (i % 3 == 1) ? 5.96e-8f : -6.0e-5f;
        edge.push_back(x);
        for (size_t i = 0; i < 2048; i++) x[i] = float(i) - 1024.f;
        edge.push_back(x);
    }
    for (const auto &x : edge)
        for (int dt : dtypes) {
            auto src = codec_test::to_bytes(x, dt);
            for (c::Mode m : modes)
                for (uint32_t C : {32u, 64u, 7u})
                    for (c::Impl i : impls) codec_test::cross_check(i, m, dt, src, C);
        }
}
