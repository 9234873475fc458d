// SPDX-License-Identifier: Apache-2.0
// PoolReporter: what the pool reports about itself (speckv_block_info,
// speckv_stats and its JSON, `speckv pool info` and `pool ls`). A read-only
// part: it reads the image (pool/image.h's PoolLayout), the block table
// through BlockResolver, and this process's counters and tier parts it is
// handed; it changes nothing but this process's published tier counters in
// its own attach record. Pool makes one per call (report()): the parts it
// points at are created at different times (L2 and the TLB at init_tiers,
// the controller with the prefetch thread).
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "events/fwd.h"
#include "backend/backend.h"
#include "pool/block_resolver.h"
#include "pool/codec_choice.h"
#include "pool/counters.h"
#include "pool/image.h"
#include "pool/packed_image.h"
#include "pool/pool_report.h"
#include "speckv.h"

namespace speckv {
class PrefetchBuffer;
class PrefetchController;
class Tlb;

// What a report reads. Pointers may be null where this handle has no such
// part (no L2, no TLB, no prefetch thread yet, no KV events).
struct ReportSources {
    const PoolLayout *L;
    const std::string *location;  // the mapping's path; empty: anonymous memory
    const BlockResolver *resolver;
    const PackedImage *packed;
    const PoolCounters *counters;
    const PrefetchBuffer *l2;
    const Tlb *tlb;
    const PrefetchController *ctl;
    double beta_max;  // prefetch.beta_max: the beta reported before the controller runs
    const Placement *placement;
    const events::Publisher *events;
    const CodecChoice *codec;
    bool l4_holder;  // this handle holds the L4 tier
    // Where this process publishes its tier counters: its attach record, if
    // it is attached (slot >= 0), by the process that attached (not a fork()
    // child), to a writable mapping.
    int attach_slot;
    pid_t attach_pid;
    bool writable;
};

class PoolReporter {
  public:
    explicit PoolReporter(const ReportSources &s) : s_(s) {}
    int block_info(uint64_t handle, speckv_block_meta *out) const;
    // This process's counters and the pool's (stats also publishes the tier
    // counters into our attach record for `speckv pool stats`).
    void stats_local(speckv_pool_stats *st) const;
    void stats(speckv_pool_stats *st) const;
    // From `have` if given, else counted now. Owner-written, relaxed: a
    // reader sees a recent value.
    void publish_tier_counters(const speckv_pool_stats *have) const;
    std::string stats_json() const;
    void info(PoolInfo *out) const;
    int list_blocks(std::vector<BlockInfo> *out) const;

  private:
    uint64_t total(PoolCounters::Counter c) const { return s_.counters->total(c); }
    const fmt::Superblock &sb() const { return *s_.L->sb; }
    fmt::SharedHeader *sh() const { return s_.L->sh; }
    ReportSources s_;
};

}  // namespace speckv
