// SPDX-License-Identifier: Apache-2.0
// Replay speed of the trace engine: the whole Mooncake conversation trace
// (12,031 requests), LLaMA-2-70B on A100-80G, CXL-direct, every system, in
// metadata-only mode through a real pool. Prints requests/s of replay (per
// system and overall) and the peak RSS. Target: < 60 s on one core.
//   bench_trace [TRACE] [--max-requests N] [--json FILE]
//               [--system S] [--layer-groups G] [--pace R] [--pace-wait sleep|spin|yield]
//               [--pace-max-us U] [--repeats N] [--admission reserve|optimistic]
//               [--preempt auto|recompute|swap] [--reads-per-unit N]
// (--json also writes the replay's results, as `speckv trace replay --json`).
// With --system only that system runs (no oracle); --repeats N runs each
// system N times and prints the library's measured hit rate, precision and
// waste per run and their medians beside the model's (docs/evaluation.md,
// "--pace").
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "data_dir.h"
#include "trace.h"

using namespace speckv_trace;

int main(int argc, char **argv) {
    std::string path = speckv_data::path("traces/mooncake_fast25/conversation_trace.jsonl");
    uint64_t max_requests = 0;
    std::string json;
    std::vector<System> systems = all_systems();
    uint32_t layer_groups = 1, repeats = 1, reads_per_unit = 0;
    double pace = 0, pace_max_us = 1000;
    PaceWait pace_wait = PaceWait::Yield;
    Admission admission = Admission::Reserve;
    Preempt preempt = Preempt::Auto;
    for (int i = 1; i < argc; ++i) {
        auto arg = [&](const char *name) { return !std::strcmp(argv[i], name) && i + 1 < argc; };
        if (arg("--max-requests")) max_requests = std::strtoull(argv[++i], nullptr, 10);
        else if (arg("--json")) json = argv[++i];
        else if (arg("--layer-groups")) layer_groups = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
        else if (arg("--reads-per-unit")) reads_per_unit = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
        else if (arg("--repeats")) repeats = std::max(1u, static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10)));
        else if (arg("--pace")) pace = std::strtod(argv[++i], nullptr);
        else if (arg("--pace-max-us")) pace_max_us = std::strtod(argv[++i], nullptr);
        else if (arg("--pace-wait")) {
            if (!parse_pace_wait(argv[++i], &pace_wait)) return std::fprintf(stderr, "bench_trace: bad --pace-wait\n"), 2;
        } else if (arg("--admission")) {
            if (!parse_admission(argv[++i], &admission)) return std::fprintf(stderr, "bench_trace: bad --admission\n"), 2;
        } else if (arg("--preempt")) {
            if (!parse_preempt(argv[++i], &preempt)) return std::fprintf(stderr, "bench_trace: bad --preempt\n"), 2;
        } else if (arg("--system")) {
            System s;
            if (!parse_system(argv[++i], &s)) return std::fprintf(stderr, "bench_trace: unknown system %s\n", argv[i]), 2;
            systems = {s};
        } else path = argv[i];
    }
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    EngineOptions o;
    o.model = *find_model("llama-2-70b");
    o.gpu = *find_gpu("a100-80g");
    o.link = *find_link("cxl-direct");
    o.host_link = *find_link("pcie-host");
    o.max_requests = max_requests;
    o.layer_groups = layer_groups;
    o.reads_per_unit = reads_per_unit;
    o.admission = admission, o.preempt = preempt;
    o.pace = pace, o.pace_max_unit_s = pace_max_us * 1e-6, o.pace_wait = pace_wait;
    std::vector<Result> rs;
    auto t0 = std::chrono::steady_clock::now();
    uint64_t total = 0;
    std::printf("%-14s %9s %10s %12s %14s\n", "system", "requests", "seconds", "requests/s", "out tok/s (model)");
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? -1.0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    };
    for (System s : systems) {
        std::vector<double> hit, prec, waste, wall;
        Result r;
        for (uint32_t k = 0; k < repeats; ++k) {
            std::string err;
            auto rd = open_reader(path, Format::Auto, false, &err);
            if (!rd) {
                std::fprintf(stderr, "bench_trace: %s\n", err.c_str());
                return 1;
            }
            auto a = std::chrono::steady_clock::now();
            if (replay(*rd, s, o, &r, &err)) {
                std::fprintf(stderr, "bench_trace: %s\n", err.c_str());
                return 1;
            }
            double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
            std::printf("%-14s %9llu %10.2f %12.0f %14.1f\n", r.system.c_str(), static_cast<unsigned long long>(r.requests), sec,
                        r.requests / sec, r.throughput_tps);
            if (layer_groups > 1)
                std::printf("  run %u: lib hit %.1f%% precision %.1f%% waste %.1f%% (model %.1f%% / %.1f%% / %.1f%%); "
                            "wall %.1f s, paced %.1f s, prefetch thread CPU %.1f s, %llu pages, %llu hints dropped\n",
                            k + 1, 100 * r.lib_hit_rate, 100 * r.lib_precision, 100 * r.lib_waste, 100 * r.prefetch_hit_rate,
                            100 * r.precision, 100 * r.waste, r.wall_s, r.pace_wait_s, r.lib_thread_cpu_s,
                            static_cast<unsigned long long>(r.lib_prefetch_pages),
                            static_cast<unsigned long long>(r.lib_prefetch_dropped));
            hit.push_back(r.lib_hit_rate), prec.push_back(r.lib_precision), waste.push_back(r.lib_waste), wall.push_back(sec);
            total += r.requests;
        }
        if (layer_groups > 1 && repeats > 1)
            std::printf("  median of %u: lib hit %.1f%% precision %.1f%% waste %.1f%%, wall %.1f s (hit min %.1f%% max %.1f%%)\n",
                        repeats, 100 * median(hit), 100 * median(prec), 100 * median(waste), median(wall),
                        100 * *std::min_element(hit.begin(), hit.end()), 100 * *std::max_element(hit.begin(), hit.end()));
        rs.push_back(r);
    }
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    std::printf("all systems: %llu requests in %.2f s = %.0f requests/s; peak RSS %.1f MiB\n",
                static_cast<unsigned long long>(total), sec, total / sec, ru.ru_maxrss / 1024.0);
    print_table(stdout, rs);
    if (!json.empty()) {
        std::FILE *f = std::fopen(json.c_str(), "w");
        if (!f) return std::perror(json.c_str()), 1;
        std::fputs(to_json(rs, o, path).c_str(), f);
        std::fclose(f);
    }
    return 0;
}
