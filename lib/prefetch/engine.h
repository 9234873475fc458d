// SPDX-License-Identifier: Apache-2.0
// PrefetchEngine: the prefetcher behind speckv_prefetch (docs/tiers.md),
// per pool handle. It owns the L2 prefetch buffer, the policy
// (PrefetchController, made when the first hint starts the thread), the
// thread and its queue (HintQueue), what it learns from this process's
// readers (ReaderClocks, AliasTable) and the per-thread read steps
// note_access cuts the reads into. Its thread plans each hint and brings the
// blocks of the units planned into L2.
//
// It holds no Pool. It reads block records itself (BlockResolver, for the
// aliases' validity; the record a read names, in note_access), and asks the
// pool through the three jobs of PrefetchPorts, given once at configure:
// the handles of a unit (the translation index), one block's pages into L2
// (the pool's page reads), and the extras of the thread's 100 ms tick.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "config/config.h"
#include "pool/block_resolver.h"
#include "pool/counters.h"
#include "pool/pool_format.h"
#include "prefetch/aliases.h"
#include "prefetch/hint_queue.h"
#include "prefetch/prefetch_ctl.h"
#include "speckv.h"
#include "tiers/tier_buffers.h"

namespace speckv {

struct PrefetchPorts {
    // The handles of the live blocks of (tenant, request, layer) covering
    // pos (~0: all of them), in token order (the translation index).
    std::function<void(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, std::vector<uint64_t> *handles)>
        collect;
    // One block's pages that are in neither L1 nor L2 into L2, verified, for
    // L2's owner tag `owner`; skip_from: the token its request is appending
    // at (~0: none). Returns the pages brought in; *link += the bytes that
    // crossed L3 -> L2.
    std::function<uint64_t(uint64_t handle, uint64_t owner, uint64_t skip_from, uint64_t *link)> fetch_block;
    // Every 100 ms on the prefetch thread: the pool's part of the tick
    // (publish its tier counters, the L4 holder's background pass).
    std::function<void()> tick;
};

// What the engine is given at configure besides the config and the ports.
struct PrefetchSetup {
    double bandwidth = 0;          // the L3 -> L2 bytes/s beta measures against (the placement's)
    uint32_t page_size = 0;
    int64_t tenant_id = -1;        // config tenant.id: hints of other tenants are ignored; -1 = all
    const BlockResolver *resolver = nullptr;
    PoolCounters *counters = nullptr;
};

class PrefetchEngine {
  public:
    PrefetchEngine() = default;
    PrefetchEngine(const PrefetchEngine &) = delete;
    PrefetchEngine &operator=(const PrefetchEngine &) = delete;
    ~PrefetchEngine() { stop(); }

    // The prefetch.* settings, checked, and the thread's work. No L2 yet.
    int configure(const Config &cfg, const PrefetchSetup &setup, PrefetchPorts ports);
    // L2 (prefetch.l2_bytes), when prefetching is enabled. After configure.
    int open_l2(const Config &cfg);
    // Stops and joins the thread (idempotent; in a fork() child: lets go).
    void stop() { queue_.stop(); }

    // speckv_prefetch: checks the hint and queues it (the first starts the
    // thread); a read-only handle (writable false) queues nothing.
    int prefetch(const speckv_hint *hint, bool writable);

    // A read of `pages` pages of the block whose record is rec, the worst
    // source among them (0 = L1, 1 = L2, 2 = L3). Call when active().
    void note_access(const fmt::BlockRecord *rec, int worst_source, uint32_t pages);
    // Whether the thread runs (then reads are noted). The read path's test.
    bool active() const { return ctl_.load(std::memory_order_relaxed) != nullptr; }

    // Live aliases of k covering pos (~0: all), validated (translation's use).
    void collect_aliases(const AliasKey &k, uint64_t pos, std::vector<Alias> *out) { aliases_.collect(k, pos, out); }
    // L2, or null when prefetching is off.
    PrefetchBuffer *l2() const { return l2_.get(); }
    // The policy once the thread runs, else null.
    PrefetchController *controller() const { return ctl_.load(std::memory_order_acquire); }
    const PrefetchParams &params() const { return params_; }
    // Whether the caller is the prefetch thread.
    bool on_thread() const { return queue_.on_thread(); }

  private:
    struct ReadStep;
    HintQueue::Work work();
    int start();
    void hint(const QueuedHint &ph, bool newer);
    uint64_t trim_to_span(uint64_t tenant, const PrefetchUnit &u, uint64_t appending, std::vector<uint64_t> *hs) const;
    void flush_step(ReadStep &s, PrefetchController *c);
    bool alias_valid(const AliasKey &k, const Alias &a) const;
    static void on_l2_resolved(void *user, uint64_t owner, uint64_t key, bool used);
    static uint64_t next_serial();
    void bump(PoolCounters::Counter c, uint64_t n = 1) { counters_->bump(c, n); }

    PrefetchPorts ports_;
    PrefetchParams params_;
    uint32_t page_size_ = 0;
    int64_t tenant_id_ = -1;
    bool enabled_ = false;
    bool hinted_ = false;  // prefetch.policy = 1
    bool sync_ = false;    // prefetch.sync = 1: hints carried out on the caller's thread
    const BlockResolver *resolver_ = nullptr;
    PoolCounters *counters_ = nullptr;
    std::unique_ptr<PrefetchBuffer> l2_;
    // ctl_ is non-null once the thread runs (the first hint starts it).
    std::unique_ptr<PrefetchController> ctl_owner_;
    std::atomic<PrefetchController *> ctl_{nullptr};
    // request -> (tenant, last hinted token position), from hints (the thread only)
    std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> req_;
    // Reader progress (docs/tiers.md "Stale hints"): the unit steps this
    // process's readers started, and when each unit was.
    ReaderClocks clocks_;
    // Shared-block attribution (engine.cc explains it; docs/tiers.md "Shared blocks").
    uint64_t serial_ = next_serial();  // tells this engine's per-thread steps from another's
    AliasTable aliases_{[this](const AliasKey &k, const Alias &a) { return alias_valid(k, a); }};
    // Last: its thread runs the work above; stopped before any of it goes.
    HintQueue queue_;
};

}  // namespace speckv
