// SPDX-License-Identifier: Apache-2.0
// The Mooncake JSONL reader, hand-written parser vs simdjson: reads a trace
// (default: the 12,031-request conversation trace) through open_reader with
// each parser, alternated, and prints the median time of a whole read per
// parser. Checks first that both return the same requests.
//   bench_trace_reader [TRACE] [--rounds N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "data_dir.h"
#include "trace.h"

using namespace speckv_trace;

namespace {

// Reads the whole trace; returns the requests (or -1 on an error) and a checksum.
long read_all(const std::string &path, JsonParser jp, uint64_t *sum) {
    std::string err;
    auto rd = open_reader(path, Format::Auto, false, &err, jp);
    if (!rd) return std::fprintf(stderr, "bench_trace_reader: %s\n", err.c_str()), -1;
    Request r;
    long n = 0;
    int rc;
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    while ((rc = rd->next(&r)) == 1) {
        uint64_t t;
        std::memcpy(&t, &r.arrival_ms, sizeof t);
        mix(t), mix(r.input_len), mix(r.output_len);
        for (uint64_t id : r.hash_ids) mix(id);
        r.hash_ids.clear();
        ++n;
    }
    if (rc < 0) return std::fprintf(stderr, "bench_trace_reader: %s\n", rd->error().c_str()), -1;
    *sum = h;
    return n;
}

}  // namespace

int main(int argc, char **argv) {
    std::string path = speckv_data::path("traces/mooncake_fast25/conversation_trace.jsonl");
    int rounds = 21;
    CLI::App app{"The Mooncake trace reader's two JSON parsers, timed (bench/README.md)"};
    app.add_option("TRACE", path, "trace file (default: the Mooncake conversation trace of data/)");
    app.add_option("--rounds", rounds, "alternated rounds per parser")->check(CLI::Range(1, 1 << 20));
    CLI11_PARSE(app, argc, argv);
    if (!simdjson_available()) {
        std::printf("bench_trace_reader: built without simdjson: nothing to compare\n");
        return 0;
    }
    uint64_t s_hand = 0, s_simd = 0;
    long n_hand = read_all(path, JsonParser::Hand, &s_hand), n_simd = read_all(path, JsonParser::Simdjson, &s_simd);
    if (n_hand < 0 || n_simd < 0) return 1;
    if (n_hand != n_simd || s_hand != s_simd) {
        std::fprintf(stderr, "bench_trace_reader: the parsers disagree (%ld vs %ld requests)\n", n_hand, n_simd);
        return 1;
    }
    std::vector<double> t_hand, t_simd;
    for (int k = 0; k < rounds; ++k) {
        for (JsonParser jp : k % 2 ? std::vector<JsonParser>{JsonParser::Simdjson, JsonParser::Hand}
                                   : std::vector<JsonParser>{JsonParser::Hand, JsonParser::Simdjson}) {
            uint64_t s;
            auto a = std::chrono::steady_clock::now();
            if (read_all(path, jp, &s) < 0) return 1;
            double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
            (jp == JsonParser::Hand ? t_hand : t_simd).push_back(ms);
        }
    }
    auto med = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    std::printf("%s: %ld requests, identical from both parsers; %d alternated rounds, median of a whole read:\n", path.c_str(),
                n_hand, rounds);
    std::printf("  %-9s %9.2f ms  (%.0f requests/s)\n", "hand", med(t_hand), n_hand / med(t_hand) * 1e3);
    std::printf("  %-9s %9.2f ms  (%.0f requests/s)\n", "simdjson", med(t_simd), n_hand / med(t_simd) * 1e3);
    std::printf("  simdjson / hand = %.2f; the default is %s\n", med(t_simd) / med(t_hand), json_parser_name(JsonParser::Default));
    return 0;
}
