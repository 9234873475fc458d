// SPDX-License-Identifier: Apache-2.0
// The pool through the C ABI (and the core's check()) on real files.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "pool/pool.h"
#include "pool/pool_format.h"
#include "speckv.h"
#include "testutil.h"

namespace {

struct PoolGuard {
    speckv_pool *p = nullptr;
    ~PoolGuard() { speckv_pool_close(p); }
};

std::string uri_of(const std::string &path, const char *q = "?size=8M") { return "file:" + path + q; }

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
    std::vector<unsigned char> v(n);
    for (size_t i = 0; i < n; i++) v[i] = static_cast<unsigned char>((i * 2654435761u + seed) >> 7);
    return v;
}

speckv_hint hint_for(uint32_t layer) {
    speckv_hint h;
    std::memset(&h, 0, sizeof h);
    h.struct_size = sizeof h;
    h.tenant = 7;
    h.request = 42;
    h.layer = layer;
    h.token_count = 16;
    return h;
}

void patch_file(const std::string &path, uint64_t off, const void *bytes, size_t n) {
    int fd = open(path.c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    REQUIRE(pwrite(fd, bytes, n, static_cast<off_t>(off)) == static_cast<ssize_t>(n));
    close(fd);
}

void flip_bit(const std::string &path, uint64_t off, int bit) {
    int fd = open(path.c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    unsigned char b;
    REQUIRE(pread(fd, &b, 1, static_cast<off_t>(off)) == 1);
    b ^= static_cast<unsigned char>(1u << bit);
    REQUIRE(pwrite(fd, &b, 1, static_cast<off_t>(off)) == 1);
    close(fd);
}

speckv::PoolInfo info_of(const std::string &path) {
    std::unique_ptr<speckv::Pool> p;
    REQUIRE(speckv::Pool::open_readonly(path, &p) == SPECKV_OK);
    speckv::PoolInfo i;
    p->info(&i);
    return i;
}

std::vector<std::string> problems_of(const std::string &path) {
    std::unique_ptr<speckv::Pool> p;
    REQUIRE(speckv::Pool::open_readonly(path, &p) == SPECKV_OK);
    speckv::CheckReport r;
    p->check(&r);
    return r.problems;
}

}  // namespace

TEST_CASE("geometry: the plan a pool is created with is the plan an opener recomputes, at every size") {
    // validate_superblock re-plans with the stored max_blocks; with an automatic max_blocks the
    // creator's plan differed from 2 GiB up, and such pools could not be opened.
    for (uint64_t mib : {4ull, 5ull, 64ull, 1000ull, 1024ull, 2048ull, 3072ull, 4095ull, 4096ull, 65536ull, 1ull << 20}) {
        for (uint32_t page : {4096u, 65536u}) {
            for (uint32_t summary : {0u, 64u}) {
                speckv::fmt::Superblock a{}, b{};
                REQUIRE(speckv::plan_geometry(mib << 20, page, 0, &a, summary) == SPECKV_OK);
                REQUIRE(speckv::plan_geometry(mib << 20, page, a.max_blocks, &b, summary) == SPECKV_OK);
                INFO(mib << " MiB, page " << page << ", summary " << summary);
                CHECK(a.n_pages == b.n_pages);
                CHECK(a.data_off == b.data_off);
                CHECK(a.index_buckets == b.index_buckets);
                CHECK(a.summary_off == b.summary_off);
                CHECK(a.data_off + a.n_pages * page <= a.pool_bytes);
            }
        }
    }
}

TEST_CASE("data survives close and reopen; handles stay valid") {
    std::string path = fresh_pool("persist");
    speckv_handle h[3];
    auto a = pattern(10000, 1), b = pattern(4096, 2), c = pattern(1, 3);
    {
        PoolGuard g;
        REQUIRE(speckv_pool_open(uri_of(path).c_str(), nullptr, &g.p) == SPECKV_OK);
        speckv_hint hi = hint_for(0);
        REQUIRE(speckv_alloc(g.p, a.size(), SPECKV_DTYPE_FP16, &hi, &h[0]) == SPECKV_OK);
        REQUIRE(speckv_alloc(g.p, b.size(), SPECKV_DTYPE_FP32, nullptr, &h[1]) == SPECKV_OK);
        REQUIRE(speckv_alloc(g.p, c.size(), SPECKV_DTYPE_OPAQUE, nullptr, &h[2]) == SPECKV_OK);
        CHECK(h[0] != h[1]);
        CHECK(speckv_write(g.p, h[0], 0, a.data(), a.size()) == SPECKV_OK);
        CHECK(speckv_write(g.p, h[1], 0, b.data(), b.size()) == SPECKV_OK);
        CHECK(speckv_write(g.p, h[2], 0, c.data(), c.size()) == SPECKV_OK);
    }
    PoolGuard g;
    REQUIRE(speckv_pool_open(("file:" + path).c_str(), nullptr, &g.p) == SPECKV_OK);
    std::vector<unsigned char> back(10000);
    REQUIRE(speckv_access(g.p, h[0], 0, back.data(), a.size(), 0) == SPECKV_OK);
    CHECK(back == a);
    REQUIRE(speckv_access(g.p, h[1], 0, back.data(), b.size(), 0) == SPECKV_OK);
    CHECK(std::memcmp(back.data(), b.data(), b.size()) == 0);
    REQUIRE(speckv_access(g.p, h[2], 0, back.data(), 1, 0) == SPECKV_OK);
    CHECK(back[0] == c[0]);
    speckv_block_meta m;
    m.struct_size = sizeof m;
    REQUIRE(speckv_block_info(g.p, h[0], &m) == SPECKV_OK);
    CHECK(m.bytes == 10000);
    CHECK(m.dtype == SPECKV_DTYPE_FP16);
    CHECK(m.tenant == 7);
    CHECK(m.request == 42);
    CHECK(m.token_count == 16);
    m.struct_size = 8;
    CHECK(speckv_block_info(g.p, h[0], &m) == SPECKV_ESTRUCT);
    // Partial, unaligned range across a page boundary.
    REQUIRE(speckv_access(g.p, h[0], 4000, back.data(), 300, 0) == SPECKV_OK);
    CHECK(std::memcmp(back.data(), a.data() + 4000, 300) == 0);
    speckv_pool_stats st;
    st.struct_size = sizeof st;
    REQUIRE(speckv_stats(g.p, &st) == SPECKV_OK);
    CHECK(st.blocks_live == 3);
    CHECK(st.pages_used == 3 + 1 + 1);
    CHECK(st.reads == 4);
    auto i = info_of(path);
    CHECK(i.bytes_by_dtype[SPECKV_DTYPE_FP16] == 10000);
    CHECK(i.bytes_by_dtype[SPECKV_DTYPE_FP32] == 4096);
    CHECK(problems_of(path).empty());
}

TEST_CASE("unwritten bytes read as zero; partial writes keep the rest") {
    PoolGuard g;
    REQUIRE(speckv_pool_open("anon:?size=8M", nullptr, &g.p) == SPECKV_OK);
    speckv_handle h;
    REQUIRE(speckv_alloc(g.p, 9000, SPECKV_DTYPE_OPAQUE, nullptr, &h) == SPECKV_OK);
    std::vector<unsigned char> back(9000, 0xAA);
    REQUIRE(speckv_access(g.p, h, 0, back.data(), back.size(), 0) == SPECKV_OK);
    CHECK(std::all_of(back.begin(), back.end(), [](unsigned char x) { return x == 0; }));
    unsigned char mid[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    REQUIRE(speckv_write(g.p, h, 4090, mid, 10) == SPECKV_OK);  // straddles pages 0 and 1
    REQUIRE(speckv_access(g.p, h, 0, back.data(), back.size(), 0) == SPECKV_OK);
    CHECK(back[4089] == 0);
    CHECK(std::memcmp(back.data() + 4090, mid, 10) == 0);
    CHECK(back[4100] == 0);
    // Reused pages of a freed block read as zero again.
    std::vector<unsigned char> ones(9000, 1);
    REQUIRE(speckv_write(g.p, h, 0, ones.data(), ones.size()) == SPECKV_OK);
    REQUIRE(speckv_free(g.p, h) == SPECKV_OK);
    speckv_handle h2;
    REQUIRE(speckv_alloc(g.p, 9000, SPECKV_DTYPE_OPAQUE, nullptr, &h2) == SPECKV_OK);
    CHECK(h2 != h);  // never reused
    REQUIRE(speckv_access(g.p, h2, 0, back.data(), back.size(), 0) == SPECKV_OK);
    CHECK(std::all_of(back.begin(), back.end(), [](unsigned char x) { return x == 0; }));
}

TEST_CASE("bad handles: double free, use after free, never issued") {
    PoolGuard g;
    REQUIRE(speckv_pool_open("anon:?size=8M", nullptr, &g.p) == SPECKV_OK);
    speckv_handle h;
    REQUIRE(speckv_alloc(g.p, 100, SPECKV_DTYPE_OPAQUE, nullptr, &h) == SPECKV_OK);
    REQUIRE(speckv_free(g.p, h) == SPECKV_OK);
    CHECK(speckv_free(g.p, h) == SPECKV_EBADHANDLE);
    CHECK(std::string(speckv_errmsg()).find("not live") != std::string::npos);
    unsigned char b[4] = {0};
    CHECK(speckv_write(g.p, h, 0, b, 4) == SPECKV_EBADHANDLE);
    CHECK(speckv_access(g.p, h, 0, b, 4, 0) == SPECKV_EBADHANDLE);
    const void *ptr;
    size_t len;
    CHECK(speckv_pin(g.p, h, &ptr, &len) == SPECKV_EBADHANDLE);
    CHECK(speckv_unpin(g.p, h) == SPECKV_EBADHANDLE);
    CHECK(speckv_free(g.p, 0) == SPECKV_EBADHANDLE);
    speckv_block_meta m;
    m.struct_size = sizeof m;
    CHECK(speckv_block_info(g.p, h, &m) == SPECKV_EBADHANDLE);
    CHECK(speckv_free(g.p, 0xFFFFFFFFFFFFFFFFull) == SPECKV_EBADHANDLE);
    CHECK(speckv_access(g.p, (uint64_t(5) << 24) | 3, 0, b, 4, 0) == SPECKV_EBADHANDLE);
    speckv_pool_stats st;
    st.struct_size = sizeof st;
    REQUIRE(speckv_stats(g.p, &st) == SPECKV_OK);
    CHECK(st.blocks_live == 0);
}

TEST_CASE("argument errors: zero bytes, dtype, ranges, NULLs, struct sizes, flags") {
    PoolGuard g;
    REQUIRE(speckv_pool_open("anon:?size=8M", nullptr, &g.p) == SPECKV_OK);
    speckv_handle h;
    CHECK(speckv_alloc(g.p, 0, SPECKV_DTYPE_OPAQUE, nullptr, &h) == SPECKV_EINVAL);
    CHECK(speckv_alloc(g.p, 8, 9, nullptr, &h) == SPECKV_EINVAL);
    CHECK(speckv_alloc(g.p, 8, -1, nullptr, &h) == SPECKV_EINVAL);
    CHECK(speckv_alloc(g.p, 8, 0, nullptr, nullptr) == SPECKV_EINVAL);
    CHECK(speckv_alloc(nullptr, 8, 0, nullptr, &h) == SPECKV_EINVAL);
    speckv_hint hi = hint_for(1);
    hi.struct_size = sizeof hi - 8;
    CHECK(speckv_alloc(g.p, 8, 0, &hi, &h) == SPECKV_ESTRUCT);
    CHECK(speckv_prefetch(g.p, &hi) == SPECKV_ESTRUCT);
    CHECK(speckv_prefetch(g.p, nullptr) == SPECKV_EINVAL);
    hi.struct_size = sizeof hi;
    CHECK(speckv_prefetch(g.p, &hi) == SPECKV_OK);
    REQUIRE(speckv_alloc(g.p, 100, 0, &hi, &h) == SPECKV_OK);
    unsigned char b[200] = {0};
    CHECK(speckv_write(g.p, h, 0, b, 101) == SPECKV_ERANGE);
    CHECK(speckv_write(g.p, h, 101, b, 0) == SPECKV_ERANGE);
    CHECK(speckv_write(g.p, h, 100, b, 0) == SPECKV_OK);
    CHECK(speckv_write(g.p, h, UINT64_MAX, b, 2) == SPECKV_ERANGE);
    CHECK(speckv_access(g.p, h, 50, b, 51, 0) == SPECKV_ERANGE);
    CHECK(speckv_access(g.p, h, 0, nullptr, 10, 0) == SPECKV_EINVAL);
    CHECK(speckv_write(g.p, h, 0, nullptr, 10) == SPECKV_EINVAL);
    CHECK(speckv_access(g.p, h, 0, b, 10, 0x80) == SPECKV_EINVAL);
    speckv_pool_stats st;
    st.struct_size = 12;
    CHECK(speckv_stats(g.p, &st) == SPECKV_ESTRUCT);
    CHECK(speckv_stats(g.p, nullptr) == SPECKV_EINVAL);
    char js[8];
    size_t need = 0;
    CHECK(speckv_stats_json(g.p, js, sizeof js, &need) == SPECKV_ERANGE);
    std::vector<char> big(need + 1);
    CHECK(speckv_stats_json(g.p, big.data(), big.size(), nullptr) == SPECKV_OK);
    CHECK(std::string(big.data()).find("\"prefetch_hints\":1") != std::string::npos);
}

TEST_CASE("out of space: pages and block slots, cleanly reported") {
    PoolGuard g;
    REQUIRE(speckv_pool_open("anon:?size=8M&max_blocks=64", nullptr, &g.p) == SPECKV_OK);
    speckv_pool_stats st;
    st.struct_size = sizeof st;
    REQUIRE(speckv_stats(g.p, &st) == SPECKV_OK);
    speckv_handle h;
    CHECK(speckv_alloc(g.p, (st.pages_total + 1) * 4096, 0, nullptr, &h) == SPECKV_ENOSPC);
    std::vector<speckv_handle> hs;
    for (int i = 0; i < 64; i++) {
        REQUIRE(speckv_alloc(g.p, 1, 0, nullptr, &h) == SPECKV_OK);
        hs.push_back(h);
    }
    CHECK(speckv_alloc(g.p, 1, 0, nullptr, &h) == SPECKV_ENOSPC);
    CHECK(std::string(speckv_errmsg()).find("slots") != std::string::npos);
    for (auto x : hs) REQUIRE(speckv_free(g.p, x) == SPECKV_OK);
    // Fill the pages with one block, then nothing more fits; freeing makes room.
    REQUIRE(speckv_alloc(g.p, st.pages_total * 4096, 0, nullptr, &h) == SPECKV_OK);
    speckv_handle h2;
    CHECK(speckv_alloc(g.p, 1, 0, nullptr, &h2) == SPECKV_ENOSPC);
    CHECK(std::string(speckv_errmsg()).find("free pages") != std::string::npos);
    REQUIRE(speckv_free(g.p, h) == SPECKV_OK);
    CHECK(speckv_alloc(g.p, 1, 0, nullptr, &h2) == SPECKV_OK);
}

TEST_CASE("pin: zero-copy pointer; write and free refused while pinned") {
    PoolGuard g;
    REQUIRE(speckv_pool_open("anon:?size=8M", nullptr, &g.p) == SPECKV_OK);
    speckv_handle h;
    auto a = pattern(6000, 9);
    REQUIRE(speckv_alloc(g.p, 8192, 0, nullptr, &h) == SPECKV_OK);
    REQUIRE(speckv_write(g.p, h, 0, a.data(), a.size()) == SPECKV_OK);
    const void *ptr = nullptr;
    size_t len = 0;
    REQUIRE(speckv_pin(g.p, h, &ptr, &len) == SPECKV_OK);
    CHECK(len == 8192);
    CHECK(std::memcmp(ptr, a.data(), a.size()) == 0);
    CHECK(static_cast<const unsigned char *>(ptr)[8000] == 0);  // unwritten page materialised as zeros
    CHECK(speckv_write(g.p, h, 0, a.data(), 1) == SPECKV_EBUSY);
    CHECK(speckv_free(g.p, h) == SPECKV_EBUSY);
    CHECK(speckv_pin(g.p, h, nullptr, &len) == SPECKV_EINVAL);
    REQUIRE(speckv_unpin(g.p, h) == SPECKV_OK);
    CHECK(speckv_unpin(g.p, h) == SPECKV_EINVAL);
    CHECK(speckv_free(g.p, h) == SPECKV_OK);
}

TEST_CASE("bad pools: sizes, not a pool, newer version, truncated, corrupt superblock") {
    speckv_pool *p = nullptr;
    CHECK(speckv_pool_open("anon:?size=1M", nullptr, &p) == SPECKV_EINVAL);  // too small for metadata + 2 MiB alignment
    CHECK(std::string(speckv_errmsg()).find("too small") != std::string::npos);
    CHECK(speckv_pool_open("anon:?size=8390000", nullptr, &p) == SPECKV_EINVAL);  // not a page multiple
    CHECK(speckv_pool_open("anon:?size=8M&page_size=5000", nullptr, &p) == SPECKV_EINVAL);
    CHECK(speckv_pool_open("bogus:x", nullptr, &p) == SPECKV_EURI);
    CHECK(speckv_pool_open("dax:/dev/dax9.9", nullptr, &p) == SPECKV_ENOENT);  // no such device
    CHECK(speckv_pool_open(nullptr, nullptr, &p) == SPECKV_EINVAL);
    CHECK(p == nullptr);

    std::string missing = fresh_pool("missing");
    CHECK(speckv_pool_open(("file:" + missing + "?create=0").c_str(), nullptr, &p) == SPECKV_ENOENT);

    std::string notpool = fresh_pool("notpool");
    {
        std::vector<char> junk(1 << 20, 'x');
        int fd = open(notpool.c_str(), O_CREAT | O_RDWR, 0600);
        REQUIRE(fd >= 0);
        REQUIRE(write(fd, junk.data(), junk.size()) == static_cast<ssize_t>(junk.size()));
        close(fd);
    }
    CHECK(speckv_pool_open(("file:" + notpool).c_str(), nullptr, &p) == SPECKV_ENOTPOOL);
    CHECK(std::string(speckv_errmsg()).find("not a speckv pool") != std::string::npos);

    std::string empty = fresh_pool("empty");
    close(open(empty.c_str(), O_CREAT | O_RDWR, 0600));
    CHECK(speckv_pool_open(("file:" + empty).c_str(), nullptr, &p) == SPECKV_ENOTPOOL);

    // A good pool, then damaged in several ways (each on its own copy).
    std::string good = fresh_pool("good");
    REQUIRE(speckv_pool_open(uri_of(good).c_str(), nullptr, &p) == SPECKV_OK);
    speckv_pool_close(p);
    p = nullptr;
    auto copy = [&](const char *tag) {
        std::string c = fresh_pool(tag);
        std::string cmd = "cp '" + good + "' '" + c + "'";
        REQUIRE(std::system(cmd.c_str()) == 0);
        return c;
    };
    {
        std::string c = copy("newer");
        speckv::fmt::Superblock sb;
        int fd = open(c.c_str(), O_RDWR);
        REQUIRE(pread(fd, &sb, sizeof sb, 0) == sizeof sb);
        sb.format_version = 99;
        sb.checksum = speckv::superblock_crc(sb);
        REQUIRE(pwrite(fd, &sb, sizeof sb, 0) == sizeof sb);
        close(fd);
        CHECK(speckv_pool_open(("file:" + c).c_str(), nullptr, &p) == SPECKV_EVERSION);
        CHECK(std::string(speckv_errmsg()).find("newer") != std::string::npos);
    }
    {
        std::string c = copy("sbflip");
        flip_bit(c, 40, 3);  // inside the geometry
        CHECK(speckv_pool_open(("file:" + c).c_str(), nullptr, &p) == SPECKV_ECORRUPT);
        CHECK(std::string(speckv_errmsg()).find("superblock checksum") != std::string::npos);
    }
    {
        std::string c = copy("trunc");
        REQUIRE(truncate(c.c_str(), 6 << 20) == 0);
        CHECK(speckv_pool_open(("file:" + c).c_str(), nullptr, &p) == SPECKV_ECORRUPT);
        CHECK(std::string(speckv_errmsg()).find("truncated") != std::string::npos);
        REQUIRE(truncate(c.c_str(), 300) == 0);  // not even a whole superblock
        CHECK(speckv_pool_open(("file:" + c).c_str(), nullptr, &p) == SPECKV_ENOTPOOL);
    }
    CHECK(p == nullptr);
    // The original is untouched by all of it.
    CHECK(problems_of(good).empty());
}

TEST_CASE("a flipped bit in a data page: SPECKV_ECORRUPT naming the page, nothing else affected") {
    std::string path = fresh_pool("bitflip");
    speckv_handle h1, h2;
    auto a = pattern(8192, 4), b = pattern(4096, 5);
    {
        PoolGuard g;
        REQUIRE(speckv_pool_open(uri_of(path).c_str(), nullptr, &g.p) == SPECKV_OK);
        REQUIRE(speckv_alloc(g.p, a.size(), 0, nullptr, &h1) == SPECKV_OK);
        REQUIRE(speckv_alloc(g.p, b.size(), 0, nullptr, &h2) == SPECKV_OK);
        REQUIRE(speckv_write(g.p, h1, 0, a.data(), a.size()) == SPECKV_OK);
        REQUIRE(speckv_write(g.p, h2, 0, b.data(), b.size()) == SPECKV_OK);
    }
    auto i = info_of(path);
    // h1 owns pages 0 and 1; corrupt page 1.
    flip_bit(path, i.data_off + 1 * 4096 + 123, 5);
    auto probs = problems_of(path);
    REQUIRE(probs.size() == 1);
    CHECK(probs[0].find("page 1 ") != std::string::npos);

    PoolGuard g;
    REQUIRE(speckv_pool_open(("file:" + path).c_str(), nullptr, &g.p) == SPECKV_OK);
    std::vector<unsigned char> back(8192);
    CHECK(speckv_access(g.p, h1, 0, back.data(), 8192, 0) == SPECKV_ECORRUPT);
    CHECK(std::string(speckv_errmsg()).find("page 1 ") != std::string::npos);
    // Page 0 of the same block and the other block are still fine.
    REQUIRE(speckv_access(g.p, h1, 0, back.data(), 4096, 0) == SPECKV_OK);
    CHECK(std::memcmp(back.data(), a.data(), 4096) == 0);
    REQUIRE(speckv_access(g.p, h2, 0, back.data(), 4096, 0) == SPECKV_OK);
    CHECK(std::memcmp(back.data(), b.data(), 4096) == 0);
    // The bad page is quarantined: reads keep failing, and a partial write does not launder it.
    CHECK(speckv_access(g.p, h1, 4096, back.data(), 10, 0) == SPECKV_ECORRUPT);
    CHECK(speckv_write(g.p, h1, 4096, a.data(), 10) == SPECKV_OK);
    CHECK(speckv_access(g.p, h1, 4096, back.data(), 10, 0) == SPECKV_ECORRUPT);
    speckv_pool_stats st;
    st.struct_size = sizeof st;
    REQUIRE(speckv_stats(g.p, &st) == SPECKV_OK);
    CHECK(st.checksum_failures == 1);
    // A whole-page rewrite heals it.
    REQUIRE(speckv_write(g.p, h1, 4096, a.data() + 4096, 4096) == SPECKV_OK);
    REQUIRE(speckv_access(g.p, h1, 0, back.data(), 8192, 0) == SPECKV_OK);
    CHECK(back == a);
}

TEST_CASE("without L1, a read of part of a page still checks the whole page") {
    // cache.bytes = 0: a short read copies only the bytes asked for, but the
    // page's CRC covers all of it, so a flipped bit before, inside or after
    // the range read fails the read.
    std::string path = fresh_pool("partcrc");
    auto a = pattern(4 * 4096, 9);
    speckv_handle h;
    {
        PoolGuard g;
        REQUIRE(speckv_pool_open(uri_of(path).c_str(), nullptr, &g.p) == SPECKV_OK);
        REQUIRE(speckv_alloc(g.p, a.size(), 0, nullptr, &h) == SPECKV_OK);
        REQUIRE(speckv_write(g.p, h, 0, a.data(), a.size()) == SPECKV_OK);
    }
    const uint64_t data_off = info_of(path).data_off;
    speckv_config *c0 = nullptr;
    REQUIRE(speckv_config_new(&c0) == SPECKV_OK);
    REQUIRE(speckv_config_set_int(c0, "cache.bytes", 0) == SPECKV_OK);
    auto open0 = [&](PoolGuard &g) { REQUIRE(speckv_pool_open(("file:" + path).c_str(), c0, &g.p) == SPECKV_OK); };
    std::vector<unsigned char> back(a.size());
    {
        // Intact: every range reads back right (inside a page, at its ends, across two).
        PoolGuard g;
        open0(g);
        const std::pair<size_t, size_t> ranges[] = {{0, 64}, {100, 200}, {4096 - 96, 96}, {4096 - 10, 20},
                                                    {2 * 4096, 1}, {4 * 4096 - 1, 1}, {3 * 4096 + 1, 4095}};
        for (auto [off, len] : ranges) {
            std::fill(back.begin(), back.end(), 0);
            REQUIRE(speckv_access(g.p, h, off, back.data(), len, 0) == SPECKV_OK);
            CHECK(std::memcmp(back.data(), a.data() + off, len) == 0);
        }
        speckv_pool_stats st;
        st.struct_size = sizeof st;
        REQUIRE(speckv_stats(g.p, &st) == SPECKV_OK);
        CHECK(st.cache_hits == 0);
        CHECK(st.sync_reads == 8);  // the read across two pages reads both
        CHECK(st.checksum_failures == 0);
    }
    // Page 0: a bit after the range; page 1: before it; page 2: inside it.
    flip_bit(path, data_off + 0 * 4096 + 4000, 3);
    flip_bit(path, data_off + 1 * 4096 + 10, 6);
    flip_bit(path, data_off + 2 * 4096 + 300, 0);
    PoolGuard g;
    open0(g);
    speckv_config_free(c0);
    std::fill(back.begin(), back.end(), 0xAB);
    CHECK(speckv_access(g.p, h, 0, back.data(), 64, 0) == SPECKV_ECORRUPT);
    CHECK(std::string(speckv_errmsg()).find("page 0 ") != std::string::npos);
    CHECK(std::all_of(back.begin(), back.end(), [](unsigned char c) { return c == 0xAB; }));  // no byte of it copied
    CHECK(speckv_access(g.p, h, 4096 + 2000, back.data(), 64, 0) == SPECKV_ECORRUPT);
    CHECK(std::string(speckv_errmsg()).find("page 1 ") != std::string::npos);
    CHECK(speckv_access(g.p, h, 2 * 4096 + 256, back.data(), 64, 0) == SPECKV_ECORRUPT);
    CHECK(std::string(speckv_errmsg()).find("page 2 ") != std::string::npos);
    CHECK(std::all_of(back.begin(), back.end(), [](unsigned char c) { return c == 0xAB; }));
    // Page 3 is intact.
    REQUIRE(speckv_access(g.p, h, 3 * 4096 + 5, back.data(), 64, 0) == SPECKV_OK);
    CHECK(std::memcmp(back.data(), a.data() + 3 * 4096 + 5, 64) == 0);
    speckv_pool_stats st;
    st.struct_size = sizeof st;
    REQUIRE(speckv_stats(g.p, &st) == SPECKV_OK);
    CHECK(st.checksum_failures == 3);
}

TEST_CASE("a pin trusts this process's earlier check of the same page version, never of another") {
    std::string path = fresh_pool("pinmemo");
    auto a = pattern(8192, 6);
    speckv_config *cfg = nullptr;
    REQUIRE(speckv_config_new(&cfg) == SPECKV_OK);
    REQUIRE(speckv_config_set_int(cfg, "cache.admit", 1) == SPECKV_OK);  // written pages stay out of L1
    PoolGuard g;
    REQUIRE(speckv_pool_open(uri_of(path).c_str(), cfg, &g.p) == SPECKV_OK);
    speckv_config_free(cfg);
    speckv_handle h, h2;
    REQUIRE(speckv_alloc(g.p, a.size(), 0, nullptr, &h) == SPECKV_OK);
    REQUIRE(speckv_alloc(g.p, a.size(), 0, nullptr, &h2) == SPECKV_OK);
    REQUIRE(speckv_write(g.p, h, 0, a.data(), a.size()) == SPECKV_OK);
    REQUIRE(speckv_write(g.p, h2, 0, a.data(), a.size()) == SPECKV_OK);
    const uint64_t data_off = info_of(path).data_off;
    const void *ptr = nullptr;
    size_t len = 0;
    REQUIRE(speckv_pin(g.p, h, &ptr, &len) == SPECKV_OK);  // checks both pages in place
    REQUIRE(speckv_unpin(g.p, h) == SPECKV_OK);
    // A bit flipped behind the pool's back in a version this process checked:
    // the next pin trusts that check (as a cached copy would be trusted).
    flip_bit(path, data_off + 1 * 4096 + 7, 1);
    CHECK(speckv_pin(g.p, h, &ptr, &len) == SPECKV_OK);
    REQUIRE(speckv_unpin(g.p, h) == SPECKV_OK);
    // A new version of the page is checked again at its first pin.
    REQUIRE(speckv_write(g.p, h, 4096, a.data() + 4096, 4096) == SPECKV_OK);
    flip_bit(path, data_off + 1 * 4096 + 7, 1);
    CHECK(speckv_pin(g.p, h, &ptr, &len) == SPECKV_ECORRUPT);
    CHECK(std::string(speckv_errmsg()).find("page 1 ") != std::string::npos);
    // Without the per-process cache (cache.bytes = 0) nothing is remembered: every pin checks.
    speckv_config *c0 = nullptr;
    REQUIRE(speckv_config_new(&c0) == SPECKV_OK);
    REQUIRE(speckv_config_set_int(c0, "cache.bytes", 0) == SPECKV_OK);
    PoolGuard g0;
    REQUIRE(speckv_pool_open(("file:" + path).c_str(), c0, &g0.p) == SPECKV_OK);
    speckv_config_free(c0);
    REQUIRE(speckv_pin(g0.p, h2, &ptr, &len) == SPECKV_OK);
    REQUIRE(speckv_unpin(g0.p, h2) == SPECKV_OK);
    flip_bit(path, data_off + 3 * 4096 + 9, 2);  // h2 owns pages 2 and 3
    CHECK(speckv_pin(g0.p, h2, &ptr, &len) == SPECKV_ECORRUPT);
}

TEST_CASE("two processes: a child's writes are read by the parent, and vice versa") {
    std::string path = fresh_pool("twoproc");
    PoolGuard g;
    REQUIRE(speckv_pool_open(uri_of(path).c_str(), nullptr, &g.p) == SPECKV_OK);
    speckv_handle h;
    REQUIRE(speckv_alloc(g.p, 4096, 0, nullptr, &h) == SPECKV_OK);
    auto a = pattern(4096, 11), b = pattern(4096, 12);
    REQUIRE(speckv_write(g.p, h, 0, a.data(), a.size()) == SPECKV_OK);
    std::vector<unsigned char> back(4096);
    REQUIRE(speckv_access(g.p, h, 0, back.data(), 4096, 0) == SPECKV_OK);  // now cached here
    int pfd[2];
    REQUIRE(pipe(pfd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        speckv_pool *c = nullptr;
        int ok = speckv_pool_open(("file:" + path).c_str(), nullptr, &c) == SPECKV_OK;
        std::vector<unsigned char> seen(4096);
        ok = ok && speckv_access(c, h, 0, seen.data(), 4096, 0) == SPECKV_OK && seen == a;
        ok = ok && speckv_write(c, h, 0, b.data(), b.size()) == SPECKV_OK;
        speckv_handle mine;
        ok = ok && speckv_alloc(c, 100, 0, nullptr, &mine) == SPECKV_OK;
        ok = ok && write(pfd[1], &mine, sizeof mine) == sizeof mine;
        speckv_pool_close(c);
        _exit(ok ? 0 : 1);
    }
    speckv_handle theirs = 0;
    REQUIRE(read(pfd[0], &theirs, sizeof theirs) == sizeof theirs);
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    // The cached copy must not hide the other process's write.
    REQUIRE(speckv_access(g.p, h, 0, back.data(), 4096, 0) == SPECKV_OK);
    CHECK(back == b);
    CHECK(speckv_free(g.p, theirs) == SPECKV_OK);
    close(pfd[0]);
    close(pfd[1]);
}

TEST_CASE("the verified-page cache serves repeat reads") {
    PoolGuard g;
    REQUIRE(speckv_pool_open("anon:?size=8M", nullptr, &g.p) == SPECKV_OK);
    speckv_handle h;
    auto a = pattern(4096, 13);
    REQUIRE(speckv_alloc(g.p, 4096, 0, nullptr, &h) == SPECKV_OK);
    REQUIRE(speckv_write(g.p, h, 0, a.data(), 4096) == SPECKV_OK);
    std::vector<unsigned char> back(4096);
    for (int i = 0; i < 5; i++) REQUIRE(speckv_access(g.p, h, 0, back.data(), 4096, 0) == SPECKV_OK);
    speckv_pool_stats st;
    st.struct_size = sizeof st;
    REQUIRE(speckv_stats(g.p, &st) == SPECKV_OK);
    // cache.admit 2 (the default): the write marked the page, the first read
    // (its second touch) missed and stored it, the next four hit.
    CHECK(st.cache_misses == 1);
    CHECK(st.cache_hits == 4);
    CHECK(back == a);
    // cache.admit 0: the write put the page in the cache (write-allocate).
    PoolGuard g0;
    speckv_config *cfg = nullptr;
    REQUIRE(speckv_config_new(&cfg) == SPECKV_OK);
    REQUIRE(speckv_config_set_int(cfg, "cache.admit", 0) == SPECKV_OK);
    REQUIRE(speckv_pool_open("anon:?size=8M", cfg, &g0.p) == SPECKV_OK);
    speckv_config_free(cfg);
    REQUIRE(speckv_alloc(g0.p, 4096, 0, nullptr, &h) == SPECKV_OK);
    REQUIRE(speckv_write(g0.p, h, 0, a.data(), 4096) == SPECKV_OK);
    for (int i = 0; i < 5; i++) REQUIRE(speckv_access(g0.p, h, 0, back.data(), 4096, 0) == SPECKV_OK);
    REQUIRE(speckv_stats(g0.p, &st) == SPECKV_OK);
    CHECK(st.cache_misses == 0);
    CHECK(st.cache_hits == 5);
    CHECK(back == a);
}

TEST_CASE("config: TOML file and setters reach the pool; bad config fails the open") {
    speckv_config *cfg = nullptr;
    REQUIRE(speckv_config_new(&cfg) == SPECKV_OK);
    CHECK(speckv_config_set_str(cfg, "pool.size", "16M") == SPECKV_OK);
    CHECK(speckv_config_set_int(cfg, "cache.bytes", 0) == SPECKV_OK);
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open("anon:", cfg, &p) == SPECKV_OK);
    speckv_pool_stats st;
    st.struct_size = sizeof st;
    REQUIRE(speckv_stats(p, &st) == SPECKV_OK);
    CHECK(st.pool_bytes == (16 << 20));
    speckv_pool_close(p);
    int64_t mn, mx, df;
    CHECK(speckv_config_bounds("pool.page_size", &mn, &mx, &df) == SPECKV_OK);
    CHECK(df == 4096);
    CHECK(speckv_config_bounds("x.y", &mn, &mx, &df) == SPECKV_ENOENT);
    speckv_config_free(cfg);
    speckv_config_free(nullptr);
}

TEST_CASE("reset wipes blocks, keeps geometry, never re-issues a handle; refuses while others attach") {
    std::string path = fresh_pool("reset");
    speckv_handle before;
    {
        PoolGuard g;
        REQUIRE(speckv_pool_open(uri_of(path).c_str(), nullptr, &g.p) == SPECKV_OK);
        REQUIRE(speckv_alloc(g.p, 5000, SPECKV_DTYPE_BF16, nullptr, &before) == SPECKV_OK);
    }
    auto i0 = info_of(path);
    // A live child holding the pool blocks the reset.
    int pfd[2];
    REQUIRE(pipe(pfd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        speckv_pool *c = nullptr;
        char x = speckv_pool_open(("file:" + path).c_str(), nullptr, &c) == SPECKV_OK ? 'y' : 'n';
        if (write(pfd[1], &x, 1) != 1) _exit(2);
        pause();
        _exit(0);
    }
    char x;
    REQUIRE(read(pfd[0], &x, 1) == 1);
    REQUIRE(x == 'y');
    CHECK(speckv::Pool::reset_uri("file:" + path) == SPECKV_EBUSY);
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    close(pfd[0]);
    close(pfd[1]);
    REQUIRE(speckv::Pool::reset_uri("file:" + path) == SPECKV_OK);
    auto i1 = info_of(path);
    CHECK(i1.blocks_live == 0);
    CHECK(i1.pages_used == 0);
    CHECK(i1.n_pages == i0.n_pages);
    CHECK(std::memcmp(i1.uuid, i0.uuid, 16) == 0);
    CHECK(problems_of(path).empty());
    PoolGuard g;
    REQUIRE(speckv_pool_open(("file:" + path).c_str(), nullptr, &g.p) == SPECKV_OK);
    char b[4];
    CHECK(speckv_access(g.p, before, 0, b, 4, 0) == SPECKV_EBADHANDLE);
    speckv_handle after;
    REQUIRE(speckv_alloc(g.p, 5000, SPECKV_DTYPE_BF16, nullptr, &after) == SPECKV_OK);
    CHECK(after != before);
}

TEST_CASE("log callback receives recovery warnings") {
    struct Sink {
        std::vector<std::string> lines;
    } sink;
    std::string path = fresh_pool("log");
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open(uri_of(path).c_str(), nullptr, &p) == SPECKV_OK);
    // Simulate a process that died attached: a fake attach record with a dead pid.
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    waitpid(pid, nullptr, 0);
    speckv_pool_close(p);
    {
        auto i = info_of(path);
        speckv::fmt::AttachRecord rec{};
        rec.pid.store(static_cast<uint32_t>(pid));
        patch_file(path, speckv::fmt::kSharedOff + offsetof(speckv::fmt::SharedHeader, attach), &rec, sizeof rec);
        (void)i;
    }
    speckv_config *cfg;
    REQUIRE(speckv_config_new(&cfg) == SPECKV_OK);
    REQUIRE(speckv_config_set_log(cfg, [](void *u, int, const char *m) { static_cast<Sink *>(u)->lines.push_back(m); },
                                  &sink) == SPECKV_OK);
    REQUIRE(speckv_pool_open(("file:" + path).c_str(), cfg, &p) == SPECKV_OK);
    speckv_pool_close(p);
    speckv_config_free(cfg);
    REQUIRE(!sink.lines.empty());
    bool saw = false;
    for (auto &l : sink.lines) saw |= l.find("recovering") != std::string::npos;
    CHECK(saw);
    CHECK(info_of(path).recoveries == 1);
}
