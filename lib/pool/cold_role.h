// SPDX-License-Identifier: Apache-2.0
// ColdRole: the pool's L4 cold tier role (docs/tiers.md §9). One live
// process per pool holds it (SharedHeader::cold_pid), the one opened with
// config cold.path: it alone moves blocks between the pool (L3) and the L4
// file, so a move needs no cross-process protocol beyond the pool lock and
// the block's tier_seq:
//   demote: snapshot the block's pages (seqlock copies), write them to L4,
//           then, under the lock, lock every page, check none changed since
//           the snapshot and no pin appeared, bump tier_seq to odd (the
//           commit point) and free the pages. A failed L4 write leaves the
//           block as it was: nothing is lost.
//   promote: read the L4 copy (CRC32C checked), then under the lock take a
//           run of free pages, fill them, point the record at them, bump
//           tier_seq to even (the commit point), and drop the L4 copy.
// Readers and writers that resolved the block before a move see tier_seq
// changed after their copy and start again (pool/block_io.cc). A crash before
// a commit leaves the block where it was (recovery rebuilds the page bitmap
// from the records, and the next holder drops L4 copies no record names).
//
// Every process has a ColdRole: one that does not hold the tier uses it to
// ask the holder for a block (ensure_hot, through ColdRequests). It owns the
// L4 file (ColdTier), the heat that picks what goes there (HeatTracker,
// ColdChoice) and the holder's request server (ColdRequests). It reads and
// writes the block table and pages of the image it is bound to; the few
// things only the pool does (its lock, with recovery; the placement commit;
// an eviction; which thread is the prefetcher's) come as ColdRolePorts.
// cold_role.cc: open, close, promotion, the background tick, ensure_hot;
// cold_demote.cc: demotion.
#pragma once
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "events/fwd.h"
#include "config/config.h"
#include "pool/block_resolver.h"
#include "pool/block_view.h"
#include "pool/cold_choice.h"
#include "pool/cold_requests.h"
#include "pool/counters.h"
#include "pool/image.h"
#include "pool/log.h"
#include "pool/page_lock.h"
#include "pool/pool_format.h"
#include "pool/pool_lock.h"
#include "pool/refs.h"
#include "pool/room.h"
#include "share/share_table.h"
#include "tiers/cold_tier.h"
#include "tiers/heat.h"

namespace speckv {
// What the role needs that only the pool does.
struct ColdRolePorts {
    LockPort pool_lock;
    // The one place a block record's placement changes (Pool::commit_placement_locked).
    std::function<void(fmt::BlockRecord &r, uint64_t slot, uint64_t first_page, uint64_t packed_pages,
                       uint64_t tier_step)>
        commit_placement_locked;
    // One eviction of a block already marked Dying (Pool::evict_dying_locked).
    std::function<void(fmt::BlockRecord &r, uint64_t slot, uint64_t handle, events::Medium medium)> evict_dying_locked;
    // Whether the calling thread is this handle's prefetch thread (it must not wait).
    std::function<bool()> on_prefetch_thread;
};

class ColdRole {
  public:
    // The parts of the pool it works on, at bind_layout.
    struct Parts {
        BlockResolver *resolver;
        RoomFinder *room;
        PageLocks *plocks;
        ProcessRefs *refs;
        ShareTable *share;
        PoolCounters *counters;
        const PoolLog *log;
    };
    void bind(const PoolLayout &L, const Parts &parts, bool read_only);
    void set_ports(ColdRolePorts p) { ports_ = std::move(p); }

    // Who this handle is, once attached.
    struct Self {
        int attach_slot = -1;
        pid_t attach_pid = 0;
        uint64_t attach_id = 0;
        bool read_only = false;
    };
    // After attach: cold.wait_ms always; with cold.path, take the role,
    // open the file and reconcile it with the pool, start the server.
    int open(const Config &cfg, const Self &self, events::Publisher *events);
    // Before detach: give the role up (a fork() child lets go of the parent's).
    void close();

    // Whether this handle, in this process (not a fork() child), holds the L4 tier.
    bool holder() const { return cold_ && self_.attach_pid == getpid(); }
    bool opened() const { return cold_ != nullptr; }
    ColdTier *tier() const { return cold_.get(); }
    HeatTracker *heat() const { return heat_.get(); }

    // Under the lock, a block in L4 is being freed: its L4 copy goes (the
    // holder's; the next holder drops it when it opens).
    void forget_copy_locked(uint64_t handle);
    // A block is freed: its heat goes.
    void forget_heat(uint64_t handle) {
        if (heat_) heat_->forget(handle);
    }

    // For a view of a block in L4: promotes it (the holder) or asks the
    // holder to, then re-resolves *v; or fails clearly. OK at once for a
    // block in the pool.
    int ensure_hot(uint64_t handle, BlockView *v);
    // speckv_demote: moves a block to L4 now.
    int demote(uint64_t handle);
    // Under the lock: demotes blocks, coldest first, until fits() (at least
    // one batch when it is called). Never the block in slot `keep`.
    // below_cold_only: only blocks whose heat is under T_c.
    uint64_t demote_locked(const std::function<bool()> &fits, uint64_t keep, bool below_cold_only = false);
    // Under the lock, no room: demotes one batch (never slot `keep`) with the
    // lock released and returns true, unlocked: start over. False, locked,
    // after kOfflockRounds or with nothing to demote: fall back to
    // demote_locked (which sends nothing to L5).
    bool demote_offlock_locked(uint64_t keep, int *rounds);
    // From the prefetch thread (every 100 ms): above the heat module's
    // pressure target, one batch of blocks below T_c goes to L4 ahead of
    // need; kPromoteMargin below it, one batch of blocks in L4 above T_h
    // comes back.
    void tick();

    static constexpr double kPromoteMargin = 0.1;
    // Demotion batches an allocation writes to L4 with the pool lock
    // released before it falls back to demoting under the lock.
    static constexpr int kOfflockRounds = 8;

  private:
    int lock(bool *rec) { return ports_.pool_lock.lock(rec); }
    void unlock() { ports_.pool_lock.unlock(); }
    fmt::SharedHeader *sh() const { return L_.sh; }
    const fmt::Superblock *sb() const { return L_.sb; }
    fmt::BlockRecord *blocks() const { return L_.blocks; }
    fmt::PageEntry *pages() const { return L_.pages; }
    unsigned char *page_data(uint64_t p) const { return L_.page_data(p); }
    int resolve(uint64_t handle, BlockView *v) const { return p_.resolver->resolve(handle, v); }
    bool pinned(uint64_t handle) const { return p_.refs->pinned(handle); }
    void bump(PoolCounters::Counter c, uint64_t n = 1) { p_.counters->bump(c, n); }
    // misses / reads of L1 in this process (ColdChoice adapts to it).
    double l1_miss_rate() const {
        const uint64_t hits = p_.counters->total(PoolCounters::kHits), misses = p_.counters->total(PoolCounters::kMisses);
        return hits + misses ? double(misses) / double(hits + misses) : 0.0;
    }
    uint64_t mine_mask() const { return self_.attach_slot >= 0 ? uint64_t(1) << self_.attach_slot : 0; }

    // Brings a block back from L4 (the holder only); OK if it is in the pool now.
    int promote(uint64_t handle);
    void promote_hot();
    // Its L5 copy is gone: a published, unreferenced block still at `tseq` is
    // evicted (BlockRemoved, REMOTE), so lookups miss it. Takes the lock;
    // true if dropped.
    bool drop_lost_block(uint64_t handle, uint64_t tseq);
    // Demotes exactly these slots (one put batch). have_lock: the caller
    // holds the pool lock throughout; else the snapshot and the L4 write run
    // off it and only the commit takes it. Returns how many moved; *why (may
    // be null): SPECKV_OK if any moved, else why none did.
    uint64_t demote_slots(const std::vector<uint64_t> &slots, bool have_lock, int *why = nullptr);
    // demote_slots' steps: snapshot a block (claim it, copy its pages under
    // their sequence locks), then, after the L4 write, commit it under the lock.
    struct Victim;
    struct Why;
    bool claim(uint64_t handle);
    void unclaim(uint64_t handle);
    bool snapshot(uint64_t slot, Why *w, Victim *out);
    bool copy_pages(Victim *v, uint32_t *data_pages);
    bool commit_locked(const Victim &v);
    // Under the lock: demotion candidates, coldest first (slots).
    std::vector<uint64_t> candidates_locked(uint64_t keep, bool below_cold_only);

    PoolLayout L_;
    Parts p_{};
    ColdRolePorts ports_;
    Self self_;
    events::Publisher *events_ = nullptr;
    std::unique_ptr<ColdTier> cold_;
    std::unique_ptr<HeatTracker> heat_;
    ColdChoice choice_;     // which blocks go first (pool/cold_choice.h)
    ColdRequests reqs_;     // requests to the holder, and its server thread (pool/cold_requests.h)
    uint32_t batch_ = 16;   // cold.batch
    uint32_t wait_ms_ = 5000;  // cold.wait_ms: how long a request to the holder waits
    std::mutex demote_mu_;
    std::unordered_set<uint64_t> demoting_;  // handles being demoted by this process now (under demote_mu_)
};

}  // namespace speckv
