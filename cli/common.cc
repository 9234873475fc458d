// SPDX-License-Identifier: Apache-2.0
// What every verb of `speckv` shares: --json errors, -q/-v, progress on a
// terminal, plain paths for pools, did-you-mean for unknown verbs and
// options, and the verb list the man page and bash completion are made from.
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "config/config.h"
#include "util/status.h"
#include "util/json.h"

namespace speckv_cli {

Common g_opt;

namespace {
struct Recorded {
    bool set = false;
    int code = 0;
    std::string message;
} g_err;
}  // namespace

void add_json(CLI::App *verb, const std::string &what) { verb->add_flag("--json", g_opt.json, what); }
void add_quiet(CLI::App *verb, const std::string &what) { verb->add_flag("-q,--quiet", g_opt.quiet, what); }
void add_verbose(CLI::App *verb) {
    verb->add_flag("-v,--verbose", g_opt.verbose, "show the library's log on stderr (-v warnings and info, -vv debug)");
}
void add_no_progress(CLI::App *verb) {
    verb->add_flag("--no-progress", g_opt.no_progress, "no progress on stderr (shown only when stderr is a terminal)");
}

const char *status_name(int code) {
    static const char *const names[] = {"SPECKV_OK",       "SPECKV_EINVAL",   "SPECKV_ENOMEM",   "SPECKV_ENOSPC",
                                        "SPECKV_ENOENT",   "SPECKV_EEXIST",   "SPECKV_EBADHANDLE", "SPECKV_ECORRUPT",
                                        "SPECKV_EVERSION", "SPECKV_EIO",      "SPECKV_EPERM",    "SPECKV_EBUSY",
                                        "SPECKV_ERANGE",   "SPECKV_ENOTPOOL", "SPECKV_EURI",     "SPECKV_ENOTSUP",
                                        "SPECKV_ESTRUCT",  "SPECKV_EINTERNAL", "SPECKV_EQUOTA"};
    if (code <= 0 && -code < int(sizeof names / sizeof names[0])) return names[-code];
    return "SPECKV_EINTERNAL";
}

std::string json_error(int code, const std::string &msg) {
    speckv::Json e = {{"error", {{"code", code}, {"name", status_name(code)}, {"message", msg}}}};
    return speckv::json_text(e) + "\n";
}

void error(const std::string &msg, int code) {
    if (!g_err.set) g_err = {true, code, msg};
    if (!g_opt.json) std::fprintf(stderr, "speckv: error: %s\n", msg.c_str());
}

std::string take_error() {
    std::string m = g_err.set ? g_err.message : std::string();
    g_err = Recorded();
    return m;
}

void print_json_error() {
    if (g_err.set) std::fputs(json_error(g_err.code, g_err.message).c_str(), stdout);
}

std::string pool_uri(const std::string &arg) {
    // A URI has "scheme:" before any '/'; anything else is a path.
    size_t colon = arg.find(':'), slash = arg.find('/');
    if (colon != std::string::npos && colon > 0 && (slash == std::string::npos || colon < slash)) return arg;
    if (arg.empty() || arg[0] == '/') return "file:" + arg;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return "file:" + arg;
    return "file:" + std::string(cwd) + "/" + arg;
}

namespace {
void log_to_stderr(void *, int level, const char *msg) {
    static const char *const lv[] = {"error", "warning", "info", "debug"};
    std::fprintf(stderr, "speckv: %s: %s\n", level >= 0 && level <= 3 ? lv[level] : "log", msg);
}
int log_level() { return std::min(3, 1 + g_opt.verbose); }
}  // namespace

void set_log(speckv::Config *cfg) {
    if (!g_opt.verbose) return;
    cfg->log_fn = log_to_stderr;
    cfg->set_int("log.level", log_level());
}

void set_log(speckv_config *cfg) {
    if (!g_opt.verbose) return;
    speckv_config_set_log(cfg, log_to_stderr, nullptr);
    speckv_config_set_int(cfg, "log.level", log_level());
}

// ------------------------------------------------------------- progress

bool progress_enabled() { return !g_opt.no_progress && !g_opt.quiet && isatty(2); }

Progress::Progress(std::string label, uint64_t total) : label_(std::move(label)), total_(total), on_(progress_enabled()) {}
Progress::~Progress() { finish(); }

void Progress::update(uint64_t done) {
    if (!on_) return;
    auto now = std::chrono::steady_clock::now();
    if (drawn_ && done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    const int w = 30;
    int n = total_ ? int(w * std::min(1.0, double(done) / double(total_))) : 0;
    std::fprintf(stderr, "\r%s [%s%s] %llu/%llu", label_.c_str(), std::string(size_t(n), '#').c_str(),
                 std::string(size_t(w - n), ' ').c_str(), static_cast<unsigned long long>(done),
                 static_cast<unsigned long long>(total_));
    std::fflush(stderr);
}

void Progress::finish() {
    if (!drawn_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
}

struct Ticker::State {
    std::mutex m;
    std::condition_variable cv;
    bool done = false, drawn = false;
    std::thread t;
};

Ticker::Ticker(std::string label) {
    if (!progress_enabled()) return;
    s_ = new State;
    s_->t = std::thread([s = s_, label = std::move(label)] {
        auto t0 = std::chrono::steady_clock::now();
        std::unique_lock<std::mutex> lk(s->m);
        // Quiet for the first second: short runs print nothing.
        while (!s->cv.wait_for(lk, std::chrono::seconds(1), [s] { return s->done; })) {
            auto sec = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - t0).count();
            std::fprintf(stderr, "\r%s: %lld s", label.c_str(), static_cast<long long>(sec));
            std::fflush(stderr);
            s->drawn = true;
        }
        if (s->drawn) std::fprintf(stderr, "\r\033[K"), std::fflush(stderr);
    });
}

Ticker::~Ticker() {
    if (!s_) return;
    {
        std::lock_guard<std::mutex> lk(s_->m);
        s_->done = true;
    }
    s_->cv.notify_all();
    s_->t.join();
    delete s_;
}

// ----------------------------------------------------- unknown verbs/options

namespace {

// Optimal string alignment distance: a swap of neighbours counts once.
size_t distance(const std::string &a, const std::string &b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); i++) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); j++) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); i++)
        for (size_t j = 1; j <= b.size(); j++) {
            size_t c = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + c});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[a.size()][b.size()];
}

// The candidate nearest to `word`, if it is near enough to be a typo.
std::string nearest(const std::string &word, const std::vector<std::string> &cands) {
    if (word.size() <= 2) return "";  // "-x": any one-letter option is as near
    std::string best;
    size_t bd = SIZE_MAX;
    for (const auto &c : cands) {
        size_t d = distance(word, c);
        if (d < bd) bd = d, best = c;
    }
    // A prefix of a candidate ("insp" for "inspect") is a typo too.
    for (const auto &c : cands)
        if (word.size() >= 2 && c.compare(0, word.size(), word) == 0) return c;
    size_t len = word.size(), limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
    return bd <= limit ? best : std::string();
}

std::vector<CLI::App *> verbs_of(CLI::App *app) {
    return app->get_subcommands([](CLI::App *s) { return !s->get_name().empty(); });
}

std::string path_of(CLI::App *app) {
    std::string p;
    for (CLI::App *a = app; a; a = a->get_parent()) p = a->get_name() + (p.empty() ? "" : " " + p);
    return p;
}

// CLI11 matches an option only on the verb it was given to (no fallthrough).
CLI::Option *find_option(CLI::App *app, const std::string &name) {
    CLI::Option *o = app->get_option_no_throw(name);
    return o && !o->get_positional() ? o : nullptr;
}

std::vector<std::string> option_names(CLI::App *app) {
    std::vector<std::string> v;
    for (const CLI::Option *o : app->get_options()) {
        for (const auto &l : o->get_lnames()) v.push_back("--" + l);
        for (const auto &s : o->get_snames()) v.push_back("-" + s);
    }
    return v;
}

}  // namespace

std::string diagnose(CLI::App &app, int argc, char **argv) {
    CLI::App *cur = &app;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--") break;
        if (a.size() > 1 && a[0] == '-') {
            std::string name = a.substr(0, a.find('='));
            std::vector<std::string> names;
            if (name.compare(0, 2, "--") == 0) names.push_back(name);
            else
                for (size_t k = 1; k < name.size(); k++) names.push_back(std::string("-") + name[k]);
            bool takes_value = false;
            for (const auto &n : names) {
                CLI::Option *o = find_option(cur, n);
                if (!o) {
                    std::string hint = nearest(n, option_names(cur));
                    return "unknown option '" + n + "' for '" + path_of(cur) + "'" +
                           (hint.empty() ? " (see '" + path_of(cur) + " --help')" : " (did you mean '" + hint + "'?)");
                }
                takes_value = o->get_expected_min() > 0;
            }
            if (takes_value && a.find('=') == std::string::npos && names.size() == 1) i++;  // its value
            continue;
        }
        auto subs = verbs_of(cur);
        if (subs.empty()) continue;  // a positional argument of a verb
        CLI::App *next = nullptr;
        for (CLI::App *s : subs)
            if (s->get_name() == a) next = s;
        if (!next) {
            std::vector<std::string> names;
            for (CLI::App *s : subs) names.push_back(s->get_name());
            std::string hint = nearest(a, names), where = cur->get_parent() ? " for '" + path_of(cur) + "'" : "";
            if (!hint.empty()) return "unknown command '" + a + "'" + where + " (did you mean '" + hint + "'?)";
            std::string all;
            for (const auto &n : names) all += (all.empty() ? "" : ", ") + n;
            return "unknown command '" + a + "'" + where + " (one of: " + all + ")";
        }
        cur = next;
    }
    return "";
}

void list_commands(const CLI::App &app, const std::string &prefix, std::string *out) {
    for (const CLI::App *s : app.get_subcommands([](const CLI::App *s) { return !s->get_name().empty(); })) {
        std::string p = prefix.empty() ? s->get_name() : prefix + " " + s->get_name();
        auto subs = s->get_subcommands([](const CLI::App *x) { return !x->get_name().empty(); });
        if (subs.empty()) *out += p + "\n";
        else list_commands(*s, p, out);
    }
}

namespace {
std::vector<const CLI::App *> named_subs(const CLI::App &app) {
    return app.get_subcommands([](const CLI::App *x) { return !x->get_name().empty(); });
}

void completion_cases(const CLI::App &app, const std::string &path, std::string *out) {
    std::string verbs, opts;
    for (const CLI::App *s : named_subs(app)) verbs += (verbs.empty() ? "" : " ") + s->get_name();
    for (const CLI::Option *o : app.get_options()) {
        if (o->get_positional()) continue;
        for (const auto &l : o->get_lnames()) opts += (opts.empty() ? "" : " ") + ("--" + l);
        for (const auto &s : o->get_snames()) opts += (opts.empty() ? "" : " ") + ("-" + s);
    }
    *out += "        \"" + path + "\") verbs=\"" + verbs + "\" opts=\"" + opts + "\" ;;\n";
    for (const CLI::App *s : named_subs(app))
        completion_cases(*s, path.empty() ? s->get_name() : path + " " + s->get_name(), out);
}

// Options that take a value, as a bash case pattern (a|b|c).
void value_options(const CLI::App &app, std::vector<std::string> *out) {
    for (const CLI::Option *o : app.get_options()) {
        if (o->get_positional() || o->get_expected_min() == 0) continue;
        for (const auto &l : o->get_lnames()) out->push_back("--" + l);
        for (const auto &s : o->get_snames()) out->push_back("-" + s);
    }
    for (const CLI::App *s : named_subs(app)) value_options(*s, out);
}
}  // namespace

std::string bash_completion(const CLI::App &app) {
    std::string cases, vpat;
    completion_cases(app, "", &cases);
    std::vector<std::string> vals;
    value_options(app, &vals);
    std::sort(vals.begin(), vals.end());
    vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
    for (const auto &v : vals) vpat += (vpat.empty() ? "" : "|") + v;
    if (vpat.empty()) vpat = "--";
    return "# bash completion for speckv: generated from its verbs and options (`speckv --bash-completion`).\n"
           "_speckv() {\n"
           "    local cur=${COMP_WORDS[COMP_CWORD]} path= verbs= opts= w i\n"
           "    # The verb path typed so far; options and their values are skipped.\n"
           "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
           "        w=${COMP_WORDS[i]}\n"
           "        case \"$w\" in -*) continue ;; esac\n"
           "        case \"${COMP_WORDS[i-1]}\" in " + vpat + ") continue ;; esac\n"
           "        if _speckv_words \"${path:+$path }$w\"; then path=\"${path:+$path }$w\"; fi\n"
           "    done\n"
           "    case \"${COMP_WORDS[COMP_CWORD-1]}\" in " + vpat + ")\n"
           "        COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
           "    esac\n"
           "    _speckv_words \"$path\"\n"
           "    if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
           "    elif [[ -n $verbs ]]; then COMPREPLY=($(compgen -W \"$verbs\" -- \"$cur\"))\n"
           "    else COMPREPLY=($(compgen -f -- \"$cur\")); fi  # a URI, path or file\n"
           "}\n"
           "# Sets $verbs and $opts to what may follow the verb path $1; fails for no such path.\n"
           "_speckv_words() {\n"
           "    case \"$1\" in\n" + cases +
           "        *) return 1 ;;\n"
           "    esac\n"
           "}\n"
           "complete -F _speckv speckv\n";
}

}  // namespace speckv_cli
