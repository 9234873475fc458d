// SPDX-License-Identifier: Apache-2.0
// Where a block's pages go (pool/room.h).
#include "pool/room.h"

#include <algorithm>

namespace speckv {

using namespace fmt;

namespace {
// First run of n clear bits in [from, to), or UINT64_MAX.
uint64_t find_run(const uint64_t *bm, uint64_t from, uint64_t to, uint64_t n) {
    uint64_t run = 0, start = 0;
    for (uint64_t i = from; i < to;) {
        uint64_t w = bm[i / 64];
        if ((i % 64) == 0 && w == ~uint64_t(0)) {
            run = 0;
            i += 64;
            continue;
        }
        if ((i % 64) == 0 && w == 0 && i + 64 <= to) {
            if (run == 0) start = i;
            run += 64;
            i += 64;
            if (run >= n) return start;
            continue;
        }
        if (w >> (i % 64) & 1) {
            run = 0;
        } else {
            if (run == 0) start = i;
            if (++run >= n) return start;
        }
        i++;
    }
    return UINT64_MAX;
}
}  // namespace

bool RoomFinder::find_room_locked(uint64_t np, uint64_t *first, uint64_t slack, uint64_t *reserved) const {
    const Superblock &s = *L_.sb;
    const SharedHeader *h = L_.sh;
    *first = UINT64_MAX;
    if (reserved) *reserved = 0;
    if (!h->slot_free_head && h->slot_hwm >= s.max_blocks) return false;
    uint64_t cur = h->alloc_cursor < s.n_pages ? h->alloc_cursor : 0;
    if (slack && np + slack <= s.n_pages) {  // ahead of the cursor only: behind it lie other units' slack
        *first = find_run(L_.bitmap, cur, s.n_pages, np + slack);
        if (*first != UINT64_MAX) {
            if (reserved) *reserved = slack;
            return true;
        }
    }
    return find_pages_locked(np, first);
}

bool RoomFinder::find_pages_locked(uint64_t np, uint64_t *first) const {
    const Superblock &s = *L_.sb;
    const uint64_t cur = L_.sh->alloc_cursor < s.n_pages ? L_.sh->alloc_cursor : 0;
    *first = find_run(L_.bitmap, cur, s.n_pages, np);
    if (*first == UINT64_MAX) *first = find_run(L_.bitmap, 0, std::min(s.n_pages, cur + np - 1), np);
    return *first != UINT64_MAX;
}

bool RoomFinder::place_locked(AllocPlace *pl) const {
    const Superblock &s = *L_.sb;
    const SharedHeader *h = L_.sh;
    const uint64_t *bm = L_.bitmap;
    const uint64_t after = pl->after, np = pl->np;
    pl->follows = false;
    if (after != UINT64_MAX && after + np <= s.n_pages && (h->slot_free_head || h->slot_hwm < s.max_blocks)) {
        uint64_t p = after;
        while (p < after + np && !(bm[p / 64] >> (p % 64) & 1)) p++;
        if (p == after + np) {
            pl->first = after;
            pl->follows = true;
            return true;
        }
    }
    return find_room_locked(np, &pl->first, pl->unit ? uint64_t(unit_slack_) * np : 0, &pl->reserved);
}

}  // namespace speckv
