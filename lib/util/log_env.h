// SPDX-License-Identifier: Apache-2.0
// SPECKV_LOG: the library's log on stderr for a process that set no log
// callback (speckv_config_set_log), so that warnings are not lost.
//   SPECKV_LOG=stderr         at the pool's "log.level" (default 1, warn)
//   SPECKV_LOG=stderr:LEVEL   LEVEL: error, warn, info, debug (or 0 ... 3)
#pragma once
#include "speckv.h"

namespace speckv {

// Where a pool without a callback logs: *fn and *level set and true when
// SPECKV_LOG asks for stderr (*level left alone when it names none). An
// unreadable value is reported once on stderr and otherwise ignored.
bool env_log(speckv_log_fn *fn, int *level);

}  // namespace speckv
