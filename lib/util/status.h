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

// Static text for a code.
const char *status_text(int code);

}  // namespace speckv
