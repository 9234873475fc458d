// SPDX-License-Identifier: Apache-2.0
// BlockView: what BlockResolver::resolve (pool/block_resolver.h) hands every live access, a
// consistent snapshot of a block's placement taken without the pool lock.
// It owns no memory: `rec` points at the block record in the mapped image.
// Invariants: the fields were read atomically and validated together
// (record_geometry_ok), so a slot freed and reused meanwhile can never send
// a reader out of bounds; callers re-check rec->handle afterwards to detect
// the reuse, and moved() to detect a pack, unpack or L4 move since.
#pragma once
#include <atomic>
#include <cstdint>

#include "pool/pool_format.h"

namespace speckv {

struct BlockView {
    const fmt::BlockRecord *rec;
    uint64_t first_page, bytes;
    uint32_t npages;
    uint8_t dtype;
    uint64_t tseq;  // BlockRecord::tier_seq when resolved: odd = in L4 (first_page is then 0)
    uint64_t packed = 0;  // BlockRecord::packed_pages: 0, or the pages of its packed image
    bool cold() const { return tseq & 1; }
    // Pool pages the block occupies (when not in L4).
    uint64_t stored() const { return packed ? packed : npages; }
    // Whether the block left the pages this view names (a move since resolve).
    bool moved() const { return rec->tier_seq.load(std::memory_order_seq_cst) != tseq; }
};

}  // namespace speckv
