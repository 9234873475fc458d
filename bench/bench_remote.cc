// SPDX-License-Identifier: Apache-2.0
// L5 (docs/remote.md): put and get of 64 KiB, 512 KiB and 2 MiB blocks through
// speckv (publish with remote.write=through; lookup from a second, empty pool)
// beside redis-benchmark's plain SET/GET of the same sizes on the same
// cluster, one client, one request at a time, and beside the pool (L3: write
// into a block; lookup + read) and the L4 file (speckv_demote of a written
// block; reading it back, which promotes it) for scale. Run under a cluster:
//   tests/remote/cluster.sh build/release/bench/bench_remote [--n 200] [--sizes 65536,524288,2097152]
// (or set SPECKV_TEST_REDIS_URI / SPECKV_TEST_REDIS_PORTS to a cluster of your own).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_util.h"
#include "speckv.h"

namespace {
using clk = std::chrono::steady_clock;

struct Row {
    double ops = 0, mbs = 0, p50_us = 0, p99_us = 0;
};

Row summarize(std::vector<double> us, size_t bytes) {
    Row r;
    if (us.empty()) return r;
    double total = 0;
    for (double u : us) total += u;
    std::sort(us.begin(), us.end());
    r.ops = us.size() / (total / 1e6);
    r.mbs = r.ops * bytes / 1e6;
    r.p50_us = us[us.size() / 2];
    r.p99_us = us[std::min(us.size() - 1, static_cast<size_t>(us.size() * 0.99))];
    return r;
}

// The pools' place: anonymous memory, or files in --pool-dir (e.g. a hugetlbfs
// mount, to see what the first touch of fresh 4 KiB pages costs the L5 rows).
std::string g_pool_dir;

std::string pool_path(const char *role) {
    return g_pool_dir + "/bench_remote-" + std::to_string(getpid()) + "-" + role + ".pool";
}

std::string pool_uri(const char *role) {
    return g_pool_dir.empty() ? "anon:?size=512M" : "file:" + pool_path(role) + "?size=512M";
}

void drop_pool_file(const char *role) {
    if (!g_pool_dir.empty()) ::unlink(pool_path(role).c_str());
}

speckv_pool *open_pool(const char *uri, const char *write, const char *role) {
    speckv_config *cfg = nullptr;
    speckv_config_new(&cfg);
    speckv_config_set_str(cfg, "remote.uri", uri);
    speckv_config_set_str(cfg, "remote.write", write);
    speckv_config_set_int(cfg, "remote.timeout_ms", 5000);
    speckv_pool *p = nullptr;
    int rc = speckv_pool_open(pool_uri(role).c_str(), cfg, &p);
    speckv_config_free(cfg);
    if (rc != SPECKV_OK) {
        std::fprintf(stderr, "open: %s (%s)\n", speckv_strerror(rc), speckv_errmsg());
        std::exit(1);
    }
    return p;
}

// One redis-benchmark run's rows (rps, p50 ms, p99 ms) from its CSV; MB/s is
// counted from the mean latency, like speckv's (one client, one request at a
// time), not from its rps, which at a few hundred requests counts its start.
bool redis_rows(const std::string &args, size_t bytes, Row *set, Row *get) {
    std::string cmd = "redis-benchmark " + args + " --csv 2>/dev/null";
    FILE *f = popen(cmd.c_str(), "r");
    if (!f) return false;
    char line[512];
    bool got = false;
    while (std::fgets(line, sizeof line, f)) {
        // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
        std::string s(line);
        for (auto &c : s)
            if (c == '"') c = ' ';
        std::istringstream in(s);
        std::string name, field;
        std::vector<double> v;
        std::getline(in, name, ',');
        while (std::getline(in, field, ',')) v.push_back(std::atof(field.c_str()));
        if (v.size() < 6 || v[1] <= 0) continue;
        Row r;
        r.ops = 1e3 / v[1];
        r.mbs = r.ops * bytes / 1e6;
        r.p50_us = v[3] * 1000;
        r.p99_us = v[5] * 1000;
        if (set && name.find("SET") != std::string::npos) *set = r, got = true;
        if (get && name.find("GET") != std::string::npos) *get = r, got = true;
    }
    pclose(f);
    return got;
}

// redis-benchmark's plain SET and GET of `bytes`, as speckv's puts and gets
// are: SET of a new key each time (-r over a large key space), GET of
// existing keys that differ from one request to the next (the key space is
// filled first: -r n over 6n SETs leaves about 0.25 % of it empty). And, for
// reference, SET and GET of one key over and over (the server then reuses the
// value's memory and finds it in cache, which different keys never allow).
bool redis_bench(int port, size_t bytes, int n, Row *set, Row *get, Row *set_one_key, Row *get_one_key) {
    const std::string base = "-h 127.0.0.1 -p " + std::to_string(port) + " --cluster -d " + std::to_string(bytes) + " -c 1";
    const std::string nn = " -n " + std::to_string(n);
    bool ok = redis_rows(base + nn + " -t set -r 1000000000", bytes, set, nullptr);
    Row fill;
    ok = redis_rows(base + " -n " + std::to_string(6 * n) + " -r " + std::to_string(n) + " -t set", bytes, &fill, nullptr) && ok;
    ok = redis_rows(base + nn + " -r " + std::to_string(n) + " -t get", bytes, nullptr, get) && ok;
    ok = redis_rows(base + nn + " -t set,get", bytes, set_one_key, get_one_key) && ok;
    return ok;
}

// L3 and L4 of one size: a file pool with an L4 file in a temporary
// directory. put: L3 = speckv_write of the whole block, L4 = speckv_demote of
// it; get: L4 = speckv_access of the whole demoted block (promotion + read).
bool l3_l4(size_t bytes, int n, const std::vector<uint8_t> &data, std::vector<double> *l3_put,
           std::vector<double> *l4_put, std::vector<double> *l4_get) {
    const char *tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/bench-remote.XXXXXX";
    if (!mkdtemp(dir.data())) return false;
    speckv_config *cfg = nullptr;
    speckv_config_new(&cfg);
    speckv_config_set_str(cfg, "cold.path", (dir + "/l4").c_str());
    speckv_pool *p = nullptr;
    const uint64_t mib = std::max<uint64_t>(64, 4 * bytes / (1 << 20) + 8);
    int rc = speckv_pool_open(("file:" + dir + "/pool?size=" + std::to_string(mib) + "M").c_str(), cfg, &p);
    speckv_config_free(cfg);
    bool ok = rc == SPECKV_OK;
    std::vector<uint8_t> back(bytes);
    for (int i = 0; ok && i < n; i++) {
        speckv_handle b = 0;
        ok = speckv_alloc(p, bytes, SPECKV_DTYPE_OPAQUE, nullptr, &b) == SPECKV_OK;
        auto t0 = clk::now();
        ok = ok && speckv_write(p, b, 0, data.data(), bytes) == SPECKV_OK;
        auto t1 = clk::now();
        ok = ok && speckv_demote(p, b) == SPECKV_OK;
        auto t2 = clk::now();
        ok = ok && speckv_access(p, b, 0, back.data(), bytes, 0) == SPECKV_OK;
        auto t3 = clk::now();
        ok = ok && back == data;
        if (b) speckv_free(p, b);
        l3_put->push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        l4_put->push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
        l4_get->push_back(std::chrono::duration<double, std::micro>(t3 - t2).count());
    }
    if (!ok) std::fprintf(stderr, "L3/L4 at %zu bytes: %s\n", bytes, speckv_errmsg());
    if (p) speckv_pool_close(p);
    if (std::system(("rm -rf '" + dir + "'").c_str()) != 0) std::fprintf(stderr, "cannot remove %s\n", dir.c_str());
    return ok;
}

void hash_of(uint64_t run, int size_idx, int i, uint8_t h[32]) {
    std::memset(h, 0, 32);
    std::memcpy(h, &run, 8);
    h[8] = static_cast<uint8_t>(size_idx);
    std::memcpy(h + 9, &i, 4);
}
}  // namespace

int main(int argc, char **argv) {
    int n = 200;
    std::vector<size_t> sizes = {64 << 10, 512 << 10, 2 << 20};
    CLI::App app{"The L5 remote tier vs redis-benchmark (run under tests/remote/cluster.sh; docs/remote.md)"};
    app.add_option("--n", n, "blocks per size")->check(CLI::Range(2, 1 << 24));
    app.add_option("--sizes", sizes, "block sizes in bytes, comma-separated")
        ->delimiter(',')
        ->check(CLI::Range(size_t(1), size_t(1) << 30));
    app.add_option("--pool-dir", g_pool_dir, "put the two 512 MiB pools in files here (e.g. /dev/hugepages), not anon:");
    CLI11_PARSE(app, argc, argv);
    const char *uri = std::getenv("SPECKV_TEST_REDIS_URI");
    const char *ports = std::getenv("SPECKV_TEST_REDIS_PORTS");
    if (!uri || !ports) {
        std::printf("SKIP: no cluster: run under tests/remote/cluster.sh (it sets SPECKV_TEST_REDIS_URI)\n");
        return 77;
    }
    const int port = std::atoi(ports);
    const uint64_t run = std::random_device{}() | (uint64_t(std::random_device{}()) << 32);

    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 1) load[0] = -1;
    std::printf("L3 / L4 / L5 (speckv) vs redis-benchmark, %d blocks per size, one client, one request at a time\n", n);
    std::printf("machine: %s; 3 redis-server 7.0 nodes on 127.0.0.1; load average %.1f at the start; pools %s\n\n",
                bench::cpu_name().c_str(), load[0], g_pool_dir.empty() ? "anon:" : g_pool_dir.c_str());
    std::printf("| block | op | L3 p50 us | L4 p50 us | L5 p50 us | redis p50 us | L5 p99 us | redis p99 us | L3 MB/s | "
                "L4 MB/s | L5 MB/s | redis MB/s | L5/redis p50 |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    int failures = 0;
    std::vector<std::pair<size_t, std::pair<Row, Row>>> one_key;
    for (size_t si = 0; si < sizes.size(); si++) {
        const size_t bytes = sizes[si];
        std::vector<uint8_t> data(bytes), back(bytes);
        std::mt19937_64 rng(bytes);
        for (auto &b : data) b = static_cast<uint8_t>(rng());
        speckv_pool *w = open_pool(uri, "through", "w");
        speckv_pool *r = open_pool(uri, "off", "r");
        std::vector<double> put_us, get_us, l3_us;
        for (int i = 0; i < n; i++) {
            speckv_hint h{};
            h.struct_size = sizeof h;
            h.tenant = 1;
            speckv_handle b = 0;
            uint8_t hash[32];
            hash_of(run, static_cast<int>(si), i, hash);
            if (speckv_alloc(w, bytes, SPECKV_DTYPE_OPAQUE, &h, &b) != SPECKV_OK ||
                speckv_write(w, b, 0, data.data(), bytes) != SPECKV_OK) {
                failures++;
                continue;
            }
            auto t0 = clk::now();
            int rc = speckv_publish(w, b, hash, nullptr);
            put_us.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
            failures += rc != SPECKV_OK;
            speckv_free(w, b);
        }
        for (int i = 0; i < n; i++) {
            uint8_t hash[32];
            hash_of(run, static_cast<int>(si), i, hash);
            speckv_handle b = 0;
            auto t0 = clk::now();
            int rc = speckv_lookup(r, 1, hash, &b);
            get_us.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
            if (rc != SPECKV_OK) {
                failures++;
                continue;
            }
            // From the pool now (L3): lookup + read the whole block.
            speckv_handle b2 = 0;
            t0 = clk::now();
            rc = speckv_lookup(r, 1, hash, &b2);
            rc = rc ? rc : speckv_access(r, b2, 0, back.data(), bytes, 0);
            l3_us.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
            failures += rc != SPECKV_OK || std::memcmp(back.data(), data.data(), bytes) != 0;
            speckv_free(r, b2);
            speckv_free(r, b);
        }
        char js[8192];
        speckv_stats_json(r, js, sizeof js, nullptr);
        if (!std::strstr(js, "\"remote_checksum_failures\":0,")) failures++;
        speckv_pool_close(w);
        speckv_pool_close(r);
        drop_pool_file("w");
        drop_pool_file("r");
        std::vector<double> l3p_us, l4p_us, l4g_us;
        failures += !l3_l4(bytes, n, data, &l3p_us, &l4p_us, &l4g_us);
        Row rs, rg, rs1, rg1;
        bool have = redis_bench(port, bytes, n, &rs, &rg, &rs1, &rg1);
        if (!have) rs = rg = rs1 = rg1 = Row{};
        one_key.push_back({bytes, {rs1, rg1}});
        Row ps = summarize(put_us, bytes), pg = summarize(get_us, bytes), pl = summarize(l3_us, bytes);
        Row l3p = summarize(l3p_us, bytes), l4p = summarize(l4p_us, bytes), l4g = summarize(l4g_us, bytes);
        auto line = [&](const char *op, const Row &l3, const Row &l4, const Row &l5, const Row &rb) {
            std::printf("| %zu KiB | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f |\n",
                        bytes >> 10, op, l3.p50_us, l4.p50_us, l5.p50_us, rb.p50_us, l5.p99_us, rb.p99_us, l3.mbs,
                        l4.mbs, l5.mbs, rb.mbs, rb.p50_us > 0 ? l5.p50_us / rb.p50_us : 0.0);
        };
        line("put", l3p, l4p, ps, rs);
        line("get", pl, l4g, pg, rg);
        if (!have) std::printf("(redis-benchmark gave no figures for %zu bytes)\n", bytes);
    }
    std::printf("\nput: L3 = speckv_write of the block into the pool; L4 = speckv_demote of it (L3 -> L4 file);\n"
                "     L5 = speckv_publish with remote.write = through; redis = SET of a new key each time (-r).\n"
                "get: L3 = speckv_lookup + speckv_access of a block in the pool; L4 = speckv_access of a demoted block\n"
                "     (promotion + read); L5 = speckv_lookup from an empty pool (GET, verify, alloc, write, publish);\n"
                "     redis = GET of an existing key, a different one each time. L5/redis p50: above 1 = speckv slower.\n"
                "     MB/s: block bytes over the mean latency of one request.\n");
    std::printf("redis SET / GET of one key over and over (its memory reused, in cache), p50 us:");
    for (auto &[b, r] : one_key) std::printf(" %zu KiB %.0f / %.0f;", b >> 10, r.first.p50_us, r.second.p50_us);
    std::printf("\n");
    if (failures) std::printf("FAILURES: %d operations failed or returned wrong bytes\n", failures);
    return failures ? 1 : 0;
}
