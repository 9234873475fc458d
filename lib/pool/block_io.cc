// SPDX-License-Identifier: Apache-2.0
// BlockIO (pool/block_io.h): write, read, pin and unpin of a block by handle.
#include "pool/block_io.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <mutex>

#include "pool/cold_role.h"
#include "pool/pool_internal.h"
#include "prefetch/engine.h"
#include "tiers/heat.h"
#include "tiers/page_cache.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;

int BlockIO::bring_back(uint64_t handle, BlockView *r) const { return p_.cold->ensure_hot(handle, r); }

// ------------------------------------------------------------------ write

int BlockIO::write(uint64_t handle, uint64_t off, const void *src, size_t len) {
    if (read_only_) return fail(SPECKV_EPERM, "pool is open read-only");
    int attempt = 0;
restart:
    BlockView r{};
    if (int rc = resolve_hot(handle, &r); rc != SPECKV_OK) return rc;
    if (HeatTracker *ht = p_.cold->heat()) [[unlikely]]
        ht->touch(handle, now_ns(CLOCK_MONOTONIC_COARSE));
    if (!src && len) return fail(SPECKV_EINVAL, "src is NULL");
    if (off > r.bytes || len > r.bytes - off)
        return fail(SPECKV_ERANGE, "write of %zu bytes at offset %" PRIu64 " runs past the block's %" PRIu64 " bytes", len,
                    off, r.bytes);
    if (p_.refs->pinned(handle)) return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " is pinned: unpin it before writing", handle);
    if (r.packed) [[unlikely]] {  // back to a page per page first (fresh pages; the block stays packed on failure)
        if (relaxed_load(r.rec->state) & kBlockPublished)
            return fail(SPECKV_EPERM, "block 0x%" PRIx64 " is published: its contents are immutable", handle);
        if (int rc = p_.packer->unpack_block(handle, &r); rc != SPECKV_OK) return rc;
        if (r.packed || r.cold()) {  // packed or moved again meanwhile
            if (++attempt > 16) return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving during the write", handle);
            goto restart;
        }
    }
    const auto *in = static_cast<const unsigned char *>(src);
    const uint32_t page_size = L_.page_size;
    size_t done = 0;
    while (done < len) {
        const uint64_t pos = off + done;
        const size_t plen = std::min<size_t>(len - done, page_size - (pos & (page_size - 1)));
        bool moved;
        if (int rc = p_.writer->write_page(r, handle, pos, in + done, plen, &moved); rc != SPECKV_OK) return rc;
        if (moved) [[unlikely]] {
            if (++attempt > 16) return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving between tiers during the write", handle);
            goto restart;  // rewriting what was written already is harmless: same bytes
        }
        done += plen;
    }
    p_.counters->bump(PoolCounters::kWBytes, len);
    // The write that completes the block seals it: its coded pages are
    // packed into fewer pages (format 6, codec.pack).
    if (off + len == r.bytes && len && pack_ && r.npages > 1 && L_.sb->format_version >= 6 &&
        p_.codec->mode_for(relaxed_load(r.rec->hint_flags), r.dtype) != 0)
        p_.packer->pack_block(handle);
    return SPECKV_OK;
}

// ------------------------------------------------------------------- read

// What one read did: the counters (one shard lookup for all of them), the
// heat of the block, and where its pages came from for the prefetcher.
__attribute__((always_inline)) inline void BlockIO::count_read(const BlockView &r, uint64_t handle, uint64_t hits, uint64_t misses, uint64_t l2, size_t len, bool ok) {
    if (HeatTracker *ht = p_.cold->heat()) [[unlikely]]
        ht->touch(handle, now_ns(CLOCK_MONOTONIC_COARSE));
    std::atomic<uint64_t> *c = p_.counters->mine();
    auto add = [](std::atomic<uint64_t> &a, uint64_t n, bool own) {
        if (own) a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
        else a.fetch_add(n, std::memory_order_relaxed);
    };
    const bool own = c != p_.counters->overflow();
    if (hits) add(c[PoolCounters::kHits], hits, own);
    if (misses) {
        add(c[PoolCounters::kMisses], misses, own);
        if (l2) add(c[PoolCounters::kL2Hits], l2, own);
        if (misses != l2) add(c[PoolCounters::kSyncReads], misses - l2, own);
    }
    if (p_.pf->active()) [[unlikely]]
        p_.pf->note_access(r.rec, misses != l2 ? 2 : l2 ? 1 : 0, static_cast<uint32_t>(hits + misses));
    if (ok) {
        add(c[PoolCounters::kReads], 1, own);
        add(c[PoolCounters::kRBytes], len, own);
    }
}

int BlockIO::read(uint64_t handle, uint64_t off, void *dst, size_t len) {
  for (int attempt = 0;; attempt++) {
    BlockView r{};
    if (int rc = resolve_hot(handle, &r); rc != SPECKV_OK) return rc;
    if (!dst && len) return fail(SPECKV_EINVAL, "dst is NULL");
    if (off > r.bytes || len > r.bytes - off)
        return fail(SPECKV_ERANGE, "read of %zu bytes at offset %" PRIu64 " runs past the block's %" PRIu64 " bytes", len,
                    off, r.bytes);
    const uint32_t page_size = L_.page_size;
    auto *out = static_cast<unsigned char *>(dst);
    size_t done = 0;
    uint64_t hits = 0, misses = 0, l2 = 0;
    int rc = SPECKV_OK;
    // Fast path: a range inside one page whose verified copy is cached.
    if (size_t poff = off & (page_size - 1); len && len <= page_size - poff && !r.packed) [[likely]] {
        const uint64_t page = r.first_page + (off >> L_.page_shift);
        const PageEntry &pe = L_.pages[page];
        const uint64_t s1 = pe.seq.load(std::memory_order_acquire);
        if (!(s1 & 1) && l1_->get(page, s1, L_.sh->epoch.load(std::memory_order_relaxed), poff, len, out)) {
            hits = 1;
            done = len;
        }
    }
    while (done < len) {
        const uint64_t pos = off + done;
        const uint64_t page = r.first_page + (pos >> L_.page_shift);  // page size is a power of two: no division
        const size_t poff = pos & (page_size - 1);
        const size_t plen = std::min<size_t>(len - done, page_size - poff);
        int src;
        if (r.packed) [[unlikely]] {
            if ((rc = p_.reader->read_packed_page(r, handle, static_cast<uint32_t>(pos >> L_.page_shift), poff, plen,
                                                  out + done, &src)) != SPECKV_OK)
                break;
        } else if ((rc = p_.reader->read_page(page, poff, plen, out + done, &src)) != SPECKV_OK) {
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
    count_read(r, handle, hits, misses, l2, len, rc == SPECKV_OK);
    return rc;
  }
}

// ------------------------------------------------------------ pin / unpin

// A block pinned here is referenced while pinned (its holders bit is set),
// so no process moves or frees it under the pointer: eviction, demotion and
// packing skip referenced blocks, and another process's free of an
// unpublished one waits for the unpin (SPECKV_EBUSY).
__attribute__((always_inline)) inline int BlockIO::register_pin(uint64_t handle, const BlockView &r, bool *moved) {
    if (int rc = p_.blocks->acquire_ref(handle, false); rc != SPECKV_OK) return rc;
    // The L4 holder demotes only with the handle's pin shard locked and
    // re-checks the pins before it commits: registered here and unmoved
    // means it stays put.
    PinShard &ps = p_.refs->pin_shard(handle);
    std::lock_guard g(ps.mu);
    auto &e = ps.map[handle];
    e.first++;   // pins
    e.second++;  // of them holding a reference
    ps.total.fetch_add(1, std::memory_order_release);
    *moved = r.moved();
    return SPECKV_OK;
}

int BlockIO::pin(uint64_t handle, const void **ptr, size_t *len) {
    if (!ptr || !len) return fail(SPECKV_EINVAL, "ptr and len must not be NULL");
    if (read_only_) return fail(SPECKV_EPERM, "pool is open read-only");
    int attempt = 0;
again:
    BlockView r{};
    if (int rc = resolve_hot(handle, &r); rc != SPECKV_OK) return rc;
    if (r.packed) {  // the pointer must show values page by page: unpack first
        if (int rc = p_.packer->unpack_block(handle, &r); rc != SPECKV_OK) return rc;
        if (r.packed || r.cold()) {
            if (++attempt < 16) goto again;
            return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving while pinning", handle);
        }
    }
    for (uint64_t p = r.first_page; p < r.first_page + r.npages; p++) {
        bool moved;
        if (int rc = p_.writer->prepare_pin(r, handle, p, &moved); rc != SPECKV_OK) {
            if (moved && ++attempt < 16) goto again;  // it went to L4 meanwhile: from the top
            return rc;
        }
    }
    bool moved;
    if (int rc = register_pin(handle, r, &moved); rc != SPECKV_OK) return rc;
    if (moved) {  // it went to L4 (or came back) between resolve and the pin: once more
        unpin(handle);
        if (++attempt < 16) goto again;
        return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving between tiers while pinning", handle);
    }
    if (r.rec->handle.load(std::memory_order_acquire) != handle) {
        unpin(handle);
        return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " was freed while pinning", handle);
    }
    *ptr = L_.page_data(r.first_page);
    *len = r.bytes;
    return SPECKV_OK;
}

int BlockIO::unpin(uint64_t handle) {
    bool ref = false;
    {
        PinShard &ps = p_.refs->pin_shard(handle);
        std::lock_guard g(ps.mu);
        auto it = ps.map.find(handle);
        if (it == ps.map.end() || it->second.first == 0) {
            BlockView r{};
            if (int rc = p_.resolver->resolve(handle, &r); rc != SPECKV_OK) return rc;
            return fail(SPECKV_EINVAL, "block 0x%" PRIx64 " is not pinned", handle);
        }
        if (it->second.second) {
            it->second.second--;
            ref = true;
        }
        if (--it->second.first == 0 && ps.map.size() > ProcessRefs::kKeepIdle) ps.map.erase(it);
        ps.total.fetch_sub(1, std::memory_order_release);
    }
    return ref ? p_.blocks->release_ref(handle) : SPECKV_OK;
}

// ------------------------------------------------------------- prefetch

// Reads a block's pages that are in neither L1 nor L2 into L2, verified.
// Returns the pages brought in.
uint64_t BlockIO::prefetch_block(uint64_t handle, uint64_t owner, uint64_t skip_from, uint64_t *link) {
    BlockView v{};
    if (p_.resolver->resolve(handle, &v) != SPECKV_OK) {
        clear_error();
        return 0;
    }
    // In L4: the holder brings it back into the pool ahead of its use (L4 -> L3), then on into L2.
    if (v.cold() && p_.cold->ensure_hot(handle, &v) != SPECKV_OK) {
        clear_error();
        return 0;
    }
    // The block the request is appending to (it covers the token being
    // decoded, or the next one) is about to be rewritten: a copy fetched now
    // would be stale before it is read. Its writer puts it in L1 instead.
    uint64_t tp = relaxed_field(v.rec->token_pos), tc = relaxed_field(v.rec->token_count);
    if (skip_from != ~0ull && tc && skip_from + 1 >= tp && skip_from < tp + tc) return 0;
    return p_.reader->prefetch_block(v, handle, owner, link);  // pool/page_reader.h
}

}  // namespace speckv
