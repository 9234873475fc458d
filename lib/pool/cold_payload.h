// SPDX-License-Identifier: Apache-2.0
// What the L4 parts of the pool share (cold_role.cc: the role, promotion;
// cold_requests.cc: the requests to the holder; cold_choice.cc: what goes first;
// cold_demote.cc: demotion): the layout of a block's L4 payload, clocks,
// the futexes of the holder protocol. Included by those four files only.
#pragma once
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "pool/pool_format.h"

namespace speckv {

namespace {

constexpr uint32_t kColdMagic = 0x344C4B53;  // "SKL4": a block's L4 payload

// A block's L4 payload: this header, one ColdPage per page, the pages'
// summary slots (when the pool has a summary area), then the bytes of every
// page not flagged zero, in page order.
struct ColdHead {
    uint32_t magic;
    uint32_t npages;
    uint64_t handle;
    uint64_t bytes;
    uint32_t page_size;
    uint32_t summary_bytes;
    uint32_t data_pages;
    uint32_t pad;
};
static_assert(sizeof(ColdHead) == 40);

struct ColdPage {
    uint32_t crc, flags;
};

inline uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

inline uint64_t slot_of(uint64_t handle) { return handle & ((uint64_t(1) << fmt::kSlotBits) - 1); }

// Futexes on words of the shared mapping (not FUTEX_PRIVATE: the waiter and
// the waker are different processes).
inline void futex_wait(std::atomic<uint32_t> *w, uint32_t seen, uint64_t ns) {
    timespec ts{time_t(ns / 1000000000ull), long(ns % 1000000000ull)};
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(w), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

inline void futex_wake_all(std::atomic<uint32_t> *w) {
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(w), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

inline uint64_t mono_fine_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

}  // namespace speckv
