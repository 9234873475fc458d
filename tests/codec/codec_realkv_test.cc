// SPDX-License-Identifier: Apache-2.0
// Real K/V of both models through every SIMD path: byte-identical records and
// decoded pages to the scalar reference (needs data/models).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "codec/codec.h"
#include "codec/codec_kernels.h"
#include "codec_test_util.h"
#include "data_dir.h"
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
        REQUIRE_MESSAGE(m.load(speckv_data::path(std::string("models/") + name), &err), err);
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

// §18 "Size" on real K/V: every split Rice preset against its Rice preset on
// the 4 KiB FP16 pages of both models (the bench's page shape): the same
// decoded values, and the record at most floor((nb + e + 21) / 8) bytes
// longer (nb = 32 blocks, e = the Rice stream's escapes, counted here from the
// decoded symbols); the totals give the ratio cost of the split layout.
TEST_CASE("codec srice: real K/V records within the §18 size bound of Rice, same values") {
    const std::pair<Mode, Mode> pairs[] = {{Mode::k8s, Mode::k8},   {Mode::v8s, Mode::v8},   {Mode::k6s, Mode::k6},
                                           {Mode::v6s, Mode::v6},   {Mode::k5s, Mode::k5},   {Mode::v5s, Mode::v5},
                                           {Mode::p8rs, Mode::p8r}, {Mode::k4s, Mode::k4},   {Mode::v4s, Mode::v4},
                                           {Mode::k9s, Mode::k9},   {Mode::k10s, Mode::k10}, {Mode::k12s, Mode::k12},
                                           {Mode::vp8s, Mode::vp8}, {Mode::vp6s, Mode::vp6}, {Mode::vp5s, Mode::vp5}};
    for (const char *name : {"stories260K/stories260K.bin", "aidreams260K/aidreams260K.bin"}) {
        llama2::Model m;
        std::string err;
        REQUIRE_MESSAGE(m.load(speckv_data::path(std::string("models/") + name), &err), err);
        auto toks = llama2::greedy(m, m.c.seq_len - 1);
        toks.insert(toks.begin(), 1);
        const auto cap = llama2::capture_kv(m, toks);
        const int pt = std::max(1, 2048 / cap.kv_dim);
        for (const auto &[ms, mr] : pairs) {
            size_t bs = 0, br = 0, pages = 0, worst = 0;
            for (int l = 0; l < cap.n_layers; l++)
                for (int v = 0; v < 2; v++) {
                    size_t np = 0;
                    const auto h = llama2::fp16_pages(cap, l, v == 1, pt, &np);
                    const size_t pe = size_t(pt) * cap.kv_dim;
                    for (size_t p = 0; p < np; p++) {
                        std::vector<uint8_t> src(pe * 2);
                        std::memcpy(src.data(), h.data() + p * pe, src.size());
                        std::vector<uint8_t> rs(c::max_record_size(src.size())), rr(rs.size());
                        size_t ls = 0, lr = 0;
                        REQUIRE(c::encode(ms, SPECKV_DTYPE_FP16, src.data(), src.size(), {uint32_t(cap.kv_dim)},
                                          rs.data(), rs.size(), &ls) == SPECKV_OK);
                        REQUIRE(c::encode(mr, SPECKV_DTYPE_FP16, src.data(), src.size(), {uint32_t(cap.kv_dim)},
                                          rr.data(), rr.size(), &lr) == SPECKV_OK);
                        std::vector<uint8_t> ds(src.size()), dr(src.size());
                        size_t n = 0;
                        REQUIRE(c::decode(rs.data(), ls, ds.data(), ds.size(), &n) == SPECKV_OK);
                        REQUIRE(c::decode(rr.data(), lr, dr.data(), dr.size(), &n) == SPECKV_OK);
                        if (rs[3] != 0 && rr[3] != 0) CHECK(ds == dr);
                        // The Rice escapes of the page, from its decoded scan-order symbols.
                        size_t esc = 0;
                        if (rr[3] != 0) {
                            const c::Params P = c::mode_params(mr);
                            const size_t C = size_t(cap.kv_dim), T = pe / C;
                            const size_t G = P.group == 0 ? 1 : P.group == 1 ? C : T;
                            const bool delta = P.order != 0;
                            std::vector<int16_t> s(pe);
                            if (P.bits <= 8) {
                                std::vector<int8_t> s8(pe);
                                REQUIRE(c::rice_decode8_scalar(rr.data() + 24 + 2 * G, lr - 24 - 2 * G, pe, delta,
                                                               P.bits, s8.data()) == SPECKV_OK);
                                std::copy(s8.begin(), s8.end(), s.begin());
                            } else {
                                REQUIRE(c::rice_decode16_scalar(rr.data() + 24 + 2 * G, lr - 24 - 2 * G, pe, delta,
                                                                P.bits, s.data()) == SPECKV_OK);
                            }
                            const unsigned W = P.bits + 1u;
                            for (size_t b0 = 0; b0 < pe; b0 += 64) {
                                const size_t mm = std::min<size_t>(64, pe - b0);
                                std::vector<uint32_t> z(mm);
                                for (size_t i = 0; i < mm; i++) {
                                    const int32_t d = s[b0 + i] - (delta && b0 + i ? s[b0 + i - 1] : 0);
                                    z[i] = d >= 0 ? uint32_t(2 * d) : uint32_t(-2 * d - 1);
                                }
                                unsigned bk = 0;
                                uint64_t bc = ~uint64_t(0);
                                for (unsigned k = 0; k < 8; k++) {
                                    uint64_t cst = 0;
                                    for (uint32_t x : z) cst += (x >> k) < 15 ? (x >> k) + 1 + k : 15 + W;
                                    if (cst < bc) bc = cst, bk = k;
                                }
                                for (uint32_t x : z) esc += (x >> bk) >= 15;
                            }
                        }
                        const size_t nb = (pe + 63) / 64;
                        CHECK(ls <= lr + (nb + esc + 21 + 4 * (nb & 1)) / 8);
                        worst = std::max(worst, ls > lr ? ls - lr : 0);
                        bs += ls, br += lr, pages++;
                    }
                }
            MESSAGE(std::string(name) << " " << std::string(c::mode_name(ms)) << " vs " << std::string(c::mode_name(mr)) << ": " << pages << " pages, "
                         << bs << " vs " << br << " bytes (+" << 100.0 * (double(bs) / double(br) - 1) << " %), worst page +"
                         << worst << " bytes");
        }
    }
}
