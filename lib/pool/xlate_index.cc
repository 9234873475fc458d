// SPDX-License-Identifier: Apache-2.0
// The translation index (pool/xlate_index.h).
#include "pool/xlate_index.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>

#include "util/seqlock.h"

namespace speckv {

using namespace fmt;

uint64_t XlateIndex::bucket(uint64_t tenant, uint64_t request, uint32_t layer) const {
    uint64_t k = tenant * 0x9E3779B97F4A7C15ull ^ request * 0xC2B2AE3D27D4EB4Full ^ uint64_t(layer) * 0x165667B19E3779F9ull;
    k ^= k >> 31;
    k *= 0xBF58476D1CE4E5B9ull;
    k ^= k >> 29;
    return k & L_.bucket_mask;
}

void XlateIndex::insert_locked(uint64_t slot) {
    BlockRecord &r = L_.blocks[slot];
    std::atomic_ref<uint64_t> head(L_.xlate[bucket(r.tenant, r.request, r.layer)]);
    r.xlate_next.store(head.load(std::memory_order_relaxed), std::memory_order_relaxed);
    head.store(slot + 1, std::memory_order_release);  // readers see the old head or this one: both consistent
}

void XlateIndex::remove_locked(uint64_t slot) {
    BlockRecord &r = L_.blocks[slot];
    SharedHeader *h = L_.sh;
    std::atomic_ref<uint64_t> head(L_.xlate[bucket(r.tenant, r.request, r.layer)]);
    h->xlate_seq.fetch_add(1, std::memory_order_seq_cst);  // odd: a chain is changing
    uint64_t idx = head.load(std::memory_order_relaxed), prev = 0;
    for (uint64_t steps = 0; idx && idx <= L_.sb->max_blocks && steps <= L_.sb->max_blocks; steps++) {
        if (idx == slot + 1) {
            uint64_t next = r.xlate_next.load(std::memory_order_relaxed);
            if (prev) L_.blocks[prev - 1].xlate_next.store(next, std::memory_order_release);
            else head.store(next, std::memory_order_release);
            break;
        }
        prev = idx;
        idx = L_.blocks[idx - 1].xlate_next.load(std::memory_order_relaxed);
    }
    h->xlate_seq.fetch_add(1, std::memory_order_seq_cst);
}

void XlateIndex::rebuild_locked() {
    SharedHeader *h = L_.sh;
    const Superblock &s = *L_.sb;
    uint64_t q = h->xlate_seq.load() | 1;
    h->xlate_seq.store(q, std::memory_order_seq_cst);
    for (uint64_t b = 0; b < s.index_buckets; b++) std::atomic_ref<uint64_t>(L_.xlate[b]).store(0, std::memory_order_relaxed);
    uint64_t hwm = std::min<uint64_t>(h->slot_hwm, s.max_blocks);
    for (uint64_t i = hwm; i-- > 0;)
        if (L_.blocks[i].handle.load() && L_.blocks[i].token_count) insert_locked(i);
    h->xlate_seq.store(q + 1, std::memory_order_seq_cst);
}

uint64_t XlateIndex::unit_end_locked(uint64_t tenant, uint64_t request, uint32_t layer) const {
    const uint64_t max = L_.sb->max_blocks;
    uint64_t idx = L_.xlate[bucket(tenant, request, layer)];
    // The chain's head is its newest block: the unit's first match is its latest.
    for (uint64_t steps = 0; idx && idx <= max && steps <= max; steps++) {
        const BlockRecord &r = L_.blocks[idx - 1];
        if (r.handle.load(std::memory_order_relaxed) && r.tenant == tenant && r.request == request && r.layer == layer)
            // In L4, or packed (its image went wherever there was room): no run to follow.
            return (r.tier_seq.load(std::memory_order_relaxed) & 1) || r.packed_pages ? UINT64_MAX
                                                                                     : r.first_page + r.npages;
        idx = r.xlate_next.load(std::memory_order_relaxed);
    }
    return UINT64_MAX;
}

bool XlateIndex::walk(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, std::vector<uint64_t> *out) const {
    const uint64_t max = L_.sb->max_blocks;
    std::atomic_ref<uint64_t> head(L_.xlate[bucket(tenant, request, layer)]);
    out->clear();
    uint64_t idx = head.load(std::memory_order_acquire);
    for (uint64_t steps = 0; idx && idx <= max && steps <= max; steps++) {
        const BlockRecord &r = L_.blocks[idx - 1];
        uint64_t hd = r.handle.load(std::memory_order_acquire);
        if (hd && relaxed_field(r.tenant) == tenant && relaxed_field(r.request) == request && relaxed_field(r.layer) == layer) {
            uint64_t tp = relaxed_field(r.token_pos), tc = relaxed_field(r.token_count);
            if (pos == ~0ull || (pos >= tp && pos - tp < tc)) {
                out->push_back(hd);
                if (pos != ~0ull) return true;
            }
        }
        idx = r.xlate_next.load(std::memory_order_acquire);
    }
    return false;
}

bool XlateIndex::collect_lockfree(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos,
                                  std::vector<uint64_t> *out) const {
    for (int attempt = 0; attempt < 8; attempt++) {
        uint64_t s1 = L_.sh->xlate_seq.load(std::memory_order_acquire);
        if (s1 & 1) {
            sched_yield();
            continue;
        }
        if (walk(tenant, request, layer, pos, out)) return true;  // a match is re-checked by its user against the live record
        std::atomic_thread_fence(std::memory_order_acquire);
        if (L_.sh->xlate_seq.load(std::memory_order_relaxed) == s1) return true;  // a complete, consistent walk
    }
    return false;
}

void XlateIndex::check(uint64_t hwm, std::vector<std::string> *problems) const {
    const Superblock &s = *L_.sb;
    if (L_.sh->xlate_seq.load() & 1)
        problems->emplace_back("the translation index was being changed by a process that is gone (repair rebuilds it)");
    uint64_t entries = 0, expected = 0;
    for (uint64_t i = 0; i < hwm; i++) expected += L_.blocks[i].handle.load() && L_.blocks[i].token_count;
    for (uint64_t b = 0; b < s.index_buckets; b++) {
        uint64_t idx = L_.xlate[b];
        for (uint64_t steps = 0; idx; steps++) {
            char buf[200];
            if (idx > hwm || steps > s.max_blocks) {
                std::snprintf(buf, sizeof buf, "translation index bucket %" PRIu64 " is damaged (bad link or a loop)", b);
                problems->emplace_back(buf);
                break;
            }
            const BlockRecord &r = L_.blocks[idx - 1];
            if (!r.handle.load() || !r.token_count || bucket(r.tenant, r.request, r.layer) != b) {
                std::snprintf(buf, sizeof buf,
                              "translation index bucket %" PRIu64 " links slot %" PRIu64 ", which does not belong in it", b,
                              idx - 1);
                problems->emplace_back(buf);
                break;
            }
            entries++;
            idx = r.xlate_next.load();
        }
    }
    if (entries != expected) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "the translation index holds %" PRIu64 " entries for %" PRIu64 " blocks with a token range",
                      entries, expected);
        problems->emplace_back(buf);
    }
}

}  // namespace speckv
