// SPDX-License-Identifier: Apache-2.0
#include "config/uri.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdlib>

#include "backend/registry.h"
#include "util/status.h"

namespace speckv {

bool parse_size(std::string_view t, int64_t *out) {
    if (t.empty()) return false;
    size_t i = 0;
    uint64_t v = 0;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) {
        uint64_t d = static_cast<uint64_t>(t[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
        i++;
    }
    if (i == 0) return false;
    std::string suf;
    for (; i < t.size(); i++) suf += static_cast<char>(std::toupper(static_cast<unsigned char>(t[i])));
    unsigned shift = 0;
    if (suf.empty() || suf == "B") shift = 0;
    else if (suf == "K" || suf == "KB" || suf == "KIB") shift = 10;
    else if (suf == "M" || suf == "MB" || suf == "MIB") shift = 20;
    else if (suf == "G" || suf == "GB" || suf == "GIB") shift = 30;
    else if (suf == "T" || suf == "TB" || suf == "TIB") shift = 40;
    else return false;
    if (shift && v > (static_cast<uint64_t>(INT64_MAX) >> shift)) return false;
    v <<= shift;
    if (v > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(v);
    return true;
}

std::string default_pool_dir() {
    struct stat st;
    if (const char *x = std::getenv("XDG_RUNTIME_DIR"); x && *x && stat(x, &st) == 0 && S_ISDIR(st.st_mode))
        return std::string(x) + "/speckv";
    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) return "/dev/shm";
    return "/tmp";
}

std::string named_pool_path(std::string_view name, std::string_view suffix) {
    std::string dir = default_pool_dir();
    return dir + (dir == "/dev/shm" || dir == "/tmp" ? "/speckv-" : "/") + std::string(name) + std::string(suffix);
}

bool parse_file_mode(std::string_view t, int64_t *out) {
    if (t.empty() || t.size() > 4) return false;
    int64_t v = 0;
    for (char c : t) {
        if (c < '0' || c > '7') return false;
        v = v * 8 + (c - '0');
    }
    // Read and write for the owner (the pool must stay usable), nothing
    // executable, no set-id bits.
    if ((v & 0600) != 0600 || (v & ~int64_t(0666))) return false;
    *out = v;
    return true;
}

static bool parse_id(std::string_view t, bool user, int64_t *out) {
    if (t.empty() || t.size() > 64) return false;
    if (t.find_first_not_of("0123456789") == std::string_view::npos) {
        if (t.size() > 10) return false;
        int64_t v = std::strtoll(std::string(t).c_str(), nullptr, 10);
        if (v > int64_t(UINT32_MAX) - 1) return false;
        *out = v;
        return true;
    }
    std::string name(t);
    char buf[4096];
    if (user) {
        struct passwd pw, *res = nullptr;
        if (getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &res) != 0 || !res) return false;
        *out = res->pw_uid;
    } else {
        struct group gr, *res = nullptr;
        if (getgrnam_r(name.c_str(), &gr, buf, sizeof buf, &res) != 0 || !res) return false;
        *out = res->gr_gid;
    }
    return true;
}

bool valid_pool_name(std::string_view n) {
    if (n.empty() || n.size() > 200 || n[0] == '.') return false;
    for (char c : n)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
    return true;
}

int parse_uri(std::string_view text, Uri *out) {
    Uri u;
    size_t colon = text.find(':');
    if (colon == std::string_view::npos)
        return fail(SPECKV_EURI, "URI '%.*s' has no scheme (expected %s)", static_cast<int>(text.size()), text.data(),
                    backend_schemes(true).c_str());
    std::string_view scheme = text.substr(0, colon);
    std::string_view rest = text.substr(colon + 1);
    std::string_view query;
    bool has_query = false;
    if (size_t q = rest.find('?'); q != std::string_view::npos) {
        query = rest.substr(q + 1);
        rest = rest.substr(0, q);
        has_query = true;
    }
    const Backend *backend = find_backend(scheme);
    if (!backend)
        return fail(SPECKV_EURI, "unknown URI scheme '%.*s' (expected %s)", static_cast<int>(scheme.size()),
                    scheme.data(), backend_schemes(false).c_str());
    u.scheme = backend->id;
    if (int rc = backend->parse_target(rest, &u); rc != SPECKV_OK) return rc;

    if (has_query && query.empty())
        return fail(SPECKV_EURI, "URI '%.*s' ends in '?' with no parameter after it", static_cast<int>(text.size()),
                    text.data());
    while (has_query) {
        size_t amp = query.find('&');
        std::string_view kv = query.substr(0, amp);
        has_query = amp != std::string_view::npos;
        query = has_query ? query.substr(amp + 1) : std::string_view{};
        if (kv.empty())
            return fail(SPECKV_EURI, "URI '%.*s' has an empty parameter (a stray or trailing '&')",
                        static_cast<int>(text.size()), text.data());
        size_t eq = kv.find('=');
        if (backend->numa_params && kv == "name=")
            return fail(SPECKV_EURI, "numa: name= is empty: give the pool a name (numa:%s?name=kv0) or leave name= out "
                                     "for a process-private pool", u.target.c_str());
        if (eq == std::string_view::npos || eq == 0 || eq + 1 == kv.size())
            return fail(SPECKV_EURI, "URI parameter '%.*s' is not key=value", static_cast<int>(kv.size()), kv.data());
        std::string key(kv.substr(0, eq));
        std::string_view val = kv.substr(eq + 1);
        const bool numa_key = backend->numa_params && (key == "policy" || key == "name");
        const bool file_key = backend->file_params && (key == "owner" || key == "group" || key == "mode");
        if (key != "size" && key != "page_size" && key != "max_blocks" && key != "create" && !numa_key && !file_key)
            return fail(SPECKV_EURI, "unknown URI parameter '%s' (known: size, page_size, max_blocks, create%s%s)",
                        key.c_str(), backend->file_params ? ", owner, group, mode" : "",
                        backend->numa_params ? ", policy, name" : "");
        if (file_key) {
            if (u.params.count(key)) return fail(SPECKV_EURI, "URI parameter '%s' given twice", key.c_str());
            int64_t v = -1;
            if (key == "mode") {
                if (!parse_file_mode(val, &v))
                    return fail(SPECKV_EURI,
                                "URI parameter mode='%.*s' is not an octal file mode in [0600, 0666] that keeps the "
                                "owner's read and write bits (e.g. mode=0640)",
                                static_cast<int>(val.size()), val.data());
            } else if (!parse_id(val, key == "owner", &v)) {
                return fail(SPECKV_EURI, "URI parameter %s='%.*s' is not a %s id or a known %s name", key.c_str(),
                            static_cast<int>(val.size()), val.data(), key == "owner" ? "user" : "group",
                            key == "owner" ? "user" : "group");
            }
            u.params[key] = v;
            continue;
        }
        if (key == "name") {
            if (!u.name.empty()) return fail(SPECKV_EURI, "URI parameter 'name' given twice");
            if (!valid_pool_name(val))
                return fail(SPECKV_EURI,
                            "numa: pool name '%.*s' must be 1-200 characters of [A-Za-z0-9._-], not starting with '.' "
                            "(it names a file in %s)",
                            static_cast<int>(val.size()), val.data(), default_pool_dir().c_str());
            u.name = std::string(val);
            continue;
        }
        if (key == "policy") {
            if (u.params.count(key)) return fail(SPECKV_EURI, "URI parameter 'policy' given twice");
            std::string_view pv = kv.substr(eq + 1);
            if (pv != "bind" && pv != "preferred")
                return fail(SPECKV_EURI, "numa: policy must be bind or preferred, not '%.*s'", static_cast<int>(pv.size()),
                            pv.data());
            u.params[key] = pv == "bind" ? 0 : 1;
            continue;
        }
        int64_t v;
        if (!parse_size(val, &v))
            return fail(SPECKV_EURI, "URI parameter %s='%.*s' is not a size/number", key.c_str(),
                        static_cast<int>(val.size()), val.data());
        if (u.params.count(key)) return fail(SPECKV_EURI, "URI parameter '%s' given twice", key.c_str());
        u.params[key] = v;
    }
    if (!u.name.empty()) {  // a named numa: pool is a shared file; the node stays in u.node
        u.named = true;
        u.target = named_pool_path(u.name, ".numa.pool");
    }
    *out = std::move(u);
    return SPECKV_OK;
}

}  // namespace speckv
