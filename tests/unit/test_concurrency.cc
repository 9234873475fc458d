// SPDX-License-Identifier: Apache-2.0
// Many threads alloc/write/access/free one pool at once (run under TSan in CI).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "codec/codec.h"
#include "pool/pool.h"
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

TEST_CASE("readers see exact bytes while blocks move between L3 and L4") {
    // One holder process: threads read, pin, rewrite and allocate while one
    // thread demotes blocks and the reads bring them back. Every byte read
    // must be the block's own (a block moving is re-read from where it went).
    std::string path = fresh_pool("l4-threads"), l4 = path + ".l4";
    unlink(l4.c_str());
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    REQUIRE(speckv_config_set_str(c, "cold.path", l4.c_str()) == SPECKV_OK);
    REQUIRE(speckv_config_set_str(c, "cold.batch", "4") == SPECKV_OK);
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open(("file:" + path + "?size=4M&max_blocks=512").c_str(), c, &p) == SPECKV_OK);
    speckv_config_free(c);
    constexpr int kBlocks = 24;
    constexpr size_t kBytes = 3 * 4096 + 100;
    // Block b's byte i is (b * 7 + version + i) & 0xFF; its version only grows.
    auto fill = [](int b, int version, std::vector<unsigned char> &v) {
        for (size_t i = 0; i < v.size(); i++) v[i] = static_cast<unsigned char>(b * 7 + version + int(i));
    };
    speckv_handle hs[kBlocks];
    std::atomic<int> version[kBlocks];
    std::vector<unsigned char> v(kBytes);
    for (int b = 0; b < kBlocks; b++) {
        REQUIRE(speckv_alloc(p, kBytes, 0, nullptr, &hs[b]) == SPECKV_OK);
        fill(b, 0, v);
        REQUIRE(speckv_write(p, hs[b], 0, v.data(), v.size()) == SPECKV_OK);
        version[b] = 0;
    }
    std::atomic<bool> stop{false};
    std::atomic<int> failures{0}, reads{0};
    auto consistent = [&](int b, const unsigned char *d) {
        int ver = (d[0] - b * 7) & 0xFF;
        for (size_t i = 0; i < kBytes; i++)
            if (d[i] != static_cast<unsigned char>(b * 7 + ver + int(i))) return false;
        return true;
    };
    auto reader = [&](int id) {
        std::vector<unsigned char> buf(kBytes);
        for (int it = 0; !stop.load() && it < 4000; it++) {
            int b = (it * 5 + id) % kBlocks;
            // Odd blocks are pinned, never rewritten (a pin does not wait for
            // a write already under way: pinned memory is only stable for
            // blocks nobody writes); even blocks are rewritten and accessed.
            if (b % 2 == 1 && it % 3 == 0) {
                const void *ptr;
                size_t len;
                if (int rc = speckv_pin(p, hs[b], &ptr, &len); rc != SPECKV_OK) {
                    if (failures++ < 3) MESSAGE("pin: ", rc, " ", std::string(speckv_errmsg()));
                    continue;
                }
                std::memcpy(buf.data(), ptr, kBytes);
                speckv_unpin(p, hs[b]);
            } else if (int rc = speckv_access(p, hs[b], 0, buf.data(), kBytes, 0); rc != SPECKV_OK) {
                if (failures++ < 3) MESSAGE("access: ", rc, " ", std::string(speckv_errmsg()));
                continue;
            }
            // A read racing a rewrite sees each page whole, old or new:
            // check page by page.
            for (size_t off = 0; off < kBytes; off += 4096) {
                size_t n = std::min<size_t>(4096, kBytes - off);
                int ver = (buf[off] - b * 7 - int(off)) & 0xFF;
                for (size_t i = 0; i < n; i++)
                    if (buf[off + i] != static_cast<unsigned char>(b * 7 + ver + int(off + i))) {
                        if (failures++ < 3) MESSAGE("torn: block ", b, " offset ", off + i);
                        break;
                    }
            }
            reads++;
        }
    };
    auto writer = [&] {
        std::vector<unsigned char> w(kBytes);
        for (int it = 0; !stop.load() && it < 600; it++) {
            int b = (it * 11) % kBlocks & ~1;
            int ver = version[b].load() + 1;
            fill(b, ver, w);
            int rc = speckv_write(p, hs[b], 0, w.data(), w.size());
            if (rc == SPECKV_OK) version[b] = ver;
            else if (rc != SPECKV_EBUSY && failures++ < 3) MESSAGE("write: ", rc, " ", std::string(speckv_errmsg()));
        }
    };
    auto demoter = [&] {
        for (int it = 0; !stop.load() && it < 1500; it++) {
            int rc = speckv_demote(p, hs[(it * 3) % kBlocks]);
            if (rc != SPECKV_OK && rc != SPECKV_EBUSY && failures++ < 3) MESSAGE("demote: ", rc, " ", std::string(speckv_errmsg()));
        }
    };
    // Allocations and frees go on while demotions write to L4 off the lock.
    auto churn = [&] {
        for (int it = 0; !stop.load() && it < 400; it++) {
            speckv_handle x;
            if (speckv_alloc(p, kBytes, 0, nullptr, &x) != SPECKV_OK) continue;  // ENOSPC under pressure: fine
            std::vector<unsigned char> junk(kBytes, uint8_t(it));
            int rc = speckv_write(p, x, 0, junk.data(), junk.size());
            if (rc != SPECKV_OK && rc != SPECKV_EBUSY && failures++ < 3) MESSAGE("churn write: ", rc);
            if (it % 2) (void)speckv_demote(p, x);
            if (speckv_free(p, x) != SPECKV_OK && failures++ < 3) MESSAGE("churn free: ", std::string(speckv_errmsg()));
        }
    };
    std::vector<std::thread> ts;
    for (int i = 0; i < 3; i++) ts.emplace_back(reader, i);
    ts.emplace_back(writer);
    ts.emplace_back(demoter);
    ts.emplace_back(demoter);  // two at once: one block is never demoted twice at the same time
    ts.emplace_back(churn);
    for (auto &t : ts) t.join();
    CHECK(failures.load() == 0);
    CHECK(reads.load() > 0);
    speckv_pool_stats s{};
    s.struct_size = sizeof s;
    REQUIRE(speckv_stats(p, &s) == SPECKV_OK);
    CHECK(s.l4_demotions > 0);
    CHECK(s.l4_promotions > 0);
    // At rest every block holds exactly its last version.
    for (int b = 0; b < kBlocks; b++) {
        REQUIRE(speckv_access(p, hs[b], 0, v.data(), kBytes, 0) == SPECKV_OK);
        std::vector<unsigned char> want(kBytes);
        fill(b, version[b].load(), want);
        CHECK(v == want);
        CHECK(consistent(b, v.data()));
    }
    speckv_pool_close(p);
    unlink(path.c_str());
    unlink(l4.c_str());
}

TEST_CASE("readers see exact values while blocks are packed, unpacked, pinned and prefetched") {
    // Coded blocks are rewritten whole (each write unpacks the block, then
    // packs it again when it completes it) and pinned (which unpacks) while
    // readers read random pages and the prefetch thread fetches them into
    // L2. Every page read must be exactly one of the values a write stored.
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    REQUIRE(speckv_config_set_str(c, "codec.mode", "int8") == SPECKV_OK);
    REQUIRE(speckv_config_set_str(c, "codec.channels", "64") == SPECKV_OK);
    REQUIRE(speckv_config_set_str(c, "cache.bytes", "65536") == SPECKV_OK);  // small L1: L2 and L3 paths too
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open("anon:?size=16M", c, &p) == SPECKV_OK);
    speckv_config_free(c);
    constexpr int kBlocks = 4, kPages = 8;
    constexpr size_t kBytes = kPages * 4096;
    // Two contents per block; what a read must return is their decoded values.
    std::vector<std::vector<uint16_t>> vals[kBlocks];
    std::vector<std::vector<unsigned char>> dec[kBlocks];
    std::vector<unsigned char> rec(speckv::codec::max_record_size(4096));
    speckv_handle hs[kBlocks];
    for (int b = 0; b < kBlocks; b++) {
        for (int ver = 0; ver < 2; ver++) {
            std::vector<uint16_t> x(kBytes / 2);
            for (size_t i = 0; i < x.size(); i++)
                x[i] = speckv::codec::fp32_to_fp16_rne(std::sin(0.3f * float(i % 64) + 0.01f * float(i / 64) + float(b)) *
                                                       (ver ? 2.0f : 0.5f));
            std::vector<unsigned char> d(kBytes);
            for (size_t off = 0; off < kBytes; off += 4096) {
                size_t len = 0, n = 0;
                REQUIRE(speckv::codec::encode(speckv::codec::Mode::int8, SPECKV_DTYPE_FP16,
                                              reinterpret_cast<unsigned char *>(x.data()) + off, 4096, {64}, rec.data(),
                                              rec.size(), &len) == SPECKV_OK);
                REQUIRE(speckv::codec::decode(rec.data(), len, d.data() + off, 4096, &n) == SPECKV_OK);
            }
            vals[b].push_back(std::move(x));
            dec[b].push_back(std::move(d));
        }
        speckv_hint h{};
        h.struct_size = sizeof h;
        h.request = 40 + uint64_t(b);
        h.token_count = 256;
        REQUIRE(speckv_alloc(p, kBytes, SPECKV_DTYPE_FP16, &h, &hs[b]) == SPECKV_OK);
        REQUIRE(speckv_write(p, hs[b], 0, vals[b][0].data(), kBytes) == SPECKV_OK);
    }
    std::atomic<bool> stop{false};
    std::atomic<int> failures{0}, reads{0};
    auto one_of = [&](int b, size_t pg, const unsigned char *d) {
        return std::memcmp(d, dec[b][0].data() + pg * 4096, 4096) == 0 ||
               std::memcmp(d, dec[b][1].data() + pg * 4096, 4096) == 0;
    };
    auto reader = [&](int id) {
        unsigned char buf[4096];
        for (int it = 0; !stop.load() && it < 3000; it++) {
            int b = (it * 5 + id) % kBlocks;
            size_t pg = size_t(it * 3 + id) % kPages;
            if (int rc = speckv_access(p, hs[b], pg * 4096, buf, 4096, 0); rc != SPECKV_OK) {
                if (failures++ < 3) MESSAGE("access: ", rc, " ", std::string(speckv_errmsg()));
                continue;
            }
            if (!one_of(b, pg, buf) && failures++ < 3) MESSAGE("wrong values: block ", b, " page ", pg);
            reads++;
        }
    };
    auto writer = [&] {
        for (int it = 0; !stop.load() && it < 300; it++) {
            int b = it % kBlocks;
            if (it % 7 == 3) {  // a pin unpacks; the pointer shows values
                const void *ptr;
                size_t len;
                if (speckv_pin(p, hs[b], &ptr, &len) != SPECKV_OK) {
                    if (failures++ < 3) MESSAGE("pin: ", std::string(speckv_errmsg()));
                    continue;
                }
                for (size_t pg = 0; pg < kPages; pg++)
                    if (!one_of(b, pg, static_cast<const unsigned char *>(ptr) + pg * 4096) && failures++ < 3)
                        MESSAGE("pinned: wrong values, block ", b);
                speckv_unpin(p, hs[b]);
                continue;
            }
            if (int rc = speckv_write(p, hs[b], 0, vals[b][it & 1].data(), kBytes); rc != SPECKV_OK)
                if (failures++ < 3) MESSAGE("write: ", rc, " ", std::string(speckv_errmsg()));
        }
    };
    auto hinter = [&] {
        for (int it = 0; !stop.load() && it < 2000; it++) {
            speckv_hint h{};
            h.struct_size = sizeof h;
            h.request = 40 + uint64_t(it % kBlocks);
            h.token_pos = 100000;
            speckv_prefetch(p, &h);
            std::this_thread::yield();
        }
    };
    // Every pack and unpack pauses between its record's stores, so readers
    // meet a placement mid-change at most moves, not once in a while.
    speckv::testing::placement_hook = [](uint64_t, int stage) {
        if (stage == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    };
    std::vector<std::thread> ts;
    for (int i = 0; i < 3; i++) ts.emplace_back(reader, i);
    ts.emplace_back(writer);
    ts.emplace_back(hinter);
    ts[3].join();
    stop = true;
    for (size_t i = 0; i < ts.size(); i++)
        if (i != 3) ts[i].join();
    speckv::testing::placement_hook = nullptr;
    CHECK(failures.load() == 0);
    CHECK(reads.load() > 0);
    char js[8192];
    size_t need = 0;
    REQUIRE(speckv_stats_json(p, js, sizeof js, &need) == SPECKV_OK);
    std::string j = js;
    auto num = [&](const char *k) { return std::strtoull(j.c_str() + j.find(k) + std::strlen(k) + 2, nullptr, 10); };
    MESSAGE("packed ", num("\"codec_blocks_packed"), ", unpacked ", num("\"codec_blocks_unpacked"), ", reads ", reads.load());
    CHECK(num("\"codec_blocks_packed") > 10);
    CHECK(num("\"codec_blocks_unpacked") > 10);
    speckv_pool_stats st;
    st.struct_size = sizeof st;
    REQUIRE(speckv_stats(p, &st) == SPECKV_OK);
    CHECK(st.checksum_failures == 0);
    speckv::CheckReport rep;
    REQUIRE(p->rep->check(&rep) == SPECKV_OK);
    CHECK(rep.problems.empty());
    speckv_pool_close(p);
}

// A reader that resolves a block while a pack or an unpack is between its
// record's stores (first_page new, packed_pages old) must wait for the whole
// change, not read the new pages through the old layout (SPECKV_ECORRUPT, a
// counted checksum failure) or the image as pages (SPECKV_EBUSY). The hook
// holds the mover there and runs the read from another thread meanwhile.
namespace {
struct MidMove {
    speckv_pool *p = nullptr;
    speckv_handle h = 0;
    std::thread reader;
    std::atomic<bool> done{false};
    std::atomic<int> rc{SPECKV_OK}, reads{0};
    std::string why;
    std::vector<unsigned char> got = std::vector<unsigned char>(8 * 4096);
};
MidMove *g_mid;
}  // namespace

TEST_CASE("a read during a pack or an unpack waits for the whole placement change") {
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    REQUIRE(speckv_config_set_str(c, "codec.mode", "int8") == SPECKV_OK);
    REQUIRE(speckv_config_set_str(c, "codec.channels", "64") == SPECKV_OK);
    REQUIRE(speckv_config_set_str(c, "cache.bytes", "0") == SPECKV_OK);  // no L1: every read goes to the pool
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open("anon:?size=16M", c, &p) == SPECKV_OK);
    speckv_config_free(c);
    constexpr size_t kBytes = 8 * 4096;
    std::vector<uint16_t> x(kBytes / 2);
    for (size_t i = 0; i < x.size(); i++)
        x[i] = speckv::codec::fp32_to_fp16_rne(std::sin(0.3f * float(i % 64) + 0.01f * float(i / 64)));
    speckv_hint hint{};
    hint.struct_size = sizeof hint;
    MidMove mid;
    mid.p = p;
    REQUIRE(speckv_alloc(p, kBytes, SPECKV_DTYPE_FP16, &hint, &mid.h) == SPECKV_OK);
    // What reads return: the values after the codec (written unhooked once).
    REQUIRE(speckv_write(p, mid.h, 0, x.data(), kBytes) == SPECKV_OK);
    std::vector<unsigned char> want(kBytes);
    REQUIRE(speckv_access(p, mid.h, 0, want.data(), kBytes, 0) == SPECKV_OK);
    speckv_pool_stats st0;
    st0.struct_size = sizeof st0;
    REQUIRE(speckv_stats(p, &st0) == SPECKV_OK);

    g_mid = &mid;
    speckv::testing::placement_hook = [](uint64_t, int stage) {
        if (stage != 0 || !g_mid) return;
        MidMove &m = *g_mid;
        m.done = false;
        m.reader = std::thread([&m] {
            int rc = speckv_access(m.p, m.h, 0, m.got.data(), m.got.size(), 0);
            if (rc != SPECKV_OK) m.why = speckv_errmsg();
            m.rc = rc;
            m.reads++;
            m.done = true;
        });
        // Long enough for the read to fail on a half-changed record; a reader
        // that waits for the change is still waiting when we go on.
        for (int i = 0; i < 100 && !m.done; i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    };
    for (int round = 0; round < 3; round++) {
        // An unpack (the pin) and a pack (the write that completes the block).
        const void *ptr;
        size_t len;
        REQUIRE(speckv_pin(p, mid.h, &ptr, &len) == SPECKV_OK);
        if (mid.reader.joinable()) mid.reader.join();
        CHECK_MESSAGE(mid.rc.load() == SPECKV_OK, "read during an unpack: ", mid.why);
        CHECK(std::memcmp(mid.got.data(), want.data(), kBytes) == 0);
        REQUIRE(speckv_unpin(p, mid.h) == SPECKV_OK);
        mid.rc = SPECKV_OK;
        REQUIRE(speckv_write(p, mid.h, 0, x.data(), kBytes) == SPECKV_OK);
        if (mid.reader.joinable()) mid.reader.join();
        CHECK_MESSAGE(mid.rc.load() == SPECKV_OK, "read during a pack: ", mid.why);
        CHECK(std::memcmp(mid.got.data(), want.data(), kBytes) == 0);
        mid.rc = SPECKV_OK;
    }
    speckv::testing::placement_hook = nullptr;
    g_mid = nullptr;
    CHECK(mid.reads.load() == 6);  // the hook ran at every move: three unpacks, three packs
    speckv_pool_stats st;
    st.struct_size = sizeof st;
    REQUIRE(speckv_stats(p, &st) == SPECKV_OK);
    CHECK(st.checksum_failures == st0.checksum_failures);
    speckv::CheckReport rep;
    REQUIRE(p->rep->check(&rep) == SPECKV_OK);
    CHECK(rep.problems.empty());
    speckv_pool_close(p);
}
