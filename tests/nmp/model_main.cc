// SPDX-License-Identifier: Apache-2.0
// doctest main for the tests that need the real models (data/models of the
// repository, or $SPECKV_DATA_DIR/models): without them the test fails and
// says where it looked; it never skips.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "data_dir.h"

int main(int argc, char **argv) {
    const std::string probe = speckv_data::path("models/stories260K/stories260K.bin");
    if (access(probe.c_str(), R_OK) != 0) {
        std::fprintf(stderr, "FAIL: %s\n", speckv_data::missing(probe).c_str());
        return 1;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
