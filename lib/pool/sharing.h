// SPDX-License-Identifier: Apache-2.0
// Sharing (docs/sharing.md): publish a block under its content hash, look a
// hash up (lock-free, falling back to the lock when the index keeps
// changing), tenant quotas and usage. Over the tenant rows and hash index of
// share/share_table.h, the block table's references (pool/block_table.h)
// and the page locks; the pool lock comes as a port (LockPort), and a
// block in L4 is brought back through the L4 role before it is published.
#pragma once
#include <cstdint>
#include <functional>

#include "events/fwd.h"
#include "pool/block_resolver.h"
#include "pool/block_table.h"
#include "pool/image.h"
#include "pool/page_lock.h"
#include "pool/pool_lock.h"
#include "share/share_table.h"

namespace speckv {
class ColdRole;

class Sharing {
  public:
    struct Parts {
        BlockResolver *resolver;
        BlockTable *blocks;
        ShareTable *share;
        PageLocks *plocks;
        ColdRole *cold;
    };
    void bind(const PoolLayout &L, const Parts &parts, bool read_only) {
        L_ = L;
        p_ = parts;
        read_only_ = read_only;
    }
    void set_lock(LockPort p) { lock_ = std::move(p); }
    void set_attach_slot(int slot) { attach_slot_ = slot; }
    void set_events(events::Publisher *e) { events_ = e; }
    void set_flush(bool flush) { flush_ = flush; }

    // speckv_publish, speckv_lookup, speckv_tenant_set_quota, speckv_tenant_usage.
    int publish(uint64_t handle, const uint8_t *hash, uint64_t *canonical);
    int lookup(uint64_t tenant, const uint8_t *hash, uint64_t *out);
    int set_quota(uint64_t tenant, uint64_t max_pages);
    int usage(uint64_t tenant, uint64_t *used, uint64_t *quota) const;

  private:
    int lock(bool *rec) { return lock_.lock(rec); }
    void unlock() { lock_.unlock(); }
    int resolve(uint64_t handle, BlockView *v) const { return p_.resolver->resolve(handle, v); }

    PoolLayout L_;
    Parts p_{};
    LockPort lock_;
    events::Publisher *events_ = nullptr;
    int attach_slot_ = -1;
    bool read_only_ = false;
    bool flush_ = false;  // config share.flush: explicit write-back / invalidation
};

}  // namespace speckv
