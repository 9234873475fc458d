// SPDX-License-Identifier: Apache-2.0
// Recovery of a pool image (docs/pool-format.md "Recovery"): what an open or
// a `pool repair` does after a process died holding the pool lock, its pages
// or its blocks. Pool runs it under the pool lock; it gets the image's layout
// and the parts it rebuilds, never the Pool.
#pragma once
#include <cstdint>
#include <vector>

#include "pool/image.h"
#include "pool/log.h"
#include "pool/page_decoder.h"
#include "pool/xlate_index.h"
#include "share/share_table.h"

namespace speckv {

class Recovery {
  public:
    Recovery(const PoolLayout &L, ShareTable &share, XlateIndex &xlate, const PageDecoder &dec, const PoolLog &log)
        : L_(L), share_(share), xlate_(xlate), dec_(dec), log_(log) {}
    // Every step below in order, then the two derived indexes; bumps the
    // epoch and the recovery count. `why` goes to the log.
    void run_locked(const char *why);

  private:
    struct Totals {
        uint64_t live = 0, used = 0, by_dtype[4] = {0, 0, 0, 0}, published = 0, shared = 0, reclaimed = 0;
        uint64_t cold_n = 0, cold_b = 0;
    };
    // Dead processes' attach records: freed, their counters kept. Returns
    // the live attach slots' mask; their ids in *live_ids.
    uint64_t recover_attach_locked(std::vector<uint64_t> *live_ids);
    // A block move cut short between its record's stores is finished.
    void finish_cut_move_locked(uint64_t hwm);
    // Validates every record, drops what dead processes held, rebuilds the
    // page bitmap, the tenants' usage and the free-slot list.
    void recover_blocks_locked(uint64_t live_mask, const std::vector<uint64_t> &live_ids, Totals *t);
    // Torn page writes: re-sealed, or quarantined when a coded page's record is cut short.
    void recover_pages_locked(uint64_t live_mask);
    void store_totals_locked(const Totals &t);

    const PoolLayout L_;
    ShareTable &share_;
    XlateIndex &xlate_;
    const PageDecoder &dec_;
    const PoolLog &log_;
};

}  // namespace speckv
