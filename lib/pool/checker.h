// SPDX-License-Identifier: Apache-2.0
// `speckv pool check` (docs/pool-format.md "Validation"): PoolChecker walks
// a mapped image read-only and reports every inconsistency it finds, in
// report order: the lock, each block record and its pages (CRC32C, codec
// records, summaries, packed images), the shared counters against what the
// walk counted, the free-slot list, the sharing and translation indexes.
// It owns that walk and its tally; it never writes to the image, takes no
// lock and never repairs (recovery does: pool/recovery.h). Invariants: it
// reads the image only through the PoolLayout it was given and the
// validating accessors every live reader uses (record_geometry_ok,
// PackedImage's checks), so it refuses exactly what they refuse.
#pragma once
#include <cstdint>
#include <vector>

#include "pool/image.h"
#include "pool/pool_format.h"
#include "pool/pool_report.h"
#include "pool/xlate_index.h"
#include "share/share_table.h"

namespace speckv {

class PoolChecker {
  public:
    PoolChecker(const PoolLayout &L, const ShareTable &share, const XlateIndex &xlate)
        : L_(L), share_(share), xlate_index_(xlate) {}
    int run(CheckReport *rep) const;

  private:
    struct CheckTally;
    void check_lock_state(CheckReport *rep) const;
    void check_block(uint64_t slot, CheckTally *t, CheckReport *rep) const;
    void check_block_page(const fmt::BlockRecord &r, uint64_t hd, uint64_t page, CheckTally *t, CheckReport *rep) const;
    void check_packed(const fmt::BlockRecord &r, uint64_t hd, CheckReport *rep) const;
    void check_counters(const CheckTally &t, CheckReport *rep) const;
    void check_free_list(uint64_t hwm, CheckReport *rep) const;
    void check_shared_counters(const CheckTally &t, CheckReport *rep) const;

    fmt::Superblock *sb() const { return L_.sb; }
    fmt::SharedHeader *sh() const { return L_.sh; }
    fmt::PageEntry *pages() const { return L_.pages; }
    fmt::BlockRecord *blocks() const { return L_.blocks; }
    uint64_t *bitmap() const { return L_.bitmap; }
    fmt::TenantEntry *tenants() const { return L_.tenants; }
    unsigned char *page_data(uint64_t p) const { return L_.data + (p << L_.page_shift); }

    const PoolLayout &L_;
    const ShareTable &share_;
    const XlateIndex &xlate_index_;
    unsigned char *const summaries_ = L_.summaries;
    const uint32_t summary_bytes_ = L_.summary_bytes;
    const uint32_t page_size_ = L_.page_size;
};

}  // namespace speckv
