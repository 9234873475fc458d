// SPDX-License-Identifier: Apache-2.0
// L3 pages stored as codec records (docs/codec.md §17), through the public
// API: what a write that completes a page costs (encode + decode for L1),
// what a read from L3 costs (copy + CRC32C + decode), the bytes L3 holds and
// the link would carry — per preset, beside the same pool storing pages in
// clear and beside memcpy of the same bytes, in the same run. The pages are
// real K/V: stories260K's cache over a greedy continuation, as FP16 pages of
// 64 tokens x kv_dim, cycled to fill `--mib` MiB.
//   ./build/release/bench/bench_l3_codec [--repeats N] [--mib N] [--model PATH] [--block-pages N]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kv_eval.h"
#include "llama2.h"
#include "data_dir.h"
#include "speckv.h"
#include "bench_util.h"

namespace {

using Clock = std::chrono::steady_clock;

using bench::median;

using bench::cpu_name;

[[noreturn]] void die(const char *what, int rc) {
    std::fprintf(stderr, "bench_l3_codec: %s: %s (%s)\n", what, speckv_strerror(rc), speckv_errmsg());
    std::exit(1);
}

struct Row {
    const char *name, *key_mode, *value_mode;
    int pack;  // config codec.pack
};

struct Result {
    double write_gbps, read_gbps, ratio, capacity;  // capacity: pages in clear / pool pages used
};

constexpr size_t kPage = 4096;

// One run: a fresh anonymous pool, every page written (one block of 4 pages
// per K or V unit) then read back with no L1 and no L2, so each read is an L3
// read. GB/s are of page bytes in clear.
Result run(const Row &row, const std::vector<std::vector<uint16_t>> &pages, const std::vector<bool> &is_value,
           int kv_dim, size_t per) {
    speckv_config *cfg = nullptr;
    speckv_config_new(&cfg);
    speckv_config_set_int(cfg, "cache.bytes", 0);
    speckv_config_set_int(cfg, "prefetch.l2_bytes", 0);
    speckv_config_set_int(cfg, "codec.channels", kv_dim);
    speckv_config_set_int(cfg, "codec.pack", row.pack);
    if (int rc = speckv_config_set_str(cfg, "codec.key_mode", row.key_mode)) die("codec.key_mode", rc);
    if (int rc = speckv_config_set_str(cfg, "codec.value_mode", row.value_mode)) die("codec.value_mode", rc);
    const size_t n = pages.size();
    char uri[64];
    std::snprintf(uri, sizeof uri, "anon:?size=%zu", (n * kPage * 5 / 4 + (8u << 20)) & ~size_t(4095));
    speckv_pool *p = nullptr;
    if (int rc = speckv_pool_open(uri, cfg, &p)) die("open", rc);
    speckv_config_free(cfg);
    std::vector<speckv_handle> hs;
    auto alloc_all = [&] {
        hs.clear();
        for (size_t i = 0; i < n; i += per) {
            speckv_hint h{};
            h.struct_size = sizeof h;
            h.flags = is_value[i] ? SPECKV_HINT_VALUES : SPECKV_HINT_KEYS;
            speckv_handle b;
            if (int rc = speckv_alloc(p, std::min(per, n - i) * kPage, SPECKV_DTYPE_FP16, &h, &b)) die("alloc", rc);
            hs.push_back(b);
        }
    };
    // Two passes into fresh blocks: the first faults the pool's pages in;
    // the second is timed (each block written once, as a KV cache is: the
    // write of a block's last page also packs it, with codec.pack).
    alloc_all();
    for (size_t i = 0; i < n; i++)
        if (int rc = speckv_write(p, hs[i / per], (i % per) * kPage, pages[i].data(), kPage)) die("write", rc);
    for (speckv_handle b : hs) speckv_free(p, b);
    alloc_all();
    auto t0 = Clock::now();
    for (size_t i = 0; i < n; i++)
        if (int rc = speckv_write(p, hs[i / per], (i % per) * kPage, pages[i].data(), kPage)) die("write", rc);
    double wsec = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<unsigned char> dst(kPage);
    t0 = Clock::now();
    for (size_t i = 0; i < n; i++)
        if (int rc = speckv_access(p, hs[i / per], (i % per) * kPage, dst.data(), kPage, 0)) die("access", rc);
    double rsec = std::chrono::duration<double>(Clock::now() - t0).count();
    speckv_pool_stats st{};
    st.struct_size = sizeof st;
    speckv_stats(p, &st);
    speckv_pool_close(p);
    double bytes = double(n * kPage);
    // Each pass codes every page: halve the counters (the stats cover both).
    double stored = double(st.codec_stored_bytes / 2 + (n - st.codec_pages_encoded / 2) * kPage);
    return {bytes / wsec / 1e9, bytes / rsec / 1e9, bytes / stored, double(n) / double(st.pages_used)};
}

double memcpy_gbps(size_t n) {
    // The same access pattern as the pool reads: n distinct source pages
    // (touched first), one destination page. The faster of two passes.
    std::vector<unsigned char> src(n * kPage, 1), dst(kPage);
    double best = 0;
    for (int pass = 0; pass < 2; pass++) {
        auto t0 = Clock::now();
        for (size_t i = 0; i < n; i++) {
            std::memcpy(dst.data(), src.data() + i * kPage, kPage);
            asm volatile("" : : "r"(dst.data()) : "memory");
        }
        best = std::max(best, double(n * kPage) / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
    }
    return best;
}

}  // namespace

int main(int argc, char **argv) {
    int repeats = 7;
    size_t mib = 16, per = 4;  // per: pages per block
    std::string model = speckv_data::path("models/stories260K/stories260K.bin");
    CLI::App app{"L3 pages as codec records: write/read GB/s and ratio per preset (bench/README.md)", "bench_l3_codec"};
    app.add_option("--repeats", repeats, "runs per cell (median reported)")->check(CLI::PositiveNumber);
    app.add_option("--mib", mib, "MiB of K/V per run")->check(CLI::PositiveNumber);
    app.add_option("--model", model, "llama2.c model file");
    app.add_option("--block-pages", per, "pages per block")->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);
    llama2::Model m;
    std::string err;
    if (!m.load(model, &err)) {
        std::fprintf(stderr, "bench_l3_codec: %s\n", err.c_str());
        return 1;
    }
    const int kv_dim = m.c.kv_dim();
    const int page_tokens = int(kPage / 2) / kv_dim;
    std::vector<int> toks = llama2::greedy(m, m.c.seq_len - 1);
    toks.insert(toks.begin(), 1);  // BOS
    llama2::KvCapture cap = llama2::capture_kv(m, toks);
    // Real pages: K of every layer in layer order, then V, cut into blocks
    // of `per` pages of one kind (a block's hint says K or V).
    std::vector<std::vector<uint16_t>> real;
    std::vector<bool> real_v;
    for (bool v : {false, true}) {
        std::vector<std::vector<uint16_t>> kind;
        for (int l = 0; l < cap.n_layers; l++) {
            size_t np = 0;
            std::vector<uint16_t> all = llama2::fp16_pages(cap, l, v, page_tokens, &np);
            for (size_t j = 0; j < np; j++)
                kind.emplace_back(all.begin() + long(j * kPage / 2), all.begin() + long((j + 1) * kPage / 2));
        }
        for (size_t j = 0; j < kind.size() / per * per; j++) {  // whole blocks only: none mixes K and V
            real.push_back(kind[j]);
            real_v.push_back(v);
        }
    }
    if (real.empty()) {
        std::fprintf(stderr, "bench_l3_codec: the model gave no whole %zu-page block of K or of V\n", per);
        return 1;
    }
    const size_t n = std::max(real.size(), mib * (1u << 20) / kPage) / real.size() * real.size();
    std::vector<std::vector<uint16_t>> pages(n);
    std::vector<bool> is_value(n);
    for (size_t i = 0; i < n; i++) {
        pages[i] = real[i % real.size()];
        is_value[i] = real_v[i % real.size()];
    }
    const Row rows[] = {
        {"raw (in clear)", "raw", "raw", 1},  {"paper", "paper", "paper", 1},     {"int8", "int8", "int8", 1},
        {"int8, unpacked", "int8", "int8", 0}, {"k6 / vp6", "k6", "vp6", 1},       {"k5 / vp5", "k5", "vp5", 1},
        {"k6s / vp6s", "k6s", "vp6s", 1},      {"k5s / vp5s", "k5s", "vp5s", 1},  // split Rice (docs/codec.md §18)
        {"k5p / v5p", "k5p", "v5p", 1},        {"k4p / v4p", "k4p", "v4p", 1},    // fixed-width packed (§19)
        {"k3p / v3p", "k3p", "v3p", 1},
    };
    std::printf("L3 pages as codec records on %s, %u CPUs; %s (kv_dim %d, %d-token FP16 pages: %zu real pages\n"
                "cycled to %zu MiB, blocks of %zu pages); no L1, no L2: every read is an L3 read. `pages` = pages in\n"
                "clear / pool pages used (what packing gives). Median of %d runs; ratios from the same run.\n\n",
                cpu_name().c_str(), std::thread::hardware_concurrency(), model.c_str(), kv_dim, page_tokens,
                real.size(), mib, per, repeats);
    std::printf("%-16s %8s %8s %11s %11s %12s %12s %12s\n", "preset K / V", "ratio", "pages", "write GB/s",
                "read GB/s", "read/clear", "read/memcpy", "write/clear");
    std::vector<double> mc;
    std::vector<std::vector<Result>> res(std::size(rows));
    for (int r = 0; r < repeats; r++) {
        mc.push_back(memcpy_gbps(n));
        for (size_t k = 0; k < std::size(rows); k++) res[k].push_back(run(rows[k], pages, is_value, kv_dim, per));
    }
    auto med = [&](size_t k, double Result::*f) {
        std::vector<double> v;
        for (auto &x : res[k]) v.push_back(x.*f);
        return median(v);
    };
    // Ratios to clear and to memcpy per run, then the median of those.
    auto med_ratio = [&](size_t k, double Result::*f, bool vs_memcpy) {
        std::vector<double> v;
        for (size_t r = 0; r < res[k].size(); r++) v.push_back(res[k][r].*f / (vs_memcpy ? mc[r] : res[0][r].*f));
        return median(v);
    };
    for (size_t k = 0; k < std::size(rows); k++)
        std::printf("%-16s %7.2fx %7.2fx %11.2f %11.2f %11.2fx %11.2fx %11.2fx\n", rows[k].name, med(k, &Result::ratio),
                    med(k, &Result::capacity), med(k, &Result::write_gbps), med(k, &Result::read_gbps), med_ratio(k, &Result::read_gbps, false),
                    med_ratio(k, &Result::read_gbps, true), med_ratio(k, &Result::write_gbps, false));
    std::printf("%-16s %8s %8s %11s %11.2f\n", "memcpy 4 KiB", "", "", "", median(mc));
    return 0;
}
