// SPDX-License-Identifier: Apache-2.0
// `speckv devices [--json]`: dax regions and devices (libdaxctl), NUMA nodes
// (libnuma), and the speckv pool found on each devdax device.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "commands.h"
#include "util/text.h"
#include "discovery.h"
#include "speckv.h"

namespace speckv_cli {
namespace {

std::string human(uint64_t bytes) { return speckv::human_bytes(bytes); }

void print_text(const speckv::DeviceReport &r) {
    if (!r.daxctl_ok) std::printf("dax: libdaxctl unavailable (%s)\n", r.daxctl_error.c_str());
    else if (r.regions.empty()) std::printf("dax: no dax regions (libdaxctl finds no device-dax devices on this machine)\n");
    for (const auto &g : r.regions) {
        std::printf("dax region %d  %s  %s", g.id, g.path.c_str(), g.size ? human(g.size).c_str() : "size unknown");
        if (g.available_size) std::printf(" (%s unassigned)", human(g.available_size).c_str());
        if (g.align) std::printf("  align %s", human(g.align).c_str());
        std::printf("\n");
        if (g.devices.empty()) std::printf("  (no devices with capacity)\n");
        for (const auto &d : g.devices) {
            std::printf("  %-8s %-10s %10s  align %-8s  target node %s%s\n", d.chardev.c_str(), d.mode.c_str(),
                        human(d.size).c_str(), d.align ? human(d.align).c_str() : "?",
                        d.target_node >= 0 ? std::to_string(d.target_node).c_str() : "?",
                        d.enabled ? "" : "  (disabled)");
            if (d.mode == "system-ram")
                std::printf("           memory onlined as NUMA node %d: use numa:%d (or `daxctl reconfigure-device "
                            "--mode=devdax --force %s` for dax:)\n",
                            d.target_node, d.target_node, d.chardev.c_str());
            else if (d.pool.present)
                std::printf("           speckv pool %s: %s, page %" PRIu64 ", %" PRIu64 "/%" PRIu64
                            " pages used, %" PRIu64 " blocks, %u attached, %s\n",
                            d.pool.uuid.c_str(), human(d.pool.pool_bytes).c_str(), d.pool.page_size, d.pool.pages_used,
                            d.pool.n_pages, d.pool.blocks_live, d.pool.attached, d.pool.clean ? "clean" : "not clean");
            else if (!d.pool.error.empty())
                std::printf("           no usable pool: %s\n", d.pool.error.c_str());
            else
                std::printf("           no speckv pool (dax:/dev/%s formats it on first open)\n", d.chardev.c_str());
        }
    }
    if (!r.numa_ok) {
        std::printf("numa: not available on this system\n");
        return;
    }
    std::printf("numa nodes:\n  %-5s %10s %10s %5s  %-11s %s\n", "node", "memory", "free", "cpus", "kind",
                "distances (nearest CPUs)");
    for (const auto &n : r.nodes) {
        std::string dist;
        for (size_t j = 0; j < n.distances.size(); j++) dist += (j ? " " : "") + std::to_string(n.distances[j]);
        if (n.nearest_cpu_node >= 0)
            dist += " (" + std::to_string(n.nearest_cpu_distance) + " to node " + std::to_string(n.nearest_cpu_node) + ")";
        const char *kind = n.memory_only ? "memory-only" : n.mem_total ? "cpu+memory" : "cpu-only";
        std::printf("  %-5d %10s %10s %5d  %-11s %s\n", n.node, human(n.mem_total).c_str(), human(n.mem_free).c_str(),
                    n.cpus, kind, dist.c_str());
        for (const auto &dd : n.dax_devices) std::printf("        backed by %s (system-ram)\n", dd.c_str());
    }
}

}  // namespace

void register_devices_command(CLI::App &app) {
    auto *cmd = app.add_subcommand("devices", "List dax devices, NUMA nodes and the speckv pools on them");
    static bool no_pools = false;
    add_json(cmd, "one JSON object on stdout (regions shaped like `daxctl list -RD`)");
    cmd->add_flag("--no-pools", no_pools, "do not open devdax devices to look for pools");
    cmd->callback([] {
        speckv::DeviceReport r;
        speckv::discover_devices(!no_pools, &r);
        if (g_opt.json) std::fputs(speckv::device_report_json(r).c_str(), stdout);
        else print_text(r);
        g_exit = 0;
    });
}

}  // namespace speckv_cli
