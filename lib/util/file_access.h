// SPDX-License-Identifier: Apache-2.0
// Who may own the files speckv opens (pool files, named numa: pool files,
// the L4 cold file), and the mode of the files it creates (docs/sharing.md,
// "Threat model"). A file that another user owns could be read and written
// by that user: whatever K/V it holds is theirs to read and to plant, so it
// is refused unless the caller names that owner (or group) on purpose.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace speckv {

struct Uri;
class Config;

struct FileAccess {
    // Besides the effective user and root: a file owned by this uid (-1:
    // none), or whose group is this gid (-1: none), is accepted too
    // (URI owner= / group=, config pool.owner / pool.group).
    int64_t owner = -1;
    int64_t group = -1;
    // Permission bits of a file speckv creates, set exactly (the umask does
    // not narrow them): 0600 unless widened (URI mode=, config pool.mode).
    uint32_t mode = 0600;
};

inline constexpr uint32_t kDefaultFileMode = 0600;

// From a parsed URI's owner=, group=, mode= (they win) and the config's
// pool.owner, pool.group, pool.mode (cfg may be null).
FileAccess file_access(const Uri &u, const Config *cfg);

// Refuses (SPECKV_EPERM) a directory that anyone may write to without the
// sticky bit: anyone could replace or plant files in it. `dir` must exist.
int check_directory(const std::string &dir, const char *what);
// The directory part of `path` ("." for a bare name).
std::string directory_of(const std::string &path);

// The open descriptor `fd` of `path`: a regular file (else SPECKV_ENOTPOOL
// for a pool, SPECKV_EINVAL otherwise, by `not_regular`), owned by the
// effective user, root, or who `a` names (else SPECKV_EPERM saying who owns
// it and how to opt in); its directory as check_directory says.
int check_open_file(int fd, const std::string &path, const FileAccess &a, const char *what, int not_regular);

// open(2) flags every speckv file open adds: O_NOFOLLOW | O_CLOEXEC; for
// /proc/self/fd/N (a file this process opened itself, so nothing another user
// could plant) O_CLOEXEC alone, since that path is a link by construction.
int secure_open_flags(const std::string &path);
// A failed open's errno as a SPECKV_* code and message (ELOOP: a symbolic
// link, which speckv does not follow).
int open_failure(int e, const std::string &path, const char *what);

// "<path>.tmp.<pid>" files that processes left when they died while
// creating `path` (their pid no longer runs). sweep=true also deletes them
// (those this user may delete); returns the names found.
std::vector<std::string> stale_temp_files(const std::string &path, bool sweep);

}  // namespace speckv
