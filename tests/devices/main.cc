// SPDX-License-Identifier: Apache-2.0
// doctest main for the device tests. `--requires=WHAT` makes a machine
// without that hardware report the run skipped (exit 77, with the reason)
// instead of passing it with nothing tested:
//   numa             libnuma works (numa_available)
//   memoryless-numa  a NUMA node without memory exists (CXL hosts, some VMs)
//   dax              SPECKV_TEST_DAX names a device-dax character device
// `--numa-required` is `--requires=numa`. Every other argument goes to doctest.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <numa.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// "" when the hardware is here, else why the tests cannot run.
std::string missing(const std::string &what) {
    if (what == "numa") return numa_available() < 0 ? "NUMA is not available on this machine" : "";
    if (what == "memoryless-numa") {
        if (numa_available() < 0) return "NUMA is not available on this machine";
        for (int n = 0; n <= numa_max_node(); n++)
            if (numa_bitmask_isbitset(numa_nodes_ptr, static_cast<unsigned>(n)) && numa_node_size64(n, nullptr) <= 0)
                return "";
        return "every NUMA node of this machine has memory: no memoryless node to refuse";
    }
    if (what == "dax") {
        const char *d = std::getenv("SPECKV_TEST_DAX");
        if (!d || !*d) return "no device-dax to test: SPECKV_TEST_DAX=/dev/daxX.Y names one (the test formats it)";
        struct stat st;
        if (stat(d, &st) != 0 || !S_ISCHR(st.st_mode))
            return std::string("SPECKV_TEST_DAX=") + d + " is not a character device";
        return "";
    }
    return "unknown requirement '" + what + "'";
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"speckv device tests (doctest options pass through)"};
    app.allow_extras();
    app.set_help_flag();  // --help goes to doctest
    std::vector<std::string> requires_;
    bool numa_required = false;
    app.add_option("--requires", requires_, "numa, memoryless-numa or dax: skip (exit 77) without it")
        ->check(CLI::IsMember({"numa", "memoryless-numa", "dax"}));
    app.add_flag("--numa-required", numa_required, "same as --requires=numa");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    if (numa_required) requires_.push_back("numa");
    for (const std::string &r : requires_)
        if (std::string why = missing(r); !why.empty()) {
            std::printf("SKIP: %s\n", why.c_str());
            return 77;
        }
    std::vector<std::string> rest = app.remaining();
    std::vector<char *> args{argv[0]};
    for (std::string &a : rest) args.push_back(a.data());
    doctest::Context ctx(static_cast<int>(args.size()), args.data());
    return ctx.run();
}
