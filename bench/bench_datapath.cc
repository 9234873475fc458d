// SPDX-License-Identifier: Apache-2.0
// The data path across processes (issue 27), through the public C ABI only,
// beside a plain file in /dev/shm and memcpy, in the same run:
//   ./build/release/bench/bench_datapath [--quick] [--bytes N] [--repeats R] [--dir D] [--pool-dir P]
//                                        [--set KEY=VALUE]... [--index [--index-max N] [--no-copy]]
// Per block size (4 KiB, 64 KiB, 512 KiB, 2 MiB) and repetition, with the
// order of the contenders alternated between repetitions:
//   memcpy      one process copies pass-bytes from a cold source, block by block
//   pwrite      one process writes the blocks into a new /dev/shm file
//               (allocated ahead with posix_fallocate, as a pool file is)
//   pread       another process reads them back: first pass, then again (warm)
//   publish     one process alloc + write + publish each block into a new pool
//   access      another process (fresh attach) lookup + speckv_access copy-out,
//               first pass, then again (warm)
//   pin         the same process: lookup + pin + unpin, after the two copy passes
//               (each page's CRC32C is checked unless the process's cache holds
//               it), then again (an engine re-pinning what it pinned: the
//               pages were checked at the first pin)
// Each row: GB/s of the pass (bytes / wall time) and p50/p99 of one operation,
// each the median over the repetitions. Every buffer of the bench's own (the
// writers' sources, the readers' destinations, the latency arrays) is faulted
// in before its pass is timed, alike for every column; the minor page faults
// taken inside each timed pass are counted (getrusage) and printed per MiB,
// so a fault left in a column shows as that column's, not the bench's. --index adds the hash index under
// adversarial hashes (same first 8 bytes) against random ones.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "speckv.h"
#include "bench_util.h"

namespace {

uint64_t now_ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

[[noreturn]] void die(const char *what, int rc) {
    std::fprintf(stderr, "bench_datapath: %s: %s: %s\n", what, speckv_strerror(rc), speckv_errmsg());
    std::_Exit(1);
}
[[noreturn]] void die_errno(const char *what) {
    std::perror(what);
    std::_Exit(1);
}

uint64_t splitmix(uint64_t &s) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Block i's hash: random bytes from (seed, i); `adversarial` keeps the first
// 8 bytes the same for every block.
void hash_of(uint64_t seed, uint64_t i, bool adversarial, uint8_t out[SPECKV_HASH_BYTES]) {
    uint64_t s = seed * 0x100000001B3ull ^ i;
    for (int k = 0; k < 4; k++) {
        uint64_t v = splitmix(s);
        std::memcpy(out + 8 * k, &v, 8);
    }
    if (adversarial) std::memset(out, 0xA5, 8);
}

// Faults in every page of [p, p + n) for writing (MADV_POPULATE_WRITE where
// the kernel has it, else a store per 4 KiB page), so that no timed pass pays
// for the bench's own first touches.
void pretouch(void *p, size_t n) {
#ifdef MADV_POPULATE_WRITE
    if (madvise(p, n, MADV_POPULATE_WRITE) == 0) return;
#endif
    auto *b = static_cast<volatile unsigned char *>(p);
    for (size_t i = 0; i < n; i += 4096) b[i] = 0;
    if (n) b[n - 1] = 0;
}

// A private buffer of n bytes, 2 MiB aligned, every page faulted in.
unsigned char *aligned(size_t n) {
    void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) die_errno("mmap");
    pretouch(p, n);
    return static_cast<unsigned char *>(p);
}

long minor_faults() {
    rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

// What one measured pass reports (in a shared mapping: children fill it).
struct Pass {
    double gbps, p50, p99;
    double faults_per_mib;  // minor page faults taken inside the timed pass
};

enum Row : int {
    kMemcpy,
    kPwrite,
    kPreadFirst,
    kPreadWarm,
    kPublish,
    kAccessFirst,
    kAccessWarm,
    kPin,
    kPinAgain,
    kAttach,
    kRows
};
const char *kRowName[kRows] = {
    "memcpy, cold source",
    "pwrite to a /dev/shm file",
    "pread, other process, first pass",
    "pread, other process, warm",
    "speckv alloc+write+publish",
    "speckv lookup+access, first pass",
    "speckv lookup+access, warm",
    "speckv lookup+pin+unpin, first pin",
    "speckv lookup+pin+unpin, again",
    "speckv attach (pool_open), reader",
};

// Times `n` operations; op(i) does one. Fills *out.
template <typename F>
void timed_pass(size_t n, size_t bytes_each, std::vector<uint64_t> &lat, Pass *out, F &&op) {
    lat.assign(n, 0);
    pretouch(lat.data(), n * sizeof lat[0]);
    const long f0 = minor_faults();
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
        uint64_t a = now_ns();
        op(i);
        lat[i] = now_ns() - a;
    }
    uint64_t t1 = now_ns();
    const long f1 = minor_faults();
    std::sort(lat.begin(), lat.end());
    out->faults_per_mib = double(f1 - f0) / (double(n) * double(bytes_each) / double(1 << 20));
    out->gbps = double(n) * double(bytes_each) / double(t1 - t0);
    out->p50 = double(lat[n / 2]) / 1e3;
    out->p99 = double(lat[std::min(n - 1, n * 99 / 100)]) / 1e3;
}

struct Setup {
    std::string dir = "/dev/shm";
    std::string pool_dir;  // where the pools go; empty: dir (e.g. a hugetlbfs mount, which takes no pwrite)
    std::vector<std::pair<std::string, std::string>> keys;  // --set KEY=VALUE: config of every speckv process
    size_t pass_bytes = size_t(256) << 20;
    size_t src_bytes = size_t(64) << 20;  // the writers' source arena
    int repeats = 7;
};

template <typename F>
void in_child(F &&f) {
    pid_t pid = fork();
    if (pid < 0) die_errno("fork");
    if (pid == 0) {
        f();
        std::_Exit(0);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) < 0) die_errno("waitpid");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        std::fprintf(stderr, "bench_datapath: a child failed (status %d)\n", st);
        std::exit(1);
    }
}

// The config every speckv process of the run opens its pool with.
speckv_config *config_of(const Setup &s) {
    speckv_config *c = nullptr;
    if (int rc = speckv_config_new(&c); rc) die("config_new", rc);
    for (const auto &[k, v] : s.keys)
        if (int rc = speckv_config_set_str(c, k.c_str(), v.c_str()); rc) die(k.c_str(), rc);
    return c;
}

std::string pool_uri(const std::string &path, size_t pass_bytes, size_t nblocks) {
    // Room for the blocks plus the pool's own metadata; a slot per block.
    size_t size = pass_bytes + pass_bytes / 4 + (size_t(64) << 20);
    return "file:" + path + "?size=" + std::to_string(size) + "&max_blocks=" + std::to_string(nblocks + 64);
}

void run_memcpy(const Setup &s, size_t bs, Pass *out) {
    in_child([&] {
        size_t n = s.pass_bytes / bs;
        unsigned char *src = aligned(s.pass_bytes), *dst = aligned(bs);
        for (size_t i = 0; i < s.pass_bytes; i += 64) src[i] = static_cast<unsigned char>(i >> 6);
        std::vector<uint64_t> lat;
        timed_pass(n, bs, lat, out, [&](size_t i) { std::memcpy(dst, src + i * bs, bs); });
        volatile unsigned char sink = dst[bs - 1];
        (void)sink;
    });
}

void fill_source(unsigned char *src, size_t n) {
    uint64_t s = 42;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t v = splitmix(s);
        std::memcpy(src + i, &v, 8);
    }
}

void run_file(const Setup &s, size_t bs, Pass *out) {
    const std::string path = s.dir + "/bench_datapath." + std::to_string(getpid()) + ".file";
    const size_t n = s.pass_bytes / bs;
    in_child([&] {
        unsigned char *src = aligned(s.src_bytes);
        fill_source(src, s.src_bytes);
        int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR, 0600);
        if (fd < 0) die_errno("open");
        // Allocated ahead, as a pool file is (posix_fallocate at creation):
        // both sides then copy into memory that exists.
        if (int e = posix_fallocate(fd, 0, off_t(s.pass_bytes)); e != 0) {
            errno = e;
            die_errno("posix_fallocate");
        }
        std::vector<uint64_t> lat;
        timed_pass(n, bs, lat, &out[kPwrite], [&](size_t i) {
            if (pwrite(fd, src + (i * bs) % s.src_bytes, bs, off_t(i * bs)) != ssize_t(bs)) die_errno("pwrite");
        });
        close(fd);
    });
    in_child([&] {
        unsigned char *dst = aligned(bs);
        int fd = open(path.c_str(), O_RDONLY);
        if (fd < 0) die_errno("open");
        std::vector<uint64_t> lat;
        for (int k : {kPreadFirst, kPreadWarm})
            timed_pass(n, bs, lat, &out[k], [&](size_t i) {
                if (pread(fd, dst, bs, off_t(i * bs)) != ssize_t(bs)) die_errno("pread");
            });
        close(fd);
    });
    unlink(path.c_str());
}

void run_speckv(const Setup &s, size_t bs, uint64_t seed, Pass *out) {
    const std::string path = (s.pool_dir.empty() ? s.dir : s.pool_dir) + "/bench_datapath." + std::to_string(getpid()) + ".pool";
    const size_t n = s.pass_bytes / bs;
    const std::string uri = pool_uri(path, s.pass_bytes, n);
    unlink(path.c_str());
    in_child([&] {
        unsigned char *src = aligned(s.src_bytes);
        fill_source(src, s.src_bytes);
        std::vector<std::array<uint8_t, SPECKV_HASH_BYTES>> hashes(n);
        for (size_t i = 0; i < n; i++) hash_of(seed, i, false, hashes[i].data());
        speckv_pool *p = nullptr;
        if (int rc = speckv_pool_open(uri.c_str(), config_of(s), &p); rc) die("pool_open (writer)", rc);
        std::vector<uint64_t> lat;
        timed_pass(n, bs, lat, &out[kPublish], [&](size_t i) {
            speckv_handle h;
            if (int rc = speckv_alloc(p, bs, SPECKV_DTYPE_OPAQUE, nullptr, &h); rc) die("alloc", rc);
            if (int rc = speckv_write(p, h, 0, src + (i * bs) % s.src_bytes, bs); rc) die("write", rc);
            if (int rc = speckv_publish(p, h, hashes[i].data(), nullptr); rc) die("publish", rc);
        });
        speckv_pool_close(p);
    });
    in_child([&] {
        unsigned char *dst = aligned(bs);
        std::vector<std::array<uint8_t, SPECKV_HASH_BYTES>> hashes(n);
        for (size_t i = 0; i < n; i++) hash_of(seed, i, false, hashes[i].data());
        speckv_pool *p = nullptr;
        speckv_config *cfg = config_of(s);
        const uint64_t t0 = now_ns();
        if (int rc = speckv_pool_open(uri.c_str(), cfg, &p); rc) die("pool_open (reader)", rc);
        const double open_ns = double(now_ns() - t0);
        // GB/s here: the pass's bytes over the time to attach; p50 = p99 = that time.
        out[kAttach] = Pass{double(s.pass_bytes) / open_ns, open_ns / 1e3, open_ns / 1e3, 0};
        std::vector<uint64_t> lat;
        for (int k : {kAccessFirst, kAccessWarm})
            timed_pass(n, bs, lat, &out[k], [&](size_t i) {
                speckv_handle h;
                if (int rc = speckv_lookup(p, 0, hashes[i].data(), &h); rc) die("lookup", rc);
                if (int rc = speckv_access(p, h, 0, dst, bs, 0); rc) die("access", rc);
                if (int rc = speckv_free(p, h); rc) die("free (reference)", rc);
            });
        for (int k : {kPin, kPinAgain})
            timed_pass(n, bs, lat, &out[k], [&](size_t i) {
                speckv_handle h;
                const void *ptr;
                size_t len;
                if (int rc = speckv_lookup(p, 0, hashes[i].data(), &h); rc) die("lookup", rc);
                if (int rc = speckv_pin(p, h, &ptr, &len); rc) die("pin", rc);
                if (int rc = speckv_unpin(p, h); rc) die("unpin", rc);
                if (int rc = speckv_free(p, h); rc) die("free (reference)", rc);
            });
        speckv_pool_close(p);
    });
    unlink(path.c_str());
}

// The hash index: publish p50 while filling a pool to `nblocks` blocks of
// one page each (allocated, never written: an anon: pool's untouched pages
// cost no memory), random hashes against hashes sharing their first 8 bytes.
void run_index(size_t nblocks, bool adversarial, Pass *result) {
    // The child reports through a shared page.
    auto *out = static_cast<Pass *>(mmap(nullptr, sizeof(Pass), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (out == MAP_FAILED) die_errno("mmap");
    in_child([&] {
        const size_t bs = 4096;
        size_t size = nblocks * bs + nblocks * 512 + (size_t(64) << 20);
        size = (size + bs - 1) / bs * bs;
        std::string uri = "anon:?size=" + std::to_string(size) + "&max_blocks=" + std::to_string(nblocks + 64);
        speckv_pool *p = nullptr;
        if (int rc = speckv_pool_open(uri.c_str(), nullptr, &p); rc) die("pool_open (index)", rc);
        std::vector<speckv_handle> hs(nblocks);
        for (size_t i = 0; i < nblocks; i++)
            if (int rc = speckv_alloc(p, bs, SPECKV_DTYPE_OPAQUE, nullptr, &hs[i]); rc) die("alloc (index)", rc);
        std::vector<uint64_t> lat(nblocks);
        uint8_t h[SPECKV_HASH_BYTES];
        uint64_t t0 = now_ns();
        for (size_t i = 0; i < nblocks; i++) {
            hash_of(7, i, adversarial, h);
            uint64_t a = now_ns();
            if (int rc = speckv_publish(p, hs[i], h, nullptr); rc) die("publish (index)", rc);
            lat[i] = now_ns() - a;
        }
        uint64_t t1 = now_ns();
        // The last tenth: the index nearly full.
        std::vector<uint64_t> tail(lat.end() - std::max<size_t>(1, nblocks / 10), lat.end());
        std::sort(tail.begin(), tail.end());
        out->p50 = double(tail[tail.size() / 2]) / 1e3;
        out->p99 = double(tail[std::min(tail.size() - 1, tail.size() * 99 / 100)]) / 1e3;
        out->gbps = double(t1 - t0) / double(nblocks) / 1e3;  // mean µs per publish over the fill
        speckv_pool_close(p);
    });
    *result = *out;
    munmap(out, sizeof(Pass));
}

double med(std::vector<double> v) { return bench::median(std::move(v)); }

std::string cpu_flags() {
    FILE *f = std::fopen("/proc/cpuinfo", "r");
    std::string out;
    if (!f) return out;
    char line[8192];
    while (std::fgets(line, sizeof line, f)) {
        if (std::strncmp(line, "flags", 5) != 0) continue;
        for (const char *want : {"sse4_2", "pclmulqdq", "avx2", "vpclmulqdq", "avx512f", "avx512bw", "avx512vl"}) {
            std::string w = std::string(" ") + want;
            const char *hit = std::strstr(line, w.c_str());
            if (hit && (hit[w.size()] == ' ' || hit[w.size()] == '\n')) out += std::string(out.empty() ? "" : " ") + want;
        }
        break;
    }
    std::fclose(f);
    return out;
}

}  // namespace

int main(int argc, char **argv) {
    Setup s;
    bool index = false, quick = false, copy = true;
    size_t index_max = 1000000;
    std::vector<std::string> sets;
    bool no_copy = false;
    CLI::App app{"The data path beside pwrite/pread and memcpy (bench/README.md)"};
    app.add_flag("--quick", quick, "a short smoke run (CTest bench_datapath_quick)");
    app.add_option("--bytes", s.pass_bytes, "bytes per pass");
    app.add_option("--repeats", s.repeats, "repeats (medians)")->check(CLI::Range(1, 1 << 20));
    app.add_option("--dir", s.dir, "directory for the file pools and the plain files");
    app.add_option("--pool-dir", s.pool_dir, "directory for the pools only (default --dir), e.g. a hugetlbfs mount");
    app.add_option("--set", sets, "a config key for speckv's pools, KEY=VALUE (repeatable)")
        ->check([](const std::string &kv) {
            return kv.find('=') == std::string::npos ? "--set wants KEY=VALUE, not '" + kv + "'" : std::string();
        });
    app.add_flag("--index", index, "also measure the hash index (publish/lookup at growing fills)");
    app.add_option("--index-max", index_max, "the largest index fill (a library with long chains is quadratic)");
    app.add_flag("--no-copy", no_copy, "the index only");
    CLI11_PARSE(app, argc, argv);
    copy = !no_copy;
    for (const std::string &kv : sets) {
        size_t eq = kv.find('=');
        s.keys.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    if (quick) {
        s.pass_bytes = size_t(8) << 20;
        s.repeats = 1;
    }
    const std::vector<size_t> sizes = {size_t(4) << 10, size_t(64) << 10, size_t(512) << 10, size_t(2) << 20};
    if (s.pass_bytes < sizes.back()) s.pass_bytes = sizes.back();
    s.src_bytes = std::min(s.src_bytes, s.pass_bytes);

    // [rep][size][row], filled by the children.
    const size_t cells = size_t(s.repeats) * sizes.size() * kRows;
    auto *res = static_cast<Pass *>(
        mmap(nullptr, cells * sizeof(Pass), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (res == MAP_FAILED) die_errno("mmap");
    for (int r = 0; r < (copy ? s.repeats : 0); r++)
        for (size_t z = 0; z < sizes.size(); z++) {
            Pass *o = res + (size_t(r) * sizes.size() + z) * kRows;
            // Alternate who goes first.
            int order[3] = {0, 1, 2};
            std::rotate(order, order + (r % 3), order + 3);
            for (int w : order) {
                if (w == 0) run_memcpy(s, sizes[z], &o[kMemcpy]);
                if (w == 1) run_file(s, sizes[z], o);
                if (w == 2) run_speckv(s, sizes[z], uint64_t(r) * 16 + z, o);
            }
        }

    std::printf("bench_datapath: %s; %s\n", bench::cpu_name().c_str(), cpu_flags().c_str());
    if (copy) {
    std::printf("%zu MiB per pass, %d repetition(s), medians; GB/s of the pass, p50/p99 us per operation; config:",
                s.pass_bytes >> 20, s.repeats);
    if (s.keys.empty()) std::printf(" defaults");
    for (const auto &[k, v] : s.keys) std::printf(" %s=%s", k.c_str(), v.c_str());
    std::printf("; files in %s, pools in %s", s.dir.c_str(), (s.pool_dir.empty() ? s.dir : s.pool_dir).c_str());
    std::printf("\n\n");
    std::printf("%-36s", "path");
    for (size_t bs : sizes) std::printf(" | %6zu KiB: GB/s  p50    p99 ", bs >> 10);
    std::printf("\n");
    double g[kRows][4] = {};
    for (int k = 0; k < kRows; k++) {
        std::printf("%-36s", kRowName[k]);
        for (size_t z = 0; z < sizes.size(); z++) {
            std::vector<double> gb, p50, p99;
            for (int r = 0; r < s.repeats; r++) {
                const Pass &c = res[(size_t(r) * sizes.size() + z) * kRows + k];
                gb.push_back(c.gbps);
                p50.push_back(c.p50);
                p99.push_back(c.p99);
            }
            g[k][z] = med(gb);
            std::printf(" | %15.2f %6.1f %7.1f", g[k][z], med(p50), med(p99));
        }
        std::printf("\n");
    }
    std::printf("\nratios (targets: publish >= 0.9x pwrite, copy-out >= 0.9x pread, pin >= 0.9x memcpy,\n"
                "first pass >= 0.8x warm)\n");
    struct R {
        const char *name;
        int a, b;
    } ratios[] = {{"publish / pwrite", kPublish, kPwrite},
                  {"access warm / pread warm", kAccessWarm, kPreadWarm},
                  {"access first / pread first", kAccessFirst, kPreadFirst},
                  {"pin / memcpy", kPin, kMemcpy},
                  {"pin again / memcpy", kPinAgain, kMemcpy},
                  {"access first / access warm", kAccessFirst, kAccessWarm}};
    for (const R &q : ratios) {
        std::printf("%-36s", q.name);
        for (size_t z = 0; z < sizes.size(); z++) std::printf(" | %15.2fx %14s", g[q.a][z] / g[q.b][z], "");
        std::printf("\n");
    }
    std::printf("\nminor page faults per MiB inside the timed pass (medians; 256 = one per 4 KiB page;\n"
                "the bench's own buffers are faulted in before timing)\n");
    for (int k = 0; k < kAttach; k++) {
        std::printf("%-36s", kRowName[k]);
        for (size_t z = 0; z < sizes.size(); z++) {
            std::vector<double> f;
            for (int r = 0; r < s.repeats; r++) f.push_back(res[(size_t(r) * sizes.size() + z) * kRows + k].faults_per_mib);
            std::printf(" | %15.1f %14s", med(f), "");
        }
        std::printf("\n");
    }
    }

    if (index) {
        std::printf("\nhash index: publish while filling a pool (one-page blocks, never written); "
                    "p50/p99 us over the last tenth, mean us over the fill\n");
        std::vector<size_t> fills = {std::min<size_t>(16000, index_max)};
        if (size_t big = std::min(index_max, quick ? size_t(100000) : size_t(1000000)); big > fills[0]) fills.push_back(big);
        for (size_t nb : fills)
            for (bool adv : {false, true}) {
                std::vector<double> p50, p99, mean;
                for (int r = 0; r < (quick ? 1 : 3); r++) {
                    Pass o{};
                    run_index(nb, adv, &o);
                    p50.push_back(o.p50);
                    p99.push_back(o.p99);
                    mean.push_back(o.gbps);
                }
                std::printf("%8zu blocks, %-28s p50 %8.2f  p99 %8.2f  mean %8.2f\n", nb,
                            adv ? "adversarial (same 8 bytes)" : "random hashes", med(p50), med(p99), med(mean));
            }
    }
    return 0;
}
