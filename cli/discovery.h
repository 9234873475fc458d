// SPDX-License-Identifier: Apache-2.0
// Device discovery for `speckv devices` (docs/devices.md): what libdaxctl and
// libnuma report, and the speckv pool on each devdax device.
#pragma once
#include <string>
#include <vector>

#include "backend/devices.h"

namespace speckv {

struct DaxRegion {
    int id = -1;
    std::string path;           // sysfs path without the /sys/devices prefix
    uint64_t size = 0, available_size = 0, align = 0;
    std::vector<DaxDevice> devices;
};

struct NumaNode {
    int node = -1;
    uint64_t mem_total = 0, mem_free = 0;
    int cpus = 0;
    bool memory_only = false;   // memory and no CPUs: the usual sign of CXL / system-ram
    std::vector<int> distances; // to every node id in DeviceReport::nodes order
    int nearest_cpu_node = -1;  // the closest node that has CPUs (itself if it has some)
    int nearest_cpu_distance = -1;
    std::vector<std::string> dax_devices;  // system-ram dax devices onlined here
};

struct DeviceReport {
    bool daxctl_ok = false;      // libdaxctl context created
    std::string daxctl_error;
    std::vector<DaxRegion> regions;
    bool numa_ok = false;        // numa_available() >= 0
    std::vector<NumaNode> nodes;
};

// Lists dax regions/devices and NUMA nodes. probe_pools: also open each
// devdax device read-only and report the pool on it. Never fails as a whole:
// what could not be read is recorded in the report. Returns SPECKV_OK.
int discover_devices(bool probe_pools, DeviceReport *out);

// The report as one JSON object (newline-terminated) for `speckv devices
// --json`: "regions" shaped like `daxctl list -RD` (plus "speckv_pool" per
// device), "numa_available", "numa_nodes". docs/devices.md shows it.
std::string device_report_json(const DeviceReport &r);

}  // namespace speckv
