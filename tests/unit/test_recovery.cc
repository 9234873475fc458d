// SPDX-License-Identifier: Apache-2.0
// Crash consistency: writers are SIGKILLed at random instants; the next open
// must recover a pool that `check` finds clean, with every block readable.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "pool/pool.h"
#include "pool/pool_format.h"
#include "speckv.h"
#include "testutil.h"

namespace {

// Page-sized content derived from (handle, page index): a page is either all
// zero (never written) or exactly this.
void fill(unsigned char *p, uint64_t handle, uint64_t page) {
    uint64_t x = handle * 0x9E3779B97F4A7C15ull + page;
    for (int i = 0; i < 4096; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = static_cast<unsigned char>(x | 1);  // never zero
    }
}

[[noreturn]] void churn(const std::string &path, unsigned seed) {
    speckv_pool *p = nullptr;
    if (speckv_pool_open(("file:" + path).c_str(), nullptr, &p) != SPECKV_OK) _exit(3);
    std::mt19937 rng(seed);
    std::vector<speckv_handle> live;
    std::vector<unsigned char> buf(4096 * 8);
    for (;;) {
        if (live.size() < 40 && rng() % 3) {
            uint64_t np = 1 + rng() % 8;
            speckv_handle h;
            if (speckv_alloc(p, np * 4096, SPECKV_DTYPE_FP16, nullptr, &h) != SPECKV_OK) continue;
            for (uint64_t i = 0; i < np; i++) fill(buf.data() + i * 4096, h, i);
            if (speckv_write(p, h, 0, buf.data(), np * 4096) != SPECKV_OK) _exit(4);
            live.push_back(h);
        } else if (!live.empty()) {
            size_t k = rng() % live.size();
            if (speckv_free(p, live[k]) != SPECKV_OK) _exit(5);
            live.erase(live.begin() + static_cast<long>(k));
        }
    }
}

}  // namespace

TEST_CASE("SIGKILLed writers: the next open recovers a consistent pool") {
    std::string path = fresh_pool("crash");
    {
        speckv_pool *p = nullptr;
        REQUIRE(speckv_pool_open(("file:" + path + "?size=16M").c_str(), nullptr, &p) == SPECKV_OK);
        speckv_pool_close(p);
    }
    std::mt19937 rng(1234);
    for (int round = 0; round < 12; round++) {
        CAPTURE(round);
        pid_t kids[2];
        for (int k = 0; k < 2; k++) {
            kids[k] = fork();
            if (kids[k] == 0) churn(path, static_cast<unsigned>(round * 10 + k));
        }
        timespec ts{0, static_cast<long>(20'000'000 + rng() % 60'000'000)};
        nanosleep(&ts, nullptr);
        for (pid_t k : kids) kill(k, SIGKILL);
        for (pid_t k : kids) {
            int st;
            REQUIRE(waitpid(k, &st, 0) == k);
            REQUIRE(WIFSIGNALED(st));  // died by our hand, not an error exit
        }
        // Open (recovers), then verify every live block page by page.
        speckv_pool *p = nullptr;
        REQUIRE(speckv_pool_open(("file:" + path).c_str(), nullptr, &p) == SPECKV_OK);
        std::unique_ptr<speckv::Pool> ro;
        REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
        speckv::CheckReport rep;
        ro->check(&rep);
        for (auto &s : rep.problems) MESSAGE(s);
        CHECK(rep.problems.empty());
        std::vector<speckv::BlockInfo> blocks;
        ro->list_blocks(&blocks);
        std::vector<unsigned char> got(4096), want(4096);
        for (auto &b : blocks) {
            for (uint64_t i = 0; i < b.npages; i++) {
                REQUIRE(speckv_access(p, b.handle, i * 4096, got.data(), 4096, 0) == SPECKV_OK);
                fill(want.data(), b.handle, i);
                bool zero = std::all_of(got.begin(), got.end(), [](unsigned char c) { return c == 0; });
                // A torn write may leave a page partly new; every written byte is ours.
                size_t foreign = 0;
                for (int j = 0; j < 4096; j++) foreign += got[j] != 0 && got[j] != want[j];
                CHECK((zero || foreign == 0));
            }
        }
        // Free half the blocks so the pool does not fill up over the rounds.
        for (size_t i = 0; i < blocks.size(); i += 2) CHECK(speckv_free(p, blocks[i].handle) == SPECKV_OK);
        speckv_pool_close(p);
    }
}

TEST_CASE("a process that dies holding the pool lock does not wedge the others") {
    std::string path = fresh_pool("deadlock");
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open(("file:" + path + "?size=8M").c_str(), nullptr, &p) == SPECKV_OK);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(path.c_str(), O_RDWR);
        void *m = mmap(nullptr, 8 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        auto *sh = reinterpret_cast<speckv::fmt::SharedHeader *>(static_cast<char *>(m) + speckv::fmt::kSharedOff);
        pthread_mutex_lock(&sh->lock);
        _exit(0);  // dies holding it
    }
    int st;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    speckv_handle h;
    CHECK(speckv_alloc(p, 100, 0, nullptr, &h) == SPECKV_OK);  // EOWNERDEAD -> recovered
    CHECK(speckv_free(p, h) == SPECKV_OK);
    speckv_pool_close(p);
    std::unique_ptr<speckv::Pool> ro;
    REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
    speckv::PoolInfo i;
    ro->info(&i);
    CHECK(i.recoveries >= 1);
}
