// Tiers in the pool: address translation (index + TLB) and the prefetcher
// behind speckv_prefetch, through the public API.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "pool.h"
#include "speckv.h"
#include "testutil.h"

namespace {

speckv_pool *open_with(const std::string &uri, std::initializer_list<std::pair<const char *, int64_t>> kv) {
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    for (auto &[k, v] : kv) REQUIRE_MESSAGE(speckv_config_set_int(c, k, v) == SPECKV_OK, k);
    speckv_pool *p = nullptr;
    int rc = speckv_pool_open(uri.c_str(), c, &p);
    speckv_config_free(c);
    REQUIRE_MESSAGE(rc == SPECKV_OK, speckv_errmsg());
    return p;
}

speckv_handle kv_block(speckv_pool *p, uint64_t tenant, uint64_t req, uint32_t layer, uint64_t pos, uint64_t ntok,
                       size_t bytes) {
    speckv_hint h{};
    h.struct_size = sizeof h;
    h.tenant = tenant;
    h.request = req;
    h.layer = layer;
    h.token_pos = pos;
    h.token_count = ntok;
    speckv_handle b = 0;
    REQUIRE(speckv_alloc(p, bytes, SPECKV_DTYPE_FP16, &h, &b) == SPECKV_OK);
    std::vector<unsigned char> v(bytes);
    for (size_t i = 0; i < bytes; i++) v[i] = static_cast<unsigned char>(req * 31 + layer * 7 + pos + i);
    REQUIRE(speckv_write(p, b, 0, v.data(), bytes) == SPECKV_OK);
    return b;
}

speckv_pool_stats stats_of(speckv_pool *p) {
    speckv_pool_stats s{};
    s.struct_size = sizeof s;
    REQUIRE(speckv_stats(p, &s) == SPECKV_OK);
    return s;
}

}  // namespace

TEST_CASE("translate: (tenant, request, layer, token) -> block and offset, across processes and recovery") {
    std::string path = fresh_pool("xlate");
    speckv_pool *p = open_with("file:" + path + "?size=16M", {});
    speckv_handle a = kv_block(p, 1, 10, 0, 0, 16, 4096);
    speckv_handle b = kv_block(p, 1, 10, 0, 16, 16, 4096);
    speckv_handle c = kv_block(p, 1, 10, 1, 0, 16, 4096);
    speckv_handle d = kv_block(p, 2, 10, 0, 0, 16, 4096);  // same request id, other tenant
    speckv_handle h = 0;
    uint64_t off = 99;
    REQUIRE(speckv_translate(p, 1, 10, 0, 5, &h, &off) == SPECKV_OK);
    CHECK(h == a);
    CHECK(off == 5);
    REQUIRE(speckv_translate(p, 1, 10, 0, 16, &h, &off) == SPECKV_OK);
    CHECK(h == b);
    CHECK(off == 0);
    REQUIRE(speckv_translate(p, 1, 10, 1, 15, &h, nullptr) == SPECKV_OK);
    CHECK(h == c);
    REQUIRE(speckv_translate(p, 2, 10, 0, 3, &h, nullptr) == SPECKV_OK);
    CHECK(h == d);
    CHECK(speckv_translate(p, 1, 10, 0, 32, &h, nullptr) == SPECKV_ENOENT);  // past the last block
    CHECK(speckv_translate(p, 1, 11, 0, 0, &h, nullptr) == SPECKV_ENOENT);   // unknown request
    CHECK(speckv_translate(p, 1, 10, 0, 0, nullptr, nullptr) == SPECKV_EINVAL);
    // Repeats hit the TLB; a freed block is never returned from it.
    for (int i = 0; i < 10; i++) REQUIRE(speckv_translate(p, 1, 10, 0, 5, &h, nullptr) == SPECKV_OK);
    speckv_pool_stats s = stats_of(p);
    CHECK(s.tlb_hits >= 10);
    REQUIRE(speckv_free(p, a) == SPECKV_OK);
    CHECK(speckv_translate(p, 1, 10, 0, 5, &h, nullptr) == SPECKV_ENOENT);
    // Another process's blocks are found; one it frees disappears here too.
    pid_t child = fork();
    if (child == 0) {
        speckv_pool *q = nullptr;
        if (speckv_pool_open(("file:" + path).c_str(), nullptr, &q) != SPECKV_OK) _exit(2);
        speckv_handle x;
        if (speckv_translate(q, 1, 10, 0, 20, &x, nullptr) != SPECKV_OK || x != b) _exit(3);
        if (speckv_free(q, b) != SPECKV_OK) _exit(4);
        speckv_hint hh{};
        hh.struct_size = sizeof hh;
        hh.tenant = 1, hh.request = 10, hh.layer = 0, hh.token_pos = 0, hh.token_count = 16;
        if (speckv_alloc(q, 100, 0, &hh, &x) != SPECKV_OK) _exit(5);
        speckv_pool_close(q);
        _exit(0);
    }
    int st;
    REQUIRE(waitpid(child, &st, 0) == child);
    REQUIRE(WIFEXITED(st));
    REQUIRE(WEXITSTATUS(st) == 0);
    REQUIRE(speckv_translate(p, 1, 10, 0, 20, &h, nullptr) == SPECKV_ENOENT);
    REQUIRE(speckv_translate(p, 1, 10, 0, 3, &h, nullptr) == SPECKV_OK);  // the child's new block
    CHECK(h != a);
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
    // The index is derived state: check verifies it, recovery rebuilds it.
    std::unique_ptr<speckv::Pool> ro;
    REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
    speckv::CheckReport rep;
    ro->check(&rep);
    for (auto &pr : rep.problems) MESSAGE(pr);
    CHECK(rep.problems.empty());
    std::unique_ptr<speckv::Pool> rw;
    REQUIRE(speckv::Pool::open("file:" + path, speckv::Config(), &rw) == SPECKV_OK);
    REQUIRE(rw->repair() == SPECKV_OK);
    uint64_t hh;
    CHECK(rw->translate(1, 10, 1, 0, &hh, nullptr) == SPECKV_OK);
    CHECK(hh == c);
}

TEST_CASE("config: prefetch and TLB values are checked at set and at open") {
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    CHECK(speckv_config_set_int(c, "prefetch.k_max", 0) == SPECKV_EINVAL);
    CHECK(speckv_config_set_int(c, "prefetch.kappa_milli", 0) == SPECKV_EINVAL);
    CHECK(speckv_config_set_int(c, "prefetch.theta_milli", 1001) == SPECKV_EINVAL);
    REQUIRE(speckv_config_set_int(c, "prefetch.k_min", 9) == SPECKV_OK);
    REQUIRE(speckv_config_set_int(c, "prefetch.k_max", 4) == SPECKV_OK);
    speckv_pool *p = nullptr;
    CHECK(speckv_pool_open("anon:?size=8M", c, &p) == SPECKV_EINVAL);  // k_min > k_max: refused, not clamped
    CHECK(std::string(speckv_errmsg()).find("prefetch.k_min") != std::string::npos);
    REQUIRE(speckv_config_set_int(c, "prefetch.k_min", 1) == SPECKV_OK);
    REQUIRE(speckv_config_set_int(c, "tlb.entries", 100) == SPECKV_OK);
    CHECK(speckv_pool_open("anon:?size=8M", c, &p) == SPECKV_EINVAL);  // not a power of two
    REQUIRE(speckv_config_set_int(c, "tlb.entries", 128) == SPECKV_OK);
    REQUIRE(speckv_config_set_int(c, "prefetch.l2_bytes", 4096) == SPECKV_OK);
    CHECK(speckv_pool_open("anon:?size=8M", c, &p) == SPECKV_EINVAL);  // fewer than two pages
    REQUIRE(speckv_config_set_int(c, "prefetch.l2_bytes", 1 << 20) == SPECKV_OK);
    REQUIRE(speckv_pool_open("anon:?size=8M", c, &p) == SPECKV_OK);
    speckv_pool_close(p);
    speckv_config_free(c);
}

namespace {
// A decode loop: R requests round-robin, L layers each, one block (npages
// pages) per (request, layer); before each layer the engine hints the next
// unit it will run. Returns the stats; every read is checked byte for byte.
speckv_pool_stats decode(bool prefetch, int steps, int *bad, int policy = 0) {
    const int R = 4, L = 6, npages = 2;
    speckv_pool *p = open_with("anon:?size=16M", {{"cache.bytes", 0},  // no L1: every read is L2 or L3
                                                 {"prefetch.enable", prefetch ? 1 : 0},
                                                 {"prefetch.policy", policy},
                                                 {"prefetch.l2_bytes", 16 * 4096}});  // a third of the 48-page working set
    std::vector<speckv_handle> blk(R * L);
    for (int r = 0; r < R; r++)
        for (int l = 0; l < L; l++) blk[r * L + l] = kv_block(p, 0, 100 + r, l, 0, 16, npages * 4096);
    std::vector<unsigned char> got(npages * 4096), want(npages * 4096);
    for (int s = 0; s < steps; s++)
        for (int r = 0; r < R; r++)
            for (int l = 0; l < L; l++) {
                // The next unit in the batch order.
                int nr = l + 1 < L ? r : (r + 1) % R, nl = (l + 1) % L;
                speckv_hint h{};
                h.struct_size = sizeof h;
                h.request = 100 + nr;
                h.layer = nl;
                h.token_pos = 16;  // decoding token 16: the blocks [0, 16) are history
                REQUIRE(speckv_prefetch(p, &h) == SPECKV_OK);
                usleep(300);  // the layer's compute, during which the prefetch lands
                REQUIRE(speckv_access(p, blk[r * L + l], 0, got.data(), got.size(), 0) == SPECKV_OK);
                for (size_t i = 0; i < want.size(); i++) want[i] = static_cast<unsigned char>((100 + r) * 31 + l * 7 + i);
                *bad += got != want;
            }
    speckv_pool_stats st = stats_of(p);
    speckv_pool_close(p);
    return st;
}
}  // namespace

TEST_CASE("the prefetcher learns a decode loop: reads come from L2, bytes always right") {
    int bad = 0;
    speckv_pool_stats off = decode(false, 20, &bad);
    speckv_pool_stats on = decode(true, 20, &bad);
    CHECK(bad == 0);
    CHECK(off.l2_hits == 0);
    CHECK(off.prefetch_pages == 0);
    CHECK(off.sync_reads == 20 * 4 * 6 * 2);
    double hit = double(on.l2_hits) / double(on.l2_hits + on.sync_reads);
    double precision = on.prefetch_used + on.prefetch_wasted
                           ? double(on.prefetch_used) / double(on.prefetch_used + on.prefetch_wasted)
                           : 0.0;
    MESSAGE("hit rate ", hit, ", precision ", precision, ", prefetched ", on.prefetch_pages, " pages, beta ",
            on.prefetch_beta_ppm / 1e6, ", depth ", on.prefetch_depth);
    CHECK(on.prefetch_pages > 0);
    CHECK(on.l2_hits > 0);
    CHECK(hit > 0.5);        // the loop is perfectly regular: most reads should be prefetched
    CHECK(precision > 0.5);
    CHECK(on.l2_hits + on.sync_reads == 20 * 4 * 6 * 2);  // every page read once, from somewhere
    // The hinted policy fetches exactly the named unit: with these hints
    // (the true next unit) it is the oracle the learned policy is held to.
    speckv_pool_stats oracle = decode(true, 20, &bad, 1);
    CHECK(bad == 0);
    double ohit = double(oracle.l2_hits) / double(oracle.l2_hits + oracle.sync_reads);
    MESSAGE("hinted (oracle) hit rate ", ohit);
    CHECK(ohit > 0.5);
}

TEST_CASE("prefetch hints for unknown requests or freed blocks are ignored and counted") {
    speckv_pool *p = open_with("anon:?size=8M", {});
    speckv_hint h{};
    h.struct_size = sizeof h;
    h.request = 424242;
    h.layer = 3;
    for (int i = 0; i < 5; i++) REQUIRE(speckv_prefetch(p, &h) == SPECKV_OK);
    speckv_handle b = kv_block(p, 0, 7, 0, 0, 16, 4096);
    REQUIRE(speckv_free(p, b) == SPECKV_OK);
    h.request = 7;
    h.layer = 0;
    REQUIRE(speckv_prefetch(p, &h) == SPECKV_OK);
    speckv_pool_stats s{};
    for (int i = 0; i < 200; i++) {  // the worker is asynchronous
        s = stats_of(p);
        if (s.prefetch_ignored >= 6) break;
        usleep(5000);
    }
    CHECK(s.prefetch_hints == 6);
    CHECK(s.prefetch_ignored >= 6);
    CHECK(s.prefetch_pages == 0);
    h.struct_size = 3;
    CHECK(speckv_prefetch(p, &h) == SPECKV_ESTRUCT);
    CHECK(speckv_prefetch(p, nullptr) == SPECKV_EINVAL);
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
}

TEST_CASE("a fork() child closing an inherited pool handle leaves the parent attached and its prefetcher alone") {
    std::string path = fresh_pool("forkclose");
    speckv_pool *p = open_with("file:" + path + "?size=8M", {});
    speckv_handle b = kv_block(p, 0, 1, 0, 0, 16, 4096);
    speckv_hint h{};
    h.struct_size = sizeof h;
    h.request = 1;
    REQUIRE(speckv_prefetch(p, &h) == SPECKV_OK);  // the prefetch thread runs in the parent
    pid_t child = fork();
    if (child == 0) _exit(speckv_pool_close(p) == SPECKV_OK ? 0 : 1);  // no join of a thread it lacks
    int st;
    REQUIRE(waitpid(child, &st, 0) == child);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    speckv_pool_stats s = stats_of(p);
    CHECK(s.attached == 1);  // the child did not free the parent's attach record
    std::vector<unsigned char> got(4096);
    CHECK(speckv_access(p, b, 0, got.data(), got.size(), 0) == SPECKV_OK);
    REQUIRE(speckv_prefetch(p, &h) == SPECKV_OK);
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
}
