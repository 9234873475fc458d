// SPDX-License-Identifier: Apache-2.0
// Sharing benchmarks (issue 7), printed as tables; see bench/README.md.
//
//  1. speckv_lookup latency: p50/p99 over many calls, one process alone and
//     with a second process looking up the same blocks at the same time.
//  2. Dedup on the Mooncake conversation trace: every 512-token prefix block
//     (hash_ids) of every request goes through speckv_lookup / speckv_publish
//     on a real pool, metadata-only (a one-page stand-in per block); bytes
//     stored with sharing against without, for LLaMA-2-7B KV.
//
//   bench_sharing [TRACE.jsonl]
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <csignal>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "data_dir.h"
#include "speckv.h"

namespace {

uint64_t ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

void key(uint64_t id, uint8_t out[SPECKV_HASH_BYTES]) {
    uint32_t tok[2] = {uint32_t(id), uint32_t(id >> 32)};
    speckv_block_hash(SPECKV_HASH_NATIVE, 0, nullptr, tok, 2, nullptr, 0, out);
}

void must(int rc, const char *what) {
    if (rc != SPECKV_OK) {
        std::fprintf(stderr, "bench_sharing: %s: %s: %s\n", what, speckv_strerror(rc), speckv_errmsg());
        std::exit(1);
    }
}

// Lookups of `nkeys` published blocks in a random order; `hold`: keep the
// reference (later lookups of a held block touch no shared line), else
// release it at once (each pair sets and clears this process's holder bit).
std::vector<double> lookups(speckv_pool *p, int nkeys, int iters, bool hold, unsigned seed) {
    std::vector<std::array<uint8_t, SPECKV_HASH_BYTES>> keys(nkeys);
    for (int i = 0; i < nkeys; i++) key(uint64_t(i), keys[i].data());
    std::vector<speckv_handle> held;
    std::vector<double> t;
    t.reserve(iters);
    uint64_t x = seed | 1;
    for (int i = 0; i < iters; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const uint8_t *k = keys[x % nkeys].data();
        speckv_handle h;
        uint64_t t0 = ns();
        int rc = speckv_lookup(p, 0, k, &h);
        uint64_t t1 = ns();
        must(rc, "lookup");
        t.push_back(double(t1 - t0));
        if (hold) held.push_back(h);
        else must(speckv_free(p, h), "free");
    }
    for (speckv_handle h : held) speckv_free(p, h);
    std::sort(t.begin(), t.end());
    return t;
}

double pct(const std::vector<double> &v, double q) { return v[std::min(v.size() - 1, size_t(q * double(v.size())))]; }

void bench_lookup(const std::string &path) {
    std::string uri = "file:" + path + "?size=64M&max_blocks=8192";
    unlink(path.c_str());
    speckv_pool *p;
    must(speckv_pool_open(uri.c_str(), nullptr, &p), "open");
    const int nkeys = 4096, iters = 200000, runs = 5;
    for (int i = 0; i < nkeys; i++) {
        speckv_handle h;
        must(speckv_alloc(p, 4096, 0, nullptr, &h), "alloc");
        uint8_t k[SPECKV_HASH_BYTES];
        key(uint64_t(i), k);
        must(speckv_publish(p, h, k, nullptr), "publish");
        must(speckv_free(p, h), "free");
    }
    std::printf("\nspeckv_lookup of a published block (4096 blocks, random order, %d calls per run, median of %d runs)\n",
                iters, runs);
    std::printf("%-44s %10s %10s\n", "case", "p50 ns", "p99 ns");
    for (int contended = 0; contended <= 1; contended++)
        for (int hold = 1; hold >= 0; hold--) {
            std::vector<double> p50s, p99s;
            for (int r = 0; r < runs; r++) {
                pid_t other = -1;
                int go[2];
                if (contended) {
                    if (pipe(go) != 0) std::exit(1);
                    other = fork();
                    if (other == 0) {
                        speckv_pool *q;
                        must(speckv_pool_open(("file:" + path).c_str(), nullptr, &q), "open (2nd process)");
                        char c = 1;
                        if (write(go[1], &c, 1) != 1) _exit(1);
                        for (;;) lookups(q, nkeys, 20000, hold, 99u + unsigned(r));
                    }
                    char c;
                    if (read(go[0], &c, 1) != 1) std::exit(1);
                    close(go[0]);
                    close(go[1]);
                }
                auto t = lookups(p, nkeys, iters, hold, 7u + unsigned(r));
                if (other > 0) {
                    kill(other, SIGKILL);
                    waitpid(other, nullptr, 0);
                }
                p50s.push_back(pct(t, 0.5));
                p99s.push_back(pct(t, 0.99));
            }
            std::sort(p50s.begin(), p50s.end());
            std::sort(p99s.begin(), p99s.end());
            char name[64];
            std::snprintf(name, sizeof name, "%s, %s", contended ? "2 processes" : "1 process",
                          hold ? "reference kept" : "lookup + free");
            std::printf("%-44s %10.0f %10.0f\n", name, p50s[runs / 2], p99s[runs / 2]);
        }
    speckv_pool_close(p);
    unlink(path.c_str());  // the killed helpers are recovered on the next open; nothing to keep
}

// A Mooncake trace line: "hash_ids": [1, 2, 3] -> ids; "input_length": N -> tokens.
bool parse(const std::string &line, uint64_t *tokens, std::vector<uint64_t> *ids) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return false;
    auto a = j.find("input_length"), h = j.find("hash_ids");
    if (a == j.end() || h == j.end() || !a->is_number_unsigned() || !h->is_array()) return false;
    *tokens = a->get<uint64_t>();
    ids->clear();
    for (const auto &id : *h) {
        if (!id.is_number_unsigned()) return false;
        ids->push_back(id.get<uint64_t>());
    }
    return true;
}

void bench_dedup(const std::string &trace, const std::string &path) {
    std::ifstream in(trace);
    if (!in) {
        std::printf("\n(dedup: trace %s not found; skipped)\n", trace.c_str());
        return;
    }
    // LLaMA-2-7B: 32 layers x (K,V) x 4096 x FP16 = 512 KiB of KV per token.
    const double kv_per_token = 32.0 * 2 * 4096 * 2;
    unlink(path.c_str());
    std::string uri = "file:" + path + "?size=1536M&max_blocks=262143";
    speckv_pool *p;
    must(speckv_pool_open(uri.c_str(), nullptr, &p), "open");
    std::string line;
    std::vector<uint64_t> ids;
    uint64_t requests = 0, blocks_total = 0, tokens_total = 0, tokens_stored = 0, hits = 0, misses = 0;
    uint64_t t0 = ns();
    std::vector<speckv_handle> refs;
    while (std::getline(in, line)) {
        uint64_t tokens;
        if (!parse(line, &tokens, &ids)) continue;
        requests++;
        tokens_total += tokens;
        refs.clear();
        for (size_t i = 0; i < ids.size(); i++) {
            uint64_t btok = std::min<uint64_t>(512, tokens > 512 * i ? tokens - 512 * i : 0);
            uint8_t k[SPECKV_HASH_BYTES];
            key(ids[i], k);
            speckv_handle h;
            blocks_total++;
            int rc = speckv_lookup(p, 0, k, &h);
            if (rc == SPECKV_OK) {
                hits++;
            } else {
                misses++;
                tokens_stored += btok;
                speckv_hint hint{};
                hint.struct_size = sizeof hint;
                hint.token_pos = 512 * i;
                hint.token_count = btok;
                must(speckv_alloc(p, 4096, SPECKV_DTYPE_FP16, &hint, &h), "alloc");
                must(speckv_publish(p, h, k, nullptr), "publish");
            }
            refs.push_back(h);
        }
        for (speckv_handle h : refs) must(speckv_free(p, h), "free");  // request done
    }
    double secs = double(ns() - t0) / 1e9;
    speckv_pool_stats st{};
    st.struct_size = sizeof st;
    must(speckv_stats(p, &st), "stats");
    speckv_pool_close(p);
    unlink(path.c_str());
    double without = double(tokens_total) * kv_per_token, with = double(tokens_stored) * kv_per_token;
    std::printf("\nDedup of prefix blocks, Mooncake conversation trace (%" PRIu64 " requests), LLaMA-2-7B KV, 512-token blocks\n",
                requests);
    std::printf("%-40s %16s\n", "", "value");
    std::printf("%-40s %16" PRIu64 "\n", "blocks referenced by requests", blocks_total);
    std::printf("%-40s %16" PRIu64 "\n", "lookup hits (block already in the pool)", hits);
    std::printf("%-40s %16" PRIu64 "\n", "blocks stored (published)", misses);
    std::printf("%-40s %16" PRIu64 "\n", "evictions", st.evictions);
    std::printf("%-40s %13.1f TiB\n", "KV bytes without sharing", without / double(1ull << 40));
    std::printf("%-40s %13.1f TiB\n", "KV bytes stored with sharing", with / double(1ull << 40));
    std::printf("%-40s %15.1f%%\n", "saved by sharing", 100.0 * (1.0 - with / without));
    std::printf("%-40s %16.0f\n", "replay: requests per second", double(requests) / secs);
}

}  // namespace

int main(int argc, char **argv) {
    std::string trace = speckv_data::path("traces/mooncake_fast25/conversation_trace.jsonl");
    CLI::App app{"speckv sharing: lookup latency and dedup on a Mooncake trace (bench/README.md)", "bench_sharing"};
    app.add_option("trace", trace, "Mooncake JSONL trace (default: the conversation trace in data/)");
    CLI11_PARSE(app, argc, argv);
    char host[256] = "?";
    gethostname(host, sizeof host);
    std::printf("speckv %s sharing benchmarks on %s, %ld CPUs\n", speckv_version_string(), host, sysconf(_SC_NPROCESSORS_ONLN));
    std::string dir = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
    bench_lookup(dir + "/speckv-bench-sharing.pool");
    bench_dedup(trace, dir + "/speckv-bench-dedup.pool");
    return 0;
}
