// SPDX-License-Identifier: Apache-2.0
// speckv: the command-line tool for operators and researchers.
#include <cstdio>
#include <cstring>

#include "commands.h"
#include "speckv.h"
#include "util/status.h"

namespace speckv_cli {
int g_exit = 0;

std::string describe(int rc) {
    std::string d = speckv::last_error();
    return d.empty() ? speckv_strerror(rc) : d;
}
}  // namespace speckv_cli

int main(int argc, char **argv) {
    using namespace speckv_cli;
    CLI::App app{"speckv — KV-cache pools beyond GPU memory (CXL-SpecKV design)", "speckv"};
    app.require_subcommand(1);
    app.set_version_flag("-V,--version", std::string("speckv ") + SPECKV_VERSION_STRING);
    register_pool_commands(app);
    register_pool_stats_command(*app.get_subcommand("pool"));
    register_demo_command(app);
    register_codec_commands(app);
    register_devices_command(app);
    register_trace_command(app);
    register_exporter_command(app);
    // After the verbs: CLI11 gives a subcommand the footer its parent has when it is added.
    app.footer("Every verb takes --json (results and errors as JSON on stdout) and --help.\n"
               "Pool URIs: file:/path (or a plain path), file:NAME, dax:/dev/daxX.Y, numa:N?name=NAME.\n"
               "Exit status: 0 success, 1 failure (or problems found), 2 bad usage or could not run.");
    // Build-time interfaces (man page and bash completion), not for users.
    if (argc == 2 && std::strcmp(argv[1], "--list-commands") == 0) {
        std::string out;
        list_commands(app, "", &out);
        std::fputs(out.c_str(), stdout);
        return 0;
    }
    if (argc == 2 && std::strcmp(argv[1], "--bash-completion") == 0) {
        std::fputs(bash_completion(app).c_str(), stdout);
        return 0;
    }
    // --json anywhere before "--" asks for JSON errors, parse errors included.
    bool json = false;
    for (int i = 1; i < argc && std::strcmp(argv[i], "--") != 0; i++) json |= std::strcmp(argv[i], "--json") == 0;
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
        std::string why = diagnose(app, argc, argv);
        if (json) {
            std::fputs(json_error(SPECKV_EINVAL, why.empty() ? e.what() : why).c_str(), stdout);
            return 2;
        }
        if (why.empty()) {
            app.exit(e);
        } else {
            std::fprintf(stderr, "speckv: error: %s\nRun with --help for more information.\n", why.c_str());
        }
        return 2;
    }
    if (g_exit != 0 && g_opt.json) print_json_error();
    return g_exit;
}
