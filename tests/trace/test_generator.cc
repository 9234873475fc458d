// SPDX-License-Identifier: Apache-2.0
// Workload generators: determinism for a seed, Poisson arrivals, length ranges,
// shared prefixes.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "trace.h"

using namespace speckv_trace;

namespace {
std::vector<Request> gen(GenOptions o) {
    Generator g(o);
    std::vector<Request> v;
    Request r;
    while (g.next(&r)) v.push_back(r);
    return v;
}
}  // namespace

TEST_CASE("generator: same seed, same trace; another seed, another trace") {
    GenOptions o;
    o.count = 500, o.workload = "code", o.rate = 5, o.prefix_share = 0.3;
    auto a = gen(o), b = gen(o);
    REQUIRE(a.size() == 500);
    bool same = true;
    for (size_t i = 0; i < a.size(); ++i)
        same = same && a[i].arrival_ms == b[i].arrival_ms && a[i].input_len == b[i].input_len &&
               a[i].output_len == b[i].output_len && a[i].hash_ids == b[i].hash_ids;
    CHECK(same);
    o.seed = 2;
    auto c = gen(o);
    size_t differ = 0;
    for (size_t i = 0; i < a.size(); ++i) differ += a[i].input_len != c[i].input_len;
    CHECK(differ > 400);
}

TEST_CASE("generator: Poisson arrivals at the rate, exponential gaps") {
    GenOptions o;
    o.count = 20000, o.rate = 8, o.seed = 7;
    auto v = gen(o);
    double n = static_cast<double>(v.size() - 1), mean = v.back().arrival_ms / n / 1000.0;
    CHECK(mean == doctest::Approx(1.0 / 8).epsilon(0.03));
    // Exponential: the share of gaps above the mean is e^-1; the CV is 1.
    double above = 0, sq = 0;
    for (size_t i = 1; i < v.size(); ++i) {
        double g = (v[i].arrival_ms - v[i - 1].arrival_ms) / 1000.0;
        above += g > mean;
        sq += (g - mean) * (g - mean);
        CHECK(g >= 0);
    }
    CHECK(above / n == doctest::Approx(std::exp(-1.0)).epsilon(0.04));
    CHECK(std::sqrt(sq / n) / mean == doctest::Approx(1.0).epsilon(0.05));
}

TEST_CASE("generator: the paper's four workloads stay in their ranges, uniformly") {
    for (auto &w : workloads()) {
        CAPTURE(w.name);
        GenOptions o;
        o.workload = w.name, o.count = 4000;
        auto v = gen(o);
        double si = 0, so = 0;
        uint32_t mn = ~0u, mx = 0;
        for (auto &r : v) {
            CHECK(r.input_len >= w.in_lo);
            CHECK(r.input_len <= w.in_hi);
            CHECK(r.output_len >= w.out_lo);
            CHECK(r.output_len <= w.out_hi);
            CHECK(r.hash_ids.size() == (r.input_len + 511) / 512);
            si += r.input_len, so += r.output_len;
            mn = std::min(mn, r.input_len), mx = std::max(mx, r.input_len);
        }
        CHECK(si / v.size() == doctest::Approx((w.in_lo + w.in_hi) / 2.0).epsilon(0.02));
        CHECK(so / v.size() == doctest::Approx((w.out_lo + w.out_hi) / 2.0).epsilon(0.02));
        if (w.in_hi > w.in_lo + 100) CHECK(mx - mn > (w.in_hi - w.in_lo) * 9 / 10);  // both ends reached
    }
    CHECK(find_workload("chat") != nullptr);
    CHECK(find_workload("nope") == nullptr);
}

TEST_CASE("generator: shared prefixes give repeated leading hash ids, the rest are fresh") {
    GenOptions o;
    o.count = 2000, o.workload = "qa", o.prefix_share = 0.5, o.prefixes = 4, o.prefix_tokens = 1024, o.block_tokens = 256;
    auto v = gen(o);
    size_t with = 0;
    std::set<uint64_t> firsts, all;
    size_t refs = 0;
    for (auto &r : v) {
        CHECK(r.hash_ids.size() == (r.input_len + 255) / 256);
        if (r.input_len > 1024) {
            ++with;
            firsts.insert(r.hash_ids[0]);
        }
        for (auto h : r.hash_ids) all.insert(h), ++refs;
    }
    CHECK(with == doctest::Approx(1000).epsilon(0.1));
    CHECK(firsts.size() == 4);
    // 4 prefixes x 4 blocks shared; everything else unique.
    CHECK(all.size() == refs - (with * 4 - 16));
}
