// SPDX-License-Identifier: Apache-2.0
// Placement hints: the SLIT distance -> class / latency / bandwidth mapping,
// on synthetic distance tables (this machine has one node), and the config
// overrides. docs/devices.md, "Placement hints".
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "backend/backend.h"
#include "config/config.h"
#include "backend/devices.h"
#include "speckv.h"
#include "config/uri.h"
#include "util.h"

using namespace speckv;

TEST_CASE("distance -> class, latency, bandwidth") {
    struct Row {
        int d;
        const char *cls;
        uint64_t ns, bw;
    } rows[] = {
        {10, "local", 100, 8000000000ull},  // local DRAM: the prefetch.bandwidth default, unchanged
        {11, "local", 110, 7272727272ull},  // sub-NUMA cluster sibling
        {12, "local", 120, 6666666666ull},
        {13, "remote", 130, 6153846153ull},
        {20, "remote", 200, 4000000000ull},  // Linux's REMOTE_DISTANCE: a node the SLIT does not describe
        {21, "remote", 210, 3809523809ull},  // the other socket of a 2-socket Intel server
        {22, "far", 220, 3636363636ull},
        {32, "far", 320, 2500000000ull},
        {50, "far", 500, 1600000000ull},
        {255, "far", 2550, 313725490ull},  // the largest SLIT value
    };
    for (const Row &r : rows) {
        CAPTURE(r.d);
        Placement p = placement_from_distance(r.d);
        CHECK(p.cls == r.cls);
        CHECK(p.distance == r.d);
        CHECK(p.latency_ns == r.ns);
        CHECK(p.bandwidth == r.bw);
    }
    // Unknown (0) or nonsense (< 10) distances are taken as local.
    CHECK(placement_from_distance(0).latency_ns == 100);
    CHECK(placement_from_distance(0).cls == "local");
    CHECK(placement_from_distance(3).bandwidth == 8000000000ull);
    // Bandwidth stays inside prefetch.bandwidth's bounds.
    CHECK(placement_bandwidth_for_latency(1) == 800000000000ull);
    CHECK(placement_bandwidth_for_latency(0) == 800000000000ull);
    CHECK(placement_bandwidth_for_latency(10000000) == 1000000ull);  // 80 kB/s, raised to the 1e6 floor
    CHECK(placement_bandwidth_for_latency(1000000000000ull) == 1000000ull);
    CHECK(std::string(placement_class_for_latency(250)) == "far");
}

TEST_CASE("nearest CPU node on a synthetic 2-socket + 2 CXL node table") {
    // Nodes 0 and 1: sockets with CPUs. Node 2: a CXL expander on socket 0.
    // Node 3: CXL memory behind a switch. 0 = not described.
    const std::vector<std::vector<int>> t = {
        {10, 21, 14, 30},
        {21, 10, 24, 34},
        {14, 24, 10, 0},
        {30, 34, 0, 10},
    };
    int from = -2;
    CHECK(nearest_distance(t, {0, 1}, 2, &from) == 14);
    CHECK(from == 0);
    CHECK(nearest_distance(t, {0, 1}, 3, &from) == 30);
    CHECK(from == 0);
    CHECK(nearest_distance(t, {1}, 2, &from) == 24);  // a process confined to socket 1
    CHECK(from == 1);
    CHECK(nearest_distance(t, {1}, 0, &from) == 21);
    CHECK(nearest_distance(t, {0, 1}, 1, &from) == 10);
    CHECK(from == 1);
    CHECK(nearest_distance(t, {2}, 3, &from) == -1);  // not described
    CHECK(from == -1);
    CHECK(nearest_distance(t, {0}, 9, &from) == -1);   // no such node
    CHECK(nearest_distance(t, {}, 0, &from) == -1);    // no CPU node
    CHECK(nearest_distance(t, {-1, 7}, 0, &from) == -1);
    // Through the mapping: the CXL node near socket 0 is "remote" (1.4x), the
    // switched one "far" (3x), and the prefetcher's bandwidth falls with it.
    Placement near = placement_from_distance(nearest_distance(t, {0, 1}, 2, &from));
    Placement far = placement_from_distance(nearest_distance(t, {0, 1}, 3, &from));
    CHECK(near.cls == "remote");
    CHECK(far.cls == "far");
    CHECK(far.bandwidth < near.bandwidth);
    CHECK(near.bandwidth < placement_from_distance(10).bandwidth);
}

TEST_CASE("placement from this machine: file:/anon: local, dax: without a device the CXL figure") {
    Placement f = placement_for_node(-1, false);
    CHECK(f.cls == "local");
    CHECK(f.node == -1);
    CHECK(f.bandwidth == kLocalBandwidth);
    CHECK(f.source.find("local memory") != std::string::npos);
    Placement d = placement_for_node(-1, true);
    CHECK(d.cls == "far");
    CHECK(d.latency_ns == 250);
    CHECK(d.bandwidth == 3200000000ull);
    CHECK(d.distance == 0);
    Uri u;
    REQUIRE(parse_uri("file:/tmp/x.pool", &u) == SPECKV_OK);
    CHECK(placement_for_uri(u).cls == "local");
    REQUIRE(parse_uri("anon:?size=8M", &u) == SPECKV_OK);
    CHECK(placement_for_uri(u).bandwidth == kLocalBandwidth);
    REQUIRE(parse_uri("dax:/dev/dax987.3", &u) == SPECKV_OK);  // no such device here
    CHECK(placement_for_uri(u).latency_ns == 250);
    Mapping none;
    CHECK(placement_for_mapping(none).cls == "local");
    CHECK(placement_json(f) ==
          "{\"class\":\"local\",\"node\":null,\"cpu_node\":null,\"distance\":10,\"latency_ns\":100,\"bandwidth\":"
          "8000000000,\"source\":\"local memory of the process: file:, anon:\"}");
}

TEST_CASE("config: placement.latency_ns, placement.bandwidth, prefetch.bandwidth override in that order") {
    Config c;
    Placement p = placement_from_distance(10);
    apply_placement_config(c, &p);  // nothing set: the machine's figures stand
    CHECK(p.bandwidth == kLocalBandwidth);
    REQUIRE(c.set_int("placement.latency_ns", 400) == SPECKV_OK);
    apply_placement_config(c, &p);
    CHECK(p.cls == "far");
    CHECK(p.latency_ns == 400);
    CHECK(p.bandwidth == 2000000000ull);
    CHECK(p.source.rfind("config placement.latency_ns", 0) == 0);
    REQUIRE(c.set_int("placement.bandwidth", 5000000000) == SPECKV_OK);
    apply_placement_config(c, &p);
    CHECK(p.bandwidth == 5000000000ull);
    REQUIRE(c.set_int("prefetch.bandwidth", 1000000000) == SPECKV_OK);
    apply_placement_config(c, &p);
    CHECK(p.bandwidth == 1000000000ull);
    // Bounds.
    CHECK(c.set_int("placement.latency_ns", 9) == SPECKV_EINVAL);
    CHECK(c.set_int("placement.latency_ns", 1000001) == SPECKV_EINVAL);
    CHECK(c.set_int("placement.bandwidth", 999999) == SPECKV_EINVAL);
    CHECK(c.set_str("placement.bandwidth", "4G") == SPECKV_OK);
    // TOML sets them too (and marks them set).
    Config t;
    REQUIRE(t.load_toml_text("[placement]\nlatency_ns = 200\n", "test") == SPECKV_OK);
    Placement q = placement_from_distance(10);
    apply_placement_config(t, &q);
    CHECK(q.cls == "remote");
    CHECK(q.bandwidth == 4000000000ull);
}

TEST_CASE("the prefetcher of an open pool measures its link against the placement's bandwidth") {
    auto json_of = [](const char *uri, std::initializer_list<std::pair<const char *, int64_t>> kv) {
        speckv_config *c = nullptr;
        REQUIRE(speckv_config_new(&c) == SPECKV_OK);
        for (auto &[k, v] : kv) REQUIRE(speckv_config_set_int(c, k, v) == SPECKV_OK);
        speckv_pool *p = nullptr;
        REQUIRE(speckv_pool_open(uri, c, &p) == SPECKV_OK);
        speckv_config_free(c);
        size_t need = 0;
        speckv_stats_json(p, nullptr, 0, &need);
        std::string s(need + 1, '\0');
        REQUIRE(speckv_stats_json(p, s.data(), s.size(), &need) == SPECKV_OK);
        s.resize(need);
        speckv_pool_close(p);
        return s;
    };
    std::string local = json_of("anon:?size=8M", {});
    CHECK(local.find("\"placement_latency_ns\":100,") != std::string::npos);
    CHECK(local.find("\"placement_bandwidth\":8000000000,") != std::string::npos);
    CHECK(local.find("\"placement_distance\":10,") != std::string::npos);
    // A 250 ns pool (the CXL direct figure): 8e9 x 100 / 250 = 3.2 GB/s.
    std::string cxl = json_of("anon:?size=8M", {{"placement.latency_ns", 250}});
    CHECK(cxl.find("\"placement_latency_ns\":250,") != std::string::npos);
    CHECK(cxl.find("\"placement_bandwidth\":3200000000,") != std::string::npos);
    // prefetch.bandwidth set explicitly wins.
    std::string fixed = json_of("anon:?size=8M", {{"placement.latency_ns", 250}, {"prefetch.bandwidth", 1000000000}});
    CHECK(fixed.find("\"placement_bandwidth\":1000000000,") != std::string::npos);
}
