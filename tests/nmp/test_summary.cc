// SPDX-License-Identifier: Apache-2.0
// Page summaries: the bound is a bound, damage is detected, SIMD == scalar.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "select/nmp_kernels.h"
#include "nmp_test_util.h"
#include "util/status.h"

using namespace nmp_test;

namespace {

void check_bound(const nmp::Geometry &g, const PageSet &s, const std::vector<float> &q) {
    const uint32_t n = uint32_t(s.ptrs.size());
    std::vector<float> sc(size_t(g.kv_heads) * n);
    REQUIRE(nmp::score_pages(g, q.data(), q.size(), s.ptrs.data(), n, sc.data()) == SPECKV_OK);
    const double scale = 1.0 / std::sqrt(double(g.head_dim));
    auto ex = exact_max(g, q, s, scale);
    auto mag = bound_magnitude(g, q, s, scale);
    size_t tight = 0;
    for (size_t i = 0; i < sc.size(); i++) {
        // Exact arithmetic gives bound >= max q·k; the float sum may be off by
        // ~D ulps of the magnitude (docs/selection.md §2.2).
        CHECK(double(sc[i]) >= ex[i] - 1e-5 * mag[i]);
        tight += double(sc[i]) - ex[i] < 0.5 * mag[i];
    }
    CHECK(tight > 0);
}

}  // namespace

TEST_CASE("nmp: summary round trip, size and header") {
    std::mt19937 rng(1);
    auto s = make_pages(rng, 3, 16, 64);
    CHECK(nmp::summary_size(64) == 16 + 256);
    for (auto &v : s.sums) {
        CHECK(nmp::check_summary(v.data(), v.size(), 64) == SPECKV_OK);
        CHECK(nmp::summary_tokens(v.data()) == 16);
    }
    CHECK(nmp::check_summary(s.sums[0].data(), s.sums[0].size(), 32) == SPECKV_ECORRUPT);
    CHECK(nmp::check_summary(s.sums[0].data(), s.sums[0].size() - 1, 64) == SPECKV_ECORRUPT);
    CHECK(nmp::check_summary(nullptr, 10, 64) == SPECKV_EINVAL);
}

TEST_CASE("nmp: the bound is an upper bound of q·k on random pages, MHA and GQA") {
    std::mt19937 rng(7);
    for (auto gq : {nmp::Geometry{4, 8, 2}, nmp::Geometry{2, 16, 1}, nmp::Geometry{8, 128, 4}, nmp::Geometry{3, 12, 3}}) {
        CAPTURE(gq.kv_heads);
        CAPTURE(gq.head_dim);
        auto s = make_pages(rng, 20, 16, gq.channels());
        for (int r = 0; r < 5; r++) check_bound(gq, s, random_q(rng, gq.q_len()));
    }
}

TEST_CASE("nmp: keys beyond the FP16 range and FP16 keys keep the bound") {
    std::mt19937 rng(3);
    nmp::Geometry g{2, 16, 2};
    auto s = make_pages(rng, 8, 16, g.channels(), 30000.0f);  // |k| up to ~3e5 -> exponent > 0
    check_bound(g, s, random_q(rng, g.q_len()));
    // FP16 keys: the summary of the FP16 page equals that of its FP32 image.
    std::vector<uint16_t> h(16 * 32);
    std::vector<float> f(16 * 32);
    std::normal_distribution<float> nd(0, 2);
    for (size_t i = 0; i < h.size(); i++) {
        h[i] = speckv::codec::fp32_to_fp16_rne(nd(rng));
        f[i] = speckv::codec::fp16_to_fp32(h[i]);
    }
    std::vector<uint8_t> a(nmp::summary_size(32)), b(a.size());
    REQUIRE(nmp::summarize(SPECKV_DTYPE_FP16, h.data(), 16, 32, 32, a.data(), a.size()) == SPECKV_OK);
    REQUIRE(nmp::summarize(SPECKV_DTYPE_FP32, f.data(), 16, 32, 32, b.data(), b.size()) == SPECKV_OK);
    CHECK(std::memcmp(a.data() + 16, b.data() + 16, a.size() - 16) == 0);  // payload equal (dtype byte differs)
}

TEST_CASE("nmp: a damaged summary is an error naming the page, never a score") {
    std::mt19937 rng(5);
    nmp::Geometry g{4, 8, 2};
    auto s = make_pages(rng, 10, 16, g.channels());
    auto q = random_q(rng, g.q_len());
    std::vector<float> sc(size_t(g.kv_heads) * 10);
    s.sums[6][40] ^= 0x10;  // one bit in the payload
    CHECK(nmp::score_pages(g, q.data(), q.size(), s.ptrs.data(), 10, sc.data()) == SPECKV_ECORRUPT);
    CHECK(std::string(speckv::last_error()).find("page 6") != std::string::npos);
    CHECK(nmp::check_summary(s.sums[6].data(), s.sums[6].size(), g.channels()) == SPECKV_ECORRUPT);
    nmp::ScoreOptions nov;
    nov.verify = false;  // trusted summaries: no CRC, header still checked
    CHECK(nmp::score_pages(g, q.data(), q.size(), s.ptrs.data(), 10, sc.data(), nov) == SPECKV_OK);
    s.sums[2][5] ^= 1;  // magic
    CHECK(nmp::score_pages(g, q.data(), q.size(), s.ptrs.data(), 10, sc.data(), nov) == SPECKV_ECORRUPT);
    s.sums[2][5] ^= 1;
    s.ptrs[1] = nullptr;
    CHECK(nmp::score_pages(g, q.data(), q.size(), s.ptrs.data(), 10, sc.data(), nov) == SPECKV_EINVAL);
}

TEST_CASE("nmp: bad input to summarize and score_pages") {
    std::vector<float> k(16 * 8, 1.0f);
    std::vector<uint8_t> out(nmp::summary_size(8));
    CHECK(nmp::summarize(SPECKV_DTYPE_BF16, k.data(), 16, 8, 8, out.data(), out.size()) == SPECKV_EINVAL);
    CHECK(nmp::summarize(SPECKV_DTYPE_FP32, k.data(), 0, 8, 8, out.data(), out.size()) == SPECKV_EINVAL);
    CHECK(nmp::summarize(SPECKV_DTYPE_FP32, k.data(), 16, 8, 4, out.data(), out.size()) == SPECKV_EINVAL);
    CHECK(nmp::summarize(SPECKV_DTYPE_FP32, k.data(), 16, 8, 8, out.data(), out.size() - 1) == SPECKV_ERANGE);
    k[17] = NAN;
    CHECK(nmp::summarize(SPECKV_DTYPE_FP32, k.data(), 16, 8, 8, out.data(), out.size()) == SPECKV_EINVAL);
    k[17] = 1.0f;
    REQUIRE(nmp::summarize(SPECKV_DTYPE_FP32, k.data(), 16, 8, 8, out.data(), out.size()) == SPECKV_OK);
    nmp::Geometry g{1, 8, 2};
    std::vector<float> q(16, 0.5f), sc(1);
    const uint8_t *p = out.data();
    CHECK(nmp::score_pages(g, q.data(), 15, &p, 1, sc.data()) == SPECKV_EINVAL);  // wrong query length
    CHECK(std::string(speckv::last_error()).find("15 floats") != std::string::npos);
    CHECK(nmp::score_pages(g, q.data(), 16, &p, 0, sc.data()) == SPECKV_EINVAL);
    CHECK(nmp::score_pages(nmp::Geometry{1, 16, 1}, q.data(), 16, &p, 1, sc.data()) == SPECKV_ECORRUPT);
    CHECK(nmp::score_pages(nmp::Geometry{0, 8, 2}, q.data(), 16, &p, 1, sc.data()) == SPECKV_EINVAL);
    q[3] = INFINITY;
    CHECK(nmp::score_pages(g, q.data(), 16, &p, 1, sc.data()) == SPECKV_EINVAL);
    q[3] = 0.5f;
    CHECK(nmp::score_pages(g, q.data(), 16, &p, 1, sc.data()) == SPECKV_OK);
    CHECK(sc[0] == doctest::Approx(0.5 * 8 / std::sqrt(8.0)));
}

TEST_CASE("nmp: SIMD scores equal scalar scores bit for bit") {
    std::vector<nmp::Impl> impls;
    if (nmp::impl_available(nmp::Impl::avx2)) impls.push_back(nmp::Impl::avx2);
    if (nmp::impl_available(nmp::Impl::avx512)) impls.push_back(nmp::Impl::avx512);
    if (impls.empty()) {
        MESSAGE("no SIMD kernel on this CPU: nothing to compare");
        return;
    }
    std::mt19937 rng(11);
    for (auto gq : {nmp::Geometry{4, 8, 2}, nmp::Geometry{8, 128, 4}, nmp::Geometry{8, 128, 8}, nmp::Geometry{2, 64, 5},
                    nmp::Geometry{1, 24, 3}, nmp::Geometry{4, 16, 1}, nmp::Geometry{2, 40, 7}, nmp::Geometry{2, 48, 6},
                    nmp::Geometry{2, 32, 11}, nmp::Geometry{1, 16, 12}, nmp::Geometry{2, 64, 16},
                    nmp::Geometry{3, 128, 9}}) {
        CAPTURE(gq.head_dim);
        CAPTURE(gq.q_per_kv);
        auto s = make_pages(rng, 33, 16, gq.channels(), 3.0f);
        for (int r = 0; r < 4; r++) {
            auto q = random_q(rng, gq.q_len());
            if (r == 1)
                for (size_t i = 0; i < q.size(); i += 3) q[i] = (i % 2) ? -0.0f : 0.0f;  // signed zeros
            std::vector<float> a(size_t(gq.kv_heads) * 33), b(a.size());
            nmp::ScoreOptions o;
            o.impl = nmp::Impl::scalar;
            REQUIRE(nmp::score_pages(gq, q.data(), q.size(), s.ptrs.data(), 33, a.data(), o) == SPECKV_OK);
            for (auto impl : impls) {
                CAPTURE(nmp::impl_name(impl));
                o.impl = impl;
                REQUIRE(nmp::score_pages(gq, q.data(), q.size(), s.ptrs.data(), 33, b.data(), o) == SPECKV_OK);
                CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
            }
            // The raw kernels too (per query head, before the group max), on
            // batches of every size (the kernels group pages by 2 or 4), with
            // and without summaries to prefetch (a NULL among them).
            const nmp::QueryForm qf(q.data(), gq.q_heads(), gq.head_dim);
            std::vector<const uint16_t *> pay;
            for (auto *sp : s.ptrs) pay.push_back(reinterpret_cast<const uint16_t *>(sp + nmp::kSummaryHeader));
            std::vector<const uint8_t *> ahead(s.ptrs.begin(), s.ptrs.end());
            ahead[2] = nullptr;
            std::vector<nmp::ScorePagesFn> fns;
            if (gq.head_dim % 8 == 0 && nmp::avx2_score_pages()) fns.push_back(nmp::avx2_score_pages());
            if (gq.head_dim % 16 == 0 && nmp::avx512_score_pages()) fns.push_back(nmp::avx512_score_pages());
            for (size_t nb : {size_t(1), size_t(3), size_t(4), size_t(5), size_t(33)}) {
                std::vector<float> ra(nb * gq.q_heads()), rb(ra.size()), ga(nb * gq.kv_heads), gb(ga.size());
                nmp::KernelArgs ka;
                ka.kv_heads = gq.kv_heads;
                ka.head_dim = gq.head_dim;
                ka.q_per_kv = gq.q_per_kv;
                ka.query = &qf;
                ka.payload = pay.data();
                ka.n = nb;
                ka.out = ra.data();
                ka.gmax = ga.data();
                nmp::score_pages_scalar(ka);
                for (size_t i = 0; i < nb; i++)
                    for (uint32_t k = 0; k < gq.kv_heads; k++) {
                        const float *r = ra.data() + i * gq.q_heads() + k * gq.q_per_kv;
                        CHECK(ga[i * gq.kv_heads + k] == *std::max_element(r, r + gq.q_per_kv));
                    }
                ka.out = rb.data();
                ka.gmax = gb.data();
                for (auto fn : fns) {
                    ka.ahead = nb % 2 ? ahead.data() : nullptr;
                    ka.n_ahead = nb % 2 ? ahead.size() : 0;
                    ka.summary_bytes = nmp::summary_size(gq.channels());
                    std::fill(rb.begin(), rb.end(), -1.0f);
                    std::fill(gb.begin(), gb.end(), -1.0f);
                    fn(ka);
                    CHECK(std::memcmp(ra.data(), rb.data(), ra.size() * 4) == 0);
                    CHECK(std::memcmp(ga.data(), gb.data(), ga.size() * 4) == 0);
                }
            }
        }
    }
}

TEST_CASE("nmp: heads whose bound overflows to NaN do not count, identically on every kernel") {
    // A finite query can make q·k overflow: +inf + -inf = NaN in a head's sum.
    // The group score ignores such a head (every kernel, the same floats);
    // a group whose heads are all NaN scores -inf.
    std::mt19937 rng(23);
    for (auto gq :
         {nmp::Geometry{2, 128, 8}, nmp::Geometry{2, 64, 4}, nmp::Geometry{2, 32, 3}, nmp::Geometry{1, 16, 1}}) {
        CAPTURE(gq.q_per_kv);
        auto s = make_pages(rng, 9, 16, gq.channels(), 3.0f);
        auto q = random_q(rng, gq.q_len());
        // Head 0's sum is NaN; with one head per group, group 0 has no other.
        for (uint32_t c = 0; c < gq.head_dim; c++) q[c] = (c % 2) ? -3e38f : 3e38f;
        std::vector<float> a(size_t(gq.kv_heads) * 9), b(a.size());
        nmp::ScoreOptions o;
        o.impl = nmp::Impl::scalar;
        REQUIRE(nmp::score_pages(gq, q.data(), q.size(), s.ptrs.data(), 9, a.data(), o) == SPECKV_OK);
        for (size_t p = 0; p < 9; p++) {
            CHECK(!std::isnan(a[p]));
            if (gq.q_per_kv == 1) CHECK(a[p] == -INFINITY);
            else CHECK(std::isfinite(a[p]));
        }
        for (auto impl : {nmp::Impl::avx2, nmp::Impl::avx512}) {
            if (!nmp::impl_available(impl)) continue;
            CAPTURE(nmp::impl_name(impl));
            o.impl = impl;
            REQUIRE(nmp::score_pages(gq, q.data(), q.size(), s.ptrs.data(), 9, b.data(), o) == SPECKV_OK);
            CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
        }
    }
}

TEST_CASE("nmp: page ranges scored into one table (stride) equal one call") {
    std::mt19937 rng(13);
    nmp::Geometry g{4, 16, 2};
    auto s = make_pages(rng, 50, 16, g.channels());
    auto q = random_q(rng, g.q_len());
    std::vector<float> whole(4 * 50), parts(4 * 50, -1.0f);
    REQUIRE(nmp::score_pages(g, q.data(), q.size(), s.ptrs.data(), 50, whole.data()) == SPECKV_OK);
    nmp::ScoreOptions o;
    o.stride = 50;
    REQUIRE(nmp::score_pages(g, q.data(), q.size(), s.ptrs.data(), 20, parts.data(), o) == SPECKV_OK);
    REQUIRE(nmp::score_pages(g, q.data(), q.size(), s.ptrs.data() + 20, 30, parts.data() + 20, o) == SPECKV_OK);
    CHECK(std::memcmp(whole.data(), parts.data(), whole.size() * 4) == 0);
    o.stride = 10;
    CHECK(nmp::score_pages(g, q.data(), q.size(), s.ptrs.data(), 20, parts.data(), o) == SPECKV_EINVAL);
}
