// SPDX-License-Identifier: Apache-2.0
// PageWriter (pool/page_writer.h): a page's write under its page lock, and a
// pin's first look at a page.
#include "pool/page_writer.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstring>
#include <vector>

#include "codec/codec.h"
#include "pool/page_encoder.h"
#include "pool/pool_internal.h"
#include "pool/selector.h"
#include "tiers/page_cache.h"
#include "util/crc32c.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;

int PageWriter::write_page(const BlockView &r, uint64_t handle, uint64_t pos, const unsigned char *src, size_t plen,
                           bool *moved) {
    *moved = false;
    const uint32_t page_size = L_.page_size;
    const uint64_t page = r.first_page + (pos >> L_.page_shift);  // page size is a power of two: no division
    const size_t poff = pos & (page_size - 1);
    uint64_t q;
    if (int rc = p_.plocks->lock(page, handle, r.rec, attach_slot_, &q); rc != SPECKV_OK) return rc;
    PageEntry &pe = L_.pages[page];
    if (r.moved()) [[unlikely]] {  // moved to L4 (or back) since resolve: this page is not the block's now
        pe.flags.fetch_and(~kPageWriterMask, std::memory_order_relaxed);
        pe.seq.store(q + 2, std::memory_order_release);
        *moved = true;
        return SPECKV_OK;
    }
    if (std::atomic_ref<const uint32_t>(r.rec->state).load(std::memory_order_seq_cst) & kBlockPublished) {
        pe.flags.fetch_and(~kPageWriterMask, std::memory_order_relaxed);
        pe.seq.store(q + 2, std::memory_order_release);
        return fail(SPECKV_EPERM, "block 0x%" PRIx64 " is published: its contents are immutable", handle);
    }
    unsigned char *d = page_data(page);
    uint32_t fl = pe.flags.load(std::memory_order_relaxed) & ~kPageWriterMask;
    const bool whole = plen == page_size;
    if ((fl & kPageZero) && !whole) {
        std::memset(d, 0, page_size);
    } else if ((fl & (kPageZero | kPageCoded)) == kPageCoded && !whole) {
        // A partial write into a coded page: the rest of the page is the
        // record's values. A record that does not check keeps the page
        // as it is (quarantined): nothing is written over it.
        unsigned char *dec = decoded_page_scratch(page_size);
        int rc = crc32c(0, d, page_size) == pe.crc.load(std::memory_order_relaxed) ? p_.reader->decode_page(page, d, dec)
                 : fail(SPECKV_ECORRUPT, "page %" PRIu64 " failed its CRC32C check; page quarantined", page);
        if (rc != SPECKV_OK) {
            pe.flags.store(fl | kPageQuarantined, std::memory_order_relaxed);
            pe.seq.store(q + 2, std::memory_order_release);
            return rc;
        }
        std::memcpy(d, dec, page_size);
    }
    // A whole page is copied and checksummed in one pass (issue 27).
    const bool fused = whole;
    const uint32_t fused_crc = fused ? crc32c_copy(0, d, src, plen) : 0;
    if (!fused) std::memcpy(d + poff, src, plen);
    // A write that reaches the end of the page's bytes completes it: the
    // page is then stored coded if its block's preset says so. L1 gets the
    // values a read will return (decoded, not what was written).
    const uint64_t pstart = pos - poff;
    const size_t logical = static_cast<size_t>(std::min<uint64_t>(page_size, r.bytes - pstart));
    const unsigned char *l1 = d;
    bool coded = false, summarized = false;
    if (poff + plen == logical) {
        const uint32_t hf = relaxed_load(r.rec->hint_flags);
        uint8_t mode = p_.codec->mode_for(hf, r.dtype);
        if (mode == codec::kModeCount) [[unlikely]]
            mode = p_.codec->adaptive(relaxed_load(r.rec->layer), hf, d, logical, page_size, r.dtype, *p_.log);
        if (mode) {
            unsigned char *dec = decoded_page_scratch(page_size);
            const PageEncoder enc(page_size, p_.codec->channels(), p_.counters);
            if ((coded = enc.encode_page(d, logical, mode, r.dtype, dec))) l1 = dec;
        }
        // A completed K page gets its summary, of the values reads return.
        if ((hf & SPECKV_HINT_KEYS) && L_.summaries && p_.sel->channels())
            summarized = p_.sel->summarize_page_locked(page, l1, logical, r.dtype);
    }
    pe.crc.store(fused && !coded ? fused_crc : crc32c(0, d, page_size), std::memory_order_relaxed);
    // A partial write into a quarantined page keeps the quarantine: the
    // rest of the page still holds the bytes that failed.
    uint32_t nfl = fl & ~(kPageZero | kPageCoded | kPageSummary);
    if (whole) nfl &= ~kPageQuarantined;
    if (coded) nfl |= kPageCoded;
    if (summarized) nfl |= kPageSummary;
    pe.flags.store(nfl, std::memory_order_relaxed);
    // Into L1 as the admission policy says (config cache.admit): stored,
    // or marked so that its first read here stores it. Done while the
    // page is still locked, so a copy is exactly version q + 2.
    if (!(nfl & kPageQuarantined)) l1_->put_written(page, q + 2, epoch(), l1, poff + plen == logical);
    pe.seq.store(q + 2, std::memory_order_release);
    return SPECKV_OK;
}

int PageWriter::check_in_place(uint64_t p) {
    uint64_t vs = 0;
    if (int rc = p_.reader->verify_page_inplace(p, &vs); rc != SPECKV_OK) return rc;
    l1_->note_verified(p, vs, epoch());
    return SPECKV_OK;
}

// The pointer must show values, not zeros-by-flag or a record: the page is
// stored as those values from now on (the same values a read returns).
int PageWriter::materialize(const BlockView &r, uint64_t handle, uint64_t p, bool *moved) {
    const uint32_t page_size = L_.page_size;
    PageEntry &pe = L_.pages[p];
    const bool zero = pe.flags.load(std::memory_order_acquire) & kPageZero;
    uint64_t q;
    if (int rc = p_.plocks->lock(p, handle, r.rec, attach_slot_, &q, r.tseq); rc != SPECKV_OK) {
        *moved = r.moved();  // it went to L4 meanwhile: the caller starts from the top
        return rc;
    }
    if (zero) {
        if (pe.flags.load(std::memory_order_relaxed) & kPageZero) {
            std::memset(page_data(p), 0, page_size);
            pe.crc.store(crc32c(0, page_data(p), page_size), std::memory_order_relaxed);
        }
        pe.flags.store(pe.flags.load(std::memory_order_relaxed) & ~(kPageZero | kPageCoded | kPageWriterMask),
                       std::memory_order_relaxed);
        pe.seq.store(q + 2, std::memory_order_release);
        return SPECKV_OK;
    }
    uint32_t fl = pe.flags.load(std::memory_order_relaxed) & ~kPageWriterMask;
    int rc = SPECKV_OK;
    if ((fl & (kPageCoded | kPageZero)) == kPageCoded) {
        unsigned char *dec = decoded_page_scratch(page_size);
        if (crc32c(0, page_data(p), page_size) != pe.crc.load(std::memory_order_relaxed)) {
            p_.counters->bump(PoolCounters::kCrcFail);
            rc = fail(SPECKV_ECORRUPT, "page %" PRIu64 " failed its CRC32C check; page quarantined", p);
        } else {
            rc = p_.reader->decode_page(p, page_data(p), dec);
        }
        if (rc == SPECKV_OK) {
            std::memcpy(page_data(p), dec, page_size);
            pe.crc.store(crc32c(0, page_data(p), page_size), std::memory_order_relaxed);
            fl &= ~kPageCoded;
        } else {
            fl |= kPageQuarantined;
        }
    }
    pe.flags.store(fl, std::memory_order_relaxed);
    pe.seq.store(q + 2, std::memory_order_release);
    return rc;
}

}  // namespace speckv
