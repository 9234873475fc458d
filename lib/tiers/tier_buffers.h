// SPDX-License-Identifier: Apache-2.0
// L1 hot buffer and L2 prefetch buffer: decoded pages near the consumer.
//
// Both are arrays of page-sized frames, each a sequence lock, found through a
// lock-free open-addressing index (key -> frame). The index is only a hint:
// a reader always checks the frame's own (key, tag) under its sequence lock,
// so a stale or half-rebuilt index can cause a miss, never wrong bytes.
// Readers never block and never write shared state except a frame's read
// mark (set at most twice between two visits of the CLOCK hand) and, on an
// L2 entry's first read, a slot of a ring that tells the writer which frame
// was just consumed. Writers (put, insert, invalidate) serialise on a mutex
// per buffer.
//
// Replacement (both buffers, docs/tiers.md §2): a decode step reads every
// (request, layer) of the batch once, in the same order every step: a cyclic
// scan, longer than the buffer whenever it matters. A recency rule (LRU,
// CLOCK, FIFO) then evicts exactly the pages read next and keeps nothing
// across steps, where MIN keeps a fixed part of the cycle. So a frame to
// reuse is, in order: one that holds nothing; the one the CLOCK hand points
// at if nothing has read it since the hand's last visit (the hand moves one
// frame per pick in L2, per 16 picks in L1, so what is read at least once
// per sweep stays; dead pages age out); the most recently *consumed* frame (L1: stored by a read that
// has its bytes already and not read since, or written and then read once;
// L2: the latest first read), whose next read is a whole step away; and
// failing those, CLOCK.
//
// L1 -> L2: a page stored in L1 with `demote` (the pool: completed by a
// write, so in L1 only) is handed to the evict function when L1 evicts it,
// and the pool moves it into L2 (PrefetchBuffer::insert_victim) rather than
// dropping it.
//
// Keys are 64-bit page ids below kMaxKey; tags are the page's content version
// (a write to the page bumps it), so a rewritten page misses by itself.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "util/seqlock.h"
#include "util/status.h"

namespace speckv {

inline constexpr uint64_t kMaxBufferKey = ~0ull - 2;

// key -> frame. Writers hold the owner's mutex; readers are lock-free.
class SlotIndex {
  public:
    explicit SlotIndex(size_t frames);
    int find(uint64_t key) const;  // -1: absent (or moving during a rebuild)
    void put(uint64_t key, uint32_t frame);
    void erase(uint64_t key);

  private:
    static constexpr uint64_t kEmpty = ~0ull, kTomb = ~0ull - 1;
    struct Cell {
        std::atomic<uint64_t> key{kEmpty};
        std::atomic<uint32_t> frame{0};
    };
    size_t home(uint64_t key) const;
    void rebuild();
    size_t mask_;
    size_t live_ = 0, tombs_ = 0;
    std::unique_ptr<Cell[]> cells_;
};

struct BufferStats {
    uint64_t hits = 0, misses = 0;
    uint64_t inserts = 0, evictions = 0, insert_failures = 0;
    uint64_t busy = 0;  // L1 try_put() calls that found the buffer busy (nothing stored)
    // L2 only (docs/design.md §6): prefetched pages read before eviction (used),
    // pages and bytes prefetched and never read (wasted), lookups that found
    // a lazily invalidated entry (stale), bank flips.
    uint64_t used = 0, wasted = 0, bytes_inserted = 0, bytes_wasted = 0, stale = 0, flips = 0;
    // L2 only: pages L1 evicted that moved down here (insert_victim; not in
    // inserts, used or wasted: nothing crossed the link), those dropped
    // because the buffer was busy, and those dropped for want of a free or
    // consumed frame (a victim never displaces an unread prefetch).
    uint64_t victims = 0, victims_busy = 0, victims_dropped = 0;
    double precision() const { return used + wasted ? double(used) / double(used + wasted) : 0.0; }
};

// The L1 hot buffer: fully associative, CLOCK replacement, zero-copy pins.
class HotBuffer {
  public:
    struct Pin {
        const void *data = nullptr;
        uint32_t frame = 0;
    };
    // bytes / page_size frames. page_size: power of two in [512, 1 MiB];
    // frames: [1, 2^24]. Returns SPECKV_EINVAL out of bounds, SPECKV_ENOMEM.
    static int create(size_t bytes, uint32_t page_size, std::unique_ptr<HotBuffer> *out);
    ~HotBuffer();
    HotBuffer(const HotBuffer &) = delete;
    HotBuffer &operator=(const HotBuffer &) = delete;

    // Any thread. Copies [off, off+len) of the page if (key, tag) is resident.
    bool get(uint64_t key, uint64_t tag, size_t off, size_t len, void *dst);
    // get() for a caller that has checked off + len <= page_size() and
    // counts its own hits (the pool's L1 read path, lib/tiers/page_cache.h).
    // Always inlined, as is SlotIndex::find: called out of line, a hit took
    // 38 instructions more than a direct-mapped one besides the copy, inlined
    // 16 (callgrind, bench/README.md "Per-call latency").
    [[gnu::always_inline]] bool copy_resident(uint64_t key, uint64_t tag, size_t off, size_t len, void *dst);
    // Any thread. A pointer into the frame, stable until unpin(); the frame is
    // not evicted or overwritten meanwhile (a newer tag goes to another frame).
    bool pin(uint64_t key, uint64_t tag, Pin *out);
    void unpin(const Pin &p);
    // Stores a decoded page (page_size bytes). False when every frame is pinned
    // or the key is out of range. Any thread (serialised). `consumed`: the
    // caller has read the page already (a read miss that fills L1); such a
    // frame is the first to go unless it is read again. Otherwise (a write)
    // the frame counts as consumed after its first read. `demote`: when
    // evicted, the page goes to the evict function (set_evict) first.
    bool put(uint64_t key, uint64_t tag, const void *src, bool consumed = false, bool demote = false);
    // put(), unless another thread is storing or invalidating: then nothing
    // is stored (counted in stats().busy) and it returns false at once. For
    // a cache whose reads and writes must never wait on each other (the
    // pool's L1: a skipped insert only costs a later miss).
    bool try_put(uint64_t key, uint64_t tag, const void *src, bool consumed = false, bool demote = false);
    // Forgets the key (any tag). Pinned readers keep their bytes.
    void invalidate(uint64_t key);
    bool contains(uint64_t key, uint64_t tag) const;

    // Called with each page stored with `demote` that is evicted to make
    // room (not one invalidated or rewritten), under the buffer's mutex, the
    // frame locked: `data` is the page's bytes, valid for the call. The pool
    // moves such a page down into L2 (docs/tiers.md §2). Set before use.
    using EvictFn = void (*)(void *user, uint64_t key, uint64_t tag, const void *data);
    void set_evict(EvictFn fn, void *user) { evict_ = fn, evict_user_ = user; }

    BufferStats stats() const;
    size_t frames() const { return nframes_; }
    uint32_t page_size() const { return page_size_; }
    // Off: get() counts no hits or misses (its caller keeps its own counts),
    // so concurrent readers share no written cache line. Set before use.
    void count_lookups(bool on) { count_ = on; }

  private:
    struct alignas(64) Frame {
        std::atomic<uint64_t> version{0};  // odd while written
        std::atomic<uint64_t> key{~0ull}, tag{0};
        std::atomic<uint32_t> pins{0};
        std::atomic<uint8_t> ref{0};  // reads since stored or since the hand's visit, up to 2
        bool demote = false;          // under mu_: stored with `demote`
    };
    // A frame stored, as it was then (under mu_): consumed, or written.
    struct Stored {
        uint32_t frame;
        bool consumed;
        uint64_t version;
    };
    HotBuffer(size_t nframes, uint32_t page_size, unsigned char *data);
    bool lock_unpinned(Frame &f, uint64_t *v);
    int pick_victim();
    int pop_consumed();
    int clock_victim();
    bool put_locked(uint64_t key, uint64_t tag, const void *src, bool consumed, bool demote);

    size_t nframes_;
    uint32_t page_size_;
    unsigned page_shift_;  // log2(page_size_): a frame's bytes by a shift on the hit path
    unsigned char *data_;
    std::unique_ptr<Frame[]> frames_;
    SlotIndex index_;
    std::mutex mu_;
    size_t hand_ = 0;
    uint64_t picks_ = 0;
    std::vector<Stored> stored_;  // oldest first
    std::vector<uint32_t> free_;  // frames holding nothing
    std::atomic<uint64_t> hits_{0}, misses_{0}, inserts_{0}, evictions_{0}, failures_{0}, busy_{0};
    bool count_ = true;
    EvictFn evict_ = nullptr;
    void *evict_user_ = nullptr;
};


// Inline: the L1 read path (lib/tiers/page_cache.h) goes through these.
inline size_t SlotIndex::home(uint64_t key) const {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return size_t(h ^ (h >> 31)) & mask_;
}

[[gnu::always_inline]] inline int SlotIndex::find(uint64_t key) const {
    const Cell *c = cells_.get();  // once: the acquire loads below would make the compiler reload it
    for (size_t i = home(key), n = 0; n <= mask_; i = (i + 1) & mask_, n++) {
        uint64_t k = c[i].key.load(std::memory_order_acquire);
        if (k == key) return int(c[i].frame.load(std::memory_order_relaxed));
        if (k == kEmpty) return -1;
    }
    return -1;
}

inline bool HotBuffer::copy_resident(uint64_t key, uint64_t tag, size_t off, size_t len, void *dst) {
    const int i = index_.find(key);
    if (i < 0) return false;
    Frame &f = frames_[i];
    uint64_t v = f.version.load(std::memory_order_acquire);
    if ((v & 1) || f.key.load(std::memory_order_relaxed) != key || f.tag.load(std::memory_order_relaxed) != tag)
        return false;
    SEQLOCK_IGNORE_BEGIN();
    std::memcpy(dst, data_ + (size_t(i) << page_shift_) + off, len);
    SEQLOCK_IGNORE_END();
    std::atomic_thread_fence(std::memory_order_acquire);
    if (f.version.load(std::memory_order_relaxed) != v) return false;  // refilled meanwhile: a miss
    if (uint8_t r = f.ref.load(std::memory_order_relaxed); r < 2) f.ref.store(uint8_t(r + 1), std::memory_order_relaxed);
    return true;
}

inline bool HotBuffer::get(uint64_t key, uint64_t tag, size_t off, size_t len, void *dst) {
    const bool hit = off <= page_size_ && len <= page_size_ - off && copy_resident(key, tag, off, len, dst);
    if (count_) (hit ? hits_ : misses_).fetch_add(1, std::memory_order_relaxed);
    return hit;
}

// Called once per prefetched page when its fate is known: used (first read)
// or wasted (evicted, overwritten or invalidated without a read).
using PrefetchResolveFn = void (*)(void *user, uint64_t owner, uint64_t key, bool used);

// The L2 prefetch buffer. Frames are reused as the header says: empty ones,
// the hand's if unread since its last visit (the hand walks the frames bank
// by bank, two banks, counted in stats().flips), the latest consumed (first
// read), else CLOCK. A prefetched page not read yet is never taken as
// consumed: it survives at least one sweep of the hand.
// Wrong prefetches are invalidated lazily: each entry carries its owner
// request's generation; invalidate_request() bumps the generation (O(1)) and
// the entries simply stop matching, counted as wasted when their frame is reused.
class PrefetchBuffer {
  public:
    // bytes / page_size frames, at least 2, split into two banks.
    static int create(size_t bytes, uint32_t page_size, std::unique_ptr<PrefetchBuffer> *out);
    ~PrefetchBuffer();
    PrefetchBuffer(const PrefetchBuffer &) = delete;
    PrefetchBuffer &operator=(const PrefetchBuffer &) = delete;

    // Set before use (not thread-safe against concurrent inserts).
    void set_resolve(PrefetchResolveFn fn, void *user) { resolve_ = fn, resolve_user_ = user; }

    // The owner's current generation, read when the prefetch is issued.
    uint32_t generation(uint64_t owner) const { return gens_[gen_slot(owner)].load(std::memory_order_acquire); }
    // Every entry of the owner issued before now stops matching. Any thread, O(1).
    // (Owners share 4096 generation slots: a collision only costs misses.)
    void invalidate_request(uint64_t owner) { gens_[gen_slot(owner)].fetch_add(1, std::memory_order_acq_rel); }

    // Lands a prefetched page. Dead on arrival (generation moved since
    // issue) or key out of range: not stored, counted wasted, false.
    bool insert(uint64_t key, uint64_t tag, uint64_t owner, uint32_t gen, const void *src);
    // The same, the page decoded straight into the frame by fill(user, dst)
    // (returns false to abandon: nothing stored, nothing counted).
    bool insert_with(uint64_t key, uint64_t tag, uint64_t owner, uint32_t gen, bool (*fill)(void *user, void *dst),
                     void *user);
    // Any thread. Copies [off, off+len) on a hit; the first read of an entry
    // resolves it as used (*first_read = true).
    bool get(uint64_t key, uint64_t tag, size_t off, size_t len, void *dst, bool *first_read = nullptr);
    // A page L1 evicted (HotBuffer::set_evict), moved down instead of
    // dropped so that its next read is an L2 hit, not a link transfer. It
    // takes a free or consumed frame only (never an unread prefetch: dropped,
    // stats().victims_dropped, when there is none), belongs to no request (no owner's
    // invalidation reaches it; a freed or rewritten page is invalidated by
    // key or misses by tag) and is no prefetch: never counted used or wasted.
    // Already there with this tag: nothing to do. Never waits: another
    // thread inserting means the page is dropped (stats().victims_busy).
    bool insert_victim(uint64_t key, uint64_t tag, const void *src);
    // Drops one page (e.g. freed or rewritten): wasted if unread.
    void invalidate(uint64_t key);
    bool contains(uint64_t key, uint64_t tag) const;

    BufferStats stats() const;
    size_t frames() const { return nframes_; }
    uint32_t page_size() const { return page_size_; }

  private:
    struct alignas(64) Frame {
        std::atomic<uint64_t> version{0};
        std::atomic<uint64_t> key{~0ull}, tag{0}, owner{0};
        std::atomic<uint32_t> gen{0};
        // (version the entry was published under) << 1 | read. A reader claims
        // the first read with a CAS on the version it validated, the writer
        // resolves an entry it retires with an exchange: exactly one of them
        // wins, so used + wasted == inserted.
        std::atomic<uint64_t> state{0};
        std::atomic<uint8_t> ref{0};  // read (or stored) since the hand's last visit
    };
    static size_t gen_slot(uint64_t owner) { return (owner * 0x9E3779B97F4A7C15ull) >> 52; }
    static constexpr uint64_t kVersionMask = (uint64_t(1) << 40) - 1;
    PrefetchBuffer(size_t nframes, uint32_t page_size, unsigned char *data);
    int next_frame();          // the hand's next frame, flipping banks at a bank's end
    // The frame a new entry takes (under mu_). For an L1 victim (`victim`):
    // only a free or a consumed frame, never an unread prefetch; SIZE_MAX if none.
    size_t pick_frame(bool victim = false);
    void retire(Frame &f);     // resolves the frame's current entry before reuse
    void release(size_t i);    // the frame holds nothing now: first to be reused
    bool stage(uint64_t key, uint64_t tag, uint64_t owner, uint32_t gen, Frame **f, size_t *i, uint64_t *v,
               bool victim = false);

    size_t nframes_, bank_;
    uint32_t page_size_;
    unsigned char *data_;
    std::unique_ptr<Frame[]> frames_;
    std::unique_ptr<std::atomic<uint32_t>[]> gens_;
    SlotIndex index_;
    std::mutex mu_;
    int fill_bank_ = 0;
    size_t cursor_ = 0;
    uint64_t picks_ = 0;
    // First reads: a reader that claims one stores (frame << 40 | version)
    // at ring_[its posts_ count]; the writer pulls them into consumed_.
    std::unique_ptr<std::atomic<uint64_t>[]> ring_;
    size_t ring_mask_ = 0;
    uint64_t pulled_ = 0;
    std::vector<uint64_t> consumed_;  // under mu_, oldest first
    std::vector<uint32_t> free_;      // under mu_
    PrefetchResolveFn resolve_ = nullptr;
    void *resolve_user_ = nullptr;
    std::atomic<uint64_t> hits_{0}, misses_{0}, inserts_{0}, evictions_{0}, failures_{0};
    std::atomic<uint64_t> used_{0}, wasted_{0}, bytes_in_{0}, bytes_wasted_{0}, stale_{0}, flips_{0};
    std::atomic<uint64_t> victims_{0}, victims_busy_{0}, victims_dropped_{0};
    std::atomic<uint64_t> posts_{0};  // first reads posted to ring_ (prefetched pages and victims)
};

}  // namespace speckv
