// SPDX-License-Identifier: Apache-2.0
// The L4 cold file's extent allocator (tiers/cold_tier.h ExtentAllocator):
// free extents by offset and by length, best fit (the smallest extent that
// fits), frees coalesced with their neighbours.
#include "tiers/cold_tier.h"

#include <algorithm>

namespace speckv {

ExtentAllocator::ExtentAllocator(uint64_t total_blocks) : total_(total_blocks), free_(0) {
    if (total_blocks) insert(0, total_blocks);
}

void ExtentAllocator::insert(uint64_t off, uint64_t len) {
    by_off_.emplace(off, len);
    by_len_.emplace(len, off);
    free_ += len;
}

void ExtentAllocator::erase(std::map<uint64_t, uint64_t>::iterator it) {
    by_len_.erase({it->second, it->first});
    free_ -= it->second;
    by_off_.erase(it);
}

bool ExtentAllocator::alloc(uint64_t n, uint64_t *first) {
    if (n == 0) return false;
    auto best = by_len_.lower_bound({n, 0});  // smallest extent that fits
    if (best == by_len_.end()) return false;
    uint64_t off = best->second, len = best->first;
    erase(by_off_.find(off));
    if (len > n) insert(off + n, len - n);
    *first = off;
    return true;
}

void ExtentAllocator::release(uint64_t first, uint64_t n) {
    if (n == 0) return;
    uint64_t off = first, len = n;
    auto next = by_off_.lower_bound(first);
    if (next != by_off_.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == off) {
            off = prev->first;
            len += prev->second;
            erase(prev);
        }
    }
    next = by_off_.lower_bound(first);
    if (next != by_off_.end() && next->first == first + n) {
        len += next->second;
        erase(next);
    }
    insert(off, len);
}

bool ExtentAllocator::reserve(uint64_t first, uint64_t n) {
    auto it = by_off_.upper_bound(first);
    if (it == by_off_.begin()) return false;
    --it;
    uint64_t off = it->first, len = it->second;
    if (first + n > off + len) return false;
    erase(it);
    if (first > off) insert(off, first - off);
    if (off + len > first + n) insert(first + n, off + len - first - n);
    return true;
}

uint64_t ExtentAllocator::largest_free() const { return by_len_.empty() ? 0 : by_len_.rbegin()->first; }

}  // namespace speckv
