// SPDX-License-Identifier: Apache-2.0
#include "pool/tlb.h"

#include <new>

namespace speckv {

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}
}  // namespace

int Tlb::create(size_t entries, unsigned token_shift, std::unique_ptr<Tlb> *out) {
    if (!out) return fail(SPECKV_EINVAL, "tlb: out is NULL");
    if (entries < 64 || entries > (1u << 20) || (entries & (entries - 1)))
        return fail(SPECKV_EINVAL, "tlb: %zu entries is not a power of two in [64, 1048576]", entries);
    if (token_shift > 20) return fail(SPECKV_EINVAL, "tlb: token_shift %u out of [0, 20]", token_shift);
    out->reset(new (std::nothrow) Tlb(entries / kWays, token_shift));
    if (!*out) return fail(SPECKV_ENOMEM, "tlb: %zu entries", entries);
    return SPECKV_OK;
}

Tlb::Tlb(size_t nsets, unsigned shift)
    : nsets_(nsets), shift_(shift), e_(new Entry[nsets * kWays]), victim_(new std::atomic<uint8_t>[nsets]) {
    for (size_t i = 0; i < nsets; i++) victim_[i].store(0, std::memory_order_relaxed);
}

uint64_t Tlb::lock_entry(Entry &e) {
    for (;;) {
        uint64_t v = e.version.load(std::memory_order_relaxed);
        if (!(v & 1) && e.version.compare_exchange_weak(v, v + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) {
            std::atomic_thread_fence(std::memory_order_release);  // field stores stay after the odd version
            return v;
        }
        cpu_relax();
    }
}

bool Tlb::insert(const TlbKey &k, const TlbValue &val, uint64_t seen) {
    uint64_t tl = uint64_t(k.tenant) << 32 | k.layer, tok = k.token >> shift_;
    size_t si = set_of(tl, k.request, tok);
    Entry *set = &e_[si * kWays];
    uint64_t epoch = epoch_.load(std::memory_order_acquire);
    // The way: the key's own entry, else an empty or stale one, else round robin.
    int way = -1;
    for (unsigned w = 0; w < kWays && way < 0; w++)
        if (set[w].tl.load(std::memory_order_relaxed) == tl && set[w].request.load(std::memory_order_relaxed) == k.request &&
            set[w].token.load(std::memory_order_relaxed) == tok)
            way = int(w);
    for (unsigned w = 0; w < kWays && way < 0; w++)
        if (set[w].epoch.load(std::memory_order_relaxed) != epoch) way = int(w);
    if (way < 0) way = victim_[si].fetch_add(1, std::memory_order_relaxed) % kWays;
    Entry &e = set[way];
    uint64_t v = e.version.load(std::memory_order_relaxed);
    if ((v & 1) || !e.version.compare_exchange_strong(v, v + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) {
        skips_.fetch_add(1, std::memory_order_relaxed);
        return false;  // busy: a TLB may forget
    }
    std::atomic_thread_fence(std::memory_order_release);
    // Checked while holding the entry: an invalidation that bumped the
    // sequence after this check will find and clear this entry afterwards.
    if (inval_seq_.load(std::memory_order_seq_cst) != seen) {
        e.version.store(v + 2, std::memory_order_release);
        skips_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    e.tl.store(tl, std::memory_order_relaxed);
    e.request.store(k.request, std::memory_order_relaxed);
    e.token.store(tok, std::memory_order_relaxed);
    e.epoch.store(epoch, std::memory_order_relaxed);
    e.handle.store(val.handle, std::memory_order_relaxed);
    e.page.store(val.page, std::memory_order_relaxed);
    e.version.store(v + 2, std::memory_order_release);
    inserts_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

void Tlb::clear_if(Entry &e, uint64_t tl, uint64_t request, uint64_t tok, bool whole_request) {
    auto hit = [&] {
        if (whole_request)
            return (e.tl.load(std::memory_order_relaxed) >> 32) == (tl >> 32) &&
                   e.request.load(std::memory_order_relaxed) == request;
        return e.tl.load(std::memory_order_relaxed) == tl && e.request.load(std::memory_order_relaxed) == request &&
               e.token.load(std::memory_order_relaxed) == tok;
    };
    // A cheap unlocked look first; an entry being written is looked at under
    // the lock. seq_cst pairs with insert()'s CAS + sequence check (Dekker):
    // either this sees the inserter's odd version or it sees our bump.
    uint64_t v = e.version.load(std::memory_order_seq_cst);
    if (!(v & 1) && e.epoch.load(std::memory_order_relaxed) == 0) {
        std::atomic_thread_fence(std::memory_order_acquire);
        if (e.version.load(std::memory_order_relaxed) == v) return;
    }
    if (!(v & 1) && !hit()) {
        std::atomic_thread_fence(std::memory_order_acquire);
        if (e.version.load(std::memory_order_relaxed) == v) return;
    }
    uint64_t lv = lock_entry(e);
    if (hit()) e.epoch.store(0, std::memory_order_relaxed);
    e.version.store(lv + 2, std::memory_order_release);
}

void Tlb::invalidate(const TlbKey &k) {
    inval_seq_.fetch_add(1, std::memory_order_seq_cst);
    invals_.fetch_add(1, std::memory_order_relaxed);
    uint64_t tl = uint64_t(k.tenant) << 32 | k.layer, tok = k.token >> shift_;
    Entry *set = &e_[set_of(tl, k.request, tok) * kWays];
    for (unsigned w = 0; w < kWays; w++) clear_if(set[w], tl, k.request, tok, false);
}

void Tlb::invalidate_request(uint32_t tenant, uint64_t request) {
    inval_seq_.fetch_add(1, std::memory_order_seq_cst);
    invals_.fetch_add(1, std::memory_order_relaxed);
    uint64_t tl = uint64_t(tenant) << 32;
    for (size_t i = 0; i < nsets_ * kWays; i++) clear_if(e_[i], tl, request, 0, true);
}

void Tlb::invalidate_all() {
    inval_seq_.fetch_add(1, std::memory_order_seq_cst);
    invals_.fetch_add(1, std::memory_order_relaxed);
    epoch_.fetch_add(1, std::memory_order_acq_rel);
}

TlbStats Tlb::stats() const {
    TlbStats s;
    // The shards handed out so far and the shared one (64): the rest were never written.
    auto add = [&s](const Shard &sh) {
        s.hits += sh.hits.load(std::memory_order_relaxed);
        s.misses += sh.misses.load(std::memory_order_relaxed);
    };
    for (int i = 0, n = thread_shards_assigned(); i < n; i++) add(shards_[i]);
    add(shards_[64]);
    s.inserts = inserts_.load(std::memory_order_relaxed);
    s.insert_skips = skips_.load(std::memory_order_relaxed);
    s.invalidations = invals_.load(std::memory_order_relaxed);
    return s;
}

}  // namespace speckv
