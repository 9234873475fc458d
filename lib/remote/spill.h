// SPDX-License-Identifier: Apache-2.0
// L5 behind L4 (docs/remote.md "Demotion to L5"): the cold tier's spill
// store on the Redis Cluster. Blocks the L4 file has no room for live here
// under their handle and come back to the same handle on use. Keys
// `skv:l4:{<store id>:<handle>}` (the store id is random per L4 file, kept in
// the file's L5 directory and bound here, so pools on many hosts share one
// cluster and a later holder of the file finds the same keys); values in the format of value.h, so every
// fetch is verified (a mismatch is a miss, never data).
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "remote/cluster.h"
#include "tiers/cold_spill.h"

namespace speckv::remote {

struct SpillStats {
    uint64_t puts = 0, put_bytes = 0;  // blocks written (demoted to L5)
    uint64_t gets = 0, get_bytes = 0;  // blocks read back, verified
    uint64_t lost = 0;                 // reads that found no sound value (evicted, deleted, overwritten)
    uint64_t checksum_failures = 0;    // of those, values that failed verification
    uint64_t errors = 0;               // commands without an answer or refused
    uint64_t dels = 0;
};

class Spill final : public speckv::ColdSpill {
  public:
    Spill(std::vector<Endpoint> seeds, int timeout_ms, int64_t ttl_s);
    void put(std::span<PutItem> items) override;
    void get(std::span<GetItem> items) override;
    void del(std::span<DelItem> items) override;
    void bind(uint64_t store_id) override;
    SpillStats stats() const;
    std::string key(uint64_t k) const;  // the cluster key of a tier key (tests)

  private:
    void ident(uint64_t k, uint8_t hash[32]) const;
    mutable std::mutex mu_;  // the connections and the counters
    Cluster cluster_;
    uint64_t id_;  // the store id: random until bind (called once, before any use)
    int64_t ttl_s_;
    SpillStats st_;
};

}  // namespace speckv::remote
