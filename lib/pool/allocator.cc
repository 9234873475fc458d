// SPDX-License-Identifier: Apache-2.0
// Allocator (pool/allocator.h): alloc's steps (arguments, quota, room) and
// free. docs/pool-format.md explains the rules.
#include "pool/allocator.h"

#include <atomic>
#include <cinttypes>

#include "pool/cold_role.h"
#include "pool/pool_internal.h"
#include "tiers/page_cache.h"
#include "tiers/tier_buffers.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;

int Allocator::check_args(uint64_t bytes, int dtype, const speckv_hint *hint, uint64_t *tenant, uint64_t *np) const {
    if (read_only_) return fail(SPECKV_EPERM, "pool is open read-only");
    if (bytes == 0) return fail(SPECKV_EINVAL, "cannot allocate a zero-byte block");
    if (dtype < 0 || dtype > 3) return fail(SPECKV_EINVAL, "unknown dtype %d", dtype);
    if (hint && hint->struct_size != sizeof(speckv_hint))
        return fail(SPECKV_ESTRUCT, "speckv_hint.struct_size is %zu, this library knows %zu", hint->struct_size,
                    sizeof(speckv_hint));
    if (hint && hint->token_count > UINT64_MAX - hint->token_pos)
        return fail(SPECKV_EINVAL, "hint tokens [%" PRIu64 ", +%" PRIu64 ") run past 2^64", hint->token_pos,
                    hint->token_count);
    const int64_t bound = p_.resolver->tenant_id();  // config tenant.id: -1 = unbound
    *tenant = hint ? hint->tenant : bound >= 0 ? uint64_t(bound) : 0;
    if (!p_.resolver->tenant_visible(*tenant))
        return fail(SPECKV_EPERM, "this pool handle is bound to tenant %" PRId64 " (tenant.id): it cannot allocate for tenant %" PRIu64,
                    bound, *tenant);
    const Superblock &s = *L_.sb;
    // Rounded up without forming bytes + page_size - 1, which wraps for sizes
    // near 2^64 (a block record of 0 pages would be committed).
    *np = (bytes >> L_.page_shift) + ((bytes & (L_.page_size - 1)) != 0);
    if (*np > s.n_pages || *np > UINT32_MAX)  // the record's page count is 32 bits
        return fail(SPECKV_ENOSPC, "a block of %" PRIu64 " bytes is larger than the pool's %" PRIu64 " data pages", bytes,
                    s.n_pages);
    return SPECKV_OK;
}

int Allocator::quota_locked(TenantEntry *trow, uint64_t tenant, uint64_t np) {
    if (!trow || !trow->quota_pages) return SPECKV_OK;
    auto under = [&] { return trow->used_pages.load(std::memory_order_relaxed) + np <= trow->quota_pages; };
    if (!under()) p_.blocks->evict_locked(under, &tenant);
    if (!under()) {
        uint64_t used = trow->used_pages.load(), quota = trow->quota_pages;
        unlock();
        return fail(SPECKV_EQUOTA,
                    "tenant %" PRIu64 ": %" PRIu64 " pages in use + %" PRIu64 " for this block exceed its quota of %" PRIu64
                    " pages (nothing of it left to evict)",
                    tenant, used, np, quota);
    }
    return SPECKV_OK;
}

int Allocator::make_room_locked(AllocPlace *pl, int *offlock_rounds) {
    const Superblock &s = *L_.sb;
    SharedHeader *h = L_.sh;
    auto room = [&] { return p_.room->place_locked(pl); };
    if (!room()) ports_.recover_if_dead_locked("processes died; reclaiming what they held for an alloc");
    // The L4 holder moves the coldest blocks out before anything is evicted:
    // a demoted block keeps its handle and its bytes. The victims are chosen
    // under the lock but written to L4 with it released, so the other
    // threads' and processes' allocations and frees do not wait for this
    // one's I/O; then the allocation starts over (someone may take the room
    // first). After a few rounds lost that way, it demotes holding the lock.
    if (pl->first == UINT64_MAX && !room() && p_.cold->holder()) {
        if (p_.cold->demote_offlock_locked(UINT64_MAX, offlock_rounds)) return kRetry;
        p_.cold->demote_locked(room, UINT64_MAX);
    }
    if (pl->first == UINT64_MAX && !room() && h->blocks_published.load(std::memory_order_relaxed)) p_.blocks->evict_locked(room, nullptr);
    if (pl->first == UINT64_MAX && !room()) {
        bool slots = h->slot_free_head || h->slot_hwm < s.max_blocks;
        uint64_t freep = s.n_pages - h->pages_used.load();
        unlock();
        if (!slots)
            return fail(SPECKV_ENOSPC, "all %" PRIu64 " block slots are in use (none holds an evictable published block)",
                        s.max_blocks);
        return fail(SPECKV_ENOSPC,
                    "no run of %" PRIu64 " free pages (%" PRIu64 " of %" PRIu64
                    " pages free; no evictable published block left)",
                    pl->np, freep, s.n_pages);
    }
    return SPECKV_OK;
}

int Allocator::alloc(uint64_t bytes, int dtype, const speckv_hint *hint, uint64_t *out) {
    uint64_t tenant = 0, np = 0;
    if (int rc = check_args(bytes, dtype, hint, &tenant, &np); rc != SPECKV_OK) return rc;
    bool rec;
    int offlock_rounds = 0;  // demotions run with the lock released for this allocation (below)
    AllocPlace pl;
    TenantEntry *trow;
    for (;;) {
        if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
        trow = p_.share->tenant_row(tenant);
        if (int rc = quota_locked(trow, tenant, np); rc != SPECKV_OK) return rc;  // unlocked
        // Room is a free slot and a run of np free pages. Without it, what dead
        // processes left is reclaimed first, then unreferenced published blocks
        // are evicted, least recently used first.
        // Layer-aware placement (docs/tiers.md §10): a block of a (request,
        // layer) goes right after that unit's latest block when those pages are
        // free, so a unit's pages form one run for burst reads; a unit's first
        // block is placed with room for alloc.unit_slack more after it.
        pl = AllocPlace{};
        pl.np = np;
        pl.unit = hint && hint->token_count && p_.room->unit_slack();
        pl.after = pl.unit ? p_.xlate->unit_end_locked(tenant, hint->request, hint->layer) : UINT64_MAX;
        const int rc = make_room_locked(&pl, &offlock_rounds);
        if (rc == kRetry) continue;  // unlocked: start over
        if (rc != SPECKV_OK) return rc;   // unlocked
        break;
    }
    const uint64_t handle = p_.blocks->commit_new_locked(pl, bytes, dtype, tenant, trow, hint);
    unlock();
    p_.counters->bump(PoolCounters::kAllocs);
    if (pl.after != UINT64_MAX) {
        p_.counters->bump(PoolCounters::kUnitFollowers);
        if (pl.follows) p_.counters->bump(PoolCounters::kUnitContiguous);
    }
    *out = handle;
    return SPECKV_OK;
}



int Allocator::free(uint64_t handle) {
    if (read_only_) return fail(SPECKV_EPERM, "pool is open read-only");
    BlockView v{};
    if (int rc = p_.resolver->resolve(handle, &v); rc != SPECKV_OK) return rc;
    // A published block is shared: free drops this process's reference.
    if (relaxed_load(v.rec->state) & kBlockPublished) {
        if (int rc = p_.blocks->release_ref(handle); rc != SPECKV_OK) return rc;
        p_.counters->bump(PoolCounters::kFrees);
        return SPECKV_OK;
    }
    bool rec;
    if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
    if (int rc = p_.resolver->resolve(handle, &v); rc != SPECKV_OK) {
        unlock();
        return rc;
    }
    if (v.rec->state & kBlockPublished) {  // published meanwhile
        unlock();
        if (int rc = p_.blocks->release_ref(handle); rc != SPECKV_OK) return rc;
        p_.counters->bump(PoolCounters::kFrees);
        return SPECKV_OK;
    }
    if (p_.refs->pinned(handle)) {
        unlock();
        return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " is pinned: unpin it before freeing", handle);
    }
    // Pinned by another process (its pin holds a reference): not under its pointer.
    const uint64_t mine = attach_slot_ >= 0 ? uint64_t(1) << attach_slot_ : 0;
    if (v.rec->holders.load(std::memory_order_seq_cst) & ~mine)
        ports_.recover_if_dead_locked("a process that pinned a block being freed is gone");
    if (uint64_t others = v.rec->holders.load(std::memory_order_seq_cst) & ~mine & ~kHoldersDying) {
        const uint32_t pid = L_.sh->attach[__builtin_ctzll(others)].pid.load();
        unlock();
        return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " is pinned by process %u: it must unpin it before the block is freed",
                    handle, pid);
    }
    if (int rc = p_.resolver->resolve(handle, &v); rc != SPECKV_OK) {  // recovery may have dropped it
        unlock();
        return rc;
    }
    const uint64_t first = v.first_page, np = v.packed || v.cold() ? 0 : v.npages;
    p_.blocks->release_locked(const_cast<BlockRecord &>(*v.rec), handle);
    unlock();
    // This process's L1 and L2 copies of its pages can never be read again:
    // their frames go first (a scan-resistant buffer would otherwise keep
    // them until its CLOCK hand passed them twice; docs/tiers.md §2).
    for (uint64_t p = first; p < first + np; p++) {
        l1_->forget(p);
        if (l2_) l2_->invalidate(p);
    }
    p_.counters->bump(PoolCounters::kFrees);
    return SPECKV_OK;
}

}  // namespace speckv
