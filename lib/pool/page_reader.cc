// SPDX-License-Identifier: Apache-2.0
// The read side of the page protocol (pool/page_reader.h): pages and packed
// pages through L1, L2 and the pool, in-place verification, and the
// prefetcher's L2 fill.
#include "pool/page_reader.h"

#include <cinttypes>
#include <cstring>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "pool/pool_internal.h"
#include "tiers/page_cache.h"
#include "tiers/tier_buffers.h"
#include "util/crc32c.h"
#include "util/seqlock.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;

namespace {
// This thread's decoded page (the read, write, pin and recovery paths).
thread_local std::vector<unsigned char> t_decoded;
}  // namespace

unsigned char *decoded_page_scratch(size_t n) { return scratch_of(t_decoded, n); }

namespace {
thread_local std::vector<unsigned char> t_scratch;  // a page a partial read checks whole
thread_local std::vector<unsigned char> t_ppage;    // one decoded packed page
thread_local std::vector<unsigned char> t_prec;     // one record copied out of an image (the prefetch thread)
thread_local std::vector<unsigned char> t_pfslot;   // the prefetch thread's copy of a coded page before it is decoded

uint64_t slot_of(uint64_t handle) { return (handle & ((uint64_t(1) << kSlotBits) - 1)) - 1; }
}  // namespace

// ------------------------------------------------------------------ pages

int PageReader::read_page(uint64_t page, size_t poff, size_t plen, unsigned char *dst, int *src) {
    *src = 2;
    const size_t ps = L_.page_size;
    PageEntry &pe = L_.pages[page];
    for (;;) {
        uint64_t s1 = pe.seq.load(std::memory_order_acquire);
        if (s1 & 1) [[unlikely]] {
            if (int rc = locks_->wait_even(pe, &s1); rc != SPECKV_OK) return rc;
        }
        // A cached copy is a verified copy of exactly this version of the
        // page, so the hit path needs neither the flags nor the media.
        uint64_t ep = epoch();
        if (l1_->get(page, s1, ep, poff, plen, dst)) [[likely]] {
            *src = 0;
            return SPECKV_OK;
        }
        uint32_t fl = pe.flags.load(std::memory_order_acquire);
        if (fl & kPagePacked) [[unlikely]]  // the block was packed since the caller resolved it: its view is stale
            return fail(SPECKV_EBUSY, "page %" PRIu64 " is part of a packed image now", page);
        if (fl & kPageQuarantined)
            return fail(SPECKV_ECORRUPT, "page %" PRIu64 " is quarantined: it failed its CRC32C check", page);
        if (fl & kPageZero) {
            std::memset(dst, 0, plen);
            if (pe.seq.load(std::memory_order_acquire) == s1) return SPECKV_OK;
            continue;
        }
        // Part of a page, with no L1 to take the whole of it (cache.bytes =
        // 0): only the bytes asked for are copied, from L2 or from the pool.
        // The pool's page is still checked whole (a CRC over all of it, the
        // part asked for in the same pass as its copy), so a corrupt byte
        // anywhere in the page fails the read as before. The range goes
        // through scratch first, as before: dst gets no byte of a page that
        // fails.
        const bool part = plen != ps && !l1_->enabled() && !(fl & kPageCoded);
        unsigned char *buf = dst;
        if (plen != ps) buf = scratch_of(t_scratch, ps);
        // L2: a copy the prefetcher verified, of exactly this version (the
        // tag holds seq and epoch). It moves up to L1.
        if (part) {
            if (l2_ && l2_->get(page, l2_tag(s1, ep), poff, plen, buf)) {
                std::memcpy(dst, buf, plen);
                *src = 1;
                return SPECKV_OK;
            }
        } else if (l2_ && l2_->get(page, l2_tag(s1, ep), 0, ps, buf)) {
            l1_->put(page, s1, ep, buf);
            if (buf != dst) std::memcpy(dst, buf + poff, plen);
            *src = 1;
            return SPECKV_OK;
        }
        // Copy and CRC in one pass (issue 27); the CRC is of the copy.
        uint32_t got = part ? copy_part_crc_from_pool(buf, page_data(page), ps, poff, plen)
                            : copy_crc_from_pool(buf, page_data(page), ps);
        uint32_t stored = pe.crc.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (pe.seq.load(std::memory_order_relaxed) != s1) continue;  // a writer got in: retry
        if (got != stored) {
            pe.flags.fetch_or(kPageQuarantined);
            bump(PoolCounters::kCrcFail);
            (*log_)(SPECKV_LOG_ERROR, "page %" PRIu64 " failed its CRC32C check; quarantined", page);
            return fail(SPECKV_ECORRUPT,
                        "page %" PRIu64 " failed its CRC32C check (stored %08x, computed %08x); page quarantined", page,
                        stored, got);
        }
        if (fl & kPageCoded) {
            unsigned char *dec = decoded_page_scratch(ps);
            if (int rc = dec_.decode_page(page, buf, dec); rc != SPECKV_OK) {
                pe.flags.fetch_or(kPageQuarantined);
                (*log_)(SPECKV_LOG_ERROR, "page %" PRIu64 " holds a bad codec record; quarantined", page);
                return rc;
            }
            if (l1_->admit_read(page)) l1_->put(page, s1, ep, dec);
            std::memcpy(dst, dec + poff, plen);
            return SPECKV_OK;
        }
        if (part) {  // the range is at buf[0, plen); no L1
            std::memcpy(dst, buf, plen);
            return SPECKV_OK;
        }
        // Into L1 only as the admission policy says (config cache.admit).
        if (l1_->admit_read(page)) l1_->put(page, s1, ep, buf);
        if (buf != dst) std::memcpy(dst, buf + poff, plen);
        return SPECKV_OK;
    }
}

int PageReader::verify_page_inplace(uint64_t page, uint64_t *verified_seq) {
    PageEntry &pe = L_.pages[page];
    for (;;) {
        uint64_t s1;
        if (int rc = locks_->wait_even(pe, &s1); rc != SPECKV_OK) return rc;
        uint32_t fl = pe.flags.load(std::memory_order_acquire);
        if (fl & kPageQuarantined)
            return fail(SPECKV_ECORRUPT, "page %" PRIu64 " is quarantined: it failed its CRC32C check", page);
        uint32_t stored = pe.crc.load(std::memory_order_relaxed);
        uint32_t got = crc_of_pool(page_data(page), L_.page_size);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (pe.seq.load(std::memory_order_relaxed) != s1) continue;
        if (got != stored) {
            pe.flags.fetch_or(kPageQuarantined);
            bump(PoolCounters::kCrcFail);
            return fail(SPECKV_ECORRUPT,
                        "page %" PRIu64 " failed its CRC32C check (stored %08x, computed %08x); page quarantined", page,
                        stored, got);
        }
        if (verified_seq) *verified_seq = s1;
        return SPECKV_OK;
    }
}

// ----------------------------------------------------------- packed pages

int PageReader::read_packed_page(const BlockView &v, uint64_t handle, uint32_t i, size_t poff, size_t plen,
                                 unsigned char *dst, int *src) {
    *src = 2;
    const size_t ps = L_.page_size;
    const uint64_t key = PackedImage::key(slot_of(handle), i);
    const uint64_t ep = epoch();
    if (l1_->get(key, v.tseq, ep, poff, plen, dst)) {
        *src = 0;
        return SPECKV_OK;
    }
    unsigned char *page = scratch_of(t_ppage, ps);
    if (l2_ && l2_->get(key, l2_tag(v.tseq, ep), 0, ps, page)) {  // the prefetcher decoded it: up to L1
        l1_->put(key, v.tseq, ep, page);
        std::memcpy(dst, page + poff, plen);
        *src = 1;
        return SPECKV_OK;
    }
    PackEntry e{};
    const bool ok = packed_->entry(v, i, &e);
    // Decoded (or checked) straight from the image, no copy first: if the
    // block moves meanwhile the bytes may change under the decoder, which
    // reads only [off, off+len) and fails or yields garbage we then discard.
    const unsigned char *rec = ok ? page_data(v.first_page) + e.off : nullptr;
    int drc = SPECKV_OK;
    std::string why;
    if (ok && !(e.flags & kPageZero)) {
        SEQLOCK_IGNORE_BEGIN();
        if (e.flags & kPageCoded) {
            size_t n = 0;
            drc = codec::decode(rec, e.len, page, ps, &n);
            if (drc == SPECKV_OK) std::memset(page + n, 0, ps - n);
            else why = std::string("its codec record does not decode (") + last_error() + ")";
        } else {
            std::memcpy(page, rec, ps);
            if (crc32c(0, page, ps) != e.crc) {
                drc = SPECKV_ECORRUPT;
                why = "it fails its CRC32C check";
            }
        }
        SEQLOCK_IGNORE_END();
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (v.rec->handle.load(std::memory_order_acquire) != handle)
        return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " was freed during the read", handle);
    if (v.moved()) return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " moved during the read", handle);
    // The image is the one the view names: what it says now is what it said
    // at pack time, or damage. Damage is per record (its own CRC32C), so the
    // pool pages are not quarantined: the records that share them stay
    // readable, and this one fails the same way at every read.
    const uint64_t p0 = v.first_page + (ok ? e.off / ps : 0), p1 = v.first_page + (ok && e.len ? (e.off + e.len - 1) / ps : 0);
    auto damaged = [&](const char *what) {
        bump(PoolCounters::kCrcFail);
        (*log_)(SPECKV_LOG_ERROR, "block 0x%" PRIx64 " page %u (packed, pool pages %" PRIu64 "..%" PRIu64 "): %s", handle,
                i, p0, p1, what);
        return fail(SPECKV_ECORRUPT, "block 0x%" PRIx64 " page %u (packed, pool pages %" PRIu64 "..%" PRIu64 "): %s", handle,
                    i, p0, p1, what);
    };
    if (!ok) return damaged("its directory entry in the packed image is out of bounds");
    if (e.flags & kPageZero) {
        std::memset(dst, 0, plen);
        return SPECKV_OK;
    }
    if (drc != SPECKV_OK) return damaged(why.c_str());
    if (e.flags & kPageCoded) bump(PoolCounters::kDecPages);
    l1_->put(key, v.tseq, ep, page);
    std::memcpy(dst, page + poff, plen);
    return SPECKV_OK;
}

// --------------------------------------------------------------- prefetch

uint64_t PageReader::prefetch_block(const BlockView &v, uint64_t handle, uint64_t owner, uint64_t *link) {
    return v.packed ? prefetch_packed(v, handle, owner, link) : prefetch_pages(v, owner, link);
}

// Reads a block's pages that are in neither L1 nor L2 into L2, verified.
uint64_t PageReader::prefetch_pages(const BlockView &v, uint64_t owner, uint64_t *link) {
    const uint64_t ep = epoch();
    uint64_t n = 0;
    uint32_t gen = l2_->generation(owner);
    for (uint64_t p = v.first_page; p < v.first_page + v.npages; p++) {
        PageEntry &pe = L_.pages[p];
        uint64_t s1 = pe.seq.load(std::memory_order_acquire);
        if (s1 & 1) continue;  // being written: the reader will fetch it
        uint32_t fl = pe.flags.load(std::memory_order_acquire);
        if (fl & (kPageZero | kPageQuarantined)) continue;  // zeros cost nothing; a bad page is the reader's to report
        uint64_t tag = l2_tag(s1, ep);
        if (l1_->contains(p, s1, ep)) {
            // L1 serves it (a unit this far ahead is not the one just read:
            // L1 keeps it), so an L2 copy is a duplicate: its frame goes first.
            if (l2_->contains(p, tag)) l2_->invalidate(p);
            continue;
        }
        if (l2_->contains(p, tag)) continue;
        // L2 holds decoded pages: a coded page is copied (the record is what
        // crosses the link), checked, then decoded on this thread.
        // The fill gets the page's bytes, its entry and the decoder.
        struct Fill {
            const PageDecoder *dec;
            const unsigned char *src;  // the page in the pool
            const PageEntry *pe;
            uint64_t page, seq;
            bool coded;
            size_t moved;
        } ctx{&dec_, page_data(p), &pe, p, s1, (fl & kPageCoded) != 0, 0};
        auto fill = [](void *user, void *dst) -> bool {
            auto *c = static_cast<Fill *>(user);
            const size_t ps = c->dec->page_size();
            const PageEntry &e = *c->pe;
            unsigned char *buf = c->coded ? scratch_of(t_pfslot, ps) : static_cast<unsigned char *>(dst);
            // Copy and CRC in one pass (as a read does); the CRC is of the copy.
            const uint32_t got = copy_crc_from_pool(buf, c->src, ps);
            uint32_t stored = e.crc.load(std::memory_order_relaxed);
            std::atomic_thread_fence(std::memory_order_acquire);
            if (e.seq.load(std::memory_order_relaxed) != c->seq) return false;  // rewritten meanwhile
            if (got != stored) return false;  // a bad page is left to the synchronous path
            if (!c->coded) {
                c->moved = ps;
                return true;
            }
            codec::Header h;
            if (codec::peek_header(buf, ps, &h) != SPECKV_OK ||
                c->dec->decode_page(c->page, buf, static_cast<unsigned char *>(dst)) != SPECKV_OK) {
                clear_error();
                return false;  // likewise
            }
            c->moved = h.record_len();
            return true;
        };
        if (l2_->insert_with(p, tag, owner, gen, fill, &ctx)) {
            n++;
            *link += ctx.moved;
        }
    }
    // The block was freed while we read: what we stored carries the old
    // sequence numbers and never matches again.
    return n;
}

// Pages into L2 from a packed block.
uint64_t PageReader::prefetch_packed(const BlockView &v, uint64_t handle, uint64_t owner, uint64_t *link) {
    const uint64_t ep = epoch(), slot = slot_of(handle);
    const uint64_t tag = l2_tag(v.tseq, ep);
    const uint32_t gen = l2_->generation(owner);
    uint64_t n = 0;
    for (uint32_t i = 0; i < v.npages; i++) {
        PackEntry e;
        if (!packed_->entry(v, i, &e) || (e.flags & kPageZero)) continue;  // zeros cost nothing; damage is the reader's to report
        const uint64_t key = PackedImage::key(slot, i);
        if (l1_->contains(key, v.tseq, ep) || l2_->contains(key, tag)) continue;
        // L2 holds decoded pages: the record is what crosses the link.
        // The fill gets the image, the view, the entry and the decoder.
        struct Fill {
            const PageDecoder *dec;
            const unsigned char *image;  // the packed image's first page in the pool
            const BlockView *v;
            uint64_t handle;
            PackEntry e;
        } ctx{&dec_, page_data(v.first_page), &v, handle, e};
        auto fill = [](void *user, void *dst) -> bool {
            auto *c = static_cast<Fill *>(user);
            const size_t ps = c->dec->page_size();
            unsigned char *rec = scratch_of(t_prec, c->e.len);
            copy_from_pool(rec, c->image + c->e.off, c->e.len);
            std::atomic_thread_fence(std::memory_order_acquire);
            if (c->v->moved() || c->v->rec->handle.load(std::memory_order_acquire) != c->handle) return false;
            if (c->e.flags & kPageCoded) return c->dec->decode_record(rec, c->e.len, dst);
            if (crc32c(0, rec, ps) != c->e.crc) return false;
            std::memcpy(dst, rec, ps);
            return true;
        };
        if (l2_->insert_with(key, tag, owner, gen, fill, &ctx)) {
            n++;
            *link += e.len;
        }
    }
    return n;
}

}  // namespace speckv
