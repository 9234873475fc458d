// SPDX-License-Identifier: Apache-2.0
#include "pool/log.h"

#include <cstdio>

#include "util/log_env.h"

namespace speckv {

void PoolLog::vlog(int lvl, const char *fmtstr, va_list ap) const {
    speckv_log_fn f = fn;
    int max = level;
    if (!f && !env_log(&f, &max)) return;  // no callback: SPECKV_LOG=stderr[:LEVEL] (util/log_env.h)
    if (lvl > max) return;
    char buf[768];
    std::vsnprintf(buf, sizeof buf, fmtstr, ap);
    f(fn ? user : nullptr, lvl, buf);
}

void PoolLog::operator()(int lvl, const char *fmtstr, ...) const {
    va_list ap;
    va_start(ap, fmtstr);
    vlog(lvl, fmtstr, ap);
    va_end(ap);
}

}  // namespace speckv
