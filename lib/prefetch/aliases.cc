// SPDX-License-Identifier: Apache-2.0
// Reader progress and shared-block aliases of the prefetch engine
// (prefetch/aliases.h, docs/tiers.md).
#include "prefetch/aliases.h"

#include <algorithm>
#include <iterator>

namespace speckv {

// ------------------------------------------------ reader progress
//
// The prefetch thread may fall behind its readers (an engine that does not
// wait for it): then the hints it takes from its queue name units that have
// been read already, and fetching them is pure waste that makes it fall
// further behind. Readers record when they start each unit (PrefetchEngine::note_access);
// a hint whose named unit, or a planned unit, was started after the hint was
// given and is finished (a later step has started) is stale: skipped and
// counted. A prefetch is never needed for correct bytes, so a wrong verdict
// (a hash collision in the table, several reader threads) costs hits, not
// correctness.

namespace {
uint64_t unit_hash(uint64_t tenant, uint64_t request, uint32_t layer) {
    uint64_t k = tenant * 0xD6E8FEB86659FD93ull ^ request * 0x9E3779B97F4A7C15ull ^
                 (uint64_t(layer) + 1) * 0xC2B2AE3D27D4EB4Full;
    k ^= k >> 32;
    k *= 0xD6E8FEB86659FD93ull;
    k ^= k >> 32;
    return k;
}
constexpr uint64_t kClockMask = (1ull << 48) - 1;
}  // namespace

void ReaderClocks::mark_started(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t clock) {
    uint64_t k = unit_hash(tenant, request, layer);
    unit_clock_[k & (kSlots - 1)].store((k >> 48) << 48 | (clock & kClockMask), std::memory_order_release);
}

bool ReaderClocks::read_past(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t since) const {
    uint64_t k = unit_hash(tenant, request, layer);
    uint64_t e = unit_clock_[k & (kSlots - 1)].load(std::memory_order_acquire);
    if (e >> 48 != k >> 48) return false;  // never started here, or its slot was taken by another unit
    uint64_t started = e & kClockMask;
    return started > (since & kClockMask) && (clock_.load(std::memory_order_acquire) & kClockMask) > started;
}

namespace {
// The request's own entry: its latest span at any layer.
uint64_t request_key(uint64_t tenant, uint64_t request) { return unit_hash(tenant, request, 0) ^ 0x8E1A6C3B5F27D94Dull; }
}  // namespace

void ReaderClocks::put_span_locked(uint64_t k, uint64_t v) {
    auto [it, fresh] = span_.try_emplace(k, v);
    if (!fresh) {
        it->second = v;
        return;
    }
    span_old_.erase(k);
    if (span_.size() >= kSpanGen) span_old_ = std::move(span_), span_.clear();
}

void ReaderClocks::mark_span(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t end, bool named) {
    const uint64_t v = uint64_t(named) << 63 | std::min<uint64_t>(end, (1ull << 63) - 1);
    std::lock_guard g(span_mu_);
    put_span_locked(unit_hash(tenant, request, layer), v);
    put_span_locked(request_key(tenant, request), v);
}

bool ReaderClocks::span(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t *end, bool *named) const {
    std::lock_guard g(span_mu_);
    auto find = [&](uint64_t k, uint64_t *v) {
        auto it = span_.find(k);
        if (it == span_.end() && (it = span_old_.find(k)) == span_old_.end()) return false;
        *v = it->second;
        return true;
    };
    // A unit not read or described yet takes its request's latest span: a
    // request's layers hold the same tokens, and an engine keeps the same
    // ones of each in HBM.
    uint64_t v = 0;
    if (!find(unit_hash(tenant, request, layer), &v) && !find(request_key(tenant, request), &v)) return false;
    *end = v & ((1ull << 63) - 1);
    *named = v >> 63;
    return true;
}

// ------------------------------------------------ aliases

void AliasTable::learn(const AliasKey &k, const Alias *a, size_t n) {
    std::lock_guard g(mu_);
    Set &set = sets_[k];
    set.stamp = ++clock_;
    for (size_t i = 0; i < n; i++) {
        auto it = std::lower_bound(set.v.begin(), set.v.end(), a[i].token_pos,
                                   [](const Alias &x, uint64_t pos) { return x.token_pos < pos; });
        if (it != set.v.end() && it->token_pos == a[i].token_pos) {
            *it = a[i];  // the reader now reads another block at that position
        } else if (set.v.size() < kMaxAliasesPerUnit) {
            set.v.insert(it, a[i]);
            count_++;
        }
    }
    if (count_ > kMaxAliases) sweep_locked();
}

// Drops every stale alias, then, if still over half the bound, the units
// learnt or used least recently: amortised O(1) per alias learnt.
void AliasTable::sweep_locked() {
    for (auto it = sets_.begin(); it != sets_.end();) {
        auto &v = it->second.v;
        size_t before = v.size();
        std::erase_if(v, [&](const Alias &a) { return !valid_(it->first, a); });
        count_ -= before - v.size();
        it = v.empty() ? sets_.erase(it) : std::next(it);
    }
    if (count_ <= kMaxAliases / 2) return;
    std::vector<std::pair<uint64_t, AliasKey>> order;
    order.reserve(sets_.size());
    for (auto &[k, set] : sets_) order.emplace_back(set.stamp, k);
    std::sort(order.begin(), order.end(), [](const auto &x, const auto &y) { return x.first < y.first; });
    for (auto &[stamp, k] : order) {
        if (count_ <= kMaxAliases / 2) break;
        auto it = sets_.find(k);
        count_ -= it->second.v.size();
        sets_.erase(it);
    }
}

void AliasTable::collect(const AliasKey &k, uint64_t pos, std::vector<Alias> *out) {
    out->clear();
    std::lock_guard g(mu_);
    if (sets_.empty()) return;
    auto it = sets_.find(k);
    if (it == sets_.end()) return;
    Set &set = it->second;
    set.stamp = ++clock_;
    for (size_t i = 0; i < set.v.size();) {
        const Alias &a = set.v[i];
        if (pos != ~0ull && !(pos >= a.token_pos && pos - a.token_pos < a.token_count)) {
            i++;
            continue;
        }
        if (!valid_(k, a)) {  // never hand out a freed or reused block; forget it
            set.v.erase(set.v.begin() + ptrdiff_t(i));
            count_--;
            continue;
        }
        out->push_back(a);
        i++;
        if (pos != ~0ull) break;
    }
    if (set.v.empty()) sets_.erase(it);
}

}  // namespace speckv
