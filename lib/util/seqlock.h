// SPDX-License-Identifier: Apache-2.0
// Optimistic copies under a sequence lock: the copy may race with a writer
// and is then discarded (the sequence number changed). TSan cannot know that,
// so such copies are wrapped in these annotations.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void AnnotateIgnoreReadsBegin(const char *, int);
extern "C" void AnnotateIgnoreReadsEnd(const char *, int);
extern "C" void AnnotateIgnoreWritesBegin(const char *, int);
extern "C" void AnnotateIgnoreWritesEnd(const char *, int);
#define SEQLOCK_IGNORE_BEGIN()                     \
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__); \
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__)
#define SEQLOCK_IGNORE_END()                     \
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__); \
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define SEQLOCK_IGNORE_BEGIN() (void)0
#define SEQLOCK_IGNORE_END() (void)0
#endif

#include <atomic>

namespace speckv {
// A relaxed atomic load of a plain field that lock-free readers snapshot
// (block-record fields written with std::atomic_ref by the lock holder).
template <typename T>
T relaxed_field(const T &field) {
    return std::atomic_ref<T>(const_cast<T &>(field)).load(std::memory_order_relaxed);
}
}  // namespace speckv
