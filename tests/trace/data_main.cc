// SPDX-License-Identifier: Apache-2.0
// Tests over the real traces of the project's data (data/traces of the
// repository, or $SPECKV_DATA_DIR/traces): without them the test fails and
// says where it looked; it never skips.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cstdio>
#include <string>

#include "data_dir.h"

int main(int argc, char **argv) {
    struct stat st;
    const std::string probe = speckv_data::path("traces/mooncake_fast25/conversation_trace.jsonl");
    if (stat(probe.c_str(), &st) != 0) {
        std::fprintf(stderr, "FAIL: %s\n", speckv_data::missing(probe).c_str());
        return 1;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
