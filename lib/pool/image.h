// SPDX-License-Identifier: Apache-2.0
// The pool image (docs/pool-format.md): how a blank one is laid out and
// formatted, how an opener validates one, where its areas are, and which
// processes are attached to it. Knows bytes, not Pool: the coordinator
// (pool/pool.h) and the tools call down into it.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "pool/pool_format.h"

namespace speckv {

// Where the areas of a validated image are, resolved once from its superblock.
struct PoolLayout {
    unsigned char *base = nullptr;
    fmt::Superblock *sb = nullptr;
    fmt::SharedHeader *sh = nullptr;
    fmt::PageEntry *pages = nullptr;
    fmt::BlockRecord *blocks = nullptr;
    uint64_t *bitmap = nullptr;
    uint64_t *buckets = nullptr;            // hash-index bucket heads
    uint64_t *xlate = nullptr;              // translation-index bucket heads (index_buckets of them)
    unsigned char *summaries = nullptr;     // page summary slots (summary_bytes each), or none
    uint32_t summary_bytes = 0;
    fmt::TenantEntry *tenants = nullptr;
    uint64_t bucket_mask = 0;
    unsigned char *data = nullptr;
    uint32_t page_size = 0;
    uint32_t page_shift = 12;               // log2(page_size)
    unsigned char *page_data(uint64_t p) const { return data + (p << page_shift); }
    static PoolLayout bind(unsigned char *base);
};

// The superblock of `m` is a pool's this library can open: magic, CRC,
// version, size and a geometry that re-plans to the same layout.
int validate_superblock(const Mapping &m, const char *where);

// A device-dax mapping without a pool gets one over its whole size:
// serialised across processes by an OFD write lock on byte 0 of the device,
// and re-checked under it, so two openers of a blank device never both
// format it (the second finds the first's pool). *formatted says whether
// this call did. SPECKV_ENOTPOOL if there is no pool and create is false.
int format_if_blank(const Mapping &m, uint32_t page_size, uint64_t max_blocks, bool create, bool *formatted,
                    uint32_t summary_bytes = 0);

// Lays out and initialises a fresh pool image of `size` bytes in `base`.
// `zeroed`: the memory is known to be zero already (fresh file, anonymous).
// summary_bytes: per-page summary slots (0 = none; pool.summary_bytes).
int format_pool(unsigned char *base, size_t size, uint32_t page_size, uint64_t max_blocks, bool zeroed,
                uint32_t summary_bytes = 0);

// The layout a pool of this size would get (no writes). For tests and docs.
int plan_geometry(uint64_t size, uint32_t page_size, uint64_t max_blocks, fmt::Superblock *out,
                  uint32_t summary_bytes = 0);

uint32_t superblock_crc(const fmt::Superblock &s);
// The first generation of a never-used slot: 1 + the UUID's first 32 bits
// (docs/pool-format.md, "Handles").
inline uint64_t first_generation(const fmt::Superblock &s) {
    const unsigned char *u = s.uuid;
    return 1 + (uint64_t(u[0]) | uint64_t(u[1]) << 8 | uint64_t(u[2]) << 16 | uint64_t(u[3]) << 24);
}
// Field 22 of /proc/<pid>/stat (0 if unknown), and whether that process still runs.
uint64_t proc_start_time(pid_t pid);
bool process_alive(uint32_t pid, uint64_t start_time);
uint32_t record_crc(const fmt::BlockRecord &r);
// The one check of a block record's placement and size, the record's
// validating accessor (docs/pool-format.md "Validation"): resolve() (so
// every live access), recovery, check, the L4 demotion's view and the
// lookup's cache flush all use it, so no record one of
// them accepts is refused by another. Fields as read from the record; cold
// = in L4 (first_page is then stale and not checked).
inline bool record_geometry_ok(const fmt::Superblock &s, uint64_t first, uint64_t packed, uint32_t npages,
                               uint64_t bytes, uint8_t dtype, bool cold) {
    const uint64_t stored = packed ? packed : npages;
    return npages >= 1 && dtype < 4 && bytes > uint64_t(npages - 1) * s.page_size &&
           bytes <= uint64_t(npages) * s.page_size && (packed == 0 || (packed < npages && s.format_version >= 6)) &&
           (cold || (first < s.n_pages && stored <= s.n_pages - first));
}

// Live processes (other than this one) attached to the pool in `m`.
std::vector<uint32_t> pool_live_pids(const Mapping &m);

// Wipes every block of the pool in `m` and re-creates its metadata (lock
// included), keeping the geometry and UUID (Pool::reset_uri).
int reset_pool_mapping(Mapping &&m, const std::string &where, bool even_if_attached);

}  // namespace speckv
