// SPDX-License-Identifier: Apache-2.0
// Issue 27's data-path changes, checked for what they promise (speed is
// bench/bench_datapath's job): the keyed hash index spreads hashes that share
// their first bytes and bounds a bucket's chain; the admission policy keeps
// written-once pages out of the per-process cache and admits a page on its
// second touch; reads through every policy return the bytes written.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "share/index_key.h"
#include "pool/pool_format.h"
#include "speckv.h"
#include "testutil.h"

namespace {

void adversarial_hash(uint64_t i, uint8_t out[32]) {
    std::memset(out, 0xA5, 32);            // the same first 24 bytes for every block
    std::memcpy(out + 24, &i, sizeof i);   // only the last 8 differ
}

// The pool's index key, read from its file's superblock.
void read_key(const std::string &path, uint8_t key[speckv::kIndexKeyBytes], uint32_t *flags, uint64_t *buckets) {
    speckv::fmt::Superblock s;
    int fd = open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    REQUIRE(pread(fd, &s, sizeof s, 0) == static_cast<ssize_t>(sizeof s));
    close(fd);
    std::memcpy(key, s.reserved, speckv::kIndexKeyBytes);
    *flags = s.flags;
    *buckets = s.index_buckets;
}

}  // namespace

TEST_CASE("hash index: the keyed mix spreads hashes that share all but their last 8 bytes") {
    uint8_t key[speckv::kIndexKeyBytes];
    std::mt19937_64 rng(1);
    for (auto &b : key) b = static_cast<uint8_t>(rng());
    const uint64_t buckets = 16384;
    std::vector<uint32_t> count(buckets);
    uint8_t h[32];
    for (uint64_t i = 0; i < 16000; i++) {
        adversarial_hash(i, h);
        count[speckv::index_mix(key, 0, h) & (buckets - 1)]++;
    }
    // Uniform: the longest of 16,384 chains at load ~1 is about 8; the first
    // 8 bytes alone would put all 16,000 in one.
    CHECK(*std::max_element(count.begin(), count.end()) <= 12);
    // Another key, another layout; another tenant, another bucket.
    uint8_t key2[speckv::kIndexKeyBytes];
    std::memcpy(key2, key, sizeof key);
    key2[0] ^= 1;
    int same = 0, same_tenant = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        adversarial_hash(i, h);
        same += (speckv::index_mix(key, 0, h) & (buckets - 1)) == (speckv::index_mix(key2, 0, h) & (buckets - 1));
        same_tenant += (speckv::index_mix(key, 0, h) & (buckets - 1)) == (speckv::index_mix(key, 1, h) & (buckets - 1));
    }
    CHECK(same < 5);
    CHECK(same_tenant < 5);
}

TEST_CASE("hash index: a new pool has a random key; adversarial hashes publish and are found") {
    const std::string path = fresh_pool("dp-index");
    speckv_pool *p = open_pool("file:" + path + "?size=64M&max_blocks=4096", {});
    uint8_t key[speckv::kIndexKeyBytes], zero[speckv::kIndexKeyBytes] = {};
    uint32_t flags = 0;
    uint64_t nb = 0;
    read_key(path, key, &flags, &nb);
    CHECK((flags & speckv::kSbFlagKeyedIndex) != 0);
    CHECK(std::memcmp(key, zero, sizeof key) != 0);
    std::vector<speckv_handle> hs(3000);
    uint8_t h[32];
    for (uint64_t i = 0; i < hs.size(); i++) {
        REQUIRE(speckv_alloc(p, 4096, SPECKV_DTYPE_OPAQUE, nullptr, &hs[i]) == SPECKV_OK);
        REQUIRE(speckv_write(p, hs[i], 0, &i, sizeof i) == SPECKV_OK);
        adversarial_hash(i, h);
        REQUIRE_MESSAGE(speckv_publish(p, hs[i], h, nullptr) == SPECKV_OK, speckv_errmsg());
    }
    for (uint64_t i = 0; i < hs.size(); i++) {
        adversarial_hash(i, h);
        speckv_handle got = 0;
        REQUIRE(speckv_lookup(p, 0, h, &got) == SPECKV_OK);
        CHECK(got == hs[i]);
        uint64_t v = 0;
        CHECK(speckv_access(p, got, 0, &v, sizeof v, 0) == SPECKV_OK);
        CHECK(v == i);
        CHECK(speckv_free(p, got) == SPECKV_OK);
    }
    speckv_pool_close(p);
    // Another pool, another key.
    const std::string path2 = fresh_pool("dp-index");
    speckv_pool *q = open_pool("file:" + path2 + "?size=8M", {});
    uint8_t key2[speckv::kIndexKeyBytes];
    read_key(path2, key2, &flags, &nb);
    CHECK(std::memcmp(key, key2, sizeof key) != 0);
    speckv_pool_close(q);
    unlink(path.c_str());
    unlink(path2.c_str());
}

TEST_CASE("hash index: a bucket's chain is bounded; the block past the bound stays unpublished, the pool works") {
    const std::string path = fresh_pool("dp-chain");
    speckv_pool *p = open_pool("file:" + path + "?size=16M&max_blocks=256", {});
    uint8_t key[speckv::kIndexKeyBytes];
    uint32_t flags = 0;
    uint64_t nb = 0;
    read_key(path, key, &flags, &nb);
    REQUIRE(nb >= 64);
    // Knowing the key (an attached tenant can read it), aim at bucket 0.
    std::vector<std::vector<uint8_t>> aimed;
    std::mt19937_64 rng(3);
    while (aimed.size() < speckv::kIndexMaxChain + 1) {
        std::vector<uint8_t> h(32);
        for (auto &b : h) b = static_cast<uint8_t>(rng());
        if ((speckv::index_mix(key, 0, h.data()) & (nb - 1)) == 0) aimed.push_back(h);
    }
    for (size_t i = 0; i < aimed.size(); i++) {
        speckv_handle hd;
        REQUIRE(speckv_alloc(p, 4096, SPECKV_DTYPE_OPAQUE, nullptr, &hd) == SPECKV_OK);
        const int rc = speckv_publish(p, hd, aimed[i].data(), nullptr);
        if (i < speckv::kIndexMaxChain) {
            CHECK(rc == SPECKV_OK);
        } else {
            CHECK(rc == SPECKV_EBUSY);
            CHECK(std::strstr(speckv_errmsg(), "bucket") != nullptr);
            CHECK(speckv_free(p, hd) == SPECKV_OK);  // unpublished: an ordinary free
        }
    }
    // The bounded bucket's blocks are all found; other buckets take blocks.
    for (size_t i = 0; i < speckv::kIndexMaxChain; i++) {
        speckv_handle got;
        CHECK(speckv_lookup(p, 0, aimed[i].data(), &got) == SPECKV_OK);
        CHECK(speckv_free(p, got) == SPECKV_OK);
    }
    speckv_handle hd;
    uint8_t h[32];
    adversarial_hash(12345, h);
    REQUIRE(speckv_alloc(p, 4096, SPECKV_DTYPE_OPAQUE, nullptr, &hd) == SPECKV_OK);
    if ((speckv::index_mix(key, 0, h) & (nb - 1)) != 0) CHECK(speckv_publish(p, hd, h, nullptr) == SPECKV_OK);
    speckv_pool_close(p);
    unlink(path.c_str());
}

TEST_CASE("admission: pages written once stay out of the cache; the second touch admits; bytes always right") {
    for (int admit : {0, 1, 2}) {
        CAPTURE(admit);
        const std::string path = fresh_pool("dp-admit");
        speckv_pool *p = open_pool("file:" + path + "?size=16M", {{"cache.admit", std::to_string(admit)}});
        std::vector<unsigned char> page(4096), back(4096);
        for (size_t i = 0; i < page.size(); i++) page[i] = static_cast<unsigned char>(i * 7 + admit);
        speckv_handle h;
        REQUIRE(speckv_alloc(p, 4 * 4096, SPECKV_DTYPE_OPAQUE, nullptr, &h) == SPECKV_OK);
        for (int k = 0; k < 4; k++) REQUIRE(speckv_write(p, h, uint64_t(k) * 4096, page.data(), 4096) == SPECKV_OK);
        speckv_pool_stats st0{}, st1{}, st2{};
        st0.struct_size = st1.struct_size = st2.struct_size = sizeof st0;
        REQUIRE(speckv_stats(p, &st0) == SPECKV_OK);
        // First read of page 0 after the write: a hit only when writes are cached (policy 0).
        REQUIRE(speckv_access(p, h, 0, back.data(), 4096, 0) == SPECKV_OK);
        CHECK(back == page);
        REQUIRE(speckv_stats(p, &st1) == SPECKV_OK);
        CHECK((st1.cache_hits - st0.cache_hits) == (admit == 0 ? 1u : 0u));
        // Second read: every policy has it cached by now (1: the first read
        // stored it; 2: the write was the first touch, the read the second).
        REQUIRE(speckv_access(p, h, 0, back.data(), 4096, 0) == SPECKV_OK);
        CHECK(back == page);
        REQUIRE(speckv_stats(p, &st2) == SPECKV_OK);
        CHECK(st2.cache_hits - st1.cache_hits == 1u);
        // A page written again (the tail page of a growing block): policies 0
        // and 2 store the new version at the write, so the read after it hits.
        REQUIRE(speckv_write(p, h, 0, page.data(), 4096) == SPECKV_OK);
        speckv_pool_stats st3{}, st4{};
        st3.struct_size = st4.struct_size = sizeof st3;
        REQUIRE(speckv_stats(p, &st3) == SPECKV_OK);
        REQUIRE(speckv_access(p, h, 0, back.data(), 4096, 0) == SPECKV_OK);
        CHECK(back == page);
        REQUIRE(speckv_stats(p, &st4) == SPECKV_OK);
        CHECK(st4.cache_hits - st3.cache_hits == (admit == 1 ? 0u : 1u));
        speckv_pool_close(p);
        // Another process's view: a fresh attach reads a page twice; under
        // policy 2 the first read (first touch here) is not cached, the third is.
        speckv_pool *q = open_pool("file:" + path, {{"cache.admit", std::to_string(admit)}});
        speckv_pool_stats a{}, b{};
        a.struct_size = b.struct_size = sizeof a;
        REQUIRE(speckv_stats(q, &a) == SPECKV_OK);
        for (int k = 0; k < 3; k++) {
            REQUIRE(speckv_access(q, h, 4096, back.data(), 4096, 0) == SPECKV_OK);
            CHECK(back == page);
        }
        REQUIRE(speckv_stats(q, &b) == SPECKV_OK);
        CHECK(b.cache_hits - a.cache_hits == (admit == 2 ? 1u : 2u));
        speckv_pool_close(q);
        unlink(path.c_str());
    }
}
