// SPDX-License-Identifier: Apache-2.0
// BlockResolver: from a handle to a consistent snapshot of its live block's
// placement (pool/block_view.h), taken without the pool lock. Every part that
// finds a block's pages from its handle goes through it: the read and write
// paths, packing, L4, selection, translation, reporting. It reads the block
// table of the image it is bound to and nothing else.
#pragma once
#include <cinttypes>
#include <cstdint>

#include "pool/block_view.h"
#include "pool/image.h"
#include "pool/pool_format.h"
#include "pool/pool_lock.h"
#include "util/seqlock.h"
#include "util/status.h"

namespace speckv {

class BlockResolver {
  public:
    // The image's areas (after its superblock was validated) and the pool
    // lock whose timeout bounds a wait for a move (wait_move).
    void bind(const PoolLayout &L, const PoolLock *lock) {
        sb_ = L.sb;
        sh_ = L.sh;
        blocks_ = L.blocks;
        lock_ = lock;
    }
    // config tenant.id (-1 = unbound): another tenant's handles are not live here.
    void set_tenant(int64_t tenant_id) { tenant_id_ = tenant_id; }
    int64_t tenant_id() const { return tenant_id_; }
    bool tenant_visible(uint64_t tenant) const { return tenant_id_ < 0 || uint64_t(tenant_id_) == tenant; }

    // SPECKV_EBADHANDLE (never issued, freed, another tenant's),
    // SPECKV_ECORRUPT (a record whose geometry does not fit the pool),
    // SPECKV_EBUSY (the block stayed mid-move for lock.timeout_ms).
    __attribute__((always_inline)) inline int resolve(uint64_t handle, BlockView *out) const;

    // resolve() found the block's placement mid-change: spin, then yield;
    // SPECKV_EBUSY once it stays so for lock.timeout_ms (*deadline: 0 at first).
    int wait_move(uint64_t handle, uint32_t spins, uint64_t *deadline) const;

  private:
    const fmt::Superblock *sb_ = nullptr;
    const fmt::SharedHeader *sh_ = nullptr;
    const fmt::BlockRecord *blocks_ = nullptr;
    const PoolLock *lock_ = nullptr;
    int64_t tenant_id_ = -1;
};

__attribute__((always_inline)) inline int BlockResolver::resolve(uint64_t handle, BlockView *out) const {
    uint64_t slot = (handle & ((1u << fmt::kSlotBits) - 1));
    if (handle == 0 || slot == 0 || slot > sb_->max_blocks)
        return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " was never issued by this pool", handle);
    const fmt::BlockRecord &r = blocks_[slot - 1];
    if (r.handle.load(std::memory_order_acquire) != handle)
        return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " is not live (freed, or never issued)", handle);
    if (tenant_id_ >= 0 && relaxed_field(r.tenant) != uint64_t(tenant_id_)) [[unlikely]]  // another tenant's: not there
        return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " is not live (freed, or never issued)", handle);
    // The placement (first_page, packed_pages) changes in two stores under
    // the lock (Pool::commit_placement_locked), with SharedHeader::move_slot
    // naming the slot meanwhile and tier_seq bumped before it is cleared: a
    // snapshot taken across such a change (new first_page, old packed_pages:
    // the new pages read through the old layout) is taken again, never used.
    BlockView v;
    uint64_t deadline = 0;
    for (uint32_t spins = 0;; spins++) {
        const uint64_t tseq = r.tier_seq.load(std::memory_order_acquire);
        v = BlockView{&r, relaxed_field(r.first_page), relaxed_field(r.bytes), relaxed_field(r.npages), relaxed_field(r.dtype),
                      tseq, relaxed_field(r.packed_pages)};
        std::atomic_thread_fence(std::memory_order_acquire);
        if (sh_->move_slot.load(std::memory_order_acquire) != slot &&
            r.tier_seq.load(std::memory_order_relaxed) == tseq) [[likely]]
            break;
        if (int rc = wait_move(handle, spins, &deadline); rc != SPECKV_OK) return rc;
    }
    const uint64_t tseq = v.tseq;
    if (tseq & 1) [[unlikely]]
        v.first_page = 0;  // in L4: no pages here (callers check cold() before touching any)
    if (!record_geometry_ok(*sb_, v.first_page, v.packed, v.npages, v.bytes, v.dtype, v.cold())) [[unlikely]] {
        if (r.handle.load(std::memory_order_acquire) != handle)
            return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " was freed meanwhile", handle);
        return fail(SPECKV_ECORRUPT, "block record of handle 0x%" PRIx64 " is corrupt", handle);
    }
    *out = v;
    return SPECKV_OK;
}

}  // namespace speckv
