// SPDX-License-Identifier: Apache-2.0
// The pool lock: the one robust, process-shared mutex in the shared header
// (docs/pool-format.md "Lock"). PoolLock owns how it is taken (a trylock
// first, then a wait of at most lock.timeout_ms), how a lock left by a dead
// owner is made consistent again, and the messages of each failure. It
// never recovers anything itself: acquire() reports that the previous owner
// died and the caller, holding the lock, runs recovery before anything else
// reads the metadata. Invariants: bound to the header of a validated image
// before first use; release() only by the thread whose acquire() succeeded.
#pragma once
#include <functional>

#include "pool/pool_format.h"

namespace speckv {

class PoolLock {
  public:
    void bind(fmt::SharedHeader *sh) { sh_ = sh; }
    void set_timeout_ms(int ms) { timeout_ms_ = ms; }
    int timeout_ms() const { return timeout_ms_; }
    // SPECKV_OK with the lock held (*owner_died: the previous owner died
    // holding it, the metadata may be half-changed); SPECKV_EBUSY after the
    // timeout, SPECKV_ECORRUPT for a lock never initialised or unrecoverable.
    int acquire(bool *owner_died);
    void release();

  private:
    fmt::SharedHeader *sh_ = nullptr;
    int timeout_ms_ = 5000;  // config lock.timeout_ms
};

// The pool lock as a part gets it from the pool (Pool::lock: acquire, then
// recovery when the previous owner died). Parts that commit under the lock
// (ColdRole, Sharing, Packer, Allocator, Translator) take one; they never
// hold the PoolLock itself.
struct LockPort {
    std::function<int(bool *recovered)> lock;
    std::function<void()> unlock;
};

// The lock, and recovery on demand: for parts that may find what a dead
// process held in their way (Packer, Allocator).
struct LockRecoverPort {
    LockPort pool_lock;
    // Under the lock: recovery now if an attached process died (it frees what it held).
    std::function<void(const char *why)> recover_if_dead_locked;
};

}  // namespace speckv
