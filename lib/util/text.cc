// SPDX-License-Identifier: Apache-2.0
#include "util/text.h"

#include <cstdio>

namespace speckv {

std::string human_bytes(uint64_t bytes) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    char b[32];
    std::snprintf(b, sizeof b, i ? "%.1f %s" : "%.0f %s", v, u[i]);
    return b;
}

}  // namespace speckv
