// SPDX-License-Identifier: Apache-2.0
// `speckv demo`: the main job of README's first command. Through the public C
// API only, it stores the KV blocks of a small model (one K and one V block
// per layer, fp16), reads them back and compares, prints `pool inspect`, and
// frees the blocks again (unless --keep).
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "commands.h"
#include "pool/pool.h"
#include "speckv.h"
#include "util/json.h"

namespace speckv_cli {

void register_demo_command(CLI::App &app) {
    auto *demo = app.add_subcommand("demo", "Store and read back the KV blocks of a small model, then inspect the pool");
    static std::string uri = "file:default";
    static unsigned layers = 5, tokens = 512, kv_dim = 32;
    static bool keep = false;
    demo->add_option("URI", uri, "pool URI (default: the embedded default pool, file:default)");
    demo->add_option("--layers", layers, "layers")->check(CLI::Range(1u, 1024u));
    demo->add_option("--tokens", tokens, "tokens per block")->check(CLI::Range(1u, 1u << 20));
    demo->add_option("--kv-dim", kv_dim, "KV width (kv heads x head dim)")->check(CLI::Range(1u, 65536u));
    demo->add_flag("--keep", keep, "leave the blocks in the pool");
    add_json(demo, "one JSON object on stdout: the blocks stored and the pool's `pool inspect --json` (errors too)");
    add_quiet(demo);
    add_verbose(demo);
    demo->callback([] {
        uri = pool_uri(uri);
        speckv_pool *pool = nullptr;
        speckv_config *cfg = nullptr;
        int rc = speckv_config_new(&cfg);
        if (rc == SPECKV_OK) set_log(cfg);
        if (rc == SPECKV_OK) rc = speckv_pool_open(uri.c_str(), cfg, &pool);
        speckv_config_free(cfg);
        if (rc != SPECKV_OK) {
            error(std::string("cannot open ") + uri + ": " + speckv_errmsg(), rc);
            return void(g_exit = 1);
        }
        size_t bytes = size_t(tokens) * kv_dim * 2;  // fp16
        std::vector<uint16_t> data(bytes / 2), back(bytes / 2);
        std::vector<speckv_handle> hs;
        uint64_t seed = 0x9E3779B97F4A7C15ull;
        size_t stored = 0, mismatches = 0;
        for (unsigned l = 0; l < layers && rc == SPECKV_OK; l++) {
            for (int kv = 0; kv < 2 && rc == SPECKV_OK; kv++) {
                for (auto &x : data) {  // fp16 values in [-2, 2): sign, exponent 13..15, random mantissa
                    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
                    x = static_cast<uint16_t>(((seed >> 20) & 0x8000) | ((13 + (seed >> 40) % 3) << 10) | (seed & 0x3FF));
                }
                speckv_hint h;
                std::memset(&h, 0, sizeof h);
                h.struct_size = sizeof h;
                h.request = 1;
                h.layer = l;
                h.token_count = tokens;
                speckv_handle hd;
                rc = speckv_alloc(pool, bytes, SPECKV_DTYPE_FP16, &h, &hd);
                if (rc == SPECKV_OK) rc = speckv_write(pool, hd, 0, data.data(), bytes);
                if (rc == SPECKV_OK) rc = speckv_access(pool, hd, 0, back.data(), bytes, 0);
                if (rc == SPECKV_OK) {
                    hs.push_back(hd);
                    stored += bytes;
                    mismatches += std::memcmp(data.data(), back.data(), bytes) != 0;
                }
            }
        }
        if (rc != SPECKV_OK) {
            error(std::string("demo failed: ") + speckv_strerror(rc) + ": " + speckv_errmsg(), rc);
            g_exit = 1;
        } else if (mismatches) {
            error(std::to_string(mismatches) + " of " + std::to_string(hs.size()) +
                      " KV blocks read back differ from what was written",
                  SPECKV_ECORRUPT);
            g_exit = 1;
        } else if (g_opt.json) {
            std::unique_ptr<speckv::Pool> ro;
            speckv::Json o = {{"blocks", hs.size()}, {"layers", layers}, {"tokens", tokens},
                              {"kv_dim", kv_dim},    {"bytes", stored},   {"identical", true}};
            if (speckv::Pool::open_readonly_uri(uri, &ro) == SPECKV_OK) {
                speckv::PoolInfo i;
                ro->info(&i);
                o["pool"] = info_value(i);
            } else {
                o["pool"] = nullptr;
            }
            std::printf("%s\n", speckv::json_text(o).c_str());
        } else if (!g_opt.quiet) {
            std::printf("stored and read back %zu KV blocks (%u layers x K,V; %u tokens x %u fp16), %zu bytes: %s\n\n",
                        hs.size(), layers, tokens, kv_dim, stored, mismatches ? "MISMATCH" : "all identical");
        }
        if (!g_opt.json && !g_opt.quiet) {
            std::unique_ptr<speckv::Pool> ro;
            if (speckv::Pool::open_readonly_uri(uri, &ro) == SPECKV_OK) {
                speckv::PoolInfo i;
                ro->info(&i);
                print_info(i, false);
            }
        }
        if (!keep)
            for (auto h : hs) speckv_free(pool, h);
        speckv_pool_close(pool);
    });
}

}  // namespace speckv_cli
