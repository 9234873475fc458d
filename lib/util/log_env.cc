// SPDX-License-Identifier: Apache-2.0
#include "util/log_env.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace speckv {
namespace {

const char *const kLevels[] = {"error", "warn", "info", "debug"};

void to_stderr(void *, int level, const char *msg) {
    std::fprintf(stderr, "speckv: %s: %s\n", level >= 0 && level <= 3 ? kLevels[level] : "log", msg);
}

}  // namespace

bool env_log(speckv_log_fn *fn, int *level) {
    const char *v = std::getenv("SPECKV_LOG");
    if (!v || !*v) return false;
    if (std::strncmp(v, "stderr", 6) == 0 && (v[6] == 0 || v[6] == ':')) {
        if (v[6] == 0) {
            *fn = to_stderr;
            return true;
        }
        const char *l = v + 7;
        for (int k = 0; k < 4; k++) {
            if (std::strcmp(l, kLevels[k]) == 0 || (l[0] == char('0' + k) && l[1] == 0) ||
                (k == 1 && std::strcmp(l, "warning") == 0)) {
                *fn = to_stderr;
                *level = k;
                return true;
            }
        }
    }
    static std::atomic<bool> told{false};
    if (!told.exchange(true))
        std::fprintf(stderr, "speckv: SPECKV_LOG=%s not understood (stderr, or stderr:error|warn|info|debug); no log\n",
                     v);
    return false;
}

}  // namespace speckv
