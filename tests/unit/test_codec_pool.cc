// SPDX-License-Identifier: Apache-2.0
// The codec in the pool (docs/codec.md §17): pages of FP16/BF16/FP32 blocks
// stored as records when a write completes them, read back decoded through
// every tier (L1 write-allocate, L2 prefetch, L3 read, pin), by any process,
// with corruption and crashes reported, never decoded into garbage.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "util/crc32c.h"
#include "pool/pool.h"
#include "pool/pool_format.h"
#include "speckv.h"
#include "codec_testutil.h"
#include "testutil.h"

namespace {

using namespace codec_testutil;
using speckv::codec::Mode;

speckv_pool *open_codec(const std::string &uri, std::initializer_list<std::pair<const char *, const char *>> kv) {
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    for (auto &[k, v] : kv) REQUIRE_MESSAGE(speckv_config_set_str(c, k, v) == SPECKV_OK, k, speckv_errmsg());
    speckv_pool *p = nullptr;
    int rc = speckv_pool_open(uri.c_str(), c, &p);
    speckv_config_free(c);
    REQUIRE_MESSAGE(rc == SPECKV_OK, speckv_errmsg());
    return p;
}

// What a read of a page coded with `mode` must return: the reference's
// encode -> decode of exactly those bytes.
std::vector<unsigned char> roundtrip(Mode mode, const void *src, size_t bytes, uint32_t channels = 1) {
    std::vector<unsigned char> rec(speckv::codec::max_record_size(bytes)), out(bytes);
    size_t len = 0, n = 0;
    REQUIRE(speckv::codec::encode(mode, SPECKV_DTYPE_FP16, src, bytes, {channels}, rec.data(), rec.size(), &len,
                                  speckv::codec::Impl::scalar) == SPECKV_OK);
    REQUIRE(speckv::codec::decode(rec.data(), len, out.data(), out.size(), &n, speckv::codec::Impl::scalar) == SPECKV_OK);
    REQUIRE(n == bytes);
    return out;
}

// Relative RMS error of FP16 values read back (`got`) against `x`, over [from, to).
double rel_err_fp16(const std::vector<uint16_t> &x, const std::vector<unsigned char> &got, size_t from, size_t to) {
    double num = 0, den = 0;
    for (size_t i = from; i < to; i++) {
        uint16_t h;
        std::memcpy(&h, got.data() + 2 * i, 2);
        double a = speckv::codec::fp16_to_fp32(x[i]), b = speckv::codec::fp16_to_fp32(h);
        num += (a - b) * (a - b);
        den += a * a;
    }
    return std::sqrt(num / den);
}


}  // namespace

TEST_CASE("codec.mode: the choices are the codec's preset names, in mode-id order") {
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    for (int i = 0; i < speckv::codec::kModeCount; i++) {
        const char *name = speckv::codec::mode_name(Mode(i));
        REQUIRE(speckv_config_set_str(c, "codec.mode", name) == SPECKV_OK);
        int64_t v = -1;
        REQUIRE(speckv_config_get_int(c, "codec.mode", &v) == SPECKV_OK);
        CHECK_MESSAGE(v == i, name);
    }
    REQUIRE(speckv_config_set_str(c, "codec.mode", "adaptive") == SPECKV_OK);
    int64_t ad = -1;
    REQUIRE(speckv_config_get_int(c, "codec.mode", &ad) == SPECKV_OK);
    CHECK(ad == speckv::codec::kModeCount);
    CHECK(speckv_config_set_str(c, "codec.mode", "zstd") == SPECKV_EINVAL);
    CHECK(std::string(speckv_errmsg()).find("not one of") != std::string::npos);
    CHECK(speckv_config_set_int(c, "codec.channels", 0) == SPECKV_EINVAL);
    speckv_config_free(c);
}

TEST_CASE("codec in the pool: completed pages are stored as records and read back decoded, by any process") {
    std::string path = fresh_pool("codec");
    const size_t bytes = 4 * 4096 + 2048;  // 4 whole pages and a short last one
    auto vals = kv_values(bytes / 2, 3);
    speckv_handle b;
    {
        speckv_pool *p = open_codec("file:" + path + "?size=16M", {{"codec.mode", "int8"}, {"cache.bytes", "0"}});
        b = alloc_fp16(p, bytes);
        REQUIRE(speckv_write(p, b, 0, vals.data(), bytes) == SPECKV_OK);
        auto s = stats_of(p);
        CHECK(s.codec_pages_encoded == 5);
        CHECK(s.codec_raw_bytes == bytes);
        CHECK(s.codec_stored_bytes < bytes * 6 / 10);  // int8: ~2x
        CHECK(s.codec_stored_bytes > bytes / 3);
        // Each page reads back as the reference's round trip of that page.
        auto got = read_all(p, b, bytes);
        for (size_t pg = 0; pg * 4096 < bytes; pg++) {
            size_t n = std::min<size_t>(4096, bytes - pg * 4096);
            auto want = roundtrip(Mode::int8, reinterpret_cast<const unsigned char *>(vals.data()) + pg * 4096, n);
            CHECK_MESSAGE(std::memcmp(got.data() + pg * 4096, want.data(), n) == 0, "page ", pg);
        }
        CHECK(std::memcmp(got.data(), vals.data(), bytes) != 0);  // lossy: it really was coded
        CHECK(stats_of(p).codec_pages_decoded == 5);  // no cache: every page decoded from L3
        speckv::PoolInfo in;
        p->rep->info(&in);
        CHECK(in.pages_coded == 5);
        CHECK(in.coded_raw_bytes == bytes);
        CHECK(in.coded_stored_bytes == s.codec_stored_bytes);
        speckv::CheckReport rep;
        REQUIRE(p->rep->check(&rep) == SPECKV_OK);
        CHECK_MESSAGE(rep.problems.empty(), (rep.problems.empty() ? "" : rep.problems[0]));
        REQUIRE(speckv_pool_close(p) == SPECKV_OK);
        // The expected values, for the other process.
        std::vector<unsigned char> expect = got;
        // A process with the codec off reads the same decoded values: the
        // records describe themselves.
        pid_t pid = fork();
        if (pid == 0) {
            speckv_pool *q = nullptr;
            if (speckv_pool_open(("file:" + path).c_str(), nullptr, &q) != SPECKV_OK) _exit(2);
            std::vector<unsigned char> v(bytes);
            if (speckv_access(q, b, 0, v.data(), bytes, 0) != SPECKV_OK) _exit(3);
            if (std::memcmp(v.data(), expect.data(), bytes) != 0) _exit(4);
            speckv_pool_close(q);
            _exit(0);
        }
        int st = 0;
        REQUIRE(waitpid(pid, &st, 0) == pid);
        CHECK(WIFEXITED(st));
        CHECK(WEXITSTATUS(st) == 0);
    }
    unlink(path.c_str());
}

TEST_CASE("codec in the pool: a page is coded when a write completes it; partial rewrites keep the other values") {
    std::string path = fresh_pool("codec-partial");
    speckv_pool *p = open_codec("file:" + path + "?size=16M", {{"codec.mode", "paper"}});
    auto vals = kv_values(2048, 5);
    auto *src = reinterpret_cast<const unsigned char *>(vals.data());
    speckv_handle b = alloc_fp16(p, 4096);
    // Appending token by token (128 bytes): exact until the page is complete.
    for (size_t off = 0; off < 4096 - 128; off += 128) REQUIRE(speckv_write(p, b, off, src + off, 128) == SPECKV_OK);
    auto half = read_all(p, b, 4096);
    CHECK(std::memcmp(half.data(), src, 4096 - 128) == 0);
    CHECK(stats_of(p).codec_pages_encoded == 0);
    REQUIRE(speckv_write(p, b, 4096 - 128, src + 4096 - 128, 128) == SPECKV_OK);
    CHECK(stats_of(p).codec_pages_encoded == 1);
    auto want = roundtrip(Mode::paper, src, 4096);
    CHECK(read_all(p, b, 4096) == want);  // from L1 (write-allocated decoded values)
    // A partial write into the coded page: stored in clear, the rest of the
    // page keeps the decoded values.
    uint16_t patch[4] = {0x3C00, 0x4000, 0x4200, 0x4400};
    REQUIRE(speckv_write(p, b, 256, patch, sizeof patch) == SPECKV_OK);
    auto after = read_all(p, b, 4096);
    std::vector<unsigned char> expect = want;
    std::memcpy(expect.data() + 256, patch, sizeof patch);
    CHECK(after == expect);
    speckv::PoolInfo in;
    p->rep->info(&in);
    CHECK(in.pages_coded == 0);
    // A whole-page write codes it again.
    REQUIRE(speckv_write(p, b, 0, src, 4096) == SPECKV_OK);
    p->rep->info(&in);
    CHECK(in.pages_coded == 1);
    CHECK(read_all(p, b, 4096) == want);
    speckv_pool_close(p);
    unlink(path.c_str());
}

TEST_CASE("codec in the pool: what is left in clear (opaque blocks, NaN pages, raw mode, odd sizes)") {
    std::string path = fresh_pool("codec-clear");
    speckv_pool *p = open_codec("file:" + path + "?size=16M", {{"codec.mode", "int8"}});
    auto vals = kv_values(2048, 7);
    // Opaque blocks are never coded.
    speckv_handle o = 0;
    REQUIRE(speckv_alloc(p, 4096, SPECKV_DTYPE_OPAQUE, nullptr, &o) == SPECKV_OK);
    REQUIRE(speckv_write(p, o, 0, vals.data(), 4096) == SPECKV_OK);
    CHECK(std::memcmp(read_all(p, o, 4096).data(), vals.data(), 4096) == 0);
    CHECK(stats_of(p).codec_pages_encoded == 0);
    CHECK(stats_of(p).codec_pages_bypassed == 0);
    // A page with a NaN: the codec's bypass rule keeps it exact.
    auto nan = vals;
    nan[100] = 0x7E00;
    speckv_handle b = alloc_fp16(p, 4096);
    REQUIRE(speckv_write(p, b, 0, nan.data(), 4096) == SPECKV_OK);
    CHECK(std::memcmp(read_all(p, b, 4096).data(), nan.data(), 4096) == 0);
    CHECK(stats_of(p).codec_pages_bypassed == 1);
    CHECK(stats_of(p).codec_pages_encoded == 0);
    // An FP16 block of an odd byte count: its last page cannot hold whole
    // elements, so it stays in clear (the others are coded).
    speckv_handle odd = alloc_fp16(p, 4096 + 3);
    std::vector<unsigned char> ob(4096 + 3, 0x11);
    std::memcpy(ob.data(), vals.data(), 4096);
    REQUIRE(speckv_write(p, odd, 0, ob.data(), ob.size()) == SPECKV_OK);
    CHECK(stats_of(p).codec_pages_encoded == 1);
    CHECK(stats_of(p).codec_pages_bypassed == 2);
    auto r = read_all(p, odd, ob.size());
    CHECK(std::memcmp(r.data() + 4096, ob.data() + 4096, 3) == 0);
    speckv_pool_close(p);
    unlink(path.c_str());
}

TEST_CASE("codec in the pool: keys and values get their own presets from the hint flags") {
    std::string path = fresh_pool("codec-kv");
    speckv_pool *p = open_codec("file:" + path + "?size=16M", {{"codec.mode", "int8"},
                                                               {"codec.key_mode", "k6"},
                                                               {"codec.value_mode", "vp6"},
                                                               {"codec.channels", "64"}});
    auto vals = kv_values(2048, 11);
    speckv_handle k = alloc_fp16(p, 4096, 1, 0, SPECKV_HINT_KEYS);
    speckv_handle v = alloc_fp16(p, 4096, 1, 0, SPECKV_HINT_VALUES);
    speckv_handle n = alloc_fp16(p, 4096, 1, 0, 0);
    for (auto h : {k, v, n}) REQUIRE(speckv_write(p, h, 0, vals.data(), 4096) == SPECKV_OK);
    Raw raw(path);
    auto mode_of = [&](speckv_handle h) {
        speckv::codec::Header hd;
        REQUIRE(speckv::codec::peek_header(raw.page(info_of(p, h).first_page), 4096, &hd) == SPECKV_OK);
        return hd.mode;
    };
    CHECK(mode_of(k) == Mode::k6);
    CHECK(mode_of(v) == Mode::vp6);
    CHECK(mode_of(n) == Mode::int8);
    CHECK(read_all(p, k, 4096) == roundtrip(Mode::k6, vals.data(), 4096, 64));
    CHECK(read_all(p, v, 4096) == roundtrip(Mode::vp6, vals.data(), 4096, 64));
    speckv_pool_close(p);
    unlink(path.c_str());
}

TEST_CASE("codec in the pool: the prefetcher moves records and decodes them into L2") {
    std::string path = fresh_pool("codec-l2");
    speckv_pool *p = open_codec("file:" + path + "?size=32M",
                                {{"codec.mode", "int8"}, {"cache.bytes", "0"}, {"prefetch.policy", "1"}});
    const int layers = 4, blocks = 8;
    std::vector<speckv_handle> hs;
    auto vals = kv_values(2048, 13);
    for (int l = 0; l < layers; l++)
        for (int i = 0; i < blocks; i++) {
            speckv_hint h{};
            h.struct_size = sizeof h;
            h.request = 7;
            h.layer = uint32_t(l);
            h.token_pos = uint64_t(i) * 16;
            h.token_count = 16;
            speckv_handle b = 0;
            REQUIRE(speckv_alloc(p, 4096, SPECKV_DTYPE_FP16, &h, &b) == SPECKV_OK);
            REQUIRE(speckv_write(p, b, 0, vals.data(), 4096) == SPECKV_OK);
            hs.push_back(b);
        }
    auto want = roundtrip(Mode::int8, vals.data(), 4096);
    auto s0 = stats_of(p);
    // Hint each layer, give the thread time, then read it.
    for (int l = 0; l < layers; l++) {
        speckv_hint h{};
        h.struct_size = sizeof h;
        h.request = 7;
        h.layer = uint32_t(l);
        h.token_pos = 1000;  // past every block: none is being appended to
        REQUIRE(speckv_prefetch(p, &h) == SPECKV_OK);
        for (int t = 0; t < 200 && stats_of(p).prefetch_pages < s0.prefetch_pages + uint64_t(blocks) * (l + 1); t++)
            usleep(1000);
        for (int i = 0; i < blocks; i++) CHECK(read_all(p, hs[size_t(l * blocks + i)], 4096) == want);
    }
    auto s = stats_of(p);
    uint64_t fetched = s.prefetch_pages - s0.prefetch_pages;
    CHECK(fetched > 0);
    CHECK(s.l2_hits > 0);
    // What crossed L3 -> L2 was records, about half a page each.
    CHECK(s.link_bytes - s0.link_bytes < fetched * 4096 * 6 / 10);
    CHECK(s.link_bytes - s0.link_bytes > fetched * 4096 / 3);
    CHECK(s.codec_pages_decoded >= fetched);
    speckv_pool_close(p);
    unlink(path.c_str());
}

TEST_CASE("codec in the pool: pin stores the page decoded, so the pointer shows values") {
    std::string path = fresh_pool("codec-pin");
    speckv_pool *p = open_codec("file:" + path + "?size=16M", {{"codec.mode", "int8"}});
    auto vals = kv_values(4096, 17);
    speckv_handle b = alloc_fp16(p, 8192);
    REQUIRE(speckv_write(p, b, 0, vals.data(), 8192) == SPECKV_OK);
    auto want = read_all(p, b, 8192);
    const void *ptr = nullptr;
    size_t len = 0;
    REQUIRE(speckv_pin(p, b, &ptr, &len) == SPECKV_OK);
    REQUIRE(len == 8192);
    CHECK(std::memcmp(ptr, want.data(), 8192) == 0);
    speckv::PoolInfo in;
    p->rep->info(&in);
    CHECK(in.pages_coded == 0);
    REQUIRE(speckv_unpin(p, b) == SPECKV_OK);
    CHECK(read_all(p, b, 8192) == want);
    speckv::CheckReport rep;
    REQUIRE(p->rep->check(&rep) == SPECKV_OK);
    CHECK(rep.problems.empty());
    speckv_pool_close(p);
    unlink(path.c_str());
}

TEST_CASE("codec in the pool: a damaged record is an error naming the page, never garbage") {
    std::string path = fresh_pool("codec-bad");
    auto vals = kv_values(2048, 19);
    speckv_handle b;
    uint64_t page;
    {
        speckv_pool *p = open_codec("file:" + path + "?size=16M", {{"codec.mode", "int8"}});
        b = alloc_fp16(p, 4096);
        REQUIRE(speckv_write(p, b, 0, vals.data(), 4096) == SPECKV_OK);
        page = info_of(p, b).first_page;
        REQUIRE(speckv_pool_close(p) == SPECKV_OK);
    }
    SUBCASE("bytes flipped on media: the page CRC catches it") {
        Raw raw(path);
        raw.page(page)[100] ^= 0x40;
    }
    SUBCASE("a record that lies but carries a matching page CRC: the record's own checks catch it") {
        Raw raw(path);
        raw.page(page)[100] ^= 0x40;  // payload byte: the record CRC no longer matches
        raw.entry(page).crc.store(speckv::crc32c(0, raw.page(page), 4096));
    }
    SUBCASE("a record whose length field runs past the page") {
        Raw raw(path);
        unsigned char *d = raw.page(page);
        uint32_t big = 1u << 20;  // payload length, header offset 16 (docs/codec.md §8)
        std::memcpy(d + 16, &big, 4);
        raw.entry(page).crc.store(speckv::crc32c(0, d, 4096));
    }
    speckv_pool *p = open_codec("file:" + path, {{"cache.bytes", "0"}});
    std::vector<unsigned char> v(4096, 0xEE);
    CHECK(speckv_access(p, b, 0, v.data(), 4096, 0) == SPECKV_ECORRUPT);
    CHECK(std::string(speckv_errmsg()).find("page " + std::to_string(page)) != std::string::npos);
    speckv::CheckReport rep;
    REQUIRE(p->rep->check(&rep) == SPECKV_OK);
    CHECK(!rep.problems.empty());
    // Quarantined: a second read fails the same way; a whole-page write heals
    // it (this handle has the codec off: the page is now stored in clear).
    CHECK(speckv_access(p, b, 0, v.data(), 4096, 0) == SPECKV_ECORRUPT);
    REQUIRE(speckv_write(p, b, 0, vals.data(), 4096) == SPECKV_OK);
    CHECK(std::memcmp(read_all(p, b, 4096).data(), vals.data(), 4096) == 0);
    speckv_pool_close(p);
    unlink(path.c_str());
}

TEST_CASE("codec in the pool: a coded write cut short by SIGKILL reads as a whole page or fails, never garbage") {
    std::string path = fresh_pool("codec-crash");
    // A short lock timeout: a page whose writer died between taking its
    // sequence lock and tagging it stays locked while anyone is attached
    // (docs/pool-format.md), and reads of it give up with SPECKV_EBUSY.
    speckv_pool *p = open_codec("file:" + path + "?size=16M", {{"cache.bytes", "0"}, {"lock.timeout_ms", "100"}});
    const int nblocks = 8;
    const size_t bytes = 4 * 4096;
    std::vector<speckv_handle> hs;
    for (int i = 0; i < nblocks; i++) hs.push_back(alloc_fp16(p, bytes, uint64_t(i + 1)));
    auto a = kv_values(bytes / 2, 23), b = kv_values(bytes / 2, 29);
    std::vector<std::vector<unsigned char>> rta, rtb;  // per page: the values a read may return
    for (size_t pg = 0; pg < 4; pg++) {
        rta.push_back(roundtrip(Mode::int8, reinterpret_cast<unsigned char *>(a.data()) + pg * 4096, 4096));
        rtb.push_back(roundtrip(Mode::int8, reinterpret_cast<unsigned char *>(b.data()) + pg * 4096, 4096));
    }
    std::mt19937 rng(99);
    uint64_t whole = 0, failed = 0;
    for (int round = 0; round < 10; round++) {
        CAPTURE(round);
        // The child says when its first round of writes is done: the kill
        // then lands in a write however long its attach took (a loaded
        // machine takes tens of ms to attach).
        int ready[2];
        REQUIRE(pipe(ready) == 0);
        pid_t kid = fork();
        if (kid == 0) {
            close(ready[0]);
            speckv_pool *q = nullptr;
            speckv_config *c = nullptr;
            if (speckv_config_new(&c) != SPECKV_OK || speckv_config_set_str(c, "codec.mode", "int8") != SPECKV_OK ||
                speckv_config_set_int(c, "lock.timeout_ms", 100) != SPECKV_OK)
                _exit(2);
            if (speckv_pool_open(("file:" + path).c_str(), c, &q) != SPECKV_OK) _exit(3);
            for (uint64_t n = 0;; n++) {
                for (speckv_handle h : hs)
                    // A page an earlier writer died holding stays locked while the pool is
                    // attached (docs/pool-format.md): writing it gives up with EBUSY.
                    if (int rc = speckv_write(q, h, 0, (n + h) % 2 ? a.data() : b.data(), bytes);
                        rc != SPECKV_OK && rc != SPECKV_EBUSY) {
                        std::fprintf(stderr, "writer: speckv_write: %d %s\n", rc, speckv_errmsg());
                        _exit(4);
                    }
                if (n == 0 && write(ready[1], "r", 1) != 1) _exit(5);
            }
        }
        close(ready[1]);
        char r;
        if (read(ready[0], &r, 1) != 1) {  // the child died before its first round: say how
            int cst = 0;
            waitpid(kid, &cst, 0);
            FAIL("the writer exited before its first round of writes: status " << cst << " (exit "
                                                                                << (WIFEXITED(cst) ? WEXITSTATUS(cst) : -1) << ")");
        }
        close(ready[0]);
        timespec ts{0, static_cast<long>(1'000'000 + rng() % 20'000'000)};
        nanosleep(&ts, nullptr);
        kill(kid, SIGKILL);
        int st = 0;
        REQUIRE(waitpid(kid, &st, 0) == kid);
        REQUIRE(WIFSIGNALED(st));
        REQUIRE(p->rep->repair() == SPECKV_OK);  // re-seals (or quarantines) the dead writer's torn page
        std::vector<unsigned char> got(4096);
        for (speckv_handle h : hs)
            for (size_t pg = 0; pg < 4; pg++) {
                int rc = speckv_access(p, h, pg * 4096, got.data(), 4096, 0);
                if (rc == SPECKV_ECORRUPT || rc == SPECKV_EBUSY) {
                    failed++;
                    continue;
                }
                REQUIRE_MESSAGE(rc == SPECKV_OK, speckv_errmsg());
                bool zero = std::all_of(got.begin(), got.end(), [](unsigned char x) { return x == 0; });
                CHECK((zero || got == rta[pg] || got == rtb[pg]));
                whole += !zero;
            }
    }
    MESSAGE("whole pages read: " << whole << ", torn pages quarantined or still locked: " << failed);
    CHECK(whole > 0);
    speckv_pool_close(p);
    unlink(path.c_str());
}

TEST_CASE("speckv_stats: a caller built before the codec fields gets exactly the layout it knows") {
    speckv_pool *p = open_codec("anon:?size=8M", {{"codec.mode", "int8"}});
    speckv_pool_stats st;
    std::memset(&st, 0xAB, sizeof st);
    st.struct_size = offsetof(speckv_pool_stats, codec_pages_encoded);
    REQUIRE(speckv_stats(p, &st) == SPECKV_OK);
    CHECK(st.struct_size == offsetof(speckv_pool_stats, codec_pages_encoded));
    CHECK(st.pages_total > 0);
    CHECK(st.codec_pages_encoded == 0xABABABABABABABABull);  // beyond its size: untouched
    st.struct_size = offsetof(speckv_pool_stats, codec_pages_encoded) + 8;  // a size no release had
    CHECK(speckv_stats(p, &st) == SPECKV_ESTRUCT);
    speckv_pool_close(p);
}

TEST_CASE("pool stats: each process publishes its tier counters into its attach record; they outlive it") {
    std::string path = fresh_pool("tierstats");
    speckv_pool *p = open_codec("file:" + path + "?size=16M", {{"codec.mode", "int8"}, {"cache.bytes", "0"}});
    auto vals = kv_values(4096, 31);
    speckv_handle b = alloc_fp16(p, 8192);
    REQUIRE(speckv_write(p, b, 0, vals.data(), 8192) == SPECKV_OK);
    for (int i = 0; i < 5; i++) read_all(p, b, 8192);
    auto s = stats_of(p);  // publishes
    std::unique_ptr<speckv::Pool> ro;
    REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
    speckv::PoolInfo in;
    ro->info(&in);
    REQUIRE(in.attach.size() == 1);
    const uint64_t *t = in.attach[0].tier;
    CHECK(t[speckv::fmt::kTcReads] == s.reads);
    CHECK(t[speckv::fmt::kTcReads] == 5);
    CHECK(t[speckv::fmt::kTcL1Misses] == 10);
    CHECK(t[speckv::fmt::kTcEncPages] == 2);
    CHECK(t[speckv::fmt::kTcEncStored] == s.codec_stored_bytes);
    CHECK(t[speckv::fmt::kTcDecPages] == 10);
    CHECK(t[speckv::fmt::kTcUpdatedNs] > 0);
    CHECK(in.tier_detached[speckv::fmt::kTcReads] == 0);
    // More reads, then close: the final figures go to the totals of processes gone.
    for (int i = 0; i < 3; i++) read_all(p, b, 8192);
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
    ro->info(&in);
    CHECK(in.attach.empty());
    CHECK(in.tier_detached[speckv::fmt::kTcReads] == 8);
    CHECK(in.tier_detached[speckv::fmt::kTcDecPages] == 16);
    CHECK(in.tier_detached[speckv::fmt::kTcEncPages] == 2);
    // A second process adds to them.
    p = open_codec("file:" + path, {{"cache.bytes", "0"}});
    read_all(p, b, 8192);
    REQUIRE(speckv_pool_close(p) == SPECKV_OK);
    ro->info(&in);
    CHECK(in.tier_detached[speckv::fmt::kTcReads] == 9);
    unlink(path.c_str());
}

TEST_CASE("codec.mode = adaptive: a preset per layer and K/V, measured within its error budget, named by every record") {
    std::string path = fresh_pool("codec-adaptive");
    // The dense set and its K budget (0.005): the mechanism with the
    // budgets this test and docs/codec.md §17.1 were written for; the fast
    // set has its own test below.
    speckv_pool *p = open_codec("file:" + path + "?size=8M", {{"codec.mode", "adaptive"},
                                                              {"codec.adaptive_set", "dense"},
                                                              {"codec.channels", "64"},
                                                              {"log.level", "0"}});
    const size_t bytes = 4 * 4096, n = bytes / 2;
    auto rel_err = rel_err_fp16;
    struct Blk {
        speckv_handle h;
        uint32_t layer;
        bool key;
        std::vector<uint16_t> x;
    };
    std::vector<Blk> blks;
    for (uint32_t layer = 0; layer < 3; layer++)
        for (bool key : {true, false}) {
            Blk b{alloc_fp16(p, bytes, 1, layer, key ? SPECKV_HINT_KEYS : SPECKV_HINT_VALUES), layer, key,
                  kv_values(n, 10 * layer + (key ? 1 : 2), 64)};
            REQUIRE(speckv_write(p, b.h, 0, b.x.data(), bytes) == SPECKV_OK);
            blks.push_back(std::move(b));
        }
    // Which preset each (layer, K/V) got: the stats JSON says, every record agrees.
    char js[8192];
    size_t need = 0;
    REQUIRE(speckv_stats_json(p, js, sizeof js, &need) == SPECKV_OK);
    std::string json = js;
    Raw raw(path);
    for (const Blk &b : blks) {
        std::string key = "\"codec_mode_l" + std::to_string(b.layer) + (b.key ? "_k" : "_v") + "\":";
        size_t at = json.find(key);
        REQUIRE_MESSAGE(at != std::string::npos, key);
        int chosen = std::atoi(json.c_str() + at + key.size());
        CHECK(chosen != 0);  // a real preset: this data compresses within the budget
        speckv::BlockInfo bi = info_of(p, b.h);
        CHECK(bi.packed_pages > 0);  // four coded pages of this data fit in fewer
        CHECK(bi.packed_pages < bi.npages);
        for (uint64_t pg = 0; pg < bi.npages; pg++) CHECK(raw.record_mode(bi, pg) == chosen);
        // The first page decided the preset within its budget; the others are
        // the same kind of data and stay near it.
        const double budget = b.key ? 0.005 : 0.05;
        auto got = read_all(p, b.h, bytes);
        CHECK(rel_err(b.x, got, 0, 2048) <= budget);
        CHECK(rel_err(b.x, got, 0, n) <= 2 * budget);
    }
    // The tight K budget and the loose V budget lead to different presets.
    CHECK(json.find("\"codec_mode_l0_k\":") != std::string::npos);
    std::string k0 = json.substr(json.find("\"codec_mode_l0_k\":") + 18, 3),
                v0 = json.substr(json.find("\"codec_mode_l0_v\":") + 18, 3);
    CHECK(std::atoi(k0.c_str()) != std::atoi(v0.c_str()));
    speckv_pool_stats s = stats_of(p);
    CHECK(s.codec_pages_encoded == blks.size() * 4);
    CHECK(double(s.codec_raw_bytes) / double(s.codec_stored_bytes) > 1.5);
    speckv_pool_close(p);
    unlink(path.c_str());
}

TEST_CASE("codec.adaptive_set = fast (the default): every choice is int8 or a packed preset, and its records decode") {
    using speckv::codec::AdaptiveSet;
    auto in_set = [](int mode, bool key, AdaptiveSet set) {
        size_t nc = 0;
        const Mode *c = speckv::codec::adaptive_candidates(key, set, &nc);
        return std::find(c, c + nc, Mode(mode)) != c + nc;
    };
    const size_t bytes = 4 * 4096, n = bytes / 2;
    // The presets chosen for layers 0..2, K then V, with `set` (nullptr:
    // the default); every page read back is the reference's round trip of
    // that page with the chosen preset, named by its record.
    auto run = [&](const char *set) {
        std::string path = fresh_pool("codec-adaptive-set");
        speckv_pool *p = set ? open_codec("file:" + path + "?size=8M", {{"codec.mode", "adaptive"},
                                                                        {"codec.adaptive_set", set},
                                                                        {"codec.channels", "64"},
                                                                        {"log.level", "0"}})
                             : open_codec("file:" + path + "?size=8M",
                                          {{"codec.mode", "adaptive"}, {"codec.channels", "64"}, {"log.level", "0"}});
        std::vector<speckv_handle> hs;
        std::vector<std::vector<uint16_t>> xs;
        for (uint32_t layer = 0; layer < 3; layer++)
            for (bool key : {true, false}) {
                hs.push_back(alloc_fp16(p, bytes, 1, layer, key ? SPECKV_HINT_KEYS : SPECKV_HINT_VALUES));
                xs.push_back(kv_values(n, 10 * layer + (key ? 1 : 2), 64));
                REQUIRE(speckv_write(p, hs.back(), 0, xs.back().data(), bytes) == SPECKV_OK);
            }
        char js[8192];
        REQUIRE(speckv_stats_json(p, js, sizeof js, nullptr) == SPECKV_OK);
        std::string json = js;
        Raw raw(path);
        std::vector<int> chosen;
        for (size_t i = 0; i < hs.size(); i++) {
            const uint32_t layer = uint32_t(i / 2);
            const bool key = i % 2 == 0;
            std::string name = "\"codec_mode_l" + std::to_string(layer) + (key ? "_k" : "_v") + "\":";
            size_t at = json.find(name);
            REQUIRE_MESSAGE(at != std::string::npos, name);
            const int m = std::atoi(json.c_str() + at + name.size());
            chosen.push_back(m);
            auto got = read_all(p, hs[i], bytes);
            speckv::BlockInfo bi = info_of(p, hs[i]);
            for (uint64_t pg = 0; pg < bi.npages; pg++) {
                CHECK(raw.record_mode(bi, pg) == m);
                if (m == 0) continue;
                auto want = roundtrip(Mode(m), reinterpret_cast<const unsigned char *>(xs[i].data()) + pg * 4096, 4096,
                                      64);
                CHECK_MESSAGE(std::memcmp(got.data() + pg * 4096, want.data(), 4096) == 0, "block ", i, " page ", pg);
            }
        }
        speckv_pool_close(p);
        unlink(path.c_str());
        return chosen;
    };
    auto fast = run(nullptr);
    for (size_t i = 0; i < fast.size(); i++) {
        const bool key = i % 2 == 0;
        CAPTURE(i);
        CAPTURE(fast[i]);
        CHECK(fast[i] != 0);  // the fast set's own K budget (0.02) fits a fast key preset
        CHECK(in_set(fast[i], key, AdaptiveSet::fast));
    }
    // The set is what decides: the dense set on the same pages chooses
    // among presets none of which is fast.
    auto dense = run("dense");
    for (size_t i = 0; i < dense.size(); i++) {
        CAPTURE(i);
        CAPTURE(dense[i]);
        CHECK(dense[i] != 0);
        CHECK(in_set(dense[i], i % 2 == 0, AdaptiveSet::dense));
        CHECK(!in_set(dense[i], i % 2 == 0, AdaptiveSet::fast));
    }
    // The key: fast | dense, in codec::AdaptiveSet order; nothing else.
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    int64_t v = -1;
    REQUIRE(speckv_config_get_int(c, "codec.adaptive_set", &v) == SPECKV_OK);
    CHECK(v == int64_t(AdaptiveSet::fast));
    for (AdaptiveSet s : {AdaptiveSet::fast, AdaptiveSet::dense}) {
        REQUIRE(speckv_config_set_str(c, "codec.adaptive_set", speckv::codec::adaptive_set_name(s)) == SPECKV_OK);
        REQUIRE(speckv_config_get_int(c, "codec.adaptive_set", &v) == SPECKV_OK);
        CHECK(v == int64_t(s));
    }
    CHECK(speckv_config_set_str(c, "codec.adaptive_set", "rice") == SPECKV_EINVAL);
    speckv_config_free(c);
}

TEST_CASE("codec.mode = adaptive: codec.recalibrate re-chooses the preset when a layer's data changes") {
    // Values of one layer: smooth pages with an outlier channel first, then
    // noisy pages with one large spike each. The first page's choice is a
    // sample of the first kind; re-calibration re-chooses on the second
    // kind: the highest ratio within the same budget on that data.
    const size_t bytes = 4 * 4096, n = bytes / 2;
    auto smooth = kv_values(n, 5, 64);
    auto spiky = [&](uint32_t seed) {
        std::vector<uint16_t> v(n);
        uint32_t x = seed * 2654435761u + 7;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            float f = (float(x % 2001) / 1000.0f - 1.0f);  // [-1, 1]
            if (i % 2048 == 100) f = 900.0f;               // one spike per page
            v[i] = speckv::codec::fp32_to_fp16_rne(f);
        }
        return v;
    };
    auto rel_err = [&](const std::vector<uint16_t> &x, const std::vector<unsigned char> &got) {
        return rel_err_fp16(x, got, 0, n);
    };
    struct Out {
        double late_err = 0;
        uint64_t late_stored = 0;
        int switches = -1, recals = -1;
    };
    auto run = [&](const char *every) {
        Out o;
        std::string path = fresh_pool("codec-recal");
        // dense: the figures of docs/codec.md §17.1 (the spiky pages drop
        // to a 4-bit Rice preset there, a ratio no fast preset reaches).
        speckv_pool *p = open_codec("file:" + path + "?size=8M", {{"codec.mode", "adaptive"},
                                                                   {"codec.adaptive_set", "dense"},
                                                                   {"codec.channels", "64"},
                                                                   {"codec.recalibrate", every},
                                                                   {"log.level", "0"}});
        speckv_handle a = alloc_fp16(p, bytes, 1, 0, SPECKV_HINT_VALUES);
        REQUIRE(speckv_write(p, a, 0, smooth.data(), bytes) == SPECKV_OK);
        for (uint32_t k = 0; k < 3; k++) {
            auto x = spiky(k + 1);
            speckv_handle b = alloc_fp16(p, bytes, 2 + k, 0, SPECKV_HINT_VALUES);
            const uint64_t before = stats_of(p).codec_stored_bytes;
            REQUIRE(speckv_write(p, b, 0, x.data(), bytes) == SPECKV_OK);
            if (k == 0) continue;  // re-chosen on the first spiky page with codec.recalibrate = 4
            o.late_stored += stats_of(p).codec_stored_bytes - before;
            o.late_err = std::max(o.late_err, rel_err(x, read_all(p, b, bytes)));
        }
        char js[8192];
        REQUIRE(speckv_stats_json(p, js, sizeof js, nullptr) == SPECKV_OK);
        const char *at = std::strstr(js, "\"codec_mode_switches\":");
        REQUIRE(at != nullptr);
        o.switches = std::atoi(at + 22);
        at = std::strstr(js, "\"codec_recalibrations\":");
        REQUIRE(at != nullptr);
        o.recals = std::atoi(at + 23);
        speckv_pool_close(p);
        unlink(path.c_str());
        return o;
    };
    Out fixed = run("0"), recal = run("4");
    CAPTURE(fixed.late_err);
    CAPTURE(recal.late_err);
    CAPTURE(fixed.late_stored);
    CAPTURE(recal.late_stored);
    CHECK(fixed.recals == 0);
    CHECK(fixed.switches == 0);
    CHECK(recal.recals == 3);  // pages 4, 8 and 12 of the 16 encoded after the first
    CHECK(recal.switches >= 1);
    CHECK(recal.late_err <= 0.05);                 // chosen on this data, within the V budget
    CHECK(recal.late_stored * 10 < fixed.late_stored * 9);  // and >10 % smaller than the first page's choice
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    CHECK(speckv_config_set_int(c, "codec.recalibrate", -1) == SPECKV_EINVAL);
    speckv_config_free(c);
}
