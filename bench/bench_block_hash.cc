// SPDX-License-Identifier: Apache-2.0
// speckv_block_hash per call, through the shared library: native and vLLM
// CBOR encodings, 16 to 1024 tokens per block, with and without a parent.
// Each sample times ~256 KiB of hashed input in this thread's CPU time
// (CLOCK_THREAD_CPUTIME_ID: on a shared, oversubscribed VM wall time mostly
// measures the other tenants); the cases are interleaved and each cell is
// the median over --repeats samples.
// The header names the libspeckv.so that was loaded, so two builds of the
// library can be compared with one binary (bench/README.md "Block hash":
// LD_LIBRARY_PATH picks the library; runs alternate between the two).
//   ./build/release/bench/bench_block_hash [--repeats N]
#include <dlfcn.h>

#include <time.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "speckv.h"

namespace {

double cpu_ns() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) * 1e9 + double(t.tv_nsec);
}

struct Case {
    const char *name;
    int algo;
    size_t tokens;
    bool parent;
};

const Case kCases[] = {
    {"native   16 tok, root", SPECKV_HASH_NATIVE, 16, false},
    {"native   16 tok, chained", SPECKV_HASH_NATIVE, 16, true},
    {"native   64 tok, chained", SPECKV_HASH_NATIVE, 64, true},
    {"native  512 tok, chained", SPECKV_HASH_NATIVE, 512, true},
    {"native 1024 tok, chained", SPECKV_HASH_NATIVE, 1024, true},
    {"vllm     16 tok, chained", SPECKV_HASH_VLLM_CBOR, 16, true},
    {"vllm    512 tok, chained", SPECKV_HASH_VLLM_CBOR, 512, true},
};

// ns per call, and whether every call succeeded.
double sample(const Case &c, const std::vector<uint32_t> &tok, uint8_t *acc, bool *ok) {
    const size_t iters = std::max<size_t>(64, (256u << 10) / (c.tokens * 4 + 64));
    uint8_t out[SPECKV_HASH_BYTES];
    const double t0 = cpu_ns();
    for (size_t i = 0; i < iters; i++) {
        // Chained: each call's parent is the previous result (as an engine hashes a prompt).
        if (speckv_block_hash(c.algo, 7, c.parent ? acc : nullptr, tok.data(), c.tokens, nullptr, 0, out) != SPECKV_OK)
            *ok = false;
        std::memcpy(acc, out, SPECKV_HASH_BYTES);
    }
    return (cpu_ns() - t0) / double(iters);
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"speckv_block_hash per call (bench/README.md \"Block hash\")", "bench_block_hash"};
    int repeats = 21;
    app.add_option("--repeats", repeats, "samples per case (median reported)")->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);

    Dl_info info{};
    const char *lib = dladdr(reinterpret_cast<void *>(&speckv_block_hash), &info) && info.dli_fname
                          ? info.dli_fname
                          : "?";
    std::printf("speckv_block_hash, %s, library %s, %d samples per cell (median, thread CPU time)\n", bench::cpu_name().c_str(),
                lib, repeats);

    std::vector<uint32_t> tok(1024);
    for (size_t i = 0; i < tok.size(); i++) tok[i] = uint32_t(i * 2654435761u % 32000);
    constexpr size_t n = sizeof kCases / sizeof kCases[0];
    std::vector<std::vector<double>> t(n);
    uint8_t acc[SPECKV_HASH_BYTES] = {};
    bool ok = true;
    for (size_t i = 0; i < n; i++) sample(kCases[i], tok, acc, &ok);  // warm-up
    for (int r = 0; r < repeats; r++)
        for (size_t i = 0; i < n; i++) t[i].push_back(sample(kCases[i], tok, acc, &ok));
    if (!ok) {
        std::fprintf(stderr, "bench_block_hash: speckv_block_hash failed: %s\n", speckv_errmsg());
        return 1;
    }
    std::printf("%-28s %10s %10s\n", "case", "ns/call", "MB/s");
    for (size_t i = 0; i < n; i++) {
        double ns = bench::median(t[i]);
        std::printf("%-28s %10.1f %10.1f\n", kCases[i].name, ns, double(kCases[i].tokens * 4) / ns * 1e3);
    }
    std::printf("(MB/s counts the token bytes only: 4 per token)\n");
    return 0;
}
