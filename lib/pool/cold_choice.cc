// SPDX-License-Identifier: Apache-2.0
// Which blocks go to L4 first (pool/cold_choice.h).
#include "pool/cold_choice.h"

#include <algorithm>
#include <unordered_map>

#include "pool/cold_payload.h"

namespace speckv {

using namespace fmt;

void ColdChoice::refresh_locked(HeatTracker &heat, double miss_rate) const {
    // Position: a block's first token against its request's end (the end of
    // its latest block here), so attention-sink and recent-window blocks are
    // hot; sharing: how many processes reference it.
    const SharedHeader *h = L_.sh;
    const uint64_t hwm = std::min<uint64_t>(h->slot_hwm, L_.sb->max_blocks);
    auto key = [](const BlockRecord &r) { return r.tenant * 0x9E3779B97F4A7C15ull ^ r.request; };
    std::unordered_map<uint64_t, uint64_t> ends;
    for (uint64_t i = 0; i < hwm; i++) {
        const BlockRecord &r = L_.blocks[i];
        if (!r.handle.load(std::memory_order_relaxed) || !r.token_count) continue;
        uint64_t &e = ends[key(r)];
        e = std::max(e, r.token_pos + r.token_count);
    }
    for (uint64_t i = 0; i < hwm; i++) {
        const BlockRecord &r = L_.blocks[i];
        const uint64_t hd = r.handle.load(std::memory_order_relaxed);
        if (!hd) continue;
        heat.set_sharing(hd, uint32_t(__builtin_popcountll(r.holders.load(std::memory_order_relaxed) & ~kHoldersDying)));
        if (r.token_count) heat.set_position(hd, r.token_pos, ends[key(r)]);
    }
    // The thresholds follow pressure and the fast tiers' miss rate (tiers/heat.h).
    heat.adapt(double(h->pages_used.load(std::memory_order_relaxed)) / double(L_.sb->n_pages), miss_rate);
}

std::vector<uint64_t> ColdChoice::candidates_locked(const HeatTracker &heat, uint64_t keep, bool below_cold_only,
                                                    uint64_t mine, uint64_t attach_id,
                                                    const std::function<bool(uint64_t)> &pinned) const {
    const uint64_t hwm = std::min<uint64_t>(L_.sh->slot_hwm, L_.sb->max_blocks), now = mono_ns();
    struct Cand {
        double heat;
        uint64_t last_use, slot;
        bool operator<(const Cand &o) const {
            return heat != o.heat ? heat < o.heat : last_use != o.last_use ? last_use < o.last_use : slot < o.slot;
        }
    };
    // Under an allocation that finds no room the coldest go first, below T_c
    // or not; the background pass takes only blocks below T_c.
    const double below = below_cold_only ? heat.t_cold() : 2.0;  // scores are in [0, 1]
    std::vector<Cand> cand;
    for (uint64_t i = 0; i < hwm; i++) {
        const BlockRecord &r = L_.blocks[i];
        uint64_t hd = r.handle.load(std::memory_order_relaxed);
        if (!hd || i == keep || (r.tier_seq.load(std::memory_order_relaxed) & 1)) continue;
        if (r.holders.load(std::memory_order_relaxed) & ~mine) continue;  // others hold it (maybe pinned there)
        if (!(r.state & kBlockPublished) && r.owner != 0 && r.owner != attach_id)
            continue;  // another live process's unpublished block: its own to move
        if (pinned(hd)) continue;
        const double score = heat.score(hd, now);
        if (score >= below) continue;
        cand.push_back({score, r.last_use.load(std::memory_order_relaxed), i});
    }
    std::sort(cand.begin(), cand.end());
    std::vector<uint64_t> out;
    out.reserve(cand.size());
    for (const Cand &c : cand) out.push_back(c.slot);
    return out;
}

std::vector<ColdChoice::Hot> ColdChoice::hot_locked(const HeatTracker &heat) const {
    const double th = heat.t_hot();
    const uint64_t now = mono_ns(), hwm = std::min<uint64_t>(L_.sh->slot_hwm, L_.sb->max_blocks);
    std::vector<Hot> hot;
    for (uint64_t i = 0; i < hwm; i++) {
        const BlockRecord &r = L_.blocks[i];
        const uint64_t hd = r.handle.load(std::memory_order_relaxed);
        if (!hd || !(r.tier_seq.load(std::memory_order_relaxed) & 1)) continue;  // in L4 only
        if (const double s = heat.score(hd, now); s > th) hot.push_back({s, hd, r.packed_pages ? r.packed_pages : r.npages});
    }
    std::sort(hot.begin(), hot.end(), [](const Hot &a, const Hot &b) { return a.heat > b.heat; });
    return hot;
}

}  // namespace speckv
