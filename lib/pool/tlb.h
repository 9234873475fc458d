// SPDX-License-Identifier: Apache-2.0
// A small software TLB: (tenant, request, layer, token position) -> the page
// (and block handle) that holds it, in front of the slower block-table walk.
//
// 4-way set associative. Each entry is a sequence lock: lookups copy it
// optimistically and never write shared state (their hit/miss counters are
// per-thread shards). Writers lock one entry with a CAS; an insert that finds
// its entry busy just skips (a TLB may forget), an invalidation waits.
//
// The stale-insert race (a miss walks the table, the block is freed and
// invalidated, then the miss inserts what it saw) is closed by a global
// invalidation sequence: translate() reads it before the walk, and insert()
// drops the entry if any invalidation happened since. So after invalidate*()
// returns, no lookup can return the old value.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "util/status.h"

namespace speckv {

struct TlbKey {
    uint32_t tenant;
    uint32_t layer;
    uint64_t request;
    uint64_t token;  // token position; entries cover 2^token_shift positions
};

struct TlbValue {
    uint64_t handle;  // the block
    uint64_t page;    // the page inside the pool (or any second word the caller wants)
};

struct TlbStats {
    uint64_t hits = 0, misses = 0, inserts = 0, insert_skips = 0, invalidations = 0;
    double hit_rate() const { return hits + misses ? double(hits) / double(hits + misses) : 0.0; }
};

class Tlb {
  public:
    // entries: power of two in [64, 2^20] (default 4096); token_shift: log2 of
    // the tokens one entry covers, [0, 20] (a page's worth of tokens).
    static int create(size_t entries, unsigned token_shift, std::unique_ptr<Tlb> *out);
    Tlb(const Tlb &) = delete;
    Tlb &operator=(const Tlb &) = delete;

    // Any thread, concurrently with everything. True and *out on a hit.
    bool lookup(const TlbKey &k, TlbValue *out);
    // lookup(), and on a miss walk(k, &v) -> bool (the slow path); a found
    // value is inserted unless an invalidation raced with the walk.
    template <typename Walk>
    bool translate(const TlbKey &k, TlbValue *out, Walk &&walk);

    // The invalidation sequence to pass to insert() (read it before the walk).
    uint64_t inval_seq() const { return inval_seq_.load(std::memory_order_seq_cst); }
    // Inserts unless an invalidation happened after `seen` or the entry is busy.
    bool insert(const TlbKey &k, const TlbValue &v, uint64_t seen);
    // Removes one key (every entry covering its token position).
    void invalidate(const TlbKey &k);
    // Removes every entry of (tenant, request): call after the request's
    // blocks were freed or moved. O(entries).
    void invalidate_request(uint32_t tenant, uint64_t request);
    // Everything, O(1).
    void invalidate_all();

    TlbStats stats() const;
    size_t entries() const { return nsets_ * kWays; }

  private:
    static constexpr unsigned kWays = 4;
    struct alignas(64) Entry {
        std::atomic<uint64_t> version{0};  // odd while written
        std::atomic<uint64_t> tl{0};       // tenant << 32 | layer
        std::atomic<uint64_t> request{0}, token{0};
        std::atomic<uint64_t> epoch{0};    // 0: empty
        std::atomic<uint64_t> handle{0}, page{0};
    };
    struct alignas(64) Shard {
        std::atomic<uint64_t> hits{0}, misses{0};
    };
    Tlb(size_t nsets, unsigned shift);
    size_t set_of(uint64_t tl, uint64_t request, uint64_t tok) const;
    bool matches(Entry &e, uint64_t tl, uint64_t request, uint64_t tok, uint64_t epoch, TlbValue *out) const;
    uint64_t lock_entry(Entry &e);  // spins; returns the even version it replaced
    void clear_if(Entry &e, uint64_t tl, uint64_t request, uint64_t tok, bool whole_request);

    size_t nsets_;
    unsigned shift_;
    std::unique_ptr<Entry[]> e_;
    std::unique_ptr<std::atomic<uint8_t>[]> victim_;
    std::atomic<uint64_t> epoch_{1};
    std::atomic<uint64_t> inval_seq_{0};
    std::atomic<uint64_t> inserts_{0}, skips_{0}, invals_{0};
    Shard shards_[65];
};

// Inline: the translation fast path.
inline size_t Tlb::set_of(uint64_t tl, uint64_t request, uint64_t tok) const {
    uint64_t h = tl * 0x9E3779B97F4A7C15ull ^ request * 0xC2B2AE3D27D4EB4Full ^ tok * 0x165667B19E3779F9ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return size_t(h) & (nsets_ - 1);
}

inline bool Tlb::matches(Entry &e, uint64_t tl, uint64_t request, uint64_t tok, uint64_t epoch, TlbValue *out) const {
    uint64_t v = e.version.load(std::memory_order_acquire);
    if (v & 1) return false;
    uint64_t etl = e.tl.load(std::memory_order_relaxed), er = e.request.load(std::memory_order_relaxed);
    uint64_t et = e.token.load(std::memory_order_relaxed), ee = e.epoch.load(std::memory_order_relaxed);
    uint64_t h = e.handle.load(std::memory_order_relaxed), p = e.page.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.version.load(std::memory_order_relaxed) != v) return false;  // torn: treat as a miss
    if (etl != tl || er != request || et != tok || ee != epoch) return false;
    out->handle = h;
    out->page = p;
    return true;
}

inline bool Tlb::lookup(const TlbKey &k, TlbValue *out) {
    uint64_t tl = uint64_t(k.tenant) << 32 | k.layer, tok = k.token >> shift_;
    uint64_t epoch = epoch_.load(std::memory_order_acquire);
    Entry *set = &e_[set_of(tl, k.request, tok) * kWays];
    int shard = thread_shard();
    // Shards below 64 have one writer each: a plain add, no locked instruction.
    auto bump = [shard](std::atomic<uint64_t> &c) {
        if (shard < 64) c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        else c.fetch_add(1, std::memory_order_relaxed);
    };
    for (unsigned w = 0; w < kWays; w++)
        if (matches(set[w], tl, k.request, tok, epoch, out)) {
            bump(shards_[shard].hits);
            return true;
        }
    bump(shards_[shard].misses);
    return false;
}

template <typename Walk>
bool Tlb::translate(const TlbKey &k, TlbValue *out, Walk &&walk) {
    if (lookup(k, out)) return true;
    uint64_t seen = inval_seq();
    if (!walk(k, out)) return false;
    insert(k, *out, seen);
    return true;
}

}  // namespace speckv
