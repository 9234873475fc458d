// SPDX-License-Identifier: Apache-2.0
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

#include <doctest/doctest.h>

#include <initializer_list>
#include <utility>

#include "speckv.h"

// Opens `uri` with the config keys set from text (as a TOML file would);
// REQUIREs success.
inline speckv_pool *open_pool(const std::string &uri, std::initializer_list<std::pair<const char *, std::string>> kv) {
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    for (auto &[k, v] : kv) REQUIRE_MESSAGE(speckv_config_set_str(c, k, v.c_str()) == SPECKV_OK, k, speckv_errmsg());
    speckv_pool *p = nullptr;
    const int rc = speckv_pool_open(uri.c_str(), c, &p);
    speckv_config_free(c);
    REQUIRE_MESSAGE(rc == SPECKV_OK, std::string(speckv_errmsg()));
    return p;
}
