// SPDX-License-Identifier: Apache-2.0
// numa: backend. Memory bound to one NUMA node with mbind (a CXL memory
// expander onlined as system RAM is such a node), every page faulted in at
// open and its placement checked with move_pages. Unnamed: private anonymous
// memory. Named (name=): a tmpfs file whose shared memory policy (set by
// mbind on a MAP_SHARED mapping, kept by the file) binds its pages, so other
// processes and the CLI can attach the same pool.
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/devices.h"
#include "backend/registry.h"
#include "speckv.h"
#include "util/status.h"

namespace speckv {

namespace {

struct BitmaskFree {
    void operator()(bitmask *b) const { numa_bitmask_free(b); }
};
using Bitmask = std::unique_ptr<bitmask, BitmaskFree>;

std::string node_list() {
    std::string s;
    for (int n = 0; n <= numa_max_node(); n++)
        if (numa_bitmask_isbitset(numa_nodes_ptr, static_cast<unsigned>(n))) s += (s.empty() ? "" : ", ") + std::to_string(n);
    return s;
}

}  // namespace

int numa_placement(const void *base, size_t size, int node, NumaPlacement *out) {
    *out = NumaPlacement{};
    const size_t pg = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t chunk = 4096;
    std::vector<void *> addrs(chunk);
    std::vector<int> status(chunk);
    auto *b = static_cast<unsigned char *>(const_cast<void *>(base));
    size_t total = (size + pg - 1) / pg;
    for (size_t first = 0; first < total; first += chunk) {
        size_t n = std::min(chunk, total - first);
        for (size_t i = 0; i < n; i++) addrs[i] = b + (first + i) * pg;
        // nodes == NULL: move nothing, report each page's node in status.
        if (move_pages(0, n, addrs.data(), nullptr, status.data(), 0) != 0) {
            int e = errno;
            return fail(SPECKV_EIO, "move_pages (placement query) failed: %s", strerror(e));
        }
        for (size_t i = 0; i < n; i++) {
            out->pages++;
            if (status[i] == node) out->on_node++;
            else if (status[i] >= 0) {
                out->elsewhere++;
                out->other_node = status[i];
            } else out->absent++;  // -ENOENT: not faulted in
        }
    }
    return SPECKV_OK;
}

namespace {

const char *policy_name(int mode) { return mode == MPOL_BIND ? "bind" : mode == MPOL_PREFERRED ? "preferred" : "other"; }

// Node N is usable: NUMA works, N exists, has memory, is allowed; with bind,
// `size` bytes are free on it (a bound mapping larger than that would meet
// the OOM killer while being faulted in).
int check_node(int node, size_t size, int policy) {
    if (numa_available() < 0)
        return fail(SPECKV_ENOTSUP, "NUMA is not available here (kernel without NUMA support, or /sys not readable): "
                                    "use anon: or file:");
    if (node < 0 || node > numa_max_node() || !numa_bitmask_isbitset(numa_nodes_ptr, static_cast<unsigned>(node)))
        return fail(SPECKV_ENOENT, "NUMA node %d does not exist (this machine has node%s %s; `speckv devices` lists them)",
                    node, numa_num_configured_nodes() == 1 ? "" : "s", node_list().c_str());
    long long free_bytes = 0;
    long long total = numa_node_size64(node, &free_bytes);
    if (total <= 0)
        return fail(SPECKV_ENOENT,
                    "NUMA node %d has no memory (a CPU-only node): pick a node with memory (`speckv devices`, "
                    "`numactl -H`)",
                    node);
    if (!numa_bitmask_isbitset(numa_all_nodes_ptr, static_cast<unsigned>(node)))
        return fail(SPECKV_EPERM, "NUMA node %d is outside this process's allowed memory nodes (cpuset mems: %s)", node,
                    node_list().c_str());
    if (policy == 0 && static_cast<unsigned long long>(free_bytes) < size)
        return fail(SPECKV_ENOSPC,
                    "NUMA node %d has %lld bytes free, the pool needs %zu: shrink it, free memory there, or use "
                    "policy=preferred to spill to other nodes",
                    node, free_bytes, size);
    return SPECKV_OK;
}

// mbind the range to `node` and read the policy back. On a MAP_SHARED tmpfs
// mapping the policy is the file's (shared policy): it governs every page
// allocated for that range later, by any process.
int bind_range(void *p, size_t size, int node, int policy) {
    Bitmask mask(numa_allocate_nodemask());
    Bitmask got(numa_allocate_nodemask());
    if (!mask || !got) return fail(SPECKV_ENOMEM, "numa_allocate_nodemask failed");
    numa_bitmask_setbit(mask.get(), static_cast<unsigned>(node));
    int mode = policy == 0 ? MPOL_BIND : MPOL_PREFERRED;
    if (mbind(p, size, mode, mask->maskp, mask->size + 1, MPOL_MF_STRICT) != 0) {
        int e = errno;
        return fail(e == EPERM ? SPECKV_EPERM : SPECKV_EIO, "mbind(%s, node %d) failed: %s",
                    policy == 0 ? "MPOL_BIND" : "MPOL_PREFERRED", node, strerror(e));
    }
    int got_mode = -1;
    if (get_mempolicy(&got_mode, got->maskp, got->size + 1, p, MPOL_F_ADDR) != 0 || got_mode != mode ||
        !numa_bitmask_equal(got.get(), mask.get()))
        return fail(SPECKV_EIO, "the memory policy did not take: get_mempolicy reports mode %d, not %d", got_mode, mode);
    return SPECKV_OK;
}

// Faults every page in: write = allocate (fresh memory, zeros kept), else
// map the pages that exist (attach). Older kernels lack MADV_POPULATE_*:
// touch by hand.
int fault_in(void *p, size_t size, bool write, int node) {
    if (madvise(p, size, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0) return SPECKV_OK;
    int e = errno;
    if (e != EINVAL)
        return fail(e == EFAULT ? SPECKV_ENOSPC : SPECKV_ENOMEM, "cannot fault in %zu bytes on NUMA node %d: %s%s", size,
                    node, strerror(e), e == EFAULT ? " (the tmpfs or the node ran out of room)" : "");
    const size_t pg = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    auto *b = static_cast<volatile unsigned char *>(p);
    for (size_t off = 0; off < size; off += pg) {
        if (write) b[off] = 0;
        else (void)b[off];
    }
    return SPECKV_OK;
}

// Every page on `node` (bind); with preferred, pages elsewhere are what the
// policy allows, but none may be missing.
int verify_placement(const void *p, size_t size, int node, bool strict) {
    int first_node = -1;
    if (get_mempolicy(&first_node, nullptr, 0, const_cast<void *>(p), MPOL_F_NODE | MPOL_F_ADDR) != 0) first_node = -1;
    NumaPlacement pl;
    if (int rc = numa_placement(p, size, node, &pl); rc != SPECKV_OK) return rc;
    if ((strict && (pl.on_node != pl.pages || first_node != node)) || pl.absent)
        return fail(SPECKV_EIO,
                    "NUMA placement check failed: %" PRIu64 " of %" PRIu64 " pages on node %d (%" PRIu64
                    " on node %d, %" PRIu64 " not present)",
                    pl.on_node, pl.pages, node, pl.elsewhere, pl.other_node, pl.absent);
    return SPECKV_OK;
}

// The directory of a named pool must be a tmpfs: mbind's shared policy
// governs shmem pages only; a disk file system's page cache ignores it.
int check_tmpfs(const std::string &dir, size_t need) {
    struct statfs fs;
    if (statfs(dir.c_str(), &fs) != 0) {
        int e = errno;
        return fail(SPECKV_EIO, "cannot stat the pool directory '%s': %s", dir.c_str(), strerror(e));
    }
    if (static_cast<unsigned long>(fs.f_type) != TMPFS_MAGIC)
        return fail(SPECKV_ENOTSUP,
                    "named numa: pools live in a tmpfs (their pages are bound to the node with mbind, which a disk "
                    "file system's page cache ignores), and '%s' is not one: set XDG_RUNTIME_DIR to a tmpfs "
                    "directory (e.g. /run/user/$UID) or mount /dev/shm",
                    dir.c_str());
    struct statvfs vs;
    if (need && statvfs(dir.c_str(), &vs) == 0 && uint64_t(vs.f_bavail) * vs.f_frsize < need)
        return fail(SPECKV_ENOSPC, "the tmpfs at '%s' has %" PRIu64 " bytes free, the pool needs %zu", dir.c_str(),
                    uint64_t(vs.f_bavail) * vs.f_frsize, need);
    return SPECKV_OK;
}

std::string how_to_name(const Uri &uri) {
    return "numa:" + std::to_string(uri.node) + "?size=...&name=NAME";
}

// Attaches the existing named pool `uri.target`: its policy must be node N's.
int attach_named(const Uri &uri, bool writable, Mapping *out) {
    if (numa_available() < 0)
        return fail(SPECKV_ENOTSUP, "NUMA is not available here: a numa: pool cannot be attached");
    Mapping m;
    if (int rc = Mapping::open_file(uri.target, writable, &m, file_access(uri, nullptr)); rc != SPECKV_OK) {
        if (rc == SPECKV_ENOENT)
            return fail(SPECKV_ENOENT, "NUMA pool '%s' does not exist (no file %s): create it with `speckv pool create "
                                       "numa:%d?name=%s --size SIZE`, or open it with create=1",
                        uri.name.c_str(), uri.target.c_str(), uri.node, uri.name.c_str());
        return rc;
    }
    const char *path = uri.target.c_str();
    struct statfs fs;
    if (fstatfs(m.fd(), &fs) != 0 || static_cast<unsigned long>(fs.f_type) != TMPFS_MAGIC)
        return fail(SPECKV_EINVAL, "'%s' is not on a tmpfs: not a numa: pool", path);
    Bitmask mask(numa_allocate_nodemask());
    if (!mask) return fail(SPECKV_ENOMEM, "numa_allocate_nodemask failed");
    int mode = -1;
    if (get_mempolicy(&mode, mask->maskp, mask->size + 1, m.base(), MPOL_F_ADDR) != 0) {
        int e = errno;
        return fail(SPECKV_EIO, "get_mempolicy on '%s' failed: %s", path, strerror(e));
    }
    if (mode != MPOL_BIND && mode != MPOL_PREFERRED)
        return fail(SPECKV_EINVAL,
                    "'%s' carries no NUMA binding (memory policy %d): it is not a numa: pool (a file: pool of the "
                    "same name? open it as file:)",
                    path, mode);
    int bound = -1;
    for (int n = 0; n <= numa_max_node(); n++)
        if (numa_bitmask_isbitset(mask.get(), static_cast<unsigned>(n))) {
            if (bound >= 0) return fail(SPECKV_EINVAL, "'%s' is bound to several NUMA nodes: not a numa: pool", path);
            bound = n;
        }
    if (bound != uri.node)
        return fail(SPECKV_EINVAL, "NUMA pool '%s' is bound to node %d, not %d: open it as numa:%d?name=%s",
                    uri.name.c_str(), bound, uri.node, bound, uri.name.c_str());
    if (auto it = uri.params.find("policy"); it != uri.params.end() && (it->second == 0) != (mode == MPOL_BIND))
        return fail(SPECKV_EINVAL, "NUMA pool '%s' was created with policy=%s, the URI asks for %s", uri.name.c_str(),
                    policy_name(mode), it->second == 0 ? "bind" : "preferred");
    if (int rc = fault_in(m.base(), m.size(), false, uri.node); rc != SPECKV_OK) return rc;
    if (int rc = verify_placement(m.base(), m.size(), uri.node, mode == MPOL_BIND); rc != SPECKV_OK) return rc;
    *out = std::move(m);  // the callers record the node
    return SPECKV_OK;
}

}  // namespace

int Mapping::open_numa(int node, size_t size, int policy, Mapping *out) {
    if (policy != 0 && policy != 1) return fail(SPECKV_EINVAL, "numa: policy %d is neither 0 (bind) nor 1 (preferred)", policy);
    if (size == 0) return fail(SPECKV_EINVAL, "numa: pool size is 0");
    if (int rc = check_node(node, size, policy); rc != SPECKV_OK) return rc;
    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        return fail(SPECKV_ENOMEM, "cannot map %zu bytes for NUMA node %d: %s", size, node, strerror(e));
    }
    // Fault every page in now, on the node, so a pool never meets a node out
    // of memory later in the middle of a write. Writing zeros keeps the
    // anonymous memory's zero state that the pool format relies on.
    int rc = bind_range(p, size, node, policy);
    if (rc == SPECKV_OK) rc = fault_in(p, size, true, node);
    if (rc == SPECKV_OK) rc = verify_placement(p, size, node, policy == 0);
    if (rc != SPECKV_OK) {
        munmap(p, size);
        return rc;
    }
    *out = Mapping::adopt(static_cast<unsigned char *>(p), size, -1, /*shared=*/false, /*writable=*/true,
                          "numa:" + std::to_string(node));
    out->node_ = node;
    return SPECKV_OK;
}

int Mapping::open_numa_uri_impl(const Uri &uri, size_t size, bool create, int (*init)(void *, unsigned char *, size_t),
                                void *ctx, Mapping *out) {
    if (uri.scheme != Scheme::Numa) return fail(SPECKV_EINVAL, "not a numa: URI");
    const int policy = uri.params.count("policy") ? static_cast<int>(uri.params.at("policy")) : 0;
    if (!uri.named) {
        Mapping m;
        if (int rc = open_numa(uri.node, size, policy, &m); rc != SPECKV_OK) return rc;
        if (int rc = init(ctx, m.base(), m.size()); rc != SPECKV_OK) return rc;
        *out = std::move(m);
        return SPECKV_OK;
    }
    const std::string dir = uri.target.substr(0, uri.target.find_last_of('/'));
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        int e = errno;
        return fail(SPECKV_EIO, "cannot create pool directory '%s': %s", dir.c_str(), strerror(e));
    }
    int rc = attach_named(uri, true, out);
    if (rc == SPECKV_OK) out->node_ = uri.node;
    if (rc != SPECKV_ENOENT) return rc;
    if (!create) return rc;  // attach_named's message says how to create it
    if (size == 0) return fail(SPECKV_EINVAL, "numa: pool size is 0");
    if ((rc = check_node(uri.node, size, policy)) != SPECKV_OK) return rc;
    if ((rc = check_tmpfs(dir, size)) != SPECKV_OK) return rc;
    // Bind before the first page exists, fault in, check, then format: the
    // pool is published (linked under its name) only after all of it.
    struct Ctx {
        int node, policy;
        int (*init)(void *, unsigned char *, size_t);
        void *ctx;
    } c{uri.node, policy, init, ctx};
    auto place_then_init = [&c](unsigned char *b, size_t n) {
        int r = bind_range(b, n, c.node, c.policy);
        if (r == SPECKV_OK) r = fault_in(b, n, true, c.node);
        if (r == SPECKV_OK) r = verify_placement(b, n, c.node, c.policy == 0);
        if (r == SPECKV_OK) r = c.init(c.ctx, b, n);
        return r;
    };
    rc = create_file(uri.target, size, place_then_init, out, /*preallocate=*/false, file_access(uri, nullptr));
    if (rc == SPECKV_EEXIST) rc = attach_named(uri, true, out);  // another process published first
    if (rc == SPECKV_OK) out->node_ = uri.node;
    return rc;
}

int Mapping::attach_numa_uri(const Uri &uri, bool writable, Mapping *out) {
    if (uri.scheme != Scheme::Numa) return fail(SPECKV_EINVAL, "not a numa: URI");
    if (!uri.named)
        return fail(SPECKV_ENOTSUP,
                    "numa:%d without name= is private memory of the process that opened it: nothing outside that "
                    "process can see it. Name it to share it with other processes and the CLI: %s",
                    uri.node, how_to_name(uri).c_str());
    int rc = attach_named(uri, writable, out);
    if (rc == SPECKV_OK) out->node_ = uri.node;
    return rc;
}

// ------------------------------------------------------ the backend's row

namespace {

int parse_numa_target(std::string_view rest, Uri *u) {
    if (rest.empty() || rest.size() > 4) return fail(SPECKV_EURI, "numa: URI needs a node number like numa:2?size=64G");
    for (char c : rest)
        if (!std::isdigit(static_cast<unsigned char>(c)))
            return fail(SPECKV_EURI, "numa: node '%.*s' is not a number", static_cast<int>(rest.size()), rest.data());
    u->target = std::string(rest);
    u->node = std::atoi(u->target.c_str());
    return SPECKV_OK;
}

// Unnamed: private memory on the node, formatted by init. Named (name=): the
// shared tmpfs file, attached if it exists (init not called) or created
// bound to the node.
int open_numa_pool(const Uri &uri, const OpenArgs &a, Mapping *out) {
    if (int rc = a.make.plan(a.make.ctx); rc) return rc;
    auto init = [&a](unsigned char *b, size_t n) { return a.make.init(a.make.ctx, b, n); };
    return Mapping::open_numa_uri(uri, a.size, a.create, init, out);
}

// Named: its shared file; unnamed: SPECKV_ENOTSUP saying how to name it.
int attach_numa_pool(const Uri &uri, bool writable, Mapping *out) { return Mapping::attach_numa_uri(uri, writable, out); }

const char *numa_label(const Uri &uri) { return uri.named ? nullptr : "NUMA pool"; }

Placement numa_uri_placement(const Uri &uri) { return placement_for_node(uri.node, false); }

}  // namespace

extern const Backend kNumaBackend = {"numa", Scheme::Numa, parse_numa_target, /*file_params=*/true,
                                     /*numa_params=*/true, open_numa_pool, attach_numa_pool, numa_label,
                                     /*prefault=*/false, numa_uri_placement};

}  // namespace speckv
