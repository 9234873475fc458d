// SPDX-License-Identifier: Apache-2.0
// Pre-faulting a pool mapping at attach (issue 27): the first pass over a
// pool after attaching otherwise takes one page fault per 4 KiB page touched.
#pragma once
#include <cstddef>

namespace speckv {

// Populates the page tables of [base, base + size) in one call
// (MADV_POPULATE_WRITE for a writable mapping, MADV_POPULATE_READ else) when
// size <= limit (0: never), and asks for transparent huge pages on it
// (MADV_HUGEPAGE; effective where the kernel enables them for shared memory).
// Best effort: an older kernel or a refusal leaves the mapping as it was.
// Returns whether the page tables were populated.
bool prefault_mapping(void *base, size_t size, bool writable, size_t limit);

}  // namespace speckv
