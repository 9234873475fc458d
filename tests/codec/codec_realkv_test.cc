// Real K/V of both models through every SIMD path: byte-identical records and
// decoded pages to the scalar reference (needs shared/data/models).
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "codec.h"
#include "codec_test_util.h"
#include "kv_eval.h"
#include "speckv.h"

namespace c = speckv::codec;
using c::Impl;
using c::Mode;

namespace {
using codec_test::cross_check;
using codec_test::simd_impls;



}  // namespace

TEST_CASE("codec simd: real K/V of both models identical to scalar") {
    auto impls = simd_impls();
    if (impls.empty()) return;
    for (const char *name : {"stories260K/stories260K.bin", "aidreams260K/aidreams260K.bin"}) {
        llama2::Model m;
        std::string err;
        REQUIRE_MESSAGE(m.load(std::string(SPECKV_CODEC_MODELS) + "/" + name, &err), err);
        auto toks = llama2::greedy(m, m.c.seq_len - 1);
        toks.insert(toks.begin(), 1);
        auto cap = llama2::capture_kv(m, toks);
        for (int l = 0; l < cap.n_layers; l++)
            for (int v = 0; v < 2; v++) {
                const float *src = v ? cap.v_layer(l) : cap.k_layer(l);
                const size_t n = size_t(cap.tokens) * cap.kv_dim;
                std::vector<float> x(src, src + n);
                for (int dt : {SPECKV_DTYPE_FP16, SPECKV_DTYPE_BF16, SPECKV_DTYPE_FP32}) {
                    auto bytes = codec_test::to_bytes(x, dt);
                    const size_t page = 4096 / c::dtype_size(dt) / cap.kv_dim * cap.kv_dim * c::dtype_size(dt);
                    for (size_t off = 0; off + page <= bytes.size(); off += page) {
                        std::vector<uint8_t> pg(bytes.begin() + long(off), bytes.begin() + long(off + page));
                        for (int mi = 1; mi < c::kModeCount; mi++)
                            for (Impl i : impls) cross_check(i, Mode(mi), dt, pg, uint32_t(cap.kv_dim));
                    }
                }
            }
    }
}
