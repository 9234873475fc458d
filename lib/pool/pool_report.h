// SPDX-License-Identifier: Apache-2.0
// What the pool reports to the CLI and the tests (reporter.cc: block
// list, info; checker.cc: `pool check`): plain values, no pool inside.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pool/pool_format.h"

namespace speckv {

struct BlockInfo {
    uint64_t handle, slot, first_page, npages, bytes;
    int dtype;
    uint64_t tenant, request, token_pos, token_count;
    uint32_t layer, hint_flags;
    uint8_t content_hash[32];
    bool published;
    bool cold;              // in the L4 cold tier (its pages are not in the pool)
    uint64_t packed_pages;  // 0, or the pool pages of its packed image (format 6)
    uint32_t holders;       // processes holding references
    uint64_t owner;         // attach id owning it while unpublished (0 = the pool)
};

struct AttachInfo {
    uint32_t pid;
    bool alive;
    uint64_t id, attach_ns, lookups, lookup_hits;
    uint64_t tier[fmt::kTierCounters];  // as it last published them (fmt::TierCounter)
};

struct TenantInfo {
    uint64_t tenant, quota_pages, used_pages;
};

struct PoolInfo {
    std::string location;     // path, or "anonymous memory"
    uint32_t format_version;
    uint8_t uuid[16];
    uint64_t created_ns, pool_bytes, page_size, n_pages, max_blocks, data_off;
    uint64_t pages_used, blocks_live, bytes_by_dtype[4];
    uint64_t epoch, recoveries;
    uint32_t attached;
    bool clean;
    uint64_t pages_quarantined, pages_in_write;
    uint64_t pages_coded, coded_raw_bytes, coded_stored_bytes;  // pages stored as codec records
    uint64_t blocks_packed, packed_pages, packed_saved;  // packed blocks, their image pages, pages they gave back
    // Packed blocks whose image head or directory fails its checks (not in
    // the figures above; `speckv pool check` says which and why).
    uint64_t packed_damaged;
    uint64_t blocks_published, shared_bytes, lookups, lookup_hits, dedup_bytes, evictions, reclaimed;
    uint64_t cold_blocks, cold_bytes, demotions, promotions, demote_failures;  // the L4 tier
    uint32_t cold_pid;        // the live process holding the L4 tier (0 = none)
    std::vector<AttachInfo> attach;
    uint64_t tier_detached[fmt::kTcSummed];  // tier counters of processes that detached or died
    std::vector<TenantInfo> tenants;
};

struct CheckReport {
    std::vector<std::string> problems;  // empty = clean
    // A process died holding the pool lock (perhaps inside recovery): the
    // problems may be what it left half-done, which the next open (or check
    // --repair) recovers; `speckv pool check` exits 3 then.
    bool recovery_pending = false;
    uint64_t blocks_checked = 0, pages_verified = 0;
};

}  // namespace speckv
