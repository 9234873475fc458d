// SPDX-License-Identifier: Apache-2.0
// PageWriter: the write side of the page protocol (docs/pool-format.md
// "Pages"), beside PageReader. A page is changed only under its page lock
// (pool/page_lock.h): a write copies its bytes in with their CRC32C in the
// same pass; the write that completes a page codes it as its block's preset
// says (pool/page_encoder.h), gives a K page its selection summary and hands
// L1 the values a read will return. A pin's first look at a page makes the
// pool's bytes show those values (zeros materialised, a codec record stored
// decoded) or checks them in place.
//
// It gets the layout, the page locks, the reader (decode and in-place
// checks), the codec choice, the selector and the counters when the pool is
// bound, and L1 once it exists; it never holds the Pool.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "pool/block_view.h"
#include "pool/codec_choice.h"
#include "pool/counters.h"
#include "pool/image.h"
#include "pool/log.h"
#include "pool/page_lock.h"
#include "pool/page_reader.h"
#include "pool/pool_format.h"
#include "speckv.h"
#include "tiers/page_cache.h"

namespace speckv {

class Selector;  // pool/selector.h

class PageWriter {
  public:
    struct Parts {
        PageLocks *plocks;
        PageReader *reader;
        CodecChoice *codec;
        Selector *sel;
        PoolCounters *counters;
        const PoolLog *log;
    };
    void bind(const PoolLayout &L, const Parts &parts) {
        L_ = L;
        p_ = parts;
    }
    void set_l1(PageCache *l1) { l1_ = l1; }
    void set_attach_slot(int slot) { attach_slot_ = slot; }

    // Bytes [pos, pos + plen) of block `handle` (view r, one page by one,
    // plen within the page) from src. *moved: the block went to L4 or came
    // back since r was resolved; nothing was written, resolve and retry.
    int write_page(const BlockView &r, uint64_t handle, uint64_t pos, const unsigned char *src, size_t plen, bool *moved);
    // Pool page `page` of block `handle` (view r) made ready for a pin: its
    // bytes in the pool show what a read returns, checked. *moved as above.
    // Inline: a page this process has checked already costs a few loads.
    __attribute__((always_inline)) int prepare_pin(const BlockView &r, uint64_t handle, uint64_t page, bool *moved) {
        *moved = false;
        const fmt::PageEntry &pe = L_.pages[page];
        if (pe.flags.load(std::memory_order_acquire) & (fmt::kPageZero | fmt::kPageCoded))
            return materialize(r, handle, page, moved);
        // This process holds a verified copy of exactly this version of the
        // page (L1), or checksummed it in place at an earlier pin: the bytes
        // in the pool were checked already, as a cached read would trust them.
        const uint64_t ep = epoch(), s1 = pe.seq.load(std::memory_order_acquire);
        if (!(s1 & 1) && !(pe.flags.load(std::memory_order_acquire) & fmt::kPageQuarantined) &&
            (l1_->verified(page, s1, ep) || l1_->contains(page, s1, ep)))
            return SPECKV_OK;
        return check_in_place(page);
    }

  private:
    int materialize(const BlockView &r, uint64_t handle, uint64_t page, bool *moved);
    int check_in_place(uint64_t page);  // checksum it in place, and note it
    unsigned char *page_data(uint64_t p) const { return L_.page_data(p); }
    uint64_t epoch() const { return L_.sh->epoch.load(std::memory_order_relaxed); }

    PoolLayout L_;
    Parts p_{};
    PageCache *l1_ = nullptr;
    int attach_slot_ = -1;
};

}  // namespace speckv
