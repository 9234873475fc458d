// SPDX-License-Identifier: Apache-2.0
// Where a block's pages go (docs/pool-format.md "Allocation"): RoomFinder
// searches the page bitmap for a run of free pages, first fit from the
// shared allocation cursor, for a new block (which also needs a free slot)
// or a block that moves (pack, unpack, back from L4); with layer-aware
// placement it prefers the pages right after its unit's last block, or a run
// with alloc.unit_slack blocks of room to grow. It owns the search and
// nothing else: it never marks a page used, moves the cursor or evicts
// (BlockTable::commit_new_locked and the eviction/demotion paths do). Invariants:
// every call is made under the pool lock, over the layout of a validated
// image; an answer is a run inside [0, n_pages) that was free when it was read.
#pragma once
#include <cstdint>

#include "pool/image.h"

namespace speckv {

// Where alloc places a block: its pages, the run found, the slack reserved.
struct AllocPlace {
    uint64_t np = 0, first = UINT64_MAX, reserved = 0;
    uint64_t after = UINT64_MAX;  // the unit's end (layer-aware placement), or UINT64_MAX
    bool unit = false, follows = false;
};

class RoomFinder {
  public:
    void bind(const PoolLayout &L) { L_ = L; }
    void set_unit_slack(uint32_t blocks) { unit_slack_ = blocks; }
    uint32_t unit_slack() const { return unit_slack_; }
    // A free slot and a run of np free pages (*first). With slack > 0 a run
    // of np + slack is preferred (*reserved = slack then, else 0): room for
    // the block's unit to grow in place.
    bool find_room_locked(uint64_t np, uint64_t *first, uint64_t slack = 0, uint64_t *reserved = nullptr) const;
    // A run of np free pages, no slot needed: for a block that moves.
    bool find_pages_locked(uint64_t np, uint64_t *first) const;
    // Room for pl->np pages: right after pl->after when that is free,
    // else find_room_locked with the unit's slack (pl->unit).
    bool place_locked(AllocPlace *pl) const;

  private:
    PoolLayout L_;
    uint32_t unit_slack_ = 8;  // config alloc.unit_slack: blocks of room kept after a unit's first block
};

}  // namespace speckv
