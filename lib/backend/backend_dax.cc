// SPDX-License-Identifier: Apache-2.0
// dax: backend. A device-dax character device (/dev/daxX.Y) found and checked
// with libdaxctl, then mapped whole. The mapping step is
// map_dax_fd(), apart from the lookup, so tests run it on a memfd.
#include <daxctl/libdaxctl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/backend.h"
#include "backend/devices.h"
#include "backend/registry.h"
#include "pool/pool_format.h"
#include "speckv.h"
#include "util/status.h"

#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif

namespace speckv {

namespace {

int open_errno_status(int e) {
    switch (e) {
        case ENOENT: return SPECKV_ENOENT;
        case EACCES:
        case EPERM:
        case EROFS: return SPECKV_EPERM;
        case EBUSY: return SPECKV_EBUSY;
        case ENOMEM: return SPECKV_ENOMEM;
        case ENXIO:
        case ENODEV: return SPECKV_ENOTSUP;
        default: return SPECKV_EIO;
    }
}

// libdaxctl logs to stderr by default; speckv reports through its own
// status messages instead.
void quiet_log(daxctl_ctx *, int, const char *, int, const char *, const char *, va_list) {}

const char *file_kind(mode_t m) {
    if (S_ISREG(m)) return "a regular file";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    return "not a device";
}

// The sysfs class of character device maj:min ("mem", "tty", ...), for messages.
std::string char_class(unsigned maj, unsigned min) {
    char link[64], buf[PATH_MAX];
    std::snprintf(link, sizeof link, "/sys/dev/char/%u:%u/subsystem", maj, min);
    ssize_t n = readlink(link, buf, sizeof buf - 1);
    if (n <= 0) return "";
    buf[n] = 0;
    const char *slash = std::strrchr(buf, '/');
    return slash ? slash + 1 : buf;
}

}  // namespace

daxctl_ctx *daxctl_open_quiet(int *rc) {
    daxctl_ctx *ctx = nullptr;
    *rc = daxctl_new(&ctx);
    if (*rc != 0 || !ctx) {
        if (*rc == 0) *rc = -ENOMEM;
        return nullptr;
    }
    daxctl_set_log_fn(ctx, quiet_log);
    return ctx;
}

DaxDevice describe_dax_dev(daxctl_dev *dev, int region_id) {
    DaxDevice d;
    const char *n = daxctl_dev_get_devname(dev);
    d.chardev = n ? n : "";
    d.region_id = region_id;
    d.size = daxctl_dev_get_size(dev);
    long align = static_cast<long>(daxctl_dev_get_align(dev));
    d.align = align > 0 ? static_cast<uint64_t>(align) : 0;
    d.target_node = daxctl_dev_get_target_node(dev);
    d.enabled = daxctl_dev_is_enabled(dev) != 0;
    d.major = daxctl_dev_get_major(dev);
    d.minor = daxctl_dev_get_minor(dev);
    // Same rule as `daxctl list`: a device bound to kmem has a memory object.
    if (daxctl_memory *mem = daxctl_dev_get_memory(dev)) {
        d.mode = "system-ram";
        if (daxctl_dev_get_resource(dev) != 0) {
            d.online_memblocks = daxctl_memory_is_online(mem);
            d.total_memblocks = daxctl_memory_num_sections(mem);
            int mv = daxctl_memory_is_movable(mem);
            d.movable = mv == 0 || mv == 1 ? mv : -1;
        }
    } else {
        d.mode = "devdax";
    }
    return d;
}

int find_dax_device(const std::string &path, DaxDevice *out) {
    struct stat st;
    bool exists = stat(path.c_str(), &st) == 0;
    int serr = exists ? 0 : errno;
    if (!exists && (serr == EACCES || serr == EPERM))
        return fail(SPECKV_EPERM, "permission denied looking up %s: %s", path.c_str(), strerror(serr));
    if (exists && !S_ISCHR(st.st_mode))
        return fail(SPECKV_EINVAL, "%s is %s, not a device-dax character device%s", path.c_str(), file_kind(st.st_mode),
                    S_ISREG(st.st_mode) ? " (for a pool in a file use file:)" : "");
    std::string base = path.substr(path.find_last_of('/') + 1);
    if (exists) {
        // The name may be a udev symlink: match the device number, not the name.
        char real[PATH_MAX];
        if (realpath(path.c_str(), real)) base = std::string(real).substr(std::string(real).find_last_of('/') + 1);
    }

    int crc = 0;
    daxctl_ctx *ctx = daxctl_open_quiet(&crc);
    if (!ctx) return fail(SPECKV_EIO, "libdaxctl could not start (daxctl_new: %s)", strerror(crc < 0 ? -crc : EIO));
    struct Unref {
        daxctl_ctx *c;
        ~Unref() { daxctl_unref(c); }
    } unref{ctx};
    std::string seen;
    daxctl_region *region;
    daxctl_region_foreach(ctx, region) {
        daxctl_dev *dev;
        daxctl_dev_foreach(region, dev) {
            const char *n = daxctl_dev_get_devname(dev);
            if (!n) continue;
            if (daxctl_dev_get_size(dev) || daxctl_dev_is_enabled(dev)) seen += (seen.empty() ? "" : ", ") + std::string(n);
            bool match = exists ? (daxctl_dev_get_major(dev) == static_cast<int>(major(st.st_rdev)) &&
                                   daxctl_dev_get_minor(dev) == static_cast<int>(minor(st.st_rdev)))
                                : base == n;
            if (match) {
                *out = describe_dax_dev(dev, daxctl_region_get_id(region));
                return SPECKV_OK;
            }
        }
    }
    if (exists) {
        std::string cls = char_class(major(st.st_rdev), minor(st.st_rdev));
        return fail(SPECKV_EINVAL, "%s is character device %u:%u%s%s%s, not a device-dax device (libdaxctl knows %s)",
                    path.c_str(), major(st.st_rdev), minor(st.st_rdev), cls.empty() ? "" : " (class ", cls.c_str(),
                    cls.empty() ? "" : ")", seen.empty() ? "none on this machine" : seen.c_str());
    }
    return fail(SPECKV_ENOENT,
                "no device-dax device at %s: %s (`speckv devices` or `daxctl list` shows what exists; docs/devices.md)",
                path.c_str(), seen.empty() ? "libdaxctl finds no dax devices on this machine" : ("libdaxctl knows " + seen).c_str());
}

int map_dax_fd(int fd, uint64_t size, uint64_t align, bool writable, const std::string &path, Mapping *out,
               DaxMapResult *res) {
    auto give_up = [&](int rc) {
        close(fd);
        return rc;
    };
    if (align == 0) align = 4096;  // kernel too old to report it: pages are the floor
    if (align < 4096 || (align & (align - 1)))
        return give_up(fail(SPECKV_EINVAL, "%s: alignment %" PRIu64 " is not a power of two of at least 4 KiB", path.c_str(),
                            align));
    if (size < kDaxMinBytes)
        return give_up(fail(SPECKV_EINVAL,
                            "%s is %" PRIu64 " bytes: too small for a speckv pool (at least %" PRIu64
                            ": 2 MiB of metadata alignment plus one 4 KiB page)",
                            path.c_str(), size, kDaxMinBytes));
    if (size % align)
        return give_up(fail(SPECKV_EINVAL,
                            "%s: size %" PRIu64 " is not a multiple of its alignment %" PRIu64
                            ": the kernel will not map the tail (re-create it with `daxctl create-device -a %" PRIu64
                            " -s <multiple>`)",
                            path.c_str(), size, align, align));
    if (size > SIZE_MAX / 2)
        return give_up(fail(SPECKV_EINVAL, "%s: %" PRIu64 " bytes do not fit this address space", path.c_str(), size));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        return give_up(fail(SPECKV_EIO, "cannot stat %s: %s", path.c_str(), strerror(e)));
    }
    // Every user holds a shared lock for the mapping's life; a process that
    // holds it exclusively (flock -x, a maintenance tool) makes it busy.
    if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
        int e = errno;
        if (e == EWOULDBLOCK)
            return give_up(fail(SPECKV_EBUSY, "%s is busy: another process holds it exclusively (flock)", path.c_str()));
        return give_up(fail(SPECKV_EIO, "cannot lock %s: %s", path.c_str(), strerror(e)));
    }
    // A file stand-in must really hold `size` bytes, or touching the tail faults.
    if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) < size)
        return give_up(fail(SPECKV_EINVAL, "%s holds %lld bytes, fewer than the %" PRIu64 " to map", path.c_str(),
                            static_cast<long long>(st.st_size), size));

    // Reserve an address aligned to the device's alignment (at least the
    // pool's 2 MiB data alignment), then map the device over it: devdax
    // refuses a mapping whose address is not aligned to its alignment.
    uint64_t ra = align > fmt::kDataAlign ? align : fmt::kDataAlign;
    size_t len = static_cast<size_t>(size), rlen = static_cast<size_t>(size + ra);
    void *r = mmap(nullptr, rlen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) {
        int e = errno;
        return give_up(fail(SPECKV_ENOMEM, "cannot reserve %zu bytes of address space for %s: %s", rlen, path.c_str(),
                            strerror(e)));
    }
    uintptr_t rb = reinterpret_cast<uintptr_t>(r);
    uintptr_t ab = (rb + ra - 1) / ra * ra;
    void *want = reinterpret_cast<void *>(ab);
    int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
    // MAP_SHARED_VALIDATE makes the kernel refuse MAP_SYNC it cannot honour
    // (EOPNOTSUPP; EINVAL before 4.15) instead of ignoring it. Those checks
    // run before the fixed range is touched, so the reservation survives.
    bool sync = true;
    void *p = mmap(want, len, prot, MAP_SHARED_VALIDATE | MAP_SYNC | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED && (errno == EOPNOTSUPP || errno == EINVAL)) {
        sync = false;
        p = mmap(want, len, prot, MAP_SHARED | MAP_FIXED, fd, 0);
    }
    if (p == MAP_FAILED) {
        int e = errno;
        munmap(r, rlen);
        int code = e == EACCES || e == EPERM ? SPECKV_EPERM
                   : e == EBUSY              ? SPECKV_EBUSY
                   : e == ENOMEM             ? SPECKV_ENOMEM
                   : e == EINVAL             ? SPECKV_EINVAL
                                             : SPECKV_EIO;
        return give_up(fail(code, "cannot map %s (%" PRIu64 " bytes, %s, alignment %" PRIu64 "): %s", path.c_str(), size,
                            writable ? "read-write" : "read-only", ra, strerror(e)));
    }
    if (ab > rb) munmap(r, ab - rb);
    if (rb + rlen > ab + len) munmap(reinterpret_cast<void *>(ab + len), rb + rlen - (ab + len));
    if (res) res->map_sync = sync;
    *out = Mapping::adopt(static_cast<unsigned char *>(p), len, fd, /*shared=*/true, writable, path);
    return SPECKV_OK;
}

int Mapping::open_dax(const std::string &path, bool writable, Mapping *out) {
    DaxDevice d;
    if (int rc = find_dax_device(path, &d); rc != SPECKV_OK) return rc;
    const char *name = d.chardev.c_str();
    if (d.mode == "system-ram") {
        bool online = d.online_memblocks > 0;
        return fail(online ? SPECKV_EBUSY : SPECKV_ENOTSUP,
                    "%s is in system-ram mode: its memory %s NUMA node %d instead of a device to map. Use "
                    "numa:%d?size=... for it, or switch it back (as root) with `daxctl reconfigure-device "
                    "--mode=devdax%s %s`",
                    name, online ? "is online as" : "belongs to", d.target_node, d.target_node,
                    online ? " --force" : "", name);
    }
    if (!d.enabled)
        return fail(SPECKV_ENOTSUP, "%s is disabled (no driver bound): enable it with `daxctl enable-device %s`", name,
                    name);
    if (d.size == 0)
        return fail(SPECKV_EINVAL, "%s has no capacity (size 0): give it some with `daxctl reconfigure-device -s <size> %s`",
                    name, name);

    int fd = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        int code = open_errno_status(e);
        if (code == SPECKV_EPERM) {
            struct stat st {};
            stat(path.c_str(), &st);
            return fail(code,
                        "permission denied opening %s %s (owner uid %u, group %u, mode %03o): run as a user who may, "
                        "or grant access with a udev rule (docs/devices.md)",
                        path.c_str(), writable ? "read-write" : "read-only", st.st_uid, st.st_gid, st.st_mode & 0777);
        }
        if (code == SPECKV_EBUSY) return fail(code, "%s is busy: %s", path.c_str(), strerror(e));
        if (code == SPECKV_ENOTSUP)
            return fail(code, "%s has no driver behind it (%s): `daxctl enable-device %s`", path.c_str(), strerror(e), name);
        return fail(code, "cannot open %s: %s", path.c_str(), strerror(e));
    }
    // The node must still be the device libdaxctl described (no rename race).
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode) || (d.major >= 0 && (static_cast<int>(major(st.st_rdev)) != d.major ||
                                                                          static_cast<int>(minor(st.st_rdev)) != d.minor))) {
        close(fd);
        return fail(SPECKV_EINVAL, "%s changed while it was being opened: not the device-dax device %s", path.c_str(), name);
    }
    return map_dax_fd(fd, d.size, d.align, writable, path, out);
}

// ------------------------------------------------------ the backend's row

namespace {

int parse_dax_target(std::string_view rest, Uri *u) {
    if (rest.empty() || rest[0] != '/') return fail(SPECKV_EURI, "dax: URI needs a device path like dax:/dev/dax0.0");
    u->target = std::string(rest);
    return SPECKV_OK;
}

// A device without a pool gets one over its whole size (its own size wins
// over pool.size), unless create=0.
int open_dax_pool(const Uri &uri, const OpenArgs &a, Mapping *out) {
    if (int rc = Mapping::open_dax(uri.target, true, out); rc) return rc;
    return a.make.adopt(a.make.ctx, *out, a.create);
}

int attach_dax_pool(const Uri &uri, bool writable, Mapping *out) { return Mapping::open_dax(uri.target, writable, out); }

Placement dax_uri_placement(const Uri &uri) { return dax_placement(uri.target); }

}  // namespace

extern const Backend kDaxBackend = {"dax", Scheme::Dax, parse_dax_target, /*file_params=*/false, /*numa_params=*/false,
                                    open_dax_pool, attach_dax_pool, nullptr, /*prefault=*/false, dax_uri_placement};

}  // namespace speckv
