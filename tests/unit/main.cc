// SPDX-License-Identifier: Apache-2.0
// doctest main of the unit-style test binaries. After the run it removes the
// files this process made in the test directory ($SPECKV_TEST_TMP, else
// /tmp/speckv-unit): fresh_pool() names them "<tag>-<pid>-<n>.pool", so a
// name holding "-<our pid>-" is ours. Without this every run of the suite
// left its pools behind (hundreds of MB a run).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "remove_own_files.h"

int main(int argc, char **argv) {
    doctest::Context ctx(argc, argv);
    const int rc = ctx.run();
    const char *d = std::getenv("SPECKV_TEST_TMP");
    const std::string dir = d && *d ? d : "/tmp/speckv-unit";
    speckv_test::remove_own_files(dir);
    return rc;
}
