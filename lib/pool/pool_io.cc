// SPDX-License-Identifier: Apache-2.0
// Page I/O: write and read with their CRC32C checks over the seqlocked page
// protocol (pool/page_lock.h). A write encodes the page it completes
// (pool/page_encoder.h); a read takes each page from the PageReader
// (pool/page_reader.h: L1, L2 or the pool, checked, decoded).
// docs/pool-format.md "Pages".
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

#include "pool/page_decoder.h"
#include "pool/page_encoder.h"
#include "pool/pool_internal.h"

namespace speckv {

using namespace fmt;

namespace {
// A decoded page (the write, pin, read and recovery paths).
thread_local std::vector<unsigned char> t_decoded;
}  // namespace

unsigned char *decoded_page_scratch(size_t n) { return scratch_of(t_decoded, n); }

// ------------------------------------------------------------ read/write

int Pool::write(uint64_t handle, uint64_t off, const void *src, size_t len) {
    if (read_only()) return fail(SPECKV_EPERM, "pool is open read-only");
    int attempt = 0;
restart:
    BlockView r{};
    if (int rc = resolve(handle, &r); rc != SPECKV_OK) return rc;
    if (r.cold()) [[unlikely]]
        if (int rc = cold_.ensure_hot(handle, &r); rc != SPECKV_OK) return rc;
    if (HeatTracker *ht = cold_.heat()) [[unlikely]]
        ht->touch(handle, now_ns(CLOCK_MONOTONIC_COARSE));
    if (!src && len) return fail(SPECKV_EINVAL, "src is NULL");
    if (off > r.bytes || len > r.bytes - off)
        return fail(SPECKV_ERANGE, "write of %zu bytes at offset %" PRIu64 " runs past the block's %" PRIu64 " bytes", len,
                    off, r.bytes);
    if (pinned(handle)) return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " is pinned: unpin it before writing", handle);
    if (r.packed) [[unlikely]] {  // back to a page per page first (fresh pages; the block stays packed on failure)
        if (relaxed_load(r.rec->state) & kBlockPublished)
            return fail(SPECKV_EPERM, "block 0x%" PRIx64 " is published: its contents are immutable", handle);
        if (int rc = packer_.unpack_block(handle, &r); rc != SPECKV_OK) return rc;
        if (r.packed || r.cold()) {  // packed or moved again meanwhile
            if (++attempt > 16) return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving during the write", handle);
            goto restart;
        }
    }
    auto *in = static_cast<const unsigned char *>(src);
    size_t done = 0;
    while (done < len) {
        uint64_t pos = off + done;
        uint64_t page = r.first_page + (pos >> page_shift_);  // page size is a power of two: no division
        size_t poff = pos & (page_size_ - 1);
        size_t plen = std::min<size_t>(len - done, page_size_ - poff);
        uint64_t q;
        if (int rc = plocks_.lock(page, handle, r.rec, attach_slot_, &q); rc != SPECKV_OK) return rc;
        PageEntry &pe = pages()[page];
        if (r.moved()) [[unlikely]] {  // moved to L4 (or back) since resolve: this page is not the block's now
            pe.flags.fetch_and(~kPageWriterMask, std::memory_order_relaxed);
            pe.seq.store(q + 2, std::memory_order_release);
            if (++attempt > 16) return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving between tiers during the write", handle);
            goto restart;  // rewriting what was written already is harmless: same bytes
        }
        if (std::atomic_ref<const uint32_t>(r.rec->state).load(std::memory_order_seq_cst) & kBlockPublished) {
            pe.flags.fetch_and(~kPageWriterMask, std::memory_order_relaxed);
            pe.seq.store(q + 2, std::memory_order_release);
            return fail(SPECKV_EPERM, "block 0x%" PRIx64 " is published: its contents are immutable", handle);
        }
        unsigned char *d = page_data(page);
        uint32_t fl = pe.flags.load(std::memory_order_relaxed) & ~kPageWriterMask;
        bool whole = plen == page_size_;
        if ((fl & kPageZero) && !whole) {
            std::memset(d, 0, page_size_);
        } else if ((fl & (kPageZero | kPageCoded)) == kPageCoded && !whole) {
            // A partial write into a coded page: the rest of the page is the
            // record's values. A record that does not check keeps the page
            // as it is (quarantined): nothing is written over it.
            unsigned char *dec = scratch_of(t_decoded, page_size_);
            int rc = crc32c(0, d, page_size_) == pe.crc.load(std::memory_order_relaxed) ? reader_.decode_page(page, d, dec)
                     : fail(SPECKV_ECORRUPT, "page %" PRIu64 " failed its CRC32C check; page quarantined", page);
            if (rc != SPECKV_OK) {
                pe.flags.store(fl | kPageQuarantined, std::memory_order_relaxed);
                pe.seq.store(q + 2, std::memory_order_release);
                return rc;
            }
            std::memcpy(d, dec, page_size_);
        }
        // A whole page is copied and checksummed in one pass (issue 27).
        const bool fused = whole;
        const uint32_t fused_crc = fused ? crc32c_copy(0, d, in + done, plen) : 0;
        if (!fused) std::memcpy(d + poff, in + done, plen);
        // A write that reaches the end of the page's bytes completes it: the
        // page is then stored coded if its block's preset says so. L1 gets the
        // values a read will return (decoded, not what was written).
        uint64_t pstart = pos - poff;
        size_t logical = static_cast<size_t>(std::min<uint64_t>(page_size_, r.bytes - pstart));
        const unsigned char *l1 = d;
        bool coded = false, summarized = false;
        if (poff + plen == logical) {
            const uint32_t hf = relaxed_load(r.rec->hint_flags);
            uint8_t mode = codec_.mode_for(hf, r.dtype);
            if (mode == codec::kModeCount) [[unlikely]]
                mode = codec_.adaptive(relaxed_load(r.rec->layer), hf, d, logical, page_size_, r.dtype, log_);
            if (mode) {
                unsigned char *dec = scratch_of(t_decoded, page_size_);
                const PageEncoder enc(page_size_, codec_.channels(), &counters_);
                if ((coded = enc.encode_page(d, logical, mode, r.dtype, dec))) l1 = dec;
            }
            // A completed K page gets its summary, of the values reads return.
            if ((hf & SPECKV_HINT_KEYS) && summaries_ && sel_.channels())
                summarized = sel_.summarize_page_locked(page, l1, logical, r.dtype);
        }
        pe.crc.store(fused && !coded ? fused_crc : crc32c(0, d, page_size_), std::memory_order_relaxed);
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
        if (!(nfl & kPageQuarantined))
            cache_->put_written(page, q + 2, sh()->epoch.load(std::memory_order_relaxed), l1, poff + plen == logical);
        pe.seq.store(q + 2, std::memory_order_release);
        done += plen;
    }
    bump(kWBytes, len);
    // The write that completes the block seals it: its coded pages are
    // packed into fewer pages (format 6, codec.pack).
    if (off + len == r.bytes && len && pack_ && r.npages > 1 && sb()->format_version >= 6 &&
        codec_.mode_for(relaxed_load(r.rec->hint_flags), r.dtype) != 0)
        packer_.pack_block(handle);
    return SPECKV_OK;
}

int Pool::read(uint64_t handle, uint64_t off, void *dst, size_t len) {
  for (int attempt = 0;; attempt++) {
    BlockView r{};
    if (int rc = resolve(handle, &r); rc != SPECKV_OK) return rc;
    if (r.cold()) [[unlikely]]
        if (int rc = cold_.ensure_hot(handle, &r); rc != SPECKV_OK) return rc;
    if (!dst && len) return fail(SPECKV_EINVAL, "dst is NULL");
    if (off > r.bytes || len > r.bytes - off)
        return fail(SPECKV_ERANGE, "read of %zu bytes at offset %" PRIu64 " runs past the block's %" PRIu64 " bytes", len,
                    off, r.bytes);
    auto *out = static_cast<unsigned char *>(dst);
    size_t done = 0;
    uint64_t hits = 0, misses = 0, l2 = 0;
    int rc = SPECKV_OK;
    // Fast path: a range inside one page whose verified copy is cached.
    if (size_t poff = off & (page_size_ - 1); len && len <= page_size_ - poff && !r.packed) [[likely]] {
        uint64_t page = r.first_page + (off >> page_shift_);
        const PageEntry &pe = pages()[page];
        uint64_t s1 = pe.seq.load(std::memory_order_acquire);
        if (!(s1 & 1) && cache_->get(page, s1, sh()->epoch.load(std::memory_order_relaxed), poff, len, out)) {
            hits = 1;
            done = len;
        }
    }
    while (done < len) {
        uint64_t pos = off + done;
        uint64_t page = r.first_page + (pos >> page_shift_);  // page size is a power of two: no division
        size_t poff = pos & (page_size_ - 1);
        size_t plen = std::min<size_t>(len - done, page_size_ - poff);
        int src;
        if (r.packed) [[unlikely]] {
            if ((rc = reader_.read_packed_page(r, handle, static_cast<uint32_t>(pos >> page_shift_), poff, plen, out + done, &src)) !=
                SPECKV_OK)
                break;
        } else if ((rc = reader_.read_page(page, poff, plen, out + done, &src)) != SPECKV_OK) {
            break;
        }
        hits += src == 0;
        misses += src != 0;
        l2 += src == 1;
        done += plen;
    }
    if (rc == SPECKV_OK && r.rec->handle.load(std::memory_order_acquire) != handle)
        rc = fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " was freed during the read", handle);
    // The block moved to L4 (or back) while we copied: the pages we read may
    // be another block's by now. Read again from where it is.
    if (r.moved()) [[unlikely]] {
        if (attempt < 16) {
            clear_error();
            continue;
        }
        if (rc == SPECKV_OK) rc = fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving between tiers during the read", handle);
    }
    if (HeatTracker *ht = cold_.heat()) [[unlikely]]
        ht->touch(handle, now_ns(CLOCK_MONOTONIC_COARSE));
    // One shard lookup for all the counters of this call.
    std::atomic<uint64_t> *c = counters_.mine();
    auto add = [](std::atomic<uint64_t> &a, uint64_t n, bool own) {
        if (own) a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
        else a.fetch_add(n, std::memory_order_relaxed);
    };
    bool own = c != counters_.overflow();
    if (hits) add(c[kHits], hits, own);
    if (misses) {
        add(c[kMisses], misses, own);
        if (l2) add(c[kL2Hits], l2, own);
        if (misses != l2) add(c[kSyncReads], misses - l2, own);
    }
    if (pf_.active()) [[unlikely]]
        pf_.note_access(r.rec, misses != l2 ? 2 : l2 ? 1 : 0, static_cast<uint32_t>(hits + misses));
    if (rc == SPECKV_OK) {
        add(c[kReads], 1, own);
        add(c[kRBytes], len, own);
    }
    return rc;
  }
}

}  // namespace speckv
