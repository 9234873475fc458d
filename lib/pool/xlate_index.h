// SPDX-License-Identifier: Apache-2.0
// The translation index in the pool image (docs/tiers.md): (tenant,
// request, layer) -> the live blocks holding that unit's tokens, chained
// through BlockRecord::xlate_next from index_buckets heads. Knows the
// image, not the Pool: the pool calls the _locked functions with its lock
// held, and takes the lock itself when collect_lockfree gives up.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pool/image.h"

namespace speckv {

class XlateIndex {
  public:
    void bind(const PoolLayout &L) { L_ = L; }
    uint64_t bucket(uint64_t tenant, uint64_t request, uint32_t layer) const;
    void insert_locked(uint64_t slot);
    void remove_locked(uint64_t slot);
    void rebuild_locked();
    // Layer-aware placement: the page just past the latest block of (tenant,
    // request, layer), or UINT64_MAX. Under the lock.
    uint64_t unit_end_locked(uint64_t tenant, uint64_t request, uint32_t layer) const;
    // Live blocks of (tenant, request, layer); with pos != ~0 only the one
    // covering pos. Lock-free: retries while the index changes; false if it
    // kept changing (then walk() again under the pool lock).
    bool collect_lockfree(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, std::vector<uint64_t> *out) const;
    // One walk of the chain (true: found the block covering pos).
    bool walk(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, std::vector<uint64_t> *out) const;
    // pool check: chains sound, one entry per live block with a token range.
    void check(uint64_t hwm, std::vector<std::string> *problems) const;

  private:
    PoolLayout L_;
};

}  // namespace speckv
