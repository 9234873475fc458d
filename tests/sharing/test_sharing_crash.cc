// SPDX-License-Identifier: Apache-2.0
// Crash safety of sharing: worker processes publish, look up, read and
// release blocks of a small key space on one pool while the test SIGKILLs
// them at random instants (mid-alloc, mid-write, mid-publish, holding the
// lock, holding references). The survivors must keep working without a
// restart; at the end every published block must read back byte for byte
// and `check` must find every invariant intact.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "pool/pool.h"
#include "speckv.h"
#include "testutil.h"

namespace {

constexpr uint32_t kKeys = 96;

void key_of(uint32_t s, uint8_t out[SPECKV_HASH_BYTES]) {
    uint32_t tok[8];
    for (int i = 0; i < 8; i++) tok[i] = s * 31 + i;
    speckv_block_hash(SPECKV_HASH_NATIVE, 0, nullptr, tok, 8, nullptr, 0, out);
}

size_t size_of(uint32_t s) { return (1 + s % 4) * 4096 - s; }

void content_of(uint32_t s, unsigned char *p, size_t n) {
    uint64_t x = 0x9E3779B97F4A7C15ull * (s + 1);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = static_cast<unsigned char>(x);
    }
}

[[noreturn]] void worker(const std::string &uri, unsigned seed) {
    speckv_pool *p = nullptr;
    if (speckv_pool_open(uri.c_str(), nullptr, &p) != SPECKV_OK) _exit(20);
    std::mt19937 rng(seed);
    std::vector<speckv_handle> held, scratch;
    std::vector<unsigned char> want(4 * 4096), got(4 * 4096);
    for (;;) {
        // Per-request blocks that are never published: a kill leaves them
        // for recovery to reclaim.
        if (rng() % 4 == 0) {
            speckv_handle h;
            if (speckv_alloc(p, 4096, SPECKV_DTYPE_OPAQUE, nullptr, &h) == SPECKV_OK) scratch.push_back(h);
            if (scratch.size() > 2) {
                if (speckv_free(p, scratch.front()) != SPECKV_OK) _exit(28);
                scratch.erase(scratch.begin());
            }
        }
        uint32_t s = rng() % kKeys;
        uint8_t k[SPECKV_HASH_BYTES];
        key_of(s, k);
        size_t n = size_of(s);
        content_of(s, want.data(), n);
        speckv_handle h = 0;
        int rc = speckv_lookup(p, 0, k, &h);
        if (rc == SPECKV_OK) {
            if (speckv_access(p, h, 0, got.data(), n, 0) != SPECKV_OK) _exit(21);
            if (std::memcmp(got.data(), want.data(), n) != 0) _exit(9);  // a published block changed
            held.push_back(h);
        } else if (rc == SPECKV_ENOENT) {
            rc = speckv_alloc(p, n, SPECKV_DTYPE_OPAQUE, nullptr, &h);
            if (rc == SPECKV_ENOSPC) continue;
            if (rc != SPECKV_OK) _exit(22);
            if (speckv_write(p, h, 0, want.data(), n) != SPECKV_OK) _exit(23);
            speckv_handle canon = 0;
            rc = speckv_publish(p, h, k, &canon);
            if (rc == SPECKV_EEXIST) {
                if (speckv_free(p, h) != SPECKV_OK) _exit(24);
            } else if (rc != SPECKV_OK) {
                _exit(25);
            }
            held.push_back(canon);
        } else {
            _exit(26);
        }
        while (held.size() > 6 || (!held.empty() && rng() % 3 == 0)) {
            size_t i = rng() % held.size();
            if (speckv_free(p, held[i]) != SPECKV_OK) _exit(27);
            held.erase(held.begin() + static_cast<long>(i));
        }
    }
}

}  // namespace

TEST_CASE("SIGKILL at random instants: survivors go on, every published block stays exact") {
    std::string path = fresh_pool("sharecrash");
    std::string uri = "file:" + path;
    {
        speckv_pool *p = nullptr;
        // Small enough that evictions happen: 96 keys do not fit in 64 slots.
        REQUIRE(speckv_pool_open((uri + "?size=4M&max_blocks=64").c_str(), nullptr, &p) == SPECKV_OK);
        REQUIRE(speckv_pool_close(p) == SPECKV_OK);
    }
    std::mt19937 rng(12345);
    constexpr int kWorkers = 3, kKills = 40;
    std::vector<pid_t> pids;
    unsigned next_seed = 1;
    for (int i = 0; i < kWorkers; i++) {
        pid_t c = fork();
        if (c == 0) worker(uri, next_seed);
        next_seed++;
        pids.push_back(c);
    }
    int self_exits = 0;
    for (int k = 0; k < kKills; k++) {
        usleep(2000 + rng() % 30000);
        size_t v = rng() % pids.size();
        kill(pids[v], SIGKILL);
        int st;
        REQUIRE(waitpid(pids[v], &st, 0) == pids[v]);
        if (WIFEXITED(st)) {
            self_exits++;
            FAIL_CHECK("worker exited by itself with code ", WEXITSTATUS(st));
        }
        pid_t c = fork();
        if (c == 0) worker(uri, next_seed);
        next_seed++;
        pids[v] = c;
    }
    for (pid_t c : pids) {
        kill(c, SIGKILL);
        int st;
        waitpid(c, &st, 0);
        if (WIFEXITED(st)) FAIL_CHECK("worker exited by itself with code ", WEXITSTATUS(st));
    }
    CHECK(self_exits == 0);

    // Everyone is dead. The next opener recovers; every published block is exact.
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open(uri.c_str(), nullptr, &p) == SPECKV_OK);
    std::vector<unsigned char> want(4 * 4096), got(4 * 4096);
    int found = 0;
    for (uint32_t s = 0; s < kKeys; s++) {
        uint8_t k[SPECKV_HASH_BYTES];
        key_of(s, k);
        speckv_handle h;
        int rc = speckv_lookup(p, 0, k, &h);
        if (rc == SPECKV_ENOENT) continue;
        REQUIRE(rc == SPECKV_OK);
        found++;
        size_t n = size_of(s);
        content_of(s, want.data(), n);
        REQUIRE(speckv_access(p, h, 0, got.data(), n, 0) == SPECKV_OK);
        CHECK(std::memcmp(got.data(), want.data(), n) == 0);
        speckv_block_meta m{};
        m.struct_size = sizeof m;
        REQUIRE(speckv_block_info(p, h, &m) == SPECKV_OK);
        CHECK(m.bytes == n);
        REQUIRE(speckv_free(p, h) == SPECKV_OK);
    }
    CHECK(found > 0);
    speckv_pool_stats st{};
    st.struct_size = sizeof st;
    REQUIRE(speckv_stats(p, &st) == SPECKV_OK);
    MESSAGE("published blocks found: ", found, ", evictions: ", st.evictions, ", reclaimed: ", st.reclaimed_blocks,
            ", lookups: ", st.lookups, ", hits: ", st.lookup_hits);
    CHECK(st.blocks_published == static_cast<uint64_t>(found));
    CHECK(st.evictions > 0);         // the pool was under pressure
    CHECK(st.reclaimed_blocks > 0);  // killed workers left unpublished blocks
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);

    std::unique_ptr<speckv::Pool> ro;
    REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
    speckv::CheckReport rep;
    ro->check(&rep);
    for (const auto &pr : rep.problems) MESSAGE(pr);
    CHECK(rep.problems.empty());
    std::vector<speckv::BlockInfo> bl;
    ro->list_blocks(&bl);
    for (const auto &b : bl) {
        CHECK(b.published);   // every unpublished block belonged to a dead worker
        CHECK(b.holders == 0);  // references equal live references: none
    }
}
