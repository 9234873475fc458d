// SPDX-License-Identifier: Apache-2.0
// What the prefetch engine learns from its readers (docs/tiers.md "Stale
// hints", "Shared blocks"), process-local:
//   ReaderClocks: when each unit (tenant, request, layer) was last started,
//     on a clock of unit steps, so a hint for a unit read since is stale;
//     and the span of tokens its latest step read, so a plan fetches what
//     the reader reads of it (docs/tiers.md "Read spans").
//   AliasTable: published blocks of another request that a reader reads,
//     (tenant, reader, layer) -> block, so plans and translation for the
//     reader find them. Hints, re-validated at every use by the caller's
//     check (passed in: the table knows no pool), dropped when stale.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace speckv {

class ReaderClocks {
  public:
    // Counts the unit steps this process's readers started.
    std::atomic<uint64_t> &clock() { return clock_; }
    uint64_t now() const { return clock_.load(std::memory_order_acquire); }
    void mark_started(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t clock);
    // The reader has started the unit since `since` and begun a later step after it.
    bool read_past(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t since) const;
    // The unit's reader reads the blocks that start before token `end`:
    // learnt from its latest step (named = false), or named by a hint's
    // token_count (named = true). A unit with none of its own gets its
    // request's latest span (of any layer).
    void mark_span(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t end, bool named);
    bool span(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t *end, bool *named) const;

  private:
    // A unit, hashed, -> the clock its latest step started at (tag << 48 | clock).
    static constexpr size_t kSlots = 1 << 14;
    std::atomic<uint64_t> clock_{0};
    std::unique_ptr<std::atomic<uint64_t>[]> unit_clock_ = std::make_unique<std::atomic<uint64_t>[]>(kSlots);
    // A unit, hashed (64 bits) -> named << 63 | end. Exact keys, two
    // generations: the current one is moved to the old one when it holds
    // kSpanGen units, so a span survives at least kSpanGen other units'
    // (a slot table like unit_clock_ lost the spans of units that sat out
    // many steps, e.g. in a long prefill, and they were fetched whole).
    static constexpr size_t kSpanGen = 1 << 15;
    void put_span_locked(uint64_t key, uint64_t value);
    mutable std::mutex span_mu_;
    std::unordered_map<uint64_t, uint64_t> span_, span_old_;  // under span_mu_
};

struct Alias {
    uint64_t handle, token_pos, token_count;
};
struct AliasKey {
    uint64_t tenant, request;
    uint32_t layer;
    bool operator==(const AliasKey &o) const { return tenant == o.tenant && request == o.request && layer == o.layer; }
};

class AliasTable {
  public:
    // Whether an alias still names a live block of its key (generation-checked).
    using Valid = std::function<bool(const AliasKey &, const Alias &)>;
    explicit AliasTable(Valid valid) : valid_(std::move(valid)) {}
    static constexpr size_t kMaxAliases = 1 << 16, kMaxAliasesPerUnit = 1024;
    void learn(const AliasKey &k, const Alias *a, size_t n);
    // Live aliases of k (covering pos unless pos == ~0), validated; stale ones are dropped.
    void collect(const AliasKey &k, uint64_t pos, std::vector<Alias> *out);

  private:
    struct KeyHash {
        size_t operator()(const AliasKey &k) const {
            uint64_t h = k.tenant * 0x9E3779B97F4A7C15ull ^ k.request * 0xC2B2AE3D27D4EB4Full ^ k.layer * 0x165667B19E3779F9ull;
            return size_t(h ^ (h >> 29));
        }
    };
    struct Set {
        std::vector<Alias> v;  // by token_pos, at most one per position
        uint64_t stamp = 0;    // clock_ when last learnt or used
    };
    void sweep_locked();
    Valid valid_;
    std::mutex mu_;
    std::unordered_map<AliasKey, Set, KeyHash> sets_;  // under mu_
    size_t count_ = 0;                                 // under mu_
    uint64_t clock_ = 0;                               // under mu_
};

}  // namespace speckv
