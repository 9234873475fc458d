// SPDX-License-Identifier: Apache-2.0
// The block table's per-process side: the references and pins this process
// holds (docs/sharing.md "References", docs/pool-format.md "Pins").
//   References to published blocks, by slot: the handle they are for and
//   how many. The slot's holders bit (BlockRecord::holders) is set iff the
//   count is > 0.
//   Pins: a pinned block can't be written or freed here. By handle: (pins,
//   of which hold a reference), and how many pins the shard holds (a
//   lock-free "none").
// Both sharded by slot, so threads that reference or pin different blocks
// take different locks (speckv_pin takes a reference each time). The pool
// takes the shards' locks; this holds the maps.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <unordered_map>
#include <utility>

namespace speckv {

struct alignas(64) RefShard {
    std::mutex mu;
    std::unordered_map<uint64_t, std::pair<uint64_t, uint32_t>> map;  // slot -> (handle, count)
};

struct alignas(64) PinShard {
    std::mutex mu;
    std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> map;  // an entry at 0 pins is kept idle
    std::atomic<uint64_t> total{0};
    bool pinned(uint64_t handle) const {  // under mu
        auto it = map.find(handle);
        return it != map.end() && it->second.first > 0;
    }
};

class ProcessRefs {
  public:
    static constexpr size_t kShards = 64;
    static constexpr size_t kKeepIdle = 64;  // entries per shard kept at count 0 before they are erased
    RefShard &ref_shard(uint64_t slot) { return refs_[slot % kShards]; }
    PinShard &pin_shard(uint64_t handle) { return pins_[handle % kShards]; }  // low bits: the slot
    std::span<RefShard> ref_shards() { return refs_; }
    // Whether this process pins the block now (takes its pin shard's lock
    // unless no block of the shard is pinned).
    bool pinned(uint64_t handle) {
        PinShard &ps = pin_shard(handle);
        if (ps.total.load(std::memory_order_acquire) == 0) return false;
        std::lock_guard g(ps.mu);
        return ps.pinned(handle);
    }

  private:
    RefShard refs_[kShards];
    PinShard pins_[kShards];
};

}  // namespace speckv
