// SPDX-License-Identifier: Apache-2.0
// The pool side of the KV-event round trip (tests/events/subscriber_test.py):
// one process with a file pool, an L4 tier and events.endpoint set, driven by
// commands on stdin; every operation goes through the C API. `truth` prints
// what the pool holds, read from a read-only view of the pool file (not from
// the event stream): {"blocks":[{"hash":hex,"tenant":t,"medium":"CXL"|"NVME"|"REMOTE"}..],
// "stats":{...}} on one line. With SPECKV_TEST_REDIS_URI (tests/remote/cluster.sh)
// L5 stands behind a 1 MiB L4 file and blocks are 256 KiB: demotions past
// three blocks reach REMOTE.
//
//   store N T   N blocks of tenant T, chain-hashed, published, reference released
//   demote K    speckv_demote on the first K published blocks in the pool
//   promote K   speckv_access on the first K published blocks in L4 (brings them back)
//   pressure N  allocates up to N unpublished blocks (evicting or demoting for room), frees them
//   evict T     caps tenant T at one block and allocates one: its published blocks in the pool are evicted
//   lose K      (L5) deletes from the cluster the copies of the first K published blocks on REMOTE,
//               as Redis evicting them would, then reads each: a miss, and the pool drops the block
//   truth / quit
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "pool/pool.h"
#include "remote/cluster.h"
#include "speckv.h"

namespace {

uint64_t kBlockBytes = 16384;  // 256 KiB with L5 (4 to a 1 MiB L4 file, the smallest)
constexpr uint32_t kTokens = 16;

struct Published {
    speckv_handle h;
    uint64_t tenant;
    uint8_t hash[SPECKV_HASH_BYTES];
};

std::string hex(const uint8_t *p, size_t n) {
    std::string s;
    char b[3];
    for (size_t i = 0; i < n; i++) std::snprintf(b, sizeof b, "%02x", p[i]), s += b;
    return s;
}

int die(const char *what) {
    std::fprintf(stderr, "events_driver: %s: %s\n", what, speckv_errmsg());
    return 1;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        std::fprintf(stderr, "usage: events_driver POOL_FILE L4_FILE ENDPOINT REPLAY_ENDPOINT [map|array]\n");
        return 2;
    }
    const std::string path = argv[1];
    speckv_config *cfg = nullptr;
    if (speckv_config_new(&cfg) != SPECKV_OK) return die("config");
    const std::pair<const char *, const char *> kv[] = {
        {"cold.path", argv[2]}, {"cold.capacity", "64M"}, {"events.endpoint", argv[3]},
        {"events.replay_endpoint", argv[4]}, {"events.topic", "kv-events"}, {"prefetch.enable", "0"},
        {"cache.bytes", "0"}, {"events.encoding", argc == 6 ? argv[5] : "map"}};
    for (const auto &[k, v] : kv)
        if (speckv_config_set_str(cfg, k, v) != SPECKV_OK) return die(k);
    const char *redis = std::getenv("SPECKV_TEST_REDIS_URI");
    if (redis && *redis &&
        (speckv_config_set_str(cfg, "remote.uri", redis) != SPECKV_OK ||
         speckv_config_set_str(cfg, "remote.write", "off") != SPECKV_OK ||
         speckv_config_set_str(cfg, "cold.capacity", "1M") != SPECKV_OK))
        return die("remote config");
    if (redis && *redis) kBlockBytes = 256 * 1024;
    speckv_pool *pool = nullptr;
    if (speckv_pool_open(("file:" + path + "?size=4M&max_blocks=1024").c_str(), cfg, &pool) != SPECKV_OK)
        return die("open");
    speckv_config_free(cfg);

    std::vector<Published> pub;
    std::vector<uint8_t> data(kBlockBytes);
    uint32_t next_token = 1;
    std::string line;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        std::string cmd;
        uint64_t a = 0, b = 0;
        in >> cmd >> a >> b;
        int failed = 0;
        if (cmd == "store") {
            uint8_t parent[SPECKV_HASH_BYTES];
            for (uint64_t i = 0; i < a; i++) {
                uint32_t tokens[kTokens];
                for (uint32_t &t : tokens) t = next_token++;
                Published p{};
                p.tenant = b;
                if (speckv_block_hash(SPECKV_HASH_NATIVE, b, i ? parent : nullptr, tokens, kTokens, nullptr, 0,
                                      p.hash) != SPECKV_OK)
                    return die("hash");
                std::memcpy(parent, p.hash, sizeof parent);
                speckv_hint hint{};
                hint.struct_size = sizeof hint;
                hint.tenant = b;
                hint.token_pos = i * kTokens;
                hint.token_count = kTokens;
                std::memset(data.data(), int(next_token & 0xff), data.size());
                if (speckv_alloc(pool, kBlockBytes, SPECKV_DTYPE_OPAQUE, &hint, &p.h) != SPECKV_OK) return die("alloc");
                if (speckv_write(pool, p.h, 0, data.data(), data.size()) != SPECKV_OK) return die("write");
                if (speckv_publish(pool, p.h, p.hash, nullptr) != SPECKV_OK) return die("publish");
                if (speckv_free(pool, p.h) != SPECKV_OK) return die("free");  // published: stays, evictable
                pub.push_back(p);
            }
        } else if (cmd == "demote" || cmd == "promote") {
            std::unique_ptr<speckv::Pool> ro;
            std::vector<speckv::BlockInfo> blocks;
            if (speckv::Pool::open_readonly(path, &ro) != SPECKV_OK || ro->list_blocks(&blocks) != SPECKV_OK)
                return die("read-only view");
            uint64_t done = 0;
            for (const auto &bi : blocks) {
                if (done == a) break;
                if (!bi.published || bi.cold != (cmd == "promote")) continue;
                if (cmd == "demote") {
                    failed |= speckv_demote(pool, bi.handle) != SPECKV_OK;
                } else {
                    uint8_t byte;
                    failed |= speckv_access(pool, bi.handle, 0, &byte, 1, 0) != SPECKV_OK;
                }
                done++;
            }
            if (done < a) failed = 1;
        } else if (cmd == "pressure") {
            std::vector<speckv_handle> hs;
            for (uint64_t i = 0; i < a; i++) {
                speckv_handle h;
                if (speckv_alloc(pool, kBlockBytes, SPECKV_DTYPE_OPAQUE, nullptr, &h) != SPECKV_OK) break;
                hs.push_back(h);
            }
            if (hs.empty()) failed = 1;  // fewer than N: the pool is full of what cannot go
            for (speckv_handle h : hs) speckv_free(pool, h);
        } else if (cmd == "evict") {
            // A cap of one block's pages on tenant a: its next alloc evicts
            // its unreferenced published blocks in the pool until it fits.
            speckv_hint hint{};
            hint.struct_size = sizeof hint;
            hint.tenant = a;
            speckv_handle h;
            failed |= speckv_tenant_set_quota(pool, a, kBlockBytes / 4096) != SPECKV_OK;
            if (!failed && speckv_alloc(pool, kBlockBytes, SPECKV_DTYPE_OPAQUE, &hint, &h) == SPECKV_OK)
                speckv_free(pool, h);
            else
                failed = 1;
            failed |= speckv_tenant_set_quota(pool, a, 0) != SPECKV_OK;
        } else if (cmd == "lose") {
            // The L4 file's store id is the key of its L5 directory's first record (cold_spill.cc).
            const char *redis_uri = std::getenv("SPECKV_TEST_REDIS_URI");
            std::vector<speckv::remote::Endpoint> eps;
            std::string err;
            uint64_t store = 0;
            int dfd = ::open((std::string(argv[2]) + ".l5").c_str(), O_RDONLY);
            failed = !redis_uri || !speckv::remote::parse_uri(redis_uri, &eps, &err) || dfd < 0 ||
                     pread(dfd, &store, 8, 8) != 8;
            if (dfd >= 0) ::close(dfd);
            std::unique_ptr<speckv::Pool> ro;
            std::vector<speckv::BlockInfo> blocks;
            if (speckv::Pool::open_readonly(path, &ro) != SPECKV_OK || ro->list_blocks(&blocks) != SPECKV_OK)
                return die("read-only view");
            speckv::ColdTier *l4 = pool->rep->l4_tier();
            speckv::remote::Cluster cluster(eps, 2000);
            uint64_t done = 0;
            for (const auto &bi : blocks) {
                if (failed || done == a) break;
                if (!bi.published || !bi.cold || !l4 || !l4->in_spill(bi.handle)) continue;
                char key[64];
                std::snprintf(key, sizeof key, "skv:l4:{%016" PRIx64 ":%016" PRIx64 "}", store, bi.handle);
                speckv::remote::Command del;
                del.key = key;
                del.args = {"DEL", key};
                auto rs = cluster.exec({del});
                failed |= rs[0].kind != speckv::remote::Reply::kOk || rs[0].data != "1";  // it was there
                uint8_t byte;
                failed |= speckv_access(pool, bi.handle, 0, &byte, 1, 0) != SPECKV_ENOENT;
                uint64_t found = 0;
                failed |= speckv_lookup(pool, bi.tenant, bi.content_hash, &found) != SPECKV_ENOENT;
                done++;
            }
            if (done < a) failed = 1;
        } else if (cmd == "truth") {
            std::unique_ptr<speckv::Pool> ro;
            std::vector<speckv::BlockInfo> blocks;
            if (speckv::Pool::open_readonly(path, &ro) != SPECKV_OK || ro->list_blocks(&blocks) != SPECKV_OK)
                return die("read-only view");
            std::string out = "{\"blocks\":[";
            bool first = true;
            for (const auto &bi : blocks) {
                if (!bi.published) continue;
                speckv::ColdTier *l4 = pool->rep->l4_tier();
                const char *medium = !bi.cold ? "CXL" : l4 && l4->in_spill(bi.handle) ? "REMOTE" : "NVME";
                out += std::string(first ? "" : ",") + "{\"hash\":\"" + hex(bi.content_hash, 32) +
                       "\",\"tenant\":" + std::to_string(bi.tenant) + ",\"medium\":\"" + medium + "\"}";
                first = false;
            }
            std::vector<char> js(1 << 16);
            size_t need = 0;
            if (speckv_stats_json(pool, js.data(), js.size(), &need) != SPECKV_OK) return die("stats");
            out += "],\"stats\":" + std::string(js.data()) + "}";
            std::printf("%s\n", out.c_str());
            std::fflush(stdout);
            continue;
        } else if (cmd == "quit") {
            break;
        } else {
            std::printf("error unknown command\n");
            std::fflush(stdout);
            continue;
        }
        if (failed) std::printf("failed %s\n", speckv_errmsg());
        else std::printf("ok\n");
        std::fflush(stdout);
    }
    return speckv_pool_close(pool) == SPECKV_OK ? 0 : die("close");
}
