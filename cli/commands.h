// CLI subcommand registration. Each command family lives in its own file.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace speckv {
struct PoolInfo;
}

namespace speckv_cli {

// Exit status a command wants; main() returns it after CLI11 parsing.
extern int g_exit;

void register_pool_commands(CLI::App &app);
// `pool stats` (cmd_pool_stats.cc), under the `pool` subcommand.
void register_pool_stats_command(CLI::App &pool);
void register_demo_command(CLI::App &app);
void register_codec_commands(CLI::App &app);
void register_devices_command(CLI::App &app);
void register_trace_command(CLI::App &app);

// "speckv: error: <msg>" on stderr.
void error(const std::string &msg);
// Prints `pool inspect` output.
void print_info(const speckv::PoolInfo &i, bool json);
// The error `pool inspect` and `pool stats` end with when packed images are damaged.
std::string damaged_text(uint64_t packed_damaged);
// Formats the last library failure: "<strerror>: <detail>".
std::string describe(int rc);

}  // namespace speckv_cli
