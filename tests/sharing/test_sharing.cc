// SPDX-License-Identifier: Apache-2.0
// Content-addressed sharing in one process (and a forked one): publish,
// lookup, references, tenants, quotas, eviction, the hash helper, check.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "share/block_hash.h"
#include "util/flush.h"
#include "pool/pool.h"
#include "pool/pool_format.h"
#include "speckv.h"
#include "testutil.h"

namespace {

struct Hash {
    uint8_t b[SPECKV_HASH_BYTES];
};

Hash key(uint32_t seed) {
    uint32_t tok[16];
    for (int i = 0; i < 16; i++) tok[i] = seed * 1000 + i;
    Hash h;
    REQUIRE(speckv_block_hash(SPECKV_HASH_NATIVE, 0, nullptr, tok, 16, nullptr, 0, h.b) == SPECKV_OK);
    return h;
}

speckv_pool *open_pool(const std::string &uri, int64_t tenant = -1) {
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    if (tenant >= 0) REQUIRE(speckv_config_set_int(c, "tenant.id", tenant) == SPECKV_OK);
    speckv_pool *p = nullptr;
    int rc = speckv_pool_open(uri.c_str(), c, &p);
    speckv_config_free(c);
    REQUIRE_MESSAGE(rc == SPECKV_OK, speckv_errmsg());
    return p;
}

speckv_handle put(speckv_pool *p, uint64_t tenant, size_t bytes, unsigned char fill) {
    speckv_hint hint{};
    hint.struct_size = sizeof hint;
    hint.tenant = tenant;
    speckv_handle h = 0;
    REQUIRE_MESSAGE(speckv_alloc(p, bytes, SPECKV_DTYPE_FP16, &hint, &h) == SPECKV_OK, speckv_errmsg());
    std::vector<unsigned char> buf(bytes, fill);
    REQUIRE(speckv_write(p, h, 0, buf.data(), bytes) == SPECKV_OK);
    return h;
}

void check_clean(const std::string &path) {
    std::unique_ptr<speckv::Pool> ro;
    REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
    speckv::CheckReport rep;
    ro->check(&rep);
    for (const auto &pr : rep.problems) MESSAGE(pr);
    CHECK(rep.problems.empty());
}

}  // namespace

TEST_CASE("SHA-256 matches the FIPS 180-4 examples") {
    auto hex = [](const char *msg, size_t n) {
        speckv::Sha256 s;
        s.update(msg, n);
        uint8_t out[32];
        s.final(out);
        char buf[65];
        for (int i = 0; i < 32; i++) std::snprintf(buf + 2 * i, 3, "%02x", out[i]);
        return std::string(buf);
    };
    CHECK(hex("", 0) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(hex("abc", 3) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    CHECK(hex(two, std::strlen(two)) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    std::string mil(1000000, 'a');
    CHECK(hex(mil.data(), mil.size()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("block hash: chained, seed-free, tenant-salted, strict about its input") {
    uint32_t tok[4] = {1, 2, 3, 4};
    Hash a, b, c, d;
    REQUIRE(speckv_block_hash(SPECKV_HASH_NATIVE, 0, nullptr, tok, 4, nullptr, 0, a.b) == SPECKV_OK);
    REQUIRE(speckv_block_hash(SPECKV_HASH_NATIVE, 0, nullptr, tok, 4, nullptr, 0, b.b) == SPECKV_OK);
    CHECK(std::memcmp(a.b, b.b, 32) == 0);
    REQUIRE(speckv_block_hash(SPECKV_HASH_NATIVE, 0, a.b, tok, 4, nullptr, 0, c.b) == SPECKV_OK);
    CHECK(std::memcmp(a.b, c.b, 32) != 0);  // the parent counts
    REQUIRE(speckv_block_hash(SPECKV_HASH_NATIVE, 1, nullptr, tok, 4, nullptr, 0, d.b) == SPECKV_OK);
    CHECK(std::memcmp(a.b, d.b, 32) != 0);  // so does the tenant
    REQUIRE(speckv_block_hash(SPECKV_HASH_NATIVE, 0, nullptr, tok, 4, "lora", 4, d.b) == SPECKV_OK);
    CHECK(std::memcmp(a.b, d.b, 32) != 0);  // and the extra keys
    // vLLM mode: the tenant is not mixed in; CBOR extras must be one item.
    REQUIRE(speckv_block_hash(SPECKV_HASH_VLLM_CBOR, 0, nullptr, tok, 4, nullptr, 0, a.b) == SPECKV_OK);
    REQUIRE(speckv_block_hash(SPECKV_HASH_VLLM_CBOR, 9, nullptr, tok, 4, nullptr, 0, b.b) == SPECKV_OK);
    CHECK(std::memcmp(a.b, b.b, 32) == 0);
    // The exact bytes: [null, [1,2,3,4], null].
    const uint8_t enc[] = {0x83, 0xF6, 0x84, 0x01, 0x02, 0x03, 0x04, 0xF6};
    speckv::Sha256 s;
    s.update(enc, sizeof enc);
    s.final(c.b);
    CHECK(std::memcmp(a.b, c.b, 32) == 0);
    const uint8_t two_items[] = {0x01, 0x02}, truncated[] = {0x82, 0x01}, indefinite[] = {0x9F, 0x01, 0xFF};
    CHECK(speckv_block_hash(SPECKV_HASH_VLLM_CBOR, 0, nullptr, tok, 4, two_items, 2, a.b) == SPECKV_EINVAL);
    CHECK(speckv_block_hash(SPECKV_HASH_VLLM_CBOR, 0, nullptr, tok, 4, truncated, 2, a.b) == SPECKV_EINVAL);
    CHECK(speckv_block_hash(SPECKV_HASH_VLLM_CBOR, 0, nullptr, tok, 4, indefinite, 3, a.b) == SPECKV_EINVAL);
    CHECK(speckv_block_hash(SPECKV_HASH_VLLM_CBOR, 0, nullptr, tok, 4, two_items, 0, a.b) == SPECKV_EINVAL);  // no item
    CHECK(speckv_block_hash(7, 0, nullptr, tok, 4, nullptr, 0, a.b) == SPECKV_EINVAL);
    CHECK(speckv_block_hash(SPECKV_HASH_NATIVE, 0, nullptr, nullptr, 4, nullptr, 0, a.b) == SPECKV_EINVAL);
    CHECK(speckv_block_hash(SPECKV_HASH_NATIVE, 0, nullptr, tok, 4, nullptr, 0, nullptr) == SPECKV_EINVAL);
    // A deeply nested CBOR item is refused, not recursed into without bound.
    std::vector<uint8_t> deep(200, 0x81);
    deep.push_back(0x01);
    CHECK(speckv::cbor_item_length(deep.data(), deep.size()) == 0);
}

TEST_CASE("publish and lookup: references, immutability, duplicates") {
    std::string path = fresh_pool("share");
    speckv_pool *p = open_pool("file:" + path + "?size=16M");
    Hash k1 = key(1);
    speckv_handle a = put(p, 5, 10000, 0x11);
    speckv_handle found = 0;
    CHECK(speckv_lookup(p, 5, k1.b, &found) == SPECKV_ENOENT);  // not before publish
    speckv_handle canon = 0;
    REQUIRE(speckv_publish(p, a, k1.b, &canon) == SPECKV_OK);
    CHECK(canon == a);
    CHECK(speckv_publish(p, a, k1.b, nullptr) == SPECKV_EPERM);  // twice
    unsigned char byte = 0;
    CHECK(speckv_write(p, a, 0, &byte, 1) == SPECKV_EPERM);     // immutable now
    CHECK(speckv_lookup(p, 5, k1.b, &found) == SPECKV_OK);
    CHECK(found == a);
    CHECK(speckv_lookup(p, 6, k1.b, &found) == SPECKV_ENOENT);  // another tenant's hash space
    Hash k2 = key(2);
    CHECK(speckv_lookup(p, 5, k2.b, &found) == SPECKV_ENOENT);
    std::vector<unsigned char> got(10000);
    REQUIRE(speckv_access(p, a, 0, got.data(), got.size(), 0) == SPECKV_OK);
    CHECK(got == std::vector<unsigned char>(10000, 0x11));
    speckv_block_meta m{};
    m.struct_size = sizeof m;
    REQUIRE(speckv_block_info(p, a, &m) == SPECKV_OK);
    CHECK(std::memcmp(m.content_hash, k1.b, 32) == 0);

    // Same content from another writer: EEXIST, and a reference to the first.
    speckv_handle b = put(p, 5, 10000, 0x11);
    speckv_handle other = 0;
    CHECK(speckv_publish(p, b, k1.b, &other) == SPECKV_EEXIST);
    CHECK(other == a);
    CHECK(speckv_free(p, b) == SPECKV_OK);  // b stayed unpublished: a real free
    CHECK(speckv_free(p, b) == SPECKV_EBADHANDLE);

    // Three references now (publish, lookup, EEXIST). Each free drops one;
    // the block stays published and findable with none.
    for (int i = 0; i < 3; i++) CHECK(speckv_free(p, a) == SPECKV_OK);
    CHECK(speckv_free(p, a) == SPECKV_EBADHANDLE);  // no reference left: reported
    CHECK(speckv_lookup(p, 5, k1.b, &found) == SPECKV_OK);
    CHECK(found == a);
    speckv_pool_stats st{};
    st.struct_size = sizeof st;
    REQUIRE(speckv_stats(p, &st) == SPECKV_OK);
    CHECK(st.blocks_published == 1);
    CHECK(st.shared_bytes == 10000);
    CHECK(st.lookups == 5);
    CHECK(st.lookup_hits == 2);
    CHECK(st.dedup_bytes == 3 * 10000);  // two hits and one publish collision
    CHECK(speckv_free(p, a) == SPECKV_OK);
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
    check_clean(path);

    // A published block outlives its publisher and is found after reopening.
    p = open_pool("file:" + path);
    CHECK(speckv_lookup(p, 5, k1.b, &found) == SPECKV_OK);
    CHECK(found == a);
    CHECK(speckv_free(p, found) == SPECKV_OK);
    CHECK(speckv_publish(p, a, nullptr, nullptr) == SPECKV_EINVAL);
    CHECK(speckv_lookup(p, 5, nullptr, &found) == SPECKV_EINVAL);
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
}

TEST_CASE("a pool handle bound to a tenant never sees another tenant's blocks") {
    std::string path = fresh_pool("tenant");
    speckv_pool *admin = open_pool("file:" + path + "?size=16M");
    Hash k = key(3);
    speckv_handle t2 = put(admin, 2, 4096, 0x22);
    REQUIRE(speckv_publish(admin, t2, k.b, nullptr) == SPECKV_OK);
    speckv_pool *t1 = open_pool("file:" + path, 1);
    speckv_handle h = 0;
    unsigned char buf[16];
    CHECK(speckv_lookup(t1, 2, k.b, &h) == SPECKV_EPERM);   // asking for tenant 2
    CHECK(speckv_lookup(t1, 1, k.b, &h) == SPECKV_ENOENT);  // its own space has no such block
    CHECK(speckv_access(t1, t2, 0, buf, sizeof buf, 0) == SPECKV_EBADHANDLE);
    const void *ptr;
    size_t len;
    CHECK(speckv_pin(t1, t2, &ptr, &len) == SPECKV_EBADHANDLE);
    CHECK(speckv_free(t1, t2) == SPECKV_EBADHANDLE);
    speckv_block_meta m{};
    m.struct_size = sizeof m;
    CHECK(speckv_block_info(t1, t2, &m) == SPECKV_EBADHANDLE);
    speckv_hint hint{};
    hint.struct_size = sizeof hint;
    hint.tenant = 2;
    CHECK(speckv_alloc(t1, 100, 0, &hint, &h) == SPECKV_EPERM);
    CHECK(speckv_tenant_set_quota(t1, 1, 10) == SPECKV_EPERM);
    // Its own blocks work as usual; NULL hint means its tenant.
    REQUIRE(speckv_alloc(t1, 100, 0, nullptr, &h) == SPECKV_OK);
    REQUIRE(speckv_block_info(t1, h, &m) == SPECKV_OK);
    CHECK(m.tenant == 1);
    CHECK(speckv_publish(t1, h, k.b, nullptr) == SPECKV_OK);  // same hash, its own tenant: no collision
    speckv_handle mine = 0;
    CHECK(speckv_lookup(t1, 1, k.b, &mine) == SPECKV_OK);
    CHECK(mine == h);
    CHECK(speckv_access(admin, h, 0, buf, sizeof buf, 0) == SPECKV_OK);  // unbound handles see all
    REQUIRE(speckv_pool_close(t1) == SPECKV_OK);
    REQUIRE(speckv_pool_close(admin) == SPECKV_OK);
    check_clean(path);
}

TEST_CASE("tenant quotas: a clear error, and the tenant's own cached blocks go first") {
    std::string path = fresh_pool("quota");
    speckv_pool *p = open_pool("file:" + path + "?size=16M");
    speckv_handle a = put(p, 3, 3 * 4096, 1);
    REQUIRE(speckv_tenant_set_quota(p, 3, 4) == SPECKV_OK);
    uint64_t used = 0, quota = 0;
    REQUIRE(speckv_tenant_usage(p, 3, &used, &quota) == SPECKV_OK);
    CHECK(used == 3);
    CHECK(quota == 4);
    speckv_hint hint{};
    hint.struct_size = sizeof hint;
    hint.tenant = 3;
    speckv_handle b = 0;
    CHECK(speckv_alloc(p, 2 * 4096, 0, &hint, &b) == SPECKV_EQUOTA);
    CHECK(std::string(speckv_errmsg()).find("quota of 4 pages") != std::string::npos);
    CHECK(speckv_alloc(p, 2 * 4096, 0, nullptr, &b) == SPECKV_OK);  // tenant 0 has no cap
    // Published and unreferenced, tenant 3's block makes way for its next alloc.
    Hash k = key(4);
    REQUIRE(speckv_publish(p, a, k.b, nullptr) == SPECKV_OK);
    CHECK(speckv_alloc(p, 2 * 4096, 0, &hint, &b) == SPECKV_EQUOTA);  // still referenced
    REQUIRE(speckv_free(p, a) == SPECKV_OK);
    CHECK(speckv_alloc(p, 2 * 4096, 0, &hint, &b) == SPECKV_OK);
    speckv_handle f = 0;
    CHECK(speckv_lookup(p, 3, k.b, &f) == SPECKV_ENOENT);  // it was evicted
    REQUIRE(speckv_tenant_usage(p, 3, &used, &quota) == SPECKV_OK);
    CHECK(used == 2);
    REQUIRE(speckv_tenant_set_quota(p, 3, 0) == SPECKV_OK);  // cap removed
    CHECK(speckv_alloc(p, 8 * 4096, 0, &hint, &b) == SPECKV_OK);
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
    check_clean(path);
}

TEST_CASE("eviction under pressure: LRU among unreferenced published blocks, never a referenced one") {
    std::string path = fresh_pool("evict");
    // 4 MiB of data pages at most: 16 blocks of 64 KiB fill it.
    speckv_pool *p = open_pool("file:" + path + "?size=8M");
    speckv_pool_stats st{};
    st.struct_size = sizeof st;
    REQUIRE(speckv_stats(p, &st) == SPECKV_OK);
    const uint64_t blk = 16 * 4096;
    uint64_t n = st.pages_total / 16;
    std::vector<speckv_handle> hs;
    for (uint64_t i = 0; i < n; i++) {
        speckv_handle h = put(p, 0, blk, static_cast<unsigned char>(i + 1));
        Hash k = key(100 + static_cast<uint32_t>(i));
        REQUIRE(speckv_publish(p, h, k.b, nullptr) == SPECKV_OK);
        hs.push_back(h);
    }
    // Keep block 0 referenced; release the rest; touch block 1 last so
    // block 2 is the least recently used.
    for (uint64_t i = 1; i < n; i++) REQUIRE(speckv_free(p, hs[i]) == SPECKV_OK);
    speckv_handle again;
    Hash k1 = key(101);
    REQUIRE(speckv_lookup(p, 0, k1.b, &again) == SPECKV_OK);
    REQUIRE(speckv_free(p, again) == SPECKV_OK);
    speckv_handle fresh = 0;
    REQUIRE_MESSAGE(speckv_alloc(p, blk, 0, nullptr, &fresh) == SPECKV_OK, speckv_errmsg());
    REQUIRE(speckv_stats(p, &st) == SPECKV_OK);
    CHECK(st.evictions >= 1);
    speckv_handle f;
    Hash k0 = key(100), k2 = key(102);
    CHECK(speckv_lookup(p, 0, k0.b, &f) == SPECKV_OK);      // referenced: kept
    CHECK(speckv_lookup(p, 0, k1.b, &f) == SPECKV_OK);      // recently used: kept
    CHECK(speckv_lookup(p, 0, k2.b, &f) == SPECKV_ENOENT);  // least recently used: gone
    std::vector<unsigned char> got(blk);
    REQUIRE(speckv_access(p, hs[0], 0, got.data(), blk, 0) == SPECKV_OK);
    CHECK(got == std::vector<unsigned char>(blk, 1));
    // With everything referenced, an alloc fails cleanly instead of evicting.
    std::vector<speckv_handle> held;
    for (uint64_t i = 0; i < n; i++) {
        Hash k = key(100 + static_cast<uint32_t>(i));
        if (speckv_lookup(p, 0, k.b, &f) == SPECKV_OK) held.push_back(f);
    }
    speckv_handle x;
    CHECK(speckv_alloc(p, 2 * blk, 0, nullptr, &x) == SPECKV_ENOSPC);
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
    check_clean(path);
}

TEST_CASE("a dead process's references and unpublished blocks are reclaimed; published blocks stay") {
    std::string path = fresh_pool("reclaim");
    speckv_pool *p = open_pool("file:" + path + "?size=8M");
    Hash k = key(7);
    speckv_handle pub = put(p, 0, 4096, 7);
    REQUIRE(speckv_publish(p, pub, k.b, nullptr) == SPECKV_OK);
    REQUIRE(speckv_free(p, pub) == SPECKV_OK);
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    pid_t child = fork();
    if (child == 0) {
        speckv_pool *c = nullptr;
        if (speckv_pool_open(("file:" + path).c_str(), nullptr, &c) != SPECKV_OK) _exit(2);
        speckv_handle h;
        if (speckv_lookup(c, 0, k.b, &h) != SPECKV_OK) _exit(3);  // holds a reference
        speckv_handle mine;
        if (speckv_alloc(c, 3 * 4096, 0, nullptr, &mine) != SPECKV_OK) _exit(4);  // unpublished
        char x = 1;
        if (write(ready[1], &x, 1) != 1) _exit(5);
        pause();
        _exit(0);
    }
    char x;
    REQUIRE(read(ready[0], &x, 1) == 1);
    {
        std::vector<speckv::BlockInfo> bl;
        std::unique_ptr<speckv::Pool> ro;
        REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
        ro->list_blocks(&bl);
        REQUIRE(bl.size() == 2);
        for (const auto &b : bl)
            if (b.published) CHECK(b.holders == 1);
    }
    kill(child, SIGKILL);
    int st;
    REQUIRE(waitpid(child, &st, 0) == child);
    // The next opener recovers: the child's block is gone, its reference too.
    speckv_pool *q = open_pool("file:" + path);
    std::unique_ptr<speckv::Pool> ro;
    REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
    std::vector<speckv::BlockInfo> bl;
    ro->list_blocks(&bl);
    REQUIRE(bl.size() == 1);
    CHECK(bl[0].handle == pub);
    CHECK(bl[0].holders == 0);
    speckv_pool_stats s{};
    s.struct_size = sizeof s;
    REQUIRE(speckv_stats(q, &s) == SPECKV_OK);
    CHECK(s.reclaimed_blocks == 1);
    CHECK(s.lookup_hits == 1);  // the dead child's counters were kept
    REQUIRE(speckv_pool_close(q) == SPECKV_OK);
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
    check_clean(path);
}

TEST_CASE("check finds a damaged hash index and repair rebuilds it") {
    std::string path = fresh_pool("index");
    speckv_pool *p = open_pool("file:" + path + "?size=8M");
    for (uint32_t i = 0; i < 8; i++) {
        speckv_handle h = put(p, 0, 4096, static_cast<unsigned char>(i));
        Hash k = key(200 + i);
        REQUIRE(speckv_publish(p, h, k.b, nullptr) == SPECKV_OK);
        REQUIRE(speckv_free(p, h) == SPECKV_OK);
    }
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
    {
        std::unique_ptr<speckv::Pool> ro;
        REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
        speckv::fmt::Superblock sb;
        std::memcpy(&sb, ro->image(), sizeof sb);
        // Point every non-empty bucket at a slot that is not in it (a loop
        // on itself for a one-entry chain is also caught).
        FILE *f = std::fopen(path.c_str(), "r+b");
        REQUIRE(f);
        for (uint64_t b = 0; b < sb.index_buckets; b++) {
            uint64_t v;
            std::memcpy(&v, ro->image() + sb.index_off + b * 8, 8);
            if (!v) continue;
            uint64_t bad = sb.max_blocks + 5;
            std::fseek(f, static_cast<long>(sb.index_off + b * 8), SEEK_SET);
            std::fwrite(&bad, 8, 1, f);
            break;
        }
        std::fclose(f);
        speckv::CheckReport rep;
        std::unique_ptr<speckv::Pool> ro2;
        REQUIRE(speckv::Pool::open_readonly(path, &ro2) == SPECKV_OK);
        ro2->check(&rep);
        CHECK(!rep.problems.empty());
    }
    std::unique_ptr<speckv::Pool> rw;
    REQUIRE(speckv::Pool::open("file:" + path, speckv::Config(), &rw) == SPECKV_OK);
    REQUIRE(rw->repair() == SPECKV_OK);
    uint64_t h;
    for (uint32_t i = 0; i < 8; i++) {
        Hash k = key(200 + i);
        CHECK(rw->lookup(0, k.b, &h) == SPECKV_OK);
        CHECK(rw->free(h) == SPECKV_OK);
    }
    rw->close();
    check_clean(path);
}

TEST_CASE("share.flush: publish writes back, lookup invalidates; another process reads the same bytes") {
    MESSAGE("write-back instruction on this CPU: ", std::string(speckv::writeback_insn()));
    std::string path = fresh_pool("flush");
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    REQUIRE(speckv_config_set_int(c, "share.flush", 1) == SPECKV_OK);
    CHECK(speckv_config_set_int(c, "share.flush", 2) == SPECKV_EINVAL);
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open(("file:" + path + "?size=8M").c_str(), c, &p) == SPECKV_OK);
    Hash k = key(77);
    pid_t child = fork();
    if (child == 0) {
        speckv_pool *q = nullptr;
        if (speckv_pool_open(("file:" + path).c_str(), c, &q) != SPECKV_OK) _exit(2);
        speckv_hint hint{};
        hint.struct_size = sizeof hint;
        speckv_handle h;
        if (speckv_alloc(q, 3 * 4096 + 5, SPECKV_DTYPE_OPAQUE, &hint, &h) != SPECKV_OK) _exit(3);
        std::vector<unsigned char> buf(3 * 4096 + 5);
        for (size_t i = 0; i < buf.size(); i++) buf[i] = static_cast<unsigned char>(i * 7 + 1);
        if (speckv_write(q, h, 0, buf.data(), buf.size()) != SPECKV_OK) _exit(4);
        if (speckv_publish(q, h, k.b, nullptr) != SPECKV_OK) _exit(5);
        if (speckv_free(q, h) != SPECKV_OK) _exit(6);
        _exit(speckv_pool_close(q) == SPECKV_OK ? 0 : 7);
    }
    int st;
    REQUIRE(waitpid(child, &st, 0) == child);
    REQUIRE(WIFEXITED(st));
    REQUIRE(WEXITSTATUS(st) == 0);
    speckv_handle h;
    REQUIRE(speckv_lookup(p, 0, k.b, &h) == SPECKV_OK);
    std::vector<unsigned char> got(3 * 4096 + 5);
    REQUIRE(speckv_access(p, h, 0, got.data(), got.size(), 0) == SPECKV_OK);
    bool same = true;
    for (size_t i = 0; i < got.size(); i++) same &= got[i] == static_cast<unsigned char>(i * 7 + 1);
    CHECK(same);
    REQUIRE(speckv_free(p, h) == SPECKV_OK);
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
    speckv_config_free(c);
    check_clean(path);
}
