// SPDX-License-Identifier: Apache-2.0
// Packer: packed blocks (docs/pool-format.md "Packed blocks"). The write
// that completes a block whose pages are codec records moves those records,
// back to back, into fewer fresh pages (a PackHead image) and frees the
// block's pages, so the codec's ratio becomes pool capacity, not only link
// bytes; a write or a pin of a packed block unpacks it first (fresh pages,
// one per page again).
//
// The image is written whole before the block record points at it and is
// never changed while it does; every move (pack, unpack, L4) bumps the
// record's tier_seq under the pool lock. So readers copy from an image
// without page locks and re-check handle and tier_seq afterwards, exactly as
// they do for L4 moves, and the L1/L2 copies of a packed page are keyed by
// (slot, logical page) and tagged with that tier_seq.
//
// Crash consistency: the image goes into pages no record names, then the
// record's placement changes (BlockTable::commit_placement_locked: recorded
// first in the shared header, so recovery finishes a change cut short
// between the record's stores), then the old pages go free. A process killed
// before that leaves leaked pages that recovery reclaims.
//
// It works on the image it is bound to and the parts a move needs (the
// resolver, free-page runs, pins, tenant rows, the block table's placement
// commit and eviction, the L4 role's demotion for room, the page locks, the
// packed-image accessors, L1); the pool lock comes as a port.
#pragma once
#include <cstdint>
#include <functional>

#include "pool/block_resolver.h"
#include "pool/block_table.h"
#include "pool/block_view.h"
#include "pool/counters.h"
#include "pool/image.h"
#include "pool/log.h"
#include "pool/packed_image.h"
#include "pool/page_lock.h"
#include "pool/pool_lock.h"
#include "pool/refs.h"
#include "pool/room.h"
#include "share/share_table.h"

namespace speckv {
class ColdRole;
class PageCache;

using PackerPorts = LockRecoverPort;

class Packer {
  public:
    struct Parts {
        BlockResolver *resolver;
        RoomFinder *room;
        ProcessRefs *refs;
        ShareTable *share;
        BlockTable *blocks;
        ColdRole *cold;
        PageLocks *plocks;
        const PackedImage *packed;
        PoolCounters *counters;
        const PoolLog *log;
    };
    void bind(const PoolLayout &L, const Parts &parts) {
        L_ = L;
        p_ = parts;
    }
    void set_ports(PackerPorts p) { ports_ = std::move(p); }
    void set_l1(PageCache *l1) { l1_ = l1; }
    void set_attach_slot(int slot) { attach_slot_ = slot; }

    // Packs a block whose pages are coded, if that saves pages. Best effort:
    // a block that cannot be packed now stays as it is (counted, logged).
    void pack_block(uint64_t handle);
    // Back to one page per page (for a write or a pin): fresh pages, then the
    // image's pages go free. Re-resolves *v. The block stays packed and
    // readable on failure (no room, quota, a bad image).
    int unpack_block(uint64_t handle, BlockView *v);

  private:
    int lock(bool *rec) { return ports_.pool_lock.lock(rec); }
    void unlock() { ports_.pool_lock.unlock(); }
    fmt::SharedHeader *sh() const { return L_.sh; }
    fmt::BlockRecord *blocks() const { return L_.blocks; }
    fmt::PageEntry *pages() const { return L_.pages; }
    uint64_t *bitmap() const { return L_.bitmap; }
    unsigned char *page_data(uint64_t p) const { return L_.page_data(p); }
    int resolve(uint64_t handle, BlockView *v) const { return p_.resolver->resolve(handle, v); }
    void bump(PoolCounters::Counter c, uint64_t n = 1) { p_.counters->bump(c, n); }

    PoolLayout L_;
    Parts p_{};
    PackerPorts ports_;
    PageCache *l1_ = nullptr;
    int attach_slot_ = -1;
};

}  // namespace speckv
