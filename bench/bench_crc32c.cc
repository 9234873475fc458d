// SPDX-License-Identifier: Apache-2.0
// CRC32C throughput per core, per dispatch path, beside memcpy of the same
// bytes in the same run: 64 B, 512 B, 2 KiB, 4 KiB (a pool page), 64 KiB.
// Buffers are 64-byte aligned and hot in cache (a page checksummed right after
// it was written or read). Each sample times ~1 MiB of independent calls;
// samples of every (size, path) are interleaved, and each cell is the median
// over --repeats samples (the machine is a shared, noisy VM).
// --offset K starts both buffers K bytes past a 64-byte boundary (codec
// records sit at arbitrary offsets).
// Beside them: ISA-L's crc32_iscsi on the same buffers (when the bench was
// built with libisal-dev), and the fused copy + CRC (crc32c_copy) against a
// memcpy followed by crc32c() of the copy.
//   ./build/release/bench/bench_crc32c [--repeats N] [--offset K]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "util/crc32c.h"
#include "bench_util.h"
#if SPECKV_BENCH_ISAL
#include <isa-l/crc.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;
using speckv::Crc32cPath;

using bench::median;

using bench::cpu_name;

// Called through a volatile pointer so the compiler neither inlines nor drops
// the copies (crc32c() is an indirect call too).
void *(*volatile g_memcpy)(void *, const void *, size_t) = std::memcpy;
volatile uint32_t g_sink;

constexpr size_t kSampleBytes = 1 << 20;

// ns per call of memcpy of n bytes.
double time_memcpy(unsigned char *dst, const unsigned char *src, size_t n) {
    const size_t iters = std::max<size_t>(1, kSampleBytes / n);
    auto cp = g_memcpy;
    const auto t0 = Clock::now();
    for (size_t i = 0; i < iters; i++) {
        cp(dst, src, n);
        asm volatile("" ::: "memory");
    }
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(iters);
}

// ns per call of crc32c() over n bytes, with path p forced.
double time_crc(Crc32cPath p, const unsigned char *src, size_t n) {
    speckv::crc32c_force_path(p);
    size_t iters = std::max<size_t>(1, kSampleBytes / n);
    if (p == Crc32cPath::portable) iters = std::max<size_t>(1, iters / 16);  // ~0.5 GB/s
    uint32_t acc = 0;
    const auto t0 = Clock::now();
    for (size_t i = 0; i < iters; i++) {
        acc ^= speckv::crc32c(0, src, n);
        asm volatile("" ::: "memory");
    }
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(iters);
    g_sink = acc;
    return ns;
}

#if SPECKV_BENCH_ISAL
// ISA-L's register convention: crc32_iscsi(buf, n, ~0) without the final
// inversion; ~ of it is the usual CRC32C (checked below on every size).
uint32_t isal_crc32c(const unsigned char *p, size_t n) {
    return ~crc32_iscsi(const_cast<unsigned char *>(p), static_cast<int>(n), 0xFFFFFFFFu);
}
double time_isal(const unsigned char *src, size_t n) {
    const size_t iters = std::max<size_t>(1, kSampleBytes / n);
    uint32_t acc = 0;
    const auto t0 = Clock::now();
    for (size_t i = 0; i < iters; i++) {
        acc ^= isal_crc32c(src, n);
        asm volatile("" ::: "memory");
    }
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(iters);
    g_sink = acc;
    return ns;
}
#endif

// ns per fused copy + CRC (crc32c_copy on the active path), and per memcpy then crc32c().
double time_copy_crc(bool fused, unsigned char *dst, const unsigned char *src, size_t n) {
    const size_t iters = std::max<size_t>(1, kSampleBytes / n);
    uint32_t acc = 0;
    auto cp = g_memcpy;
    const auto t0 = Clock::now();
    for (size_t i = 0; i < iters; i++) {
        if (fused) {
            acc ^= speckv::crc32c_copy(0, dst, src, n);
        } else {
            cp(dst, src, n);
            acc ^= speckv::crc32c(0, dst, n);
        }
        asm volatile("" ::: "memory");
    }
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(iters);
    g_sink = acc;
    return ns;
}

}  // namespace

int main(int argc, char **argv) {
    int repeats = 31;
    size_t offset = 0;
    CLI::App app{"CRC32C throughput per core and dispatch path, beside memcpy and ISA-L (bench/README.md)"};
    app.add_option("--repeats", repeats, "samples per cell; each cell is their median")->check(CLI::Range(1, 1 << 20));
    app.add_option("--offset", offset, "start both buffers this many bytes past a 64-byte boundary")
        ->check(CLI::Range(size_t(0), size_t(63)));
    CLI11_PARSE(app, argc, argv);

    const Crc32cPath best = speckv::crc32c_active_path();
    std::vector<Crc32cPath> paths;
    for (int i = 0; i < speckv::kCrc32cPathCount; i++)
        if (speckv::crc32c_path_available(static_cast<Crc32cPath>(i))) paths.push_back(static_cast<Crc32cPath>(i));
    const std::vector<size_t> sizes = {64, 512, 2048, 4096, 65536};
    const size_t maxn = sizes.back();

    auto *src_mem = static_cast<unsigned char *>(std::aligned_alloc(64, maxn + 64));
    auto *dst_mem = static_cast<unsigned char *>(std::aligned_alloc(64, maxn + 64));
    unsigned char *src = src_mem + offset, *dst = dst_mem + offset;
    for (size_t i = 0; i < maxn; i++) {
        src[i] = static_cast<unsigned char>(i * 131 + 7);
        dst[i] = 0;
    }

    // t[size][0] = memcpy, t[size][1 + k] = paths[k]; ratio = best path / memcpy, paired per repeat.
    std::vector<std::vector<std::vector<double>>> t(sizes.size(),
                                                    std::vector<std::vector<double>>(paths.size() + 1));
    std::vector<std::vector<double>> ratio(sizes.size());
    // extra[size]: {isal, fused copy+crc, memcpy then crc} ns.
    std::vector<std::vector<std::vector<double>>> extra(sizes.size(), std::vector<std::vector<double>>(3));
#if SPECKV_BENCH_ISAL
    for (size_t n : sizes)
        if (isal_crc32c(src, n) != speckv::crc32c(0, src, n)) {
            std::fprintf(stderr, "bench_crc32c: ISA-L and speckv disagree at %zu bytes\n", n);
            return 1;
        }
#endif
    for (int r = 0; r < repeats + 1; r++) {  // round 0 warms up and is dropped
        for (size_t s = 0; s < sizes.size(); s++) {
            const size_t n = sizes[s];
            const double m = time_memcpy(dst, src, n);
            double b = 0;
            std::vector<double> row = {m};
            for (Crc32cPath p : paths) {
                const double x = time_crc(p, src, n);
                row.push_back(x);
                if (p == best) b = x;
            }
            speckv::crc32c_force_path(best);
#if SPECKV_BENCH_ISAL
            const double isal = time_isal(src, n);
#else
            const double isal = 0;
#endif
            const double fused = time_copy_crc(true, dst, src, n), separate = time_copy_crc(false, dst, src, n);
            if (r == 0) continue;
            extra[s][0].push_back(isal);
            extra[s][1].push_back(fused);
            extra[s][2].push_back(separate);
            for (size_t k = 0; k < row.size(); k++) t[s][k].push_back(row[k]);
            ratio[s].push_back(b / m);
        }
    }
    speckv::crc32c_force_path(best);

    std::printf("bench_crc32c: %s; %d repeats, median; GB/s per core (1 GB = 1e9 B), hot buffers at "
                "64-byte boundary + %zu\n",
                cpu_name().c_str(), repeats, offset);
    std::printf("crc32c() dispatches to: %s; ISA-L crc32_iscsi: %s; copy+crc = crc32c_copy (fused), "
                "memcpy,crc = memcpy then crc32c() of the copy\n\n",
                speckv::crc32c_path_name(best), SPECKV_BENCH_ISAL ? "same buffers" : "not built (no libisal-dev)");
    std::printf("%-8s %9s", "bytes", "memcpy");
    for (Crc32cPath p : paths) std::printf(" %9s", speckv::crc32c_path_name(p));
    std::printf(" %12s %14s %9s %12s %14s\n", "crc32c() ns", "x memcpy time", "ISA-L", "copy+crc", "memcpy,crc");
    for (size_t s = 0; s < sizes.size(); s++) {
        const double n = double(sizes[s]);
        std::printf("%-8zu %9.1f", sizes[s], n / median(t[s][0]));
        double best_ns = 0;
        for (size_t k = 0; k < paths.size(); k++) {
            const double ns = median(t[s][k + 1]);
            std::printf(" %9.1f", n / ns);
            if (paths[k] == best) best_ns = ns;
        }
        std::printf(" %12.1f %14.2f", best_ns, median(ratio[s]));
        if (SPECKV_BENCH_ISAL) std::printf(" %9.1f", n / median(extra[s][0]));
        else std::printf(" %9s", "-");
        std::printf(" %12.1f %14.1f\n", n / median(extra[s][1]), n / median(extra[s][2]));
    }
    std::free(src_mem);
    std::free(dst_mem);
    return 0;
}
