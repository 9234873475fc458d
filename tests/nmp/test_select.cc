// SPDX-License-Identifier: Apache-2.0
// Top-k selection: the brute-force answer, deterministic ties, forced pages,
// the steady rule lowers churn, bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "nmp_test_util.h"
#include "util/status.h"

using namespace nmp_test;

namespace {

std::vector<uint32_t> brute(const std::vector<float> &s, uint32_t k, uint32_t recent, std::vector<uint32_t> pinned) {
    const uint32_t n = uint32_t(s.size());
    std::set<uint32_t> f(pinned.begin(), pinned.end());
    for (uint32_t i = n - std::min(recent, n); i < n; i++) f.insert(i);
    std::vector<uint32_t> c;
    for (uint32_t i = 0; i < n; i++)
        if (!f.count(i)) c.push_back(i);
    std::sort(c.begin(), c.end(), [&](uint32_t a, uint32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
    std::vector<uint32_t> out(f.begin(), f.end());
    out.insert(out.end(), c.begin(), c.begin() + (k - f.size()));
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST_CASE("nmp: selection equals the sorted top-k, ties to the lower page id") {
    std::mt19937 rng(2);
    std::uniform_int_distribution<int> coarse(0, 5);  // many ties
    for (int r = 0; r < 50; r++) {
        const uint32_t n = 1 + rng() % 300;
        std::vector<float> s(n);
        for (auto &x : s) x = float(coarse(rng));
        const uint32_t recent = rng() % 3;
        std::vector<uint32_t> pinned;
        if (n > 4) pinned = {0, n / 2};
        std::set<uint32_t> f(pinned.begin(), pinned.end());
        for (uint32_t i = n - std::min(recent, n); i < n; i++) f.insert(i);
        if (f.size() > n) continue;
        const uint32_t k = uint32_t(f.size()) + rng() % (n - f.size() + 1);
        if (k == 0) continue;
        std::vector<uint32_t> out(k);
        uint32_t entered = 99;
        nmp::SelectParams p;
        p.budget = k;
        p.recent = recent;
        REQUIRE(nmp::select_pages(s.data(), n, p, pinned.data(), pinned.size(), nullptr, 0, out.data(), k, &entered) ==
                SPECKV_OK);
        CHECK(out == brute(s, k, recent, pinned));
        CHECK(entered == k);
    }
    // All equal: the lowest ids win, plus the most recent page.
    std::vector<float> s(10, 1.0f);
    std::vector<uint32_t> out(3);
    nmp::SelectParams p;
    p.budget = 3;
    p.recent = 1;
    REQUIRE(nmp::select_pages(s.data(), 10, p, nullptr, 0, nullptr, 0, out.data(), 3, nullptr) == SPECKV_OK);
    CHECK(out == std::vector<uint32_t>{0, 1, 9});
}

TEST_CASE("nmp: selection order over signed zeros, infinities, negatives and tiny values") {
    // The selection compares integer keys made from the score bits; these
    // are the values where that mapping could go wrong.
    const float vals[] = {0.0f,   -0.0f,   INFINITY, -INFINITY, -1.0f, 1.0f,
                          -1e-45f, 1e-45f, -3.4e38f, 3.4e38f,   -2.0f, 0.5f};
    std::mt19937 rng(17);
    for (int r = 0; r < 200; r++) {
        const uint32_t n = 1 + rng() % 40;
        std::vector<float> s(n);
        for (auto &x : s) x = vals[rng() % (sizeof vals / sizeof vals[0])];
        const uint32_t k = 1 + rng() % n;
        std::vector<uint32_t> out(k);
        nmp::SelectParams p;
        p.budget = k;
        p.recent = 0;
        REQUIRE(nmp::select_pages(s.data(), n, p, nullptr, 0, nullptr, 0, out.data(), k, nullptr) == SPECKV_OK);
        CHECK(out == brute(s, k, 0, {}));
    }
}

TEST_CASE("nmp: recent and pinned pages are selected whatever their score") {
    std::vector<float> s = {-5, 9, 8, 7, -9, -9};
    std::vector<uint32_t> out(4);
    const uint32_t pin = 0;
    nmp::SelectParams p;
    p.budget = 4;
    p.recent = 2;
    REQUIRE(nmp::select_pages(s.data(), 6, p, &pin, 1, nullptr, 0, out.data(), 4, nullptr) == SPECKV_OK);
    CHECK(out == std::vector<uint32_t>{0, 1, 4, 5});
}

TEST_CASE("nmp: the steady rule keeps incumbents within the band and lowers churn") {
    std::mt19937 rng(9);
    std::normal_distribution<float> nd(0, 1);
    const uint32_t n = 256, k = 32;
    std::vector<float> base(n), s(n);
    for (auto &x : base) x = 2.0f * nd(rng);
    auto run = [&](float band) {
        std::mt19937 r2(4);
        std::normal_distribution<float> jitter(0, 0.3f);
        std::vector<uint32_t> prev, out(k);
        uint64_t churn = 0;
        for (int step = 0; step < 200; step++) {
            for (uint32_t i = 0; i < n; i++) s[i] = base[i] + jitter(r2);
            nmp::SelectParams p;
            p.budget = k;
            p.recent = 1;
            p.band = band;
            uint32_t entered = 0;
            REQUIRE(nmp::select_pages(s.data(), n, p, nullptr, 0, prev.data(), prev.size(), out.data(), k, &entered) ==
                    SPECKV_OK);
            // Invariants: k distinct ids, the recent page in, every incumbent
            // dropped was below cut - band.
            CHECK(std::set<uint32_t>(out.begin(), out.end()).size() == k);
            CHECK(std::binary_search(out.begin(), out.end(), n - 1));
            if (step > 0) churn += entered;
            if (band > 0 && !prev.empty()) {
                std::vector<float> cand;
                for (uint32_t i = 0; i + 1 < n; i++) cand.push_back(s[i]);
                std::nth_element(cand.begin(), cand.begin() + (k - 2), cand.end(), std::greater<float>());
                const float cut = cand[k - 2];
                for (uint32_t id : prev)
                    if (!std::binary_search(out.begin(), out.end(), id)) CHECK(s[id] < cut - band + 1e-6f);
            }
            prev = out;
        }
        return double(churn) / 199.0;
    };
    const double c0 = run(0), c1 = run(0.5f), c2 = run(1.0f);
    MESSAGE("churn per step: band 0 " << c0 << ", band 0.5 " << c1 << ", band 1.0 " << c2);
    CHECK(c1 < c0);
    CHECK(c2 < c1);
    CHECK(c2 < 0.5 * c0);
}

TEST_CASE("nmp: selection bad input") {
    std::vector<float> s(8, 1.0f);
    std::vector<uint32_t> out(8);
    nmp::SelectParams p;
    p.budget = 0;
    CHECK(nmp::select_pages(s.data(), 8, p, nullptr, 0, nullptr, 0, out.data(), 8, nullptr) == SPECKV_EINVAL);
    CHECK(std::string(speckv::last_error()).find("budget is 0") != std::string::npos);
    p.budget = 9;
    CHECK(nmp::select_pages(s.data(), 8, p, nullptr, 0, nullptr, 0, out.data(), 9, nullptr) == SPECKV_EINVAL);
    p.budget = 4;
    CHECK(nmp::select_pages(s.data(), 8, p, nullptr, 0, nullptr, 0, out.data(), 3, nullptr) == SPECKV_ERANGE);
    p.recent = 5;
    CHECK(nmp::select_pages(s.data(), 8, p, nullptr, 0, nullptr, 0, out.data(), 8, nullptr) == SPECKV_EINVAL);
    p.recent = 1;
    const uint32_t bad = 8;
    CHECK(nmp::select_pages(s.data(), 8, p, &bad, 1, nullptr, 0, out.data(), 8, nullptr) == SPECKV_EINVAL);
    p.band = -1;
    CHECK(nmp::select_pages(s.data(), 8, p, nullptr, 0, nullptr, 0, out.data(), 8, nullptr) == SPECKV_EINVAL);
    p.band = 0;
    s[2] = NAN;
    CHECK(nmp::select_pages(s.data(), 8, p, nullptr, 0, nullptr, 0, out.data(), 8, nullptr) == SPECKV_EINVAL);
    s[2] = 1;
    // Stale ids in prev (context shrank) are ignored, not an error.
    const uint32_t prev[] = {1, 100};
    p.band = 0.5f;
    uint32_t entered = 0;
    CHECK(nmp::select_pages(s.data(), 8, p, nullptr, 0, prev, 2, out.data(), 8, &entered) == SPECKV_OK);
    CHECK(entered == 3);
}

TEST_CASE("nmp: complement") {
    const uint32_t sel[] = {1, 3, 4};
    uint32_t out[8];
    CHECK(nmp::complement(sel, 3, 6, out) == 3);
    CHECK(out[0] == 0);
    CHECK(out[1] == 2);
    CHECK(out[2] == 5);
}

TEST_CASE("nmp: SIMD and scalar select the same pages") {
    if (!nmp::impl_available(nmp::Impl::avx2)) return;
    std::mt19937 rng(21);
    nmp::Geometry g{8, 128, 4};
    auto s = make_pages(rng, 64, 16, g.channels());
    auto q = random_q(rng, g.q_len());
    std::vector<float> a(8 * 64), b(8 * 64);
    nmp::ScoreOptions o;
    o.impl = nmp::Impl::scalar;
    REQUIRE(nmp::score_pages(g, q.data(), q.size(), s.ptrs.data(), 64, a.data(), o) == SPECKV_OK);
    o.impl = nmp::Impl::avx2;
    REQUIRE(nmp::score_pages(g, q.data(), q.size(), s.ptrs.data(), 64, b.data(), o) == SPECKV_OK);
    for (uint32_t k = 0; k < 8; k++) {
        std::vector<uint32_t> sa(8), sb(8);
        nmp::SelectParams p;
        p.budget = 8;
        REQUIRE(nmp::select_pages(a.data() + k * 64, 64, p, nullptr, 0, nullptr, 0, sa.data(), 8, nullptr) == 0);
        REQUIRE(nmp::select_pages(b.data() + k * 64, 64, p, nullptr, 0, nullptr, 0, sb.data(), 8, nullptr) == 0);
        CHECK(sa == sb);
    }
}
