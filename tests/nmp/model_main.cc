// doctest main for the tests that need the real models. The models are part
// of the project's data (shared/data beside the checkout, as in CI): without
// them the test fails and says where it looked, it never skips.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

int main(int argc, char **argv) {
    const std::string probe = std::string(SPECKV_NMP_MODELS) + "/stories260K/stories260K.bin";
    if (access(probe.c_str(), R_OK) != 0) {
        std::fprintf(stderr, "FAIL: %s not found (shared/data must be a sibling of the checkout)\n", probe.c_str());
        return 1;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
