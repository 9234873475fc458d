// SPDX-License-Identifier: Apache-2.0
#include "util/status.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace speckv {
namespace {
thread_local char t_msg[512];
std::atomic<int> g_next_shard{0};
}  // namespace

__attribute__((tls_model("initial-exec"))) thread_local int t_shard = -1;

int assign_thread_shard() {
    int s = g_next_shard.fetch_add(1, std::memory_order_relaxed);
    t_shard = s < 64 ? s : 64;
    return t_shard;
}

int thread_shards_assigned() {
    int n = g_next_shard.load(std::memory_order_relaxed);
    return n < 64 ? n : 64;
}

int fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(t_msg, sizeof t_msg, fmt, ap);
    va_end(ap);
    return code;
}

void clear_error() { t_msg[0] = '\0'; }

const char *last_error() { return t_msg; }

const char *status_text(int code) {
    switch (code) {
        case SPECKV_OK: return "success";
        case SPECKV_EINVAL: return "invalid argument";
        case SPECKV_ENOMEM: return "out of memory";
        case SPECKV_ENOSPC: return "no space left in pool";
        case SPECKV_ENOENT: return "no such entry";
        case SPECKV_EEXIST: return "already exists";
        case SPECKV_EBADHANDLE: return "bad handle (freed or never issued)";
        case SPECKV_ECORRUPT: return "data corrupt (checksum or invariant failed)";
        case SPECKV_EVERSION: return "unsupported pool format version";
        case SPECKV_EIO: return "I/O error";
        case SPECKV_EPERM: return "permission denied";
        case SPECKV_EBUSY: return "resource busy";
        case SPECKV_ERANGE: return "out of range";
        case SPECKV_ENOTPOOL: return "not a speckv pool";
        case SPECKV_EURI: return "malformed URI";
        case SPECKV_ENOTSUP: return "not supported";
        case SPECKV_ESTRUCT: return "struct size mismatch";
        case SPECKV_EINTERNAL: return "internal error";
        case SPECKV_EQUOTA: return "tenant quota exceeded";
        default: return "unknown error";
    }
}

}  // namespace speckv
