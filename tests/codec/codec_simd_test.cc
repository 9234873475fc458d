// Every SIMD path must give byte-identical records and decoded pages to the
// scalar reference: random pages of many kinds and sizes, edge cases, real K/V.
#include <doctest/doctest.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "codec.h"
#include "codec_test_util.h"
#include "speckv.h"
#include "status.h"

namespace c = speckv::codec;
using c::Impl;
using c::Mode;

namespace {

// Encodes with scalar and `impl`, decodes each with both; all must agree.
void cross_check(Impl impl, Mode m, int dtype, const std::vector<uint8_t> &src, uint32_t C) {
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

std::vector<Impl> simd_impls() {
    std::vector<Impl> v;
    for (Impl i : {Impl::avx2, Impl::avx512})
        if (c::impl_available(i)) v.push_back(i);
    return v;
}

const Mode kModes[] = {Mode::paper, Mode::int8, Mode::k8, Mode::v8, Mode::k6, Mode::v6, Mode::k9, Mode::k10, Mode::k12, Mode::vp8, Mode::vp6, Mode::vp5,
                       Mode::k5,    Mode::v5,   Mode::p8r, Mode::k4, Mode::v4};

}  // namespace

TEST_CASE("codec simd: random and edge-case pages identical to scalar") {
    auto impls = simd_impls();
    if (impls.empty()) {
        MESSAGE("no SIMD path on this CPU; nothing to compare");
        return;
    }
    const char *env = std::getenv("SPECKV_CODEC_PAGES");
    const int pages = env ? std::atoi(env) : 6000;
    std::mt19937_64 rng(11);
    const int dtypes[] = {SPECKV_DTYPE_FP16, SPECKV_DTYPE_BF16, SPECKV_DTYPE_FP32};
    const size_t sizes[] = {2048, 1024, 4096, 1, 7, 15, 17, 33, 100, 777};
    const uint32_t chans[] = {32, 64, 16, 128, 8, 7, 1, 0, 3, 24};
    for (int p = 0; p < pages; p++) {
        int dt = dtypes[rng() % 3];
        size_t n = sizes[rng() % 10];
        uint32_t C = chans[rng() % 10];
        Mode m = kModes[rng() % (sizeof(kModes) / sizeof(kModes[0]))];
        auto src = codec_test::random_page(rng, dt, n, int(rng() % 8));
        for (Impl i : impls) cross_check(i, m, dt, src, C);
    }
}
