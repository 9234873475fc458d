// SPDX-License-Identifier: Apache-2.0
// The pool's L4 cold tier (docs/tiers.md §9): blocks move to an NVMe file
// under pressure or on speckv_demote and come back on their next use, with
// the same handle and the same bytes; failures leave them where they were;
// one process holds the tier; a holder's crash loses nothing published.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "pool/pool.h"
#include "speckv.h"
#include "testutil.h"

namespace {

speckv_pool *open_with(const std::string &uri, std::initializer_list<std::pair<const char *, std::string>> kv,
                       int *rc_out = nullptr) {
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    for (auto &[k, v] : kv) REQUIRE_MESSAGE(speckv_config_set_str(c, k, v.c_str()) == SPECKV_OK, k, speckv_errmsg());
    speckv_pool *p = nullptr;
    int rc = speckv_pool_open(uri.c_str(), c, &p);
    speckv_config_free(c);
    if (rc_out) {
        *rc_out = rc;
        return p;
    }
    REQUIRE_MESSAGE(rc == SPECKV_OK, std::string(speckv_errmsg()));
    return p;
}

std::vector<unsigned char> pattern(size_t n, uint32_t seed) {
    std::vector<unsigned char> v(n);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v[i] = static_cast<unsigned char>(x);
    }
    return v;
}

speckv_pool_stats stats_of(speckv_pool *p) {
    speckv_pool_stats s{};
    s.struct_size = sizeof s;
    REQUIRE(speckv_stats(p, &s) == SPECKV_OK);
    return s;
}

void expect_bytes(speckv_pool *p, speckv_handle h, const std::vector<unsigned char> &want) {
    std::vector<unsigned char> got(want.size());
    REQUIRE_MESSAGE(speckv_access(p, h, 0, got.data(), got.size(), 0) == SPECKV_OK, speckv_errmsg());
    CHECK(got == want);
}

std::vector<std::string> check_pool(const std::string &path) {
    std::unique_ptr<speckv::Pool> ro;
    REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
    speckv::CheckReport rep;
    REQUIRE(ro->check(&rep) == SPECKV_OK);
    return rep.problems;
}

constexpr size_t kBlock = 64 << 10;  // 16 pages

}  // namespace

TEST_CASE("L4: allocating past the pool demotes the coldest blocks; every handle reads back its bytes") {
    std::string path = fresh_pool("cold-fill"), l4 = path + ".l4";
    unlink(l4.c_str());
    speckv_pool *p = open_with("file:" + path + "?size=4M&max_blocks=1024", {{"cold.path", l4}, {"cold.capacity", "64M"}});
    // ~3x what the pool holds.
    const int n = 180;
    std::vector<speckv_handle> hs(n);
    for (int i = 0; i < n; i++) {
        REQUIRE_MESSAGE(speckv_alloc(p, kBlock, SPECKV_DTYPE_OPAQUE, nullptr, &hs[i]) == SPECKV_OK, i, " ",
                        std::string(speckv_errmsg()));
        auto v = pattern(kBlock, uint32_t(i));
        REQUIRE(speckv_write(p, hs[i], 0, v.data(), v.size()) == SPECKV_OK);
    }
    speckv_pool_stats s = stats_of(p);
    CHECK(s.l4_demotions > 0);
    CHECK(s.l4_blocks > 0);
    CHECK(s.l4_blocks < uint64_t(n));
    CHECK(s.l4_bytes == s.l4_blocks * kBlock);
    CHECK(s.l4_demote_failures == 0);
    CHECK(s.blocks_live == uint64_t(n));
    // One thread, nobody racing for the room: every demotion an allocation
    // needed was written to L4 with the pool lock released.
    {
        std::string js(8192, '\0');
        REQUIRE(speckv_stats_json(p, js.data(), js.size(), nullptr) == SPECKV_OK);
        const size_t at = js.find("\"l4_demotions_offlock\":");
        REQUIRE(at != std::string::npos);
        CHECK(std::strtoull(js.c_str() + at + 23, nullptr, 10) == s.l4_demotions);
    }
    // Oldest first: the first block went, the last one stayed.
    speckv_block_meta m{};
    m.struct_size = sizeof m;
    std::vector<speckv::BlockInfo> infos;
    {
        std::unique_ptr<speckv::Pool> ro;
        REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
        REQUIRE(ro->list_blocks(&infos) == SPECKV_OK);
    }
    bool first_cold = false, last_cold = true;
    for (auto &b : infos) {
        if (b.handle == hs[0]) first_cold = b.cold;
        if (b.handle == hs[n - 1]) last_cold = b.cold;
    }
    CHECK(first_cold);
    CHECK(!last_cold);
    CHECK(check_pool(path).empty());
    // Every block, in an order that forces promotions and further demotions.
    for (int i = 0; i < n; i++) expect_bytes(p, hs[i], pattern(kBlock, uint32_t(i)));
    for (int i = n; i-- > 0;) expect_bytes(p, hs[i], pattern(kBlock, uint32_t(i)));
    s = stats_of(p);
    CHECK(s.l4_promotions > 0);
    auto probs = check_pool(path);
    CHECK_MESSAGE(probs.empty(), (probs.empty() ? "" : probs[0]));
    // Freeing blocks in L4 drops their copies; a double free is an error.
    for (int i = 0; i < n; i++) REQUIRE(speckv_free(p, hs[i]) == SPECKV_OK);
    CHECK(speckv_free(p, hs[0]) == SPECKV_EBADHANDLE);
    s = stats_of(p);
    CHECK(s.l4_blocks == 0);
    CHECK(s.blocks_live == 0);
    CHECK(s.pages_used == 0);
    CHECK(check_pool(path).empty());
    speckv_pool_close(p);
    unlink(path.c_str());
    unlink(l4.c_str());
}

TEST_CASE("L4: without it the same allocations fail with ENOSPC") {
    std::string path = fresh_pool("cold-none");
    speckv_pool *p = open_with("file:" + path + "?size=4M&max_blocks=1024", {});
    int rc = SPECKV_OK;
    speckv_handle h0 = 0;  // the first block
    for (int i = 0; i < 180 && rc == SPECKV_OK; i++) {
        speckv_handle h;
        rc = speckv_alloc(p, kBlock, SPECKV_DTYPE_OPAQUE, nullptr, &h);
        if (i == 0 && rc == SPECKV_OK) h0 = h;
    }
    CHECK(rc == SPECKV_ENOSPC);
    CHECK(speckv_demote(p, 1) == SPECKV_EBADHANDLE);
    REQUIRE(h0 != 0);
    CHECK(speckv_demote(p, h0) == SPECKV_ENOTSUP);
    CHECK(std::string(speckv_errmsg()).find("cold.path") != std::string::npos);
    speckv_pool_close(p);
    unlink(path.c_str());
}

TEST_CASE("L4: speckv_demote, then access, pin, write and prefetch bring the block back") {
    std::string path = fresh_pool("cold-explicit"), l4 = path + ".l4";
    unlink(l4.c_str());
    // prefetch.policy = 1: the prefetcher fetches exactly the unit a hint names.
    speckv_pool *p = open_with("file:" + path + "?size=8M", {{"cold.path", l4}, {"prefetch.policy", "1"}});
    std::vector<speckv_handle> hs(4);
    for (int i = 0; i < 4; i++) {
        speckv_hint hint{};
        hint.struct_size = sizeof hint;
        hint.request = 7;
        hint.layer = uint32_t(i);
        hint.token_count = 16;
        REQUIRE(speckv_alloc(p, kBlock + 100, SPECKV_DTYPE_OPAQUE, &hint, &hs[i]) == SPECKV_OK);
        auto v = pattern(kBlock + 100, 40u + uint32_t(i));
        REQUIRE(speckv_write(p, hs[i], 0, v.data(), v.size()) == SPECKV_OK);
        REQUIRE_MESSAGE(speckv_demote(p, hs[i]) == SPECKV_OK, speckv_errmsg());
        CHECK(speckv_demote(p, hs[i]) == SPECKV_OK);  // already there
    }
    speckv_pool_stats s = stats_of(p);
    CHECK(s.l4_blocks == 4);
    CHECK(s.pages_used == 0);
    // Metadata stays readable in L4.
    speckv_block_meta m{};
    m.struct_size = sizeof m;
    REQUIRE(speckv_block_info(p, hs[0], &m) == SPECKV_OK);
    CHECK(m.bytes == kBlock + 100);
    // Access.
    expect_bytes(p, hs[0], pattern(kBlock + 100, 40));
    // Pin.
    const void *ptr = nullptr;
    size_t len = 0;
    REQUIRE(speckv_pin(p, hs[1], &ptr, &len) == SPECKV_OK);
    REQUIRE(len == kBlock + 100);
    CHECK(std::memcmp(ptr, pattern(kBlock + 100, 41).data(), len) == 0);
    CHECK(speckv_demote(p, hs[1]) == SPECKV_EBUSY);  // pinned
    REQUIRE(speckv_unpin(p, hs[1]) == SPECKV_OK);
    // A partial write: the rest of the block keeps its bytes.
    auto w = pattern(kBlock + 100, 42);
    unsigned char patch[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    REQUIRE(speckv_write(p, hs[2], 5000, patch, sizeof patch) == SPECKV_OK);
    std::memcpy(w.data() + 5000, patch, sizeof patch);
    expect_bytes(p, hs[2], w);
    // A prefetch hint: the prefetch thread brings it back (L4 -> L3 -> L2).
    speckv_hint hint{};
    hint.struct_size = sizeof hint;
    hint.request = 7;
    hint.layer = 3;
    hint.token_pos = 16;  // decoding past the block: it is not the one being appended to
    hint.token_count = 1;
    REQUIRE(speckv_prefetch(p, &hint) == SPECKV_OK);
    for (int i = 0; i < 200 && stats_of(p).l4_blocks != 0; i++) usleep(5000);
    CHECK(stats_of(p).l4_blocks == 0);
    expect_bytes(p, hs[3], pattern(kBlock + 100, 43));
    s = stats_of(p);
    CHECK(s.l4_promotions == 4);
    CHECK(s.l4_demotions == 4);
    auto probs = check_pool(path);
    CHECK_MESSAGE(probs.empty(), (probs.empty() ? "" : probs[0]));
    speckv_pool_close(p);
    unlink(path.c_str());
    unlink(l4.c_str());
}

TEST_CASE("L4: coded pages and page summaries make the trip unchanged") {
    std::string path = fresh_pool("cold-codec"), l4 = path + ".l4";
    unlink(l4.c_str());
    speckv_pool *p = open_with("file:" + path + "?size=8M",
                               {{"cold.path", l4}, {"codec.mode", "int8"}, {"codec.channels", "64"},
                                {"pool.summary_bytes", "512"}, {"select.channels", "64"}});
    const size_t n = 4096;  // FP16 values: 2 pages of 64 channels x 32 tokens
    std::vector<uint16_t> kv(n);
    for (size_t i = 0; i < n; i++) kv[i] = speckv::codec::fp32_to_fp16_rne(float((i * 37) % 101) / 50.0f - 1.0f);
    speckv_hint hint{};
    hint.struct_size = sizeof hint;
    hint.request = 3;
    hint.flags = SPECKV_HINT_KEYS;
    hint.token_count = 64;
    speckv_handle h;
    REQUIRE(speckv_alloc(p, n * 2, SPECKV_DTYPE_FP16, &hint, &h) == SPECKV_OK);
    REQUIRE(speckv_write(p, h, 0, kv.data(), n * 2) == SPECKV_OK);
    CHECK(stats_of(p).codec_pages_encoded == 2);
    std::vector<unsigned char> before(n * 2), after(n * 2);
    REQUIRE(speckv_access(p, h, 0, before.data(), before.size(), 0) == SPECKV_OK);
    std::vector<float> q(64, 0.5f);
    speckv_select_params sp{};
    sp.struct_size = sizeof sp;
    sp.kv_heads = 1;
    sp.head_dim = 64;
    sp.q_per_kv = 1;
    sp.budget = 1;
    sp.context_tokens = 64;
    sp.recent = 0;
    sp.scale = 1.0f;
    speckv_page_ref ref1{}, ref2{};
    size_t got = 0, pages = 0;
    REQUIRE_MESSAGE(speckv_select(p, 0, 3, 0, q.data(), q.size(), &sp, &ref1, 1, &got, &pages) == SPECKV_OK,
                    speckv_errmsg());
    REQUIRE(speckv_demote(p, h) == SPECKV_OK);
    // Selection brings the block back first and finds the same page.
    REQUIRE_MESSAGE(speckv_select(p, 0, 3, 0, q.data(), q.size(), &sp, &ref2, 1, &got, &pages) == SPECKV_OK,
                    speckv_errmsg());
    CHECK(ref1.block == ref2.block);
    CHECK(ref1.offset == ref2.offset);
    REQUIRE(speckv_access(p, h, 0, after.data(), after.size(), 0) == SPECKV_OK);
    CHECK(before == after);
    speckv::PoolInfo info;
    {
        std::unique_ptr<speckv::Pool> ro;
        REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
        ro->info(&info);
    }
    CHECK(info.pages_coded == 2);  // still records, not decoded on the way
    CHECK(check_pool(path).empty());
    speckv_pool_close(p);
    unlink(path.c_str());
    unlink(l4.c_str());
}

TEST_CASE("L4: a full L4 file fails the demotion and loses nothing") {
    std::string path = fresh_pool("cold-full"), l4 = path + ".l4";
    unlink(l4.c_str());
    speckv_pool *p = open_with("file:" + path + "?size=4M", {{"cold.path", l4}, {"cold.capacity", "1M"}});
    speckv_handle big;
    REQUIRE(speckv_alloc(p, 2 << 20, SPECKV_DTYPE_OPAQUE, nullptr, &big) == SPECKV_OK);
    auto v = pattern(2 << 20, 9);
    REQUIRE(speckv_write(p, big, 0, v.data(), v.size()) == SPECKV_OK);
    CHECK(speckv_demote(p, big) == SPECKV_ENOSPC);
    CHECK(std::string(speckv_errmsg()).find("full") != std::string::npos);
    CHECK(stats_of(p).l4_demote_failures == 1);
    CHECK(stats_of(p).l4_blocks == 0);
    expect_bytes(p, big, v);
    // Pressure with a full L4: the allocation fails clearly, the rest stays.
    std::vector<speckv_handle> small;
    int rc = SPECKV_OK;
    for (int i = 0; i < 64 && rc == SPECKV_OK; i++) {
        speckv_handle h;
        rc = speckv_alloc(p, kBlock, SPECKV_DTYPE_OPAQUE, nullptr, &h);
        if (rc == SPECKV_OK) {
            auto s = pattern(kBlock, 100u + uint32_t(i));
            REQUIRE(speckv_write(p, h, 0, s.data(), s.size()) == SPECKV_OK);
            small.push_back(h);
        }
    }
    CHECK(rc == SPECKV_ENOSPC);
    expect_bytes(p, big, v);
    for (size_t i = 0; i < small.size(); i++) expect_bytes(p, small[i], pattern(kBlock, 100u + uint32_t(i)));
    CHECK(check_pool(path).empty());
    speckv_pool_close(p);
    unlink(path.c_str());
    unlink(l4.c_str());
}

TEST_CASE("L4: a bad cold.path fails the open clearly and leaves no attachment") {
    std::string path = fresh_pool("cold-badpath");
    int rc = SPECKV_OK;
    speckv_pool *p = open_with("file:" + path + "?size=4M", {{"cold.path", test_dir() + "/no-such-dir/x.l4"}}, &rc);
    CHECK(p == nullptr);
    CHECK(rc != SPECKV_OK);
    CHECK(std::string(speckv_errmsg()).find("cold.path") != std::string::npos);
    speckv::PoolInfo info;
    {
        std::unique_ptr<speckv::Pool> ro;
        REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
        ro->info(&info);
    }
    CHECK(info.attached == 0);
    CHECK(info.cold_pid == 0);
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    CHECK(speckv_config_set_int(c, "cold.path", 1) == SPECKV_EINVAL);
    CHECK(speckv_config_set_str(c, "cold.capacity", "1K") == SPECKV_EINVAL);
    speckv_config_free(c);
    unlink(path.c_str());
}

TEST_CASE("L4: one process holds it; others read its blocks through it; the next holder takes over") {
    std::string path = fresh_pool("cold-holder"), l4 = path + ".l4";
    unlink(l4.c_str());
    uint8_t hash[SPECKV_HASH_BYTES] = {0xC0, 0x1D};
    std::string uri = "file:" + path + "?size=4M";
    speckv_pool *p = open_with(uri, {{"cold.path", l4}});
    speckv_hint hint{};
    hint.struct_size = sizeof hint;
    hint.tenant = 1;
    speckv_handle h;
    REQUIRE(speckv_alloc(p, kBlock, SPECKV_DTYPE_OPAQUE, &hint, &h) == SPECKV_OK);
    auto v = pattern(kBlock, 77);
    REQUIRE(speckv_write(p, h, 0, v.data(), v.size()) == SPECKV_OK);
    REQUIRE(speckv_publish(p, h, hash, nullptr) == SPECKV_OK);
    REQUIRE_MESSAGE(speckv_demote(p, h) == SPECKV_OK, speckv_errmsg());
    pid_t child = fork();
    if (child == 0) {
        int code = 0;
        speckv_pool *q = nullptr;
        speckv_config *c = nullptr;
        speckv_config_new(&c);
        speckv_config_set_str(c, "cold.path", l4.c_str());
        if (speckv_pool_open(uri.c_str(), c, &q) != SPECKV_EBUSY) code |= 1;  // a second holder is refused
        // With cold.wait_ms = 0 it does not ask the holder: a clear error.
        speckv_config_set_str(c, "cold.path", "");
        speckv_config_set_str(c, "cold.wait_ms", "0");
        if (speckv_pool_open(uri.c_str(), c, &q) != SPECKV_OK) _exit(2);
        speckv_config_free(c);
        std::vector<unsigned char> buf(kBlock);
        if (speckv_access(q, h, 0, buf.data(), buf.size(), 0) != SPECKV_EBUSY) code |= 4;
        if (!std::strstr(speckv_errmsg(), "held by process")) code |= 8;
        if (speckv_demote(q, h) != SPECKV_ENOTSUP) code |= 16;
        speckv_pool_close(q);
        // By default it asks the holder, which brings the block back.
        if (speckv_pool_open(uri.c_str(), nullptr, &q) != SPECKV_OK) _exit(2);
        if (speckv_access(q, h, 0, buf.data(), buf.size(), 0) != SPECKV_OK) code |= 32;
        if (buf != v) code |= 64;
        speckv_pool_close(q);
        _exit(code);
    }
    int st = 0;
    REQUIRE(waitpid(child, &st, 0) == child);
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    CHECK(stats_of(p).l4_blocks == 0);
    CHECK(stats_of(p).l4_promotions == 1);
    REQUIRE_MESSAGE(speckv_demote(p, h) == SPECKV_OK, speckv_errmsg());
    speckv_pool_close(p);
    // The holder is gone: another opener with cold.path takes over and reads it.
    speckv_pool *r = open_with(uri, {{"cold.path", l4}});
    speckv_handle found;
    REQUIRE(speckv_lookup(r, 1, hash, &found) == SPECKV_OK);
    CHECK(found == h);
    CHECK(stats_of(r).l4_blocks == 1);
    expect_bytes(r, found, v);
    CHECK(stats_of(r).l4_blocks == 0);
    speckv_pool_close(r);
    unlink(path.c_str());
    unlink(l4.c_str());
}

TEST_CASE("L4: a holder killed while demoting loses no published block") {
    std::string path = fresh_pool("cold-kill"), l4 = path + ".l4";
    unlink(l4.c_str());
    std::string uri = "file:" + path + "?size=4M";
    const int n = 24;
    auto hash_of = [](int i) {
        std::vector<uint8_t> hsh(SPECKV_HASH_BYTES, 0);
        hsh[0] = uint8_t(i);
        hsh[1] = 0xAB;
        return hsh;
    };
    for (int round = 0; round < 6; round++) {
        int fds[2];
        REQUIRE(pipe(fds) == 0);
        pid_t child = fork();
        if (child == 0) {
            close(fds[0]);
            speckv_config *c = nullptr;
            speckv_config_new(&c);
            speckv_config_set_str(c, "cold.path", l4.c_str());
            speckv_pool *q = nullptr;
            if (speckv_pool_open(uri.c_str(), c, &q) != SPECKV_OK) _exit(2);
            std::vector<speckv_handle> hs;
            for (int i = 0; i < n; i++) {
                speckv_handle h;
                auto hsh = hash_of(i);
                if (speckv_lookup(q, 0, hsh.data(), &h) != SPECKV_OK) {
                    if (speckv_alloc(q, kBlock, SPECKV_DTYPE_OPAQUE, nullptr, &h) != SPECKV_OK) _exit(3);
                    auto v = pattern(kBlock, 500u + uint32_t(i));
                    if (speckv_write(q, h, 0, v.data(), v.size()) != SPECKV_OK) _exit(4);
                    if (speckv_publish(q, h, hsh.data(), nullptr) != SPECKV_OK) _exit(5);
                }
                hs.push_back(h);
            }
            char one = 1;
            if (write(fds[1], &one, 1) != 1) _exit(6);
            // Move blocks back and forth until killed.
            for (uint64_t k = 0;; k++) {
                speckv_handle h = hs[k % hs.size()];
                if (k % 3 == 2) {
                    std::vector<unsigned char> b(kBlock);
                    speckv_access(q, h, 0, b.data(), b.size(), 0);
                } else {
                    speckv_demote(q, h);
                }
            }
        }
        close(fds[1]);
        char one;
        REQUIRE(read(fds[0], &one, 1) == 1);
        close(fds[0]);
        usleep(1000u * (3u + 7u * uint32_t(round)));
        kill(child, SIGKILL);
        int st;
        REQUIRE(waitpid(child, &st, 0) == child);
        // The next holder: every published block is there, with its bytes.
        speckv_pool *p = open_with(uri, {{"cold.path", l4}});
        for (int i = 0; i < n; i++) {
            speckv_handle h;
            auto hsh = hash_of(i);
            REQUIRE_MESSAGE(speckv_lookup(p, 0, hsh.data(), &h) == SPECKV_OK, "round ", round, " block ", i);
            expect_bytes(p, h, pattern(kBlock, 500u + uint32_t(i)));
            REQUIRE(speckv_free(p, h) == SPECKV_OK);  // drop our reference
        }
        speckv_pool_close(p);
        auto probs = check_pool(path);
        CHECK_MESSAGE(probs.empty(), (probs.empty() ? "" : probs[0]));
    }
    unlink(path.c_str());
    unlink(l4.c_str());
}

TEST_CASE("L4: above the pressure target the prefetch thread demotes blocks below T_c ahead of need") {
    std::string path = fresh_pool("cold-tick"), l4 = path + ".l4";
    unlink(l4.c_str());
    speckv_pool *p = open_with("file:" + path + "?size=4M&max_blocks=1024", {{"cold.path", l4}});
    const uint64_t total = stats_of(p).pages_total;
    const size_t bytes = 8 * 4096;
    std::vector<speckv_handle> hs;
    // Fill to ~95 % of the pool's pages (no allocation needs room yet).
    while ((hs.size() + 1) * 8 <= total * 95 / 100) {
        speckv_handle h;
        REQUIRE(speckv_alloc(p, bytes, SPECKV_DTYPE_OPAQUE, nullptr, &h) == SPECKV_OK);
        auto v = pattern(bytes, 900u + uint32_t(hs.size()));
        REQUIRE(speckv_write(p, h, 0, v.data(), v.size()) == SPECKV_OK);
        hs.push_back(h);
    }
    REQUIRE(hs.size() > 20);
    CHECK(stats_of(p).l4_demotions == 0);
    // The first four stay hot: read every millisecond. The rest cool down.
    speckv_hint hint{};
    hint.struct_size = sizeof hint;
    hint.request = 1;
    REQUIRE(speckv_prefetch(p, &hint) == SPECKV_OK);  // starts the prefetch thread
    std::vector<unsigned char> buf(bytes);
    speckv_pool_stats s{};
    for (int ms = 0; ms < 3000; ms++) {
        for (int i = 0; i < 4; i++) REQUIRE(speckv_access(p, hs[size_t(i)], 0, buf.data(), buf.size(), 0) == SPECKV_OK);
        usleep(1000);
        s = stats_of(p);
        if (ms > 300 && s.pages_used * 100 <= total * 85) break;
    }
    CHECK(s.l4_demotions > 0);
    CHECK(s.pages_used * 100 <= total * 85);  // the heat module's pressure target
    std::vector<speckv::BlockInfo> infos;
    {
        std::unique_ptr<speckv::Pool> ro;
        REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
        REQUIRE(ro->list_blocks(&infos) == SPECKV_OK);
    }
    for (auto &b : infos)
        for (int i = 0; i < 4; i++)
            if (b.handle == hs[size_t(i)]) CHECK_MESSAGE(!b.cold, "hot block ", i, " was demoted");
    for (size_t i = 0; i < hs.size(); i++) expect_bytes(p, hs[i], pattern(bytes, 900u + uint32_t(i)));
    speckv_pool_close(p);
    unlink(path.c_str());
    unlink(l4.c_str());
}

TEST_CASE("L4: write and read faults of the L4 file fail clearly and lose nothing") {
    std::string path = fresh_pool("cold-faults"), l4 = path + ".l4";
    unlink(l4.c_str());
    const std::string uri = "file:" + path + "?size=8M";
    // A write the file system refuses (the process's file size limit, as a
    // full disk would): the demotion fails, the block stays in the pool whole.
    pid_t child = fork();
    if (child == 0) {
        signal(SIGXFSZ, SIG_IGN);
        speckv_config *c = nullptr;
        speckv_config_new(&c);
        speckv_config_set_str(c, "cold.path", l4.c_str());
        speckv_pool *p = nullptr;
        if (speckv_pool_open(uri.c_str(), c, &p) != SPECKV_OK) _exit(2);
        speckv_config_free(c);
        speckv_handle h;
        if (speckv_alloc(p, 1 << 20, SPECKV_DTYPE_OPAQUE, nullptr, &h) != SPECKV_OK) _exit(3);
        auto v = pattern(1 << 20, 31);
        if (speckv_write(p, h, 0, v.data(), v.size()) != SPECKV_OK) _exit(4);
        rlimit rl{64 << 10, 64 << 10};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(5);
        int rc = speckv_demote(p, h);
        int code = 0;
        if (rc != SPECKV_ENOSPC && rc != SPECKV_EIO) code |= 8;
        speckv_pool_stats s{};
        s.struct_size = sizeof s;
        speckv_stats(p, &s);
        if (s.l4_demote_failures != 1 || s.l4_blocks != 0) code |= 16;
        std::vector<unsigned char> back(v.size());
        if (speckv_access(p, h, 0, back.data(), back.size(), 0) != SPECKV_OK || back != v) code |= 32;
        speckv_pool_close(p);
        _exit(code);
    }
    int st = 0;
    REQUIRE(waitpid(child, &st, 0) == child);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    // A read that comes back short (the file was truncated behind our back):
    // the access fails naming the block, which stays in L4; freeing it works.
    speckv_pool *p = open_with(uri, {{"cold.path", l4}});
    speckv_handle h;
    REQUIRE(speckv_alloc(p, 256 << 10, SPECKV_DTYPE_OPAQUE, nullptr, &h) == SPECKV_OK);
    auto v = pattern(256 << 10, 32);
    REQUIRE(speckv_write(p, h, 0, v.data(), v.size()) == SPECKV_OK);
    REQUIRE(speckv_demote(p, h) == SPECKV_OK);
    REQUIRE(truncate(l4.c_str(), 4096) == 0);
    std::vector<unsigned char> back(v.size());
    int rc = speckv_access(p, h, 0, back.data(), back.size(), 0);
    CHECK((rc == SPECKV_EIO || rc == SPECKV_ECORRUPT));
    CHECK(std::string(speckv_errmsg()).find("stays in L4") != std::string::npos);
    CHECK(stats_of(p).l4_blocks == 1);
    CHECK(speckv_free(p, h) == SPECKV_OK);
    CHECK(stats_of(p).l4_blocks == 0);
    CHECK(check_pool(path).empty());
    speckv_pool_close(p);
    unlink(path.c_str());
    unlink(l4.c_str());
}

namespace {

// A holder in its own process: opens the pool with cold.path, makes `n`
// published blocks (hash {0xAB, i}), demotes them, writes their handles to
// `fd` and waits to be killed. Exits non-zero on any failure before that.
[[noreturn]] void run_holder(const std::string &uri, const std::string &l4, int n, int fd) {
    speckv_config *c = nullptr;
    speckv_config_new(&c);
    speckv_config_set_str(c, "cold.path", l4.c_str());
    speckv_pool *p = nullptr;
    if (speckv_pool_open(uri.c_str(), c, &p) != SPECKV_OK) _exit(10);
    speckv_config_free(c);
    std::vector<speckv_handle> hs(n);
    for (int i = 0; i < n; i++) {
        speckv_hint hint{};
        hint.struct_size = sizeof hint;
        hint.tenant = 1;
        hint.request = 100 + uint64_t(i);  // for the prefetch case: (request, layer 0) names block i
        hint.token_count = 16;
        uint8_t hash[SPECKV_HASH_BYTES] = {0xAB, uint8_t(i)};
        auto v = pattern(kBlock, 1000 + i);
        if (speckv_alloc(p, kBlock, SPECKV_DTYPE_OPAQUE, &hint, &hs[i]) != SPECKV_OK) _exit(11);
        if (speckv_write(p, hs[i], 0, v.data(), v.size()) != SPECKV_OK) _exit(12);
        if (speckv_publish(p, hs[i], hash, nullptr) != SPECKV_OK) _exit(13);
        if (speckv_demote(p, hs[i]) != SPECKV_OK) _exit(15);
    }
    if (write(fd, hs.data(), hs.size() * sizeof hs[0]) != ssize_t(hs.size() * sizeof hs[0])) _exit(16);
    for (;;) pause();
}

}  // namespace

TEST_CASE("L4: processes without it get its blocks through the holder; a stopped or dead holder is a clear error") {
    std::string path = fresh_pool("cold-remote"), l4 = path + ".l4";
    unlink(l4.c_str());
    std::string uri = "file:" + path + "?size=8M";
    constexpr int kN = 40;  // more than there are request rows; three more for the stopped, dead and prefetch cases
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t holder = fork();
    if (holder == 0) {
        close(fds[0]);
        run_holder(uri, l4, kN + 3, fds[1]);
    }
    close(fds[1]);
    // Whatever fails below, the holder does not outlive the test (stopped, it
    // would keep the test's output open and the run waiting for it).
    struct Reap {
        pid_t pid;
        ~Reap() {
            if (pid > 0 && kill(pid, SIGKILL) == 0) waitpid(pid, nullptr, 0);
        }
    } reap{holder};
    std::vector<speckv_handle> hs(kN + 3);
    REQUIRE(read(fds[0], hs.data(), hs.size() * sizeof hs[0]) == ssize_t(hs.size() * sizeof hs[0]));
    close(fds[0]);

    // Four readers at once, each reading every block in its own order (the
    // first to ask gets it back; the others find it in the pool or ask too).
    std::vector<pid_t> readers;
    for (int r = 0; r < 4; r++) {
        pid_t c = fork();
        if (c == 0) {
            // A generous wait for the holder: four readers and the holder
            // share a loaded CI machine's cores (the default is 5 s).
            speckv_config *rc = nullptr;
            speckv_config_new(&rc);
            speckv_config_set_str(rc, "cold.wait_ms", "60000");
            speckv_pool *q = nullptr;
            if (speckv_pool_open(uri.c_str(), rc, &q) != SPECKV_OK) _exit(20);
            speckv_config_free(rc);
            std::vector<unsigned char> buf(kBlock);
            for (int k = 0; k < kN; k++) {
                int i = (k * 7 + r * 11) % kN;
                speckv_handle found;
                uint8_t hash[SPECKV_HASH_BYTES] = {0xAB, uint8_t(i)};
                if (speckv_lookup(q, 1, hash, &found) != SPECKV_OK || found != hs[i]) _exit(21);
                if (speckv_access(q, found, 0, buf.data(), buf.size(), 0) != SPECKV_OK) _exit(22);
                if (buf != pattern(kBlock, 1000 + i)) _exit(23);
                speckv_free(q, found);
            }
            speckv_pool_close(q);
            _exit(0);
        }
        readers.push_back(c);
    }
    for (pid_t c : readers) {
        int st = 0;
        REQUIRE(waitpid(c, &st, 0) == c);
        CHECK(WIFEXITED(st));
        CHECK_MESSAGE(WEXITSTATUS(st) == 0, "reader exit code ", WEXITSTATUS(st));
    }
    speckv_pool *q = open_with(uri, {{"cold.wait_ms", "300"}, {"prefetch.policy", "1"}});
    CHECK(stats_of(q).l4_blocks == 3);
    std::string js(8192, '\0');
    REQUIRE(speckv_stats_json(q, js.data(), js.size(), nullptr) == SPECKV_OK);
    js.resize(std::strlen(js.c_str()));
    const size_t at = js.find("\"l4_remote_requests\":");
    REQUIRE_MESSAGE(at != std::string::npos, js);
    CHECK(std::strtoull(js.c_str() + at + 21, nullptr, 10) >= kN);  // two readers may both ask for one block
    CHECK(stats_of(q).l4_promotions == kN);

    // A prefetch hint naming a block in L4: our prefetch thread asks the
    // holder without waiting, and the block is back before it is used.
    {
        speckv_hint hint{};
        hint.struct_size = sizeof hint;
        hint.tenant = 1;
        hint.request = 100 + kN + 2;
        hint.token_pos = 16;  // past the block: not the one being appended to
        hint.token_count = 1;
        REQUIRE(speckv_prefetch(q, &hint) == SPECKV_OK);
        for (int i = 0; i < 400 && stats_of(q).l4_blocks != 2; i++) usleep(5000);
        CHECK(stats_of(q).l4_blocks == 2);
        std::vector<unsigned char> got(kBlock);
        REQUIRE(speckv_access(q, hs[kN + 2], 0, got.data(), got.size(), 0) == SPECKV_OK);
        CHECK(got == pattern(kBlock, 1000 + kN + 2));
    }

    // The holder stopped: the request times out with a clear error and the
    // block stays where it is; once the holder runs again the same read works.
    std::vector<unsigned char> buf(kBlock);
    REQUIRE(kill(holder, SIGSTOP) == 0);
    {  // wait until it really is stopped (a signal is delivered asynchronously)
        int ws = 0;
        REQUIRE(waitpid(holder, &ws, WUNTRACED) == holder);
        REQUIRE(WIFSTOPPED(ws));
    }
    CHECK(speckv_access(q, hs[kN], 0, buf.data(), buf.size(), 0) == SPECKV_EBUSY);
    CHECK(std::string(speckv_errmsg()).find("did not bring it back within cold.wait_ms = 300 ms") != std::string::npos);
    REQUIRE(kill(holder, SIGCONT) == 0);
    REQUIRE_MESSAGE(speckv_access(q, hs[kN], 0, buf.data(), buf.size(), 0) == SPECKV_OK, speckv_errmsg());
    CHECK(buf == pattern(kBlock, 1000 + kN));

    // The holder dead: nobody to ask, said so; the block is not lost — the
    // next process to open the pool with cold.path reads it.
    REQUIRE(kill(holder, SIGKILL) == 0);
    int st = 0;
    REQUIRE(waitpid(holder, &st, 0) == holder);
    reap.pid = 0;
    CHECK(speckv_access(q, hs[kN + 1], 0, buf.data(), buf.size(), 0) == SPECKV_EBUSY);
    CHECK(std::string(speckv_errmsg()).find("no process holds the tier") != std::string::npos);
    speckv_pool_close(q);
    speckv_pool *r = open_with(uri, {{"cold.path", l4}});
    expect_bytes(r, hs[kN + 1], pattern(kBlock, 1000 + kN + 1));
    speckv_pool_close(r);
    unlink(path.c_str());
    unlink(l4.c_str());
}

TEST_CASE("L4: well under the pressure target, blocks in L4 above T_h come back with no access asking") {
    // Heat from position alone (recency and frequency weighted 0, so timing
    // cannot move it): the attention-sink block and the recent-window block
    // of a request score 1 x w_position, a block in the middle position_mid
    // x w_position. With the pool nearly empty T_h falls toward 0.8 - 0.4;
    // the sink and window blocks come back from L4 by themselves, the middle
    // one stays until it is used.
    std::string path = fresh_pool("l4-hot"), l4 = path + ".l4";
    unlink(l4.c_str());
    speckv_pool *p = open_with("file:" + path + "?size=8M", {{"cold.path", l4},
                                                              {"cold.direct", "0"},
                                                              {"heat.w_recency_milli", "0"},
                                                              {"heat.w_frequency_milli", "0"},
                                                              {"heat.t_hot_milli", "800"}});
    auto block_at = [&](uint64_t pos, uint32_t seed, std::vector<unsigned char> *want) {
        speckv_hint h{};
        h.struct_size = sizeof h;
        h.request = 5;
        h.token_pos = pos;
        h.token_count = 64;
        speckv_handle b = 0;
        REQUIRE(speckv_alloc(p, kBlock, SPECKV_DTYPE_OPAQUE, &h, &b) == SPECKV_OK);
        *want = pattern(kBlock, seed);
        REQUIRE(speckv_write(p, b, 0, want->data(), kBlock) == SPECKV_OK);
        REQUIRE_MESSAGE(speckv_demote(p, b) == SPECKV_OK, speckv_errmsg());
        return b;
    };
    std::vector<unsigned char> ws, wm, ww;
    const speckv_handle sink = block_at(0, 1, &ws), mid = block_at(2048, 2, &wm), window = block_at(4032, 3, &ww);
    auto cold = [&](speckv_handle b) {
        std::vector<speckv::BlockInfo> all;
        REQUIRE(p->rep->list_blocks(&all) == SPECKV_OK);
        for (auto &i : all)
            if (i.handle == b) return i.cold;
        FAIL("block not listed");
        return false;
    };
    REQUIRE(cold(sink));
    REQUIRE(cold(mid));
    REQUIRE(cold(window));
    // The first hint starts the prefetch thread, which ticks every 100 ms.
    speckv_hint hint{};
    hint.struct_size = sizeof hint;
    hint.request = 999;
    REQUIRE(speckv_prefetch(p, &hint) == SPECKV_OK);
    for (int t = 0; t < 400 && (cold(sink) || cold(window)); t++) usleep(10000);
    CHECK_FALSE(cold(sink));
    CHECK_FALSE(cold(window));
    usleep(300000);  // a few more ticks: the middle block stays below T_h
    CHECK(cold(mid));
    std::string js(8192, '\0');
    REQUIRE(speckv_stats_json(p, js.data(), js.size(), nullptr) == SPECKV_OK);
    CHECK(js.find("\"l4_promotions_ahead\":2") != std::string::npos);
    expect_bytes(p, sink, ws);
    expect_bytes(p, window, ww);
    expect_bytes(p, mid, wm);  // its use brings it back
    CHECK_FALSE(cold(mid));
    speckv_pool_close(p);
    CHECK(check_pool(path).empty());
    // The thresholds are checked at open: T_c + 0.1 must stay below T_h.
    int rc = 0;
    speckv_pool *q = open_with("file:" + path, {{"cold.path", l4}, {"heat.t_hot_milli", "200"}}, &rc);
    CHECK(rc == SPECKV_EINVAL);
    CHECK(q == nullptr);
    unlink(path.c_str());
    unlink(l4.c_str());
}
