// doctest main for the device tests. `--numa-required` makes a machine
// without NUMA support skip (exit 77) instead of passing vacuously.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <numa.h>

#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char **argv) {
    std::vector<char *> args;
    for (int i = 0; i < argc; i++) {
        if (std::strcmp(argv[i], "--numa-required") == 0) {
            if (numa_available() < 0) {
                std::printf("SKIP: NUMA is not available on this machine\n");
                return 77;
            }
            continue;
        }
        args.push_back(argv[i]);
    }
    doctest::Context ctx(static_cast<int>(args.size()), args.data());
    return ctx.run();
}
