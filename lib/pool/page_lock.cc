// SPDX-License-Identifier: Apache-2.0
#include "pool/page_lock.h"

#include <sched.h>

#include <cinttypes>

#include "speckv.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;

int PageLocks::lock(uint64_t page, uint64_t handle, const BlockRecord *rec, int attach_slot, uint64_t *seq,
                    uint64_t tseq) {
    PageEntry &pe = pages_[page];
    for (;;) {
        uint64_t q;
        if (int rc = wait_even(pe, &q); rc != SPECKV_OK) return rc;
        if (pe.seq.compare_exchange_weak(q, q + 1, std::memory_order_seq_cst)) {
            // Tag the page with our attach slot: if we die now, recovery
            // knows whose write this was (kPageWriterMask).
            if (attach_slot >= 0) pe.flags.fetch_or(uint32_t(attach_slot + 1) << kPageWriterShift, std::memory_order_relaxed);
            if (rec->handle.load(std::memory_order_seq_cst) != handle) {
                pe.flags.fetch_and(~kPageWriterMask, std::memory_order_relaxed);
                pe.seq.store(q + 2, std::memory_order_release);
                return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " was freed during the write", handle);
            }
            if (tseq != UINT64_MAX && rec->tier_seq.load(std::memory_order_seq_cst) != tseq) {
                pe.flags.fetch_and(~kPageWriterMask, std::memory_order_relaxed);
                pe.seq.store(q + 2, std::memory_order_release);
                return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " moved between tiers during the write", handle);
            }
            *seq = q;
            return SPECKV_OK;
        }
    }
}

int PageLocks::wait_even(const PageEntry &pe, uint64_t *seq) const {
    // A page is odd only for the length of one page copy; a long wait means
    // the writer died mid-write (recovery on the next open repairs it).
    for (uint64_t spins = 0;; spins++) {
        uint64_t q = pe.seq.load(std::memory_order_acquire);
        if (!(q & 1)) {
            *seq = q;
            return SPECKV_OK;
        }
        if (spins > 64) sched_yield();
        if (spins > 200000) {
            uint64_t p = static_cast<uint64_t>(&pe - pages_);
            return fail(SPECKV_EBUSY, "page %" PRIu64 " stays locked by a writer (dead process? run speckv pool check)", p);
        }
    }
}

uint64_t PageLocks::claim(PageEntry &pe) const {
    for (;;) {
        uint64_t q;
        if (wait_even(pe, &q) != SPECKV_OK) {
            clear_error();
            return pe.seq.load() & ~uint64_t(1);  // a dead writer: the page is ours now
        }
        if (pe.seq.compare_exchange_weak(q, q + 1)) return q;
    }
}

}  // namespace speckv
