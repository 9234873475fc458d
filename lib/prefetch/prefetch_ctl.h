// SPDX-License-Identifier: Apache-2.0
// The prefetch policy (docs/design.md §6), independent of where pages live:
//   - a Predictor says which (request, layer) units follow a given one;
//   - a UCB bandit per request picks the depth k (how many units ahead):
//       k* = argmax_k  mu_k + c * sqrt(2 ln T / N_k)
//     on the observed payoff. Each planned unit remembers the decision that
//     first planned it (request, arm); that decision is credited with the
//     unit's pages used, wasted and read late, whichever request owns them
//     (in a layer-major batch a request's plan covers the others' pages);
//   - the aggressiveness beta scales that depth down when the L3->L2 link is
//     busy:  beta(t+dt) = beta(t) * (1 - kappa * ReLU(U(t) - theta_target)),
//     U the measured utilisation against the configured bandwidth; when U is
//     under the target beta recovers by beta_recover * (1 - U/theta) per tick;
//   - per-request accuracy and the global counters, with the definitions
//     used everywhere (hit rate, precision, waste).
// The tier manager feeds it events and asks it for plans; it moves no data.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "util/status.h"

namespace speckv {

// Bounds: a parameter that a config key sets (k_min, k_max, ucb_c, kappa,
// theta_target, beta_min, bandwidth, tick_ns) is bounded by that key's
// [min, max] in the key table (lib/config/config.cc), in the parameter's unit;
// validate() reads them there. The others are bounded in validate().
struct PrefetchParams {
    uint32_t k_min = 1, k_max = 8;        // depth range in units; k_min <= k_max
    double ucb_c = 0.3;                   // exploration
    double prior_weight = 1;              // pulls per arm a new request borrows from the global bandit
    double waste_penalty = 1.0;           // payoff cost of a wasted page vs. a used one
    double kappa = 0.5;                   // beta decrease gain
    double theta_target = 0.8;            // target link utilisation
    double beta_min = 0.05, beta_max = 1; // beta_min <= beta_max, beta_max > 0
    double beta_recover = 0.1;            // recovery per tick at an idle link
    double util_smoothing = 0.5;          // EWMA weight of the newest utilisation sample
    double bandwidth = 8e9;               // configured L3->L2 bytes/s
    uint64_t tick_ns = 1000000;           // controller period
    uint32_t max_requests = 4096;         // requests tracked at once
    uint32_t prefix_batch = 64;           // prefix blocks handed out per plan at beta = 1
    uint32_t history = 64;                // (beta, U, k) samples kept
};

// SPECKV_OK or SPECKV_EINVAL naming the first parameter out of bounds.
int validate(const PrefetchParams &p);

struct PrefetchUnit {
    uint64_t request;
    uint32_t layer;
    bool operator==(const PrefetchUnit &o) const { return request == o.request && layer == o.layer; }
};

// What the controller learns from. Called under the controller's mutex:
// implementations need no locking of their own.
class Predictor {
  public:
    virtual ~Predictor() = default;
    // An engine's hint: `request` is about to run `layer` at token `pos`.
    virtual void on_hint(uint64_t request, uint32_t layer, uint64_t pos) = 0;
    // An observed read of a unit (once per unit step, not per page).
    virtual void on_access(PrefetchUnit u) = 0;
    virtual void on_request_end(uint64_t request) = 0;
    // A request joined the batch (continuous batching: usually where one left).
    virtual void on_new_request(uint64_t) {}
    // Up to `depth` distinct units expected after `from`, nearest first.
    virtual void predict(PrefetchUnit from, uint32_t depth, std::vector<PrefetchUnit> *out) = 0;
};

// The default: learns the successor of every unit from the access stream
// (which captures layer-ahead l+1, l+2 and the order requests run in a
// continuous batch, whatever the engine's schedule), falls back to the next
// layer of the same request (wrapping to layer 0) for units it has not seen.
// A finished request leaves a vacancy: predictions pass over it, and the next
// request to arrive takes its place in the learnt order (as a continuous
// batcher fills the slot), so a newcomer is predicted before its first step.
std::unique_ptr<Predictor> make_learned_predictor();

// UCB1 over `arms` arms with rewards in [0, 1].
class Ucb {
  public:
    Ucb(uint32_t arms, double c);
    // An untried arm first (lowest), then the argmax of the UCB index.
    uint32_t choose() const;
    void update(uint32_t arm, double reward);
    // Starts from another bandit's means, with at most `weight` pulls per arm.
    void seed(const Ucb &prior, double weight);
    double mean(uint32_t arm) const { return n_[arm] > 0 ? sum_[arm] / n_[arm] : 0.0; }
    double pulls(uint32_t arm) const { return n_[arm]; }
    double total() const { return total_; }
    uint32_t arms() const { return uint32_t(n_.size()); }
    uint32_t best() const;  // highest mean among tried arms

  private:
    double c_;
    std::vector<double> n_, sum_;
    double total_ = 0;
};

// kL2Late: served from L2, but the read waited for its prefetch to land (a
// hit by the definition, a stall for the payoff).
enum class AccessOutcome : uint8_t { kL1Hit, kL2Hit, kMiss, kL2Late };

struct RequestAccuracy {
    uint64_t issued = 0, used = 0, wasted = 0, l2_hits = 0, late = 0, misses = 0, plans = 0;
    uint32_t depth = 0;  // the last depth chosen
    double precision() const { return used + wasted ? double(used) / double(used + wasted) : 0.0; }
};

struct PrefetchSample {
    uint64_t t_ns;
    double beta, utilisation, mean_depth;
};

struct PrefetchStats {
    uint64_t hints = 0, accesses = 0, l1_hits = 0, l2_hits = 0, late = 0, misses = 0;  // late: part of l2_hits
    uint64_t issued = 0, issued_bytes = 0, used = 0, wasted = 0, wasted_bytes = 0;
    uint64_t plans = 0, unknown = 0, requests = 0;
    double beta = 0, utilisation = 0;
    std::vector<PrefetchSample> history;  // oldest first
    // docs/design.md §6: of the accesses not in L1, the share served from L2.
    double hit_rate() const { return l2_hits + misses ? double(l2_hits) / double(l2_hits + misses) : 0.0; }
    // Of the prefetched pages whose fate is known, the share read before eviction.
    double precision() const { return used + wasted ? double(used) / double(used + wasted) : 0.0; }
    // Wasted bytes over prefetched bytes whose fate is known.
    double waste() const { return used + wasted ? double(wasted) / double(used + wasted) : 0.0; }
};

class PrefetchController {
  public:
    // predictor NULL: make_learned_predictor().
    static int create(const PrefetchParams &p, std::unique_ptr<Predictor> predictor,
                      std::unique_ptr<PrefetchController> *out);
    PrefetchController(const PrefetchController &) = delete;
    PrefetchController &operator=(const PrefetchController &) = delete;

    // Events. Any thread; each takes the controller mutex once, except
    // on_transfer (one atomic add). Call on_access once per unit step (a
    // request's layer), not per page.
    void on_hint(uint64_t request, uint32_t layer, uint64_t pos);
    // A unit step's reads: `pages` of them with this outcome.
    void on_access(uint64_t request, uint32_t layer, AccessOutcome o, uint32_t pages = 1);
    void on_new_request(uint64_t request, std::span<const uint64_t> prefix_blocks);
    void on_request_end(uint64_t request);
    // The tier manager issued `pages` prefetches (bytes in all) for the request.
    void on_issued(uint64_t request, uint32_t pages, uint64_t bytes);
    // A prefetched page's fate (PrefetchBuffer's resolve callback): the
    // page's request and layer.
    void on_resolved(uint64_t request, uint32_t layer, bool used, uint64_t bytes);
    // Bytes moved over the L3->L2 link (prefetches and synchronous fetches).
    void on_transfer(uint64_t bytes) { transferred_.fetch_add(bytes, std::memory_order_relaxed); }

    struct Plan {
        uint32_t depth = 0;      // k chosen by the bandit
        uint32_t effective = 0;  // round(beta * k): units actually planned
        std::vector<PrefetchUnit> units;
        std::vector<uint64_t> prefix_blocks;  // of newly arrived requests, to fetch too
    };
    // What to prefetch now that `request` runs `layer`. The payoff gathered
    // for the request's earlier decisions goes to its bandit first.
    // Unknown requests are tracked from here on (up to max_requests; beyond,
    // the least recently planned one is forgotten).
    void plan(uint64_t request, uint32_t layer, Plan *out);
    // The feedback step; call every tick_ns or so with a monotonic clock.
    // Returns true when it updated beta.
    bool tick(uint64_t now_ns);

    double beta() const { return beta_.load(std::memory_order_relaxed); }
    double utilisation() const { return util_.load(std::memory_order_relaxed); }
    PrefetchStats stats() const;
    // The newest sample's mean depth: what stats().history.back() holds,
    // without copying the history (speckv_stats). Before the first sample
    // (and always under prefetch.sync, which has no feedback step) the last
    // plan's depth (0 before the first plan).
    double last_mean_depth() const;
    // false for a request not tracked.
    bool accuracy(uint64_t request, RequestAccuracy *out) const;
    const PrefetchParams &params() const { return p_; }
    // The global bandit (every request's payoffs), for tests and stats.
    Ucb global_bandit() const;

  private:
    struct Req {
        Ucb bandit;
        RequestAccuracy acc;
        // Outcomes credited to this request's decisions since its last plan, per arm.
        std::vector<double> p_used, p_wasted, p_bad;
        uint64_t last_plan = 0;
    };
    struct Attr {  // the decision that first planned a unit
        uint64_t decider;
        uint32_t arm;
        bool consumed;  // the unit has run since: the next plan of it starts afresh
    };
    static uint64_t unit_key(uint64_t request, uint32_t layer) { return request << 16 ^ layer; }
    Req *credit(uint64_t request, uint32_t layer, uint32_t *arm);
    PrefetchController(const PrefetchParams &p, std::unique_ptr<Predictor> pred);
    Req *find(uint64_t request);
    Req &track(uint64_t request);
    void close_decision(Req &r);

    PrefetchParams p_;
    mutable std::mutex mu_;
    std::unique_ptr<Predictor> pred_;
    std::unordered_map<uint64_t, Req> reqs_;
    std::unordered_map<uint64_t, Attr> attr_;
    uint32_t max_layer_ = 0;
    Ucb global_;
    std::deque<uint64_t> prefix_;
    uint64_t plan_seq_ = 0;
    PrefetchUnit last_unit_{~0ull, 0};
    std::deque<PrefetchSample> history_;
    uint64_t last_tick_ = 0;
    bool ticked_ = false;
    double depth_sum_ = 0, depth_n_ = 0;
    uint32_t last_k_ = 0;  // the last plan's depth (under mu_)

    std::atomic<double> beta_, util_{0};
    std::atomic<uint64_t> transferred_{0};
    std::atomic<uint64_t> hints_{0}, accesses_{0}, l1_{0}, l2_{0}, late_{0}, misses_{0}, issued_{0}, issued_bytes_{0};
    std::atomic<uint64_t> used_{0}, wasted_{0}, wasted_bytes_{0}, plans_{0}, unknown_{0};
};

}  // namespace speckv
