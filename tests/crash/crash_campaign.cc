// SPDX-License-Identifier: Apache-2.0
// A randomized crash campaign on one shared pool (issue 25, item 12).
//
// Each round starts writers, publishers, readers and pinners (separate
// processes, through the C ABI), then SIGKILLs them at random instants: some
// in their first milliseconds, most in the middle of whatever call they are
// in (alloc, write — a copy cut off half-way —, publish, lookup, access,
// pin, free). Some rounds add a process that dies holding the pool lock,
// before any change or after clearing the page bitmap (what recovery does
// first), and a process that opens the pool (and so runs recovery) killed
// within a few milliseconds. After every round this process opens the pool
// (recovery), looks up every block a publisher reported published in that
// round, compares every byte, runs `pool check` on the closed pool, and
// resets the pool for the next round.
//
// Usage: crash_campaign DIR [--rounds N] [--procs P] [--seed S] [--ms T]
// Prints "rounds R kills K published P lost L torn T check-problems C
// worker-errors E" and exits 0 only when L, T, C and E are all 0.
// CTest runs a short campaign (label crash); tests/crash/README.md has the
// long run's command.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "pool/pool.h"
#include "pool/pool_format.h"
#include "speckv.h"

namespace {

constexpr uint32_t kKeys = 512;  // distinct published contents: the pool never fills, nothing is evicted

void key_of(uint32_t k, uint8_t out[SPECKV_HASH_BYTES]) {
    std::memset(out, 0, SPECKV_HASH_BYTES);
    std::memcpy(out, &k, sizeof k);
    out[31] = 0xA5;
}

size_t size_of(uint32_t k) { return 1000 + (k * 7919u) % (15 * 4096); }  // 1 KB .. 62 KB: multi-page copies

void content_of(uint32_t k, unsigned char *p, size_t n) {
    uint64_t x = 0x9E3779B97F4A7C15ull * (k + 1);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = static_cast<unsigned char>(x);
    }
}

// Exit codes of a worker that found something wrong (a kill is a signal).
enum { kBadOpen = 20, kWrong = 9, kApi = 21 };

[[noreturn]] void worker(const std::string &uri, const std::string &acks, int role, unsigned seed) {
    speckv_pool *p = nullptr;
    if (speckv_pool_open(uri.c_str(), nullptr, &p) != SPECKV_OK) _exit(kBadOpen);
    const int ack_fd = open(acks.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    std::mt19937 rng(seed);
    std::vector<unsigned char> want(16 * 4096), got(16 * 4096);
    std::vector<speckv_handle> scratch;
    for (;;) {
        const uint32_t k = rng() % kKeys;
        uint8_t key[SPECKV_HASH_BYTES];
        key_of(k, key);
        const size_t n = size_of(k);
        content_of(k, want.data(), n);
        speckv_handle h = 0;
        if (role == 0) {  // writer: unpublished blocks, written and freed (torn copies when killed)
            if (speckv_alloc(p, n, SPECKV_DTYPE_OPAQUE, nullptr, &h) != SPECKV_OK) continue;
            if (speckv_write(p, h, 0, want.data(), n) != SPECKV_OK) _exit(kApi);
            if (speckv_access(p, h, 0, got.data(), n, 0) != SPECKV_OK) _exit(kApi);
            if (std::memcmp(got.data(), want.data(), n) != 0) _exit(kWrong);
            scratch.push_back(h);
            if (scratch.size() > 4) {
                if (speckv_free(p, scratch.front()) != SPECKV_OK) _exit(kApi);
                scratch.erase(scratch.begin());
            }
            continue;
        }
        int rc = speckv_lookup(p, 0, key, &h);
        if (rc == SPECKV_OK) {  // publisher, reader, pinner: every byte of what is found
            if (role == 3) {
                const void *ptr = nullptr;
                size_t len = 0;
                if (speckv_pin(p, h, &ptr, &len) != SPECKV_OK) _exit(kApi);
                if (len != n || std::memcmp(ptr, want.data(), n) != 0) _exit(kWrong);
                if (speckv_unpin(p, h) != SPECKV_OK) _exit(kApi);
            } else {
                if (speckv_access(p, h, 0, got.data(), n, 0) != SPECKV_OK) _exit(kApi);
                if (std::memcmp(got.data(), want.data(), n) != 0) _exit(kWrong);
            }
            if (speckv_free(p, h) != SPECKV_OK) _exit(kApi);  // the reference
            continue;
        }
        if (rc != SPECKV_ENOENT) _exit(kApi);
        if (role != 1) continue;
        if (speckv_alloc(p, n, SPECKV_DTYPE_OPAQUE, nullptr, &h) != SPECKV_OK) continue;
        if (speckv_write(p, h, 0, want.data(), n) != SPECKV_OK) _exit(kApi);
        speckv_handle canon = 0;
        rc = speckv_publish(p, h, key, &canon);
        if (rc == SPECKV_EEXIST) {
            if (speckv_free(p, h) != SPECKV_OK) _exit(kApi);
        } else if (rc != SPECKV_OK) {
            _exit(kApi);
        }
        // Reported published: from here on it must survive every crash.
        if (ack_fd >= 0 && write(ack_fd, &k, sizeof k) != sizeof k) _exit(kApi);
        if (speckv_free(p, canon) != SPECKV_OK) _exit(kApi);
    }
}

// Dies holding the pool lock; clear_bitmap: after a change (recovery's first step).
[[noreturn]] void lock_holder(const std::string &path, bool clear_bitmap) {
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) _exit(kBadOpen);
    speckv::fmt::Superblock s;
    if (pread(fd, &s, sizeof s, 0) != sizeof s) _exit(kBadOpen);
    auto *m = static_cast<unsigned char *>(mmap(nullptr, s.pool_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    if (m == MAP_FAILED) _exit(kBadOpen);
    auto *sh = reinterpret_cast<speckv::fmt::SharedHeader *>(m + s.shared_off);
    int e = pthread_mutex_lock(&sh->lock);
    if (e == EOWNERDEAD) pthread_mutex_consistent(&sh->lock);  // and then die again, mid-"recovery"
    if (clear_bitmap) std::memset(m + s.bitmap_off, 0, (s.n_pages + 63) / 64 * 8);
    _exit(0);
}

void sleep_us(long us) {
    timespec ts{us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, nullptr);
}

}  // namespace

int main(int argc, char **argv) {
    std::string dir;
    long rounds = 20, procs = 4, ms = 40, damage = 0;
    unsigned long seed = static_cast<unsigned long>(time(nullptr));
    CLI::App app{"crash campaign: processes killed mid-operation on one pool, then checked", "crash_campaign"};
    app.add_option("DIR", dir, "directory of the pool")->required();
    app.add_option("--rounds", rounds, "kill rounds")->check(CLI::PositiveNumber);
    app.add_option("--procs", procs, "processes per round")->check(CLI::Range(2L, 1024L));
    app.add_option("--seed", seed, "random seed (default: the time)");
    app.add_option("--ms", ms, "most milliseconds before the kill")->check(CLI::PositiveNumber);
    app.add_option("--damage", damage, "self-test: flip a byte of one published block");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e) ? 2 : 0;
    }
    mkdir(dir.c_str(), 0700);
    std::printf("seed %lu\n", seed);
    const std::string path = dir + "/campaign-" + std::to_string(getpid()) + ".pool";
    const std::string acks = path + ".acks";
    const std::string uri = "file:" + path + "?size=64M";
    unlink(path.c_str());
    {
        int fd = open(acks.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0) return 2;
        close(fd);
        speckv_pool *p = nullptr;
        if (speckv_pool_open(uri.c_str(), nullptr, &p) != SPECKV_OK) {
            std::fprintf(stderr, "create: %s\n", speckv_errmsg());
            return 2;
        }
        speckv_pool_close(p);
    }
    std::mt19937_64 rng(seed);
    uint64_t kills = 0, lost = 0, torn = 0, problems = 0, errors = 0, published = 0;
    std::vector<unsigned char> want(16 * 4096), got(16 * 4096);
    // After each round: recovery, every byte of every acknowledged publish,
    // `pool check` on the closed pool; then the pool is reset for the next.
    bool damaged = false;
    auto verify = [&](bool damage_one) {
    if (damage_one) {
        pid_t c = fork();
        if (c == 0) {
            speckv_pool *q = nullptr;
            if (speckv_pool_open(uri.c_str(), nullptr, &q) != SPECKV_OK) _exit(1);
            FILE *f = std::fopen(acks.c_str(), "rb");
            uint32_t k;
            if (!f || std::fread(&k, sizeof k, 1, f) != 1) _exit(1);
            uint8_t key[SPECKV_HASH_BYTES];
            key_of(k, key);
            speckv_handle h = 0;
            const void *ptr = nullptr;
            size_t len = 0;
            if (speckv_lookup(q, 0, key, &h) != SPECKV_OK || speckv_pin(q, h, &ptr, &len) != SPECKV_OK) _exit(1);
            const_cast<unsigned char *>(static_cast<const unsigned char *>(ptr))[len / 2] ^= 0x40;
            speckv_unpin(q, h);
            speckv_free(q, h);
            speckv_pool_close(q);
            _exit(0);
        }
        int st = 0;
        waitpid(c, &st, 0);
        damaged = WIFEXITED(st) && WEXITSTATUS(st) == 0;  // else no publish this round: the next one
    }
    speckv_pool *p = nullptr;
    if (speckv_pool_open(uri.c_str(), nullptr, &p) != SPECKV_OK) {
        std::fprintf(stderr, "verifier open: %s\n", speckv_errmsg());
        problems++;
        return;
    }
    std::vector<bool> acked(kKeys, false);
    {
        FILE *f = std::fopen(acks.c_str(), "rb");
        uint32_t k;
        while (f && std::fread(&k, sizeof k, 1, f) == 1) {
            published++;
            if (k < kKeys) acked[k] = true;
        }
        if (f) std::fclose(f);
    }
    for (uint32_t k = 0; k < kKeys; k++) {
        if (!acked[k]) continue;
        uint8_t key[SPECKV_HASH_BYTES];
        key_of(k, key);
        speckv_handle h = 0;
        if (speckv_lookup(p, 0, key, &h) != SPECKV_OK) {
            lost++;
            continue;
        }
        const size_t n = size_of(k);
        content_of(k, want.data(), n);
        if (speckv_access(p, h, 0, got.data(), n, 0) != SPECKV_OK || std::memcmp(got.data(), want.data(), n) != 0)
            torn++;
        speckv_free(p, h);
    }
    speckv_pool_close(p);
    std::unique_ptr<speckv::Pool> ro;
    if (speckv::Pool::open_readonly(path, &ro) != SPECKV_OK) {
        problems++;
    } else {
        speckv::CheckReport rep;
        ro->check(&rep);
        problems += rep.problems.size();
        for (const auto &s : rep.problems) std::fprintf(stderr, "check: %s\n", s.c_str());
    }
    ro.reset();
    if (speckv::Pool::reset_uri("file:" + path) != SPECKV_OK) {
        std::fprintf(stderr, "reset: %s\n", speckv_errmsg());
        problems++;
    }
    int fd = open(acks.c_str(), O_TRUNC | O_WRONLY | O_CLOEXEC);
    if (fd >= 0) close(fd);
    };
    for (long r = 0; r < rounds; r++) {
        std::vector<pid_t> kids;
        for (long i = 0; i < procs; i++) {
            const int role = static_cast<int>(i % 4);  // writer, publisher, reader, pinner
            const unsigned s = static_cast<unsigned>(rng());
            pid_t c = fork();
            if (c == 0) worker(uri, acks, role, s);
            kids.push_back(c);
        }
        // Some rounds: a death holding the lock, before or after a change.
        if (rng() % 3 == 0) {
            const bool change = rng() % 2;
            pid_t c = fork();
            if (c == 0) lock_holder(path, change);
            kids.push_back(c);
        }
        // Fresh processes killed in their first milliseconds, or later, one by one.
        sleep_us(static_cast<long>(rng() % 4 == 0 ? rng() % 2000 : rng() % (ms * 1000)));
        for (pid_t c : kids) {
            if (kill(c, SIGKILL) == 0) kills++;
            sleep_us(static_cast<long>(rng() % 500));
        }
        for (pid_t c : kids) {
            int st = 0;
            waitpid(c, &st, 0);
            if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
                errors++;
                std::fprintf(stderr, "round %ld: pid %d exited %d\n", r, int(c), WEXITSTATUS(st));
            }
        }
        // Kills inside recovery: an opener (it recovers what the round left)
        // killed within a few milliseconds.
        if (rng() % 2 == 0) {
            pid_t c = fork();
            if (c == 0) {
                speckv_pool *p = nullptr;
                if (speckv_pool_open(uri.c_str(), nullptr, &p) == SPECKV_OK) speckv_pool_close(p);
                _exit(0);
            }
            sleep_us(static_cast<long>(rng() % 3000));
            if (kill(c, SIGKILL) == 0) kills++;
            waitpid(c, nullptr, 0);
        }
        verify(damage && !damaged);
    }
    std::printf("rounds %ld kills %llu published %llu lost %llu torn %llu check-problems %llu worker-errors %llu\n",
                rounds, (unsigned long long)kills, (unsigned long long)published, (unsigned long long)lost,
                (unsigned long long)torn, (unsigned long long)problems, (unsigned long long)errors);
    unlink(path.c_str());
    unlink(acks.c_str());
    return lost || torn || problems || errors ? 1 : 0;
}
