// SPDX-License-Identifier: Apache-2.0
// BlockTable (pool/block_table.h): new blocks, release, the placement commit
// of a moving block, eviction, references. docs/pool-format.md explains the
// rules.
#include "pool/block_table.h"

#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <vector>

#include "events/publisher.h"
#include "pool/cold_role.h"
#include "pool/pool_internal.h"
#include "util/seqlock.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;

void (*testing::placement_hook)(uint64_t slot, int stage) = nullptr;

uint64_t BlockTable::commit_new_locked(const AllocPlace &pl, uint64_t bytes, int dtype, uint64_t tenant, TenantEntry *trow,
                                       const speckv_hint *hint) {
    SharedHeader *h = sh();
    uint64_t *bm = L_.bitmap;
    const uint64_t first = pl.first, np = pl.np;
    uint64_t slot;
    if (h->slot_free_head) {
        slot = h->slot_free_head - 1;
        h->slot_free_head = blocks()[slot].next_free;
    } else {
        slot = h->slot_hwm++;
    }
    BlockRecord &r = blocks()[slot];
    for (uint64_t p = first; p < first + np; p++) {
        bm[p / 64] |= uint64_t(1) << (p % 64);
        PageEntry &pe = pages()[p];
        pe.flags.store(kPageZero, std::memory_order_relaxed);
        uint64_t q = pe.seq.load(std::memory_order_relaxed);
        pe.seq.store((q | 1) + 1, std::memory_order_release);  // new contents: cached copies miss
    }
    // A slot's first generation starts at a number drawn from the pool's UUID
    // (32 random bits): a handle of another pool, or of this pool before it
    // was re-created, names a live block here only by a 1-in-2^32 chance
    // instead of always (every pool's first handle was 0x1000001).
    uint64_t gen = r.generation ? r.generation + 1 : first_generation(*L_.sb);
    relaxed_store(r.first_page, first);
    relaxed_store(r.bytes, bytes);
    relaxed_store(r.npages, static_cast<uint32_t>(np));
    relaxed_store(r.dtype, static_cast<uint8_t>(dtype));
    relaxed_store(r.tenant, tenant);
    relaxed_store(r.state, uint32_t(0));
    // Read lock-free by translation and the prefetcher: stored atomically.
    relaxed_store(r.request, hint ? hint->request : uint64_t(0));
    relaxed_store(r.layer, hint ? hint->layer : uint32_t(0));
    r.hint_flags = hint ? hint->flags : 0;
    relaxed_store(r.token_pos, hint ? hint->token_pos : uint64_t(0));
    relaxed_store(r.token_count, hint ? hint->token_count : uint64_t(0));
    SEQLOCK_IGNORE_BEGIN();  // lookups compare keys optimistically, then re-check under a reference
    std::memset(r.content_hash, 0, sizeof r.content_hash);
    if (hint && (hint->flags & SPECKV_HINT_HAS_HASH)) std::memcpy(r.content_hash, hint->content_hash, sizeof r.content_hash);
    SEQLOCK_IGNORE_END();
    r.generation = gen;
    r.created_ns = now_ns(CLOCK_REALTIME_COARSE);  // ms resolution is plenty; the precise clock costs ~25 ns
    relaxed_store(r.packed_pages, uint64_t(0));  // read lock-free by resolve()
    r.next_free = 0;
    r.holders.store(0, std::memory_order_relaxed);
    r.hash_next.store(0, std::memory_order_relaxed);
    r.last_use.store(h->lru_clock.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
    r.owner = attach_id_;
    r.xlate_next.store(0, std::memory_order_relaxed);
    if (uint64_t t = r.tier_seq.load(std::memory_order_relaxed); t & 1)  // even: in the pool
        r.tier_seq.store(t + 1, std::memory_order_relaxed);
    r.crc = record_crc(r);
    uint64_t handle = (gen << kSlotBits) | (slot + 1);
    r.handle.store(handle, std::memory_order_release);  // commit point
    if (r.token_count) p_.xlate->insert_locked(slot);
    h->blocks_live.fetch_add(1, std::memory_order_relaxed);
    h->pages_used.fetch_add(np, std::memory_order_relaxed);
    h->bytes_by_dtype[dtype].fetch_add(bytes, std::memory_order_relaxed);
    if (trow) trow->used_pages.fetch_add(np, std::memory_order_relaxed);
    if (!pl.follows) h->alloc_cursor = pl.first + np + pl.reserved;  // past the unit's room: other units start beyond it
    return handle;
}

void BlockTable::commit_placement_locked(BlockRecord &r, uint64_t slot, uint64_t first_page, uint64_t packed_pages,
                                   uint64_t tier_step) {
    SharedHeader *h = sh();
    h->move_first_page = first_page;
    h->move_packed_pages = packed_pages;
    h->move_slot.store(slot + 1, std::memory_order_seq_cst);  // from here recovery completes the move
    // Lock-free readers (resolve) read the two fields, then move_slot: one
    // that saw either new field sees this move in progress (or tier_seq moved).
    std::atomic_thread_fence(std::memory_order_release);
    std::atomic_ref<uint64_t>(r.first_page).store(first_page, std::memory_order_relaxed);
    if (testing::placement_hook) [[unlikely]]
        testing::placement_hook(slot, 0);
    std::atomic_ref<uint64_t>(r.packed_pages).store(packed_pages, std::memory_order_relaxed);
    r.crc = record_crc(r);
    if (testing::placement_hook) [[unlikely]]
        testing::placement_hook(slot, 1);
    // Published before the move is over: a reader that took any field of the
    // new placement finds either move_slot still set or tier_seq moved, and
    // reads the record again.
    r.tier_seq.fetch_add(tier_step, std::memory_order_seq_cst);
    h->move_slot.store(0, std::memory_order_seq_cst);
}

void BlockTable::release_locked(BlockRecord &r, uint64_t handle) {
    SharedHeader *h = sh();
    if (r.token_count) p_.xlate->remove_locked(static_cast<uint64_t>(handle & ((1u << kSlotBits) - 1)) - 1);
    r.handle.store(0, std::memory_order_seq_cst);  // commit point: the block is gone
    if (r.tier_seq.load(std::memory_order_relaxed) & 1) {  // in L4: no pages here; its L4 copy goes
        h->cold_blocks.fetch_sub(1, std::memory_order_relaxed);
        h->cold_bytes.fetch_sub(r.bytes, std::memory_order_relaxed);
        p_.cold->forget_copy_locked(handle);
        if (r.state & kBlockPublished) {
            h->blocks_published.fetch_sub(1, std::memory_order_relaxed);
            h->shared_bytes.fetch_sub(r.bytes, std::memory_order_relaxed);
        }
        r.holders.store(0, std::memory_order_relaxed);
        h->blocks_live.fetch_sub(1, std::memory_order_relaxed);
        h->bytes_by_dtype[r.dtype & 3].fetch_sub(r.bytes, std::memory_order_relaxed);
        p_.cold->forget_heat(handle);
        if (r.generation < kMaxGeneration) {
            r.next_free = h->slot_free_head;
            h->slot_free_head = (handle & ((1u << kSlotBits) - 1));
        }
        return;
    }
    // Writers lock a page, then re-check the handle; wait for any that got in first.
    const uint64_t np = r.packed_pages ? r.packed_pages : r.npages;
    bool stuck = false;
    for (uint64_t p = r.first_page; p < r.first_page + np; p++) {
        uint64_t q;
        if (p_.plocks->wait_even(pages()[p], &q) != SPECKV_OK) stuck = true;
    }
    clear_error();
    if (!stuck) {
        uint64_t *bm = L_.bitmap;
        for (uint64_t p = r.first_page; p < r.first_page + np; p++) bm[p / 64] &= ~(uint64_t(1) << (p % 64));
        h->pages_used.fetch_sub(np, std::memory_order_relaxed);
        if (r.first_page < h->alloc_cursor) h->alloc_cursor = r.first_page;
    } else {
        (*p_.log)(SPECKV_LOG_WARN, "freeing block 0x%" PRIx64 ": a page is stuck in a write; its pages stay reserved until recovery",
            handle);
    }
    if (r.state & kBlockPublished) {
        h->blocks_published.fetch_sub(1, std::memory_order_relaxed);
        h->shared_bytes.fetch_sub(r.bytes, std::memory_order_relaxed);
    }
    if (TenantEntry *t = p_.share->tenant_row(r.tenant)) t->used_pages.fetch_sub(np, std::memory_order_relaxed);
    r.holders.store(0, std::memory_order_relaxed);
    h->blocks_live.fetch_sub(1, std::memory_order_relaxed);
    h->bytes_by_dtype[r.dtype & 3].fetch_sub(r.bytes, std::memory_order_relaxed);
    p_.cold->forget_heat(handle);
    if (r.generation < kMaxGeneration) {  // a slot whose generation ran out is retired
        r.next_free = h->slot_free_head;
        h->slot_free_head = (handle & ((1u << kSlotBits) - 1));
    }
}

uint64_t BlockTable::evict_locked(const std::function<bool()> &fits, const uint64_t *tenant_only) {
    SharedHeader *h = sh();
    uint64_t hwm = std::min<uint64_t>(h->slot_hwm, L_.sb->max_blocks);
    std::vector<std::pair<uint64_t, uint64_t>> cand;  // (last use, slot)
    for (uint64_t i = 0; i < hwm; i++) {
        const BlockRecord &r = blocks()[i];
        if (!r.handle.load(std::memory_order_relaxed) || !(r.state & kBlockPublished) ||
            r.holders.load(std::memory_order_relaxed) != 0 || (tenant_only && r.tenant != *tenant_only) ||
            (r.tier_seq.load(std::memory_order_relaxed) & 1))  // in L4: holds no pool page
            continue;
        cand.emplace_back(r.last_use.load(std::memory_order_relaxed), i);
    }
    // The scan costs O(blocks), so it is amortised: once it runs, at least
    // 1/64 of the candidates go (the coldest), even if fewer would fit.
    size_t batch = std::max<size_t>(1, cand.size() / 64);
    auto order = [&](size_t upto) {
        upto = std::min(upto, cand.size());
        std::partial_sort(cand.begin(), cand.begin() + static_cast<long>(upto), cand.end());
        return upto;
    };
    size_t sorted = order(batch);
    uint64_t n = 0;
    for (size_t c = 0; c < cand.size(); c++) {
        if (c == sorted) sorted = order(cand.size());  // the batch was not enough: all of them, in order
        const auto &[use, slot] = cand[c];
        BlockRecord &r = blocks()[slot];
        uint64_t hd = r.handle.load();
        uint64_t none = 0;
        // Dying first: a lookup racing us either got its reference in
        // before (we skip the block) or sees Dying and misses.
        if (!hd || !r.holders.compare_exchange_strong(none, kHoldersDying, std::memory_order_seq_cst)) continue;
        evict_dying_locked(r, slot, hd, events::Medium::kPool);
        n++;
        (*p_.log)(SPECKV_LOG_DEBUG, "evicted published block 0x%" PRIx64, hd);
        if (n >= batch && fits()) break;
    }
    return n;
}

void BlockTable::evict_dying_locked(BlockRecord &r, uint64_t slot, uint64_t handle, events::Medium medium) {
    p_.share->remove_locked(slot, flush_);
    if (events_) events_->removed(r.tenant, r.content_hash, medium);
    release_locked(r, handle);
    sh()->evictions.fetch_add(1, std::memory_order_relaxed);
}

int BlockTable::acquire_ref(uint64_t handle, bool need_published) {
    uint64_t slot = (handle & ((1u << kSlotBits) - 1)) - 1;
    BlockRecord &r = blocks()[slot];
    RefShard &rs = p_.refs->ref_shard(slot);
    std::lock_guard g(rs.mu);
    // An entry whose count is 0 is kept for the next reference (a pin and
    // unpin in a loop then allocate nothing); it stands for no reference.
    auto it = rs.map.find(slot);
    if (it != rs.map.end() && it->second.second > 0) {
        if (it->second.first == handle) {
            it->second.second++;
            return SPECKV_OK;
        }
        if (r.handle.load(std::memory_order_acquire) == it->second.first)
            return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " is not live (its slot holds a newer block)", handle);
        it->second.second = 0;  // a reference to a block a forced reset wiped (the reset cleared its bit)
    }
    uint64_t bit = uint64_t(1) << attach_slot_;
    uint64_t cur = r.holders.load(std::memory_order_relaxed);
    do {
        if (cur & kHoldersDying) return fail(SPECKV_EBADHANDLE, "block 0x%" PRIx64 " is being evicted", handle);
    } while (!r.holders.compare_exchange_weak(cur, cur | bit, std::memory_order_seq_cst));
    if (r.handle.load(std::memory_order_seq_cst) != handle ||
        (need_published && !(relaxed_load(r.state) & kBlockPublished))) {
        r.holders.fetch_and(~bit, std::memory_order_relaxed);
        return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " is not live (freed meanwhile)", handle);
    }
    if (it != rs.map.end()) it->second = std::make_pair(handle, 1u);
    else rs.map.emplace(slot, std::make_pair(handle, 1u));
    return SPECKV_OK;
}

int BlockTable::release_ref(uint64_t handle) {
    uint64_t slot = (handle & ((1u << kSlotBits) - 1)) - 1;
    RefShard &rs = p_.refs->ref_shard(slot);
    std::lock_guard g(rs.mu);
    auto it = rs.map.find(slot);
    if (it == rs.map.end() || it->second.first != handle || it->second.second == 0)
        return fail(SPECKV_EBADHANDLE,
                    "block 0x%" PRIx64 " is published and this process holds no reference to it (double free?)", handle);
    if (--it->second.second == 0) {
        if (rs.map.size() > ProcessRefs::kKeepIdle) rs.map.erase(it);
        BlockRecord &r = blocks()[slot];
        // A logical clock, not time: eviction order is then a function of
        // the order of operations alone (replays are deterministic). Only
        // published blocks are evicted by it; an unpublished one's reference
        // is a pin's, and bumping the shared clock on every unpin would make
        // threads that pin different blocks contend for its cache line.
        if (relaxed_load(r.state) & kBlockPublished)
            r.last_use.store(sh()->lru_clock.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
        r.holders.fetch_and(~(uint64_t(1) << attach_slot_), std::memory_order_release);
    }
    return SPECKV_OK;
}

}  // namespace speckv
