// SPDX-License-Identifier: Apache-2.0
// KV events (issue 24 part 2; docs/events.md): what publishing them costs the
// pool's publish path. speckv_publish latency (p50/p99) and publish+evict
// throughput with events off, on with nobody subscribed, and on with a live
// subscriber draining the PUB socket; alternated rounds, medians. See
// bench/README.md "KV events".
//
//   bench_events [--blocks N] [--rounds R] [--dir DIR]
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "speckv.h"

namespace {

uint64_t ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

void must(int rc, const char *what) {
    if (rc != SPECKV_OK) {
        std::fprintf(stderr, "bench_events: %s: %s: %s\n", what, speckv_strerror(rc), speckv_errmsg());
        std::exit(1);
    }
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

uint64_t stat_of(speckv_pool *p, const char *key) {
    std::vector<char> js(1 << 16);
    size_t need = 0;
    must(speckv_stats_json(p, js.data(), js.size(), &need), "stats");
    const std::string s(js.data()), k = std::string("\"") + key + "\":";
    const size_t at = s.find(k);
    return at == std::string::npos ? 0 : std::strtoull(s.c_str() + at + k.size(), nullptr, 10);
}

struct Round {
    double p50_ns, p99_ns, per_s;
    uint64_t received, dropped;
};

// mode 0: events off; 1: on, nobody subscribed; 2: on, a subscriber drains.
Round run(int mode, int blocks, const std::string &dir, int round) {
    const std::string ep = "ipc://" + dir + "/bench-events-" + std::to_string(getpid()) + "-" + std::to_string(round);
    speckv_config *cfg;
    must(speckv_config_new(&cfg), "config");
    if (mode) must(speckv_config_set_str(cfg, "events.endpoint", ep.c_str()), "events.endpoint");
    must(speckv_config_set_str(cfg, "prefetch.enable", "0"), "prefetch.enable");
    speckv_pool *p;
    must(speckv_pool_open(("anon:?size=256M&max_blocks=" + std::to_string(blocks + 64)).c_str(), cfg, &p), "open");
    speckv_config_free(cfg);

    std::atomic<bool> stop{false};
    std::atomic<uint64_t> received{0};
    void *ctx = nullptr;
    std::thread sub;
    if (mode == 2) {
        ctx = zmq_ctx_new();
        void *s = zmq_socket(ctx, ZMQ_SUB);
        zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0);
        const int hwm = 0, to = 100;
        zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
        zmq_setsockopt(s, ZMQ_RCVTIMEO, &to, sizeof to);
        if (zmq_connect(s, ep.c_str()) != 0) std::exit(1);
        sub = std::thread([s, &stop, &received] {
            zmq_msg_t m;
            zmq_msg_init(&m);
            for (;;) {
                if (zmq_msg_recv(&m, s, 0) < 0) {
                    if (stop.load()) break;
                    continue;
                }
                if (!zmq_msg_more(&m)) received.fetch_add(1);  // one per message (its last frame)
            }
            zmq_msg_close(&m);
            zmq_close(s);
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the subscription reaches the publisher
    }

    std::vector<uint8_t> page(4096, 0x5a);
    std::vector<double> lat;
    lat.reserve(blocks);
    const uint64_t t0 = ns();
    for (int i = 0; i < blocks; i++) {
        speckv_hint hint{};
        hint.struct_size = sizeof hint;
        hint.token_count = 16;
        speckv_handle h;
        uint8_t hash[SPECKV_HASH_BYTES];
        const uint32_t tok[2] = {uint32_t(i), uint32_t(round)};
        must(speckv_block_hash(SPECKV_HASH_NATIVE, 0, nullptr, tok, 2, nullptr, 0, hash), "hash");
        must(speckv_alloc(p, page.size(), SPECKV_DTYPE_OPAQUE, &hint, &h), "alloc");
        must(speckv_write(p, h, 0, page.data(), page.size()), "write");
        const uint64_t a = ns();
        must(speckv_publish(p, h, hash, nullptr), "publish");
        lat.push_back(double(ns() - a));
        must(speckv_free(p, h), "free");
    }
    const double secs = double(ns() - t0) / 1e9;
    Round r{};
    std::sort(lat.begin(), lat.end());
    r.p50_ns = lat[lat.size() / 2];
    r.p99_ns = lat[lat.size() * 99 / 100];
    r.per_s = blocks / secs;
    if (mode) {
        // Wait (bounded) for the thread to send what is queued.
        for (int i = 0; i < 200 && stat_of(p, "events_sent") + stat_of(p, "events_dropped") < uint64_t(blocks); i++)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        r.dropped = stat_of(p, "events_dropped");
    }
    must(speckv_pool_close(p), "close");
    if (mode == 2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        stop = true;
        sub.join();
        zmq_ctx_term(ctx);
        r.received = received.load();
    }
    return r;
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"speckv_publish cost with KV events off / on / on with a subscriber"};
    int blocks = 20000, rounds = 5;
    std::string dir = "/tmp";
    app.add_option("--blocks", blocks, "blocks published per round")->check(CLI::Range(100, 60000));
    app.add_option("--rounds", rounds, "alternated rounds per mode (medians)")->check(CLI::Range(1, 50));
    app.add_option("--dir", dir, "directory for the ipc:// endpoint");
    CLI11_PARSE(app, argc, argv);

    const char *names[3] = {"events off", "on, no subscriber", "on, subscriber"};
    std::vector<Round> res[3];
    for (int r = 0; r < rounds; r++)
        for (int m = 0; m < 3; m++) res[m].push_back(run(m, blocks, dir, r * 3 + m));
    std::printf("speckv_publish, %d blocks of 4 KiB per round, median of %d alternated rounds\n", blocks, rounds);
    std::printf("| mode | publish p50 ns | publish p99 ns | alloc+write+publish+free /s | batches received | events dropped |\n");
    std::printf("|---|---:|---:|---:|---:|---:|\n");
    for (int m = 0; m < 3; m++) {
        auto col = [&](auto f) {
            std::vector<double> v;
            for (const Round &x : res[m]) v.push_back(double(f(x)));
            return median(v);
        };
        std::printf("| %s | %.0f | %.0f | %.0f | %s | %s |\n", names[m], col([](const Round &x) { return x.p50_ns; }),
                    col([](const Round &x) { return x.p99_ns; }), col([](const Round &x) { return x.per_s; }),
                    m == 2 ? std::to_string(uint64_t(col([](const Round &x) { return x.received; }))).c_str() : "-",
                    m ? std::to_string(uint64_t(col([](const Round &x) { return x.dropped; }))).c_str() : "-");
    }
    return 0;
}
