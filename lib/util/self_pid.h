// SPDX-License-Identifier: Apache-2.0
// This process's id without a system call per call. getpid() is a system
// call in current glibc (no cache), and on some hypervisors a costly one;
// the pool asks on paths an engine calls per unit (speckv_stats). The value
// is cached at the first call and refreshed in a fork() child (an atfork
// handler), so a child never sees its parent's id.
#pragma once
#include <sys/types.h>

namespace speckv {

pid_t self_pid();

}  // namespace speckv
