// SPDX-License-Identifier: Apache-2.0
// Named numa: pools (numa:N?size=S&name=NAME): a tmpfs file bound to node N,
// attached by other processes and the CLI. For real on node 0 (or
// SPECKV_TEST_NUMA_NODE). Suite "numa". The pool directory is a private one
// under /dev/shm (XDG_RUNTIME_DIR), removed at the end of each case.
#include <dirent.h>
#include <doctest/doctest.h>
#include <linux/magic.h>
#include <numa.h>
#include <numaif.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/devices.h"
#include "pool/pool.h"
#include "speckv.h"
#include "config/uri.h"
#include "util.h"

using namespace speckv;

namespace {

int test_node() {
    const char *e = std::getenv("SPECKV_TEST_NUMA_NODE");
    return e && *e ? std::atoi(e) : 0;
}

// XDG_RUNTIME_DIR pointed at a fresh directory (tmpfs when under /dev/shm),
// restored and emptied on scope exit.
struct PoolDir {
    std::string xdg, dir, saved;
    bool had = false;
    explicit PoolDir(const std::string &base) {
        if (const char *x = std::getenv("XDG_RUNTIME_DIR")) had = true, saved = x;
        xdg = base + "/speckv-numa-test-" + std::to_string(getpid());
        mkdir(xdg.c_str(), 0700);
        setenv("XDG_RUNTIME_DIR", xdg.c_str(), 1);
        dir = xdg + "/speckv";
    }
    ~PoolDir() {
        for (const std::string &f : files()) unlink((dir + "/" + f).c_str());
        rmdir(dir.c_str());
        rmdir(xdg.c_str());
        if (had) setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);
        else unsetenv("XDG_RUNTIME_DIR");
    }
    std::vector<std::string> files() const {
        std::vector<std::string> out;
        if (DIR *d = opendir(dir.c_str())) {
            while (dirent *e = readdir(d))
                if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) out.push_back(e->d_name);
            closedir(d);
        }
        return out;
    }
};

std::string uri_of(const std::string &name, const std::string &extra = "") {
    return "numa:" + std::to_string(test_node()) + "?size=8M&name=" + name + extra;
}

struct Key {
    uint8_t b[32];
};
Key key(uint8_t v) {
    Key k{};
    for (int i = 0; i < 32; i++) k.b[i] = static_cast<uint8_t>(v * 31 + i);
    return k;
}

std::string payload(size_t n, int seed) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; i++) s[i] = static_cast<char>(i * 7 + seed);
    return s;
}

// Allocates, writes and publishes `data` under `k`. 0 on failure.
speckv_handle put(speckv_pool *p, const std::string &data, const Key &k) {
    speckv_handle h = 0;
    if (speckv_alloc(p, data.size(), SPECKV_DTYPE_OPAQUE, nullptr, &h) != SPECKV_OK) return 0;
    if (speckv_write(p, h, 0, data.data(), data.size()) != SPECKV_OK) return 0;
    if (speckv_publish(p, h, k.b, nullptr) != SPECKV_OK) return 0;
    return h;
}

// Looks `k` up and reads it back; "" on failure.
std::string get(speckv_pool *p, const Key &k, size_t n) {
    speckv_handle h = 0;
    if (speckv_lookup(p, 0, k.b, &h) != SPECKV_OK) return "";
    std::string back(n, '\0');
    if (speckv_access(p, h, 0, back.data(), n, SPECKV_ACCESS_DEFAULT) != SPECKV_OK) return "";
    return back;
}

// Every page of the pool's mapping on `node`, and the policy MPOL_BIND there.
bool all_on_node(const unsigned char *base, size_t size, int node) {
    NumaPlacement pl;
    if (numa_placement(base, size, node, &pl) != SPECKV_OK) return false;
    int mode = -1;
    bitmask *mask = numa_allocate_nodemask();
    bool ok = get_mempolicy(&mode, mask->maskp, mask->size + 1, const_cast<unsigned char *>(base), MPOL_F_ADDR) == 0 &&
              mode == MPOL_BIND && numa_bitmask_isbitset(mask, static_cast<unsigned>(node));
    numa_bitmask_free(mask);
    return ok && pl.pages == size / static_cast<size_t>(sysconf(_SC_PAGESIZE)) && pl.on_node == pl.pages;
}

}  // namespace

TEST_SUITE("numa") {

TEST_CASE("named numa: pool created by one process is attached by a forked child: same blocks, pages on the node") {
    PoolDir pd("/dev/shm");
    const std::string uri = uri_of("shared1");
    const int node = test_node();
    speckv_pool *p = nullptr;
    REQUIRE_MESSAGE(speckv_pool_open(uri.c_str(), nullptr, &p) == SPECKV_OK, err());
    // The pool is a file in the pool directory, on a tmpfs, bound to the node.
    Uri u;
    REQUIRE(parse_uri(uri, &u) == SPECKV_OK);
    CHECK(u.target == pd.dir + "/shared1.numa.pool");
    struct statfs fs;
    REQUIRE(statfs(u.target.c_str(), &fs) == 0);
    CHECK(static_cast<unsigned long>(fs.f_type) == TMPFS_MAGIC);
    CHECK(all_on_node(p->rep->image(), p->rep->image_size(), node));
    const std::string a = payload(3 * 4096 + 11, 1), b = payload(2 * 4096, 2);
    REQUIRE(put(p, a, key(1)) != 0);

    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // A separate attach by name: reads the parent's block, adds its own.
        speckv_pool *c = nullptr;
        if (speckv_pool_open(uri.c_str(), nullptr, &c) != SPECKV_OK) _exit(2);
        if (get(c, key(1), a.size()) != a) _exit(3);
        if (!all_on_node(c->rep->image(), c->rep->image_size(), node)) _exit(4);
        if (put(c, b, key(2)) == 0) _exit(5);
        if (speckv_pool_close(c) != SPECKV_OK) _exit(6);
        _exit(0);
    }
    int st = 0;
    REQUIRE(waitpid(child, &st, 0) == child);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    CHECK(get(p, key(2), b.size()) == b);  // the child's block, seen here
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);

    // It outlives its processes: the read-only path sees both blocks, clean.
    std::unique_ptr<Pool> ro;
    REQUIRE_MESSAGE(Pool::open_readonly_uri(uri, &ro) == SPECKV_OK, err());
    PoolInfo info;
    ro->info(&info);
    CHECK(info.blocks_live == 2);
    CHECK(info.attached == 0);
    CheckReport r;
    REQUIRE(ro->check(&r) == SPECKV_OK);
    CHECK(r.problems.empty());
    ro.reset();
    // Reset wipes it through the URI and keeps the geometry.
    REQUIRE_MESSAGE(Pool::reset_uri(uri) == SPECKV_OK, err());
    REQUIRE(Pool::open_readonly_uri(uri, &ro) == SPECKV_OK);
    ro->info(&info);
    CHECK(info.blocks_live == 0);
    CHECK(info.pool_bytes == 8u << 20);
}

TEST_CASE("named numa: racing creators leave one pool") {
    PoolDir pd("/dev/shm");
    const std::string uri = uri_of("race");
    const int n = 4;
    std::vector<pid_t> kids;
    for (int i = 0; i < n; i++) {
        pid_t c = fork();
        REQUIRE(c >= 0);
        if (c == 0) {
            speckv_pool *p = nullptr;
            if (speckv_pool_open(uri.c_str(), nullptr, &p) != SPECKV_OK) _exit(2);
            if (put(p, payload(4096, i), key(static_cast<uint8_t>(10 + i))) == 0) _exit(3);
            _exit(speckv_pool_close(p) == SPECKV_OK ? 0 : 4);
        }
        kids.push_back(c);
    }
    for (pid_t c : kids) {
        int st = 0;
        REQUIRE(waitpid(c, &st, 0) == c);
        CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
    }
    speckv_pool *p = nullptr;
    REQUIRE_MESSAGE(speckv_pool_open(uri.c_str(), nullptr, &p) == SPECKV_OK, err());
    for (int i = 0; i < n; i++) CHECK(get(p, key(static_cast<uint8_t>(10 + i)), 4096) == payload(4096, i));
    CHECK(speckv_pool_close(p) == SPECKV_OK);
    CHECK(pd.files() == std::vector<std::string>{"race.numa.pool"});  // no temporary left behind
}

TEST_CASE("named numa: attaching with another node, another policy, or a file: pool of that name is refused") {
    PoolDir pd("/dev/shm");
    const int node = test_node();
    speckv_pool *p = nullptr;
    REQUIRE_MESSAGE(speckv_pool_open(uri_of("n1").c_str(), nullptr, &p) == SPECKV_OK, err());
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
    const int other = node + 1;
    std::string wrong = "numa:" + std::to_string(other) + "?size=8M&name=n1";
    CHECK(speckv_pool_open(wrong.c_str(), nullptr, &p) == SPECKV_EINVAL);
    CHECK(err().find("is bound to node " + std::to_string(node) + ", not " + std::to_string(other)) != std::string::npos);
    CHECK(speckv_pool_open(uri_of("n1", "&policy=preferred").c_str(), nullptr, &p) == SPECKV_EINVAL);
    CHECK(err().find("was created with policy=bind") != std::string::npos);
    CHECK(speckv_pool_open(uri_of("n1", "&policy=bind").c_str(), nullptr, &p) == SPECKV_OK);
    CHECK(speckv_pool_close(p) == SPECKV_OK);
    // A file: pool whose file has the name a numa: pool would use.
    REQUIRE(speckv_pool_open("file:f1.numa?size=8M", nullptr, &p) == SPECKV_OK);
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
    CHECK(speckv_pool_open(uri_of("f1").c_str(), nullptr, &p) == SPECKV_EINVAL);
    CHECK(err().find("carries no NUMA binding") != std::string::npos);
    // create=0 on a missing one: ENOENT saying how to create it, no file.
    p = nullptr;
    CHECK(speckv_pool_open(uri_of("absent", "&create=0").c_str(), nullptr, &p) == SPECKV_ENOENT);
    CHECK(err().find("speckv pool create numa:") != std::string::npos);
    CHECK(access((pd.dir + "/absent.numa.pool").c_str(), F_OK) != 0);
    std::unique_ptr<Pool> ro;
    CHECK(Pool::open_readonly_uri(uri_of("absent"), &ro) == SPECKV_ENOENT);
    CHECK(access((pd.dir + "/absent.numa.pool").c_str(), F_OK) != 0);
    CHECK(p == nullptr);
}

TEST_CASE("unnamed numa: cannot be reached from outside: a clear error saying why and how to name it") {
    Mapping m;
    Uri u;
    REQUIRE(parse_uri("numa:0?size=8M", &u) == SPECKV_OK);
    CHECK(Mapping::attach_numa_uri(u, false, &m) == SPECKV_ENOTSUP);
    CHECK(err().find("without name= is private memory of the process") != std::string::npos);
    CHECK(err().find("numa:0?size=...&name=NAME") != std::string::npos);
    std::unique_ptr<Pool> ro;
    CHECK(Pool::open_readonly_uri("numa:0?size=8M", &ro) == SPECKV_ENOTSUP);
    CHECK(err().find("name=") != std::string::npos);
    CHECK(Pool::reset_uri("numa:0?size=8M") == SPECKV_ENOTSUP);
    CHECK(err().find("name=") != std::string::npos);
}

TEST_CASE("bad named numa: URIs are refused by the parser and create nothing") {
    PoolDir pd("/dev/shm");
    const char *bad[] = {
        "numa:0?size=8M&name=a/b",       "numa:0?size=8M&name=..",        "numa:0?size=8M&name=",
        "numa:0?size=8M&name=.hidden",   "numa:0?size=8M&name=a%20b",     "numa:0?size=8M&name=x&name=y",
        "numa:0?size=8M&name=ok&color=red", "numa:0?size=8M&name=ok&policy=bind&policy=bind",
        "file:ok?size=8M&name=ok",       "anon:?size=8M&name=ok",
    };
    for (const char *b : bad) {
        CAPTURE(b);
        speckv_pool *p = nullptr;
        CHECK(speckv_pool_open(b, nullptr, &p) == SPECKV_EURI);
        CHECK(p == nullptr);
    }
    CHECK(pd.files().empty());
    speckv_pool *p = nullptr;
    CHECK(speckv_pool_open("numa:0?size=8M&name=a/b", nullptr, &p) == SPECKV_EURI);
    CHECK(err().find("pool name 'a/b' must be 1-200 characters") != std::string::npos);
    CHECK(speckv_pool_open("numa:0?size=8M&name=", nullptr, &p) == SPECKV_EURI);
    CHECK(err().find("name= is empty") != std::string::npos);
    CHECK(speckv_pool_open("numa:0?size=8M&name=ok&color=red", nullptr, &p) == SPECKV_EURI);
    CHECK(err().find("unknown URI parameter 'color' (known: size, page_size, max_blocks, create, owner, group, mode, policy, name)") !=
          std::string::npos);
    CHECK(speckv_pool_open("numa:0?size=8M&name=x&name=y", nullptr, &p) == SPECKV_EURI);
    CHECK(err().find("'name' given twice") != std::string::npos);
}

// A pool directory that is not a tmpfs: SPECKV_TEST_TMP (the build tree) or
// /var/tmp, where mbind's shared policy would not govern the pages.
std::string non_tmpfs_dir() {
    for (const std::string &d : {dev_test_dir(), std::string("/var/tmp")}) {
        struct statfs fs;
        if (statfs(d.c_str(), &fs) == 0 && static_cast<unsigned long>(fs.f_type) != TMPFS_MAGIC) return d;
    }
    return "";
}

TEST_CASE("named numa: a pool directory on a disk file system is refused, nothing left there" *
          doctest::skip(non_tmpfs_dir().empty())) {
    PoolDir pd(non_tmpfs_dir());
    speckv_pool *p = nullptr;
    CHECK(speckv_pool_open(uri_of("disk").c_str(), nullptr, &p) == SPECKV_ENOTSUP);
    CHECK(err().find("named numa: pools live in a tmpfs") != std::string::npos);
    CHECK(pd.files().empty());
}

TEST_CASE("placement of node 0 end to end: numa:0 mappings, named and not, are local DRAM here") {
    const int node = test_node();
    Mapping m;
    REQUIRE(Mapping::open_numa(node, 4u << 20, 0, &m) == SPECKV_OK);
    CHECK(m.numa_node() == node);
    Placement pl = placement_for_mapping(m);
    CHECK(pl.node == node);
    if (node == 0 && numa_num_configured_nodes() == 1) {  // this machine: one node, with the CPUs
        CHECK(pl.cls == "local");
        CHECK(pl.distance == 10);
        CHECK(pl.cpu_node == 0);
        CHECK(pl.latency_ns == 100);
        CHECK(pl.bandwidth == 8000000000ull);
        CHECK(pl.source == "NUMA distance 10 from node 0 to node 0");
    } else {  // elsewhere: what the distance table says
        int from = pl.cpu_node;
        REQUIRE(from >= 0);
        CHECK(pl.distance == numa_distance(from, node));
        CHECK(pl.latency_ns == 10u * static_cast<uint64_t>(pl.distance));
    }
    PoolDir pd("/dev/shm");
    Uri u;
    REQUIRE(parse_uri(uri_of("pl"), &u) == SPECKV_OK);
    Mapping n;
    auto init = [](unsigned char *, size_t) { return SPECKV_OK; };
    REQUIRE_MESSAGE(Mapping::open_numa_uri(u, 4u << 20, true, init, &n) == SPECKV_OK, err());
    CHECK(n.shared());
    CHECK(n.numa_node() == node);
    CHECK(n.path() == pd.dir + "/pl.numa.pool");
    Placement pn = placement_for_mapping(n);
    CHECK(pn.cls == pl.cls);
    CHECK(pn.bandwidth == pl.bandwidth);
    CHECK(placement_for_uri(u).bandwidth == pl.bandwidth);
    CHECK(all_on_node(n.base(), n.size(), node));
}

}  // TEST_SUITE
