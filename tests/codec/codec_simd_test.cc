// SPDX-License-Identifier: Apache-2.0
// Every SIMD path must give byte-identical records and decoded pages to the
// scalar reference: random pages of many kinds and sizes, edge cases, real K/V.
#include <doctest/doctest.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "codec/codec.h"
#include "codec_test_util.h"
#include "speckv.h"
#include "util/status.h"

namespace c = speckv::codec;
using c::Impl;
using c::Mode;

namespace {
using codec_test::cross_check;
using codec_test::simd_impls;



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
