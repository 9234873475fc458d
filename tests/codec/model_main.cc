// doctest main for the tests that need the real models: exit 77 (CTest: SKIP)
// when shared/data/models is not beside the checkout.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

int main(int argc, char **argv) {
    const std::string probe = std::string(SPECKV_CODEC_MODELS) + "/stories260K/stories260K.bin";
    if (access(probe.c_str(), R_OK) != 0) {
        std::printf("SKIP: %s not found (shared/data must be a sibling of the checkout)\n", probe.c_str());
        return 77;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
