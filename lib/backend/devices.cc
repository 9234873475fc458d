// SPDX-License-Identifier: Apache-2.0
// What the backends need to know about devices: placement hints (how far the
// pool's memory is from the CPUs, and the bandwidth that follows). Discovery
// for `speckv devices` is the CLI's (cli/discovery.cc).
#include "backend/devices.h"
#include "util/json.h"

#include <daxctl/libdaxctl.h>
#include <errno.h>
#include <numa.h>

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>

#include "backend/registry.h"
#include "config/config.h"
#include "util/status.h"

namespace speckv {

// ------------------------------------------------------ placement hints

const char *placement_class_for_latency(uint64_t latency_ns) {
    if (latency_ns <= 12 * kLocalLatencyNs / kLocalDistance) return "local";
    if (latency_ns <= 21 * kLocalLatencyNs / kLocalDistance) return "remote";
    return "far";
}

uint64_t placement_bandwidth_for_latency(uint64_t latency_ns) {
    if (latency_ns == 0) latency_ns = 1;
    long double bw = static_cast<long double>(kLocalBandwidth) * kLocalLatencyNs / latency_ns;
    return static_cast<uint64_t>(std::clamp<long double>(bw, 1e6L, 1e13L));
}

Placement placement_from_distance(int distance) {
    Placement p;
    p.distance = distance;
    int d = std::max(distance, kLocalDistance);
    p.latency_ns = kLocalLatencyNs * static_cast<uint64_t>(d) / kLocalDistance;
    p.bandwidth = placement_bandwidth_for_latency(p.latency_ns);
    p.cls = placement_class_for_latency(p.latency_ns);
    return p;
}

int nearest_distance(const std::vector<std::vector<int>> &table, const std::vector<int> &cpu_nodes, int node, int *from) {
    int best = -1;
    *from = -1;
    for (int c : cpu_nodes) {
        if (c < 0 || node < 0 || static_cast<size_t>(c) >= table.size() || static_cast<size_t>(node) >= table[c].size())
            continue;
        int d = table[c][node];
        if (d > 0 && (best < 0 || d < best)) {
            best = d;
            *from = c;
        }
    }
    return best;
}

Placement placement_for_node(int node, bool device) {
    Placement p;
    if (node >= 0 && numa_available() >= 0 && node <= numa_max_node()) {
        // The nodes with CPUs this process may run on; the nearest of them.
        std::vector<int> cpu_nodes;
        std::vector<std::vector<int>> table(static_cast<size_t>(numa_max_node()) + 1);
        bitmask *run = numa_get_run_node_mask();
        bitmask *cpus = numa_allocate_cpumask();
        for (int n = 0; run && cpus && n <= numa_max_node(); n++) {
            if (!numa_bitmask_isbitset(run, static_cast<unsigned>(n))) continue;
            if (numa_node_to_cpus(n, cpus) != 0 || numa_bitmask_weight(cpus) == 0) continue;
            cpu_nodes.push_back(n);
            table[n].assign(table.size(), 0);
            table[n][node] = numa_distance(n, node);
        }
        if (cpus) numa_bitmask_free(cpus);
        if (run) numa_bitmask_free(run);
        int from = -1;
        int d = nearest_distance(table, cpu_nodes, node, &from);
        if (d > 0) {
            p = placement_from_distance(d);
            p.node = node;
            p.cpu_node = from;
            p.source = "NUMA distance " + std::to_string(d) + " from node " + std::to_string(from) + " to node " +
                       std::to_string(node);
            return p;
        }
    }
    if (device) {  // a devdax device's node is usually offline: no distance
        p = placement_from_distance(0);
        p.latency_ns = 250;  // docs/design.md: CXL direct-attached, ~250 ns
        p.bandwidth = placement_bandwidth_for_latency(p.latency_ns);
        p.cls = placement_class_for_latency(p.latency_ns);
        p.distance = 0;
        p.node = node;
        p.source = "dax device with no known NUMA distance: the CXL direct-attached figure (250 ns)";
        return p;
    }
    p = placement_from_distance(kLocalDistance);
    p.node = node;
    p.source = node < 0 ? "local memory of the process: file:, anon:" : "NUMA distance unknown: assumed local";
    return p;
}

Placement dax_placement(const std::string &path) {
    DaxDevice d;
    if (find_dax_device(path, &d) != SPECKV_OK) {
        clear_error();
        return placement_for_node(-1, true);
    }
    return placement_for_node(d.target_node, true);
}

Placement placement_for_mapping(const Mapping &m) {
    if (m.numa_node() >= 0) return placement_for_node(m.numa_node(), false);
    struct stat st;
    if (m.fd() >= 0 && fstat(m.fd(), &st) == 0 && S_ISCHR(st.st_mode)) return dax_placement(m.path());
    return placement_for_node(-1, false);
}

Placement placement_for_uri(const Uri &u) {
    const Backend &b = backend_of(u);
    return b.placement ? b.placement(u) : placement_for_node(-1, false);
}

void apply_placement_config(const Config &cfg, Placement *p) {
    if (cfg.is_set("placement.latency_ns")) {
        p->latency_ns = static_cast<uint64_t>(cfg.get("placement.latency_ns"));
        p->bandwidth = placement_bandwidth_for_latency(p->latency_ns);
        p->cls = placement_class_for_latency(p->latency_ns);
        p->source = "config placement.latency_ns (the machine says: " + p->source + ")";
    }
    if (cfg.is_set("placement.bandwidth")) {
        p->bandwidth = static_cast<uint64_t>(cfg.get("placement.bandwidth"));
        p->source += "; bandwidth from config placement.bandwidth";
    }
    if (cfg.is_set("prefetch.bandwidth")) {
        p->bandwidth = static_cast<uint64_t>(cfg.get("prefetch.bandwidth"));
        p->source += "; bandwidth from config prefetch.bandwidth";
    }
}

Json placement_value(const Placement &p) {
    auto num_or_null = [](long long v, bool known) { return known ? Json(v) : Json(nullptr); };
    return {{"class", p.cls},
            {"node", num_or_null(p.node, p.node >= 0)},
            {"cpu_node", num_or_null(p.cpu_node, p.cpu_node >= 0)},
            {"distance", num_or_null(p.distance, p.distance > 0)},
            {"latency_ns", p.latency_ns},
            {"bandwidth", p.bandwidth},
            {"source", p.source}};
}

std::string placement_json(const Placement &p) { return json_text(placement_value(p)); }

}  // namespace speckv
