// SPDX-License-Identifier: Apache-2.0
// Explicit cache-line write-back and invalidation, for a pool shared by
// hosts that do not keep each other's caches coherent (docs/sharing.md, "The
// protocol"). Used only when the config key share.flush is 1.
#pragma once
#include <cstddef>

namespace speckv {

// Writes every cache line of [p, p+n) back to memory (CLWB where the CPU has
// it, else CLFLUSHOPT, else CLFLUSH), then SFENCE: stores before the call
// reach memory before any store after it.
void writeback_range(const void *p, size_t n);

// Drops every cache line of [p, p+n) from this CPU's caches (CLFLUSHOPT, else
// CLFLUSH; dirty lines are written back first), then MFENCE: loads after the
// call read memory, i.e. what another host wrote back.
void invalidate_range(const void *p, size_t n);

// Which instruction writeback_range uses: "clwb", "clflushopt", "clflush", or
// "none" (not x86: the calls only fence).
const char *writeback_insn();

}  // namespace speckv
