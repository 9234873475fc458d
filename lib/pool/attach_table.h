// SPDX-License-Identifier: Apache-2.0
// The attach records (docs/pool-format.md "Attach records"): the table of
// kMaxAttach processes attached to a pool, in its shared header.
// AttachTable owns the questions asked of it under the pool lock: whether a
// process attached there has died, whether recovery is due before a new
// attach, and the claim of a free record for this process. Invariants: every
// call is made with the pool lock held; a record is live iff its pid is
// non-zero; `attached` counts the live records after a claim; a claim never
// hands out a record before recovery has freed what its dead owner held
// (the caller asks recovery_due_locked first). Giving a record up stays in
// Pool::close, with the rest of the detach.
#pragma once
#include <cstdint>

#include "pool/pool_format.h"

namespace speckv {

class AttachTable {
  public:
    explicit AttachTable(fmt::SharedHeader *sh) : sh_(sh) {}
    // Whether a process with a live record no longer runs.
    bool any_dead_locked() const;
    // Why recovery must run before a process attaches (a dead process's
    // record, or a pool nobody closed cleanly), or null.
    const char *recovery_due_locked() const;
    struct Claim {
        int slot = -1;    // the record's index
        uint64_t id = 0;  // its AttachRecord::id
    };
    // Takes a free record for this process (SPECKV_EBUSY when all are live).
    int claim_locked(Claim *out);

  private:
    fmt::SharedHeader *sh_;
};

}  // namespace speckv
