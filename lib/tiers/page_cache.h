// SPDX-License-Identifier: Apache-2.0
// A per-process cache of pages already read from the pool and verified
// against their CRC32C. A hit is served without touching the pool or
// recomputing the checksum. Entries are tagged (page, seq, epoch): any write
// to the page (seq grows) or recovery/reset of the pool (epoch grows) makes
// them miss. With `associative` (config cache.associative, the default) the
// frames are the tier manager's fully associative HotBuffer (any page in any
// frame, scan-resistant eviction, docs/tiers.md §2): no conflict misses, a hash probe
// more per hit, inserts serialised by its mutex. Without, direct-mapped: each
// frame is a sequence lock, readers copy optimistically and never write
// shared state, a writer that finds the frame busy skips the insert (a busy
// frame is a miss, never a wait).
//
// Admission (config cache.admit, issue 27): which pages enter the cache at
// all. A copy into the cache costs as much as the copy the caller asked for,
// so data this process touches once should not pay it.
//   0  every page written or read by this process (the behaviour before)
//   1  pages read (a miss), never pages written
//   2  on the second touch (the default): a write or a read miss of an
//      unmarked page only marks it in a small table of page numbers; a write
//      or a read miss of a marked page stores it. A page written once is never
//      copied; a page written then read enters on that read; a page written
//      again and again (the tail page of a growing KV block, read after each
//      append) is stored by every write after the first, as before.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "util/seqlock.h"
#include "tiers/tier_buffers.h"

namespace speckv {

class PageCache {
  public:
    // pool_pages: the pool's data pages (the table of pages checked in
    // place covers them all, up to 4 Mi entries).
    PageCache(size_t bytes, uint32_t page_size, bool associative = false, int admit = 0, uint64_t pool_pages = 0);
    ~PageCache();
    PageCache(const PageCache &) = delete;
    PageCache &operator=(const PageCache &) = delete;

    bool enabled() const { return nframes_ != 0 || hot_; }
    bool associative() const { return hot_ != nullptr; }
    // Copies bytes [off, off+len) of the page into dst if the frame holds
    // exactly (page, seq, epoch).
    bool get(uint64_t page, uint64_t seq, uint64_t epoch, size_t off, size_t len, void *dst);
    // Stores a verified copy of a whole page (no admission check) that a
    // read has just consumed (the associative L1 reuses such a frame first
    // unless it is read again: tier_buffers.h).
    void put(uint64_t page, uint64_t seq, uint64_t epoch, const void *src) { store(page, seq, epoch, src, true); }
    // This process wrote the page (version seq): stored or only marked, per
    // the admission policy. `complete`: the write reached the page's end (an
    // appended page is full, not rewritten by the next token): evicted, it
    // goes to the evict function (set_evict).
    void put_written(uint64_t page, uint64_t seq, uint64_t epoch, const void *src, bool complete = false) {
        if (admit_ == 0 || (admit_ == 2 && admit_read(page))) store(page, seq, epoch, src, false, complete);
    }
    // A read missed the page: whether its verified copy should be put() (the
    // admission policy; a first touch under policy 2 is marked and refused).
    bool admit_read(uint64_t page) {
        if (!enabled()) return false;
        if (admit_ != 2) return true;
        std::atomic<uint64_t> &g = ghosts_[ghost_slot(page)];
        if (g.load(std::memory_order_relaxed) == page + 1) return true;
        g.store(page + 1, std::memory_order_relaxed);
        return false;
    }
    int admit() const { return admit_; }
    // Each complete written page (put_written) the associative frames evict
    // goes to fn(user, page, tag, bytes) (HotBuffer::set_evict; the tag is tag_of(seq, epoch), the pool's
    // L2 tag). Direct-mapped frames report nothing. Set before use.
    void set_evict(HotBuffer::EvictFn fn, void *user) {
        if (hot_) hot_->set_evict(fn, user);
    }
    // The page was freed: a copy of it can never be read again, its frame is
    // the first to reuse (associative frames; direct-mapped ones are left).
    void forget(uint64_t page) {
        if (hot_) hot_->invalidate(page);
    }
    // Pages this process checksummed in place (a pin of a page that is not
    // held here): the next pin of the same version trusts that check as it
    // trusts a held copy, so a warm pin costs no pass over the page. A
    // direct-mapped table of (page, tag, check word): entries are written
    // without a lock, and a torn one (fields of two writes) fails the check
    // word, so it never vouches for a page. Off with the cache (cache.bytes = 0).
    bool verified(uint64_t page, uint64_t seq, uint64_t epoch) const {
        if (!vmask_) return false;
        const VEntry &e = ventries_[page & vmask_];
        const uint64_t c = e.chk.load(std::memory_order_acquire);
        const uint64_t p = e.page.load(std::memory_order_relaxed), t = e.tag.load(std::memory_order_relaxed);
        return p == page && t == tag_of(seq, epoch) && c == vcheck(p, t);
    }
    void note_verified(uint64_t page, uint64_t seq, uint64_t epoch) {
        if (!vmask_) return;
        VEntry &e = ventries_[page & vmask_];
        const uint64_t t = tag_of(seq, epoch);
        e.page.store(page, std::memory_order_relaxed);
        e.tag.store(t, std::memory_order_relaxed);
        e.chk.store(vcheck(page, t), std::memory_order_release);
    }
    // Whether the frame holds exactly (page, seq, epoch) now (a hint: it may change).
    bool contains(uint64_t page, uint64_t seq, uint64_t epoch) const {
        if (hot_) return hot_->contains(page, tag_of(seq, epoch));
        if (!nframes_) return false;
        const Frame &f = frames_[page & (nframes_ - 1)];
        uint64_t v = f.version.load(std::memory_order_acquire);
        return v && !(v & 1) && f.page.load(std::memory_order_relaxed) == page &&
               f.seq.load(std::memory_order_relaxed) == seq && f.epoch.load(std::memory_order_relaxed) == epoch;
    }

  private:
    struct VEntry {
        std::atomic<uint64_t> page, tag, chk;
    };
    static uint64_t vcheck(uint64_t page, uint64_t tag) {
        uint64_t x = page * 0x9E3779B97F4A7C15ull ^ (tag + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull;
        x ^= x >> 31;
        x *= 0x94D049BB133111EBull;
        return (x ^ (x >> 29)) | 1;  // never 0: an entry never written never matches
    }
    VEntry *ventries_ = nullptr;  // calloc'd: zero pages until first written
    size_t vmask_ = 0;
    struct Frame {
        std::atomic<uint64_t> version{0};  // odd while being filled; 0 = never filled
        std::atomic<uint64_t> page{0}, seq{0}, epoch{0};
    };
    static uint64_t tag_of(uint64_t seq, uint64_t epoch) { return seq ^ (epoch << 44); }
    void store(uint64_t page, uint64_t seq, uint64_t epoch, const void *src, bool consumed, bool demote = false);
    size_t ghost_slot(uint64_t page) const {
        uint64_t h = page * 0x9E3779B97F4A7C15ull;
        return size_t(h >> 20) & ghost_mask_;
    }
    void mark(uint64_t page) {
        if (ghost_mask_) ghosts_[ghost_slot(page)].store(page + 1, std::memory_order_relaxed);
    }
    int admit_ = 0;
    // Policy 2: page + 1 of a recent touch per slot (0 = none); races between
    // threads only lose a mark (one more miss later).
    std::unique_ptr<std::atomic<uint64_t>[]> ghosts_;
    size_t ghost_mask_ = 0;
    uint32_t page_size_;
    std::unique_ptr<HotBuffer> hot_;  // associative: the frames live here instead
    size_t nframes_ = 0;
    std::unique_ptr<Frame[]> frames_;
    unsigned char *data_ = nullptr;
};

// Inline: this is the resident-read fast path.
[[gnu::always_inline]] inline bool PageCache::get(uint64_t page, uint64_t seq, uint64_t epoch, size_t off, size_t len,
                                                void *dst) {
    if (hot_) return hot_->copy_resident(page, tag_of(seq, epoch), off, len, dst);  // the pool checked the range
    if (!nframes_) return false;
    size_t i = page & (nframes_ - 1);
    Frame &f = frames_[i];
    uint64_t v = f.version.load(std::memory_order_acquire);
    if (v == 0 || (v & 1)) return false;
    if (f.page.load(std::memory_order_relaxed) != page || f.seq.load(std::memory_order_relaxed) != seq ||
        f.epoch.load(std::memory_order_relaxed) != epoch)
        return false;
    SEQLOCK_IGNORE_BEGIN();
    std::memcpy(dst, data_ + i * page_size_ + off, len);
    SEQLOCK_IGNORE_END();
    std::atomic_thread_fence(std::memory_order_acquire);
    return f.version.load(std::memory_order_relaxed) == v;  // refilled meanwhile: a miss
}

}  // namespace speckv
