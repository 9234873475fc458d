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
// waste per run and their medians beside the model's
// (docs/notes/2026-12-04-evaluation-earlier-stages.md, "With pacing").
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <CLI/CLI.hpp>

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
    std::string pace_wait_s, admission_s, preempt_s, system_s;
    CLI::App app{"Replay speed of the trace engine (bench/README.md)"};
    app.add_option("TRACE", path, "trace file (default: the Mooncake conversation trace of data/)");
    app.add_option("--max-requests", max_requests, "replay only the first N requests (0 = all)");
    app.add_option("--json", json, "also write the replay's results, as `speckv trace replay --json`");
    app.add_option("--system", system_s, "run only this system (no oracle)");
    app.add_option("--layer-groups", layer_groups, "layer groups")->check(CLI::Range(1u, 1u << 16));
    app.add_option("--reads-per-unit", reads_per_unit, "sampled reads per unit (0 = every block; biased, docs/trace.md)");
    app.add_option("--pace", pace, "pace the replay: R seconds of wall clock per second of virtual time");
    app.add_option("--pace-wait", pace_wait_s, "sleep, spin or yield");
    app.add_option("--pace-max-us", pace_max_us, "longest wait per paced unit, in microseconds");
    app.add_option("--repeats", repeats, "runs per system; medians of the library's measured rates")
        ->check(CLI::Range(1u, 1u << 20));
    app.add_option("--admission", admission_s, "reserve or optimistic");
    app.add_option("--preempt", preempt_s, "auto, recompute or swap");
    CLI11_PARSE(app, argc, argv);
    if (!pace_wait_s.empty() && !parse_pace_wait(pace_wait_s, &pace_wait))
        return std::fprintf(stderr, "bench_trace: bad --pace-wait\n"), 2;
    if (!admission_s.empty() && !parse_admission(admission_s, &admission))
        return std::fprintf(stderr, "bench_trace: bad --admission\n"), 2;
    if (!preempt_s.empty() && !parse_preempt(preempt_s, &preempt))
        return std::fprintf(stderr, "bench_trace: bad --preempt\n"), 2;
    if (!system_s.empty()) {
        System s;
        if (!parse_system(system_s, &s)) return std::fprintf(stderr, "bench_trace: unknown system %s\n", system_s.c_str()), 2;
        systems = {s};
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
