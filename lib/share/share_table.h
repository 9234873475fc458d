// SPDX-License-Identifier: Apache-2.0
// Sharing's tables in the pool image (docs/sharing.md): the tenant rows and
// the hash index of published blocks, (tenant, content hash) -> slot, whose
// chains run through BlockRecord::hash_next. Knows the image, not the Pool:
// the pool calls it with its lock held (the _locked functions) or, for
// lookups, lock-free (readers re-check under a reference).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "pool/image.h"
#include "share/index_key.h"
#include "util/seqlock.h"

namespace speckv {

class ShareTable {
  public:
    void bind(const PoolLayout &L) { L_ = L; }
    // A record's content hash is `hash` (read racily; callers re-check).
    static bool key_equal(const fmt::BlockRecord &r, const uint8_t *hash) {
        SEQLOCK_IGNORE_BEGIN();
        bool eq = std::memcmp(r.content_hash, hash, sizeof r.content_hash) == 0;
        SEQLOCK_IGNORE_END();
        return eq;
    }
    uint64_t bucket_of(uint64_t tenant, const uint8_t *hash) const {
        if (const fmt::Superblock &s = *L_.sb; s.flags & kSbFlagKeyedIndex) return index_mix(s.reserved, tenant, hash) & L_.bucket_mask;
        uint64_t k;
        std::memcpy(&k, hash, 8);
        k ^= tenant * 0x9E3779B97F4A7C15ull;
        k ^= k >> 29;
        return k & L_.bucket_mask;
    }
    uint64_t *bucket(uint64_t tenant, const uint8_t *hash) const { return &L_.buckets[bucket_of(tenant, hash)]; }
    fmt::TenantEntry *tenant_row(uint64_t tenant) const {
        uint32_t n = std::min<uint32_t>(L_.sh->tenants_used, fmt::kMaxTenants);
        for (uint32_t i = 0; i < n; i++)
            if (L_.tenants[i].tenant == tenant) return &L_.tenants[i];
        return nullptr;
    }
    uint64_t find_published_locked(uint64_t tenant, const uint8_t *hash) const;  // slot + 1, or 0
    void insert_locked(uint64_t slot);
    // flush: share.flush (write back the link changed).
    void remove_locked(uint64_t slot, bool flush);
    void rebuild_locked();
    // pool check: every chain short and made of live published blocks in the
    // right bucket; as many entries as published blocks.
    void check(uint64_t hwm, uint64_t published, std::vector<std::string> *problems) const;

  private:
    PoolLayout L_;
};

}  // namespace speckv
