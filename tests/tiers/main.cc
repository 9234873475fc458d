// SPDX-License-Identifier: Apache-2.0
// doctest main for the tier tests. Options of its own (every other argument
// goes to doctest):
//   --cold-engines=both|sync|uring  which engines the cold-tier cases that
//                                   loop over engines run (default both)
//   --requires=io_uring             report the run skipped (exit 77, with the
//                                   reason) where io_uring is refused, and
//                                   fail, not skip, a refused io_uring engine
// CTest runs `tiers` with the pread/pwrite engine and `tiers_io_uring` with
// io_uring only, so a kernel or sandbox without io_uring shows as a skipped
// test instead of a passed one.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../unit/remove_own_files.h"
#include "util.h"

namespace tiers_test {
ColdEngines g_cold_engines = ColdEngines::kBoth;
bool g_uring_required = false;
}  // namespace tiers_test

int main(int argc, char **argv) {
    CLI::App app{"speckv tier tests (doctest options pass through)"};
    app.allow_extras();
    app.set_help_flag();  // --help goes to doctest
    std::string engines = "both", req;
    app.add_option("--cold-engines", engines, "cold-tier engines to run")->check(CLI::IsMember({"both", "sync", "uring"}));
    app.add_option("--requires", req, "io_uring: skip (exit 77) where io_uring is refused")
        ->check(CLI::IsMember({"io_uring"}));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    using tiers_test::ColdEngines;
    tiers_test::g_cold_engines = engines == "sync" ? ColdEngines::kSync : engines == "uring" ? ColdEngines::kUring
                                                                                             : ColdEngines::kBoth;
    if (req == "io_uring") {
        io_uring ring;
        int rc = io_uring_queue_init(4, &ring, 0);
        if (rc < 0) {
            std::printf("SKIP: io_uring is refused here (io_uring_queue_init: %s): the io_uring engine was not tested\n",
                        std::strerror(-rc));
            return 77;
        }
        io_uring_queue_exit(&ring);
        tiers_test::g_uring_required = true;
    }
    std::vector<std::string> rest = app.remaining();
    std::vector<char *> args{argv[0]};
    for (std::string &a : rest) args.push_back(a.data());
    doctest::Context ctx(static_cast<int>(args.size()), args.data());
    const int rc = ctx.run();
    // The files this process made (fresh_path: "<tag>-<pid>-<n>.cold" and the
    // L5 directories beside them) go: every run left ~0.5 GB behind before.
    speckv_test::remove_own_files(tiers_test::test_dir());
    return rc;
}
