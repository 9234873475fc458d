// SPDX-License-Identifier: Apache-2.0
// Pool micro-benchmarks through the C ABI, beside memcpy of the same sizes in
// the same run. Prints a table of medians over repeated runs.
//   ./build/release/bench/bench_pool [--repeats N] [--uri URI]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <time.h>
#include <fstream>
#include <string>
#include <vector>

#include "speckv.h"
#include "bench_util.h"

namespace {

using Clock = std::chrono::steady_clock;

// Median ns per op over `repeats` runs of `iters` ops each.
template <typename F>
double median_ns(int repeats, int iters, F &&op) {
    std::vector<double> r;
    for (int k = 0; k < repeats; k++) {
        auto t0 = Clock::now();
        for (int i = 0; i < iters; i++) op(i);
        auto t1 = Clock::now();
        r.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / iters);
    }
    std::sort(r.begin(), r.end());
    return r[r.size() / 2];
}

void die(const char *what, int rc) {
    std::fprintf(stderr, "bench_pool: %s: %s: %s\n", what, speckv_strerror(rc), speckv_errmsg());
    std::exit(1);
}

using bench::cpu_name;

volatile unsigned char g_sink;

struct AlignedBuf {
    explicit AlignedBuf(size_t n) : p(static_cast<unsigned char *>(std::aligned_alloc(4096, n))), n(n) {}
    ~AlignedBuf() { std::free(p); }
    unsigned char *data() { return p; }
    unsigned char &operator[](size_t i) { return p[i]; }
    unsigned char *p;
    size_t n;
};

}  // namespace

// Per-call latency of the resident read paths (issue 5's API targets: p50
// <= 100 ns, p99 <= 500 ns), one call per clock read. The clock read itself
// is measured the same way and printed: subtract it to compare.
uint64_t now() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

template <typename F>
void percentiles(int threads, int calls, F &&op, double *p50, double *p99) {
    std::vector<std::vector<uint32_t>> t(threads);
    std::vector<std::thread> ts;
    for (int k = 0; k < threads; k++)
        ts.emplace_back([&, k] {
            t[k].reserve(calls);
            for (int i = 0; i < calls; i++) {
                uint64_t a = now();
                op(k, i);
                uint64_t b = now();
                t[k].push_back(uint32_t(std::min<uint64_t>(b - a, UINT32_MAX)));
            }
        });
    for (auto &x : ts) x.join();
    std::vector<uint32_t> all;
    for (auto &v : t) all.insert(all.end(), v.begin(), v.end());
    std::sort(all.begin(), all.end());
    *p50 = all[all.size() / 2];
    *p99 = all[std::min(all.size() - 1, all.size() * 99 / 100)];
}

void latency_table(const std::string &uri, int repeats, bool associative) {
    speckv_config *cfg;
    speckv_config_new(&cfg);
    speckv_config_set_int(cfg, "cache.associative", associative ? 1 : 0);
    speckv_pool *p;
    if (int rc = speckv_pool_open(uri.c_str(), cfg, &p); rc) die("open", rc);
    speckv_config_free(cfg);
    std::printf("\nper-call latency, 4 KiB resident block, L1 %s (median over %d runs of 200000 calls per thread)\n",
                associative ? "fully associative (cache.associative = 1, default)" : "direct-mapped (cache.associative = 0)",
                repeats);
    std::printf("%-40s %10s %10s\n", "operation", "p50 ns", "p99 ns");
    const int calls = 200000;
    speckv_handle h[2];
    AlignedBuf src(4096), d0(4096), d1(4096);
    unsigned char *dst[2] = {d0.data(), d1.data()};
    for (int k = 0; k < 2; k++) {
        if (int rc = speckv_alloc(p, 4096, SPECKV_DTYPE_FP16, nullptr, &h[k]); rc) die("alloc", rc);
        if (int rc = speckv_write(p, h[k], 0, src.data(), 4096); rc) die("write", rc);
    }
    auto row = [&](const char *name, int threads, auto op) {
        std::vector<double> a, b;
        for (int r = 0; r < repeats; r++) {
            double x, y;
            percentiles(threads, calls, op, &x, &y);
            a.push_back(x);
            b.push_back(y);
        }
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        std::printf("%-40s %10.0f %10.0f\n", name, a[a.size() / 2], b[b.size() / 2]);
    };
    row("clock read alone (overhead in each row)", 1, [&](int, int) {});
    row("speckv_access, 1 thread", 1, [&](int k, int) {
        if (int rc = speckv_access(p, h[k], 0, dst[k], 4096, 0); rc) die("access", rc);
    });
    row("speckv_pin + speckv_unpin, 1 thread", 1, [&](int k, int) {
        const void *ptr;
        size_t len;
        if (int rc = speckv_pin(p, h[k], &ptr, &len); rc) die("pin", rc);
        if (int rc = speckv_unpin(p, h[k]); rc) die("unpin", rc);
    });
    row("speckv_access, 2 threads (own blocks)", 2, [&](int k, int) {
        if (int rc = speckv_access(p, h[k], 0, dst[k], 4096, 0); rc) die("access", rc);
    });
    row("speckv_pin + speckv_unpin, 2 threads", 2, [&](int k, int) {
        const void *ptr;
        size_t len;
        if (int rc = speckv_pin(p, h[k], &ptr, &len); rc) die("pin", rc);
        if (int rc = speckv_unpin(p, h[k]); rc) die("unpin", rc);
    });
    // Last, because it stays on: once a hint has started the prefetch thread,
    // every read also tells the prefetch engine what it read and from where
    // (note_access, docs/tiers.md §5). A block with coordinates, one hint for it.
    speckv_hint hint{};
    hint.struct_size = sizeof hint;
    hint.request = 1;
    hint.token_count = 16;
    speckv_handle hp;
    if (int rc = speckv_alloc(p, 4096, SPECKV_DTYPE_FP16, &hint, &hp); rc) die("alloc", rc);
    if (int rc = speckv_write(p, hp, 0, src.data(), 4096); rc) die("write", rc);
    if (int rc = speckv_prefetch(p, &hint); rc) die("prefetch", rc);
    row("speckv_access, 1 thread, prefetch thread on", 1, [&](int, int) {
        if (int rc = speckv_access(p, hp, 0, dst[0], 4096, 0); rc) die("access", rc);
    });
    speckv_pool_close(p);
}

int main(int argc, char **argv) {
    int repeats = 15;
    std::string uri = "file:/dev/shm/speckv-bench.pool?size=256M";
    CLI::App app{"speckv pool operations beside memcpy (bench/README.md)", "bench_pool"};
    app.add_option("--repeats", repeats, "runs per cell (median reported)")->check(CLI::PositiveNumber);
    app.add_option("--uri", uri, "pool to measure on");
    CLI11_PARSE(app, argc, argv);
    std::printf("speckv %s pool benchmarks on %s; median of %d runs\n\n", speckv_version_string(), cpu_name().c_str(),
                repeats);
    std::printf("%-34s %12s %10s %12s\n", "operation", "ns/op", "GB/s", "vs memcpy");

    for (int pass = 0; pass < 3; pass++) {
        speckv_config *cfg;
        speckv_config_new(&cfg);
        if (pass == 1) speckv_config_set_int(cfg, "cache.bytes", 0);
        if (pass == 2) speckv_config_set_int(cfg, "cache.associative", 0);  // the default is associative
        speckv_pool *p;
        if (int rc = speckv_pool_open(uri.c_str(), cfg, &p); rc) die("open", rc);
        speckv_config_free(cfg);
        for (size_t sz : {size_t(4096), size_t(65536)}) {
            // Page-aligned buffers, as an engine's staging buffers are.
            AlignedBuf src(sz), dst(sz);
            for (size_t i = 0; i < sz; i++) src[i] = static_cast<unsigned char>(i * 7);
            const int iters = sz == 4096 ? 20000 : 2000;
            double mc = median_ns(repeats, iters, [&](int i) {
                src[i % sz] = static_cast<unsigned char>(i);
                std::memcpy(dst.data(), src.data(), sz);
                g_sink = dst[(i * 31) % sz];
            });
            speckv_handle h;
            if (int rc = speckv_alloc(p, sz, SPECKV_DTYPE_FP16, nullptr, &h); rc) die("alloc", rc);
            if (int rc = speckv_write(p, h, 0, src.data(), sz); rc) die("write", rc);
            double acc = median_ns(repeats, iters, [&](int i) {
                if (int rc = speckv_access(p, h, 0, dst.data(), sz, 0); rc) die("access", rc);
                g_sink = dst[(i * 31) % sz];
            });
            double wr = median_ns(repeats, iters / 4, [&](int i) {
                src[i % sz] = static_cast<unsigned char>(i);
                if (int rc = speckv_write(p, h, 0, src.data(), sz); rc) die("write", rc);
            });
            speckv_free(p, h);
            double af = median_ns(repeats, iters, [&](int) {
                speckv_handle x;
                if (int rc = speckv_alloc(p, sz, SPECKV_DTYPE_FP16, nullptr, &x); rc) die("alloc", rc);
                if (int rc = speckv_free(p, x); rc) die("free", rc);
            });
            auto gbps = [&](double ns) { return double(sz) / ns; };
            const char *kb = sz == 4096 ? "4 KiB" : "64 KiB";
            char name[64];
            if (pass == 0) {
                std::snprintf(name, sizeof name, "memcpy %s", kb);
                std::printf("%-34s %12.1f %10.2f %12s\n", name, mc, gbps(mc), "1.00x");
                std::snprintf(name, sizeof name, "access %s (resident, verified)", kb);
                std::printf("%-34s %12.1f %10.2f %11.2fx\n", name, acc, gbps(acc), acc / mc);
                std::snprintf(name, sizeof name, "write %s (+CRC32C)", kb);
                std::printf("%-34s %12.1f %10.2f %11.2fx\n", name, wr, gbps(wr), wr / mc);
                std::snprintf(name, sizeof name, "alloc+free %s", kb);
                std::printf("%-34s %12.1f %10s %12s\n", name, af, "-", "-");
            } else if (pass == 1) {
                std::snprintf(name, sizeof name, "access %s (no cache: CRC each)", kb);
                std::printf("%-34s %12.1f %10.2f %11.2fx\n", name, acc, gbps(acc), acc / mc);
            } else {
                std::snprintf(name, sizeof name, "access %s (direct-mapped L1)", kb);
                std::printf("%-34s %12.1f %10.2f %11.2fx\n", name, acc, gbps(acc), acc / mc);
            }
        }
        speckv_pool_close(p);
    }
    latency_table(uri, repeats, true);
    latency_table(uri, repeats, false);
    if (uri.rfind("file:/dev/shm/speckv-bench.pool", 0) == 0) std::remove("/dev/shm/speckv-bench.pool");
    return 0;
}
