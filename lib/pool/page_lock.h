// SPDX-License-Identifier: Apache-2.0
// The seqlocked page protocol over the pool's page table (docs/pool-format.md
// "Pages"): a page's seq is even when it is stable and odd while one writer
// copies into it. Readers take an even seq, copy, and check it did not move;
// a writer CASes it odd, tags the page with its attach slot (so recovery
// knows whose write a dead process left), writes, and stores seq + 2.
// Holds only the page table; the pool binds it once its image is mapped.
#pragma once
#include <cstdint>

#include "pool/pool_format.h"

namespace speckv {

class PageLocks {
  public:
    void bind(fmt::PageEntry *pages) { pages_ = pages; }
    // Waits for an even seq (a writer copies one page at a time); SPECKV_EBUSY
    // naming the page when it stays odd (a writer that died mid-copy).
    int wait_even(const fmt::PageEntry &pe, uint64_t *seq) const;
    // Locks page `page` of the block `handle` (record `rec`) for a write,
    // tagged with `attach_slot` (-1: none). Fails without the lock if the
    // handle was freed (SPECKV_EBADHANDLE) or, when tseq != UINT64_MAX, the
    // block moved tiers since that view (SPECKV_EBUSY). *seq: the even seq
    // taken; the caller stores *seq + 2 to release.
    int lock(uint64_t page, uint64_t handle, const fmt::BlockRecord *rec, int attach_slot, uint64_t *seq,
             uint64_t tseq = UINT64_MAX);
    // Takes the lock of a page the caller owns under the pool lock (a free
    // page it is filling, or one of a block it moves): a stale writer of the
    // page's previous owner may hold it a moment; a dead one's is taken
    // over. Returns the even seq; the caller stores seq + 2 to release.
    uint64_t claim(fmt::PageEntry &pe) const;

  private:
    fmt::PageEntry *pages_ = nullptr;
};

}  // namespace speckv
