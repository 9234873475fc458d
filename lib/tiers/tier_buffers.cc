// SPDX-License-Identifier: Apache-2.0
#include "tiers/tier_buffers.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include "util/seqlock.h"

namespace speckv {

namespace {
constexpr uint64_t kVictimOwner = ~0ull;  // the owner of L1's victims (L2): no request
// L1's hand moves one frame every kL1HandEvery picks: a page read once per
// decode step stays as long as a step stores fewer than frames * 16 pages
// (L1 is small beside a step's pages); L2's moves one frame per pick.
constexpr uint64_t kL1HandEvery = 16;
constexpr uint64_t kL2HandEvery = 1;
// Stored frames looked at (the newest first) for one consumed frame.
constexpr int kConsumedLook = 8;
}  // namespace

// ---- SlotIndex

SlotIndex::SlotIndex(size_t frames) {
    size_t cap = 16;
    while (cap < frames * 2) cap <<= 1;
    mask_ = cap - 1;
    cells_.reset(new Cell[cap]);
}

void SlotIndex::put(uint64_t key, uint32_t frame) {
    size_t slot = ~size_t(0);
    for (size_t i = home(key), n = 0; n <= mask_; i = (i + 1) & mask_, n++) {
        uint64_t k = cells_[i].key.load(std::memory_order_relaxed);
        if (k == key) {
            cells_[i].frame.store(frame, std::memory_order_release);
            return;
        }
        if (k == kTomb && slot == ~size_t(0)) slot = i;
        if (k == kEmpty) {
            if (slot == ~size_t(0)) slot = i;
            break;
        }
    }
    if (cells_[slot].key.load(std::memory_order_relaxed) == kTomb) tombs_--;
    cells_[slot].frame.store(frame, std::memory_order_relaxed);
    cells_[slot].key.store(key, std::memory_order_release);
    live_++;
    if ((live_ + tombs_) * 4 > (mask_ + 1) * 3) rebuild();
}

void SlotIndex::erase(uint64_t key) {
    for (size_t i = home(key), n = 0; n <= mask_; i = (i + 1) & mask_, n++) {
        uint64_t k = cells_[i].key.load(std::memory_order_relaxed);
        if (k == key) {
            cells_[i].key.store(kTomb, std::memory_order_release);
            live_--, tombs_++;
            return;
        }
        if (k == kEmpty) return;
    }
}

// Clears the tombstones. Readers meanwhile may miss (the frame's own tag keeps them correct).
void SlotIndex::rebuild() {
    std::vector<std::pair<uint64_t, uint32_t>> keep;
    for (size_t i = 0; i <= mask_; i++) {
        uint64_t k = cells_[i].key.load(std::memory_order_relaxed);
        if (k != kEmpty && k != kTomb) keep.emplace_back(k, cells_[i].frame.load(std::memory_order_relaxed));
        cells_[i].key.store(kEmpty, std::memory_order_release);
    }
    live_ = tombs_ = 0;
    for (auto [k, f] : keep) put(k, f);
}

namespace {

unsigned char *map_frames(size_t bytes) {
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
    // Transparent huge pages where the kernel grants them on request
    // ("madvise"): the frames are filled by first touches, and one fault per
    // 2 MiB instead of per 4 KiB is most of a cold fill's cost on a guest
    // whose page faults exit to the hypervisor (bench/README.md "Data path").
    (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return static_cast<unsigned char *>(p);
}

int check_geometry(const char *what, size_t bytes, uint32_t page_size, size_t min_frames) {
    if (page_size < 512 || page_size > (1u << 20) || (page_size & (page_size - 1)))
        return fail(SPECKV_EINVAL, "%s: page size %u is not a power of two in [512, 1048576]", what, page_size);
    size_t n = bytes / page_size;
    if (n < min_frames || n > (size_t(1) << 24))
        return fail(SPECKV_EINVAL, "%s: %zu bytes make %zu pages of %u; need [%zu, 16777216]", what, bytes, n, page_size,
                    min_frames);
    return SPECKV_OK;
}


// The one body of HotBuffer::create and PrefetchBuffer::create: checks the
// geometry, maps the frames (a whole multiple of `multiple` of them, at
// least that many) and builds the buffer with make(frames, data); the
// mapping goes again if that fails.
template <typename Buffer, typename Make>
int create_buffer(const char *what, size_t bytes, uint32_t page_size, size_t multiple, Make make,
                  std::unique_ptr<Buffer> *out) {
    if (int rc = check_geometry(what, bytes, page_size, multiple)) return rc;
    const size_t n = bytes / page_size / multiple * multiple;
    unsigned char *data = map_frames(n * page_size);
    if (!data) return fail(SPECKV_ENOMEM, "%s: mapping %zu bytes", what, n * page_size);
    out->reset(make(n, data));
    if (!*out) {
        munmap(data, n * page_size);
        return fail(SPECKV_ENOMEM, "%s", what);
    }
    return SPECKV_OK;
}

}  // namespace

// ---- L1

int HotBuffer::create(size_t bytes, uint32_t page_size, std::unique_ptr<HotBuffer> *out) {
    return create_buffer("L1 hot buffer", bytes, page_size, 1,
                         [&](size_t n, unsigned char *d) { return new (std::nothrow) HotBuffer(n, page_size, d); }, out);
}

HotBuffer::HotBuffer(size_t nframes, uint32_t page_size, unsigned char *data)
    : nframes_(nframes),
      page_size_(page_size),
      page_shift_(unsigned(__builtin_ctz(page_size))),
      data_(data),
      frames_(new Frame[nframes]),
      index_(nframes) {
    free_.reserve(nframes);
    for (size_t i = nframes; i-- > 0;) free_.push_back(uint32_t(i));  // frame 0 first
    // Its whole length (put_locked trims it past 2 * nframes + 16): grown by
    // doubling instead, each step copied the list and faulted fresh pages in
    // under mu_, which made a process's first ~2n writes 1.4x slower.
    stored_.reserve(2 * nframes + 17);
}

HotBuffer::~HotBuffer() { munmap(data_, nframes_ * page_size_); }

bool HotBuffer::pin(uint64_t key, uint64_t tag, Pin *out) {
    int i = index_.find(key);
    if (i < 0) {
        misses_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    Frame &f = frames_[i];
    // Dekker with lock_unpinned(): pins up, then the version; the writer does
    // the opposite. One of the two sees the other.
    f.pins.fetch_add(1, std::memory_order_seq_cst);
    uint64_t v = f.version.load(std::memory_order_seq_cst);
    bool ok = !(v & 1) && f.key.load(std::memory_order_relaxed) == key && f.tag.load(std::memory_order_relaxed) == tag;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (!ok || f.version.load(std::memory_order_relaxed) != v) {
        f.pins.fetch_sub(1, std::memory_order_release);
        misses_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    if (!f.ref.load(std::memory_order_relaxed)) f.ref.store(1, std::memory_order_relaxed);
    hits_.fetch_add(1, std::memory_order_relaxed);
    out->data = data_ + size_t(i) * page_size_;
    out->frame = uint32_t(i);
    return true;
}

void HotBuffer::unpin(const Pin &p) {
    if (p.data) frames_[p.frame].pins.fetch_sub(1, std::memory_order_release);
}

bool HotBuffer::lock_unpinned(Frame &f, uint64_t *v) {
    uint64_t cur = f.version.load(std::memory_order_relaxed);
    if ((cur & 1) || !f.version.compare_exchange_strong(cur, cur + 1, std::memory_order_seq_cst)) return false;
    if (f.pins.load(std::memory_order_seq_cst) != 0) {
        f.version.store(cur + 2, std::memory_order_release);
        return false;
    }
    std::atomic_thread_fence(std::memory_order_release);
    *v = cur;
    return true;
}

// Under mu_: the frame to reuse (the order is in the header), -1 if every
// frame is pinned.
int HotBuffer::pick_victim() {
    while (!free_.empty()) {
        const uint32_t i = free_.back();
        free_.pop_back();
        const Frame &f = frames_[i];
        if (f.key.load(std::memory_order_relaxed) == ~0ull && !f.pins.load(std::memory_order_relaxed)) return int(i);
    }
    if (++picks_ % kL1HandEvery == 0) {
        const size_t i = hand_;
        hand_ = hand_ + 1 == nframes_ ? 0 : hand_ + 1;
        Frame &f = frames_[i];
        if (!f.pins.load(std::memory_order_relaxed)) {
            if (!f.ref.load(std::memory_order_relaxed)) return int(i);  // unread for a sweep
            f.ref.store(0, std::memory_order_relaxed);
        }
    }
    if (int i = pop_consumed(); i >= 0) return i;
    return clock_victim();
}

// The newest consumed frame: stored by a read and not read since, or
// written and read once since. A frame read more than that is hot: it
// leaves the list (CLOCK judges it); one written and not read yet stays.
int HotBuffer::pop_consumed() {
    int looked = 0;
    for (size_t j = stored_.size(); j-- > 0 && looked < kConsumedLook;) {
        const Stored e = stored_[j];
        const Frame &f = frames_[e.frame];
        if (f.version.load(std::memory_order_relaxed) != e.version) {  // rewritten or dropped since
            stored_.erase(stored_.begin() + std::ptrdiff_t(j));
            continue;
        }
        looked++;
        if (f.pins.load(std::memory_order_relaxed)) continue;
        const uint8_t reads = f.ref.load(std::memory_order_relaxed);
        const bool take = e.consumed ? reads == 0 : reads == 1, hot = reads > (e.consumed ? 0 : 1);
        if (take || hot) stored_.erase(stored_.begin() + std::ptrdiff_t(j));
        if (take) return int(e.frame);
    }
    return -1;
}

int HotBuffer::clock_victim() {
    for (size_t step = 0; step < 2 * nframes_ + 1; step++) {
        size_t i = hand_;
        hand_ = hand_ + 1 == nframes_ ? 0 : hand_ + 1;
        Frame &f = frames_[i];
        if (f.pins.load(std::memory_order_relaxed)) continue;
        if (f.ref.load(std::memory_order_relaxed)) {
            f.ref.store(0, std::memory_order_relaxed);
            continue;
        }
        return int(i);
    }
    return -1;
}

bool HotBuffer::put(uint64_t key, uint64_t tag, const void *src, bool consumed, bool demote) {
    if (key > kMaxBufferKey) return false;
    std::lock_guard lk(mu_);
    return put_locked(key, tag, src, consumed, demote);
}

bool HotBuffer::try_put(uint64_t key, uint64_t tag, const void *src, bool consumed, bool demote) {
    if (key > kMaxBufferKey) return false;
    std::unique_lock lk(mu_, std::try_to_lock);
    if (!lk.owns_lock()) {
        busy_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    return put_locked(key, tag, src, consumed, demote);
}

bool HotBuffer::put_locked(uint64_t key, uint64_t tag, const void *src, bool consumed, bool demote) {
    int i = index_.find(key);  // exact under mu_
    uint64_t v;
    if (i >= 0) {
        Frame &f = frames_[i];
        if (f.tag.load(std::memory_order_relaxed) == tag) return true;
        if (!lock_unpinned(f, &v)) {
            // Pinned readers keep the old bytes; the key moves to another frame.
            uint64_t w = f.version.load(std::memory_order_relaxed);
            f.version.store(w + 1, std::memory_order_relaxed);
            std::atomic_thread_fence(std::memory_order_release);
            f.key.store(~0ull, std::memory_order_relaxed);
            f.version.store(w + 2, std::memory_order_release);
            index_.erase(key);
            free_.push_back(uint32_t(i));  // once its readers unpin
            i = -1;
        }
    }
    if (i < 0) {
        for (size_t tries = 0; tries < 4 && i < 0; tries++) {
            int c = pick_victim();
            if (c < 0) break;
            if (lock_unpinned(frames_[c], &v)) i = c;
        }
        if (i < 0) {
            failures_.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
        uint64_t old = frames_[i].key.load(std::memory_order_relaxed);
        if (old != ~0ull) {
            index_.erase(old);
            evictions_.fetch_add(1, std::memory_order_relaxed);
            // The frame is locked: its bytes are the evicted page's until the copy below.
            if (evict_ && frames_[i].demote)
                evict_(evict_user_, old, frames_[i].tag.load(std::memory_order_relaxed), data_ + size_t(i) * page_size_);
        }
    }
    Frame &f = frames_[i];
    f.key.store(key, std::memory_order_relaxed);
    f.tag.store(tag, std::memory_order_relaxed);
    f.ref.store(0, std::memory_order_relaxed);  // a new page must be read to earn its second chance
    f.demote = demote;
    SEQLOCK_IGNORE_BEGIN();
    std::memcpy(data_ + size_t(i) * page_size_, src, page_size_);
    SEQLOCK_IGNORE_END();
    f.version.store(v + 2, std::memory_order_release);
    index_.put(key, uint32_t(i));
    inserts_.fetch_add(1, std::memory_order_relaxed);
    stored_.push_back({uint32_t(i), consumed, v + 2});
    if (stored_.size() > 2 * nframes_ + 16)  // at most one entry per frame is current
        std::erase_if(stored_, [this](const Stored &e) {
            return frames_[e.frame].version.load(std::memory_order_relaxed) != e.version;
        });
    return true;
}

void HotBuffer::invalidate(uint64_t key) {
    // Most freed pages were never here: a lock-free look first (as contains()
    // does) spares a free of N pages N round trips through mu_. A copy put
    // meanwhile is missed, as it would be a moment later: it is only kept
    // until evicted, and its tag never matches a later version of the page.
    if (index_.find(key) < 0) return;
    std::lock_guard lk(mu_);
    int i = index_.find(key);
    if (i < 0) return;
    Frame &f = frames_[i];
    uint64_t w = f.version.load(std::memory_order_relaxed);  // even: only writers (under mu_) make it odd
    f.version.store(w + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    f.key.store(~0ull, std::memory_order_relaxed);
    f.ref.store(0, std::memory_order_relaxed);
    f.version.store(w + 2, std::memory_order_release);
    index_.erase(key);
    free_.push_back(uint32_t(i));
    if (free_.size() > 2 * nframes_)  // a frame refilled since it was listed: drop such entries
        std::erase_if(free_, [this](uint32_t j) { return frames_[j].key.load(std::memory_order_relaxed) != ~0ull; });
}

bool HotBuffer::contains(uint64_t key, uint64_t tag) const {
    int i = index_.find(key);
    if (i < 0) return false;
    const Frame &f = frames_[i];
    uint64_t v = f.version.load(std::memory_order_acquire);
    bool ok = !(v & 1) && f.key.load(std::memory_order_relaxed) == key && f.tag.load(std::memory_order_relaxed) == tag;
    std::atomic_thread_fence(std::memory_order_acquire);
    return ok && f.version.load(std::memory_order_relaxed) == v;
}

BufferStats HotBuffer::stats() const {
    BufferStats s;
    s.hits = hits_.load(std::memory_order_relaxed);
    s.misses = misses_.load(std::memory_order_relaxed);
    s.inserts = inserts_.load(std::memory_order_relaxed);
    s.evictions = evictions_.load(std::memory_order_relaxed);
    s.insert_failures = failures_.load(std::memory_order_relaxed);
    s.busy = busy_.load(std::memory_order_relaxed);
    return s;
}

// ---- L2

int PrefetchBuffer::create(size_t bytes, uint32_t page_size, std::unique_ptr<PrefetchBuffer> *out) {
    return create_buffer("L2 prefetch buffer", bytes, page_size, 2,
                         [&](size_t n, unsigned char *d) { return new (std::nothrow) PrefetchBuffer(n, page_size, d); },
                         out);
}

PrefetchBuffer::PrefetchBuffer(size_t nframes, uint32_t page_size, unsigned char *data)
    : nframes_(nframes), bank_(nframes / 2), page_size_(page_size), data_(data), frames_(new Frame[nframes]),
      gens_(new std::atomic<uint32_t>[4096]), index_(nframes) {
    for (size_t i = 0; i < 4096; i++) gens_[i].store(1, std::memory_order_relaxed);
    size_t ring = 64;
    while (ring < nframes && ring < (size_t(1) << 16)) ring <<= 1;
    ring_.reset(new std::atomic<uint64_t>[ring]);
    for (size_t i = 0; i < ring; i++) ring_[i].store(0, std::memory_order_relaxed);
    ring_mask_ = ring - 1;
    free_.reserve(nframes);
    for (size_t i = nframes; i-- > 0;) free_.push_back(uint32_t(i));  // frame 0 first
}

PrefetchBuffer::~PrefetchBuffer() { munmap(data_, nframes_ * page_size_); }

int PrefetchBuffer::next_frame() {
    if (cursor_ == bank_) {
        fill_bank_ ^= 1;
        cursor_ = 0;
        flips_.fetch_add(1, std::memory_order_relaxed);
    }
    return int(size_t(fill_bank_) * bank_ + cursor_++);
}

// Under mu_: the frame a new entry takes (the order is in the header).
size_t PrefetchBuffer::pick_frame(bool victim) {
    while (!free_.empty()) {
        const size_t i = free_.back();
        free_.pop_back();
        if (frames_[i].key.load(std::memory_order_relaxed) == ~0ull) return i;
    }
    auto idle = [this](Frame &f) {  // nothing read it since the hand's last visit, or it went stale
        return !f.ref.load(std::memory_order_relaxed) ||
               f.gen.load(std::memory_order_relaxed) != generation(f.owner.load(std::memory_order_relaxed));
    };
    if (!victim && ++picks_ % kL2HandEvery == 0) {
        const size_t i = size_t(next_frame());
        if (idle(frames_[i])) return i;
        frames_[i].ref.store(0, std::memory_order_relaxed);
    }
    // The first reads since the last pick, then the newest consumed frame still as it was.
    const uint64_t h = posts_.load(std::memory_order_acquire), ring = ring_mask_ + 1;
    for (uint64_t n = std::max(pulled_, h > ring ? h - ring : 0); n < h; n++)
        if (uint64_t e = ring_[n & ring_mask_].load(std::memory_order_acquire)) consumed_.push_back(e);
    pulled_ = h;
    if (consumed_.size() > 2 * nframes_ + 16) consumed_.erase(consumed_.begin(), consumed_.begin() + std::ptrdiff_t(nframes_));
    while (!consumed_.empty()) {
        const uint64_t e = consumed_.back();
        consumed_.pop_back();
        const size_t i = size_t(e >> 40);
        if (i >= nframes_) continue;
        const Frame &f = frames_[i];
        const uint64_t v = f.version.load(std::memory_order_relaxed);
        if ((v & kVersionMask) == (e & kVersionMask) && f.key.load(std::memory_order_relaxed) != ~0ull &&
            f.state.load(std::memory_order_relaxed) == ((v << 1) | 1))
            return i;
    }
    if (victim) {  // a victim never displaces a prefetch not yet read; a stale one it may (a few looks)
        for (size_t step = 0; step < std::min<size_t>(nframes_, 8); step++) {
            const size_t i = size_t(next_frame());
            const Frame &f = frames_[i];
            if (f.gen.load(std::memory_order_relaxed) != generation(f.owner.load(std::memory_order_relaxed))) return i;
        }
        return SIZE_MAX;
    }
    for (size_t step = 0; step < 2 * nframes_; step++) {  // CLOCK
        const size_t i = size_t(next_frame());
        if (idle(frames_[i])) return i;
        frames_[i].ref.store(0, std::memory_order_relaxed);
    }
    return size_t(next_frame());
}

void PrefetchBuffer::release(size_t i) {
    free_.push_back(uint32_t(i));
    if (free_.size() > 2 * nframes_)  // a frame refilled since it was listed: drop such entries
        std::erase_if(free_, [this](uint32_t j) { return frames_[j].key.load(std::memory_order_relaxed) != ~0ull; });
}

// Under mu_, the frame locked (odd).
void PrefetchBuffer::retire(Frame &f) {
    uint64_t key = f.key.load(std::memory_order_relaxed);
    if (key == ~0ull) return;
    index_.erase(key);
    f.key.store(~0ull, std::memory_order_relaxed);
    evictions_.fetch_add(1, std::memory_order_relaxed);
    uint64_t st = f.state.exchange(0, std::memory_order_acq_rel);
    if (!(st & 1) && f.owner.load(std::memory_order_relaxed) != kVictimOwner) {
        wasted_.fetch_add(1, std::memory_order_relaxed);
        bytes_wasted_.fetch_add(page_size_, std::memory_order_relaxed);
        if (resolve_) resolve_(resolve_user_, f.owner.load(std::memory_order_relaxed), key, false);
    }
}

// Under mu_: finds the frame for a new entry and locks it. False (counted)
// when the entry is dead on arrival or already there.
bool PrefetchBuffer::stage(uint64_t key, uint64_t tag, uint64_t owner, uint32_t gen, Frame **out, size_t *idx,
                           uint64_t *ver, bool victim) {
    auto lock = [](Frame &f) {  // only writers lock, and they hold mu_: the version is even
        uint64_t v = f.version.load(std::memory_order_relaxed);
        f.version.store(v + 1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
        return v;
    };
    if (gen != generation(owner)) {  // invalidated between issue and landing
        wasted_.fetch_add(1, std::memory_order_relaxed);
        bytes_wasted_.fetch_add(page_size_, std::memory_order_relaxed);
        bytes_in_.fetch_add(page_size_, std::memory_order_relaxed);
        inserts_.fetch_add(1, std::memory_order_relaxed);
        if (resolve_) resolve_(resolve_user_, owner, key, false);
        return false;
    }
    int i = index_.find(key);
    if (i >= 0) {
        Frame &f = frames_[i];
        if (f.tag.load(std::memory_order_relaxed) == tag && f.owner.load(std::memory_order_relaxed) == owner &&
            f.gen.load(std::memory_order_relaxed) == gen)
            return false;  // already there: a duplicate hint, not a second prefetch
        uint64_t v = lock(f);
        retire(f);
        f.version.store(v + 2, std::memory_order_release);
        release(size_t(i));
    }
    size_t j = pick_frame(victim);
    if (j == SIZE_MAX) return false;
    Frame &f = frames_[j];
    uint64_t v = lock(f);
    retire(f);
    f.key.store(key, std::memory_order_relaxed);
    f.tag.store(tag, std::memory_order_relaxed);
    f.owner.store(owner, std::memory_order_relaxed);
    f.gen.store(gen, std::memory_order_relaxed);
    f.ref.store(1, std::memory_order_relaxed);  // unread, it survives one visit of the hand
    *out = &f;
    *idx = j;
    *ver = v;
    return true;
}

bool PrefetchBuffer::insert(uint64_t key, uint64_t tag, uint64_t owner, uint32_t gen, const void *src) {
    struct Copy {
        const void *src;
        size_t n;
    } c{src, page_size_};
    return insert_with(
        key, tag, owner, gen,
        [](void *u, void *dst) {
            auto *c = static_cast<Copy *>(u);
            std::memcpy(dst, c->src, c->n);
            return true;
        },
        &c);
}

bool PrefetchBuffer::insert_with(uint64_t key, uint64_t tag, uint64_t owner, uint32_t gen,
                                 bool (*fill)(void *user, void *dst), void *user) {
    if (key > kMaxBufferKey) return false;
    std::lock_guard lk(mu_);
    Frame *f;
    size_t i;
    uint64_t v;
    if (!stage(key, tag, owner, gen, &f, &i, &v)) return false;
    SEQLOCK_IGNORE_BEGIN();
    bool ok = fill(user, data_ + i * page_size_);
    SEQLOCK_IGNORE_END();
    if (!ok) {
        f->key.store(~0ull, std::memory_order_relaxed);
        f->version.store(v + 2, std::memory_order_release);
        failures_.fetch_add(1, std::memory_order_relaxed);
        release(i);
        return false;
    }
    f->state.store((v + 2) << 1, std::memory_order_relaxed);
    f->version.store(v + 2, std::memory_order_release);
    index_.put(key, uint32_t(i));
    inserts_.fetch_add(1, std::memory_order_relaxed);
    bytes_in_.fetch_add(page_size_, std::memory_order_relaxed);
    return true;
}

bool PrefetchBuffer::get(uint64_t key, uint64_t tag, size_t off, size_t len, void *dst, bool *first_read) {
    if (first_read) *first_read = false;
    int i = off <= page_size_ && len <= page_size_ - off ? index_.find(key) : -1;
    if (i >= 0) {
        Frame &f = frames_[i];
        uint64_t v = f.version.load(std::memory_order_acquire);
        uint64_t owner = f.owner.load(std::memory_order_relaxed);
        uint32_t gen = f.gen.load(std::memory_order_relaxed);
        if (!(v & 1) && f.key.load(std::memory_order_relaxed) == key && f.tag.load(std::memory_order_relaxed) == tag) {
            if (gen != generation(owner)) {
                stale_.fetch_add(1, std::memory_order_relaxed);
            } else {
                SEQLOCK_IGNORE_BEGIN();
                std::memcpy(dst, data_ + size_t(i) * page_size_ + off, len);
                SEQLOCK_IGNORE_END();
                std::atomic_thread_fence(std::memory_order_acquire);
                if (f.version.load(std::memory_order_relaxed) == v) {
                    if (!f.ref.load(std::memory_order_relaxed)) f.ref.store(1, std::memory_order_relaxed);
                    uint64_t unread = v << 1;
                    if (f.state.load(std::memory_order_relaxed) == unread &&
                        f.state.compare_exchange_strong(unread, unread | 1, std::memory_order_acq_rel)) {
                        // Consumed: its frame is the next to reuse (pick_frame).
                        const uint64_t n = posts_.fetch_add(1, std::memory_order_relaxed);
                        ring_[n & ring_mask_].store(uint64_t(i) << 40 | (v & kVersionMask), std::memory_order_release);
                        if (owner != kVictimOwner) {  // a prefetch's first read: used
                            used_.fetch_add(1, std::memory_order_relaxed);
                            if (first_read) *first_read = true;
                            if (resolve_) resolve_(resolve_user_, owner, key, true);
                        }
                    }
                    hits_.fetch_add(1, std::memory_order_relaxed);
                    return true;
                }
            }
        }
    }
    misses_.fetch_add(1, std::memory_order_relaxed);
    return false;
}


bool PrefetchBuffer::insert_victim(uint64_t key, uint64_t tag, const void *src) {
    if (key > kMaxBufferKey) return false;
    if (contains(key, tag)) return true;
    std::unique_lock lk(mu_, std::try_to_lock);
    if (!lk.owns_lock()) {
        victims_busy_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    Frame *f;
    size_t i;
    uint64_t v;
    if (!stage(key, tag, kVictimOwner, generation(kVictimOwner), &f, &i, &v, /*victim=*/true)) {
        victims_dropped_.fetch_add(1, std::memory_order_relaxed);  // no free or consumed frame
        return false;
    }
    SEQLOCK_IGNORE_BEGIN();
    std::memcpy(data_ + i * page_size_, src, page_size_);
    SEQLOCK_IGNORE_END();
    f->state.store((v + 2) << 1, std::memory_order_relaxed);  // its first read makes it consumed, not used
    f->version.store(v + 2, std::memory_order_release);
    index_.put(key, uint32_t(i));
    victims_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

void PrefetchBuffer::invalidate(uint64_t key) {
    if (index_.find(key) < 0) return;  // as HotBuffer::invalidate
    std::lock_guard lk(mu_);
    int i = index_.find(key);
    if (i < 0) return;
    Frame &f = frames_[i];
    uint64_t v = f.version.load(std::memory_order_relaxed);
    f.version.store(v + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    retire(f);
    f.version.store(v + 2, std::memory_order_release);
    release(size_t(i));
}

bool PrefetchBuffer::contains(uint64_t key, uint64_t tag) const {
    int i = index_.find(key);
    if (i < 0) return false;
    const Frame &f = frames_[i];
    uint64_t v = f.version.load(std::memory_order_acquire);
    bool ok = !(v & 1) && f.key.load(std::memory_order_relaxed) == key && f.tag.load(std::memory_order_relaxed) == tag &&
              f.gen.load(std::memory_order_relaxed) == generation(f.owner.load(std::memory_order_relaxed));
    std::atomic_thread_fence(std::memory_order_acquire);
    return ok && f.version.load(std::memory_order_relaxed) == v;
}

BufferStats PrefetchBuffer::stats() const {
    BufferStats s;
    s.hits = hits_.load(std::memory_order_relaxed);
    s.misses = misses_.load(std::memory_order_relaxed);
    s.inserts = inserts_.load(std::memory_order_relaxed);
    s.evictions = evictions_.load(std::memory_order_relaxed);
    s.insert_failures = failures_.load(std::memory_order_relaxed);
    s.used = used_.load(std::memory_order_relaxed);
    s.wasted = wasted_.load(std::memory_order_relaxed);
    s.bytes_inserted = bytes_in_.load(std::memory_order_relaxed);
    s.bytes_wasted = bytes_wasted_.load(std::memory_order_relaxed);
    s.stale = stale_.load(std::memory_order_relaxed);
    s.flips = flips_.load(std::memory_order_relaxed);
    s.victims = victims_.load(std::memory_order_relaxed);
    s.victims_busy = victims_busy_.load(std::memory_order_relaxed);
    s.victims_dropped = victims_dropped_.load(std::memory_order_relaxed);
    return s;
}

}  // namespace speckv
