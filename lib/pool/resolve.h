// SPDX-License-Identifier: Apache-2.0
// Pool::resolve, inline for every part of the pool that finds a block's
// pages from its handle (the read and write paths, packing, L4, selection,
// translation): a consistent snapshot of a live block's placement taken
// without the lock (pool/pool.h BlockView).
#pragma once
#include <cinttypes>

#include "pool/pool.h"
#include "util/seqlock.h"
#include "util/status.h"

namespace speckv {

__attribute__((always_inline)) inline int Pool::resolve(uint64_t handle, BlockView *out) const {
    uint64_t slot = (handle & ((1u << fmt::kSlotBits) - 1));
    if (handle == 0 || slot == 0 || slot > sb()->max_blocks)
        return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " was never issued by this pool", handle);
    const fmt::BlockRecord &r = blocks()[slot - 1];
    if (r.handle.load(std::memory_order_acquire) != handle)
        return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " is not live (freed, or never issued)", handle);
    if (tenant_id_ >= 0 && relaxed_field(r.tenant) != uint64_t(tenant_id_)) [[unlikely]]  // another tenant's: not there
        return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " is not live (freed, or never issued)", handle);
    // The placement (first_page, packed_pages) changes in two stores under
    // the lock (commit_placement_locked), with SharedHeader::move_slot naming
    // the slot meanwhile and tier_seq bumped before it is cleared: a snapshot
    // taken across such a change (new first_page, old packed_pages: the new
    // pages read through the old layout) is taken again, never used.
    BlockView v;
    uint64_t deadline = 0;
    for (uint32_t spins = 0;; spins++) {
        const uint64_t tseq = r.tier_seq.load(std::memory_order_acquire);
        v = BlockView{&r, relaxed_field(r.first_page), relaxed_field(r.bytes), relaxed_field(r.npages), relaxed_field(r.dtype),
                      tseq, relaxed_field(r.packed_pages)};
        std::atomic_thread_fence(std::memory_order_acquire);
        if (sh()->move_slot.load(std::memory_order_acquire) != slot &&
            r.tier_seq.load(std::memory_order_relaxed) == tseq) [[likely]]
            break;
        if (int rc = wait_move(handle, spins, &deadline); rc != SPECKV_OK) return rc;
    }
    const uint64_t tseq = v.tseq;
    if (tseq & 1) [[unlikely]]
        v.first_page = 0;  // in L4: no pages here (callers check cold() before touching any)
    if (!geometry_ok(*sb(), v.first_page, v.packed, v.npages, v.bytes, v.dtype, v.cold())) [[unlikely]] {
        if (r.handle.load(std::memory_order_acquire) != handle)
            return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " was freed meanwhile", handle);
        return fail(SPECKV_ECORRUPT, "block record of handle 0x%" PRIx64 " is corrupt", handle);
    }
    *out = v;
    return SPECKV_OK;
}

}  // namespace speckv
