// SPDX-License-Identifier: Apache-2.0
// Status codes inside the core: the public SPECKV_* ints, plus the
// thread-local detail message that speckv_errmsg() returns.
#pragma once
#include <string>

#include "speckv.h"

namespace speckv {

// Records `msg` as this thread's detail message and returns `code`, so a
// failure site reads: `return fail(SPECKV_ERANGE, "offset %llu past ...", x);`
[[gnu::format(printf, 2, 3)]] int fail(int code, const char *fmt, ...);

// Clears the detail message (called at the start of every API call).
void clear_error();

// The current detail message of this thread ("" if none).
const char *last_error();

// A small per-thread number, unique while < 64 threads have asked (then 64
// for all later threads): the index of this thread's counter shard.
// initial-exec TLS: a plain %fs load on the hot path, no __tls_get_addr call
// (4 bytes of static TLS, which glibc reserves room for even when dlopen'd).
extern __attribute__((tls_model("initial-exec"))) thread_local int t_shard;
int assign_thread_shard();
inline int thread_shard() { return t_shard >= 0 ? t_shard : assign_thread_shard(); }
// How many of the private shards [0, 64) have been handed out so far (the
// shared one, 64, not counted): a shard above it has never been written, so
// sums over shards stop there. A thread's shard is assigned before its first
// write to it, so whatever makes that write visible makes this count visible.
int thread_shards_assigned();

// Static text for a code.
const char *status_text(int code);

}  // namespace speckv
