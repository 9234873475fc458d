// SPDX-License-Identifier: Apache-2.0
// Small helpers the pool's translation units share (pool.cc, allocator.cc,
// block_io.cc, page_writer.cc, sharing.cc, reporter.cc, checker.cc, attach_table.cc, ...). Not a part of
// its own: copies out of the seqlocked pool, CRCs, clocks, relaxed access to
// the record fields lock-free readers snapshot.
#pragma once
#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "pool/pool_format.h"
#include "util/crc32c.h"
#include "util/seqlock.h"

namespace speckv {
namespace {

inline uint64_t now_ns(clockid_t c = CLOCK_REALTIME) {
    timespec ts;
    clock_gettime(c, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

inline void copy_from_pool(void *dst, const void *src, size_t n) {
    SEQLOCK_IGNORE_BEGIN();
    std::memcpy(dst, src, n);
    SEQLOCK_IGNORE_END();
}

// Copies n bytes out of the pool and returns the CRC32C of the copy, in one pass.
inline uint32_t copy_crc_from_pool(void *dst, const void *src, size_t n) {
    SEQLOCK_IGNORE_BEGIN();
    uint32_t c = crc32c_copy(0, dst, src, n);
    SEQLOCK_IGNORE_END();
    return c;
}

// The CRC32C of all n bytes of a pool page, in one pass, copying bytes
// [off, off + len) of it to dst on the way (the CRC of those is of the copy).
inline uint32_t copy_part_crc_from_pool(void *dst, const void *src, size_t n, size_t off, size_t len) {
    const auto *s = static_cast<const unsigned char *>(src);
    SEQLOCK_IGNORE_BEGIN();
    uint32_t c = off ? crc32c(0, s, off) : 0;
    c = crc32c_copy(c, dst, s + off, len);
    if (off + len < n) c = crc32c(c, s + off + len, n - off - len);
    SEQLOCK_IGNORE_END();
    return c;
}

inline uint32_t crc_of_pool(const void *src, size_t n) {
    SEQLOCK_IGNORE_BEGIN();
    uint32_t c = crc32c(0, src, n);
    SEQLOCK_IGNORE_END();
    return c;
}

// A detaching or dead process's last published tier counters go to the
// pool-wide totals of processes gone (`speckv pool stats`).
inline void fold_tier_counters(fmt::SharedHeader *h, fmt::AttachRecord &a) {
    for (uint32_t i = 0; i < fmt::kTcSummed; i++) h->tier_detached[i].fetch_add(a.tier[i].exchange(0));
    for (uint32_t i = fmt::kTcSummed; i < fmt::kTierCounters; i++) a.tier[i].store(0);
}

inline unsigned char *scratch_of(std::vector<unsigned char> &v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

// Block-record fields that lock-free readers snapshot are accessed atomically.
template <typename T>
T relaxed_load(const T &field) {
    return std::atomic_ref<T>(const_cast<T &>(field)).load(std::memory_order_relaxed);
}
template <typename T>
void relaxed_store(T &field, T v) {
    std::atomic_ref<T>(field).store(v, std::memory_order_relaxed);
}

}  // namespace

// This thread's buffer for one decoded page (n bytes at least), shared by
// the read, write, pin and recovery paths (defined in page_reader.cc).
unsigned char *decoded_page_scratch(size_t n);

}  // namespace speckv
