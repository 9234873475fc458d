// SPDX-License-Identifier: Apache-2.0
// Packed blocks (docs/pool-format.md "Packed blocks"): the write that
// completes a block whose pages are codec records moves those records, back
// to back, into fewer fresh pages (a PackHead image) and frees the block's
// pages, so the codec's ratio becomes pool capacity, not only link bytes.
//
// The image is written whole before the block record points at it and is
// never changed while it does; every move (pack, unpack, L4) bumps the
// record's tier_seq under the pool lock. So readers copy from an image without
// page locks and re-check handle and tier_seq afterwards, exactly as they do
// for L4 moves, and the L1/L2 copies of a packed page are keyed by (slot,
// logical page) and tagged with that tier_seq.
//
// Crash consistency: the image goes into pages no record names, then the
// record's placement changes (commit_placement_locked: recorded first in the
// shared header, so recovery finishes a change cut short between the
// record's stores), then the old pages go free. A process killed before
// that leaves leaked pages that recovery reclaims.
#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <vector>

#include "codec/codec.h"
#include "util/crc32c.h"
#include "select/nmp.h"
#include "pool/pool.h"
#include "util/seqlock.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;

namespace {

thread_local std::vector<unsigned char> t_image;   // an image being built, or page images being unpacked
thread_local std::vector<unsigned char> t_ppage;   // one decoded page

unsigned char *grow(std::vector<unsigned char> &v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

uint64_t align8(uint64_t v) { return (v + 7) & ~uint64_t(7); }

uint32_t get32(const unsigned char *p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

void pool_copy(void *dst, const void *src, size_t n) {
    SEQLOCK_IGNORE_BEGIN();  // an image is immutable while its block names it; callers re-check that after
    std::memcpy(dst, src, n);
    SEQLOCK_IGNORE_END();
}

// A record's own CRC32C (docs/codec.md §8): header bytes 0..19, then the payload.
bool record_crc_ok(const unsigned char *rec, size_t len) {
    if (len < codec::kHeaderSize) return false;
    return crc32c(crc32c(0, rec, 20), rec + codec::kHeaderSize, len - codec::kHeaderSize) == get32(rec + 20);
}

uint64_t slot_of(uint64_t handle) { return (handle & ((uint64_t(1) << kSlotBits) - 1)) - 1; }

}  // namespace

// ---------------------------------------------------------------- pack

void Pool::pack_block(uint64_t handle) {
    BlockView v{};
    if (resolve(handle, &v) != SPECKV_OK) {
        clear_error();
        return;
    }
    if (v.cold() || v.packed || v.npages < 2) return;
    const uint32_t np = v.npages;
    const size_t ps = page_size_;
    const size_t sb = summaries_ ? summary_bytes_ : 0;
    const size_t meta = PackedImage::dir_bytes(np) + size_t(np) * sb;
    // Worth it only in at most np - 1 pages; image offsets are 32-bit.
    const size_t limit = (size_t(np) - 1) * ps;
    auto skip = [&](const char *why) {
        bump(kPackSkipped);
        log(SPECKV_LOG_DEBUG, "block 0x%" PRIx64 " not packed: %s", handle, why);
    };
    if (limit > UINT32_MAX) return skip("the block is too large for an image (4 GiB)");
    if (meta >= limit) return skip("its directory alone fills the pages it would save");
    unsigned char *img = grow(t_image, limit + ps);
    std::memset(img, 0, meta);
    std::vector<uint64_t> seqs(np);
    PackEntry *dir = reinterpret_cast<PackEntry *>(img + sizeof(PackHead));
    size_t at = meta;
    // 1. Snapshot, off the lock: each page under its sequence lock; the
    //    commit re-checks every sequence. Nothing is re-verified here: a
    //    record carries its own CRC32C into the image and a page in clear
    //    its page CRC (the entry's crc), and every read of the image checks
    //    them, so a page damaged before packing fails as it would have.
    for (uint32_t i = 0; i < np; i++) {
        const uint64_t p = v.first_page + i;
        PageEntry &pe = pages()[p];
        for (int tries = 0;; tries++) {
            uint64_t s1;
            if (tries > 8 || plocks_.wait_even(pe, &s1) != SPECKV_OK) {
                clear_error();
                return skip("a page is being written");
            }
            const uint32_t fl = pe.flags.load(std::memory_order_acquire) & ~kPageWriterMask;
            if (fl & (kPageQuarantined | kPagePacked)) return skip("a page is quarantined, or the block moved");
            PackEntry e{0, 0, 0, 0};
            size_t next = at;
            if (fl & kPageZero) {
                e.flags = kPageZero;
            } else {
                const size_t off = align8(at);
                size_t len = ps;
                if (fl & kPageCoded) {
                    uint8_t hb[codec::kHeaderSize];
                    pool_copy(hb, page_data(p), sizeof hb);
                    codec::Header ch;
                    if (codec::peek_header(hb, ps, &ch) != SPECKV_OK) {
                        clear_error();
                        if (pe.seq.load(std::memory_order_acquire) != s1) continue;
                        return skip("a page holds a record that does not parse");
                    }
                    len = ch.record_len();
                }
                if (off + len > limit) return skip("its records would not fit in fewer pages");
                std::memset(img + at, 0, off - at);
                pool_copy(img + off, page_data(p), len);
                e = {uint32_t(off), uint32_t(len), fl & (kPageCoded | kPageSummary),
                     (fl & kPageCoded) ? get32(img + off + 20) : pe.crc.load(std::memory_order_relaxed)};
                next = off + len;
            }
            if (sb && (e.flags & kPageSummary))
                pool_copy(img + PackedImage::dir_bytes(np) + size_t(i) * sb, summaries_ + p * sb, sb);
            std::atomic_thread_fence(std::memory_order_acquire);
            if (pe.seq.load(std::memory_order_relaxed) != s1) continue;  // a writer got in: copy it again
            dir[i] = e;
            seqs[i] = s1;
            at = next;
            break;
        }
    }
    const uint64_t P = (at + ps - 1) / ps;
    if (P >= np) return skip("its records would not fit in fewer pages");
    std::memset(img + at, 0, P * ps - at);
    PackHead ph{kPackMagic, np, handle, v.bytes, at, uint32_t(ps), uint32_t(sb), 0, 0};
    std::memcpy(img, &ph, sizeof ph);
    ph.dir_crc = crc32c(0, img, PackedImage::dir_bytes(np));
    std::memcpy(img, &ph, sizeof ph);
    std::vector<uint32_t> crcs(P);
    for (uint64_t j = 0; j < P; j++) crcs[j] = crc32c(0, img + j * ps, ps);

    // 2. Under the lock: fresh pages, the image, the commit, the old pages free.
    bool recovered;
    if (lock(&recovered) != SPECKV_OK) {
        clear_error();
        return skip("the pool lock could not be taken");
    }
    BlockRecord &r = blocks()[slot_of(handle)];
    SharedHeader *h = sh();
    const uint64_t mine = attach_slot_ >= 0 ? uint64_t(1) << attach_slot_ : 0;
    PinShard &pshard = refs_.pin_shard(handle);
    std::unique_lock pins(pshard.mu);  // pin() registers under it and re-checks tier_seq
    uint64_t first = UINT64_MAX;
    const char *why = nullptr;
    if (r.handle.load() != handle || r.tier_seq.load() != v.tseq || r.packed_pages)
        why = "the block moved or was freed meanwhile";
    else if (pshard.pinned(handle))
        why = "it is pinned";
    else if (r.holders.load(std::memory_order_seq_cst) & ~mine)
        why = "other processes hold references to it (maybe pins)";
    else if (!room_.find_pages_locked(P, &first))
        why = "no run of free pages for its image";
    uint32_t locked = 0;
    for (; !why && locked < np; locked++) {
        PageEntry &pe = pages()[v.first_page + locked];
        uint64_t want = seqs[locked];
        if (!pe.seq.compare_exchange_strong(want, want + 1)) {
            why = "a page was written meanwhile";
            break;
        }
        // Tagged like a write: if we die now, recovery knows whose lock this is.
        if (attach_slot_ >= 0) pe.flags.fetch_or(uint32_t(attach_slot_ + 1) << kPageWriterShift, std::memory_order_relaxed);
    }
    if (why) {
        for (uint32_t i = 0; i < locked; i++) {
            PageEntry &pe = pages()[v.first_page + i];
            pe.flags.fetch_and(~kPageWriterMask, std::memory_order_relaxed);
            pe.seq.store(seqs[i] + 2, std::memory_order_release);
        }
        pins.unlock();
        unlock();
        return skip(why);
    }
    uint64_t *bm = bitmap();
    for (uint64_t j = 0; j < P; j++) {
        const uint64_t p = first + j;
        bm[p / 64] |= uint64_t(1) << (p % 64);
        PageEntry &pe = pages()[p];
        const uint64_t q = plocks_.claim(pe);  // a stale writer of the page's previous block may hold it a moment
        std::memcpy(page_data(p), img + j * ps, ps);
        pe.crc.store(crcs[j], std::memory_order_relaxed);
        pe.flags.store(kPagePacked, std::memory_order_relaxed);
        pe.seq.store(q + 2, std::memory_order_release);
    }
    const uint64_t old_first = v.first_page;
    blocks_.commit_placement_locked(r, slot_of(handle), first, P, 2);  // readers: the block is its image now
    for (uint32_t i = 0; i < np; i++) {
        const uint64_t p = old_first + i;
        PageEntry &pe = pages()[p];
        pe.flags.store(kPageZero, std::memory_order_relaxed);
        pe.seq.store(seqs[i] + 2, std::memory_order_release);  // readers of the old view retry
        bm[p / 64] &= ~(uint64_t(1) << (p % 64));
    }
    h->pages_used.fetch_sub(np - P, std::memory_order_relaxed);
    if (TenantEntry *t = share_.tenant_row(r.tenant)) t->used_pages.fetch_sub(np - P, std::memory_order_relaxed);
    if (old_first < h->alloc_cursor) h->alloc_cursor = old_first;
    pins.unlock();
    unlock();
    // This process's decoded copies (the writes put them in L1) move to the
    // new keys, so a packed block is as resident as it was.
    const uint64_t epoch = sh()->epoch.load(std::memory_order_relaxed), slot = slot_of(handle);
    unsigned char *tmp = grow(t_ppage, ps);
    for (uint32_t i = 0; i < np; i++)
        if (!(dir[i].flags & kPageZero) && cache_->get(old_first + i, seqs[i], epoch, 0, ps, tmp))
            cache_->put(PackedImage::key(slot, i), v.tseq + 2, epoch, tmp);
    bump(kPacks);
    bump(kPackSaved, np - P);
    log(SPECKV_LOG_DEBUG, "packed block 0x%" PRIx64 ": %u pages into %" PRIu64, handle, np, P);
}

// ---------------------------------------------------------------- unpack

int Pool::unpack_block(uint64_t handle, BlockView *v) {
    const size_t ps = page_size_;
    int offlock_rounds = 0;  // demotions with the lock released (bounded: kOfflockRounds), not attempts
    for (int attempt = 0; v->packed && !v->cold(); attempt++) {
        if (attempt >= 8) return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving while being unpacked", handle);
        const uint32_t np = v->npages;
        const uint64_t P = v->packed;
        const size_t sbytes = summaries_ ? summary_bytes_ : 0;
        // 1. The pages as they will be, off the lock, each checked.
        unsigned char *img = grow(t_image, size_t(np) * ps);
        std::vector<uint32_t> crcs(np), flags(np);
        std::vector<unsigned char> sums(size_t(np) * sbytes);
        const unsigned char *src = page_data(v->first_page);
        PackHead ph{};
        int bad = packed_.head(*v, &ph) ? -1 : 0;
        for (uint32_t i = 0; i < np && bad < 0; i++) {
            PackEntry e;
            unsigned char *d = img + size_t(i) * ps;
            if (!packed_.entry(*v, i, &e)) {
                bad = int(i);
                break;
            }
            flags[i] = e.flags & (kPageZero | kPageCoded);
            if (e.flags & kPageZero) continue;
            pool_copy(d, src + e.off, e.len);
            std::memset(d + e.len, 0, ps - e.len);
            if ((e.flags & kPageCoded) ? !record_crc_ok(d, e.len) : crc32c(0, d, ps) != e.crc) bad = int(i);
            crcs[i] = crc32c(0, d, ps);
            if (sbytes && ph.summary_bytes == sbytes && (e.flags & kPageSummary)) {
                pool_copy(&sums[size_t(i) * sbytes], src + PackedImage::dir_bytes(np) + size_t(i) * sbytes, sbytes);
                flags[i] |= kPageSummary;
            }
        }
        std::atomic_thread_fence(std::memory_order_acquire);
        if (v->moved() || v->rec->handle.load(std::memory_order_acquire) != handle) {
            if (int rc = resolve(handle, v); rc != SPECKV_OK) return rc;
            continue;
        }
        if (bad >= 0)
            return fail(SPECKV_ECORRUPT,
                        "block 0x%" PRIx64 ": page %d of its packed image is damaged (pool pages %" PRIu64 "..%" PRIu64
                        "); it stays packed, its other pages readable (speckv pool check reports it)",
                        handle, bad, v->first_page, v->first_page + P - 1);
        // 2. Room, the pages and the commit, under the lock.
        bool recovered;
        if (int rc = lock(&recovered); rc != SPECKV_OK) return rc;
        const uint64_t slot = slot_of(handle);
        BlockRecord &r = blocks()[slot];
        SharedHeader *h = sh();
        auto same = [&] { return r.handle.load() == handle && r.tier_seq.load() == v->tseq; };
        if (!same()) {
            unlock();
            if (int rc = resolve(handle, v); rc != SPECKV_OK) return rc;
            continue;
        }
        const uint64_t more = np - P;
        if (TenantEntry *t = share_.tenant_row(r.tenant); t && t->quota_pages) {
            const uint64_t tenant = r.tenant;
            auto under = [&] { return t->used_pages.load(std::memory_order_relaxed) + more <= t->quota_pages; };
            if (!under()) blocks_.evict_locked(under, &tenant);
            if (!under()) {
                unlock();
                return fail(SPECKV_EQUOTA,
                            "block 0x%" PRIx64 " is packed; writing or pinning it needs %" PRIu64
                            " more pages, over tenant %" PRIu64 "'s quota; it stays packed",
                            handle, more, tenant);
            }
        }
        uint64_t first = UINT64_MAX;
        auto room = [&] { return room_.find_pages_locked(np, &first); };
        if (!room() && any_dead_locked()) recover_locked("processes died; reclaiming what they held to unpack a block");
        if (first == UINT64_MAX && !room() && cold_.demote_offlock_locked(slot, &offlock_rounds)) {
            if (int rc = resolve(handle, v); rc != SPECKV_OK) return rc;  // unlocked: start over
            attempt--;
            continue;
        }
        if (first == UINT64_MAX && !room() && cold_.opened()) cold_.demote_locked(room, slot);
        if (first == UINT64_MAX && !room() && h->blocks_published.load(std::memory_order_relaxed)) blocks_.evict_locked(room, nullptr);
        if (!same() || (first == UINT64_MAX && !room())) {
            const bool moved = !same();
            const uint64_t freep = sb()->n_pages - h->pages_used.load();
            unlock();
            if (moved) {
                if (int rc = resolve(handle, v); rc != SPECKV_OK) return rc;
                continue;
            }
            return fail(SPECKV_ENOSPC,
                        "block 0x%" PRIx64 " is packed and a write or pin needs its %u pages back: no run of that many "
                        "free pages (%" PRIu64 " free); it stays packed and readable",
                        handle, np, freep);
        }
        uint64_t *bm = bitmap();
        std::vector<uint64_t> seqs(np);
        for (uint32_t i = 0; i < np; i++) {
            const uint64_t p = first + i;
            bm[p / 64] |= uint64_t(1) << (p % 64);
            PageEntry &pe = pages()[p];
            const uint64_t q = plocks_.claim(pe);  // a stale writer of the page's previous block may hold it a moment
            if (!(flags[i] & kPageZero)) {
                std::memcpy(page_data(p), img + size_t(i) * ps, ps);
                pe.crc.store(crcs[i], std::memory_order_relaxed);
            }
            if (flags[i] & kPageSummary) std::memcpy(summaries_ + p * sbytes, &sums[size_t(i) * sbytes], sbytes);
            pe.flags.store(flags[i], std::memory_order_relaxed);
            pe.seq.store(q + 2, std::memory_order_release);
            seqs[i] = q + 2;
        }
        const uint64_t old_first = v->first_page;
        blocks_.commit_placement_locked(r, slot, first, 0, 2);  // readers: page per page again
        // The image's pages go free. Nobody locks them but a writer with a
        // stale view, for a moment (it backs off on the moved tier_seq).
        for (uint64_t j = 0; j < P; j++) {
            const uint64_t p = old_first + j;
            PageEntry &pe = pages()[p];
            const uint64_t q = plocks_.claim(pe);
            pe.flags.store(kPageZero, std::memory_order_relaxed);
            pe.seq.store(q + 2, std::memory_order_release);
            bm[p / 64] &= ~(uint64_t(1) << (p % 64));
        }
        h->pages_used.fetch_add(more, std::memory_order_relaxed);
        if (TenantEntry *t = share_.tenant_row(r.tenant)) t->used_pages.fetch_add(more, std::memory_order_relaxed);
        if (old_first < h->alloc_cursor) h->alloc_cursor = old_first;
        unlock();
        // Decoded copies in L1 move back to the pages' keys.
        const uint64_t epoch = sh()->epoch.load(std::memory_order_relaxed);
        unsigned char *tmp = grow(t_ppage, ps);
        for (uint32_t i = 0; i < np; i++)
            if (!(flags[i] & kPageZero) && cache_->get(PackedImage::key(slot, i), v->tseq, epoch, 0, ps, tmp))
                cache_->put(first + i, seqs[i], epoch, tmp);
        bump(kUnpacks);
        log(SPECKV_LOG_DEBUG, "unpacked block 0x%" PRIx64 ": %" PRIu64 " pages back to %u", handle, P, np);
        if (int rc = resolve(handle, v); rc != SPECKV_OK) return rc;
    }
    return SPECKV_OK;
}

// ---------------------------------------------------------------- check

}  // namespace speckv
