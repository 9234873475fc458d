// SPDX-License-Identifier: Apache-2.0
#include "tiers/page_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "util/seqlock.h"
#include "util/status.h"

namespace speckv {

PageCache::PageCache(size_t bytes, uint32_t page_size, bool associative, int admit, uint64_t pool_pages)
    : page_size_(page_size) {
    admit_ = admit;
    size_t n = bytes / page_size;
    if (n == 0) return;
    {
        // One entry per pool page (24 bytes each, 24 MiB of virtual memory
        // per 4 GiB of 4 KiB pages), at most 4 Mi entries.
        const uint64_t want = std::min<uint64_t>(std::max<uint64_t>(n, pool_pages), uint64_t(1) << 22);
        size_t v = 64;
        while (v < want) v <<= 1;
        // calloc: the zeroed table is not touched until used (std::atomic of
        // uint64_t has the integer's representation, as in the pool's own
        // mapped areas).
        ventries_ = static_cast<VEntry *>(std::calloc(v, sizeof(VEntry)));
        if (ventries_) vmask_ = v - 1;
    }
    if (admit_ == 2) {  // twice as many marks as frames: a page's mark outlives a cache's worth of other pages
        size_t g = 4096;
        while (g < 2 * n) g <<= 1;
        ghosts_ = std::make_unique<std::atomic<uint64_t>[]>(g);
        for (size_t i = 0; i < g; i++) ghosts_[i].store(0, std::memory_order_relaxed);
        ghost_mask_ = g - 1;
    }
    if (associative && HotBuffer::create(n * page_size, page_size, &hot_) == SPECKV_OK) {
        hot_->count_lookups(false);  // the pool counts L1 hits per thread
        return;
    }
    clear_error();  // pages over 1 MiB or no memory for the index: direct-mapped frames instead
    hot_.reset();
    while (n & (n - 1)) n &= n - 1;  // a power of two: frame index by mask
    void *p = mmap(nullptr, n * page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return;  // run uncached rather than fail the open
#ifdef MADV_HUGEPAGE
    (void)madvise(p, n * page_size, MADV_HUGEPAGE);  // as the associative frames (tier_buffers.cc map_frames)
#endif
    data_ = static_cast<unsigned char *>(p);
    frames_ = std::make_unique<Frame[]>(n);
    nframes_ = n;
}

PageCache::~PageCache() {
    std::free(ventries_);
    if (data_) munmap(data_, nframes_ * page_size_);
}

void PageCache::store(uint64_t page, uint64_t seq, uint64_t epoch, const void *src, bool consumed, bool demote) {
    if (hot_) {  // as a direct-mapped frame found busy: skip rather than wait
        hot_->try_put(page, tag_of(seq, epoch), src, consumed, demote);
        return;
    }
    if (!nframes_) return;
    size_t i = page & (nframes_ - 1);
    Frame &f = frames_[i];
    uint64_t v = f.version.load(std::memory_order_relaxed);
    if ((v & 1) || !f.version.compare_exchange_strong(v, v + 1, std::memory_order_acquire)) return;
    std::atomic_thread_fence(std::memory_order_release);
    f.page.store(page, std::memory_order_relaxed);
    f.seq.store(seq, std::memory_order_relaxed);
    f.epoch.store(epoch, std::memory_order_relaxed);
    SEQLOCK_IGNORE_BEGIN();
    std::memcpy(data_ + i * page_size_, src, page_size_);
    SEQLOCK_IGNORE_END();
    f.version.store(v + 2, std::memory_order_release);
}

}  // namespace speckv
