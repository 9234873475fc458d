// SPDX-License-Identifier: Apache-2.0
// Heat of a block: how much it deserves a faster tier. A weighted mean of
// four signals, each in [0, 1]:
//   recency   R = exp(-(now - last access) / tau_recency)
//   frequency F = f / (f + freq_half), f = accesses decayed with tau_frequency
//   position  P = 1 for attention-sink tokens (the first sink_tokens) and for
//                 the local window (the last window_tokens of the sequence),
//                 position_mid in between
//   sharing   S = (refs - 1) / (refs - 1 + share_half)   (0 for one owner)
// A block above T_h is promoted, below T_c demoted. The thresholds move with
// memory pressure (higher: both rise, so more is demoted and less promoted)
// and with the miss rate of the fast tiers (higher: both fall), smoothed, kept
// in [t_min, t_max] and at least min_gap apart.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/status.h"

namespace speckv {

struct HeatParams {
    double w_recency = 0.4, w_frequency = 0.3, w_position = 0.2, w_sharing = 0.1;  // each [0, 1], sum > 0
    double tau_recency_ms = 50;      // [0.001, 1e6]
    double tau_frequency_ms = 2000;  // [0.001, 1e6]
    double freq_half = 4;            // [0.1, 1e6] decayed accesses for F = 0.5
    uint32_t sink_tokens = 64;       // [0, 2^20]
    uint32_t window_tokens = 512;    // [0, 2^24]
    double position_mid = 0.3;       // [0, 1]
    double share_half = 1;           // [0.1, 1e6]
    double t_hot = 0.6, t_cold = 0.25;  // initial T_h, T_c: [t_min, t_max], t_cold + min_gap <= t_hot
    double t_min = 0.02, t_max = 0.98;  // [0, 1], t_min < t_max
    double min_gap = 0.1;               // [0.01, 0.9]
    double pressure_target = 0.85;      // [0.05, 1]
    double miss_target = 0.05;          // [0, 1]
    double gain_pressure = 0.5, gain_miss = 0.5;  // [0, 10]
    double smoothing = 0.3;             // [0.01, 1] EWMA weight of each adapt()
};

// SPECKV_OK or SPECKV_EINVAL naming the first parameter out of bounds.
int validate(const HeatParams &p);

enum class HeatMove : uint8_t { kDemote, kStay, kPromote };

class HeatTracker {
  public:
    static int create(const HeatParams &p, std::unique_ptr<HeatTracker> *out);
    HeatTracker(const HeatTracker &) = delete;
    HeatTracker &operator=(const HeatTracker &) = delete;

    // All methods: any thread, concurrently (16 lock-striped shards).
    void touch(uint64_t block, uint64_t now_ns);
    // Where the block sits: its first token and the sequence's current length.
    void set_position(uint64_t block, uint64_t first_token, uint64_t seq_len);
    void set_sharing(uint64_t block, uint32_t refs);
    void forget(uint64_t block);
    // [0, 1]; 0 for a block never seen.
    double score(uint64_t block, uint64_t now_ns) const;
    HeatMove classify(double score) const;
    HeatMove classify(uint64_t block, uint64_t now_ns) const { return classify(score(block, now_ns)); }

    // pressure: used / capacity of the tier being managed, [0, 1];
    // miss_rate: recent misses / accesses of the fast tiers, [0, 1].
    void adapt(double pressure, double miss_rate);
    double t_hot() const;
    double t_cold() const;

    // Blocks below T_c, coldest first (at most n) / above T_h, hottest first.
    void coldest(uint64_t now_ns, size_t n, std::vector<std::pair<uint64_t, double>> *out) const;
    void hottest(uint64_t now_ns, size_t n, std::vector<std::pair<uint64_t, double>> *out) const;
    size_t size() const;
    const HeatParams &params() const { return p_; }

  private:
    struct Block {
        uint64_t last_ns = 0, freq_ns = 0;
        double freq = 0;
        float position = -1;  // < 0: unknown
        uint32_t refs = 1;
    };
    struct alignas(64) Shard {
        mutable std::mutex mu;
        std::unordered_map<uint64_t, Block> map;
    };
    explicit HeatTracker(const HeatParams &p);
    Shard &shard(uint64_t b) const { return shards_[(b * 0x9E3779B97F4A7C15ull) >> 60]; }
    double score_of(const Block &b, uint64_t now_ns) const;
    void select(uint64_t now_ns, size_t n, bool cold, std::vector<std::pair<uint64_t, double>> *out) const;

    HeatParams p_;
    double wsum_;
    mutable Shard shards_[16];
    mutable std::mutex tmu_;
    double t_hot_, t_cold_;
};

}  // namespace speckv
