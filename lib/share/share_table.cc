// SPDX-License-Identifier: Apache-2.0
// The tenant rows and the hash index of published blocks (share/share_table.h).
#include "share/share_table.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "util/flush.h"
#include "util/seqlock.h"

namespace speckv {

using namespace fmt;

namespace {
__attribute__((format(printf, 2, 3))) void problem(std::vector<std::string> *rep, const char *f, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, f);
    std::vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    rep->emplace_back(buf);
}

}  // namespace

uint64_t ShareTable::find_published_locked(uint64_t tenant, const uint8_t *hash) const {
    const uint64_t max = L_.sb->max_blocks;
    uint64_t idx = std::atomic_ref<uint64_t>(L_.buckets[bucket_of(tenant, hash)]).load(std::memory_order_acquire);
    for (uint64_t steps = 0; idx && idx <= max && steps <= max; steps++) {
        const BlockRecord &r = L_.blocks[idx - 1];
        if (r.handle.load() && (r.state & kBlockPublished) && r.tenant == tenant && key_equal(r, hash)) return idx;
        idx = r.hash_next.load(std::memory_order_acquire);
    }
    return 0;
}

void ShareTable::insert_locked(uint64_t slot) {
    // Readers walking this chain see either the old head or the new one:
    // both are consistent, so an insert needs no seqlock round.
    BlockRecord &r = L_.blocks[slot];
    std::atomic_ref<uint64_t> head(L_.buckets[bucket_of(r.tenant, r.content_hash)]);
    r.hash_next.store(head.load(std::memory_order_relaxed), std::memory_order_relaxed);
    head.store(slot + 1, std::memory_order_release);
}

void ShareTable::remove_locked(uint64_t slot, bool flush) {
    BlockRecord &r = L_.blocks[slot];
    SharedHeader *h = L_.sh;
    const uint64_t b = bucket_of(r.tenant, r.content_hash);
    std::atomic_ref<uint64_t> head(L_.buckets[b]);
    h->index_seq.fetch_add(1, std::memory_order_seq_cst);  // odd: a chain is changing
    uint64_t idx = head.load(std::memory_order_relaxed), prev = 0;
    for (uint64_t steps = 0; idx && idx <= L_.sb->max_blocks && steps <= L_.sb->max_blocks; steps++) {
        if (idx == slot + 1) {
            uint64_t next = r.hash_next.load(std::memory_order_relaxed);
            if (prev) L_.blocks[prev - 1].hash_next.store(next, std::memory_order_release);
            else head.store(next, std::memory_order_release);
            if (flush) writeback_range(prev ? static_cast<const void *>(&L_.blocks[prev - 1]) : &L_.buckets[b], prev ? sizeof(BlockRecord) : 8);
            break;
        }
        prev = idx;
        idx = L_.blocks[idx - 1].hash_next.load(std::memory_order_relaxed);
    }
    h->index_seq.fetch_add(1, std::memory_order_seq_cst);
}

void ShareTable::rebuild_locked() {
    SharedHeader *h = L_.sh;
    const Superblock &s = *L_.sb;
    uint64_t q = h->index_seq.load() | 1;  // odd even if a rebuild was cut short
    h->index_seq.store(q, std::memory_order_seq_cst);
    for (uint64_t b = 0; b < s.index_buckets; b++) std::atomic_ref<uint64_t>(L_.buckets[b]).store(0, std::memory_order_relaxed);
    uint64_t hwm = std::min<uint64_t>(h->slot_hwm, s.max_blocks);
    for (uint64_t i = hwm; i-- > 0;)
        if (L_.blocks[i].handle.load() && (L_.blocks[i].state & kBlockPublished)) insert_locked(i);
    h->index_seq.store(q + 1, std::memory_order_seq_cst);
}

void ShareTable::check(uint64_t hwm, uint64_t published, std::vector<std::string> *rep) const {
    const Superblock &s = *L_.sb;
    // The hash index: every chain short and made of live published blocks
    // in the right bucket; as many entries as published blocks.
    if (L_.sh->index_seq.load() & 1) problem(rep, "the hash index was being changed by a process that is gone (repair rebuilds it)");
    uint64_t entries = 0;
    for (uint64_t b = 0; b < s.index_buckets; b++) {
        uint64_t idx = L_.buckets[b];
        for (uint64_t steps = 0; idx; steps++) {
            if (idx > hwm || steps > s.max_blocks) {
                problem(rep, "hash index bucket %" PRIu64 " is damaged (bad link or a loop)", b);
                break;
            }
            const BlockRecord &r = L_.blocks[idx - 1];
            if (!r.handle.load() || !(r.state & kBlockPublished) || bucket_of(r.tenant, r.content_hash) != b) {
                problem(rep, "hash index bucket %" PRIu64 " links slot %" PRIu64 ", which is not a published block of it", b, idx - 1);
                break;
            }
            entries++;
            idx = r.hash_next.load();
        }
    }
    if (entries != published)
        problem(rep, "the hash index holds %" PRIu64 " entries for %" PRIu64 " published blocks", entries, published);
}

}  // namespace speckv
