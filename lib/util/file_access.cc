// SPDX-License-Identifier: Apache-2.0
#include "util/file_access.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "config/config.h"
#include "util/status.h"
#include "config/uri.h"

namespace speckv {

FileAccess file_access(const Uri &u, const Config *cfg) {
    FileAccess a;
    if (cfg) {
        if (cfg->is_set("pool.owner")) a.owner = cfg->get("pool.owner");
        if (cfg->is_set("pool.group")) a.group = cfg->get("pool.group");
        a.mode = static_cast<uint32_t>(cfg->get("pool.mode"));
    }
    if (auto it = u.params.find("owner"); it != u.params.end()) a.owner = it->second;
    if (auto it = u.params.find("group"); it != u.params.end()) a.group = it->second;
    if (auto it = u.params.find("mode"); it != u.params.end()) a.mode = static_cast<uint32_t>(it->second);
    return a;
}

std::string directory_of(const std::string &path) {
    size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

int check_directory(const std::string &dir, const char *what) {
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) return SPECKV_OK;  // the open that follows says what is missing
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
        return fail(SPECKV_EPERM,
                    "the directory '%s' of the %s is writable by every user and has no sticky bit (mode %04o): "
                    "anyone could replace the file or plant one in its place. Keep it in a directory only you "
                    "can write to, or set the sticky bit (chmod +t '%s', as /tmp and /dev/shm have)",
                    dir.c_str(), what, unsigned(st.st_mode & 07777), dir.c_str());
    return SPECKV_OK;
}

static std::string user_name(uid_t uid) {
    struct passwd pw, *res = nullptr;
    char buf[1024];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) return std::string(" (") + res->pw_name + ")";
    return "";
}

static std::string group_name(gid_t gid) {
    struct group gr, *res = nullptr;
    char buf[1024];
    if (getgrgid_r(gid, &gr, buf, sizeof buf, &res) == 0 && res) return std::string(" (") + res->gr_name + ")";
    return "";
}

int check_open_file(int fd, const std::string &path, const FileAccess &a, const char *what, int not_regular) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        return fail(SPECKV_EIO, "cannot stat the %s '%s': %s", what, path.c_str(), strerror(e));
    }
    if (!S_ISREG(st.st_mode)) return fail(not_regular, "the %s '%s' is not a regular file", what, path.c_str());
    const uid_t me = geteuid();
    const bool ok = st.st_uid == me || st.st_uid == 0 || (a.owner >= 0 && st.st_uid == uid_t(a.owner)) ||
                    (a.group >= 0 && st.st_gid == gid_t(a.group));
    if (!ok)
        return fail(SPECKV_EPERM,
                    "the %s '%s' belongs to uid %u%s, group %u%s (mode %04o), not to you (uid %u) or root: its "
                    "owner can read every K/V written into it and plant K/V you would read. Refused. If you share "
                    "it with that user on purpose, name them: URI owner=%u or group=%u, config pool.owner = %u or "
                    "pool.group = %u (docs/sharing.md, \"Threat model\")",
                    what, path.c_str(), unsigned(st.st_uid), user_name(st.st_uid).c_str(), unsigned(st.st_gid),
                    group_name(st.st_gid).c_str(), unsigned(st.st_mode & 07777), unsigned(me), unsigned(st.st_uid),
                    unsigned(st.st_gid), unsigned(st.st_uid), unsigned(st.st_gid));
    return check_directory(directory_of(path), what);
}

int secure_open_flags(const std::string &path) {
    static const std::string own = "/proc/self/fd/";
    const bool own_fd = path.size() > own.size() && path.compare(0, own.size(), own) == 0 &&
                        path.find_first_not_of("0123456789", own.size()) == std::string::npos;
    return own_fd ? O_CLOEXEC : (O_NOFOLLOW | O_CLOEXEC);
}

int open_failure(int e, const std::string &path, const char *what) {
    switch (e) {
        case ENOENT: return fail(SPECKV_ENOENT, "cannot open %s '%s': %s", what, path.c_str(), strerror(e));
        case ELOOP:
            return fail(SPECKV_EPERM,
                        "the %s '%s' is a symbolic link: speckv does not follow links to the files it opens "
                        "(a link could point it at another user's file); name the file itself",
                        what, path.c_str());
        case EACCES:
        case EPERM:
        case EROFS: return fail(SPECKV_EPERM, "cannot open %s '%s': %s", what, path.c_str(), strerror(e));
        case ENOMEM: return fail(SPECKV_ENOMEM, "cannot open %s '%s': %s", what, path.c_str(), strerror(e));
        case ENOSPC: return fail(SPECKV_ENOSPC, "cannot open %s '%s': %s", what, path.c_str(), strerror(e));
        case EEXIST: return fail(SPECKV_EEXIST, "cannot create %s '%s': %s", what, path.c_str(), strerror(e));
        default: return fail(SPECKV_EIO, "cannot open %s '%s': %s", what, path.c_str(), strerror(e));
    }
}

std::vector<std::string> stale_temp_files(const std::string &path, bool sweep) {
    std::vector<std::string> out;
    const std::string dir = directory_of(path);
    const std::string base = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
    const std::string prefix = base + ".tmp.";
    DIR *d = opendir(dir.c_str());
    if (!d) return out;
    while (struct dirent *e = readdir(d)) {
        std::string name = e->d_name;
        if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
        const std::string pid_text = name.substr(prefix.size());
        if (pid_text.size() > 9 || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
        const long pid = std::strtol(pid_text.c_str(), nullptr, 10);
        if (pid <= 0) continue;
        if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // running (or not ours to know)
        const std::string full = (dir == "/" ? "" : dir) + "/" + name;
        struct stat st;
        if (lstat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (sweep && (st.st_uid == geteuid() || geteuid() == 0) && unlink(full.c_str()) == 0) {
            out.push_back(full);
            continue;
        }
        if (!sweep) out.push_back(full);
    }
    closedir(d);
    return out;
}

}  // namespace speckv
