// SPDX-License-Identifier: Apache-2.0
// Heat: each signal moves the score the right way; thresholds follow
// pressure and miss rate within their bounds.
#include <doctest/doctest.h>

#include <cmath>

#include "tiers/heat.h"

using namespace speckv;

namespace {
constexpr uint64_t kMs = 1000000;
std::unique_ptr<HeatTracker> tracker(const HeatParams &p = {}) {
    std::unique_ptr<HeatTracker> h;
    REQUIRE(HeatTracker::create(p, &h) == SPECKV_OK);
    return h;
}
}  // namespace

TEST_CASE("heat: parameters out of bounds are refused") {
    std::unique_ptr<HeatTracker> h;
    HeatParams p;
    p.w_recency = 1.5;
    CHECK(HeatTracker::create(p, &h) == SPECKV_EINVAL);
    p = {}, p.w_recency = p.w_frequency = p.w_position = p.w_sharing = 0;
    CHECK(HeatTracker::create(p, &h) == SPECKV_EINVAL);
    p = {}, p.t_cold = 0.55;  // closer to t_hot than min_gap
    CHECK(HeatTracker::create(p, &h) == SPECKV_EINVAL);
    p = {}, p.tau_recency_ms = NAN;
    CHECK(HeatTracker::create(p, &h) == SPECKV_EINVAL);
    p = {}, p.smoothing = 0;
    CHECK(HeatTracker::create(p, &h) == SPECKV_EINVAL);
    CHECK(HeatTracker::create(HeatParams{}, &h) == SPECKV_OK);
}

TEST_CASE("heat: recency, frequency, position, sharing") {
    auto h = tracker();
    uint64_t now = 10000 * kMs;
    CHECK(h->score(1, now) == 0.0);  // never seen
    h->touch(1, now - 1 * kMs);
    h->touch(2, now - 500 * kMs);
    CHECK(h->score(1, now) > h->score(2, now));  // recent beats old
    for (int i = 0; i < 10; i++) h->touch(3, now - 500 * kMs);
    CHECK(h->score(3, now) > h->score(2, now));  // frequent beats rare, same age
    h->touch(4, now - 100 * kMs);
    h->touch(5, now - 100 * kMs);
    h->set_position(4, 0, 4000);      // attention sink
    h->set_position(5, 2000, 4000);   // the middle
    CHECK(h->score(4, now) > h->score(5, now));
    h->touch(6, now - 100 * kMs);
    h->set_position(6, 3900, 4000);   // local window
    CHECK(h->score(6, now) == doctest::Approx(h->score(4, now)));
    h->touch(7, now - 100 * kMs);
    h->set_position(7, 2000, 4000);
    h->set_sharing(7, 4);             // a shared prefix block
    CHECK(h->score(7, now) > h->score(5, now));
    for (uint64_t b = 1; b <= 7; b++) {
        CHECK(h->score(b, now) >= 0.0);
        CHECK(h->score(b, now) <= 1.0);
    }
    // The exact mean for one block touched once 100 ms ago, in the middle,
    // one owner: R = e^(-100/50), f = e^(-100/2000), F = f/(f+4), P = 0.3, S = 0.
    double f = std::exp(-0.05);
    double want = 0.4 * std::exp(-2.0) + 0.3 * f / (f + 4) + 0.2 * 0.3;
    CHECK(h->score(5, now) == doctest::Approx(want).epsilon(1e-6));
    // Decay: the same block later is colder.
    CHECK(h->score(1, now + 1000 * kMs) < h->score(1, now));
    h->forget(1);
    CHECK(h->score(1, now) == 0.0);
    CHECK(h->size() == 6);
}

TEST_CASE("heat: promotion, demotion and candidates") {
    auto h = tracker();
    uint64_t now = 1000 * kMs;
    for (int i = 0; i < 20; i++) h->touch(1, now);
    h->set_position(1, 0, 100);
    h->touch(2, now - 900 * kMs);
    h->set_position(2, 5000, 10000);
    CHECK(h->classify(1, now) == HeatMove::kPromote);
    CHECK(h->classify(2, now) == HeatMove::kDemote);
    std::vector<std::pair<uint64_t, double>> c;
    h->coldest(now, 10, &c);
    REQUIRE(c.size() == 1);
    CHECK(c[0].first == 2);
    h->hottest(now, 10, &c);
    REQUIRE(c.size() == 1);
    CHECK(c[0].first == 1);
}

TEST_CASE("heat: thresholds follow pressure and misses, within bounds") {
    auto h = tracker();
    double th0 = h->t_hot(), tc0 = h->t_cold();
    for (int i = 0; i < 50; i++) h->adapt(1.0, 0.0);  // memory full, no misses: demote more, promote less
    CHECK(h->t_cold() > tc0);
    CHECK(h->t_hot() > th0);
    CHECK(h->t_hot() <= h->params().t_max + 1e-12);
    CHECK(h->t_hot() - h->t_cold() >= h->params().min_gap - 1e-9);
    auto g = tracker();
    for (int i = 0; i < 50; i++) g->adapt(0.2, 0.9);  // room and many misses: promote more, demote less
    CHECK(g->t_hot() < th0);
    CHECK(g->t_cold() < tc0);
    CHECK(g->t_cold() >= g->params().t_min - 1e-12);
    CHECK(g->t_hot() - g->t_cold() >= g->params().min_gap - 1e-9);
    // Back at the targets: the thresholds return to their initial values.
    for (int i = 0; i < 200; i++) g->adapt(g->params().pressure_target, g->params().miss_target);
    CHECK(g->t_hot() == doctest::Approx(th0).epsilon(1e-3));
    CHECK(g->t_cold() == doctest::Approx(tc0).epsilon(1e-3));
    // Garbage in: clamped, never NaN.
    g->adapt(NAN, 7);
    CHECK_FALSE(std::isnan(g->t_hot()));
}
