// Tests over the real traces of shared/data. The traces are part of the
// project's data (shared/data beside the checkout, as in CI): without them the
// test fails and says where it looked, it never skips.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cstdio>

int main(int argc, char **argv) {
    struct stat st;
    if (stat(SPECKV_TRACE_DATA "/traces/mooncake_fast25/conversation_trace.jsonl", &st) != 0) {
        std::fprintf(stderr, "FAIL: %s/traces not found (shared/data must be a sibling of the checkout)\n", SPECKV_TRACE_DATA);
        return 1;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
