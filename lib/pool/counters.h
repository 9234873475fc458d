// SPDX-License-Identifier: Apache-2.0
// A pool handle's process-local counters (speckv_pool_stats), sharded per
// thread so the hot paths do no locked read-modify-write: shard i <
// kShards belongs to one thread only (util/status.h thread_shard), the last
// one is shared by the threads beyond them.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>

#include "util/status.h"

namespace speckv {

class PoolCounters {
  public:
    enum Counter {
        kAllocs, kFrees, kWBytes, kRBytes, kReads, kHits, kMisses, kCrcFail, kPrefetch,
        kL2Hits, kSyncReads, kPfIgnored, kPfDropped, kLinkBytes, kPfPages,
        kEncPages, kEncRaw, kEncStored, kEncBypass, kDecPages, kSelCalls, kSelEntered, kSummaries, kAttendCalls,
        kUnitFollowers, kUnitContiguous, kPfHintsStale, kPfUnitsStale, kPfUnitsCut, kPfUnitsCapped,
        kPfOutsideSpan,
        kPacks, kPackSaved, kPackSkipped, kUnpacks, kL4Ahead, kL4Offlock,
        kNumCounters
    };
    static constexpr int kShards = 64;

    void bump(Counter c, uint64_t n = 1) {
        int sh = thread_shard();
        std::atomic<uint64_t> &a = shards_[sh].v[c];
        if (sh < kShards) a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);  // ours alone
        else a.fetch_add(n, std::memory_order_relaxed);
    }
    // This thread's shard (one lookup for several counters); compare with
    // overflow() to know whether it is shared.
    std::atomic<uint64_t> *mine() { return shards_[thread_shard()].v; }
    const std::atomic<uint64_t> *overflow() const { return shards_[kShards].v; }
    // The shards handed out so far and the shared one (the others are all
    // zero: never written).
    uint64_t total(Counter c) const {
        uint64_t t = shards_[kShards].v[c].load(std::memory_order_relaxed);
        for (int i = 0, n = thread_shards_assigned(); i < n; i++) t += shards_[i].v[c].load(std::memory_order_relaxed);
        return t;
    }

  private:
    struct alignas(64) Shard {
        std::atomic<uint64_t> v[kNumCounters];
    };
    std::unique_ptr<Shard[]> shards_ = std::make_unique<Shard[]>(kShards + 1);  // last: shared overflow
};

}  // namespace speckv
