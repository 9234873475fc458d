// SPDX-License-Identifier: Apache-2.0
// Device discovery for `speckv devices`: dax regions and devices through
// libdaxctl, NUMA nodes through libnuma, the pool on each devdax device.
#include "discovery.h"

#include <daxctl/libdaxctl.h>
#include <errno.h>
#include <numa.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>

#include "pool/pool.h"
#include "util/status.h"
#include "util/json.h"

namespace speckv {

namespace {

struct DaxCtx {
    daxctl_ctx *ctx = nullptr;
    int rc = 0;
    DaxCtx() { ctx = daxctl_open_quiet(&rc); }
    ~DaxCtx() {
        if (ctx) daxctl_unref(ctx);
    }
    DaxCtx(const DaxCtx &) = delete;
    DaxCtx &operator=(const DaxCtx &) = delete;
};

std::string uuid_text(const uint8_t u[16]) {
    char b[40];
    std::snprintf(b, sizeof b, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
                  u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    return b;
}

void probe_pool(DaxDevice *d) {
    if (d->mode != "devdax" || !d->enabled) return;
    std::unique_ptr<Pool> p;
    int rc = Pool::open_readonly_uri("dax:/dev/" + d->chardev, &p);
    if (rc == SPECKV_ENOTPOOL) {
        std::string msg = last_error();
        // "no pool magic" is the normal state of a fresh device, not an error.
        if (msg.find("no pool magic") == std::string::npos) d->pool.error = msg;
        return;
    }
    if (rc != SPECKV_OK) {
        d->pool.error = last_error();
        if (d->pool.error.empty()) d->pool.error = speckv_strerror(rc);
        return;
    }
    PoolInfo i;
    p->info(&i);
    d->pool.present = true;
    d->pool.uuid = uuid_text(i.uuid);
    d->pool.pool_bytes = i.pool_bytes;
    d->pool.page_size = i.page_size;
    d->pool.n_pages = i.n_pages;
    d->pool.pages_used = i.pages_used;
    d->pool.blocks_live = i.blocks_live;
    d->pool.attached = i.attached;
    d->pool.clean = i.clean;
}

}  // namespace

int discover_devices(bool probe_pools, DeviceReport *out) {
    *out = DeviceReport{};
    {
        DaxCtx c;
        if (c.rc != 0 || !c.ctx) {
            out->daxctl_error = std::string("daxctl_new: ") + strerror(c.rc < 0 ? -c.rc : EIO);
        } else {
            out->daxctl_ok = true;
            daxctl_region *region;
            daxctl_region_foreach(c.ctx, region) {
                DaxRegion r;
                r.id = daxctl_region_get_id(region);
                const char *p = daxctl_region_get_path(region);
                r.path = p ? p : "";
                if (r.path.rfind("/sys/devices", 0) == 0) r.path = r.path.substr(std::strlen("/sys/devices"));
                unsigned long long sz = daxctl_region_get_size(region);
                r.size = sz == ULLONG_MAX ? 0 : sz;
                r.available_size = daxctl_region_get_available_size(region);
                unsigned long al = daxctl_region_get_align(region);
                r.align = al == ULONG_MAX ? 0 : al;
                daxctl_dev *dev;
                daxctl_dev_foreach(region, dev) {
                    if (!daxctl_dev_get_size(dev)) continue;  // idle seed devices, as `daxctl list` hides them
                    r.devices.push_back(describe_dax_dev(dev, r.id));
                }
                out->regions.push_back(std::move(r));
            }
        }
    }
    if (probe_pools)
        for (auto &r : out->regions)
            for (auto &d : r.devices) probe_pool(&d);

    out->numa_ok = numa_available() >= 0;
    if (!out->numa_ok) return SPECKV_OK;
    std::vector<int> ids;
    for (int n = 0; n <= numa_max_node(); n++)
        if (numa_bitmask_isbitset(numa_nodes_ptr, static_cast<unsigned>(n))) ids.push_back(n);
    bitmask *cpus = numa_allocate_cpumask();
    for (int n : ids) {
        NumaNode nn;
        nn.node = n;
        long long free_b = 0;
        long long total = numa_node_size64(n, &free_b);
        nn.mem_total = total > 0 ? static_cast<uint64_t>(total) : 0;
        nn.mem_free = total > 0 && free_b > 0 ? static_cast<uint64_t>(free_b) : 0;
        if (cpus && numa_node_to_cpus(n, cpus) == 0) nn.cpus = static_cast<int>(numa_bitmask_weight(cpus));
        nn.memory_only = nn.cpus == 0 && nn.mem_total > 0;
        for (int m : ids) nn.distances.push_back(numa_distance(n, m));
        out->nodes.push_back(std::move(nn));
    }
    if (cpus) numa_bitmask_free(cpus);
    // The placement hint: how far each node is from the nearest CPUs.
    for (auto &nn : out->nodes) {
        for (size_t j = 0; j < out->nodes.size(); j++) {
            if (out->nodes[j].cpus == 0) continue;
            int d = nn.distances[j];
            if (d > 0 && (nn.nearest_cpu_distance < 0 || d < nn.nearest_cpu_distance)) {
                nn.nearest_cpu_distance = d;
                nn.nearest_cpu_node = out->nodes[j].node;
            }
        }
        for (auto &r : out->regions)
            for (auto &d : r.devices)
                if (d.mode == "system-ram" && d.target_node == nn.node) nn.dax_devices.push_back(d.chardev);
    }
    return SPECKV_OK;
}

namespace {

// A device object: the keys of `daxctl list -D`, then speckv's own.
Json device_value(const DaxDevice &d) {
    Json o = {{"chardev", d.chardev}, {"size", d.size}};
    if (d.target_node >= 0) o["target_node"] = d.target_node;
    if (d.align) o["align"] = d.align;
    o["mode"] = d.mode;
    if (d.online_memblocks >= 0) o["online_memblocks"] = d.online_memblocks;
    if (d.total_memblocks >= 0) o["total_memblocks"] = d.total_memblocks;
    if (d.movable >= 0) o["movable"] = d.movable != 0;
    if (!d.enabled) o["state"] = "disabled";
    if (d.pool.present) {
        o["speckv_pool"] = {{"uuid", d.pool.uuid},
                            {"size", d.pool.pool_bytes},
                            {"page_size", d.pool.page_size},
                            {"pages", {{"total", d.pool.n_pages}, {"used", d.pool.pages_used}}},
                            {"blocks_live", d.pool.blocks_live},
                            {"attached", d.pool.attached},
                            {"clean", d.pool.clean}};
    } else {
        o["speckv_pool"] = nullptr;
        if (!d.pool.error.empty()) o["speckv_pool_error"] = d.pool.error;
    }
    return o;
}

}  // namespace

std::string device_report_json(const DeviceReport &r) {
    Json regions = Json::array();
    for (const auto &g : r.regions) {
        Json o = {{"path", g.path}, {"id", g.id}};
        if (g.size) o["size"] = g.size;
        if (g.available_size) o["available_size"] = g.available_size;
        if (g.align) o["align"] = g.align;
        Json devs = Json::array();
        for (const auto &d : g.devices) devs.push_back(device_value(d));
        o["devices"] = std::move(devs);
        regions.push_back(std::move(o));
    }
    Json out = {{"regions", std::move(regions)}};
    if (!r.daxctl_ok) out["daxctl_error"] = r.daxctl_error;
    out["numa_available"] = r.numa_ok;
    Json nodes = Json::array();
    for (const auto &n : r.nodes) {
        Json dist = Json::object();
        for (size_t j = 0; j < n.distances.size(); j++) dist[std::to_string(r.nodes[j].node)] = n.distances[j];
        Json o = {{"node", n.node},
                  {"size", n.mem_total},
                  {"free", n.mem_free},
                  {"cpus", n.cpus},
                  {"memory_only", n.memory_only},
                  {"distances", std::move(dist)}};
        if (n.nearest_cpu_node >= 0) {
            o["nearest_cpu_node"] = n.nearest_cpu_node;
            o["nearest_cpu_distance"] = n.nearest_cpu_distance;
        }
        o["dax_devices"] = n.dax_devices;
        nodes.push_back(std::move(o));
    }
    out["numa_nodes"] = std::move(nodes);
    return json_text(out) + "\n";
}

}  // namespace speckv
