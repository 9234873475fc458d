// SPDX-License-Identifier: Apache-2.0
// The block table: allocation (alloc's steps, free-page runs, eviction),
// free and release, the placement commit of a moving block, process
// references and pins. docs/pool-format.md explains the rules.
#include "events/publisher.h"
#include "pool/pool.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>

#include "codec/codec.h"
#include "util/crc32c.h"
#include "backend/prefault.h"
#include "share/index_key.h"
#include "util/flush.h"
#include "util/log_env.h"
#include "select/nmp.h"
#include "util/status.h"
#include "config/uri.h"

#include "util/seqlock.h"

#include "pool/pool_internal.h"

namespace speckv {

using namespace fmt;

// ---------------------------------------------------------- alloc / free

int Pool::alloc_check_args(uint64_t bytes, int dtype, const speckv_hint *hint, uint64_t *tenant, uint64_t *np) const {
    if (read_only()) return fail(SPECKV_EPERM, "pool is open read-only");
    if (bytes == 0) return fail(SPECKV_EINVAL, "cannot allocate a zero-byte block");
    if (dtype < 0 || dtype > 3) return fail(SPECKV_EINVAL, "unknown dtype %d", dtype);
    if (hint && hint->struct_size != sizeof(speckv_hint))
        return fail(SPECKV_ESTRUCT, "speckv_hint.struct_size is %zu, this library knows %zu", hint->struct_size,
                    sizeof(speckv_hint));
    if (hint && hint->token_count > UINT64_MAX - hint->token_pos)
        return fail(SPECKV_EINVAL, "hint tokens [%" PRIu64 ", +%" PRIu64 ") run past 2^64", hint->token_pos,
                    hint->token_count);
    *tenant = hint ? hint->tenant : tenant_id_ >= 0 ? uint64_t(tenant_id_) : 0;
    if (!tenant_visible(*tenant))
        return fail(SPECKV_EPERM, "this pool handle is bound to tenant %" PRId64 " (tenant.id): it cannot allocate for tenant %" PRIu64,
                    tenant_id_, *tenant);
    const Superblock &s = *sb();
    // Rounded up without forming bytes + page_size - 1, which wraps for sizes
    // near 2^64 (a block record of 0 pages would be committed).
    *np = (bytes >> page_shift_) + ((bytes & (page_size_ - 1)) != 0);
    if (*np > s.n_pages || *np > UINT32_MAX)  // the record's page count is 32 bits
        return fail(SPECKV_ENOSPC, "a block of %" PRIu64 " bytes is larger than the pool's %" PRIu64 " data pages", bytes,
                    s.n_pages);
    return SPECKV_OK;
}

int Pool::alloc_quota_locked(TenantEntry *trow, uint64_t tenant, uint64_t np) {
    if (!trow || !trow->quota_pages) return SPECKV_OK;
    auto under = [&] { return trow->used_pages.load(std::memory_order_relaxed) + np <= trow->quota_pages; };
    if (!under()) blocks_.evict_locked(under, &tenant);
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

int Pool::alloc_make_room_locked(AllocPlace *pl, int *offlock_rounds) {
    const Superblock &s = *sb();
    SharedHeader *h = sh();
    auto room = [&] { return room_.place_locked(pl); };
    if (!room() && any_dead_locked()) recover_locked("processes died; reclaiming what they held for an alloc");
    // The L4 holder moves the coldest blocks out before anything is evicted:
    // a demoted block keeps its handle and its bytes. The victims are chosen
    // under the lock but written to L4 with it released, so the other
    // threads' and processes' allocations and frees do not wait for this
    // one's I/O; then the allocation starts over (someone may take the room
    // first). After a few rounds lost that way, it demotes holding the lock.
    if (pl->first == UINT64_MAX && !room() && cold_.holder()) {
        if (cold_.demote_offlock_locked(UINT64_MAX, offlock_rounds)) return kAllocRetry;
        cold_.demote_locked(room, UINT64_MAX);
    }
    if (pl->first == UINT64_MAX && !room() && h->blocks_published.load(std::memory_order_relaxed)) blocks_.evict_locked(room, nullptr);
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

int Pool::alloc(uint64_t bytes, int dtype, const speckv_hint *hint, uint64_t *out) {
    uint64_t tenant = 0, np = 0;
    if (int rc = alloc_check_args(bytes, dtype, hint, &tenant, &np); rc != SPECKV_OK) return rc;
    bool rec;
    int offlock_rounds = 0;  // demotions run with the lock released for this allocation (below)
    AllocPlace pl;
    TenantEntry *trow;
    for (;;) {
        if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
        trow = share_.tenant_row(tenant);
        if (int rc = alloc_quota_locked(trow, tenant, np); rc != SPECKV_OK) return rc;  // unlocked
        // Room is a free slot and a run of np free pages. Without it, what dead
        // processes left is reclaimed first, then unreferenced published blocks
        // are evicted, least recently used first.
        // Layer-aware placement (docs/tiers.md §10): a block of a (request,
        // layer) goes right after that unit's latest block when those pages are
        // free, so a unit's pages form one run for burst reads; a unit's first
        // block is placed with room for alloc.unit_slack more after it.
        pl = AllocPlace{};
        pl.np = np;
        pl.unit = hint && hint->token_count && room_.unit_slack();
        pl.after = pl.unit ? xlate_index_.unit_end_locked(tenant, hint->request, hint->layer) : UINT64_MAX;
        const int rc = alloc_make_room_locked(&pl, &offlock_rounds);
        if (rc == kAllocRetry) continue;  // unlocked: start over
        if (rc != SPECKV_OK) return rc;   // unlocked
        break;
    }
    const uint64_t handle = blocks_.commit_new_locked(pl, bytes, dtype, tenant, trow, hint);
    unlock();
    bump(kAllocs);
    if (pl.after != UINT64_MAX) {
        bump(kUnitFollowers);
        if (pl.follows) bump(kUnitContiguous);
    }
    *out = handle;
    return SPECKV_OK;
}



int Pool::free(uint64_t handle) {
    if (read_only()) return fail(SPECKV_EPERM, "pool is open read-only");
    BlockView v{};
    if (int rc = resolve(handle, &v); rc != SPECKV_OK) return rc;
    // A published block is shared: free drops this process's reference.
    if (relaxed_load(v.rec->state) & kBlockPublished) {
        if (int rc = blocks_.release_ref(handle); rc != SPECKV_OK) return rc;
        bump(kFrees);
        return SPECKV_OK;
    }
    bool rec;
    if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
    if (int rc = resolve(handle, &v); rc != SPECKV_OK) {
        unlock();
        return rc;
    }
    if (v.rec->state & kBlockPublished) {  // published meanwhile
        unlock();
        if (int rc = blocks_.release_ref(handle); rc != SPECKV_OK) return rc;
        bump(kFrees);
        return SPECKV_OK;
    }
    if (pinned(handle)) {
        unlock();
        return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " is pinned: unpin it before freeing", handle);
    }
    // Pinned by another process (its pin holds a reference): not under its pointer.
    const uint64_t mine = attach_slot_ >= 0 ? uint64_t(1) << attach_slot_ : 0;
    if ((v.rec->holders.load(std::memory_order_seq_cst) & ~mine) && any_dead_locked())
        recover_locked("a process that pinned a block being freed is gone");
    if (uint64_t others = v.rec->holders.load(std::memory_order_seq_cst) & ~mine & ~kHoldersDying) {
        const uint32_t pid = sh()->attach[__builtin_ctzll(others)].pid.load();
        unlock();
        return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " is pinned by process %u: it must unpin it before the block is freed",
                    handle, pid);
    }
    if (int rc = resolve(handle, &v); rc != SPECKV_OK) {  // recovery may have dropped it
        unlock();
        return rc;
    }
    const uint64_t first = v.first_page, np = v.packed || v.cold() ? 0 : v.npages;
    blocks_.release_locked(const_cast<BlockRecord &>(*v.rec), handle);
    unlock();
    // This process's L1 and L2 copies of its pages can never be read again:
    // their frames go first (a scan-resistant buffer would otherwise keep
    // them until its CLOCK hand passed them twice; docs/tiers.md §2).
    for (uint64_t p = first; p < first + np; p++) {
        cache_->forget(p);
        if (l2()) l2()->invalidate(p);
    }
    bump(kFrees);
    return SPECKV_OK;
}

int Pool::pin(uint64_t handle, const void **ptr, size_t *len) {
    if (!ptr || !len) return fail(SPECKV_EINVAL, "ptr and len must not be NULL");
    if (read_only()) return fail(SPECKV_EPERM, "pool is open read-only");
    int attempt = 0;
again:
    BlockView r{};
    if (int rc = resolve(handle, &r); rc != SPECKV_OK) return rc;
    if (r.cold())
        if (int rc = cold_.ensure_hot(handle, &r); rc != SPECKV_OK) return rc;
    if (r.packed) {  // the pointer must show values page by page: unpack first
        if (int rc = packer_.unpack_block(handle, &r); rc != SPECKV_OK) return rc;
        if (r.packed || r.cold()) {
            if (++attempt < 16) goto again;
            return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving while pinning", handle);
        }
    }
    for (uint64_t p = r.first_page; p < r.first_page + r.npages; p++) {
        PageEntry &pe = pages()[p];
        if (pe.flags.load(std::memory_order_acquire) & kPageZero) {
            // Materialise the zeros so the pointer shows what a read returns.
            uint64_t q;
            if (int rc = plocks_.lock(p, handle, r.rec, attach_slot_, &q, r.tseq); rc != SPECKV_OK) {
                if (r.moved() && ++attempt < 16) goto again;  // it went to L4 meanwhile: from the top
                return rc;
            }
            if (pe.flags.load(std::memory_order_relaxed) & kPageZero) {
                std::memset(page_data(p), 0, page_size_);
                pe.crc.store(crc32c(0, page_data(p), page_size_), std::memory_order_relaxed);
            }
            pe.flags.store(pe.flags.load(std::memory_order_relaxed) & ~(kPageZero | kPageCoded | kPageWriterMask), std::memory_order_relaxed);
            pe.seq.store(q + 2, std::memory_order_release);
        } else if (pe.flags.load(std::memory_order_acquire) & kPageCoded) {
            // The pointer must show values, not a record: the page is stored
            // decoded from now on (the same values a read returns).
            uint64_t q;
            if (int rc = plocks_.lock(p, handle, r.rec, attach_slot_, &q, r.tseq); rc != SPECKV_OK) {
                if (r.moved() && ++attempt < 16) goto again;  // it went to L4 meanwhile: from the top
                return rc;
            }
            uint32_t fl = pe.flags.load(std::memory_order_relaxed) & ~kPageWriterMask;
            int rc = SPECKV_OK;
            if ((fl & (kPageCoded | kPageZero)) == kPageCoded) {
                unsigned char *dec = decoded_page_scratch(page_size_);
                if (crc32c(0, page_data(p), page_size_) != pe.crc.load(std::memory_order_relaxed)) {
                    bump(kCrcFail);
                    rc = fail(SPECKV_ECORRUPT, "page %" PRIu64 " failed its CRC32C check; page quarantined", p);
                } else {
                    rc = reader_.decode_page(p, page_data(p), dec);
                }
                if (rc == SPECKV_OK) {
                    std::memcpy(page_data(p), dec, page_size_);
                    pe.crc.store(crc32c(0, page_data(p), page_size_), std::memory_order_relaxed);
                    fl &= ~kPageCoded;
                } else {
                    fl |= kPageQuarantined;
                }
            }
            pe.flags.store(fl, std::memory_order_relaxed);
            pe.seq.store(q + 2, std::memory_order_release);
            if (rc != SPECKV_OK) return rc;
        } else {
            // This process holds a verified copy of exactly this version of
            // the page (L1), or checksummed it in place at an earlier pin:
            // the bytes in the pool were checked already, as a cached read
            // would trust them. Otherwise checksum them in place, and note it.
            const uint64_t epoch = sh()->epoch.load(std::memory_order_relaxed);
            uint64_t s1 = pe.seq.load(std::memory_order_acquire);
            if (!(s1 & 1) && !(pe.flags.load(std::memory_order_acquire) & kPageQuarantined) &&
                (cache_->verified(p, s1, epoch) || cache_->contains(p, s1, epoch)))
                continue;
            uint64_t vs = 0;
            if (int rc = reader_.verify_page_inplace(p, &vs); rc != SPECKV_OK) return rc;
            cache_->note_verified(p, vs, epoch);
        }
    }
    // A block pinned here is referenced while pinned (its holders bit is
    // set), so no process moves or frees it under the pointer: eviction,
    // demotion and packing skip referenced blocks, and another process's
    // free of an unpublished one waits for the unpin (SPECKV_EBUSY).
    bool ref = true;
    if (int rc = blocks_.acquire_ref(handle, false); rc != SPECKV_OK) return rc;
    bool moved;
    {
        // The L4 holder demotes only with the handle's pin shard locked and re-checks the pins
        // before it commits: registered here and unmoved means it stays put.
        PinShard &ps = refs_.pin_shard(handle);
        std::lock_guard g(ps.mu);
        auto &e = ps.map[handle];
        e.first++;
        e.second += ref;
        ps.total.fetch_add(1, std::memory_order_release);
        moved = r.moved();
    }
    if (moved) {  // it went to L4 (or came back) between resolve and the pin: once more
        unpin(handle);
        if (++attempt < 16) goto again;
        return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving between tiers while pinning", handle);
    }
    if (r.rec->handle.load(std::memory_order_acquire) != handle) {
        unpin(handle);
        return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " was freed while pinning", handle);
    }
    *ptr = page_data(r.first_page);
    *len = r.bytes;
    return SPECKV_OK;
}

int Pool::unpin(uint64_t handle) {
    bool ref = false;
    {
        PinShard &ps = refs_.pin_shard(handle);
        std::lock_guard g(ps.mu);
        auto it = ps.map.find(handle);
        if (it == ps.map.end() || it->second.first == 0) {
            BlockView r{};
            if (int rc = resolve(handle, &r); rc != SPECKV_OK) return rc;
            return fail(SPECKV_EINVAL, "block 0x%" PRIx64 " is not pinned", handle);
        }
        if (it->second.second) {
            it->second.second--;
            ref = true;
        }
        if (--it->second.first == 0 && ps.map.size() > ProcessRefs::kKeepIdle) ps.map.erase(it);
        ps.total.fetch_sub(1, std::memory_order_release);
    }
    return ref ? blocks_.release_ref(handle) : SPECKV_OK;
}

}  // namespace speckv
