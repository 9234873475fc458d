// SPDX-License-Identifier: Apache-2.0
// Pool backends: where the pool's single mapping comes from. A backend knows
// nothing of the pool format; it hands back bytes that are mapped.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "util/file_access.h"
#include "config/uri.h"
#include "util/json_fwd.h"

namespace speckv {

class Config;

// One mapping, owned (RAII). For files, the descriptor stays open while mapped.
class Mapping {
  public:
    Mapping() = default;
    ~Mapping();
    Mapping(const Mapping &) = delete;
    Mapping &operator=(const Mapping &) = delete;
    Mapping(Mapping &&o) noexcept { *this = std::move(o); }
    Mapping &operator=(Mapping &&o) noexcept;

    unsigned char *base() const { return base_; }
    size_t size() const { return size_; }
    bool shared() const { return shared_; }      // visible to other processes
    bool writable() const { return writable_; }
    const std::string &path() const { return path_; }
    int fd() const { return fd_; }  // -1 for anonymous memory
    // The NUMA node the memory is bound to (numa:), -1 when not bound (the
    // process's default placement; dax: devices are looked up by path).
    int numa_node() const { return node_; }
    void reset();

    // Opens an existing file. writable=false maps it read-only (inspect).
    // Not through a symbolic link; refused (SPECKV_EPERM) unless owned by the
    // effective user, root or whom `access` names, or when its directory is
    // world-writable without the sticky bit (lib/util/file_access.h).
    static int open_file(const std::string &path, bool writable, Mapping *out, const FileAccess &access = {});
    // Creates `path` with `size` bytes, calls init(base, size) on the new
    // mapping, and publishes it under `path` only when init succeeded (written
    // under a temporary name, then link(2)ed: no process ever sees a half-made
    // pool). Returns SPECKV_EEXIST if another process published first.
    // preallocate=false: the file is only sized (sparse), so that init can
    // place its pages (the numa: backend binds them before faulting them in).
    // The file gets exactly access.mode (0600 by default); stale temporary
    // files of creators that died (NAME.tmp.PID, PID gone) are swept first.
    template <typename Init>
    static int create_file(const std::string &path, size_t size, Init &&init, Mapping *out, bool preallocate = true,
                           const FileAccess &access = {});
    // Private anonymous memory.
    static int open_anon(size_t size, Mapping *out);
    // A device-dax character device (/dev/daxX.Y), found and checked with
    // libdaxctl (mode devdax, size, alignment), mapped whole with MAP_SHARED
    // (MAP_SYNC where supported). lib/backend_dax.cc.
    static int open_dax(const std::string &path, bool writable, Mapping *out);
    // Anonymous memory of `size` bytes bound to NUMA node `node` with libnuma
    // (policy 0 = bind, 1 = preferred), placement verified. lib/backend_numa.cc.
    static int open_numa(int node, size_t size, int policy, Mapping *out);
    // numa: URIs as Pool::open uses them. Unnamed: open_numa on the URI's
    // node and policy, then init(base, size) on the fresh memory. Named
    // (name=NAME): the tmpfs file uri.target, shared by every process that
    // names it. If it exists it is attached: its memory policy must be node
    // N's (and the URI's policy, if given), its pages are mapped and must sit
    // on node N (bind); init is not called, its size wins over `size`. Else
    // (create) it is made under a temporary name, bound to node N with mbind
    // on the shared mapping, faulted in, checked, init()ed and published
    // (create_file's protocol: a race between two creators leaves one pool,
    // the loser attaches it). !create and missing: SPECKV_ENOENT.
    template <typename Init>
    static int open_numa_uri(const Uri &uri, size_t size, bool create, Init &&init, Mapping *out);
    // A numa: pool from outside its processes (pool inspect/check/reset):
    // attaches the named pool's file as above (read-only when !writable).
    // Unnamed: SPECKV_ENOTSUP, saying the pool is process-private and how to
    // name one. Missing: SPECKV_ENOENT.
    static int attach_numa_uri(const Uri &uri, bool writable, Mapping *out);

    // Adopts an existing mapping (for backends in other files).
    static Mapping adopt(unsigned char *base, size_t size, int fd, bool shared, bool writable, std::string path);

  private:
    static int create_file_impl(const std::string &path, size_t size, int (*init)(void *, unsigned char *, size_t),
                                void *ctx, Mapping *out, bool preallocate, const FileAccess &access);
    static int open_numa_uri_impl(const Uri &uri, size_t size, bool create, int (*init)(void *, unsigned char *, size_t),
                                  void *ctx, Mapping *out);
    unsigned char *base_ = nullptr;
    size_t size_ = 0;
    int fd_ = -1;
    bool shared_ = false;
    bool writable_ = false;
    int node_ = -1;
    std::string path_;
};

// ------------------------------------------------------ placement hints
// How far a pool's memory is from the CPUs that use it, as a class with a
// latency and a bandwidth figure (docs/devices.md, "Placement hints"). The
// tier manager measures the prefetcher's L3->L2 link use against `bandwidth`.
//
// The mapping from a SLIT distance d (ACPI "relative distance (memory
// latency)", local = 10) is: latency = d/10 x 100 ns (local DRAM); bandwidth =
// 8e9 B/s x 100 ns / latency (one prefetch thread keeps a fixed number of
// misses in flight, so by Little's law its bandwidth falls as latency grows;
// 8e9 is the prefetch.bandwidth default, kept for local memory); class local
// (d <= 12), remote (13..21: one hop, and what Linux assumes, 20, for a node
// the firmware's SLIT does not describe), far (> 21).
inline constexpr uint64_t kLocalLatencyNs = 100;
inline constexpr uint64_t kLocalBandwidth = 8000000000ull;
inline constexpr int kLocalDistance = 10;

struct Placement {
    std::string cls = "local";  // "local", "remote", "far"
    int node = -1;              // memory node; -1 = the process's own (file:, anon:)
    int cpu_node = -1;          // the CPU node the distance is taken from (-1: none)
    int distance = kLocalDistance;  // SLIT distance; 0 = unknown
    uint64_t latency_ns = kLocalLatencyNs;
    uint64_t bandwidth = kLocalBandwidth;  // bytes/s
    std::string source;         // where the figures come from, for people
};

// The pure mapping above. distance < 10 (0: unknown) is treated as 10.
Placement placement_from_distance(int distance);
// 8e9 x 100 ns / latency, in [1e6, 1e13] (prefetch.bandwidth's bounds).
uint64_t placement_bandwidth_for_latency(uint64_t latency_ns);
// The class of a latency: what placement_from_distance(latency / 10) says.
const char *placement_class_for_latency(uint64_t latency_ns);
// The distance from the nearest of `cpu_nodes` to `node` in `table`
// (table[i][j] = SLIT distance from node i to node j; values <= 0 unknown).
// -1 when none is known; *from = that CPU node.
int nearest_distance(const std::vector<std::vector<int>> &table, const std::vector<int> &cpu_nodes, int node,
                     int *from);
// The machine's view: the distance from the nodes this process may run on
// (libnuma) to `node`. node < 0: local memory. device: a dax device whose
// node has no known distance: docs/design.md's CXL direct figure (250 ns).
Placement placement_for_node(int node, bool device);
// Of a dax character device: its target node (libdaxctl); a device whose
// node or distance is unknown: the CXL direct-attached figure.
Placement dax_placement(const std::string &path);
// Of an open mapping: numa: its node; a dax character device its target
// node (libdaxctl); anything else local memory.
Placement placement_for_mapping(const Mapping &m);
// Of a URI, without opening it (pool inspect): numa: N, dax: the device's
// target node, file:/anon: local.
Placement placement_for_uri(const Uri &u);
// Config overrides: placement.latency_ns (then bandwidth and class follow
// from it), placement.bandwidth, and prefetch.bandwidth, which, set
// explicitly, is what the prefetcher uses whatever the placement says.
void apply_placement_config(const Config &cfg, Placement *p);
// {"class":…,"node":…,"cpu_node":…,"distance":…,"latency_ns":…,"bandwidth":…,"source":…}
Json placement_value(const Placement &p);
// The same as compact text.
std::string placement_json(const Placement &p);

template <typename Init>
int Mapping::create_file(const std::string &path, size_t size, Init &&init, Mapping *out, bool preallocate,
                         const FileAccess &access) {
    using F = std::remove_reference_t<Init>;
    auto thunk = [](void *ctx, unsigned char *b, size_t n) -> int { return (*static_cast<F *>(ctx))(b, n); };
    return create_file_impl(path, size, thunk, const_cast<void *>(static_cast<const void *>(&init)), out, preallocate,
                            access);
}

template <typename Init>
int Mapping::open_numa_uri(const Uri &uri, size_t size, bool create, Init &&init, Mapping *out) {
    using F = std::remove_reference_t<Init>;
    auto thunk = [](void *ctx, unsigned char *b, size_t n) -> int { return (*static_cast<F *>(ctx))(b, n); };
    return open_numa_uri_impl(uri, size, create, thunk, const_cast<void *>(static_cast<const void *>(&init)), out);
}

}  // namespace speckv
