// SPDX-License-Identifier: Apache-2.0
// ColdChoice: which blocks the L4 holder moves to L4 first (docs/tiers.md
// §9). It feeds the heat tracker what the block table knows (a block's
// position in its request, how many processes reference it) and adapts its
// thresholds to the pool's pressure and the fast tiers' miss rate, then lists
// the blocks that may go, coldest first, and those in L4 hot enough to come
// back, hottest first. It reads the block table of the
// image it is bound to and nothing else; the pool lock is the caller's.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "pool/image.h"
#include "tiers/heat.h"

namespace speckv {

class ColdChoice {
  public:
    void bind(const PoolLayout &L) { L_ = L; }
    // Under the lock: position and sharing signals from the block table
    // (recency and frequency come from touches), then the thresholds from
    // the pool's pressure and miss_rate (misses / reads of L1).
    void refresh_locked(HeatTracker &heat, double miss_rate) const;
    // Under the lock, after refresh_locked: the slots of the blocks that may
    // go to L4, coldest first (ties: least recently used, then slot). Not
    // slot `keep`, not a block in L4, held by another process (mine_mask:
    // our attach record's bit), another live process's unpublished block,
    // or one `pinned` by this process. below_cold_only: only blocks whose
    // heat is under T_c (the background pass).
    std::vector<uint64_t> candidates_locked(const HeatTracker &heat, uint64_t keep, bool below_cold_only,
                                            uint64_t mine_mask, uint64_t attach_id,
                                            const std::function<bool(uint64_t handle)> &pinned) const;

    // Under the lock, after refresh_locked: the blocks in L4 whose heat is
    // above T_h, hottest first, with the pool pages each would take.
    struct Hot {
        double heat;
        uint64_t handle, pages;
    };
    std::vector<Hot> hot_locked(const HeatTracker &heat) const;

  private:
    PoolLayout L_;
};

}  // namespace speckv
