// SPDX-License-Identifier: Apache-2.0
// numa: backend, for real on this machine's node 0 (libnuma, mbind,
// move_pages). Suite "numa": the `devices_numa` test skips where NUMA is off.
#include <doctest/doctest.h>
#include <numa.h>
#include <numaif.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/backend.h"
#include "backend/devices.h"
#include "pool/pool.h"
#include "speckv.h"
#include "util.h"

using namespace speckv;

// The node the round-trip tests use: 0 here; SPECKV_TEST_NUMA_NODE=N runs
// them on a CXL node of a machine that has one (docs/devices.md).
static int test_node() {
    const char *e = std::getenv("SPECKV_TEST_NUMA_NODE");
    return e && *e ? std::atoi(e) : 0;
}

TEST_SUITE("numa") {

TEST_CASE("numa:N pool (N = 0 here): open, alloc, write, access round trip, pages on node N") {
    const int node = test_node();
    const std::string base = "numa:" + std::to_string(node) + "?size=8M";
    for (const std::string &uri : {base, base + "&policy=bind", base + "&policy=preferred"}) {
        CAPTURE(uri);
        speckv_pool *p = nullptr;
        REQUIRE_MESSAGE(speckv_pool_open(uri.c_str(), nullptr, &p) == SPECKV_OK, err());
        std::string payload(2 * 4096 + 100, '\0');
        for (size_t i = 0; i < payload.size(); i++) payload[i] = static_cast<char>(i * 13 + 1);
        speckv_handle h = 0;
        REQUIRE(speckv_alloc(p, payload.size(), SPECKV_DTYPE_FP16, nullptr, &h) == SPECKV_OK);
        REQUIRE(speckv_write(p, h, 0, payload.data(), payload.size()) == SPECKV_OK);
        std::string back(payload.size(), '\0');
        REQUIRE(speckv_access(p, h, 0, back.data(), back.size(), SPECKV_ACCESS_DEFAULT) == SPECKV_OK);
        CHECK(back == payload);
        // Every page of the pool's mapping sits on the node (faulted at open).
        NumaPlacement pl;
        REQUIRE(numa_placement(p->rep->image(), p->rep->image_size(), node, &pl) == SPECKV_OK);
        CHECK(pl.pages == 8u * 1024 * 1024 / static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
        CHECK(pl.on_node == pl.pages);
        CHECK(pl.absent == 0);
        CHECK(speckv_free(p, h) == SPECKV_OK);
        CHECK(speckv_pool_close(p) == SPECKV_OK);
    }
}

TEST_CASE("open_numa binds and verifies; the policy is what get_mempolicy reports") {
    const int node = test_node();
    Mapping m;
    REQUIRE_MESSAGE(Mapping::open_numa(node, 4u << 20, 0, &m) == SPECKV_OK, err());
    CHECK(m.size() == 4u << 20);
    CHECK(!m.shared());
    CHECK(m.path() == "numa:" + std::to_string(node));
    int mode = -1;
    bitmask *mask = numa_allocate_nodemask();
    REQUIRE(get_mempolicy(&mode, mask->maskp, mask->size + 1, m.base(), MPOL_F_ADDR) == 0);
    CHECK(mode == MPOL_BIND);
    CHECK(numa_bitmask_isbitset(mask, static_cast<unsigned>(node)));
    numa_bitmask_free(mask);
    int where = -1;
    REQUIRE(get_mempolicy(&where, nullptr, 0, m.base() + (3u << 20), MPOL_F_NODE | MPOL_F_ADDR) == 0);
    CHECK(where == node);
    // Anonymous memory faulted in with zeros: what format_pool(zeroed) assumes.
    for (size_t i = 0; i < m.size(); i += 4096) REQUIRE(m.base()[i] == 0);
}

TEST_CASE("numa: errors are clear and map nothing") {
    speckv_pool *p = nullptr;
    CHECK(speckv_pool_open("numa:63?size=8M", nullptr, &p) == SPECKV_ENOENT);
    CHECK(err().find("NUMA node 63 does not exist (this machine has node") != std::string::npos);
    CHECK(p == nullptr);
    Mapping m;
    CHECK(Mapping::open_numa(-1, 4u << 20, 0, &m) == SPECKV_ENOENT);
    CHECK(Mapping::open_numa(0, 4u << 20, 2, &m) == SPECKV_EINVAL);
    CHECK(err().find("policy 2") != std::string::npos);
    CHECK(Mapping::open_numa(0, 0, 0, &m) == SPECKV_EINVAL);
    // More than the node has free, bound: refused before any page is touched.
    CHECK(speckv_pool_open("numa:0?size=64T", nullptr, &p) == SPECKV_ENOSPC);
    CHECK(err().find("NUMA node 0 has") != std::string::npos);
    CHECK(err().find("policy=preferred") != std::string::npos);
    CHECK(m.base() == nullptr);
    // Malformed URIs stop at the parser.
    CHECK(speckv_pool_open("numa:x?size=8M", nullptr, &p) == SPECKV_EURI);
    CHECK(speckv_pool_open("numa:0?size=8M&policy=interleave", nullptr, &p) == SPECKV_EURI);
    CHECK(speckv_pool_open("dax:dev/dax0.0", nullptr, &p) == SPECKV_EURI);
}

// Its own suite, run by the CTest test `devices_numa_memoryless` (main.cc
// --requires=memoryless-numa), which reports itself skipped where every node
// has memory.
int memoryless_node() {
    if (numa_available() < 0) return -1;
    for (int n = 0; n <= numa_max_node(); n++)
        if (numa_bitmask_isbitset(numa_nodes_ptr, static_cast<unsigned>(n)) && numa_node_size64(n, nullptr) <= 0) return n;
    return -1;
}

TEST_CASE("a node without memory is refused" * doctest::test_suite("numa-memoryless")) {
    REQUIRE_MESSAGE(memoryless_node() >= 0, "no memoryless node (run through `ctest -R devices_numa_memoryless`)");
    Mapping m;
    CHECK(Mapping::open_numa(memoryless_node(), 4u << 20, 0, &m) == SPECKV_ENOENT);
    CHECK(err().find("has no memory") != std::string::npos);
}

}  // TEST_SUITE
