// SPDX-License-Identifier: Apache-2.0
// ColdRequests: the channel through which processes that do not hold the
// L4 tier ask the one that does to bring a block back (docs/tiers.md §9.1).
// The rows live in the shared header (fmt::ColdRequest, kColdRequests of
// them); a requester claims a free row, posts its handle and waits on a
// futex for the answer (ask), or posts without waiting (post_detached, the
// prefetch thread); the holder's server thread takes posted rows, promotes
// each block through the job it was given, answers, wakes the requesters and
// frees rows their requesters left behind. It knows nothing of the pool but
// the shared header: promotion and what follows it are the holder's jobs
// (Serve), given at start.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "pool/pool_format.h"

namespace speckv {

class ColdRequests {
  public:
    void bind(fmt::SharedHeader *sh) { sh_ = sh; }

    // A process without L4 asks the holder to bring `handle` back and waits
    // up to wait_ms. SPECKV_OK: answered OK, or the row was freed under us
    // (the caller re-checks where the block is); SPECKV_ENOENT: no live
    // process holds L4; SPECKV_EBUSY: not answered in time; else the
    // holder's error, with a message.
    int ask(uint64_t handle, uint32_t wait_ms) const;
    // The same without waiting for the answer: best effort (at most half the
    // rows are such requests, one per block).
    void post_detached(uint64_t handle) const;

    // The holder's side.
    struct Serve {
        std::function<int(uint64_t handle)> promote;  // bring it back; SPECKV_OK or why not
        // After each request: rc is promote's; requester the asking process.
        std::function<void(uint64_t handle, int rc, uint32_t requester)> done;
        std::function<void()> idle;  // nothing was posted this round (deferred I/O)
    };
    // Starts the server thread. SPECKV_ENOMEM if it cannot.
    int start(Serve s);
    // Stops and joins it (no-op if not running).
    void stop();
    // A fork() child: the thread is the parent's; forget it without joining.
    void forget_after_fork() { (void)thr_.release(); }

  private:
    void serve();
    fmt::SharedHeader *sh_ = nullptr;
    Serve s_;
    std::unique_ptr<std::thread> thr_;
    std::atomic<bool> stop_{false};
};

}  // namespace speckv
