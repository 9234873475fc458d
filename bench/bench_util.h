// SPDX-License-Identifier: Apache-2.0
// Small helpers the benchmarks share: the CPU's name for table headers and
// the median of repeated samples.
#pragma once
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

namespace bench {

// "model name" of the first CPU in /proc/cpuinfo.
inline std::string cpu_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "unknown CPU";
}

// The upper median of v (v taken by value: it is sorted).
inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace bench
