// SPDX-License-Identifier: Apache-2.0
// The attach records (pool/attach_table.h).
#include "pool/attach_table.h"

#include <unistd.h>

#include "pool/image.h"
#include "pool/pool_internal.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;

bool AttachTable::any_dead_locked() const {
    for (const AttachRecord &a : sh_->attach) {
        uint32_t pid = a.pid.load();
        if (pid && !process_alive(pid, a.start_time)) return true;
    }
    return false;
}

const char *AttachTable::recovery_due_locked() const {
    bool anyone = false;
    for (const AttachRecord &a : sh_->attach) anyone |= a.pid.load() != 0;
    if (any_dead_locked()) return "attached processes died";
    if (!anyone && sh_->clean.load() == 0) return "the pool was not closed cleanly";
    return nullptr;
}

int AttachTable::claim_locked(Claim *out) {
    SharedHeader *h = sh_;
    int freeslot = -1;
    uint32_t live = 0;
    for (uint32_t i = 0; i < kMaxAttach; i++) {
        if (h->attach[i].pid.load()) live++;
        else if (freeslot < 0) freeslot = static_cast<int>(i);
    }
    h->attached = live;
    if (freeslot < 0) return fail(SPECKV_EBUSY, "%u processes are attached: no attach record free", kMaxAttach);
    AttachRecord &a = h->attach[freeslot];
    a.start_time = proc_start_time(getpid());
    a.attach_ns = now_ns();
    a.epoch = h->epoch.load();
    a.id = ++h->next_attach_id;
    a.lookups.store(0);
    a.lookup_hits.store(0);
    a.dedup_bytes.store(0);
    for (auto &t : a.tier) t.store(0);
    a.pid.store(static_cast<uint32_t>(getpid()));
    h->attached++;
    h->clean.store(0);
    out->slot = freeslot;
    out->id = a.id;
    return SPECKV_OK;
}

}  // namespace speckv
