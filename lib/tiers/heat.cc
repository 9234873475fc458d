// SPDX-License-Identifier: Apache-2.0
#include "tiers/heat.h"

#include <algorithm>
#include <cmath>
#include <new>

#include "util/status.h"

namespace speckv {

int validate(const HeatParams &p) {
    auto in = [](double v, double lo, double hi) { return v >= lo && v <= hi; };  // false for NaN
    struct {
        const char *name;
        double v, lo, hi;
    } checks[] = {
        {"heat.w_recency", p.w_recency, 0, 1},
        {"heat.w_frequency", p.w_frequency, 0, 1},
        {"heat.w_position", p.w_position, 0, 1},
        {"heat.w_sharing", p.w_sharing, 0, 1},
        {"heat.tau_recency_ms", p.tau_recency_ms, 0.001, 1e6},
        {"heat.tau_frequency_ms", p.tau_frequency_ms, 0.001, 1e6},
        {"heat.freq_half", p.freq_half, 0.1, 1e6},
        {"heat.sink_tokens", double(p.sink_tokens), 0, double(1u << 20)},
        {"heat.window_tokens", double(p.window_tokens), 0, double(1u << 24)},
        {"heat.position_mid", p.position_mid, 0, 1},
        {"heat.share_half", p.share_half, 0.1, 1e6},
        {"heat.t_min", p.t_min, 0, 1},
        {"heat.t_max", p.t_max, 0, 1},
        {"heat.min_gap", p.min_gap, 0.01, 0.9},
        {"heat.t_hot", p.t_hot, p.t_min, p.t_max},
        {"heat.t_cold", p.t_cold, p.t_min, p.t_max},
        {"heat.pressure_target", p.pressure_target, 0.05, 1},
        {"heat.miss_target", p.miss_target, 0, 1},
        {"heat.gain_pressure", p.gain_pressure, 0, 10},
        {"heat.gain_miss", p.gain_miss, 0, 10},
        {"heat.smoothing", p.smoothing, 0.01, 1},
    };
    for (auto &c : checks)
        if (!in(c.v, c.lo, c.hi)) return fail(SPECKV_EINVAL, "%s = %g is out of [%g, %g]", c.name, c.v, c.lo, c.hi);
    if (p.w_recency + p.w_frequency + p.w_position + p.w_sharing <= 0)
        return fail(SPECKV_EINVAL, "heat weights are all zero");
    if (p.t_min >= p.t_max || p.t_max - p.t_min < p.min_gap)
        return fail(SPECKV_EINVAL, "heat.t_min %g / t_max %g leave less than min_gap %g", p.t_min, p.t_max, p.min_gap);
    if (p.t_cold + p.min_gap > p.t_hot + 1e-12)
        return fail(SPECKV_EINVAL, "heat.t_cold %g + min_gap %g exceeds t_hot %g", p.t_cold, p.min_gap, p.t_hot);
    return SPECKV_OK;
}

int HeatTracker::create(const HeatParams &p, std::unique_ptr<HeatTracker> *out) {
    if (int rc = validate(p)) return rc;
    out->reset(new (std::nothrow) HeatTracker(p));
    return *out ? SPECKV_OK : fail(SPECKV_ENOMEM, "heat tracker");
}

HeatTracker::HeatTracker(const HeatParams &p)
    : p_(p), wsum_(p.w_recency + p.w_frequency + p.w_position + p.w_sharing), t_hot_(p.t_hot), t_cold_(p.t_cold) {}

void HeatTracker::touch(uint64_t block, uint64_t now_ns) {
    Shard &s = shard(block);
    std::lock_guard lk(s.mu);
    Block &b = s.map[block];
    if (b.freq > 0 && now_ns > b.freq_ns) b.freq *= std::exp(-double(now_ns - b.freq_ns) / (p_.tau_frequency_ms * 1e6));
    b.freq += 1;
    b.freq_ns = std::max(b.freq_ns, now_ns);
    b.last_ns = std::max(b.last_ns, now_ns);
}

void HeatTracker::set_position(uint64_t block, uint64_t first_token, uint64_t seq_len) {
    float pos = float(p_.position_mid);
    if (first_token < p_.sink_tokens || (seq_len >= first_token && seq_len - first_token <= p_.window_tokens)) pos = 1.f;
    Shard &s = shard(block);
    std::lock_guard lk(s.mu);
    s.map[block].position = pos;
}

void HeatTracker::set_sharing(uint64_t block, uint32_t refs) {
    Shard &s = shard(block);
    std::lock_guard lk(s.mu);
    s.map[block].refs = refs;
}

void HeatTracker::forget(uint64_t block) {
    Shard &s = shard(block);
    std::lock_guard lk(s.mu);
    s.map.erase(block);
}

double HeatTracker::score_of(const Block &b, uint64_t now_ns) const {
    double age = now_ns > b.last_ns ? double(now_ns - b.last_ns) : 0.0;
    double r = b.last_ns || b.freq > 0 ? std::exp(-age / (p_.tau_recency_ms * 1e6)) : 0.0;
    double f = b.freq;
    if (f > 0 && now_ns > b.freq_ns) f *= std::exp(-double(now_ns - b.freq_ns) / (p_.tau_frequency_ms * 1e6));
    double fr = f / (f + p_.freq_half);
    double pos = b.position < 0 ? p_.position_mid : double(b.position);
    double sh = b.refs > 1 ? double(b.refs - 1) / (double(b.refs - 1) + p_.share_half) : 0.0;
    return (p_.w_recency * r + p_.w_frequency * fr + p_.w_position * pos + p_.w_sharing * sh) / wsum_;
}

double HeatTracker::score(uint64_t block, uint64_t now_ns) const {
    Shard &s = shard(block);
    std::lock_guard lk(s.mu);
    auto it = s.map.find(block);
    return it == s.map.end() ? 0.0 : score_of(it->second, now_ns);
}

HeatMove HeatTracker::classify(double score) const {
    std::lock_guard lk(tmu_);
    if (score > t_hot_) return HeatMove::kPromote;
    if (score < t_cold_) return HeatMove::kDemote;
    return HeatMove::kStay;
}

void HeatTracker::adapt(double pressure, double miss_rate) {
    pressure = std::clamp(std::isnan(pressure) ? 0.0 : pressure, 0.0, 1.0);
    miss_rate = std::clamp(std::isnan(miss_rate) ? 0.0 : miss_rate, 0.0, 1.0);
    double shift = p_.gain_pressure * (pressure - p_.pressure_target) - p_.gain_miss * (miss_rate - p_.miss_target);
    double want_hot = std::clamp(p_.t_hot + shift, p_.t_min + p_.min_gap, p_.t_max);
    double want_cold = std::clamp(p_.t_cold + shift, p_.t_min, p_.t_max - p_.min_gap);
    std::lock_guard lk(tmu_);
    t_hot_ += p_.smoothing * (want_hot - t_hot_);
    t_cold_ += p_.smoothing * (want_cold - t_cold_);
    if (t_hot_ - t_cold_ < p_.min_gap) {  // keep the band open around its middle
        double mid = std::clamp((t_hot_ + t_cold_) / 2, p_.t_min + p_.min_gap / 2, p_.t_max - p_.min_gap / 2);
        t_hot_ = mid + p_.min_gap / 2;
        t_cold_ = mid - p_.min_gap / 2;
    }
}

double HeatTracker::t_hot() const {
    std::lock_guard lk(tmu_);
    return t_hot_;
}

double HeatTracker::t_cold() const {
    std::lock_guard lk(tmu_);
    return t_cold_;
}

void HeatTracker::select(uint64_t now_ns, size_t n, bool cold, std::vector<std::pair<uint64_t, double>> *out) const {
    out->clear();
    double th = cold ? t_cold() : t_hot();
    for (const Shard &s : shards_) {
        std::lock_guard lk(s.mu);
        for (const auto &[k, b] : s.map) {
            double sc = score_of(b, now_ns);
            if (cold ? sc < th : sc > th) out->emplace_back(k, sc);
        }
    }
    auto by = [cold](const auto &a, const auto &b) { return cold ? a.second < b.second : a.second > b.second; };
    if (out->size() > n) {
        std::partial_sort(out->begin(), out->begin() + ptrdiff_t(n), out->end(), by);
        out->resize(n);
    } else {
        std::sort(out->begin(), out->end(), by);
    }
}

void HeatTracker::coldest(uint64_t now_ns, size_t n, std::vector<std::pair<uint64_t, double>> *out) const {
    select(now_ns, n, true, out);
}

void HeatTracker::hottest(uint64_t now_ns, size_t n, std::vector<std::pair<uint64_t, double>> *out) const {
    select(now_ns, n, false, out);
}

size_t HeatTracker::size() const {
    size_t n = 0;
    for (const Shard &s : shards_) {
        std::lock_guard lk(s.mu);
        n += s.map.size();
    }
    return n;
}

}  // namespace speckv
