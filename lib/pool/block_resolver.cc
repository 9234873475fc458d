// SPDX-License-Identifier: Apache-2.0
#include "pool/block_resolver.h"

#include <sched.h>
#include <time.h>

#include "pool/pool_internal.h"

namespace speckv {

int BlockResolver::wait_move(uint64_t handle, uint32_t spins, uint64_t *deadline) const {
    if (spins < 64) return SPECKV_OK;
    sched_yield();
    // A move holds the pool lock: it lasts as long as the lock may be held.
    const int timeout_ms = lock_ ? lock_->timeout_ms() : 5000;
    const uint64_t now = now_ns(CLOCK_MONOTONIC_COARSE);
    if (!*deadline) *deadline = now + uint64_t(timeout_ms) * 1000000u;
    else if (now > *deadline)
        return fail(SPECKV_EBUSY,
                    "block 0x%" PRIx64 " stayed in the middle of a move for %d ms (lock.timeout_ms): a process died "
                    "moving it? (the next recovery finishes the move)",
                    handle, timeout_ms);
    return SPECKV_OK;
}

}  // namespace speckv
