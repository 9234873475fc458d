// SPDX-License-Identifier: Apache-2.0
// Translator (pool/translator.h): the TLB in front of the translation index.
#include "pool/translator.h"

#include <cinttypes>

#include "config/config.h"
#include "pool/pool_internal.h"
#include "prefetch/engine.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;

int Translator::configure(const Config &cfg) {
    const int64_t entries = cfg.get("tlb.entries");
    if (entries & (entries - 1)) return fail(SPECKV_EINVAL, "tlb.entries %lld is not a power of two", (long long)entries);
    const unsigned shift = 0;  // one TLB entry per token: blocks may be as small as one token
    return Tlb::create(static_cast<size_t>(entries), shift, &tlb_);
}

void Translator::collect(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, std::vector<uint64_t> *out) const {
    if (index_->collect_lockfree(tenant, request, layer, pos, out)) return;
    // The chains kept changing under us (other threads freeing blocks): walk
    // under the lock, where they cannot. A miss here is a real miss.
    bool rec;
    if (lock_.lock(&rec) != SPECKV_OK) {
        clear_error();
        out->clear();
        return;
    }
    index_->walk(tenant, request, layer, pos, out);
    lock_.unlock();
}

int Translator::translate(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, uint64_t *handle,
                          uint64_t *offset) {
    if (!handle) return fail(SPECKV_EINVAL, "out is NULL");
    if (!resolver_->tenant_visible(tenant))
        return fail(SPECKV_ENOENT, "no block of tenant %" PRIu64 " is visible to this pool handle (tenant.id)", tenant);
    const AliasKey key{tenant, request, layer};
    std::vector<Alias> al;
    auto valid = [&](uint64_t hd) {
        BlockView v{};
        if (!hd || resolver_->resolve(hd, &v) != SPECKV_OK) return false;
        const BlockRecord &r = *v.rec;
        uint64_t tp = relaxed_field(r.token_pos), tc = relaxed_field(r.token_count);
        bool ok = relaxed_field(r.tenant) == tenant && relaxed_field(r.layer) == layer && pos >= tp && pos - tp < tc;
        if (ok && relaxed_field(r.request) != request) {
            pf_->collect_aliases(key, pos, &al);
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
    const uint64_t seen = tlb_ ? tlb_->inval_seq() : 0;
    std::vector<uint64_t> hs;
    collect(tenant, request, layer, pos, &hs);
    if (hs.empty()) {
        pf_->collect_aliases(key, pos, &al);
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

}  // namespace speckv
