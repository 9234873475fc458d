// SPDX-License-Identifier: Apache-2.0
// The prefetch engine's thread and queue (prefetch/hint_queue.h).
#include "prefetch/hint_queue.h"

#include <unistd.h>

#include <chrono>
#include <system_error>

#include "util/status.h"

namespace speckv {

thread_local const HintQueue *HintQueue::t_running_ = nullptr;

int HintQueue::push(const QueuedHint &h, bool *dropped) {
    if (sync_) {
        *dropped = false;
        return push_sync(h);
    }
    std::unique_lock g(*mu_);
    if (!started_) {
        if (int rc = start_locked(); rc != SPECKV_OK) return rc;
    }
    // Full: the oldest hint goes (the reader has most likely moved past it),
    // not this one, which says where the reader is now.
    *dropped = false;
    if (q_.size() >= cap_) {
        q_.pop_front();
        *dropped = true;
    }
    q_.push_back(h);
    g.unlock();
    cv_->notify_one();
    return SPECKV_OK;
}

// sync: the hint is carried out here, under mu_ (callers on other threads
// wait their turn), and nothing is queued.
int HintQueue::push_sync(const QueuedHint &h) {
    std::lock_guard g(*mu_);
    if (!started_)
        if (int rc = start_locked(); rc != SPECKV_OK) return rc;
    const HintQueue *outer = t_running_;
    t_running_ = this;
    work_.hint(h, false);
    if (work_.tick) work_.tick();
    t_running_ = outer;
    clear_error();  // what the work met is counted, not the caller's error
    return SPECKV_OK;
}

// Called with mu_ held. sync: no thread to start.
int HintQueue::start_locked() {
    if (work_.prepare)
        if (int rc = work_.prepare(); rc != SPECKV_OK) return rc;
    stop_ = false;
    pid_ = getpid();
    if (!sync_) {
        try {
            thread_ = std::make_unique<std::thread>([this] { run(); });
        } catch (const std::system_error &e) {
            return fail(SPECKV_ENOMEM, "cannot start the prefetch thread: %s", e.what());
        }
    }
    started_ = true;
    if (work_.started) work_.started();
    return SPECKV_OK;
}

void HintQueue::stop() {
    if (!mu_) return;  // a fork() child let go of them already
    if (thread_ && pid_ != getpid()) {
        // A fork() child: the thread is the parent's, and it may have held
        // mu_ at the fork, so take no lock and join nothing here.
        (void)thread_.release();
        (void)cv_.release();
        (void)mu_.release();
        started_ = false;
        return;
    }
    {
        std::lock_guard g(*mu_);
        if (!started_) return;
        stop_ = true;
    }
    cv_->notify_all();
    if (thread_) thread_->join();
    thread_.reset();
    std::lock_guard g(*mu_);
    started_ = false;
    q_.clear();
}

void HintQueue::run() {
    for (;;) {
        QueuedHint h;
        bool newer;
        {
            std::unique_lock g(*mu_);
            cv_->wait_for(g, std::chrono::nanoseconds(tick_ns_), [&] { return stop_ || !q_.empty(); });
            if (stop_) return;
            if (q_.empty()) {
                g.unlock();
                work_.tick();  // an idle link lets the controller recover
                continue;
            }
            h = q_.front();
            q_.pop_front();
            newer = !q_.empty();
        }
        work_.hint(h, newer);
        work_.tick();
    }
}

}  // namespace speckv
