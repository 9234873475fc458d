// SPDX-License-Identifier: Apache-2.0
// For the doctest mains of the test binaries (tests/unit/main.cc,
// tests/tiers/main.cc): after the run, remove the files this process made in
// its test directory. The helpers that make them (fresh_pool, fresh_path) put
// "-<pid>-" in every name, so a name holding our pid that way is ours.
// Directories stay (unlinkat without AT_REMOVEDIR refuses them).
#pragma once
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace speckv_test {

inline void remove_own_files(const std::string &dir) {
    const std::string mine = "-" + std::to_string(getpid()) + "-";
    DIR *dp = opendir(dir.c_str());
    if (!dp) return;
    while (dirent *e = readdir(dp))
        if (std::strstr(e->d_name, mine.c_str())) unlinkat(dirfd(dp), e->d_name, 0);
    closedir(dp);
}

}  // namespace speckv_test
