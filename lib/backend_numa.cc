// numa: backend. Anonymous memory bound to one NUMA node with libnuma's
// mbind (a CXL memory expander onlined as system RAM is such a node), every
// page faulted in at open and its placement checked with move_pages.
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "devices.h"
#include "speckv.h"
#include "status.h"

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

int Mapping::open_numa(int node, size_t size, int policy, Mapping *out) {
    if (policy != 0 && policy != 1) return fail(SPECKV_EINVAL, "numa: policy %d is neither 0 (bind) nor 1 (preferred)", policy);
    if (size == 0) return fail(SPECKV_EINVAL, "numa: pool size is 0");
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
    // A bound mapping larger than the node's free memory would meet the OOM
    // killer while being faulted in: refuse it up front.
    if (policy == 0 && static_cast<unsigned long long>(free_bytes) < size)
        return fail(SPECKV_ENOSPC,
                    "NUMA node %d has %lld bytes free, the pool needs %zu: shrink it, free memory there, or use "
                    "policy=preferred to spill to other nodes",
                    node, free_bytes, size);

    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        return fail(SPECKV_ENOMEM, "cannot map %zu bytes for NUMA node %d: %s", size, node, strerror(e));
    }
    auto give_up = [&](int rc) {
        munmap(p, size);
        return rc;
    };
    Bitmask mask(numa_allocate_nodemask());
    if (!mask) return give_up(fail(SPECKV_ENOMEM, "numa_allocate_nodemask failed"));
    numa_bitmask_setbit(mask.get(), static_cast<unsigned>(node));
    int mode = policy == 0 ? MPOL_BIND : MPOL_PREFERRED;
    if (mbind(p, size, mode, mask->maskp, mask->size + 1, MPOL_MF_STRICT) != 0) {
        int e = errno;
        return give_up(fail(e == EPERM ? SPECKV_EPERM : SPECKV_EIO, "mbind(%s, node %d) failed: %s",
                            policy == 0 ? "MPOL_BIND" : "MPOL_PREFERRED", node, strerror(e)));
    }
    int got_mode = -1;
    Bitmask got(numa_allocate_nodemask());
    if (!got) return give_up(fail(SPECKV_ENOMEM, "numa_allocate_nodemask failed"));
    if (get_mempolicy(&got_mode, got->maskp, got->size + 1, p, MPOL_F_ADDR) != 0 || got_mode != mode ||
        !numa_bitmask_equal(got.get(), mask.get()))
        return give_up(fail(SPECKV_EIO, "the memory policy did not take: get_mempolicy reports mode %d, not %d", got_mode,
                            mode));
    // Fault every page in now, on the node, so a pool never meets a node out
    // of memory later in the middle of a write. Writing zeros keeps the
    // anonymous memory's zero state that the pool format relies on.
    if (madvise(p, size, MADV_POPULATE_WRITE) != 0) {
        if (errno != EINVAL)  // older kernels lack it: touch by hand
            return give_up(fail(SPECKV_ENOMEM, "cannot fault in %zu bytes on NUMA node %d: %s", size, node, strerror(errno)));
        const size_t pg = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        for (size_t off = 0; off < size; off += pg) static_cast<volatile unsigned char *>(p)[off] = 0;
    }
    int first_node = -1;
    if (get_mempolicy(&first_node, nullptr, 0, p, MPOL_F_NODE | MPOL_F_ADDR) != 0) first_node = -1;
    NumaPlacement pl;
    if (int rc = numa_placement(p, size, node, &pl); rc != SPECKV_OK) return give_up(rc);
    if (policy == 0 && (pl.on_node != pl.pages || first_node != node))
        return give_up(fail(SPECKV_EIO,
                            "NUMA placement check failed: %" PRIu64 " of %" PRIu64 " pages on node %d (%" PRIu64
                            " on node %d, %" PRIu64 " not present)",
                            pl.on_node, pl.pages, node, pl.elsewhere, pl.other_node, pl.absent));
    *out = Mapping::adopt(static_cast<unsigned char *>(p), size, -1, /*shared=*/false, /*writable=*/true,
                          "numa:" + std::to_string(node));
    return SPECKV_OK;
}

}  // namespace speckv
