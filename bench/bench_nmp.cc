// SPDX-License-Identifier: Apache-2.0
// Near-memory page selection over 1 M tokens of summaries (issue 10):
// 16-token pages, 8 KV heads x 128 channels, one core. Time per call of
// score_pages (+ select_pages per KV head) beside memcpy of the same summaries
// in the same run; medians over repeated runs, printed as a table.
//   ./build/release/bench/bench_nmp [--repeats N] [--tokens N] [--qpk 1,4,8]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "select/nmp.h"
#include "speckv.h"
#include "util/status.h"
#include "bench_util.h"

namespace {

namespace nmp = speckv::nmp;
using Clock = std::chrono::steady_clock;

using bench::median;

template <typename F>
double time_ms(F &&op) {
    auto t0 = Clock::now();
    op();
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The machine is shared and noisy: each run of `op` is paired with a memcpy
// of the summaries just before it, and the ratio is the median of the pairs.
struct Timing {
    double ms, ratio;
};
template <typename M, typename F>
Timing paired(int repeats, M &&memcpy_op, F &&op) {
    std::vector<double> t, r;
    for (int k = 0; k < repeats; k++) {
        const double m = time_ms(memcpy_op);
        const double x = time_ms(op);
        t.push_back(x);
        r.push_back(x / m);
    }
    return {median(t), median(r)};
}

using bench::cpu_name;

void check(int rc, const char *what) {
    if (rc != SPECKV_OK) {
        std::fprintf(stderr, "bench_nmp: %s: %s: %s\n", what, speckv_strerror(rc), speckv::last_error());
        std::exit(1);
    }
}

volatile float g_sink;

}  // namespace

int main(int argc, char **argv) {
    int repeats = 9;
    size_t tokens = size_t(1) << 20;
    std::vector<uint32_t> qpks = {1, 4, 8};
    CLI::App app{"near-memory page selection over summaries vs memcpy (docs/selection.md §6.2)", "bench_nmp"};
    app.add_option("--repeats", repeats, "runs per cell (median reported)")->check(CLI::PositiveNumber);
    app.add_option("--tokens", tokens, "tokens of summaries")->check(CLI::Range(size_t(16), size_t(1) << 32));
    app.add_option("--qpk", qpks, "query heads per KV head to run, comma-separated")
        ->delimiter(',')
        ->check(CLI::Range(1u, 1024u));
    CLI11_PARSE(app, argc, argv);
    const uint32_t P = 16, KVH = 8, D = 128, C = KVH * D;
    const uint32_t n = uint32_t(tokens / P);
    const size_t ssz = nmp::summary_size(C), total = ssz * n;
    std::printf("bench_nmp: %s; %zu tokens = %u pages of %u tokens, %u KV heads x %u channels, summary %zu B, "
                "%.1f MiB of summaries; median of %d runs, one core\n",
                cpu_name().c_str(), tokens, n, P, KVH, D, ssz, double(total) / (1 << 20), repeats);
    std::printf("scoring kernel (best): %s\n\n", nmp::impl_available(nmp::Impl::avx512) ? "avx512"
                                                   : nmp::impl_available(nmp::Impl::avx2) ? "avx2"
                                                                                         : "scalar");

    // Summaries of synthetic FP16 key pages (values do not change the cost).
    std::vector<uint8_t> sums(total), dst(total);
    {
        std::mt19937 rng(1);
        std::normal_distribution<float> nd(0, 1);
        std::vector<float> k(size_t(P) * C);
        for (uint32_t p = 0; p < n; p++) {
            if (p < 64)
                for (auto &x : k) x = nd(rng);
            else  // reuse a key page, shifted: cheap to make, distinct summaries
                for (size_t i = 0; i < 64; i++) k[(p * 7 + i * 131) % k.size()] += 0.25f;
            check(nmp::summarize(SPECKV_DTYPE_FP32, k.data(), P, C, C, sums.data() + size_t(p) * ssz, ssz),
                  "summarize");
        }
    }
    std::memset(dst.data(), 1, total);
    std::vector<const uint8_t *> ptrs(n);
    for (uint32_t p = 0; p < n; p++) ptrs[p] = sums.data() + size_t(p) * ssz;

    auto copy = [&] {
        std::memcpy(dst.data(), sums.data(), total);
        g_sink = float(dst[total / 2]);
    };
    std::vector<double> mc;
    for (int k = 0; k < repeats; k++) mc.push_back(time_ms(copy));
    const double t_memcpy = median(mc);

    std::printf("| operation | q heads / KV head | ms per call | GB/s of summaries | x memcpy (paired) |\n");
    std::printf("|---|---:|---:|---:|---:|\n");
    std::printf("| memcpy of the summaries | - | %.2f | %.2f | 1.00 |\n", t_memcpy, double(total) / t_memcpy / 1e6);
    auto row = [&](const char *name, uint32_t qpk, Timing t) {
        std::printf("| %s | %u | %.2f | %.2f | %.2f |\n", name, qpk, t.ms, double(total) / t.ms / 1e6, t.ratio);
        std::fflush(stdout);
    };
    std::mt19937 rng(2);
    std::normal_distribution<float> nd(0, 1);
    const uint32_t budget = n / 8;
    std::vector<uint32_t> sel(budget), prev;
    for (uint32_t qpk : qpks) {
        nmp::Geometry g{KVH, D, qpk};
        std::vector<float> q(g.q_len());
        for (auto &x : q) x = nd(rng);
        std::vector<float> scores(size_t(KVH) * n);
        nmp::ScoreOptions o;
        const Timing t_score = paired(repeats, copy, [&] {
            check(nmp::score_pages(g, q.data(), q.size(), ptrs.data(), n, scores.data(), o), "score");
        });
        o.verify = false;
        const Timing t_trusted = paired(repeats, copy, [&] {
            check(nmp::score_pages(g, q.data(), q.size(), ptrs.data(), n, scores.data(), o), "score");
        });
        nmp::SelectParams sp;
        sp.budget = budget;
        sp.recent = 1;
        const Timing t_select = paired(repeats, copy, [&] {
            for (uint32_t k = 0; k < KVH; k++)
                check(nmp::select_pages(scores.data() + size_t(k) * n, n, sp, nullptr, 0, nullptr, 0, sel.data(),
                                        sel.size(), nullptr),
                      "select");
        });
        // Steady selection against the previous step's set (a different query).
        std::vector<std::vector<uint32_t>> prevs(KVH);
        for (uint32_t k = 0; k < KVH; k++) {
            prevs[k].resize(budget);
            check(nmp::select_pages(scores.data() + size_t(k) * n, n, sp, nullptr, 0, nullptr, 0, prevs[k].data(),
                                    budget, nullptr),
                  "select");
        }
        for (auto &x : q) x += 0.1f * nd(rng);
        check(nmp::score_pages(g, q.data(), q.size(), ptrs.data(), n, scores.data(), o), "score");
        sp.band = 0.5f;
        const Timing t_steady = paired(repeats, copy, [&] {
            for (uint32_t k = 0; k < KVH; k++)
                check(nmp::select_pages(scores.data() + size_t(k) * n, n, sp, nullptr, 0, prevs[k].data(), budget,
                                        sel.data(), sel.size(), nullptr),
                      "select");
        });
        row("score_pages (CRC verified)", qpk, t_score);
        row("score_pages (trusted, no CRC)", qpk, t_trusted);
        row("select_pages x 8 KV heads, budget 1/8", qpk, t_select);
        row("select_pages steady (band 0.5) x 8", qpk, t_steady);
        const Timing t_both = paired(repeats, copy, [&] {
            o.verify = true;
            check(nmp::score_pages(g, q.data(), q.size(), ptrs.data(), n, scores.data(), o), "score");
            sp.band = 0;
            for (uint32_t k = 0; k < KVH; k++)
                check(nmp::select_pages(scores.data() + size_t(k) * n, n, sp, nullptr, 0, nullptr, 0, sel.data(),
                                        sel.size(), nullptr),
                      "select");
        });
        row("**score (CRC) + select, one call**", qpk, t_both);
        if (nmp::impl_available(nmp::Impl::avx512) && nmp::impl_available(nmp::Impl::avx2)) {
            o.impl = nmp::Impl::avx2;
            o.verify = false;
            const Timing t_avx2 = paired(repeats, copy, [&] {
                check(nmp::score_pages(g, q.data(), q.size(), ptrs.data(), n, scores.data(), o), "score");
            });
            row("score_pages (trusted), AVX2 kernel", qpk, t_avx2);
            o.impl = nmp::Impl::best;
        }
        if (qpk == 4 && repeats > 1) {
            o.impl = nmp::Impl::scalar;
            o.verify = true;
            const Timing t_scalar = paired(std::min(repeats, 3), copy, [&] {
                check(nmp::score_pages(g, q.data(), q.size(), ptrs.data(), n, scores.data(), o), "score");
            });
            row("score_pages, scalar kernel (CRC)", qpk, t_scalar);
        }
    }
    return 0;
}
