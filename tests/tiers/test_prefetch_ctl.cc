// SPDX-License-Identifier: Apache-2.0
// The prefetch policy: parameter bounds, the bandit, beta's feedback, the
// counters' arithmetic, the learned predictor, and the policy end to end on a
// synthetic decode stream beside no-prefetch and an oracle.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "config/config.h"
#include "decode_sim.h"
#include "prefetch/prefetch_ctl.h"

using namespace speckv;

namespace {
std::unique_ptr<PrefetchController> controller(const PrefetchParams &p = {}) {
    std::unique_ptr<PrefetchController> c;
    REQUIRE(PrefetchController::create(p, nullptr, &c) == SPECKV_OK);
    return c;
}
}  // namespace

TEST_CASE("prefetch: parameters out of bounds are refused at create") {
    std::unique_ptr<PrefetchController> c;
    auto bad = [&](auto set) {
        PrefetchParams p;
        set(p);
        return PrefetchController::create(p, nullptr, &c);
    };
    CHECK(bad([](PrefetchParams &p) { p.k_min = 5, p.k_max = 4; }) == SPECKV_EINVAL);
    CHECK(bad([](PrefetchParams &p) { p.k_max = 65; }) == SPECKV_EINVAL);
    CHECK(bad([](PrefetchParams &p) { p.k_min = 0; }) == SPECKV_EINVAL);
    CHECK(bad([](PrefetchParams &p) { p.kappa = 0; }) == SPECKV_EINVAL);
    CHECK(bad([](PrefetchParams &p) { p.kappa = 1.5; }) == SPECKV_EINVAL);
    CHECK(bad([](PrefetchParams &p) { p.theta_target = 0; }) == SPECKV_EINVAL);
    CHECK(bad([](PrefetchParams &p) { p.beta_min = 0.6, p.beta_max = 0.5; }) == SPECKV_EINVAL);
    CHECK(bad([](PrefetchParams &p) { p.ucb_c = NAN; }) == SPECKV_EINVAL);
    CHECK(bad([](PrefetchParams &p) { p.bandwidth = 0; }) == SPECKV_EINVAL);
    CHECK(bad([](PrefetchParams &p) { p.tick_ns = 10; }) == SPECKV_EINVAL);
    CHECK(std::string(last_error()).find("prefetch.tick_ns") != std::string::npos);
    CHECK(bad([](PrefetchParams &) {}) == SPECKV_OK);
}

TEST_CASE("prefetch: the bounds of keyed parameters are the config key table's") {
    std::unique_ptr<PrefetchController> c;
    auto rc = [&](auto set) {
        PrefetchParams p;
        set(p);
        return PrefetchController::create(p, nullptr, &c);
    };
    const KeySpec *kmax = find_key("prefetch.k_max"), *kappa = find_key("prefetch.kappa_milli"),
                  *tick = find_key("prefetch.tick_us"), *bw = find_key("prefetch.bandwidth");
    REQUIRE((kmax && kappa && tick && bw));
    CHECK(rc([&](PrefetchParams &p) { p.k_max = uint32_t(kmax->max); }) == SPECKV_OK);
    CHECK(rc([&](PrefetchParams &p) { p.k_max = uint32_t(kmax->max) + 1; }) == SPECKV_EINVAL);
    CHECK(rc([&](PrefetchParams &p) { p.kappa = double(kappa->min) / 1000; }) == SPECKV_OK);
    CHECK(rc([&](PrefetchParams &p) { p.kappa = double(kappa->min) / 1000 / 2; }) == SPECKV_EINVAL);
    CHECK(std::string(last_error()).find("prefetch.kappa_milli") != std::string::npos);
    CHECK(rc([&](PrefetchParams &p) { p.tick_ns = uint64_t(tick->min) * 1000; }) == SPECKV_OK);
    CHECK(rc([&](PrefetchParams &p) { p.tick_ns = uint64_t(tick->min) * 1000 - 1; }) == SPECKV_EINVAL);
    CHECK(rc([&](PrefetchParams &p) { p.bandwidth = double(bw->max); }) == SPECKV_OK);
    CHECK(rc([&](PrefetchParams &p) { p.bandwidth = double(bw->max) * 2; }) == SPECKV_EINVAL);
}

TEST_CASE("UCB converges to the best arm on a synthetic payoff") {
    const double p[] = {0.2, 0.35, 0.8, 0.6, 0.3, 0.1};
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> u(0, 1);
    Ucb b(6, 0.5);
    int best_pulls_late = 0;
    for (int t = 0; t < 4000; t++) {
        uint32_t a = b.choose();
        if (t < 6) CHECK(a == uint32_t(t));  // every arm tried once first
        b.update(a, u(rng) < p[a] ? 1.0 : 0.0);
        if (t >= 3000) best_pulls_late += a == 2;
    }
    CHECK(b.best() == 2);
    CHECK(b.pulls(2) > 0.7 * b.total());
    CHECK(best_pulls_late > 850);  // of the last 1000
    CHECK(b.mean(2) == doctest::Approx(0.8).epsilon(0.05));
}

namespace {
// Layer-ahead only, nothing learnt: the depth is the only thing that varies.
struct LayerAhead final : Predictor {
    void on_hint(uint64_t, uint32_t, uint64_t) override {}
    void on_access(PrefetchUnit) override {}
    void on_request_end(uint64_t) override {}
    void predict(PrefetchUnit from, uint32_t depth, std::vector<PrefetchUnit> *out) override {
        out->clear();
        for (uint32_t i = 1; i <= depth; i++) out->push_back({from.request, from.layer + i});
    }
};
}  // namespace

TEST_CASE("the controller's depth converges where the payoff peaks") {
    PrefetchParams pp;
    pp.k_min = 1, pp.k_max = 8, pp.ucb_c = 0.2;
    std::unique_ptr<PrefetchController> c;
    REQUIRE(PrefetchController::create(pp, std::make_unique<LayerAhead>(), &c) == SPECKV_OK);
    // Payoff of depth k: too shallow stalls, too deep wastes; best at k = 3.
    // The outcomes land on unit (r, 1), which the decision at (r, 0) planned.
    PrefetchController::Plan plan, next;
    int late3 = 0;
    for (int t = 0; t < 3000; t++) {
        uint64_t req = 1 + t % 4;
        c->plan(req, 0, &plan);
        uint32_t k = plan.depth;
        REQUIRE(!plan.units.empty());
        CHECK(plan.units[0] == PrefetchUnit{req, 1});
        uint32_t used = 10, wasted = k > 3 ? 2 * (k - 3) : 0, late = k < 3 ? 3 * (3 - k) : 0;
        for (uint32_t i = 0; i < used; i++) c->on_resolved(req, 1, true, 4096);
        for (uint32_t i = 0; i < wasted; i++) c->on_resolved(req, 1, false, 4096);
        if (late) c->on_access(req, 1, AccessOutcome::kL2Late, late);
        c->plan(req, 1, &next);  // (r, 1) runs: its planner's account is closed
        if (t >= 2000) late3 += k == 3;
    }
    CHECK(c->global_bandit().best() == 3 - pp.k_min);
    CHECK(late3 > 700);
    RequestAccuracy acc;
    REQUIRE(c->accuracy(1, &acc));
    CHECK(acc.plans == 1500);
    CHECK(acc.late > 0);
}

TEST_CASE("beta falls under overload, recovers when idle, stays in bounds") {
    PrefetchParams pp;
    pp.kappa = 0.5, pp.theta_target = 0.8, pp.util_smoothing = 1.0, pp.beta_min = 0.05, pp.beta_recover = 0.1;
    pp.bandwidth = 1e9, pp.tick_ns = 1000000;  // 1 GB/s, 1 ms ticks: 1 MB per tick is U = 1
    auto c = controller(pp);
    uint64_t t = 5000000;
    CHECK_FALSE(c->tick(t));  // the first tick only starts the clock
    CHECK(c->beta() == 1.0);
    c->on_transfer(1000000);
    t += 1000000;
    REQUIRE(c->tick(t));
    CHECK(c->utilisation() == doctest::Approx(1.0));
    CHECK(c->beta() == doctest::Approx(1.0 * (1 - 0.5 * (1.0 - 0.8))));  // 0.9
    CHECK_FALSE(c->tick(t + 10));  // before the period: no update
    double prev = c->beta();
    for (int i = 0; i < 100; i++) {  // 150% of the link, for a while
        c->on_transfer(1500000);
        t += 1000000;
        c->tick(t);
        CHECK(c->beta() <= prev);
        prev = c->beta();
    }
    CHECK(c->beta() == doctest::Approx(pp.beta_min));
    PrefetchController::Plan plan;
    c->plan(1, 0, &plan);
    CHECK(plan.effective == uint32_t(std::floor(c->beta() * plan.depth + 0.5)));
    // Under the target but busy: beta still recovers, slower than when idle.
    c->on_transfer(700000);
    t += 1000000;
    c->tick(t);
    double busy_step = c->beta() - pp.beta_min;
    CHECK(busy_step > 0);
    double before = c->beta();
    t += 1000000;
    c->tick(t);  // idle
    CHECK(c->beta() - before > busy_step);
    for (int i = 0; i < 20; i++) {
        t += 1000000;
        c->tick(t);
    }
    CHECK(c->beta() == doctest::Approx(1.0));
    PrefetchStats s = c->stats();
    CHECK(s.history.size() == pp.history);
    CHECK(s.history.back().beta == doctest::Approx(1.0));
}

TEST_CASE("hit rate, precision and waste: the definitions' arithmetic") {
    auto c = controller();
    PrefetchController::Plan plan;
    c->plan(1, 0, &plan);
    c->on_issued(1, 10, 40960);
    for (int i = 0; i < 9; i++) c->on_resolved(1, 0, true, 4096);
    c->on_resolved(1, 0, false, 4096);
    c->on_resolved(77, 0, false, 4096);  // an ended / unknown request: counted, not tracked
    c->on_access(1, 0, AccessOutcome::kL1Hit, 5);
    c->on_access(1, 0, AccessOutcome::kL2Hit, 3);
    c->on_access(1, 0, AccessOutcome::kMiss, 1);
    PrefetchStats s = c->stats();
    CHECK(s.accesses == 9);
    CHECK(s.hit_rate() == doctest::Approx(0.75));  // L1 hits are outside the definition
    CHECK(s.used == 9);
    CHECK(s.wasted == 2);
    CHECK(s.wasted_bytes == 8192);
    CHECK(s.precision() == doctest::Approx(9.0 / 11));
    CHECK(s.waste() == doctest::Approx(2.0 / 11));
    CHECK(s.unknown == 1);
    CHECK(s.issued == 10);
    RequestAccuracy a;
    REQUIRE(c->accuracy(1, &a));
    CHECK(a.issued == 10);
    CHECK(a.used == 9);
    CHECK(a.wasted == 1);
    CHECK(a.precision() == doctest::Approx(0.9));
    CHECK(a.l2_hits == 3);
    CHECK(a.misses == 1);
    CHECK_FALSE(c->accuracy(77, &a));
    c->on_request_end(1);
    CHECK_FALSE(c->accuracy(1, &a));
    c->on_request_end(12345);  // unknown: ignored
}

TEST_CASE("the learned predictor: layer-ahead, batch order, request end") {
    auto p = make_learned_predictor();
    std::vector<PrefetchUnit> out;
    // Request-major: each request runs all its layers.
    for (int step = 0; step < 3; step++)
        for (uint64_t r : {10, 11})
            for (uint32_t l = 0; l < 4; l++) p->on_access({r, l});
    p->predict({10, 1}, 2, &out);
    REQUIRE(out.size() == 2);
    CHECK(out[0] == PrefetchUnit{10, 2});
    CHECK(out[1] == PrefetchUnit{10, 3});
    p->predict({10, 3}, 2, &out);  // after the last layer: the next request in the batch
    REQUIRE(out.size() == 2);
    CHECK(out[0] == PrefetchUnit{11, 0});
    CHECK(out[1] == PrefetchUnit{11, 1});

    // Layer-major (vLLM-style): the batch runs layer by layer. Relearnt.
    auto q = make_learned_predictor();
    for (int step = 0; step < 3; step++)
        for (uint32_t l = 0; l < 4; l++)
            for (uint64_t r : {1, 2, 3}) q->on_access({r, l});
    q->predict({1, 2}, 3, &out);
    REQUIRE(out.size() == 3);
    CHECK(out[0] == PrefetchUnit{2, 2});
    CHECK(out[1] == PrefetchUnit{3, 2});
    CHECK(out[2] == PrefetchUnit{1, 3});
    // Request 2 ends: nothing predicts it any more.
    q->on_request_end(2);
    q->predict({1, 2}, 3, &out);
    for (auto &u : out) CHECK(u.request != 2);
    // A unit never seen: the next layer of the same request.
    q->predict({50, 1}, 1, &out);
    REQUIRE(out.size() == 1);
    CHECK(out[0] == PrefetchUnit{50, 2});
    q->predict({50, 1}, 0, &out);
    CHECK(out.empty());
}

TEST_CASE("plans hand out prefix blocks of new requests, scaled by beta") {
    PrefetchParams pp;
    pp.prefix_batch = 4;
    auto c = controller(pp);
    std::vector<uint64_t> prefix = {100, 101, 102, 103, 104, 105};
    c->on_new_request(9, prefix);
    PrefetchController::Plan plan;
    c->plan(1, 0, &plan);
    CHECK(plan.prefix_blocks == std::vector<uint64_t>{100, 101, 102, 103});
    c->plan(1, 1, &plan);
    CHECK(plan.prefix_blocks == std::vector<uint64_t>{104, 105});
    c->plan(1, 2, &plan);
    CHECK(plan.prefix_blocks.empty());
    RequestAccuracy a;
    CHECK(c->accuracy(9, &a));  // tracked from its arrival
}

TEST_CASE("max_requests bounds the per-request state") {
    PrefetchParams pp;
    pp.max_requests = 8;
    auto c = controller(pp);
    PrefetchController::Plan plan;
    for (uint64_t r = 1; r <= 100; r++) c->plan(r, 0, &plan);
    CHECK(c->stats().requests == 8);
    RequestAccuracy a;
    CHECK(c->accuracy(100, &a));
    CHECK_FALSE(c->accuracy(1, &a));
}

TEST_CASE("synthetic decode stream: learned prefetch beside none and the oracle") {
    sim::SimConfig cfg;
    auto trace = sim::make_trace(cfg);
    auto none = sim::run(cfg, trace, sim::Policy::kNone);
    auto learned = sim::run(cfg, trace, sim::Policy::kLearned);
    auto oracle = sim::run(cfg, trace, sim::Policy::kOracle);
    MESSAGE("hit rate none " << none.hit_rate() << " learned " << learned.hit_rate() << " oracle " << oracle.hit_rate());
    MESSAGE("precision learned " << learned.precision() << " oracle " << oracle.precision());
    MESSAGE("stall none " << none.stall << " learned " << learned.stall << " oracle " << oracle.stall
                          << "; mean depth " << learned.mean_depth);
    CHECK(none.hit_rate() == 0.0);
    CHECK(oracle.precision() > 0.99);
    CHECK(oracle.hit_rate() > 0.9);
    CHECK(learned.hit_rate() > 0.8);
    CHECK(learned.hit_rate() > oracle.hit_rate() - 0.1);
    CHECK(learned.precision() > 0.8);
    CHECK(learned.stall < 0.5 * none.stall);
}

TEST_CASE("synthetic decode stream: a slow link makes beta back off") {
    sim::SimConfig cfg;
    cfg.xfer = 1.5;  // demand alone needs 150% of the link
    cfg.steps = 60;
    auto trace = sim::make_trace(cfg);
    auto slow = sim::run(cfg, trace, sim::Policy::kLearned);
    cfg.xfer = 0.5;  // the same stream on a link with room
    auto fast = sim::run(cfg, trace, sim::Policy::kLearned);
    MESSAGE("beta min: slow link " << slow.beta_min << ", fast link " << fast.beta_min);
    CHECK(fast.beta_min > 0.9);
    CHECK(slow.beta_min < 0.7);
    CHECK(slow.beta_min < fast.beta_min - 0.25);
}

TEST_CASE("the learned predictor follows a batch reordered between steps") {
    auto q = make_learned_predictor();
    std::vector<PrefetchUnit> out;
    for (int step = 0; step < 2; step++)
        for (uint32_t l = 0; l < 4; l++)
            for (uint64_t r : {1, 2, 3}) q->on_access({r, l});
    for (uint64_t r : {3, 1, 2}) q->on_access({r, 0});  // the next step, reordered: layer 0 shows it
    q->on_access({3, 1});                                // (and that 2 now wraps to 3's next layer)
    q->predict({3, 1}, 3, &out);
    REQUIRE(out.size() == 3);
    CHECK(out[0] == PrefetchUnit{1, 1});
    CHECK(out[1] == PrefetchUnit{2, 1});
    CHECK(out[2] == PrefetchUnit{3, 2});
    q->predict({1, 3}, 1, &out);  // request-major fallbacks never leave the layer range
    REQUIRE(out.size() == 1);
    CHECK(out[0].layer < 4);
}

TEST_CASE("synthetic decode stream: an engine that reorders its batch every step") {
    sim::SimConfig cfg;
    cfg.shuffle = true;
    auto trace = sim::make_trace(cfg);
    auto learned = sim::run(cfg, trace, sim::Policy::kLearned);
    auto oracle = sim::run(cfg, trace, sim::Policy::kOracle);
    MESSAGE("shuffled: hit learned " << learned.hit_rate() << " oracle " << oracle.hit_rate() << ", precision "
                                     << learned.precision());
    CHECK(learned.hit_rate() > oracle.hit_rate() - 0.06);
    CHECK(learned.precision() > 0.9);
}
