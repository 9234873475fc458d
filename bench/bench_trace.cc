// Replay speed of the trace engine: the whole Mooncake conversation trace
// (12,031 requests), LLaMA-2-70B on A100-80G, CXL-direct, every system, in
// metadata-only mode through a real pool. Prints requests/s of replay (per
// system and overall) and the peak RSS. Target: < 60 s on one core.
//   bench_trace [TRACE] [--max-requests N] [--json FILE]
// (--json also writes the replay's results, as `speckv trace replay --json`).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "trace.h"

using namespace speckv_trace;

int main(int argc, char **argv) {
    std::string path = SPECKV_TRACE_DATA "/traces/mooncake_fast25/conversation_trace.jsonl";
    uint64_t max_requests = 0;
    std::string json;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--max-requests") && i + 1 < argc) max_requests = std::strtoull(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else path = argv[i];
    }
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    EngineOptions o;
    o.model = *find_model("llama-2-70b");
    o.gpu = *find_gpu("a100-80g");
    o.link = *find_link("cxl-direct");
    o.host_link = *find_link("pcie-host");
    o.max_requests = max_requests;
    std::vector<Result> rs;
    auto t0 = std::chrono::steady_clock::now();
    uint64_t total = 0;
    std::printf("%-14s %9s %10s %12s %14s\n", "system", "requests", "seconds", "requests/s", "out tok/s (model)");
    for (System s : all_systems()) {
        std::string err;
        auto rd = open_reader(path, Format::Auto, false, &err);
        if (!rd) {
            std::fprintf(stderr, "bench_trace: %s\n", err.c_str());
            return 77;
        }
        Result r;
        auto a = std::chrono::steady_clock::now();
        if (replay(*rd, s, o, &r, &err)) {
            std::fprintf(stderr, "bench_trace: %s\n", err.c_str());
            return 1;
        }
        double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
        std::printf("%-14s %9llu %10.2f %12.0f %14.1f\n", r.system.c_str(), static_cast<unsigned long long>(r.requests), sec,
                    r.requests / sec, r.throughput_tps);
        total += r.requests;
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
