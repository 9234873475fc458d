// SPDX-License-Identifier: Apache-2.0
// BlockTable: the commits that change the block table (docs/pool-format.md
// "Blocks"), under the pool lock unless said otherwise. A new block's record
// (its handle store is the commit point), a block's release (its handle
// cleared, then its pages, slot, totals, heat and L4 copy), the placement
// commit of a block that moves (packing, unpacking, back from L4), the
// eviction of unreferenced published blocks, and this process's references
// to blocks (lock-free, a shard's mutex inside).
//
// It works on the image it is bound to and the parts a release or an
// eviction updates (the translation index, the hash index, the L4 role, the
// page locks, the references); the lock, and the decision of what to
// allocate or free, are the pool's (Allocator::alloc, Allocator::free).
#pragma once
#include <cstdint>
#include <functional>

#include "events/fwd.h"
#include "pool/image.h"
#include "pool/log.h"
#include "pool/page_lock.h"
#include "pool/pool_format.h"
#include "pool/refs.h"
#include "pool/room.h"
#include "pool/xlate_index.h"
#include "share/share_table.h"
#include "speckv.h"

namespace speckv {
class ColdRole;

class BlockTable {
  public:
    struct Parts {
        XlateIndex *xlate;
        ShareTable *share;
        ColdRole *cold;
        PageLocks *plocks;
        ProcessRefs *refs;
        const PoolLog *log;
    };
    void bind(const PoolLayout &L, const Parts &parts) {
        L_ = L;
        p_ = parts;
    }
    // After attach: this process's attach record (references set its bit;
    // new blocks are owned by its id).
    void set_self(int attach_slot, uint64_t attach_id) {
        attach_slot_ = attach_slot;
        attach_id_ = attach_id;
    }
    void set_events(events::Publisher *e) { events_ = e; }
    void set_flush(bool flush) { flush_ = flush; }

    // A new block at pl's pages: a free slot (or the next), its pages marked
    // used and zero, its record; then the totals (blocks, pages, bytes by
    // dtype, the tenant's pages, the allocation cursor). Returns its handle.
    uint64_t commit_new_locked(const AllocPlace &pl, uint64_t bytes, int dtype, uint64_t tenant,
                               fmt::TenantEntry *trow, const speckv_hint *hint);
    // Frees a live block's slot and pages (the caller checked it may go).
    void release_locked(fmt::BlockRecord &r, uint64_t handle);
    // The one place a block record's placement changes (first_page,
    // packed_pages, their CRC), atomically for a crash through
    // SharedHeader::move_slot, and for lock-free readers: tier_seq moves by
    // tier_step (2: pack, unpack; 1: back from L4) before move_slot clears,
    // and BlockResolver::resolve retakes a snapshot taken while move_slot
    // names the slot.
    void commit_placement_locked(fmt::BlockRecord &r, uint64_t slot, uint64_t first_page, uint64_t packed_pages,
                                 uint64_t tier_step);
    // Evicts unreferenced published blocks, least recently used first, until
    // `fits` says there is room. tenant_only: only that tenant's. Returns how many.
    uint64_t evict_locked(const std::function<bool()> &fits, const uint64_t *tenant_only);
    // One eviction, the block already marked Dying: unpublish, BlockRemoved
    // (medium m), release, count.
    void evict_dying_locked(fmt::BlockRecord &r, uint64_t slot, uint64_t handle, events::Medium medium);

    // This process's references (need_published: only to a published block).
    int acquire_ref(uint64_t handle, bool need_published);
    int release_ref(uint64_t handle);

  private:
    fmt::SharedHeader *sh() const { return L_.sh; }
    fmt::BlockRecord *blocks() const { return L_.blocks; }
    fmt::PageEntry *pages() const { return L_.pages; }

    PoolLayout L_;
    Parts p_{};
    events::Publisher *events_ = nullptr;
    int attach_slot_ = -1;
    uint64_t attach_id_ = 0;
    bool flush_ = false;  // config share.flush
};

// Test-only, not part of the C ABI (libspeckv.so exports speckv_* alone):
// commit_placement_locked calls it, pool lock held, at stage 0 between the
// record's first_page and packed_pages stores and at stage 1 after both (and
// their CRC), before the move is published. Null outside tests; tests set it
// to interleave readers with a move deterministically.
namespace testing {
extern void (*placement_hook)(uint64_t slot, int stage);
}

}  // namespace speckv
