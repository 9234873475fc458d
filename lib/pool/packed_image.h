// SPDX-License-Identifier: Apache-2.0
// The validating accessors of a packed block's image (docs/pool-format.md
// "Packed blocks", "Validation"): the only way any reader (info, reads,
// prefetch, select, unpack, check) takes an image's head and directory
// entries. PackedImage owns those checks and the L1/L2 key of a packed page;
// packing and unpacking themselves are pool/packer.{h,cc}.
// Invariants: a head is copied out and checked against the view (magic, the
// block's handle, pages and bytes, page size, summary slots, image_bytes); an
// entry is copied and checked against that head (a zero page is kPageZero
// alone with no bytes, others lie inside the image past its directory); a
// combination one reader refuses no other accepts. A moved block gives any
// answer: callers re-check the view before they call it damage.
#pragma once
#include <cstddef>
#include <cstdint>

#include "pool/block_view.h"
#include "pool/image.h"
#include "pool/pool_format.h"

namespace speckv {

class PackedImage {
  public:
    void bind(const PoolLayout &L) {
        data_ = L.data;
        page_shift_ = L.page_shift;
        page_size_ = L.page_size;
        summary_bytes_ = L.summary_bytes;
    }
    // The head of the image of view v; false: damaged (or not packed, or in L4).
    bool head(const BlockView &v, fmt::PackHead *ph) const;
    // Entry i of its directory; false: damaged.
    bool entry(const BlockView &v, uint32_t i, fmt::PackEntry *e) const;
    // L1/L2 key of logical page i of the packed block in `slot`: never a pool
    // page number, unique per (slot, i); the tag is the block's tier_seq,
    // which every pack, unpack and move changes.
    static uint64_t key(uint64_t slot, uint32_t i) {
        return (uint64_t(1) << 62) | (slot << 32) | ((uint32_t(i) ^ uint32_t(slot * 0x9E3779B1u)) & 0xFFFFFFFFull);
    }
    // The checks over copies (pool check copies a whole image first).
    static size_t dir_bytes(uint32_t npages) { return sizeof(fmt::PackHead) + size_t(npages) * sizeof(fmt::PackEntry); }
    // Where records may start: past the head, the directory and the summary slots.
    static size_t meta_bytes(const fmt::PackHead &ph) {
        return dir_bytes(ph.npages) + size_t(ph.npages) * ph.summary_bytes;
    }
    static bool head_ok(const fmt::PackHead &ph, uint64_t handle, uint32_t npages, uint64_t bytes, size_t cap,
                        uint32_t ps, uint32_t pool_sb);
    static bool entry_ok(const fmt::PackEntry &e, const fmt::PackHead &ph);

  private:
    unsigned char *data_ = nullptr;
    uint32_t page_shift_ = 12, page_size_ = 0, summary_bytes_ = 0;
};

}  // namespace speckv
