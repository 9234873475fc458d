// SPDX-License-Identifier: Apache-2.0
// Translator: (tenant, request, layer, token) -> the live block that holds
// it (speckv_translate; docs/tiers.md §3). A per-process TLB (pool/tlb.h)
// sits in front of the pool's translation index (pool/xlate_index.h); a TLB
// entry is only a hint, checked against the live record, so a block freed
// or reused by any process is never returned. A block of another request
// counts when the prefetch engine learnt that this request reads it (a
// shared prefix block: an alias, prefetch/aliases.h).
//
// collect() is the index walk the prefetch engine and the selector use too:
// lock-free while the chains hold still, under the pool lock (a port) when
// they keep changing.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "pool/block_resolver.h"
#include "pool/pool_lock.h"
#include "pool/tlb.h"
#include "pool/xlate_index.h"

namespace speckv {

class Config;
class PrefetchEngine;  // prefetch/engine.h

class Translator {
  public:
    void bind(const XlateIndex *index, const BlockResolver *resolver, PrefetchEngine *pf) {
        index_ = index;
        resolver_ = resolver;
        pf_ = pf;
    }
    void set_lock(LockPort lock) { lock_ = std::move(lock); }
    // The TLB (config tlb.entries, a power of two).
    int configure(const Config &cfg);

    int translate(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, uint64_t *handle, uint64_t *offset);
    // Every block of the unit (tenant, request, layer) that may cover pos
    // (~0: all of the unit's blocks) into *handles.
    void collect(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, std::vector<uint64_t> *handles) const;
    const Tlb *tlb() const { return tlb_.get(); }

  private:
    const XlateIndex *index_ = nullptr;
    const BlockResolver *resolver_ = nullptr;
    PrefetchEngine *pf_ = nullptr;
    LockPort lock_;
    std::unique_ptr<Tlb> tlb_;
};

}  // namespace speckv
