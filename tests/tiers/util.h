// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the tier tests.
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace tiers_test {

// Set by main.cc from --cold-engines and --requires=io_uring.
enum class ColdEngines { kBoth, kSync, kUring };
extern ColdEngines g_cold_engines;
extern bool g_uring_required;

inline std::string test_dir() {
    const char *d = std::getenv("SPECKV_TEST_TMP");
    std::string dir = d && *d ? d : "/tmp/speckv-tiers";
    mkdir(dir.c_str(), 0700);
    return dir;
}

// A fresh file path in `dir` (default: the test directory), unique per call and process.
inline std::string fresh_path(const char *tag, const std::string &dir = "") {
    static std::atomic<int> n{0};
    std::string p = (dir.empty() ? test_dir() : dir) + "/" + tag + "-" + std::to_string(getpid()) + "-" +
                    std::to_string(n++) + ".cold";
    unlink(p.c_str());
    return p;
}

inline std::vector<unsigned char> pattern(size_t n, uint64_t seed) {
    std::vector<unsigned char> v(n);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v[i] = static_cast<unsigned char>(x);
    }
    return v;
}

// The bytes a page (key, tag) holds in the buffer tests: any torn or stale
// copy shows as a mismatch.
inline void fill_page(unsigned char *p, size_t n, uint64_t key, uint64_t tag) {
    for (size_t i = 0; i < n; i++) p[i] = static_cast<unsigned char>(key * 31 + tag * 7 + i);
}
inline bool page_ok(const unsigned char *p, size_t n, uint64_t key, uint64_t tag, size_t off = 0) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != static_cast<unsigned char>(key * 31 + tag * 7 + off + i)) return false;
    return true;
}

}  // namespace tiers_test
