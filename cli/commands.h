// SPDX-License-Identifier: Apache-2.0
// CLI subcommand registration. Each command family lives in its own file;
// what every verb shares (--json errors, -q/-v, progress, pool arguments,
// did-you-mean) is in common.cc.
#pragma once
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <string>

#include "speckv.h"
#include "util/json_fwd.h"

namespace speckv {
struct PoolInfo;
struct Config;
}

namespace speckv_cli {

// Exit status a command wants; main() returns it after CLI11 parsing.
extern int g_exit;

// The options every verb shares. Each verb registers those that make sense
// for it (add_* below); all bind to this one struct.
struct Common {
    bool json = false;         // --json: results and errors as JSON on stdout
    bool quiet = false;        // -q: nothing on stdout when all is well
    int verbose = 0;           // -v: the library's log (warn, info; -vv debug) on stderr
    bool no_progress = false;  // --no-progress
};
extern Common g_opt;

void add_json(CLI::App *verb, const std::string &what = "one JSON object on stdout (errors too)");
void add_quiet(CLI::App *verb, const std::string &what = "print nothing on success (the exit status tells)");
void add_verbose(CLI::App *verb);
void add_no_progress(CLI::App *verb);

void register_pool_commands(CLI::App &app);
// `pool stats` (cmd_pool_stats.cc), under the `pool` subcommand.
void register_pool_stats_command(CLI::App &pool);
void register_demo_command(CLI::App &app);
void register_codec_commands(CLI::App &app);
void register_devices_command(CLI::App &app);
void register_trace_command(CLI::App &app);
// `exporter` (cmd_exporter.cc): the pools' counters over HTTP for Prometheus.
void register_exporter_command(CLI::App &app);

// Reports a failure: "speckv: error: <msg>" on stderr, or with --json the
// object {"error": {"code", "name", "message"}} that main() prints on stdout
// (the first error of a run). `code` is the SPECKV_E* status that fits.
void error(const std::string &msg, int code = SPECKV_EINVAL);
// "SPECKV_EINVAL" for -1, ...
const char *status_name(int code);
// The recorded error's message, forgotten ("" if none).
std::string take_error();
// Prints the recorded error as JSON on stdout (main(), with --json).
void print_json_error();
// {"error": ...} for a code and message (used for parse errors too).
std::string json_error(int code, const std::string &msg);
// Prints `pool inspect` output (json: one object, then a newline if `nl`).
void print_info(const speckv::PoolInfo &i, bool json, bool nl = true);
// `pool inspect --json`'s object (without the placement `pool inspect` adds).
speckv::Json info_value(const speckv::PoolInfo &i);
// The error `pool inspect` and `pool stats` end with when packed images are damaged.
std::string damaged_text(uint64_t packed_damaged);
// Formats the last library failure: "<strerror>: <detail>".
std::string describe(int rc);

// A pool argument: a URI (file:, anon:, dax:, numa:, or any other scheme,
// which the library refuses with its reason), or a plain path, taken as
// file:<absolute path> (as `sqlite3 FILE`).
std::string pool_uri(const std::string &arg);
// Routes the library's log to stderr at the -v level (nothing without -v).
void set_log(speckv::Config *cfg);
void set_log(speckv_config *cfg);

// Progress on stderr, only when stderr is a terminal and not --no-progress
// or -q: "label [####    ] done/total", redrawn at most every 100 ms.
bool progress_enabled();
class Progress {
  public:
    Progress(std::string label, uint64_t total);
    ~Progress();
    void update(uint64_t done);
    void set_label(std::string label) { label_ = std::move(label); }
    void finish();

  private:
    std::string label_;
    uint64_t total_;
    bool on_, drawn_ = false;
    std::chrono::steady_clock::time_point last_{};
};
// For one long call whose progress the library does not report (pool check,
// reset): "label: 12 s" on stderr, once a second, while it lasts.
class Ticker {
  public:
    explicit Ticker(std::string label);
    ~Ticker();

  private:
    struct State;
    State *s_ = nullptr;
};

// The message for a command line CLI11 refused, when the cause is an unknown
// verb or option ("unknown command 'poool' (did you mean 'pool'?)"); "" when
// it is something else.
std::string diagnose(CLI::App &app, int argc, char **argv);
// Every verb, one a line ("pool create", ...): man page and completion generation.
void list_commands(const CLI::App &app, const std::string &prefix, std::string *out);
// A bash completion script for the verbs and their options.
std::string bash_completion(const CLI::App &app);

}  // namespace speckv_cli
