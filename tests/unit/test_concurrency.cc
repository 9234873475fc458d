// Many threads alloc/write/access/free one pool at once (run under TSan in CI).
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "speckv.h"
#include "testutil.h"

TEST_CASE("threads hammer one pool: no lost or torn data") {
    std::string path = fresh_pool("threads");
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open(("file:" + path + "?size=32M").c_str(), nullptr, &p) == SPECKV_OK);
    // Shared blocks every thread reads while one thread at a time rewrites them whole.
    constexpr int kShared = 4;
    speckv_handle shared[kShared];
    for (int i = 0; i < kShared; i++) {
        REQUIRE(speckv_alloc(p, 8192, 0, nullptr, &shared[i]) == SPECKV_OK);
        std::vector<unsigned char> v(8192, static_cast<unsigned char>(i + 1));
        REQUIRE(speckv_write(p, shared[i], 0, v.data(), v.size()) == SPECKV_OK);
    }
    std::atomic<int> failures{0};
    auto worker = [&](int id) {
        std::vector<speckv_handle> mine;
        std::vector<unsigned char> buf(3 * 4096), back(3 * 4096);
        for (int it = 0; it < 300; it++) {
            size_t n = 1 + (it * 7 + id) % (3 * 4096);
            speckv_handle h;
            if (speckv_alloc(p, n, 0, nullptr, &h) != SPECKV_OK) {
                failures++;
                continue;
            }
            std::memset(buf.data(), (id * 31 + it) & 0xFF, n);
            if (speckv_write(p, h, 0, buf.data(), n) != SPECKV_OK) failures++;
            if (speckv_access(p, h, 0, back.data(), n, 0) != SPECKV_OK || std::memcmp(buf.data(), back.data(), n))
                failures++;
            mine.push_back(h);
            if (mine.size() > 8) {
                if (speckv_free(p, mine.front()) != SPECKV_OK) failures++;
                mine.erase(mine.begin());
            }
            // A shared page: whatever version we see must be uniform (no tearing).
            int s = (it + id) % kShared;
            if (id == s && it % 5 == 0) {
                std::vector<unsigned char> v(8192, static_cast<unsigned char>(it & 0xFF));
                if (speckv_write(p, shared[s], 0, v.data(), v.size()) != SPECKV_OK) failures++;
            } else {
                unsigned char pg[4096];
                if (speckv_access(p, shared[s], 4096, pg, sizeof pg, 0) != SPECKV_OK) failures++;
                for (unsigned char c : pg)
                    if (c != pg[0]) {
                        failures++;
                        break;
                    }
            }
        }
        for (auto h : mine)
            if (speckv_free(p, h) != SPECKV_OK) failures++;
    };
    std::vector<std::thread> ts;
    for (int i = 0; i < 4; i++) ts.emplace_back(worker, i);
    for (auto &t : ts) t.join();
    CHECK(failures.load() == 0);
    speckv_pool_stats st;
    st.struct_size = sizeof st;
    REQUIRE(speckv_stats(p, &st) == SPECKV_OK);
    CHECK(st.blocks_live == kShared);
    CHECK(st.checksum_failures == 0);
    speckv_pool_close(p);
}

TEST_CASE("use after free racing with reads returns EBADHANDLE, never foreign bytes") {
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open("anon:?size=16M", nullptr, &p) == SPECKV_OK);
    std::atomic<speckv_handle> cur{0};
    std::atomic<bool> stop{false};
    std::atomic<int> bad{0};
    std::thread churn([&] {
        for (int i = 0; i < 2000; i++) {
            speckv_handle h;
            if (speckv_alloc(p, 4096, 0, nullptr, &h) != SPECKV_OK) continue;
            std::vector<unsigned char> v(4096, static_cast<unsigned char>(0x40 | (h & 0x3F)));
            speckv_write(p, h, 0, v.data(), v.size());
            cur.store(h);
            speckv_free(p, h);
        }
        stop = true;
    });
    std::thread reader([&] {
        unsigned char pg[4096];
        while (!stop) {
            speckv_handle h = cur.load();
            if (!h) continue;
            int rc = speckv_access(p, h, 0, pg, sizeof pg, 0);
            if (rc == SPECKV_OK) {
                // Either zeros (not yet written) or this block's own byte.
                unsigned char want = static_cast<unsigned char>(0x40 | (h & 0x3F));
                for (unsigned char c : pg)
                    if (c != want && c != 0) {
                        bad++;
                        break;
                    }
            } else if (rc != SPECKV_EBADHANDLE) {
                bad++;
            }
        }
    });
    churn.join();
    reader.join();
    CHECK(bad.load() == 0);
    speckv_pool_close(p);
}

// Sharing under threads (TSan in CI): lock-free lookups race publishes,
// releases and evictions. A published block must always read as what its
// key implies; every failure status must be an expected one.
TEST_CASE("threads publish, look up, read and release shared blocks under eviction pressure") {
    std::string path = fresh_pool("sharethreads");
    speckv_pool *p = nullptr;
    // 48 slots for 64 keys: evictions happen all the time.
    REQUIRE(speckv_pool_open(("file:" + path + "?size=4M&max_blocks=48").c_str(), nullptr, &p) == SPECKV_OK);
    auto key_of = [](uint32_t k, uint8_t *out) {
        uint32_t tok[2] = {k, 0xC0FFEEu};
        return speckv_block_hash(SPECKV_HASH_NATIVE, 0, nullptr, tok, 2, nullptr, 0, out);
    };
    std::atomic<int> failures{0}, hits{0};
    auto worker = [&](int id) {
        uint64_t x = 0x9E3779B97F4A7C15ull * uint64_t(id + 1);
        std::vector<unsigned char> buf(4096), back(4096);
        std::vector<speckv_handle> held;
        for (int it = 0; it < 1500; it++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint32_t k = uint32_t(x % 64);
            uint8_t h[SPECKV_HASH_BYTES];
            if (key_of(k, h) != SPECKV_OK) failures++;
            std::memset(buf.data(), int(k + 1), buf.size());
            speckv_handle blk;
            int rc = speckv_lookup(p, 0, h, &blk);
            if (rc == SPECKV_OK) {
                hits++;
                if (speckv_access(p, blk, 0, back.data(), back.size(), 0) != SPECKV_OK || back != buf) failures++;
                held.push_back(blk);
            } else if (rc == SPECKV_ENOENT) {
                rc = speckv_alloc(p, buf.size(), 0, nullptr, &blk);
                if (rc == SPECKV_ENOSPC) continue;  // every slot referenced right now
                if (rc != SPECKV_OK || speckv_write(p, blk, 0, buf.data(), buf.size()) != SPECKV_OK) {
                    failures++;
                    continue;
                }
                speckv_handle canon;
                rc = speckv_publish(p, blk, h, &canon);
                if (rc == SPECKV_EEXIST) {
                    if (speckv_free(p, blk) != SPECKV_OK) failures++;
                } else if (rc != SPECKV_OK) {
                    failures++;
                    continue;
                }
                held.push_back(canon);
            } else {
                failures++;
            }
            while (held.size() > 3) {
                if (speckv_free(p, held.front()) != SPECKV_OK) failures++;
                held.erase(held.begin());
            }
        }
        for (speckv_handle b : held)
            if (speckv_free(p, b) != SPECKV_OK) failures++;
    };
    std::vector<std::thread> ts;
    for (int i = 0; i < 4; i++) ts.emplace_back(worker, i);
    for (auto &t : ts) t.join();
    CHECK(failures.load() == 0);
    CHECK(hits.load() > 0);
    speckv_pool_stats st{};
    st.struct_size = sizeof st;
    REQUIRE(speckv_stats(p, &st) == SPECKV_OK);
    CHECK(st.evictions > 0);
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
}

// The prefetch thread reads pages while other threads allocate, write,
// read, translate and free them (TSan in CI). Every read must return the
// bytes last written; nothing may crash or hang.
TEST_CASE("threads access, prefetch, translate, alloc and free at once") {
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    REQUIRE(speckv_config_set_int(c, "cache.bytes", 8 * 4096) == SPECKV_OK);
    REQUIRE(speckv_config_set_int(c, "prefetch.l2_bytes", 32 * 4096) == SPECKV_OK);
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open("anon:?size=16M", c, &p) == SPECKV_OK);
    speckv_config_free(c);
    std::atomic<int> failures{0};
    std::atomic<bool> done{false};
    auto engine = [&](int id) {
        std::vector<unsigned char> buf(2 * 4096), back(2 * 4096);
        for (int it = 0; it < 200; it++) {
            uint64_t req = uint64_t(id) * 1000 + uint64_t(it % 5);
            std::vector<speckv_handle> hs;
            for (uint32_t l = 0; l < 4; l++) {
                speckv_hint h{};
                h.struct_size = sizeof h;
                h.request = req;
                h.layer = l;
                h.token_count = 16;
                speckv_handle b;
                if (speckv_alloc(p, buf.size(), SPECKV_DTYPE_FP16, &h, &b) != SPECKV_OK) {
                    failures++;
                    continue;
                }
                std::memset(buf.data(), int((req + l + it) & 0xFF), buf.size());
                if (speckv_write(p, b, 0, buf.data(), buf.size()) != SPECKV_OK) failures++;
                hs.push_back(b);
            }
            for (uint32_t l = 0; l < hs.size(); l++) {
                speckv_hint h{};
                h.struct_size = sizeof h;
                h.request = req;
                h.layer = (l + 1) % 4;
                if (speckv_prefetch(p, &h) != SPECKV_OK) failures++;
                if (speckv_access(p, hs[l], 0, back.data(), back.size(), 0) != SPECKV_OK) failures++;
                else if (back[0] != static_cast<unsigned char>((req + l + it) & 0xFF) ||
                         std::memcmp(back.data(), back.data() + 1, back.size() - 1) != 0)
                    failures++;
                speckv_handle t;
                if (speckv_translate(p, 0, req, l, 3, &t, nullptr) != SPECKV_OK || t != hs[l]) failures++;
            }
            for (speckv_handle b : hs)
                if (speckv_free(p, b) != SPECKV_OK) failures++;
        }
    };
    std::thread hinter([&] {  // hints for whatever may or may not exist right now
        uint64_t x = 88172645463325252ull;
        while (!done.load()) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            speckv_hint h{};
            h.struct_size = sizeof h;
            h.request = (x % 2) * 1000 + (x >> 8) % 5;
            h.layer = uint32_t((x >> 16) % 4);
            speckv_prefetch(p, &h);
        }
    });
    std::vector<std::thread> ts;
    for (int i = 0; i < 2; i++) ts.emplace_back(engine, i);
    for (auto &t : ts) t.join();
    done = true;
    hinter.join();
    CHECK(failures.load() == 0);
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
}
