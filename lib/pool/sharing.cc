// SPDX-License-Identifier: Apache-2.0
// Sharing (pool/sharing.h; docs/sharing.md): publish, lookup, tenant quotas
// and usage, over the tenant rows and hash index of share/share_table.h.
#include "pool/sharing.h"

#include <sched.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "events/publisher.h"
#include "pool/cold_role.h"
#include "pool/pool_internal.h"
#include "share/index_key.h"
#include "util/flush.h"
#include "util/seqlock.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;

int Sharing::publish(uint64_t handle, const uint8_t *hash, uint64_t *canonical) {
    if (!hash) return fail(SPECKV_EINVAL, "hash is NULL");
    if (read_only_) return fail(SPECKV_EPERM, "pool is open read-only");
    if (BlockView v0{}; resolve(handle, &v0) == SPECKV_OK && v0.cold())  // published blocks may be flushed: in the pool
        if (int rc = p_.cold->ensure_hot(handle, &v0); rc != SPECKV_OK) return rc;
    bool rec;
    if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
    BlockView v{};
    if (int rc = resolve(handle, &v); rc != SPECKV_OK) {
        unlock();
        return rc;
    }
    BlockRecord &r = const_cast<BlockRecord &>(*v.rec);
    if (r.state & kBlockPublished) {
        unlock();
        return fail(SPECKV_EPERM, "block 0x%" PRIx64 " is already published (a published block is immutable)", handle);
    }
    AttachRecord &me = L_.sh->attach[attach_slot_];
    // A bounded chain (issue 27): a bucket already holding kIndexMaxChain
    // blocks takes no more, so no publish walks a long chain under the lock.
    auto chain_full = [&] {
        uint64_t idx = std::atomic_ref<uint64_t>(L_.buckets[p_.share->bucket_of(r.tenant, hash)]).load(std::memory_order_acquire);
        uint64_t n = 0;
        for (; idx && idx <= L_.sb->max_blocks && n < kIndexMaxChain; n++)
            idx = L_.blocks[idx - 1].hash_next.load(std::memory_order_acquire);
        return n >= kIndexMaxChain;
    };
    if (uint64_t e = p_.share->find_published_locked(r.tenant, hash)) {
        BlockRecord &er = L_.blocks[e - 1];
        uint64_t eh = er.handle.load();
        me.dedup_bytes.fetch_add(er.bytes, std::memory_order_relaxed);
        if (canonical) {
            if (int rc = p_.blocks->acquire_ref(eh, true); rc != SPECKV_OK) {
                unlock();
                return rc;
            }
            *canonical = eh;
        }
        unlock();
        return fail(SPECKV_EEXIST,
                    "tenant %" PRIu64 " already has block 0x%" PRIx64 " published under this hash; block 0x%" PRIx64
                    " stays unpublished",
                    r.tenant, eh, handle);
    }
    if (chain_full()) {
        unlock();
        return fail(SPECKV_EBUSY,
                    "the hash index bucket of this hash already holds %" PRIu64 " blocks (its most); block 0x%" PRIx64
                    " stays unpublished",
                    kIndexMaxChain, handle);
    }
    // Commit: the state goes first, so a writer that locks a page from now
    // on sees it and backs off; then in-flight writes drain; then the block
    // becomes findable.
    SEQLOCK_IGNORE_BEGIN();
    std::memcpy(r.content_hash, hash, sizeof r.content_hash);
    SEQLOCK_IGNORE_END();
    std::atomic_ref<uint32_t>(r.state).store(r.state | kBlockPublished, std::memory_order_seq_cst);
    for (uint64_t p = v.first_page; p < v.first_page + v.stored(); p++) {
        uint64_t q;
        if (int rc = p_.plocks->wait_even(L_.pages[p], &q); rc != SPECKV_OK) {
            std::atomic_ref<uint32_t>(r.state).store(r.state & ~kBlockPublished, std::memory_order_seq_cst);
            unlock();
            return rc;
        }
    }
    r.crc = record_crc(r);
    r.owner = 0;
    if (int rc = p_.blocks->acquire_ref(handle, true); rc != SPECKV_OK) {  // cannot fail: we hold the lock and the block
        std::atomic_ref<uint32_t>(r.state).store(r.state & ~kBlockPublished, std::memory_order_seq_cst);
        r.crc = record_crc(r);
        unlock();
        return rc;
    }
    uint64_t slot = static_cast<uint64_t>(r.handle.load() & ((1u << kSlotBits) - 1)) - 1;
    if (flush_) {
        // Without hardware coherence, another host must find the data, the
        // page entries and the record in memory before it can find the link.
        writeback_range(L_.page_data(v.first_page), size_t(v.stored()) << L_.page_shift);
        writeback_range(&L_.pages[v.first_page], v.stored() * sizeof(PageEntry));
        writeback_range(&r, sizeof r);
    }
    p_.share->insert_locked(slot);
    if (flush_) {
        writeback_range(&r, sizeof r);
        writeback_range(&L_.buckets[p_.share->bucket_of(r.tenant, r.content_hash)], 8);
    }
    L_.sh->blocks_published.fetch_add(1, std::memory_order_relaxed);
    L_.sh->shared_bytes.fetch_add(r.bytes, std::memory_order_relaxed);
    if (events_) events_->stored(r.tenant, r.content_hash, r.token_count, events::Medium::kPool);
    unlock();
    if (canonical) *canonical = handle;
    return SPECKV_OK;
}

int Sharing::lookup(uint64_t tenant, const uint8_t *hash, uint64_t *out) {
    if (!hash || !out) return fail(SPECKV_EINVAL, "hash and out must not be NULL");
    if (!p_.resolver->tenant_visible(tenant))
        return fail(SPECKV_EPERM, "this pool handle is bound to tenant %" PRId64 " (tenant.id): it cannot look up tenant %" PRIu64,
                    p_.resolver->tenant_id(), tenant);
    if (read_only_ || attach_slot_ < 0) return fail(SPECKV_EPERM, "pool is open read-only");
    SharedHeader *h = L_.sh;
    AttachRecord &me = h->attach[attach_slot_];
    me.lookups.fetch_add(1, std::memory_order_relaxed);
    const uint64_t max = L_.sb->max_blocks;
    std::atomic_ref<uint64_t> head(L_.buckets[p_.share->bucket_of(tenant, hash)]);
    auto hit = [&](const BlockRecord &r, uint64_t hd) {
        if (flush_) {
            // Read what the publishing host wrote back, not stale lines (a
            // block in L4 has none here; a damaged record is resolve()'s to report).
            const uint64_t first = relaxed_load(r.first_page), packed = relaxed_load(r.packed_pages);
            const uint32_t npages = relaxed_load(r.npages);
            const uint64_t np = packed ? packed : npages;
            if (!(r.tier_seq.load(std::memory_order_acquire) & 1) &&
                record_geometry_ok(*L_.sb, first, packed, npages, relaxed_load(r.bytes), relaxed_load(r.dtype), false)) {
                invalidate_range(&L_.pages[first], np * sizeof(PageEntry));
                invalidate_range(L_.page_data(first), size_t(np) << L_.page_shift);
            }
        }
        me.lookup_hits.fetch_add(1, std::memory_order_relaxed);
        me.dedup_bytes.fetch_add(relaxed_load(r.bytes), std::memory_order_relaxed);
        *out = hd;
        return SPECKV_OK;
    };
    // Lock-free: walk the chain, take a reference on a match, then confirm
    // the match under it (a referenced published block cannot change). A
    // miss counts only if no chain changed meanwhile (index_seq).
    for (int attempt = 0; attempt < 8; attempt++) {
        uint64_t s1 = h->index_seq.load(std::memory_order_acquire);
        if (s1 & 1) {
            sched_yield();
            continue;
        }
        if (flush_) invalidate_range(&L_.buckets[p_.share->bucket_of(tenant, hash)], 8);
        uint64_t idx = head.load(std::memory_order_acquire);
        for (uint64_t steps = 0; idx && idx <= max && steps <= max; steps++) {
            const BlockRecord &r = L_.blocks[idx - 1];
            if (flush_) invalidate_range(&r, sizeof r);
            uint64_t hd = r.handle.load(std::memory_order_acquire);
            if (hd && (relaxed_load(r.state) & kBlockPublished) && relaxed_load(r.tenant) == tenant && ShareTable::key_equal(r, hash) &&
                p_.blocks->acquire_ref(hd, true) == SPECKV_OK) {
                if (relaxed_load(r.tenant) == tenant && ShareTable::key_equal(r, hash)) return hit(r, hd);
                p_.blocks->release_ref(hd);
            }
            idx = r.hash_next.load(std::memory_order_acquire);
        }
        std::atomic_thread_fence(std::memory_order_acquire);
        if (h->index_seq.load(std::memory_order_relaxed) == s1)
            return fail(SPECKV_ENOENT, "tenant %" PRIu64 " has no block published under this hash", tenant);
    }
    // The index kept changing under us: look under the lock.
    bool rec;
    if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
    uint64_t e = p_.share->find_published_locked(tenant, hash);
    int rc = e ? p_.blocks->acquire_ref(L_.blocks[e - 1].handle.load(), true) : SPECKV_ENOENT;
    uint64_t hd = e ? L_.blocks[e - 1].handle.load() : 0;
    unlock();
    if (rc == SPECKV_OK) return hit(L_.blocks[e - 1], hd);
    return fail(SPECKV_ENOENT, "tenant %" PRIu64 " has no block published under this hash", tenant);
}

int Sharing::set_quota(uint64_t tenant, uint64_t max_pages) {
    if (read_only_) return fail(SPECKV_EPERM, "pool is open read-only");
    if (p_.resolver->tenant_id() >= 0) return fail(SPECKV_EPERM, "a pool handle bound to a tenant (tenant.id) cannot set quotas");
    bool rec;
    if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
    SharedHeader *h = L_.sh;
    TenantEntry *t = p_.share->tenant_row(tenant);
    if (!t) {
        if (max_pages == 0) {
            unlock();
            return SPECKV_OK;
        }
        if (h->tenants_used >= kMaxTenants) {
            unlock();
            return fail(SPECKV_ENOSPC, "the pool's tenant table is full (%u tenants with a quota)", kMaxTenants);
        }
        t = &L_.tenants[h->tenants_used];
        t->tenant = tenant;
        t->reserved = 0;
        uint64_t used = 0, hwm = std::min<uint64_t>(h->slot_hwm, L_.sb->max_blocks);
        for (uint64_t i = 0; i < hwm; i++)
            if (const BlockRecord &r = L_.blocks[i]; r.handle.load() && r.tenant == tenant && !(r.tier_seq.load() & 1))
                used += r.packed_pages ? r.packed_pages : r.npages;
        t->used_pages.store(used);
        h->tenants_used++;
    }
    t->quota_pages = max_pages;
    unlock();
    return SPECKV_OK;
}

int Sharing::usage(uint64_t tenant, uint64_t *used, uint64_t *quota) const {
    if (!p_.resolver->tenant_visible(tenant))
        return fail(SPECKV_EPERM, "this pool handle is bound to tenant %" PRId64 " (tenant.id)", p_.resolver->tenant_id());
    uint64_t u = 0, q = 0;
    if (const TenantEntry *t = p_.share->tenant_row(tenant)) {
        u = t->used_pages.load();
        q = t->quota_pages;
    } else {
        uint64_t hwm = std::min<uint64_t>(L_.sh->slot_hwm, L_.sb->max_blocks);
        for (uint64_t i = 0; i < hwm; i++) {
            const BlockRecord &r = L_.blocks[i];
            if (r.handle.load() && relaxed_load(r.tenant) == tenant && !(r.tier_seq.load() & 1))
                u += relaxed_load(r.packed_pages) ? relaxed_load(r.packed_pages) : relaxed_load(r.npages);
        }
    }
    if (used) *used = u;
    if (quota) *quota = q;
    return SPECKV_OK;
}

}  // namespace speckv
