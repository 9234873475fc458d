// SPDX-License-Identifier: Apache-2.0
// A pool handle's log: the callback set in its config (speckv_config_set_log)
// at its log.level, else SPECKV_LOG (util/log_env.h). Parts get a const
// reference to it, not to the pool.
#pragma once
#include <cstdarg>

#include "speckv.h"

namespace speckv {

struct PoolLog {
    speckv_log_fn fn = nullptr;
    void *user = nullptr;
    int level = 1;
    void operator()(int level, const char *fmt, ...) const __attribute__((format(printf, 3, 4)));
    void vlog(int level, const char *fmt, va_list ap) const __attribute__((format(printf, 3, 0)));
};

}  // namespace speckv
