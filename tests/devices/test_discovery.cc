// SPDX-License-Identifier: Apache-2.0
// Discovery through the real libdaxctl and libnuma of this machine.
#include <doctest/doctest.h>

#include <string>

#include "discovery.h"
#include "speckv.h"
#include "util.h"

using namespace speckv;

TEST_SUITE("discovery") {

TEST_CASE("libdaxctl runs; libnuma reports node 0 with memory and distances") {
    DeviceReport r;
    REQUIRE(discover_devices(true, &r) == SPECKV_OK);
    CHECK_MESSAGE(r.daxctl_ok, r.daxctl_error);
    size_t ndev = 0;
    for (auto &g : r.regions) {
        CHECK(g.id >= 0);
        for (auto &d : g.devices) {
            ndev++;
            CHECK(d.chardev.rfind("dax", 0) == 0);
            CHECK((d.mode == "devdax" || d.mode == "system-ram"));
        }
    }
    if (ndev == 0) MESSAGE("libdaxctl finds no dax devices here (expected without CXL/pmem hardware)");
    if (!r.numa_ok) return;
    REQUIRE(!r.nodes.empty());
    const NumaNode &n0 = r.nodes[0];
    CHECK(n0.node == 0);
    CHECK(n0.mem_total > 0);
    CHECK(n0.mem_free <= n0.mem_total);
    REQUIRE(n0.distances.size() == r.nodes.size());
    CHECK(n0.distances[0] == 10);  // ACPI SLIT: local distance is 10
    if (n0.cpus > 0) {
        CHECK(!n0.memory_only);
        CHECK(n0.nearest_cpu_node == 0);
        CHECK(n0.nearest_cpu_distance == 10);
    }
    for (auto &n : r.nodes) CHECK(n.memory_only == (n.cpus == 0 && n.mem_total > 0));
}

TEST_CASE("JSON: device objects carry `daxctl list -D` keys (a synthetic report: no devices here)") {
    DeviceReport r;
    r.daxctl_ok = true;
    r.numa_ok = true;
    DaxRegion g;
    g.id = 0;
    g.path = "/platform/ACPI0017:00/root0/decoder0.0/region0/dax_region0";
    g.size = 4ull << 30;
    g.align = 2 << 20;
    DaxDevice a;
    a.chardev = "dax0.0";
    a.size = 2ull << 30;
    a.align = 2 << 20;
    a.target_node = 1;
    a.mode = "devdax";
    a.enabled = true;
    a.pool.present = true;
    a.pool.uuid = "0b5f7a4e-0000-4000-8000-000000000001";
    a.pool.pool_bytes = 2ull << 30;
    a.pool.page_size = 4096;
    a.pool.n_pages = 523776;
    a.pool.pages_used = 3;
    a.pool.blocks_live = 1;
    a.pool.attached = 0;
    a.pool.clean = true;
    DaxDevice b = a;
    b.chardev = "dax0.1";
    b.mode = "system-ram";
    b.online_memblocks = 16;
    b.total_memblocks = 16;
    b.movable = 1;
    b.pool = DevicePool{};
    DaxDevice c = b;
    c.chardev = "dax0.2";
    c.mode = "devdax";
    c.enabled = false;
    c.online_memblocks = c.total_memblocks = c.movable = -1;
    c.pool.error = "permission \"denied\"";
    g.devices = {a, b, c};
    r.regions.push_back(g);
    NumaNode n0, n1;
    n0.node = 0, n0.mem_total = 100, n0.mem_free = 50, n0.cpus = 8, n0.distances = {10, 20};
    n0.nearest_cpu_node = 0, n0.nearest_cpu_distance = 10;
    n1.node = 1, n1.mem_total = 200, n1.mem_free = 200, n1.memory_only = true, n1.distances = {20, 10};
    n1.nearest_cpu_node = 0, n1.nearest_cpu_distance = 20, n1.dax_devices = {"dax0.1"};
    r.nodes = {n0, n1};
    CHECK(device_report_json(r) ==
          "{\"regions\":[{\"path\":\"/platform/ACPI0017:00/root0/decoder0.0/region0/dax_region0\",\"id\":0,"
          "\"size\":4294967296,\"align\":2097152,\"devices\":["
          "{\"chardev\":\"dax0.0\",\"size\":2147483648,\"target_node\":1,\"align\":2097152,\"mode\":\"devdax\","
          "\"speckv_pool\":{\"uuid\":\"0b5f7a4e-0000-4000-8000-000000000001\",\"size\":2147483648,\"page_size\":4096,"
          "\"pages\":{\"total\":523776,\"used\":3},\"blocks_live\":1,\"attached\":0,\"clean\":true}},"
          "{\"chardev\":\"dax0.1\",\"size\":2147483648,\"target_node\":1,\"align\":2097152,\"mode\":\"system-ram\","
          "\"online_memblocks\":16,\"total_memblocks\":16,\"movable\":true,\"speckv_pool\":null},"
          "{\"chardev\":\"dax0.2\",\"size\":2147483648,\"target_node\":1,\"align\":2097152,\"mode\":\"devdax\","
          "\"state\":\"disabled\",\"speckv_pool\":null,\"speckv_pool_error\":\"permission \\\"denied\\\"\"}]}],"
          "\"numa_available\":true,\"numa_nodes\":["
          "{\"node\":0,\"size\":100,\"free\":50,\"cpus\":8,\"memory_only\":false,\"distances\":{\"0\":10,\"1\":20},"
          "\"nearest_cpu_node\":0,\"nearest_cpu_distance\":10,\"dax_devices\":[]},"
          "{\"node\":1,\"size\":200,\"free\":200,\"cpus\":0,\"memory_only\":true,\"distances\":{\"0\":20,\"1\":10},"
          "\"nearest_cpu_node\":0,\"nearest_cpu_distance\":20,\"dax_devices\":[\"dax0.1\"]}]}\n");
}

TEST_CASE("JSON: an empty machine (this one's dax side)") {
    DeviceReport r;
    r.daxctl_ok = true;
    CHECK(device_report_json(r) == "{\"regions\":[],\"numa_available\":false,\"numa_nodes\":[]}\n");
    r.daxctl_ok = false;
    r.daxctl_error = "daxctl_new: Cannot allocate memory";
    CHECK(device_report_json(r) ==
          "{\"regions\":[],\"daxctl_error\":\"daxctl_new: Cannot allocate memory\",\"numa_available\":false,"
          "\"numa_nodes\":[]}\n");
}

}  // TEST_SUITE
