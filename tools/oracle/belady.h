// SPDX-License-Identifier: Apache-2.0
// Belady (MIN) references for the tier buffers, computed from a recorded
// sequence of page reads and writes (docs/tiers.md §11).
//
// docs/design.md §6 asks for every hit rate to be reported beside two references
// at the same capacity: no prefetch, and an oracle that knows the future
// (Belady for eviction, perfect next access for prefetch). This file holds
// the offline half: given the page events of a run, in order,
//   belady()       the most reads a cache of C frames can serve (MIN: evict
//                  the page whose next read is furthest away), with or
//                  without bypass (leaving a page out of the cache);
//   lru()          the same cache under LRU, the usual yardstick;
//   full_oracle()  L1 + L2 of the run's sizes with Belady eviction and every
//                  page that L1 does not hold prefetched just in time: the
//                  L1 hits no policy can exceed, and the fewest pages any
//                  policy must move over the L3 -> L2 link.
// A write is a page's new version arriving for free (the pool's write puts
// it into L1): the copies of the old version can never be read again.
// Header-only; used by examples/tinyllm, bench/bench_tiers (through
// tests/tiers/decode_sim.h) and tested in tests/tiers/test_belady.cc.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace speckv::oracle {

inline constexpr uint64_t kNever = ~uint64_t(0);  // "no later read"

struct Event {
    uint64_t page;  // any 64-bit page id
    bool write;     // false: a read
};

// What a run did, in order. One event per page touched (a read of bytes in
// two pages is two reads).
class Trace {
  public:
    void read(uint64_t page) { ev_.push_back({page, false}), reads_++; }
    void write(uint64_t page) { ev_.push_back({page, true}); }
    const std::vector<Event> &events() const { return ev_; }
    uint64_t reads() const { return reads_; }
    uint64_t writes() const { return ev_.size() - reads_; }

  private:
    std::vector<Event> ev_;
    uint64_t reads_ = 0;
};

// For each event, the index of the next read of the same version of its
// page, or kNever. A write starts a new version: reads before it never see
// what it wrote, reads after it never see what was there before.
inline std::vector<uint64_t> next_reads(const std::vector<Event> &ev) {
    std::vector<uint64_t> next(ev.size(), kNever);
    std::unordered_map<uint64_t, uint64_t> later;  // page -> next read of its current version
    later.reserve(ev.size() / 4 + 16);
    for (size_t i = ev.size(); i-- > 0;) {
        auto [it, fresh] = later.try_emplace(ev[i].page, kNever);
        next[i] = it->second;
        it->second = ev[i].write ? kNever : uint64_t(i);
    }
    return next;
}

struct CacheResult {
    uint64_t reads = 0, hits = 0;
    uint64_t misses() const { return reads - hits; }
    double hit_rate() const { return reads ? double(hits) / double(reads) : 0.0; }
};

// MIN, one event at a time, so that callers can look at the cache between
// events (the inclusion test does). Capacity in frames (0: nothing cached).
// With `bypass`, a page that would be the first to go is not stored at all
// (a read copies it to the caller either way); without, every page read or
// written takes a frame, as in the textbook version (demand paging).
class Belady {
  public:
    Belady(size_t capacity, bool bypass) : cap_(capacity), bypass_(bypass) {}

    // Event `ev` whose next read is `next` (from next_reads). True on a read
    // served from the cache.
    bool step(const Event &ev, uint64_t next) {
        auto it = where_.find(ev.page);
        if (it != where_.end()) {
            // A hit, or a write over the old version: same frame, new next read.
            by_next_.erase({it->second, ev.page});
            it->second = next;
            by_next_.insert({next, ev.page});
            return !ev.write;
        }
        if (cap_ == 0) return false;
        if (where_.size() == cap_) {
            auto far = std::prev(by_next_.end());  // furthest next read (kNever first to go)
            // Ties keep what is there: a page read never again is never stored.
            if (bypass_ && next >= far->first) return false;
            where_.erase(far->second);
            by_next_.erase(far);
        }
        where_.emplace(ev.page, next);
        by_next_.insert({next, ev.page});
        return false;
    }
    bool contains(uint64_t page) const { return where_.count(page) != 0; }
    size_t size() const { return where_.size(); }

  private:
    size_t cap_;
    bool bypass_;
    std::unordered_map<uint64_t, uint64_t> where_;   // page -> next read
    std::set<std::pair<uint64_t, uint64_t>> by_next_; // (next read, page)
};

inline CacheResult belady(const std::vector<Event> &ev, const std::vector<uint64_t> &next, size_t capacity,
                          bool bypass = true) {
    CacheResult r;
    Belady b(capacity, bypass);
    for (size_t i = 0; i < ev.size(); i++) {
        bool hit = b.step(ev[i], next[i]);
        if (!ev[i].write) r.reads++, r.hits += hit;
    }
    return r;
}

inline CacheResult belady(const std::vector<Event> &ev, size_t capacity, bool bypass = true) {
    return belady(ev, next_reads(ev), capacity, bypass);
}

// LRU over the same events: a read or a write makes the page most recent.
inline CacheResult lru(const std::vector<Event> &ev, size_t capacity) {
    CacheResult r;
    std::list<uint64_t> order;  // most recent first
    std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
    for (const Event &e : ev) {
        if (!e.write) r.reads++;
        auto it = where.find(e.page);
        if (it != where.end()) {
            r.hits += !e.write;
            order.splice(order.begin(), order, it->second);
            continue;
        }
        if (capacity == 0) continue;
        if (where.size() == capacity) {
            where.erase(order.back());
            order.pop_back();
        }
        order.push_front(e.page);
        where[e.page] = order.begin();
    }
    return r;
}

// The oracle of docs/design.md §6 at the run's sizes (docs/tiers.md §11 defines
// what it may know and do). It knows every future event; L1 keeps what MIN
// keeps in l1 frames; L2 holds, besides, what MIN keeps in l1 + l2 frames
// (MIN is a stack algorithm: the smaller cache's pages are always among the
// larger one's, so the two fit at once, tested); every other page a read
// needs is prefetched into L2 just before the read. So every read that
// misses L1 is an L2 hit (hit rate 1), every prefetched page is read
// (precision 1, no waste), and the pages it moves over the link are MIN's
// misses at l1 + l2 frames: no policy, prefetching or not, moves fewer with
// buffers of these sizes.
struct OracleResult {
    uint64_t reads = 0, writes = 0;
    uint64_t l1_hits = 0;      // MIN at l1 frames: no L1 policy serves more
    uint64_t l2_kept = 0;      // L2 hits on pages L2 still held (no transfer)
    uint64_t prefetched = 0;   // L2 hits on pages prefetched for the read: the link pages
    uint64_t l2_hits() const { return l2_kept + prefetched; }
    uint64_t sync_reads() const { return 0; }
    double hit_rate() const { return reads > l1_hits ? double(l2_hits()) / double(reads - l1_hits) : 0.0; }
    double precision() const { return prefetched ? 1.0 : 0.0; }
    double waste() const { return 0.0; }
};

inline OracleResult full_oracle(const std::vector<Event> &ev, size_t l1_frames, size_t l2_frames) {
    std::vector<uint64_t> next = next_reads(ev);
    CacheResult one = belady(ev, next, l1_frames), both = belady(ev, next, l1_frames + l2_frames);
    OracleResult o;
    o.reads = one.reads;
    o.writes = ev.size() - one.reads;
    o.l1_hits = one.hits;
    o.l2_kept = both.hits - one.hits;
    o.prefetched = both.misses();
    return o;
}

}  // namespace speckv::oracle
