// SPDX-License-Identifier: Apache-2.0
// L5: the remote tier a pool handle owns when config remote.uri is set
// (docs/remote.md). Published blocks are written to a Redis Cluster (through:
// publish waits for the batch holding it; back: queued, sent in batches by a
// writer thread; off: never), and a lookup that misses in the pool fetches the
// block from the cluster, verifies it, and publishes it locally. Nothing here
// runs under the pool lock: the tier only calls the pool's public operations.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "pool/log.h"
#include "remote/cluster.h"
#include "remote/spill.h"
#include "speckv.h"

namespace speckv {
class Pool;
}

namespace speckv::remote {

struct TierStats {
    uint64_t hits = 0;               // lookups served from L5 (verified, now in the pool)
    uint64_t misses = 0;             // lookups L5 had no (sound) value for
    uint64_t checksum_failures = 0;  // values that failed verification (counted as misses too)
    uint64_t errors = 0;             // commands without an answer, or refused by the cluster
    uint64_t puts = 0;               // blocks written to L5
    uint64_t put_bytes = 0;
    uint64_t get_bytes = 0;          // value bytes fetched
    uint64_t dropped = 0;            // write-back blocks dropped: the queue was full
    uint64_t redirects = 0;          // MOVED / ASK replies followed
};

class Tier {
  public:
    enum Write { kThrough = 0, kBack = 1, kOff = 2 };
    // Reads remote.* from cfg. SPECKV_EINVAL for a malformed remote.uri; an
    // unreachable cluster is no error (every operation then misses and counts).
    static int create(const Config &cfg, std::unique_ptr<Tier> *out);
    ~Tier();  // sends what is queued (within remote.timeout_ms), stops the writer

    // After a successful publish: sends the block (per remote.write).
    void on_publish(Pool &pool, uint64_t handle);
    // After a lookup missed in the pool: SPECKV_OK with *out set (the block is
    // now published in this pool and the caller holds a reference),
    // SPECKV_ENOENT (a miss, errmsg says why), or the pool's error from
    // allocating or filling the local block.
    int on_lookup_miss(Pool &pool, uint64_t tenant, const uint8_t *hash, uint64_t *out);
    // The store the pool's L4 tier spills to (remote.demote = 1; null: 0).
    // Its blocks keep their handles: docs/remote.md "Demotion to L5".
    // With `listed` (the L4 file's directory names copies in the cluster) it
    // is made even with remote.demote = 0, to read and delete those.
    std::shared_ptr<Spill> spill_for_l4(bool listed = false);
    bool demotes() const { return demote_; }
    TierStats stats() const;
    // ",\"remote_hits\":N,..." for the pool's stats JSON.
    std::string json_fields() const;

  private:
    Tier() = default;
    void writer_loop();
    struct Item;
    void send_batch(Cluster &cluster, std::unique_lock<std::mutex> &g);
    void keep_spare(std::string &&v);  // under mu_

    std::vector<Endpoint> seeds_;
    int timeout_ms_ = 1000;
    int64_t ttl_s_ = 0;
    Write mode_ = kThrough;
    PoolLog log_;
    bool demote_ = true;
    std::shared_ptr<Spill> spill_;

    mutable std::mutex read_mu_;  // the reader's cluster connections
    std::unique_ptr<Cluster> reader_;

    struct Item {
        std::string key, value;
        uint64_t seq;
    };
    mutable std::mutex mu_;  // queue, counters, writer's state
    std::condition_variable cv_, done_cv_;
    std::deque<Item> queue_;
    // Value buffers of sent blocks, reused by the next publishes: a fresh
    // buffer of a block's size is a page fault per 4 KiB on first touch.
    static constexpr size_t kSpares = 4, kSpareBytes = size_t(32) << 20;
    std::vector<std::string> spare_;
    size_t spare_bytes_ = 0;
    size_t queued_bytes_ = 0;
    uint64_t next_seq_ = 1, done_seq_ = 0;
    bool stop_ = false;
    bool sending_ = false;                     // write-through: a publisher is sending the queue
    std::unique_ptr<Cluster> writer_cluster_;  // the writer's connections (the thread, or the sending publisher)
    std::thread writer_;
    TierStats st_;
    uint64_t writer_redirects_ = 0;
};

}  // namespace speckv::remote
