// SPDX-License-Identifier: Apache-2.0
#include "prefetch/prefetch_ctl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <unordered_set>

#include "config/config.h"
#include "util/status.h"

namespace speckv {

// A parameter that a config key sets takes its bounds from the key table
// (lib/config/config.cc), scaled to its unit: one definition per setting.
// The others have no key and are bounded here only.
int validate(const PrefetchParams &p) {
    struct Check {
        const char *name;
        double v, lo, hi;
        const char *key = nullptr;  // the config key whose [min, max] * mul / div bounds it
        double mul = 1, div = 1;    // as the pool converts the key (lib/prefetch/engine.cc configure)
    } checks[] = {
        {"prefetch.k_min", double(p.k_min), 0, 0, "prefetch.k_min"},
        {"prefetch.k_max", double(p.k_max), 0, 0, "prefetch.k_max"},
        {"prefetch.ucb_c", p.ucb_c, 0, 0, "prefetch.ucb_c_milli", 1, 1000},
        {"prefetch.prior_weight", p.prior_weight, 0, 1000},
        {"prefetch.waste_penalty", p.waste_penalty, 0, 10},
        {"prefetch.kappa", p.kappa, 0, 0, "prefetch.kappa_milli", 1, 1000},
        {"prefetch.theta_target", p.theta_target, 0, 0, "prefetch.theta_milli", 1, 1000},
        {"prefetch.beta_min", p.beta_min, 0, 0, "prefetch.beta_min_milli", 1, 1000},
        {"prefetch.beta_max", p.beta_max, 1e-9, 1},
        {"prefetch.beta_recover", p.beta_recover, 0, 1},
        {"prefetch.util_smoothing", p.util_smoothing, 0.01, 1},
        {"prefetch.bandwidth", p.bandwidth, 0, 0, "prefetch.bandwidth"},
        {"prefetch.tick_ns", double(p.tick_ns), 0, 0, "prefetch.tick_us", 1000},
        {"prefetch.max_requests", double(p.max_requests), 1, double(1u << 20)},
        {"prefetch.prefix_batch", double(p.prefix_batch), 0, 4096},
        {"prefetch.history", double(p.history), 1, 4096},
    };
    for (Check &c : checks) {
        if (c.key) {
            const KeySpec *k = find_key(c.key);
            if (!k) return fail(SPECKV_EINTERNAL, "config key %s is missing from the key table", c.key);
            c.lo = double(k->min) * c.mul / c.div, c.hi = double(k->max) * c.mul / c.div;
        }
        if (!(c.v >= c.lo && c.v <= c.hi))  // false for NaN
            return c.key && std::strcmp(c.key, c.name) != 0
                       ? fail(SPECKV_EINVAL, "%s = %g is out of [%g, %g] (config key %s)", c.name, c.v, c.lo, c.hi, c.key)
                       : fail(SPECKV_EINVAL, "%s = %g is out of [%g, %g]", c.name, c.v, c.lo, c.hi);
    }
    if (p.k_min > p.k_max) return fail(SPECKV_EINVAL, "prefetch.k_min %u > k_max %u", p.k_min, p.k_max);
    if (p.beta_min > p.beta_max)
        return fail(SPECKV_EINVAL, "prefetch.beta_min %g > beta_max %g", p.beta_min, p.beta_max);
    return SPECKV_OK;
}

// ---- the default predictor

namespace {

class LearnedPredictor final : public Predictor {
  public:
    void on_hint(uint64_t, uint32_t layer, uint64_t) override { layers_ = std::max(layers_, layer + 1); }

    void on_access(PrefetchUnit u) override {
        layers_ = std::max(layers_, u.layer + 1);
        if (has_last_ && last_ == u) return;
        clock_++;
        if (has_last_) learn(last_, u);
        last_ = u;
        has_last_ = true;
    }

    void on_request_end(uint64_t request) override {
        if (!succ_.count(request) || ended_.count(request)) {
            forget(request);
            return;
        }
        ended_.insert(request);
        vacant_.push_back(request);
        if (vacant_.size() > 1024) {  // nobody came: really forget the oldest
            uint64_t r = vacant_.front();
            vacant_.pop_front();
            ended_.erase(r);
            forget(r);
        }
        if (last_.request == request) has_last_ = false;
    }

    void on_new_request(uint64_t request) override {
        if (vacant_.empty() || succ_.count(request)) return;
        uint64_t old = vacant_.front();
        vacant_.pop_front();
        ended_.erase(old);
        // The newcomer inherits the finished request's place: its edges and the edges into it.
        auto node = succ_.extract(old);
        for (auto &[l, s] : node.mapped())
            if (s.next.request == old) s.next.request = request;
        node.key() = request;
        succ_.insert(std::move(node));
        for (auto &[r, layers] : succ_)
            for (auto &[l, s] : layers)
                if (s.next.request == old) s.next.request = request;
        if (auto m = moves_.extract(old)) {
            if (m.mapped().next == old) m.mapped().next = request;
            m.key() = request;
            moves_.insert(std::move(m));
        }
        for (auto &[r, m] : moves_)
            if (m.next == old) m.next = request;
    }

    void predict(PrefetchUnit from, uint32_t depth, std::vector<PrefetchUnit> *out) override {
        out->clear();
        PrefetchUnit u = from;
        for (uint32_t i = 0; i < depth; i++) {
            PrefetchUnit n = next(u);
            if (n == from || std::find(out->begin(), out->end(), n) != out->end()) break;  // a cycle
            out->push_back(n);
            u = n;
        }
    }

  private:
    struct Succ {
        PrefetchUnit next{0, 0};
        uint32_t conf = 0;
        uint64_t seen = 0;  // clock_ when this successor was last observed
    };
    // The latest move out of a request: to which request, how many layers on.
    struct Move {
        uint64_t next;
        int64_t dlayer;
        uint64_t seen;
    };
    // Per unit, a majority vote with a small memory: a successor seen again
    // gains confidence (up to 4), a different one costs one and replaces it
    // at zero. Per request, just the latest move.
    void learn(PrefetchUnit a, PrefetchUnit b) {
        Succ &s = succ_[a.request][a.layer];
        if (s.conf == 0) {
            s.next = b;
            s.conf = 1;
        } else if (s.next == b) {
            s.conf = std::min(s.conf + 1, 4u);
        } else if (--s.conf == 0) {
            s.next = b;
            s.conf = 1;
        }
        if (s.next == b) s.seen = clock_;
        moves_[a.request] = Move{b.request, int64_t(b.layer) - int64_t(a.layer), clock_};
    }
    // A unit's own successor was learnt a whole step ago; the request's latest
    // move was seen at the previous layer of this step. When the batch order
    // changes between steps (an engine that reorders) the latest move is the
    // better guess, applied at this layer; it never leaves the layer range
    // (a request-major stream's last layer falls back to the unit's own).
    PrefetchUnit step(PrefetchUnit u) const {
        const Succ *s = nullptr;
        if (auto r = succ_.find(u.request); r != succ_.end())
            if (auto l = r->second.find(u.layer); l != r->second.end() && l->second.conf > 0) s = &l->second;
        if (auto m = moves_.find(u.request); m != moves_.end()) {
            int64_t layer = int64_t(u.layer) + m->second.dlayer;
            bool valid = layer >= 0 && layer < int64_t(layers_) && !(m->second.next == u.request && layer == u.layer);
            if (valid && (!s || m->second.seen > s->seen)) return {m->second.next, uint32_t(layer)};
        }
        if (s) return s->next;
        if (layers_ && u.layer + 1 < layers_) return {u.request, u.layer + 1};
        return {u.request, 0};
    }
    // The next unit, passing over finished requests' vacancies.
    PrefetchUnit next(PrefetchUnit u) const {
        PrefetchUnit n = step(u);
        for (int hops = 0; hops < 64 && ended_.count(n.request); hops++) n = step(n);
        return n;
    }
    void forget(uint64_t request) {
        succ_.erase(request);
        moves_.erase(request);
        std::erase_if(moves_, [request](const auto &kv) { return kv.second.next == request; });
        for (auto &[r, layers] : succ_)
            for (auto &[l, s] : layers)
                if (s.next.request == request) s.conf = 0;
        if (last_.request == request) has_last_ = false;
    }

    std::unordered_map<uint64_t, std::unordered_map<uint32_t, Succ>> succ_;
    std::unordered_map<uint64_t, Move> moves_;
    uint64_t clock_ = 0;                  // distinct unit accesses seen
    std::unordered_set<uint64_t> ended_;  // finished, their place not yet taken
    std::deque<uint64_t> vacant_;         // the same, oldest first
    PrefetchUnit last_{0, 0};
    bool has_last_ = false;
    uint32_t layers_ = 0;
};

}  // namespace

std::unique_ptr<Predictor> make_learned_predictor() { return std::make_unique<LearnedPredictor>(); }

// ---- UCB

Ucb::Ucb(uint32_t arms, double c) : c_(c), n_(arms, 0.0), sum_(arms, 0.0) {}

uint32_t Ucb::choose() const {
    for (uint32_t a = 0; a < n_.size(); a++)
        if (n_[a] <= 0) return a;
    double lt = std::log(std::max(total_, 1.0));
    uint32_t best = 0;
    double bv = -1e300;
    for (uint32_t a = 0; a < n_.size(); a++) {
        double v = sum_[a] / n_[a] + c_ * std::sqrt(2 * lt / n_[a]);
        if (v > bv) bv = v, best = a;
    }
    return best;
}

void Ucb::update(uint32_t arm, double reward) {
    if (arm >= n_.size()) return;
    n_[arm] += 1;
    sum_[arm] += std::clamp(reward, 0.0, 1.0);
    total_ += 1;
}

void Ucb::seed(const Ucb &prior, double weight) {
    for (uint32_t a = 0; a < n_.size() && a < prior.n_.size(); a++) {
        double n = std::min(prior.n_[a], weight);
        if (n <= 0) continue;
        n_[a] = n;
        sum_[a] = prior.mean(a) * n;
        total_ += n;
    }
}

uint32_t Ucb::best() const {
    uint32_t b = 0;
    double bv = -1;
    for (uint32_t a = 0; a < n_.size(); a++)
        if (n_[a] > 0 && mean(a) > bv) bv = mean(a), b = a;
    return b;
}

// ---- the controller

int PrefetchController::create(const PrefetchParams &p, std::unique_ptr<Predictor> predictor,
                               std::unique_ptr<PrefetchController> *out) {
    if (!out) return fail(SPECKV_EINVAL, "prefetch controller: out is NULL");
    if (int rc = validate(p)) return rc;
    if (!predictor) predictor = make_learned_predictor();
    out->reset(new (std::nothrow) PrefetchController(p, std::move(predictor)));
    return *out ? SPECKV_OK : fail(SPECKV_ENOMEM, "prefetch controller");
}

PrefetchController::PrefetchController(const PrefetchParams &p, std::unique_ptr<Predictor> pred)
    : p_(p), pred_(std::move(pred)), global_(p.k_max - p.k_min + 1, p.ucb_c), beta_(p.beta_max) {}

PrefetchController::Req *PrefetchController::find(uint64_t request) {
    auto it = reqs_.find(request);
    return it == reqs_.end() ? nullptr : &it->second;
}

PrefetchController::Req &PrefetchController::track(uint64_t request) {
    if (Req *r = find(request)) return *r;
    if (reqs_.size() >= p_.max_requests) {  // forget the least recently planned
        auto victim = reqs_.begin();
        for (auto it = reqs_.begin(); it != reqs_.end(); ++it)
            if (it->second.last_plan < victim->second.last_plan) victim = it;
        close_decision(victim->second);
        reqs_.erase(victim);
    }
    uint32_t arms = p_.k_max - p_.k_min + 1;
    Req r{Ucb(arms, p_.ucb_c), {}, std::vector<double>(arms), std::vector<double>(arms), std::vector<double>(arms)};
    r.bandit.seed(global_, p_.prior_weight);
    return reqs_.emplace(request, std::move(r)).first->second;
}

// The payoff of an arm over the events credited to it since the request's
// last plan: pages used, minus the wasted ones (weighted) and the ones that
// stalled (read late, or fetched synchronously), over all of them, mapped
// from [-1, 1] to [0, 1]. An arm with no event learns nothing.
void PrefetchController::close_decision(Req &r) {
    for (uint32_t a = 0; a < r.p_used.size(); a++) {
        double used = r.p_used[a], wasted = r.p_wasted[a], bad = r.p_bad[a];
        double n = used + wasted + bad;
        if (n <= 0) continue;
        double reward = std::clamp(0.5 + 0.5 * (used - p_.waste_penalty * wasted - bad) / n, 0.0, 1.0);
        r.bandit.update(a, reward);
        global_.update(a, reward);
        r.p_used[a] = r.p_wasted[a] = r.p_bad[a] = 0;
    }
}

PrefetchController::Req *PrefetchController::credit(uint64_t request, uint32_t layer, uint32_t *arm) {
    auto it = attr_.find(unit_key(request, layer));
    if (it == attr_.end()) return nullptr;
    *arm = it->second.arm;
    return find(it->second.decider);
}

void PrefetchController::on_hint(uint64_t request, uint32_t layer, uint64_t pos) {
    hints_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lk(mu_);
    pred_->on_hint(request, layer, pos);
}

void PrefetchController::on_access(uint64_t request, uint32_t layer, AccessOutcome o, uint32_t pages) {
    accesses_.fetch_add(pages, std::memory_order_relaxed);
    if (o == AccessOutcome::kL1Hit) l1_.fetch_add(pages, std::memory_order_relaxed);
    else if (o == AccessOutcome::kMiss) misses_.fetch_add(pages, std::memory_order_relaxed);
    else l2_.fetch_add(pages, std::memory_order_relaxed);
    if (o == AccessOutcome::kL2Late) late_.fetch_add(pages, std::memory_order_relaxed);
    std::lock_guard lk(mu_);
    pred_->on_access({request, layer});
    max_layer_ = std::max(max_layer_, layer);
    if (Req *r = find(request)) {
        if (o == AccessOutcome::kL2Hit) r->acc.l2_hits += pages;
        else if (o == AccessOutcome::kL2Late) r->acc.l2_hits += pages, r->acc.late += pages;
        else if (o == AccessOutcome::kMiss) r->acc.misses += pages;
    }
    // A stall is the planner's: planned too late (or, for a unit nobody
    // planned, the predictor's, and no depth is to blame).
    uint32_t arm;
    if (o == AccessOutcome::kL2Late || o == AccessOutcome::kMiss)
        if (Req *d = credit(request, layer, &arm)) d->p_bad[arm] += pages;
}

void PrefetchController::on_new_request(uint64_t request, std::span<const uint64_t> prefix_blocks) {
    std::lock_guard lk(mu_);
    track(request);
    pred_->on_new_request(request);
    for (uint64_t b : prefix_blocks) prefix_.push_back(b);
    while (prefix_.size() > 65536) prefix_.pop_front();  // a flood of arrivals: the oldest are stale anyway
}

void PrefetchController::on_request_end(uint64_t request) {
    std::lock_guard lk(mu_);
    if (Req *r = find(request)) {
        close_decision(*r);
        reqs_.erase(request);
    }
    for (uint32_t l = 0; l <= max_layer_; l++) attr_.erase(unit_key(request, l));
    pred_->on_request_end(request);
}

void PrefetchController::on_issued(uint64_t request, uint32_t pages, uint64_t bytes) {
    issued_.fetch_add(pages, std::memory_order_relaxed);
    issued_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    std::lock_guard lk(mu_);
    if (Req *r = find(request)) r->acc.issued += pages;
}

void PrefetchController::on_resolved(uint64_t request, uint32_t layer, bool used, uint64_t bytes) {
    if (used) {
        used_.fetch_add(1, std::memory_order_relaxed);
    } else {
        wasted_.fetch_add(1, std::memory_order_relaxed);
        wasted_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    }
    std::lock_guard lk(mu_);
    uint32_t arm;
    if (Req *d = credit(request, layer, &arm)) (used ? d->p_used : d->p_wasted)[arm] += 1;
    Req *r = find(request);
    if (!r) {
        unknown_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    if (used) r->acc.used++;
    else r->acc.wasted++;
}

void PrefetchController::plan(uint64_t request, uint32_t layer, Plan *out) {
    plans_.fetch_add(1, std::memory_order_relaxed);
    double b = beta();
    std::lock_guard lk(mu_);
    Req &r = track(request);
    close_decision(r);
    uint32_t arm = r.bandit.choose();
    uint32_t k = p_.k_min + arm;
    r.acc.depth = k;
    r.acc.plans++;
    r.last_plan = ++plan_seq_;
    depth_sum_ += k;
    depth_n_ += 1;
    last_k_ = k;
    out->depth = k;
    out->effective = uint32_t(std::floor(b * k + 0.5));
    pred_->predict({request, layer}, out->effective, &out->units);
    // The unit now running is consumed; the planned ones are this decision's
    // unless an earlier decision (that already issued them) holds them.
    max_layer_ = std::max(max_layer_, layer);
    if (auto it = attr_.find(unit_key(request, layer)); it != attr_.end()) it->second.consumed = true;
    for (const PrefetchUnit &u : out->units) {
        auto [it, fresh] = attr_.try_emplace(unit_key(u.request, u.layer), Attr{request, arm, false});
        if (!fresh && it->second.consumed) it->second = Attr{request, arm, false};
    }
    if (attr_.size() > (size_t(p_.max_requests) << 8)) attr_.clear();  // a runaway stream of unknown units
    out->prefix_blocks.clear();
    size_t np = std::min(prefix_.size(), size_t(std::floor(b * p_.prefix_batch + 0.5)));
    for (size_t i = 0; i < np; i++) {
        out->prefix_blocks.push_back(prefix_.front());
        prefix_.pop_front();
    }
}

bool PrefetchController::tick(uint64_t now_ns) {
    std::lock_guard lk(mu_);
    if (!ticked_) {
        ticked_ = true;
        last_tick_ = now_ns;
        transferred_.exchange(0, std::memory_order_relaxed);
        return false;
    }
    if (now_ns < last_tick_ + p_.tick_ns) return false;
    double dt = double(now_ns - last_tick_) * 1e-9;
    last_tick_ = now_ns;
    double bytes = double(transferred_.exchange(0, std::memory_order_relaxed));
    double sample = bytes / (p_.bandwidth * dt);
    double u = p_.util_smoothing * sample + (1 - p_.util_smoothing) * util_.load(std::memory_order_relaxed);
    double b = beta_.load(std::memory_order_relaxed);
    if (u > p_.theta_target) b *= 1 - p_.kappa * (u - p_.theta_target);  // ReLU(U - theta) > 0
    else b += p_.beta_recover * (1 - u / p_.theta_target) * p_.beta_max;
    b = std::clamp(b, p_.beta_min, p_.beta_max);
    util_.store(u, std::memory_order_relaxed);
    beta_.store(b, std::memory_order_relaxed);
    history_.push_back({now_ns, b, u, depth_n_ > 0 ? depth_sum_ / depth_n_ : 0.0});
    depth_sum_ = depth_n_ = 0;
    while (history_.size() > p_.history) history_.pop_front();
    return true;
}

PrefetchStats PrefetchController::stats() const {
    PrefetchStats s;
    s.hints = hints_.load(std::memory_order_relaxed);
    s.accesses = accesses_.load(std::memory_order_relaxed);
    s.l1_hits = l1_.load(std::memory_order_relaxed);
    s.l2_hits = l2_.load(std::memory_order_relaxed);
    s.late = late_.load(std::memory_order_relaxed);
    s.misses = misses_.load(std::memory_order_relaxed);
    s.issued = issued_.load(std::memory_order_relaxed);
    s.issued_bytes = issued_bytes_.load(std::memory_order_relaxed);
    s.used = used_.load(std::memory_order_relaxed);
    s.wasted = wasted_.load(std::memory_order_relaxed);
    s.wasted_bytes = wasted_bytes_.load(std::memory_order_relaxed);
    s.plans = plans_.load(std::memory_order_relaxed);
    s.unknown = unknown_.load(std::memory_order_relaxed);
    s.beta = beta();
    s.utilisation = utilisation();
    std::lock_guard lk(mu_);
    s.requests = reqs_.size();
    s.history.assign(history_.begin(), history_.end());
    return s;
}

double PrefetchController::last_mean_depth() const {
    std::lock_guard lk(mu_);
    // No feedback step yet (or none ever: prefetch.sync): the last plan's.
    return history_.empty() ? double(last_k_) : history_.back().mean_depth;
}

bool PrefetchController::accuracy(uint64_t request, RequestAccuracy *out) const {
    std::lock_guard lk(mu_);
    auto it = reqs_.find(request);
    if (it == reqs_.end()) return false;
    *out = it->second.acc;
    return true;
}

Ucb PrefetchController::global_bandit() const {
    std::lock_guard lk(mu_);
    return global_;
}

}  // namespace speckv
