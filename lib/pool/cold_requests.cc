// SPDX-License-Identifier: Apache-2.0
// The L4 holder's request channel (pool/cold_requests.h).
#include "pool/cold_requests.h"

#include <inttypes.h>
#include <unistd.h>

#include "pool/cold_payload.h"
#include "pool/image.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;

int ColdRequests::start(Serve s) {
    s_ = std::move(s);
    stop_.store(false);
    try {
        thr_ = std::make_unique<std::thread>([this] { serve(); });
    } catch (...) {
        return fail(SPECKV_ENOMEM, "L4 tier: cannot start the thread that serves other processes' requests");
    }
    return SPECKV_OK;
}

void ColdRequests::stop() {
    if (!thr_) return;
    stop_.store(true, std::memory_order_release);
    sh_->cold_req_seq.fetch_add(1, std::memory_order_acq_rel);
    futex_wake_all(&sh_->cold_req_seq);
    thr_->join();
    thr_.reset();
}

// The holder's server: waits on cold_req_seq, brings back each posted
// block, answers in its row and wakes the requesters. Rows left behind by
// dead requesters (or by a dead earlier holder mid-serve) are freed when
// it is idle.
void ColdRequests::serve() {
    SharedHeader *h = sh_;
    const uint32_t me = uint32_t(getpid());
    uint64_t last_sweep = 0;
    uint64_t answered[kColdRequests] = {};  // handle of each row answered at the last sweep
    while (!stop_.load(std::memory_order_acquire)) {
        const uint32_t seen = h->cold_req_seq.load(std::memory_order_acquire);
        bool served = false;
        for (uint32_t i = 0; i < kColdRequests; i++) {
            ColdRequest &q = h->cold_req[i];
            uint32_t st = kReqPosted;
            if (!q.state.compare_exchange_strong(st, kReqServing, std::memory_order_acq_rel)) continue;
            q.server.store(me, std::memory_order_relaxed);
            const uint64_t hd = q.handle.load(std::memory_order_relaxed);
            const bool detached = q.rc.load(std::memory_order_relaxed) == kReqDetached;
            const int rc = s_.promote(hd);
            if (rc == SPECKV_OK) h->cold_remote.fetch_add(1, std::memory_order_relaxed);
            s_.done(hd, rc, q.pid.load(std::memory_order_relaxed));
            clear_error();
            if (detached) {  // nobody waits for the answer
                q.state.store(kReqFree, std::memory_order_release);
                continue;
            }
            q.rc.store(rc, std::memory_order_relaxed);
            q.state.store(kReqAnswered, std::memory_order_release);
            served = true;
        }
        if (served) {
            h->cold_ans_seq.fetch_add(1, std::memory_order_acq_rel);
            futex_wake_all(&h->cold_ans_seq);
        }
        const uint64_t now = mono_ns();
        if (now - last_sweep > 1000000000ull) {  // once a second: rows nobody will free
            last_sweep = now;
            for (uint32_t i = 0; i < kColdRequests; i++) {
                ColdRequest &q = h->cold_req[i];
                uint32_t st = q.state.load(std::memory_order_acquire);
                const uint64_t hd = q.handle.load(std::memory_order_relaxed);
                // Answered at two sweeps in a row: its requester gave up
                // waiting (a live one reads its answer within ~20 ms).
                const bool stale = st == kReqAnswered && answered[i] == hd;
                answered[i] = st == kReqAnswered ? hd : 0;
                if (st == kReqFree || st == kReqServing) continue;
                if (stale || !process_alive(q.pid.load(std::memory_order_relaxed), q.start_time)) {
                    if (q.state.compare_exchange_strong(st, kReqFree)) answered[i] = 0;
                }
            }
        }
        if (!served) {
            // Idle: clear the on-disk headers of copies promoted or freed
            // since (forget() left that I/O out of the pool lock).
            s_.idle();
            futex_wait(&h->cold_req_seq, seen, 100000000ull);
        }
    }
}

void ColdRequests::post_detached(uint64_t handle) const {
    SharedHeader *h = sh_;
    // At most half the rows for requests nobody waits for, one per block.
    uint32_t detached = 0;
    for (uint32_t i = 0; i < kColdRequests; i++) {
        const ColdRequest &q = h->cold_req[i];
        uint32_t st = q.state.load(std::memory_order_acquire);
        if ((st == kReqPosted || st == kReqServing) && q.rc.load(std::memory_order_relaxed) == kReqDetached) {
            if (q.handle.load(std::memory_order_relaxed) == handle) return;
            detached++;
        }
    }
    if (detached >= kColdRequests / 2) return;
    for (uint32_t i = 0; i < kColdRequests; i++) {
        ColdRequest &q = h->cold_req[i];
        uint32_t st = kReqFree;
        if (!q.state.compare_exchange_strong(st, kReqClaimed, std::memory_order_acq_rel)) continue;
        q.pid.store(uint32_t(getpid()), std::memory_order_relaxed);
        q.start_time = proc_start_time(getpid());
        q.handle.store(handle, std::memory_order_relaxed);
        q.rc.store(kReqDetached, std::memory_order_relaxed);
        q.server.store(0, std::memory_order_relaxed);
        q.state.store(kReqPosted, std::memory_order_release);
        h->cold_req_seq.fetch_add(1, std::memory_order_acq_rel);
        futex_wake_all(&h->cold_req_seq);
        return;
    }
}

int ColdRequests::ask(uint64_t handle, uint32_t wait_ms) const {
    SharedHeader *h = sh_;
    const uint64_t deadline = mono_fine_ns() + uint64_t(wait_ms) * 1000000ull;
    auto holder_pid = [&]() -> uint32_t {
        uint32_t pid = h->cold_pid.load();
        return pid && process_alive(pid, h->cold_start_time) ? pid : 0;
    };
    auto timed_out = [&](uint32_t pid) {
        return fail(SPECKV_EBUSY,
                    "block 0x%" PRIx64 " is in the L4 cold tier held by process %u, which did not bring it back within "
                    "cold.wait_ms = %u ms",
                    handle, pid, wait_ms);
    };
    const uint32_t me = uint32_t(getpid());
    ColdRequest *q = nullptr;
    while (!q) {  // claim a free row
        for (uint32_t i = 0; i < kColdRequests && !q; i++) {
            uint32_t st = kReqFree;
            if (h->cold_req[i].state.compare_exchange_strong(st, kReqClaimed, std::memory_order_acq_rel))
                q = &h->cold_req[i];
        }
        if (q) break;
        uint32_t pid = holder_pid();
        if (!pid) return SPECKV_ENOENT;  // nobody to ask: the caller says so
        if (mono_fine_ns() >= deadline) return timed_out(pid);
        usleep(1000);  // every row is taken: rows free as requests are answered
    }
    q->pid.store(me, std::memory_order_relaxed);
    q->start_time = proc_start_time(pid_t(me));
    q->handle.store(handle, std::memory_order_relaxed);
    q->rc.store(SPECKV_OK, std::memory_order_relaxed);
    q->server.store(0, std::memory_order_relaxed);
    q->state.store(kReqPosted, std::memory_order_release);
    h->cold_req_seq.fetch_add(1, std::memory_order_acq_rel);
    futex_wake_all(&h->cold_req_seq);
    for (;;) {
        const uint32_t seen = h->cold_ans_seq.load(std::memory_order_acquire);
        uint32_t st = q->state.load(std::memory_order_acquire);
        if (st == kReqAnswered) {
            int rc = q->rc.load(std::memory_order_relaxed);
            q->state.store(kReqFree, std::memory_order_release);
            if (rc == SPECKV_OK) return SPECKV_OK;
            return fail(rc,
                        "block 0x%" PRIx64 " stays in the L4 cold tier: the process holding it (%u) could not bring it "
                        "back: %s",
                        handle, q->server.load(std::memory_order_relaxed), speckv_strerror(rc));
        }
        const uint32_t pid = holder_pid();
        if (st == kReqServing) {
            uint32_t srv = q->server.load(std::memory_order_relaxed);
            if (srv && srv != pid) {  // its server died mid-serve: post again for the next holder (or give up)
                q->state.store(pid ? kReqPosted : kReqFree, std::memory_order_release);
                if (!pid) return SPECKV_ENOENT;
                h->cold_req_seq.fetch_add(1, std::memory_order_acq_rel);
                futex_wake_all(&h->cold_req_seq);
                continue;
            }
            // Taken, not answered in time (a holder stopped or stuck in
            // I/O): give up; its answer stays in the row until the holder's
            // sweep frees it.
            if (mono_fine_ns() >= deadline) return timed_out(pid);
        } else if (st != kReqPosted) {
            return SPECKV_OK;  // the row was freed under us (not while we wait): ensure_hot re-checks and asks again
        } else if (!pid || mono_fine_ns() >= deadline) {  // posted, not taken: withdraw it
            uint32_t want = kReqPosted;
            if (q->state.compare_exchange_strong(want, kReqFree, std::memory_order_acq_rel))
                return pid ? timed_out(pid) : SPECKV_ENOENT;
            continue;  // the holder took it just now: wait for the answer
        }
        futex_wait(&h->cold_ans_seq, seen, 20000000ull);
    }
}

}  // namespace speckv
