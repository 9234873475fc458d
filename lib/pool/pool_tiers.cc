// SPDX-License-Identifier: Apache-2.0
// The tiers inside the pool (docs/tiers.md): the translation index
// (tenant, request, layer, token) -> block, the per-process TLB in front of
// it, and what the prefetch engine (lib/prefetch/engine.h) is given: its
// ports, and the job of reading and verifying a block's pages into the L2
// prefetch buffer (lib/tiers/tier_buffers.h) from where Pool::read serves them.
#include <atomic>
#include <cinttypes>
#include <cstring>
#include <utility>
#include <vector>

#include "codec/codec.h"
#include "util/crc32c.h"
#include "pool/page_decoder.h"
#include "pool/pool.h"
#include "pool/pool_internal.h"
#include "util/seqlock.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;

// ------------------------------------------------------ translation index

void Pool::xlate_collect(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, std::vector<uint64_t> *out) {
    if (xlate_index_.collect_lockfree(tenant, request, layer, pos, out)) return;
    // The chains kept changing under us (other threads freeing blocks): walk
    // under the lock, where they cannot. A miss here is a real miss.
    bool rec;
    if (lock(&rec) != SPECKV_OK) {
        clear_error();
        out->clear();
        return;
    }
    xlate_index_.walk(tenant, request, layer, pos, out);
    unlock();
}

int Pool::translate(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, uint64_t *handle, uint64_t *offset) {
    if (!handle) return fail(SPECKV_EINVAL, "out is NULL");
    if (!tenant_visible(tenant))
        return fail(SPECKV_ENOENT, "no block of tenant %" PRIu64 " is visible to this pool handle (tenant.id)", tenant);
    // A TLB entry is only a hint: it is checked against the live record, so
    // a block freed or reused by any process is never returned.
    // A block of another request counts if this process learnt that the
    // request reads it (a shared prefix block: an alias, see PrefetchEngine::note_access).
    const AliasKey key{tenant, request, layer};
    std::vector<Alias> al;
    auto valid = [&](uint64_t hd) {
        BlockView v{};
        if (!hd || resolve(hd, &v) != SPECKV_OK) return false;
        const BlockRecord &r = *v.rec;
        uint64_t tp = relaxed_field(r.token_pos), tc = relaxed_field(r.token_count);
        bool ok = relaxed_field(r.tenant) == tenant && relaxed_field(r.layer) == layer && pos >= tp && pos - tp < tc;
        if (ok && relaxed_field(r.request) != request) {
            pf_.collect_aliases(key, pos, &al);
            ok = !al.empty() && al.front().handle == hd;
        }
        if (ok && offset) *offset = pos - tp;
        return ok && r.handle.load(std::memory_order_acquire) == hd;
    };
    TlbKey k{static_cast<uint32_t>(tenant ^ (tenant >> 32)), layer, request, pos};
    TlbValue tv{};
    if (tlb_ && tlb_->lookup(k, &tv) && valid(tv.handle)) {
        *handle = tv.handle;
        return SPECKV_OK;
    }
    uint64_t seen = tlb_ ? tlb_->inval_seq() : 0;
    std::vector<uint64_t> hs;
    xlate_collect(tenant, request, layer, pos, &hs);
    if (hs.empty()) {
        pf_.collect_aliases(key, pos, &al);
        for (const Alias &a : al) hs.push_back(a.handle);
    }
    for (uint64_t hd : hs)
        if (valid(hd)) {
            if (tlb_) {
                if (tv.handle) tlb_->invalidate(k);  // the stale entry
                tlb_->insert(k, TlbValue{hd, 0}, seen);
            }
            *handle = hd;
            return SPECKV_OK;
        }
    clear_error();
    return fail(SPECKV_ENOENT, "no live block of tenant %" PRIu64 ", request %" PRIu64 ", layer %u covers token %" PRIu64,
                tenant, request, layer, pos);
}

// ------------------------------------------------------------ prefetcher

int Pool::init_tiers(const Config &cfg) {
    // The L3->L2 bandwidth beta measures link use against: the pool memory's
    // placement class (a remote or CXL node is slower than local DRAM), unless
    // placement.* or prefetch.bandwidth say otherwise (docs/devices.md).
    Placement where = placement_for_mapping(map_);
    apply_placement_config(cfg, &where);
    placement_ = where;
    // What the engine asks of the pool (prefetch/engine.h); it calls none of it before its thread runs.
    PrefetchPorts ports;
    ports.collect = [this](uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, std::vector<uint64_t> *hs) {
        xlate_collect(tenant, request, layer, pos, hs);
    };
    ports.fetch_block = [this](uint64_t handle, uint64_t owner, uint64_t skip_from, uint64_t *link) {
        return prefetch_block(handle, owner, skip_from, link);
    };
    ports.tick = [this] {
        publish_tier_counters();  // to the attach record, where `speckv pool stats` reads them
        cold_.tick();  // the L4 holder: above the pressure target, blocks below T_c go ahead of need
    };
    const PrefetchSetup setup{double(where.bandwidth), page_size_, tenant_id_, &resolver_, &counters_};
    if (int rc = pf_.configure(cfg, setup, std::move(ports)); rc != SPECKV_OK) return rc;
    int64_t entries = cfg.get("tlb.entries");
    if (entries & (entries - 1)) return fail(SPECKV_EINVAL, "tlb.entries %lld is not a power of two", (long long)entries);
    unsigned shift = 0;  // one TLB entry per token: blocks may be as small as one token
    if (int rc = Tlb::create(static_cast<size_t>(entries), shift, &tlb_); rc != SPECKV_OK) return rc;
    if (int rc = pf_.open_l2(cfg); rc != SPECKV_OK) return rc;
    if (PrefetchBuffer *l2 = pf_.l2()) {
        // A page that only L1 holds moves down into L2 when L1 evicts it,
        // rather than leaving: a page completed by this process's write (the
        // full page behind a growing block's tail; the prefetcher skips the
        // block being appended to, and its other pages came through L2 and
        // are still there). Its next read is an L2 hit, not a link transfer
        // (docs/tiers.md §2). L1 and L2 share the tag (seq ^ epoch << 44).
        cache_->set_evict(
            [](void *u, uint64_t page, uint64_t tag, const void *data) {
                static_cast<PrefetchBuffer *>(u)->insert_victim(page, tag, data);
            },
            l2);
    }
    return SPECKV_OK;
}

// Reads a block's pages that are in neither L1 nor L2 into L2, verified.
// Returns the pages brought in.
uint64_t Pool::prefetch_block(uint64_t handle, uint64_t owner, uint64_t skip_from, uint64_t *link) {
    BlockView v{};
    if (resolve(handle, &v) != SPECKV_OK) {
        clear_error();
        return 0;
    }
    // In L4: the holder brings it back into the pool ahead of its use (L4 -> L3), then on into L2.
    if (v.cold() && cold_.ensure_hot(handle, &v) != SPECKV_OK) {
        clear_error();
        return 0;
    }
    // The block the request is appending to (it covers the token being
    // decoded, or the next one) is about to be rewritten: a copy fetched now
    // would be stale before it is read. Its writer puts it in L1 instead.
    uint64_t tp = relaxed_field(v.rec->token_pos), tc = relaxed_field(v.rec->token_count);
    if (skip_from != ~0ull && tc && skip_from + 1 >= tp && skip_from < tp + tc) return 0;
    return reader_.prefetch_block(v, handle, owner, link);  // pool/page_reader.h
}

}  // namespace speckv
