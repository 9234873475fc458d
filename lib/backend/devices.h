// SPDX-License-Identifier: Apache-2.0
// CXL memory as Linux shows it: device-dax character devices (libdaxctl) and
// NUMA nodes (libnuma). The lookup and mapping steps of the dax: backend, the
// placement check of numa:, placement hints; discovery for `speckv devices` is
// the CLI's (cli/discovery.h).
// docs/devices.md says what runs where.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"

struct daxctl_ctx;
struct daxctl_dev;

namespace speckv {

// The smallest dax device a pool fits on: metadata padded to the 2 MiB data
// alignment, plus one 4 KiB data page.
inline constexpr uint64_t kDaxMinBytes = (2u << 20) + 4096;

// The speckv pool found on a device (read-only look, nothing attached).
struct DevicePool {
    bool present = false;       // pool magic and a valid superblock
    std::string error;          // why not (empty when present, or no magic)
    std::string uuid;
    uint64_t pool_bytes = 0, page_size = 0, n_pages = 0, pages_used = 0, blocks_live = 0;
    uint32_t attached = 0;
    bool clean = false;
};

// One device-dax instance, as libdaxctl reports it (fields named as in
// `daxctl list -D`).
struct DaxDevice {
    std::string chardev;        // "dax0.0"
    int region_id = -1;
    uint64_t size = 0;
    uint64_t align = 0;         // 0 = unknown (old kernel)
    int target_node = -1;       // -1 = none reported
    std::string mode;           // "devdax" or "system-ram"
    bool enabled = false;
    int online_memblocks = -1;  // system-ram only
    int total_memblocks = -1;
    int movable = -1;           // 1 / 0, -1 unknown
    int major = -1, minor = -1;
    DevicePool pool;            // devdax only, when probed
};


// A libdaxctl context that logs nothing (speckv reports through its status
// messages). NULL with *rc < 0 on failure; release with daxctl_unref.
daxctl_ctx *daxctl_open_quiet(int *rc);
// One libdaxctl device as a DaxDevice (mode decided as `daxctl list` does).
DaxDevice describe_dax_dev(daxctl_dev *dev, int region_id);

// Finds the dax device a /dev path names (by device number, else by name).
// SPECKV_OK with *out filled; SPECKV_ENOENT when libdaxctl knows no such
// device; SPECKV_EINVAL when `path` exists but is not a device-dax device.
// Message set on failure.
int find_dax_device(const std::string &path, DaxDevice *out);

struct DaxMapResult {
    bool map_sync = false;   // MAP_SHARED_VALIDATE | MAP_SYNC was accepted
};

// The mapping half of the dax: backend, separate from the libdaxctl lookup so
// it runs on any descriptor (tests use a memfd): checks `size` against the
// pool minimum and `align` (a power of two, size a multiple of it), takes a
// shared flock held while mapped (SPECKV_EBUSY if someone holds it
// exclusively), reserves
// an address aligned to max(align, 2 MiB), and maps `fd` whole there with
// MAP_SHARED_VALIDATE | MAP_SYNC, falling back to MAP_SHARED where the
// kernel or the file refuses MAP_SYNC. Reads and writes nothing. Takes
// ownership of `fd` (closed on failure, kept by *out on success).
int map_dax_fd(int fd, uint64_t size, uint64_t align, bool writable, const std::string &path, Mapping *out,
               DaxMapResult *res = nullptr);

// Counts where the pages of [base, base+size) sit (move_pages with no target
// nodes). Pages not yet faulted count as `absent`.
struct NumaPlacement {
    uint64_t pages = 0, on_node = 0, elsewhere = 0, absent = 0;
    int other_node = -1;  // one node seen that is not `node`
};
int numa_placement(const void *base, size_t size, int node, NumaPlacement *out);

// Placement hints (Placement, placement_for_*) are declared in backend.h:
// the pool reaches them from there; they are implemented in devices.cc.

}  // namespace speckv
