// Helpers shared by the unit tests.
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

inline std::string test_dir() {
    const char *d = std::getenv("SPECKV_TEST_TMP");
    std::string dir = d && *d ? d : "/tmp/speckv-unit";
    mkdir(dir.c_str(), 0700);
    return dir;
}

// A fresh pool path, unique per call and process.
inline std::string fresh_pool(const char *tag) {
    static std::atomic<int> n{0};
    std::string p = test_dir() + "/" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(n++) + ".pool";
    unlink(p.c_str());
    return p;
}
