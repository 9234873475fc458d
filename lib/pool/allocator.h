// SPDX-License-Identifier: Apache-2.0
// Allocator: speckv_alloc and speckv_free over the block table
// (docs/pool-format.md "Blocks", docs/tiers.md §10). An allocation checks its
// arguments, takes the pool lock, enforces the tenant's quota (evicting the
// tenant's own unreferenced published blocks first), finds room (a free slot
// and a run of free pages, next to the unit's latest block when it can:
// RoomFinder), and when there is none makes it: what dead processes left is
// reclaimed, the L4 holder demotes the coldest blocks, then unreferenced
// published blocks are evicted, least recently used first. BlockTable
// commits the record. A free of a published block drops this process's
// reference; of an unpublished one releases it, unless a pin holds it.
//
// It is bound to the image and the parts it works on; the pool lock and
// recovery come as a port. It never holds the Pool.
#pragma once
#include <cstdint>

#include "pool/block_resolver.h"
#include "pool/block_table.h"
#include "pool/counters.h"
#include "pool/image.h"
#include "pool/pool_lock.h"
#include "pool/refs.h"
#include "pool/room.h"
#include "pool/xlate_index.h"
#include "share/share_table.h"
#include "speckv.h"

namespace speckv {

class ColdRole;        // pool/cold_role.h
class PageCache;       // tiers/page_cache.h (L1)
class PrefetchBuffer;  // tiers/tier_buffers.h (L2)

class Allocator {
  public:
    struct Parts {
        const BlockResolver *resolver;
        const ShareTable *share;
        BlockTable *blocks;
        const RoomFinder *room;
        ColdRole *cold;
        const XlateIndex *xlate;
        ProcessRefs *refs;
        PoolCounters *counters;
    };
    void bind(const PoolLayout &L, const Parts &parts, bool read_only) {
        L_ = L;
        p_ = parts;
        read_only_ = read_only;
    }
    void set_ports(LockRecoverPort p) { ports_ = std::move(p); }
    // The tiers whose copies of a freed block's pages go (L2 may be null).
    void set_tiers(PageCache *l1, PrefetchBuffer *l2) {
        l1_ = l1;
        l2_ = l2;
    }
    void set_attach_slot(int slot) { attach_slot_ = slot; }

    int alloc(uint64_t bytes, int dtype, const speckv_hint *hint, uint64_t *out);
    int free(uint64_t handle);

  private:
    static constexpr int kRetry = 1;  // make_room_locked: unlocked, start over
    // The _locked steps that fail unlock first.
    int check_args(uint64_t bytes, int dtype, const speckv_hint *hint, uint64_t *tenant, uint64_t *np) const;
    int quota_locked(fmt::TenantEntry *trow, uint64_t tenant, uint64_t np);
    int make_room_locked(AllocPlace *pl, int *offlock_rounds);
    int lock(bool *rec) { return ports_.pool_lock.lock(rec); }
    void unlock() { ports_.pool_lock.unlock(); }

    PoolLayout L_;
    Parts p_{};
    LockRecoverPort ports_;
    PageCache *l1_ = nullptr;
    PrefetchBuffer *l2_ = nullptr;
    bool read_only_ = false;
    int attach_slot_ = -1;
};

}  // namespace speckv
