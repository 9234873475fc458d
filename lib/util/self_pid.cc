// SPDX-License-Identifier: Apache-2.0
#include "util/self_pid.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

namespace speckv {

namespace {
std::atomic<pid_t> g_pid{0};  // 0: not known yet (or a fork() child: asks again)
void forget_pid() { g_pid.store(0, std::memory_order_relaxed); }
}  // namespace

pid_t self_pid() {
    pid_t p = g_pid.load(std::memory_order_relaxed);
    if (p) [[likely]]
        return p;
    static const int registered = pthread_atfork(nullptr, nullptr, forget_pid);
    (void)registered;
    p = getpid();
    g_pid.store(p, std::memory_order_relaxed);
    return p;
}

}  // namespace speckv
