// speckv: the command-line tool for operators and researchers.
#include <cstdio>

#include "commands.h"
#include "speckv.h"
#include "status.h"

namespace speckv_cli {
int g_exit = 0;

void error(const std::string &msg) { std::fprintf(stderr, "speckv: error: %s\n", msg.c_str()); }

std::string describe(int rc) {
    std::string d = speckv::last_error();
    return d.empty() ? speckv_strerror(rc) : d;
}
}  // namespace speckv_cli

int main(int argc, char **argv) {
    CLI::App app{"speckv — KV-cache pools beyond GPU memory (CXL-SpecKV design)", "speckv"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("speckv ") + SPECKV_VERSION_STRING);
    speckv_cli::register_pool_commands(app);
    speckv_cli::register_pool_stats_command(*app.get_subcommand("pool"));
    speckv_cli::register_demo_command(app);
    speckv_cli::register_codec_commands(app);
    speckv_cli::register_devices_command(app);
    speckv_cli::register_trace_command(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        int rc = app.exit(e);
        return rc == 0 ? 0 : 2;
    }
    return speckv_cli::g_exit;
}
