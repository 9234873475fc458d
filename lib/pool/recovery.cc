// SPDX-License-Identifier: Apache-2.0
// Recovery of a pool image in named steps (recovery.h; docs/pool-format.md "Recovery").
#include "pool/recovery.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "util/crc32c.h"
#include "util/status.h"

#include "pool/pool_internal.h"

namespace speckv {

using namespace fmt;

void Recovery::run_locked(const char *why) {
    log_(SPECKV_LOG_WARN, "recovering pool: %s", why);
    // 1. Attach records: a dead process's record is freed and its counters
    //    kept; what it held is dropped below.
    std::vector<uint64_t> live_ids;
    const uint64_t live_mask = recover_attach_locked(&live_ids);
    // 2. Blocks: validate each record, rebuild the page bitmap and counters
    //    from the ones that stand.
    Totals t;
    recover_blocks_locked(live_mask, live_ids, &t);
    // 3. Torn page writes.
    recover_pages_locked(live_mask);
    store_totals_locked(t);
    // 4. The hash and translation indexes are derived from the records.
    share_.rebuild_locked();
    xlate_.rebuild_locked();
    SharedHeader *h = L_.sh;
    h->epoch.fetch_add(1);
    h->recoveries.fetch_add(1);
}

uint64_t Recovery::recover_attach_locked(std::vector<uint64_t> *live_ids) {
    SharedHeader *h = L_.sh;
    uint64_t live_mask = 0;
    for (uint32_t i = 0; i < kMaxAttach; i++) {
        AttachRecord &a = h->attach[i];
        uint32_t pid = a.pid.load();
        if (!pid) continue;
        if (process_alive(pid, a.start_time)) {
            live_mask |= uint64_t(1) << i;
            live_ids->push_back(a.id);
            continue;
        }
        log_(SPECKV_LOG_WARN, "process %u attached to the pool is gone: its references and unpublished blocks are reclaimed",
            pid);
        h->lookups.fetch_add(a.lookups.exchange(0));
        h->lookup_hits.fetch_add(a.lookup_hits.exchange(0));
        h->dedup_bytes.fetch_add(a.dedup_bytes.exchange(0));
        fold_tier_counters(h, a);
        a.pid.store(0);
    }
    h->attached = static_cast<uint32_t>(__builtin_popcountll(live_mask));
    return live_mask;
}

void Recovery::finish_cut_move_locked(uint64_t hwm) {
    SharedHeader *h = L_.sh;
    // A block move cut short between its record's stores: finish it (its new
    // pages were written before the move was recorded).
    if (const uint64_t ms = h->move_slot.load(); ms && ms <= hwm) {
        BlockRecord &r = L_.blocks[ms - 1];
        if (r.handle.load()) {
            r.first_page = h->move_first_page;
            r.packed_pages = h->move_packed_pages;
            r.crc = record_crc(r);
            // The mover may have died before it bumped tier_seq: readers'
            // views of the old placement must see a move (parity kept).
            r.tier_seq.fetch_add(2);
            log_(SPECKV_LOG_WARN, "recovery: finished the move of block slot %" PRIu64 " cut short by a crash", ms - 1);
        }
        h->move_slot.store(0);
    }
}

void Recovery::recover_blocks_locked(uint64_t live_mask, const std::vector<uint64_t> &live_ids, Totals *t) {
    const Superblock &s = *L_.sb;
    SharedHeader *h = L_.sh;
    uint64_t *bm = L_.bitmap;
    std::memset(bm, 0, (s.n_pages + 63) / 64 * 8);
    uint64_t hwm = std::min<uint64_t>(h->slot_hwm, s.max_blocks);
    h->slot_hwm = hwm;
    uint32_t nt = std::min<uint32_t>(h->tenants_used, kMaxTenants);
    h->tenants_used = nt;
    for (uint32_t i = 0; i < nt; i++) L_.tenants[i].used_pages.store(0);
    finish_cut_move_locked(hwm);
    for (uint64_t i = 0; i < hwm; i++) {
        BlockRecord &r = L_.blocks[i];
        uint64_t hd = r.handle.load();
        if (!hd) continue;
        const bool cold = r.tier_seq.load() & 1;  // in L4: no pages to check or mark
        // A packed block's pages are its image's (fewer than npages; format 6 only).
        const uint64_t np = r.packed_pages ? r.packed_pages : r.npages;
        bool ok = (hd & ((1u << kSlotBits) - 1)) == i + 1 && (hd >> kSlotBits) == r.generation &&
                  r.generation <= kMaxGeneration &&
                  record_geometry_ok(s, r.first_page, r.packed_pages, r.npages, r.bytes, r.dtype, cold) && record_crc(r) == r.crc;
        for (uint64_t p = r.first_page; ok && !cold && p < r.first_page + np; p++)
            if (bm[p / 64] >> (p % 64) & 1) ok = false;  // overlaps an earlier block
        if (!ok) {
            log_(SPECKV_LOG_ERROR, "recovery: block slot %" PRIu64 " is corrupt; dropped", i);
            r.handle.store(0);
            continue;
        }
        bool pub = r.state & kBlockPublished;
        uint64_t holders = r.holders.load();
        bool orphan = !pub && r.owner != 0 &&
                      std::find(live_ids.begin(), live_ids.end(), r.owner) == live_ids.end();
        if (orphan && (holders & live_mask)) {  // a live process has it pinned: it becomes the pool's, not freed
            r.owner = 0;
            orphan = false;
        }
        if (orphan || (holders & kHoldersDying)) {
            // An unpublished block of a dead process (nothing says its
            // contents were complete), or an eviction cut short by a crash.
            r.handle.store(0);
            t->reclaimed += orphan;
            continue;
        }
        r.holders.fetch_and(live_mask);  // references (and, on unpublished blocks, pins) of live processes
        t->live++;
        if (pub) {
            t->published++;
            t->shared += r.bytes;
        }
        t->by_dtype[r.dtype] += r.bytes;
        if (cold) {
            t->cold_n++;
            t->cold_b += r.bytes;
            continue;
        }
        for (uint64_t p = r.first_page; p < r.first_page + np; p++) bm[p / 64] |= uint64_t(1) << (p % 64);
        t->used += np;
        if (TenantEntry *te = share_.tenant_row(r.tenant)) te->used_pages.fetch_add(np);
    }
    // Free-slot list, lowest slot first.
    h->slot_free_head = 0;
    for (uint64_t i = hwm; i-- > 0;) {
        BlockRecord &r = L_.blocks[i];
        if (r.handle.load() || r.generation >= kMaxGeneration) continue;
        r.next_free = h->slot_free_head;
        h->slot_free_head = i + 1;
    }
}

void Recovery::recover_pages_locked(uint64_t live_mask) {
    const Superblock &s = *L_.sb;
    // Torn page writes: the writer died between locking and unlocking.
    // The writer's attach slot is in the page flags; a live writer's page
    // is left alone (it is mid-copy). An untagged odd page (the writer was
    // between taking the lock and tagging it) is repaired only when no
    // process is attached; otherwise it is fixed when its pages are reused.
    for (uint64_t p = 0; p < s.n_pages; p++) {
        PageEntry &pe = L_.pages[p];
        uint64_t q = pe.seq.load();
        if (!(q & 1)) continue;
        uint32_t fl = pe.flags.load();
        uint32_t tag = (fl & kPageWriterMask) >> kPageWriterShift;
        if (tag ? (live_mask >> (tag - 1) & 1) : live_mask != 0) continue;
        // A page still flagged zero never finished its first write: it
        // keeps reading as zeros (its media bytes may be a freed block's,
        // which must never leak). Otherwise the bytes are this block's own,
        // old and new mixed: re-seal them.
        if (!(fl & kPageZero)) pe.crc.store(crc32c(0, (L_.data + (p << L_.page_shift)), L_.page_size));
        // A coded page cut short holds no valid record: it is quarantined
        // (reads fail naming it) rather than decoded into garbage.
        if ((fl & (kPageZero | kPageCoded)) == kPageCoded) {
            unsigned char *dec = decoded_page_scratch(L_.page_size);
            if (dec_.decode_page(p, (L_.data + (p << L_.page_shift)), dec) != SPECKV_OK) {
                clear_error();
                fl |= kPageQuarantined;
            }
        }
        pe.flags.store(fl & ~(kPageWriterMask | kPageSummary));  // the summary may be of other bytes
        pe.seq.store(q + 1);
    }
}

void Recovery::store_totals_locked(const Totals &t) {
    SharedHeader *h = L_.sh;
    h->blocks_live.store(t.live);
    h->pages_used.store(t.used);
    h->cold_blocks.store(t.cold_n);
    h->cold_bytes.store(t.cold_b);
    if (!process_alive(h->cold_pid.load(), h->cold_start_time)) h->cold_pid.store(0);
    for (int d = 0; d < 4; d++) h->bytes_by_dtype[d].store(t.by_dtype[d]);
    h->blocks_published.store(t.published);
    h->shared_bytes.store(t.shared);
    h->reclaimed.fetch_add(t.reclaimed);
    h->alloc_cursor = 0;
}


}  // namespace speckv
