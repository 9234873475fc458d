// SPDX-License-Identifier: Apache-2.0
// TOML loading kept in its own file: toml++ is heavy to compile.
#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "config/config.h"

#include <sys/stat.h>
#include "util/status.h"

namespace speckv {

int Config::load_toml_text(std::string_view text, const char *origin) {
    toml::table tbl;
    try {
        tbl = toml::parse(text, std::string_view(origin));
    } catch (const toml::parse_error &e) {
        return fail(SPECKV_EINVAL, "%s:%u:%u: TOML syntax error: %.*s", origin, e.source().begin.line,
                    e.source().begin.column, static_cast<int>(e.description().size()), e.description().data());
    }
    // Validate everything into a copy first so a bad file applies nothing.
    Config next = *this;
    for (auto &&[tkey, tval] : tbl) {
        const toml::table *sub = tval.as_table();
        if (!sub)
            return fail(SPECKV_EINVAL, "%s: top-level key '%.*s' must be a table like [pool]", origin,
                        static_cast<int>(tkey.str().size()), tkey.str().data());
        for (auto &&[k, v] : *sub) {
            std::string name = std::string(tkey.str()) + "." + std::string(k.str());
            unsigned line = v.source().begin.line;
            int rc;
            if (auto i = v.value_exact<int64_t>()) rc = next.set_int(name, *i);
            else if (auto s = v.value_exact<std::string>()) rc = next.set_str(name, *s);
            else if (auto b = v.value_exact<bool>()) rc = next.set_int(name, *b ? 1 : 0);
            else
                return fail(SPECKV_EINVAL, "%s:%u: %s must be an integer, a boolean or a string", origin, line,
                            name.c_str());
            if (rc != SPECKV_OK) {
                std::string why = last_error();
                return fail(rc, "%s:%u: %s", origin, line, why.c_str());
            }
        }
    }
    speckv_log_fn fn = log_fn;
    void *user = log_user;
    *this = next;
    log_fn = fn;
    log_user = user;
    return SPECKV_OK;
}

int Config::load_toml_file(const char *path) {
    // A directory opens as a stream that reads nothing: it would pass for
    // an empty (valid) file. Only regular files (or what reads like one: a
    // pipe, /dev/stdin) are configs.
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return fail(SPECKV_EIO, "config file '%s' is a directory, not a TOML file", path);
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail(SPECKV_ENOENT, "cannot open config file '%s'", path);
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return fail(SPECKV_EIO, "cannot read config file '%s'", path);
    return load_toml_text(ss.str(), path);
}

}  // namespace speckv
