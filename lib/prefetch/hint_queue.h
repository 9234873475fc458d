// SPDX-License-Identifier: Apache-2.0
// The prefetch engine's thread and queue (docs/tiers.md): speckv_prefetch
// queues a hint and returns; one thread per pool handle takes the hints in
// order and hands each to the work it was started with (the pool's
// prefetcher), and ticks that work when the queue stays empty. The queue
// knows no pool: the work is passed in.
//
// fork(): a child holds a copy of the queue but not its thread, and the
// parent's thread may have held the queue's lock at the fork; stop() in the
// child lets go of thread, lock and condition variable without touching
// them (they are on the heap so that they can leak).
#pragma once
#include <sys/types.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "speckv.h"

namespace speckv {

// A queued hint, with the read-step clock (ReaderClocks) when it was given.
struct QueuedHint {
    speckv_hint h;
    uint64_t clock;
};

class HintQueue {
  public:
    // What the thread runs. prepare: once, before the thread starts, under
    // the queue's lock (a failure is push's). started: once the thread runs.
    // hint: each hint taken (newer: the queue holds hints given after it).
    // tick: after each hint, and every tick_ns while the queue is empty.
    struct Work {
        std::function<int()> prepare;
        std::function<void()> started;
        std::function<void(const QueuedHint &, bool newer)> hint;
        std::function<void()> tick;
    };
    HintQueue() = default;
    HintQueue(const HintQueue &) = delete;
    HintQueue &operator=(const HintQueue &) = delete;
    ~HintQueue() { stop(); }

    // At most cap hints queued (the oldest goes for a new one); the idle
    // tick; what the thread runs. Before the first push.
    // sync: no thread; push carries the hint out on the caller's thread
    // (one caller at a time), then the tick; there is no idle tick.
    void configure(size_t cap, uint64_t tick_ns, Work work, bool sync = false) {
        cap_ = cap;
        tick_ns_ = tick_ns;
        work_ = std::move(work);
        sync_ = sync;
    }
    // Queues h, starting the thread on the first call.
    // *dropped: the oldest queued hint went to make room for it.
    int push(const QueuedHint &h, bool *dropped);
    // Stops and joins the thread and empties the queue (in a fork() child:
    // lets go, see above). Idempotent.
    void stop();
    // Whether the caller is the queue's thread, or (sync) is carrying out a hint.
    bool on_thread() const {
        return t_running_ == this || (thread_ && thread_->get_id() == std::this_thread::get_id());
    }

  private:
    int start_locked();
    void run();

    int push_sync(const QueuedHint &h);

    static thread_local const HintQueue *t_running_;  // the queue whose hint this thread carries out (sync)
    bool sync_ = false;
    size_t cap_ = 0;
    uint64_t tick_ns_ = 0;
    Work work_;
    std::unique_ptr<std::mutex> mu_ = std::make_unique<std::mutex>();
    std::unique_ptr<std::condition_variable> cv_ = std::make_unique<std::condition_variable>();
    std::deque<QueuedHint> q_;
    bool stop_ = false, started_ = false;
    std::unique_ptr<std::thread> thread_;
    pid_t pid_ = 0;  // the process the thread runs in
};

}  // namespace speckv
