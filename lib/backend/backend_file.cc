// SPDX-License-Identifier: Apache-2.0
// file: and anon: backends. A file: pool on a hugetlbfs mount lives on huge
// pages (docs/devices.md, "Huge pages").
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "backend/backend.h"
#include "backend/registry.h"
#include "util/file_access.h"
#include "util/status.h"

namespace speckv {

Mapping::~Mapping() { reset(); }

void Mapping::reset() {
    if (base_) munmap(base_, size_);
    if (fd_ >= 0) close(fd_);
    base_ = nullptr;
    size_ = 0;
    fd_ = -1;
    node_ = -1;
}

Mapping &Mapping::operator=(Mapping &&o) noexcept {
    if (this != &o) {
        reset();
        base_ = o.base_;
        size_ = o.size_;
        fd_ = o.fd_;
        shared_ = o.shared_;
        writable_ = o.writable_;
        node_ = o.node_;
        path_ = std::move(o.path_);
        o.base_ = nullptr;
        o.size_ = 0;
        o.fd_ = -1;
    }
    return *this;
}

static int errno_status(int e) {
    switch (e) {
        case ENOENT: return SPECKV_ENOENT;
        case EACCES:
        case EPERM:
        case EROFS: return SPECKV_EPERM;
        case ENOMEM: return SPECKV_ENOMEM;
        case ENOSPC: return SPECKV_ENOSPC;
        case EEXIST: return SPECKV_EEXIST;
        default: return SPECKV_EIO;
    }
}

// ------------------------------------------------------ hugetlbfs
// A file on a hugetlbfs mount is backed by huge pages of the mount's size (its
// statfs block size): its length is rounded up to that size, fallocate takes
// the pages from the reserved pool (vm.nr_hugepages) or fails with ENOSPC, and
// mmap fails with ENOMEM when they cannot be reserved. Ordinary writes are
// not supported there; the pool only maps.

namespace {

constexpr long kHugetlbfsMagic = 0x958458f6;  // HUGETLBFS_MAGIC (linux/magic.h)

// The huge page size of the file system holding fd; 0 when not hugetlbfs.
size_t hugetlbfs_page_size(int fd) {
    struct statfs sf;
    if (fstatfs(fd, &sf) != 0 || static_cast<long>(sf.f_type) != kHugetlbfsMagic || sf.f_bsize <= 0) return 0;
    return static_cast<size_t>(sf.f_bsize);
}

// free_hugepages of that size (sysfs), or -1 when unknown.
long free_huge_pages(size_t page) {
    char path[96];
    std::snprintf(path, sizeof path, "/sys/kernel/mm/hugepages/hugepages-%zukB/free_hugepages", page >> 10);
    FILE *f = std::fopen(path, "r");
    if (!f) return -1;
    long n = -1;
    if (std::fscanf(f, "%ld", &n) != 1) n = -1;
    std::fclose(f);
    return n;
}

// SPECKV_ENOMEM naming what to change: huge pages are reserved ahead by the
// administrator, never taken from ordinary memory.
int no_huge_pages(const std::string &path, size_t size, size_t page, int e) {
    const long have = free_huge_pages(page);
    return fail(SPECKV_ENOMEM,
                "no huge pages for the %zu-byte pool '%s' on hugetlbfs (%s): it needs %zu pages of %zu KiB, %ld free; "
                "reserve them with /proc/sys/vm/nr_hugepages (sysctl vm.nr_hugepages%s) or raise the mount's size=",
                size, path.c_str(), strerror(e), size / page, page >> 10, have,
                page == (size_t(2) << 20) ? "" : ", or that size's hugepages-NkB/nr_hugepages in /sys/kernel/mm/hugepages");
}

}  // namespace

int Mapping::open_file(const std::string &path, bool writable, Mapping *out, const FileAccess &access) {
    int fd = open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | secure_open_flags(path));
    if (fd < 0) return open_failure(errno, path, "pool file");
    if (int rc = check_open_file(fd, path, access, "pool file", SPECKV_ENOTPOOL); rc != SPECKV_OK) {
        close(fd);
        return rc;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(SPECKV_EIO, "cannot stat pool file '%s': %s", path.c_str(), strerror(e));
    }
    if (st.st_size <= 0) {
        close(fd);
        return fail(SPECKV_ENOTPOOL, "'%s' is empty: not a speckv pool", path.c_str());
    }
    size_t size = static_cast<size_t>(st.st_size);
    void *p = mmap(nullptr, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        const size_t huge = hugetlbfs_page_size(fd);
        close(fd);
        if (huge && e == ENOMEM) return no_huge_pages(path, size, huge, e);
        return fail(errno_status(e), "cannot map '%s' (%zu bytes): %s", path.c_str(), size, strerror(e));
    }
    out->reset();
    out->base_ = static_cast<unsigned char *>(p);
    out->size_ = size;
    out->fd_ = fd;
    out->shared_ = true;
    out->writable_ = writable;
    out->path_ = path;
    return SPECKV_OK;
}

int Mapping::create_file_impl(const std::string &path, size_t size, int (*init)(void *, unsigned char *, size_t),
                              void *ctx, Mapping *out, bool preallocate, const FileAccess &access) {
    if (int rc = check_directory(directory_of(path), "pool file"); rc != SPECKV_OK) return rc;
    // What creators killed before they published left behind (their pid is gone).
    stale_temp_files(path, /*sweep=*/true);
    std::string tmp = path + ".tmp." + std::to_string(getpid());
    int fd = open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | secure_open_flags(tmp), access.mode & 0777);
    if (fd < 0) {
        int e = errno;
        return fail(errno_status(e), "cannot create pool file '%s': %s", tmp.c_str(), strerror(e));
    }
    // Exactly the mode asked for (0600 unless widened on purpose): the umask
    // may not narrow a deliberate sharing mode, nor widen the default.
    if (fchmod(fd, access.mode & 0777) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp.c_str());
        return fail(errno_status(e), "cannot set the mode of pool file '%s': %s", tmp.c_str(), strerror(e));
    }
    auto abandon = [&](int rc) {
        close(fd);
        unlink(tmp.c_str());
        return rc;
    };
    // On hugetlbfs: whole huge pages (the pool formats what it is given), and
    // taken now, so that a shortage is this call's error and not a SIGBUS.
    const size_t huge = hugetlbfs_page_size(fd);
    if (huge) {
        size = (size + huge - 1) / huge * huge;
        if (int e = posix_fallocate(fd, 0, static_cast<off_t>(size)); e != 0) {
            if (e == ENOSPC || e == ENOMEM) return abandon(no_huge_pages(path, size, huge, e));
            return abandon(fail(errno_status(e), "cannot allocate huge pages for pool file '%s': %s", tmp.c_str(),
                                strerror(e)));
        }
    } else if (int e = preallocate ? posix_fallocate(fd, 0, static_cast<off_t>(size)) : EOPNOTSUPP; e != 0) {
        // tmpfs and most file systems support it; fall back to a sparse file.
        if (e == ENOSPC) return abandon(fail(SPECKV_ENOSPC, "no room for a %zu-byte pool at '%s'", size, path.c_str()));
        if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
            e = errno;
            return abandon(fail(errno_status(e), "cannot size pool file '%s': %s", tmp.c_str(), strerror(e)));
        }
    }
    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        if (huge && e == ENOMEM) return abandon(no_huge_pages(path, size, huge, e));
        return abandon(fail(errno_status(e), "cannot map new pool '%s': %s", tmp.c_str(), strerror(e)));
    }
    int rc = init(ctx, static_cast<unsigned char *>(p), size);
    if (rc != SPECKV_OK) {
        munmap(p, size);
        return abandon(rc);
    }
    if (link(tmp.c_str(), path.c_str()) != 0) {
        int e = errno;
        munmap(p, size);
        abandon(0);
        if (e == EEXIST) return fail(SPECKV_EEXIST, "pool '%s' already exists", path.c_str());
        return fail(errno_status(e), "cannot publish pool '%s': %s", path.c_str(), strerror(e));
    }
    unlink(tmp.c_str());
    out->reset();
    out->base_ = static_cast<unsigned char *>(p);
    out->size_ = size;
    out->fd_ = fd;
    out->shared_ = true;
    out->writable_ = true;
    out->path_ = path;
    return SPECKV_OK;
}

Mapping Mapping::adopt(unsigned char *base, size_t size, int fd, bool shared, bool writable, std::string path) {
    Mapping m;
    m.base_ = base;
    m.size_ = size;
    m.fd_ = fd;
    m.shared_ = shared;
    m.writable_ = writable;
    m.path_ = std::move(path);
    return m;
}

int Mapping::open_anon(size_t size, Mapping *out) {
    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        return fail(errno_status(e), "cannot map %zu bytes of anonymous memory: %s", size, strerror(e));
    }
    out->reset();
    out->base_ = static_cast<unsigned char *>(p);
    out->size_ = size;
    out->shared_ = false;
    out->writable_ = true;
    out->path_ = "";
    return SPECKV_OK;
}

// ------------------------------------------------------ the backends' rows

namespace {

int parse_file_target(std::string_view rest, Uri *u) {
    if (rest.empty()) return fail(SPECKV_EURI, "file: URI needs a path or a pool name");
    if (rest.find('/') == std::string_view::npos) {
        if (!valid_pool_name(rest))
            return fail(SPECKV_EURI, "pool name '%.*s' must be 1-200 characters of [A-Za-z0-9._-], not starting with '.'",
                        static_cast<int>(rest.size()), rest.data());
        u->named = true;
        u->target = named_pool_path(rest, ".pool");
    } else {
        u->target = std::string(rest);
    }
    return SPECKV_OK;
}

// Attaches the file, or creates it (a.create) when it does not exist; a
// creator that loses the race attaches the winner's pool.
int open_file_pool(const Uri &uri, const OpenArgs &a, Mapping *out) {
    if (uri.named) {
        std::string dir = uri.target.substr(0, uri.target.find_last_of('/'));
        if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
            return fail(SPECKV_EIO, "cannot create pool directory '%s': %s", dir.c_str(), strerror(errno));
    }
    int rc = Mapping::open_file(uri.target, true, out, a.access);
    if (rc == SPECKV_ENOENT) {
        if (!a.create) return fail(SPECKV_ENOENT, "pool '%s' does not exist (and create=0)", uri.target.c_str());
        if (int prc = a.make.plan(a.make.ctx); prc) return prc;
        auto init = [&a](unsigned char *b, size_t n) { return a.make.init(a.make.ctx, b, n); };
        rc = Mapping::create_file(uri.target, a.size, init, out, true, a.access);
        if (rc == SPECKV_EEXIST) rc = Mapping::open_file(uri.target, true, out, a.access);
    }
    return rc;
}

int attach_file_pool(const Uri &uri, bool writable, Mapping *out) {
    return Mapping::open_file(uri.target, writable, out, file_access(uri, nullptr));
}

int parse_anon_target(std::string_view rest, Uri *) {
    if (!rest.empty()) return fail(SPECKV_EURI, "anon: URI takes no path (use anon:?size=1G)");
    return SPECKV_OK;
}

int open_anon_pool(const Uri &, const OpenArgs &a, Mapping *out) {
    if (int rc = a.make.plan(a.make.ctx); rc) return rc;
    if (int rc = Mapping::open_anon(a.size, out); rc) return rc;
    return a.make.init(a.make.ctx, out->base(), out->size());
}

const char *anon_label(const Uri &) { return "anonymous pool"; }

}  // namespace

extern const Backend kFileBackend = {"file", Scheme::File, parse_file_target, /*file_params=*/true,
                                     /*numa_params=*/false, open_file_pool, attach_file_pool, nullptr,
                                     /*prefault=*/true, nullptr};
extern const Backend kAnonBackend = {"anon", Scheme::Anon, parse_anon_target, false, false, open_anon_pool,
                                     /*attach: private memory*/ nullptr, anon_label, false, nullptr};

}  // namespace speckv
