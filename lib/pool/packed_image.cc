// SPDX-License-Identifier: Apache-2.0
// The validating accessors of a packed block's image (pool/packed_image.h).
#include "pool/packed_image.h"

#include <cstring>

#include "codec/codec.h"
#include "util/seqlock.h"

namespace speckv {

using namespace fmt;

namespace {

void pool_copy(void *dst, const void *src, size_t n) {
    SEQLOCK_IGNORE_BEGIN();  // an image is immutable while its block names it; callers re-check that after
    std::memcpy(dst, src, n);
    SEQLOCK_IGNORE_END();
}

}  // namespace

// The head of an image in `cap` bytes (its block record's packed_pages) of
// block `handle` (npages pages, `bytes` bytes), in a pool of page size ps and
// summary slots of pool_sb bytes: it names that block, fills its last page,
// and its directory and summary slots fit before image_bytes.
bool PackedImage::head_ok(const PackHead &ph, uint64_t handle, uint32_t npages, uint64_t bytes, size_t cap, uint32_t ps,
                          uint32_t pool_sb) {
    return ph.magic == kPackMagic && ph.npages == npages && ph.handle == handle && ph.bytes == bytes &&
           ph.page_size == ps && (ph.summary_bytes == 0 || ph.summary_bytes == pool_sb) && ph.image_bytes <= cap &&
           ph.image_bytes + ps > cap && meta_bytes(ph) <= ph.image_bytes;
}

// Entry e of an image whose head passed head_ok. A zero page is exactly what
// pack_block writes (flag kPageZero alone, offset and length 0: a zero entry
// that also says coded, or names bytes, is damage, not zeros); any other is a
// codec record (kPageCoded) or a page in clear, 8-byte aligned, past the
// summary slots, inside image_bytes, with no flag but kPageCoded and
// kPageSummary.
bool PackedImage::entry_ok(const PackEntry &e, const PackHead &ph) {
    if (e.flags & kPageZero) return e.flags == kPageZero && e.off == 0 && e.len == 0;
    if (e.flags & ~(kPageCoded | kPageSummary)) return false;
    if (e.off % 8 || e.off < meta_bytes(ph) || e.off > ph.image_bytes || e.len > ph.image_bytes - e.off) return false;
    if (e.flags & kPageCoded) return e.len >= codec::kHeaderSize && e.len <= codec::max_record_size(ph.page_size);
    return e.len == ph.page_size;
}

bool PackedImage::head(const BlockView &v, PackHead *ph) const {
    if (!v.packed || v.cold()) return false;
    const size_t cap = size_t(v.packed) << page_shift_;
    pool_copy(ph, data_ + (v.first_page << page_shift_), sizeof *ph);  // cap >= one page > sizeof *ph
    return head_ok(*ph, v.rec->handle.load(std::memory_order_acquire), v.npages, v.bytes, cap, page_size_, summary_bytes_);
}

bool PackedImage::entry(const BlockView &v, uint32_t i, PackEntry *e) const {
    PackHead ph;
    if (i >= v.npages || !head(v, &ph)) return false;
    pool_copy(e, data_ + (v.first_page << page_shift_) + sizeof(PackHead) + size_t(i) * sizeof(PackEntry), sizeof *e);
    return entry_ok(*e, ph);  // head_ok: the directory lies inside the image
}

}  // namespace speckv
