// SPDX-License-Identifier: Apache-2.0
// PageReader: the read side of the page protocol (docs/pool-format.md
// "Pages", "Packed blocks"; docs/tiers.md). A page comes from L1 (the
// verified-page cache), else L2 (the prefetch buffer), else the pool: copied
// under its sequence lock with its CRC32C in the same pass, then decoded if
// it holds a codec record; a page that fails is quarantined. A packed
// block's logical page comes the same way, its record checked against the
// image's directory (PackedImage). The prefetcher's L2 fill of a block's
// pages is here too: the same copy, check and decode, into L2.
//
// It gets what it reads when the pool is bound (the layout, the page locks,
// the packed-image accessors, the counters and the log) and the tiers in
// front of the pool once they exist; it never holds the Pool. Every read
// it serves is a direct call (BlockIO::read per page, PageWriter's pin and write paths'
// decode and in-place check, the prefetch thread per block).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "pool/block_view.h"
#include "pool/counters.h"
#include "pool/image.h"
#include "pool/log.h"
#include "pool/packed_image.h"
#include "pool/page_decoder.h"
#include "pool/page_lock.h"

namespace speckv {

class PageCache;       // tiers/page_cache.h (L1)
class PrefetchBuffer;  // tiers/tier_buffers.h (L2)

class PageReader {
  public:
    // Once the image is mapped and validated (Pool::bind_layout).
    void bind(const PoolLayout &L, const PageLocks *locks, const PackedImage *packed, PoolCounters *counters,
              const PoolLog *log) {
        L_ = L;
        locks_ = locks;
        packed_ = packed;
        counters_ = counters;
        log_ = log;
        dec_ = PageDecoder(L.page_size, counters);
    }
    // The tiers in front of the pool, once made: L1 (never null once reads
    // run), L2 (null: no prefetch buffer).
    void set_tiers(PageCache *l1, PrefetchBuffer *l2) {
        l1_ = l1;
        l2_ = l2;
    }
    // The tag L1 and L2 copies of a page carry: its seq and the pool's epoch.
    static uint64_t l2_tag(uint64_t seq, uint64_t epoch) { return seq ^ (epoch << 44); }

    // Bytes [poff, poff+plen) of pool page `page` into dst. *src: 0 = L1,
    // 1 = L2, 2 = the pool (checksummed now). SPECKV_EBUSY when the page
    // became part of a packed image (the caller's view is stale).
    int read_page(uint64_t page, size_t poff, size_t plen, unsigned char *dst, int *src);
    // Bytes [poff, poff+plen) of logical page i of packed block `handle`
    // (view v); *src as read_page's. SPECKV_EBUSY with v.moved() when the
    // block moved.
    int read_packed_page(const BlockView &v, uint64_t handle, uint32_t i, size_t poff, size_t plen, unsigned char *dst,
                         int *src);
    // Checks pool page `page` in place against its CRC32C (a pin's first
    // look at it); *verified_seq: the version checked.
    int verify_page_inplace(uint64_t page, uint64_t *verified_seq = nullptr);
    // A verified copy of a coded page into out (page_size bytes, zero tail).
    int decode_page(uint64_t page, const unsigned char *slot, unsigned char *out) const {
        return dec_.decode_page(page, slot, out);
    }
    // The prefetcher: block `handle`'s pages (view v, in the pool) that are
    // in neither L1 nor L2 into L2, verified and decoded, for `owner` (its
    // request and layer). Returns the pages brought in; *link += the bytes
    // that crossed L3 -> L2. Needs L2.
    uint64_t prefetch_block(const BlockView &v, uint64_t handle, uint64_t owner, uint64_t *link);

  private:
    uint64_t prefetch_pages(const BlockView &v, uint64_t owner, uint64_t *link);
    uint64_t prefetch_packed(const BlockView &v, uint64_t handle, uint64_t owner, uint64_t *link);
    unsigned char *page_data(uint64_t p) const { return L_.data + (p << L_.page_shift); }
    uint64_t epoch() const { return L_.sh->epoch.load(std::memory_order_relaxed); }
    void bump(PoolCounters::Counter c, uint64_t n = 1) { counters_->bump(c, n); }

    PoolLayout L_;
    const PageLocks *locks_ = nullptr;
    const PackedImage *packed_ = nullptr;
    PoolCounters *counters_ = nullptr;
    const PoolLog *log_ = nullptr;
    PageDecoder dec_{0, nullptr};
    PageCache *l1_ = nullptr;
    PrefetchBuffer *l2_ = nullptr;
};

}  // namespace speckv
