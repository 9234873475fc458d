// SPDX-License-Identifier: Apache-2.0
// The L4 cold tier: round trips through both engines, O_DIRECT or its
// recorded reason, and every failure path (injected completions, real short
// reads, corruption, a full tier, a file size limit, a missing file).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <csignal>
#include <cstring>
#include <map>
#include <memory>

#include "tiers/cold_tier.h"
#include "util/crc32c.h"
#include "util/status.h"
#include "util.h"

using namespace speckv;
using tiers_test::fresh_path;
using tiers_test::pattern;

namespace {

// Opens a tier, or skips the engine when this kernel/sandbox refuses io_uring.
std::unique_ptr<ColdTier> open_tier(ColdTierOptions o, bool *skipped = nullptr) {
    std::unique_ptr<ColdTier> t;
    int rc = ColdTier::open(o, &t);
    if (rc == SPECKV_ENOTSUP && o.engine == ColdEngine::kUring && !tiers_test::g_uring_required) {
        MESSAGE("io_uring unavailable here, engine skipped: " << last_error());
        if (skipped) *skipped = true;
        return nullptr;
    }
    REQUIRE_MESSAGE(rc == SPECKV_OK, last_error());
    return t;
}

ColdTierOptions small_opts(const char *tag, ColdEngine e) {
    ColdTierOptions o;
    o.path = fresh_path(tag);
    o.capacity = 64 << 20;
    o.queue_depth = 4;
    o.slot_bytes = 64 << 10;
    o.engine = e;
    return o;
}

int put1(ColdTier &t, uint64_t key, const std::vector<unsigned char> &v) {
    ColdTier::PutItem it{key, v.data(), v.size()};
    return t.put({&it, 1});
}

int get1(ColdTier &t, uint64_t key, std::vector<unsigned char> *out, size_t cap = 1 << 22) {
    out->assign(cap, 0);
    ColdTier::GetItem it{key, out->data(), cap};
    int rc = t.get({&it, 1});
    out->resize(rc == SPECKV_OK ? it.len : 0);
    return rc;
}

// The engines the engine loops run (main.cc --cold-engines).
std::vector<ColdEngine> engines() {
    switch (tiers_test::g_cold_engines) {
        case tiers_test::ColdEngines::kSync: return {ColdEngine::kSync};
        case tiers_test::ColdEngines::kUring: return {ColdEngine::kUring};
        default: return {ColdEngine::kUring, ColdEngine::kSync};
    }
}
std::string engine_name(ColdEngine e) { return e == ColdEngine::kUring ? "io_uring" : "pread/pwrite"; }

}  // namespace

TEST_CASE("extent allocator: best fit, coalescing, reserve") {
    ExtentAllocator a(100);
    uint64_t x, y, z, w;
    REQUIRE(a.alloc(10, &x));
    REQUIRE(a.alloc(20, &y));
    REQUIRE(a.alloc(30, &z));
    CHECK(x == 0);
    CHECK(y == 10);
    CHECK(z == 30);
    CHECK(a.free_blocks() == 40);
    a.release(y, 20);  // hole of 20 at 10, tail of 40 at 60
    REQUIRE(a.alloc(15, &w));
    CHECK(w == 10);  // best fit: the 20-block hole, not the 40-block tail
    a.release(w, 15);
    a.release(x, 10);  // [0, 30) coalesced
    CHECK(a.fragments() == 2);
    CHECK(a.largest_free() == 40);
    a.release(z, 30);  // everything free again: one extent
    CHECK(a.fragments() == 1);
    CHECK(a.free_blocks() == 100);
    CHECK_FALSE(a.alloc(101, &x));
    CHECK(a.reserve(40, 5));
    CHECK_FALSE(a.reserve(42, 1));  // already taken
    CHECK(a.free_blocks() == 95);
    CHECK(a.fragments() == 2);
    CHECK_FALSE(a.alloc(0, &x));
}

TEST_CASE("cold tier: batched round trip, replace, drop") {
    for (ColdEngine e : engines()) {
        CAPTURE(engine_name(e));
        bool skipped = false;
        auto t = open_tier(small_opts("rt", e), &skipped);
        if (skipped) continue;
        CHECK(t->uring() == (e == ColdEngine::kUring));
        if (t->uring()) CHECK_MESSAGE(t->fixed_buffers(), t->fallback_reason());
        // More items than staging slots, sizes around block and slot edges.
        const size_t sizes[] = {0, 1, 4031, 4032, 4033, 65536 - 64, 65537, 300000};
        std::vector<std::vector<unsigned char>> data;
        std::vector<ColdTier::PutItem> items;
        for (uint64_t k = 0; k < 24; k++) data.push_back(pattern(sizes[k % 8], k + 1));
        for (uint64_t k = 0; k < 24; k++) items.push_back({k + 100, data[k].data(), data[k].size()});
        REQUIRE_MESSAGE(t->put(items) == SPECKV_OK, last_error());
        for (auto &it : items) CHECK(it.status == SPECKV_OK);

        std::vector<std::vector<unsigned char>> back(24, std::vector<unsigned char>(300000));
        std::vector<ColdTier::GetItem> gets;
        for (uint64_t k = 0; k < 24; k++) gets.push_back({k + 100, back[k].data(), back[k].size()});
        REQUIRE_MESSAGE(t->get(gets) == SPECKV_OK, last_error());
        for (uint64_t k = 0; k < 24; k++) {
            CHECK(gets[k].len == data[k].size());
            if (!data[k].empty()) CHECK(std::memcmp(back[k].data(), data[k].data(), data[k].size()) == 0);
        }
        ColdTierStats st = t->stats();
        CHECK(st.keys == 24);
        uint64_t total = 0;
        for (auto &d : data) total += d.size();
        CHECK(st.bytes_written == total);
        CHECK(st.bytes_read == total);
        uint64_t used = st.used_bytes;

        // Replace: new bytes, same space for the same size.
        auto nv = pattern(data[3].size(), 999);
        REQUIRE(put1(*t, 103, nv) == SPECKV_OK);
        std::vector<unsigned char> got;
        REQUIRE(get1(*t, 103, &got) == SPECKV_OK);
        CHECK(got == nv);
        CHECK(t->stats().used_bytes == used);

        // Drop, unknown keys, a buffer too small.
        uint64_t dk[] = {105, 7777};
        CHECK(t->drop(dk) == SPECKV_ENOENT);  // 7777 unknown; 105 dropped all the same
        CHECK_FALSE(t->contains(105));
        CHECK(get1(*t, 105, &got) == SPECKV_ENOENT);
        CHECK(t->stats().keys == 23);
        std::vector<unsigned char> small(10);
        ColdTier::GetItem gi{107, small.data(), small.size()};
        CHECK(t->get({&gi, 1}) == SPECKV_ERANGE);
        CHECK(gi.len == data[7].size());
        CHECK(t->length(107) == int64_t(data[7].size()));
        CHECK(t->length(105) == -1);

        // The same key twice in one batch is refused, the rest goes through.
        ColdTier::PutItem dup[] = {{1, nv.data(), 10}, {1, nv.data(), 20}, {2, nv.data(), 30}};
        CHECK(t->put(dup) == SPECKV_EINVAL);
        CHECK(dup[0].status == SPECKV_OK);
        CHECK(dup[1].status == SPECKV_EINVAL);
        CHECK(dup[2].status == SPECKV_OK);
        CHECK(t->length(1) == 10);
    }
}

TEST_CASE("cold tier: O_DIRECT where the file system takes it, else a recorded reason") {
    ColdTierOptions o = small_opts("direct", ColdEngine::kAuto);
    auto t = open_tier(o);
    if (t->direct()) CHECK(t->fallback_reason().find("O_DIRECT") == std::string::npos);
    else MESSAGE("test dir refuses O_DIRECT: " << t->fallback_reason());
    auto v = pattern(10000, 5);
    REQUIRE(put1(*t, 1, v) == SPECKV_OK);
    std::vector<unsigned char> got;
    REQUIRE(get1(*t, 1, &got) == SPECKV_OK);
    CHECK(got == v);

    // A file system without O_DIRECT: the tier falls back, says why, works.
    ColdTierOptions nd = small_opts("nodirect", ColdEngine::kAuto);
    nd.test_refuse_direct = true;
    auto tn = open_tier(nd);
    CHECK_FALSE(tn->direct());
    CHECK(tn->fallback_reason().find("O_DIRECT refused") != std::string::npos);
    REQUIRE(put1(*tn, 1, v) == SPECKV_OK);
    REQUIRE(get1(*tn, 1, &got) == SPECKV_OK);
    CHECK(got == v);

    // tmpfs (no O_DIRECT before Linux 6.6): whichever way it goes, it works and says so.
    struct stat st;
    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) {
        ColdTierOptions s = small_opts("shm", ColdEngine::kAuto);
        s.path = fresh_path("shm", "/dev/shm");
        std::unique_ptr<ColdTier> ts;
        REQUIRE_MESSAGE(ColdTier::open(s, &ts) == SPECKV_OK, last_error());
        if (!ts->direct()) CHECK(ts->fallback_reason().find("O_DIRECT") != std::string::npos);
        REQUIRE(put1(*ts, 1, v) == SPECKV_OK);
        REQUIRE(get1(*ts, 1, &got) == SPECKV_OK);
        CHECK(got == v);
        ts.reset();
        unlink(s.path.c_str());
    }
}

TEST_CASE("cold tier: an I/O error completion fails its item and loses nothing") {
    for (ColdEngine e : engines()) {
        CAPTURE(engine_name(e));
        ColdTierOptions o = small_opts("eio", e);
        o.queue_depth = 1;  // one I/O in flight: completions in submission order
        bool skipped = false;
        auto t = open_tier(o, &skipped);
        if (skipped) continue;
        auto a = pattern(5000, 1), b = pattern(6000, 2), c = pattern(7000, 3), d = pattern(3000, 4);
        REQUIRE(put1(*t, 1, a) == SPECKV_OK);

        // Every write fails: the replacement of key 1 and the new key 2 both fail,
        // and key 1 still reads back its old bytes.
        t->set_fault_hook([](const ColdCompletion &c) { return c.write ? -EIO : c.res; });
        ColdTier::PutItem all[] = {{1, b.data(), b.size()}, {2, c.data(), c.size()}};
        CHECK(t->put(all) == SPECKV_EIO);
        CHECK(all[0].status == SPECKV_EIO);
        CHECK(all[1].status == SPECKV_EIO);
        CHECK(std::string(last_error()).find("Input/output error") != std::string::npos);
        t->set_fault_hook(nullptr);
        std::vector<unsigned char> got;
        REQUIRE(get1(*t, 1, &got) == SPECKV_OK);
        CHECK(got == a);
        CHECK_FALSE(t->contains(2));

        // Only the second completion from now fails: the middle item.
        uint64_t base = t->stats().completions;
        t->set_fault_hook([base](const ColdCompletion &c) { return c.nth == base + 2 ? -EIO : c.res; });
        ColdTier::PutItem three[] = {{1, b.data(), b.size()}, {2, c.data(), c.size()}, {3, d.data(), d.size()}};
        CHECK(t->put(three) == SPECKV_EIO);
        CHECK(three[0].status == SPECKV_OK);
        CHECK(three[1].status == SPECKV_EIO);
        CHECK(three[2].status == SPECKV_OK);
        t->set_fault_hook(nullptr);
        REQUIRE(get1(*t, 1, &got) == SPECKV_OK);
        CHECK(got == b);
        CHECK(get1(*t, 2, &got) == SPECKV_ENOENT);
        REQUIRE(get1(*t, 3, &got) == SPECKV_OK);
        CHECK(got == d);

        // A read error: the get fails, the data is still there afterwards.
        t->set_fault_hook([](const ColdCompletion &c) { return c.write ? c.res : -EIO; });
        CHECK(get1(*t, 3, &got) == SPECKV_EIO);
        t->set_fault_hook(nullptr);
        REQUIRE(get1(*t, 3, &got) == SPECKV_OK);
        CHECK(got == d);

        // A full device reports ENOSPC, not a generic I/O error.
        t->set_fault_hook([](const ColdCompletion &c) { return c.write ? -ENOSPC : c.res; });
        CHECK(put1(*t, 4, c) == SPECKV_ENOSPC);
        t->set_fault_hook(nullptr);
        CHECK_FALSE(t->contains(4));
        ColdTierStats st = t->stats();
        CHECK(st.io_errors >= 4);
        CHECK(st.enospc >= 1);
        CHECK(st.put_failures >= 4);
        CHECK(st.get_failures >= 1);
        CHECK(st.keys == 2);
    }
}

TEST_CASE("cold tier: short reads are retried, then fail; the data survives") {
    for (ColdEngine e : engines()) {
        CAPTURE(engine_name(e));
        bool skipped = false;
        ColdTierOptions o = small_opts("short", e);
        auto t = open_tier(o, &skipped);
        if (skipped) continue;
        auto v = pattern(100000, 9);  // two slot-sized chunks
        REQUIRE(put1(*t, 1, v) == SPECKV_OK);
        std::vector<unsigned char> got;

        // One short read per chunk: the rest is read again, the get succeeds.
        int shorts = 0;
        t->set_fault_hook([&shorts](const ColdCompletion &c) {
            if (c.write || c.res <= 4096 || shorts == 2) return c.res;
            shorts++;
            return 4096;  // block-aligned, so O_DIRECT can resume from there
        });
        REQUIRE_MESSAGE(get1(*t, 1, &got) == SPECKV_OK, last_error());
        CHECK(got == v);
        CHECK(t->stats().short_transfers >= 2);

        // Always short: fails after the retries, clearly.
        t->set_fault_hook([](const ColdCompletion &c) { return c.write ? c.res : 0; });
        CHECK(get1(*t, 1, &got) == SPECKV_EIO);
        CHECK(std::string(last_error()).find("short read") != std::string::npos);
        t->set_fault_hook(nullptr);
        REQUIRE(get1(*t, 1, &got) == SPECKV_OK);
        CHECK(got == v);

        // A real one: the file loses its tail behind the tier's back.
        REQUIRE(truncate(o.path.c_str(), 4096) == 0);
        CHECK(get1(*t, 1, &got) == SPECKV_EIO);
        CHECK(std::string(last_error()).find("short read") != std::string::npos);
    }
}

TEST_CASE("cold tier: damaged bytes are reported, never returned") {
    for (ColdEngine e : engines()) {
        CAPTURE(engine_name(e));
        bool skipped = false;
        ColdTierOptions o = small_opts("crc", e);
        auto t = open_tier(o, &skipped);
        if (skipped) continue;
        auto v = pattern(8000, 3);
        REQUIRE(put1(*t, 1, v) == SPECKV_OK);  // a fresh file: the extent starts at 0
        int fd = ::open(o.path.c_str(), O_WRONLY);
        REQUIRE(fd >= 0);
        unsigned char x = 0x5a;
        REQUIRE(pwrite(fd, &x, 1, 64 + 1234) == 1);  // payload byte
        fsync(fd);
        std::vector<unsigned char> got;
        CHECK(get1(*t, 1, &got) == SPECKV_ECORRUPT);
        CHECK(std::string(last_error()).find("CRC32C") != std::string::npos);
        REQUIRE(pwrite(fd, &x, 1, 3) == 1);  // header byte
        fsync(fd);
        CHECK(get1(*t, 1, &got) == SPECKV_ECORRUPT);
        CHECK(std::string(last_error()).find("header") != std::string::npos);
        ::close(fd);
        CHECK(t->stats().crc_failures == 2);
    }
}

TEST_CASE("cold tier: durable puts sync before they report") {
    ColdTierOptions o = small_opts("durable", ColdEngine::kAuto);
    o.durable = true;
    auto t = open_tier(o);
    auto v = pattern(20000, 4);
    REQUIRE(put1(*t, 1, v) == SPECKV_OK);
    REQUIRE(put1(*t, 2, v) == SPECKV_OK);
    CHECK(t->stats().syncs == 2);
    std::vector<unsigned char> got;
    REQUIRE(get1(*t, 2, &got) == SPECKV_OK);
    CHECK(got == v);
    // A batch that failed entirely has nothing to sync.
    t->set_fault_hook([](const ColdCompletion &c) { return c.write ? -EIO : c.res; });
    CHECK(put1(*t, 3, v) == SPECKV_EIO);
    CHECK(t->stats().syncs == 2);
}

TEST_CASE("cold tier: a full tier refuses with ENOSPC and keeps what it has") {
    ColdTierOptions o = small_opts("full", ColdEngine::kAuto);
    o.capacity = 64 << 10;  // 16 blocks; a 16 KiB item takes 5 (its header spills)
    auto t = open_tier(o);
    auto v = pattern(16384, 1);
    for (uint64_t k = 1; k <= 3; k++) REQUIRE(put1(*t, k, v) == SPECKV_OK);
    CHECK(put1(*t, 4, v) == SPECKV_ENOSPC);
    CHECK(std::string(last_error()).find("full") != std::string::npos);
    std::vector<unsigned char> got;
    for (uint64_t k = 1; k <= 3; k++) {
        REQUIRE(get1(*t, k, &got) == SPECKV_OK);
        CHECK(got == v);
    }
    uint64_t k2 = 2;
    REQUIRE(t->drop({&k2, 1}) == SPECKV_OK);
    CHECK(put1(*t, 4, v) == SPECKV_OK);
    CHECK(t->stats().enospc == 1);
}

TEST_CASE("cold tier: a file size limit (RLIMIT_FSIZE) fails the put, not the process") {
    for (ColdEngine e : engines()) {
        CAPTURE(engine_name(e));
        ColdTierOptions o = small_opts("fsize", e);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            // The child: nothing here may touch doctest. Exit codes say what went wrong.
            signal(SIGXFSZ, SIG_IGN);
            rlimit rl{64 << 10, RLIM_INFINITY};
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(10);
            std::unique_ptr<ColdTier> t;
            int rc = ColdTier::open(o, &t);
            if (rc == SPECKV_ENOTSUP) _exit(77);
            if (rc) _exit(11);
            auto small = pattern(4096, 1), big = pattern(256 << 10, 2);
            if (put1(*t, 1, small) != SPECKV_OK) _exit(12);
            rc = put1(*t, 2, big);
            if (rc != SPECKV_ENOSPC) _exit(rc == SPECKV_OK ? 13 : 14);
            std::vector<unsigned char> got;
            if (get1(*t, 1, &got) != SPECKV_OK || got != small) _exit(15);
            if (t->contains(2)) _exit(16);
            _exit(0);
        }
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        REQUIRE(WIFEXITED(status));
        if (WEXITSTATUS(status) == 77) continue;
        CHECK(WEXITSTATUS(status) == 0);
        unlink(o.path.c_str());
    }
}

TEST_CASE("cold tier: bad options, a missing file, a file in use") {
    ColdTierOptions o = small_opts("opts", ColdEngine::kAuto);
    std::unique_ptr<ColdTier> t;
    ColdTierOptions b = o;
    b.block = 1000;
    CHECK(ColdTier::open(b, &t) == SPECKV_EINVAL);
    b = o, b.queue_depth = 0;
    CHECK(ColdTier::open(b, &t) == SPECKV_EINVAL);
    b = o, b.slot_bytes = 5000;
    CHECK(ColdTier::open(b, &t) == SPECKV_EINVAL);
    b = o, b.capacity = 100;
    CHECK(ColdTier::open(b, &t) == SPECKV_EINVAL);
    b = o, b.path = "";
    CHECK(ColdTier::open(b, &t) == SPECKV_EINVAL);
    b = o, b.create = false;
    CHECK(ColdTier::open(b, &t) == SPECKV_ENOENT);
    CHECK(std::string(last_error()).find("does not exist") != std::string::npos);
    b = o, b.path = "/nonexistent-dir/x.cold";
    CHECK(ColdTier::open(b, &t) == SPECKV_ENOENT);
    CHECK_FALSE(t);

    REQUIRE(ColdTier::open(o, &t) == SPECKV_OK);
    std::unique_ptr<ColdTier> t2;
    CHECK(ColdTier::open(o, &t2) == SPECKV_EBUSY);
}

TEST_CASE("cold tier: recovery rebuilds the index from the file") {
    ColdTierOptions o = small_opts("recover", ColdEngine::kAuto);
    std::map<uint64_t, std::vector<unsigned char>> want;
    {
        auto t = open_tier(o);
        for (uint64_t k = 1; k <= 6; k++) {
            want[k] = pattern(3000 * k + 7, k);
            REQUIRE(put1(*t, k, want[k]) == SPECKV_OK);
        }
        want[2] = pattern(20000, 222);  // replaced: the new copy wins
        REQUIRE(put1(*t, 2, want[2]) == SPECKV_OK);
        uint64_t k3 = 3;
        REQUIRE(t->drop({&k3, 1}) == SPECKV_OK);  // dropped: stays dropped
        want.erase(3);
    }
    o.recover = true;
    auto t = open_tier(o);
    CHECK(t->stats().keys == want.size());
    std::vector<unsigned char> got;
    for (auto &[k, v] : want) {
        CAPTURE(k);
        REQUIRE(get1(*t, k, &got) == SPECKV_OK);
        CHECK(got == v);
    }
    CHECK_FALSE(t->contains(3));
    // New extents do not land on recovered ones.
    auto n = pattern(50000, 77);
    REQUIRE(put1(*t, 9, n) == SPECKV_OK);
    for (auto &[k, v] : want) {
        REQUIRE(get1(*t, k, &got) == SPECKV_OK);
        CHECK(got == v);
    }
    REQUIRE(get1(*t, 9, &got) == SPECKV_OK);
    CHECK(got == n);
    // Without recover the file starts empty.
    t.reset();
    o.recover = false;
    t = open_tier(o);
    CHECK(t->stats().keys == 0);
}

TEST_CASE("cold tier: forget is in memory; the next put, flush or close clears the headers; a crash before keeps the newest") {
    for (ColdEngine e : engines()) {
        CAPTURE(engine_name(e));
        ColdTierOptions o = small_opts("forget", e);
        bool skipped = false;
        {
            auto t = open_tier(o, &skipped);
            if (skipped) continue;
            REQUIRE(put1(*t, 1, pattern(9000, 1)) == SPECKV_OK);
            REQUIRE(put1(*t, 2, pattern(9000, 2)) == SPECKV_OK);
            const auto free_before = t->stats();
            uint64_t k1 = 1, k9 = 9;
            CHECK(t->forget({&k1, 1}) == SPECKV_OK);
            CHECK(t->forget({&k9, 1}) == SPECKV_ENOENT);
            CHECK_FALSE(t->contains(1));
            std::vector<unsigned char> got;
            CHECK(get1(*t, 1, &got) == SPECKV_ENOENT);
            CHECK(t->stats().used_bytes == free_before.used_bytes);  // its extent stays reserved until cleared
            REQUIRE(t->flush_forgotten() == SPECKV_OK);
            CHECK(t->stats().used_bytes < free_before.used_bytes);
            CHECK(t->forget({&k1, 1}) == SPECKV_ENOENT);
            // A new copy of the same key.
            REQUIRE(put1(*t, 1, pattern(5000, 11)) == SPECKV_OK);
            REQUIRE(get1(*t, 1, &got) == SPECKV_OK);
            CHECK(got == pattern(5000, 11));
            uint64_t k2 = 2;
            CHECK(t->forget({&k2, 1}) == SPECKV_OK);
        }  // close clears key 2's header
        o.recover = true;
        {
            auto t = open_tier(o);
            CHECK(t->stats().keys == 1);
            CHECK_FALSE(t->contains(2));
            std::vector<unsigned char> got;
            REQUIRE(get1(*t, 1, &got) == SPECKV_OK);
            CHECK(got == pattern(5000, 11));
        }
        // A process that dies between forget and the clearing: the forgotten
        // copy comes back at recovery (its user drops copies it does not
        // name), and never in place of a newer copy of its key.
        o.recover = false;
        pid_t child = fork();
        if (child == 0) {
            std::unique_ptr<ColdTier> t;
            if (ColdTier::open(o, &t) != SPECKV_OK) _exit(1);
            if (put1(*t, 5, pattern(7000, 5)) != SPECKV_OK) _exit(2);
            if (put1(*t, 6, pattern(7000, 6)) != SPECKV_OK) _exit(3);
            uint64_t k5 = 5, k6 = 6;
            if (t->forget({&k5, 1}) != SPECKV_OK) _exit(4);
            if (put1(*t, 7, pattern(7000, 7)) != SPECKV_OK) _exit(5);  // flushes 5's header first
            if (t->forget({&k6, 1}) != SPECKV_OK) _exit(6);
            _exit(0);  // no destructor: 6's header is still valid on disk
        }
        int st = 0;
        REQUIRE(waitpid(child, &st, 0) == child);
        REQUIRE(WIFEXITED(st));
        REQUIRE(WEXITSTATUS(st) == 0);
        o.recover = true;
        auto t = open_tier(o);
        CHECK_FALSE(t->contains(5));
        CHECK(t->contains(6));
        CHECK(t->contains(7));
        REQUIRE(t->flush_forgotten() == SPECKV_OK);
    }
}

namespace {

// An extent header as lib/tiers/cold_tier.cc lays it out (64 bytes, little-endian
// host), with a valid header CRC32C over whatever it claims.
std::vector<unsigned char> forged_header(uint64_t key, uint64_t len, uint64_t gen, uint32_t crc, uint32_t version = 1) {
    std::vector<unsigned char> h(64, 0);
    const uint32_t magic = 0x43564b53;
    std::memcpy(&h[0], &magic, 4);
    std::memcpy(&h[4], &version, 4);
    std::memcpy(&h[8], &key, 8);
    std::memcpy(&h[16], &len, 8);
    std::memcpy(&h[24], &gen, 8);
    std::memcpy(&h[32], &crc, 4);
    const uint32_t hcrc = crc32c(0, h.data(), 36);
    std::memcpy(&h[36], &hcrc, 4);
    return h;
}

void write_at(const std::string &path, uint64_t off, const std::vector<unsigned char> &b) {
    int fd = ::open(path.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    REQUIRE(pwrite(fd, b.data(), b.size(), off_t(off)) == ssize_t(b.size()));
    ::close(fd);
}

}  // namespace

TEST_CASE("cold tier: a hostile file is skipped at recovery, field by field, never trusted") {
    ColdTierOptions o = small_opts("hostile", ColdEngine::kSync);
    const uint32_t blk = o.block;
    const auto good = pattern(5000, 42);
    {
        auto t = open_tier(o);
        REQUIRE(put1(*t, 1, good) == SPECKV_OK);  // blocks 0-1
    }
    // Forged extents with valid header CRCs, one per block from block 8: a
    // length that wraps the extent arithmetic (and whose empty payload CRC
    // of 0 matched before), one past the end of the file, generations 0 and
    // huge, an unknown version.
    struct Forged {
        const char *what;
        uint64_t key, len, gen;
        uint32_t crc, version;
    } forged[] = {
        {"length 2^64-1 (wraps)", 100, ~0ull, 5, 0, 1},
        {"length 2^64-64 (wraps to 0 blocks)", 101, ~0ull - 63, 5, 0, 1},
        {"length past the end of the file", 102, 1ull << 30, 5, 0, 1},
        {"generation 0", 103, 0, 0, 0, 1},
        {"generation 2^63", 104, 0, 1ull << 63, 0, 1},
        {"version 2", 105, 0, 5, 0, 2},
    };
    uint64_t b = 8;
    for (const Forged &f : forged) write_at(o.path, b++ * blk, forged_header(f.key, f.len, f.gen, f.crc, f.version));
    // The file ends mid-block after a header claiming the last block whole.
    write_at(o.path, b * blk, forged_header(106, blk - 64, 5, crc32c(0, nullptr, 0)));
    REQUIRE(truncate(o.path.c_str(), off_t(b * blk + 100)) == 0);
    // And a block of garbage that happens to start with the magic.
    auto junk = pattern(blk, 9);
    const uint32_t magic = 0x43564b53;
    std::memcpy(junk.data(), &magic, 4);
    write_at(o.path, 4 * blk, junk);

    o.recover = true;
    auto t = open_tier(o);
    REQUIRE(t);
    CHECK(t->stats().keys == 1);
    CHECK(t->stats().bad_headers == 6);  // the junk fails its CRC: not counted
    for (const Forged &f : forged) {
        CAPTURE(f.what);
        CHECK_FALSE(t->contains(f.key));
        CHECK(t->length(f.key) == -1);
    }
    CHECK_FALSE(t->contains(106));
    std::vector<unsigned char> got;
    REQUIRE(get1(*t, 1, &got) == SPECKV_OK);
    CHECK(got == good);
    // The tier still works: new extents, read back.
    REQUIRE(put1(*t, 2, pattern(9000, 2)) == SPECKV_OK);
    REQUIRE(get1(*t, 2, &got) == SPECKV_OK);
    CHECK(got == pattern(9000, 2));
}

TEST_CASE("cold tier: a header rewritten under an open tier is reported at get, not followed") {
    ColdTierOptions o = small_opts("hostile-get", ColdEngine::kSync);
    auto t = open_tier(o);
    const auto v = pattern(3000, 3);
    REQUIRE(put1(*t, 7, v) == SPECKV_OK);  // block 0
    std::vector<unsigned char> got;
    // Valid CRCs, but the header now claims a longer payload, another key, a huge length.
    for (auto h : {forged_header(7, 3000 + 4096, 1, 0), forged_header(8, 3000, 1, crc32c(0, v.data(), v.size())),
                   forged_header(7, ~0ull, 1, 0)}) {
        write_at(o.path, 0, h);
        CHECK(get1(*t, 7, &got) == SPECKV_ECORRUPT);
        CHECK(std::string(last_error()).find("damaged") != std::string::npos);
    }
    write_at(o.path, 0, forged_header(7, 3000, 1, crc32c(0, v.data(), v.size())));
    REQUIRE(get1(*t, 7, &got) == SPECKV_OK);
    CHECK(got == v);
}

TEST_CASE("cold tier: a put larger than the tier is refused before any arithmetic on it") {
    ColdTierOptions o = small_opts("huge-put", ColdEngine::kSync);
    auto t = open_tier(o);
    unsigned char byte = 1;
    ColdTier::PutItem it{1, &byte, ~size_t(0)};  // never read: refused on its length
    CHECK(t->put({&it, 1}) == SPECKV_ENOSPC);
    CHECK(it.status == SPECKV_ENOSPC);
    CHECK(t->stats().keys == 0);
}

namespace {
// A spill store in memory: how L5 stands behind the file (docs/remote.md
// "Demotion to L5"; the Redis one is tested against a real cluster, -L remote).
struct MemSpill : ColdSpill {
    std::map<uint64_t, std::vector<unsigned char>> kv;
    bool answer = true;
    void put(std::span<PutItem> items) override {
        for (auto &it : items) {
            it.ok = answer;
            if (!answer) continue;
            auto *p = static_cast<const unsigned char *>(it.data);
            kv[it.key].assign(p, p + it.len);
        }
    }
    void get(std::span<GetItem> items) override {
        for (auto &it : items) {
            auto f = kv.find(it.key);
            it.status = !answer ? SPECKV_EIO : f == kv.end() || f->second.size() != it.len ? SPECKV_ENOENT : SPECKV_OK;
            if (it.status == SPECKV_OK) std::memcpy(it.dst, f->second.data(), it.len);
        }
    }
    void del(std::span<DelItem> items) override {
        for (auto &d : items) {
            d.ok = answer;
            if (answer) kv.erase(d.key);
        }
    }
    void bind(uint64_t id) override { store_id = id; }
    uint64_t store_id = 0;
};
}  // namespace

TEST_CASE("cold tier: a spill store takes the oldest extents, then what does not fit; same keys, same bytes") {
    ColdTierOptions o = small_opts("spill", ColdEngine::kSync);
    o.capacity = 64 << 10;  // 16 blocks; a 16 KiB item takes 5
    auto t = open_tier(o);
    auto s = std::make_shared<MemSpill>();
    t->set_spill(s);
    std::vector<unsigned char> got;
    for (int k = 1; k <= 3; k++) REQUIRE(put1(*t, uint64_t(k), pattern(16384, k)) == SPECKV_OK);
    CHECK(s->kv.empty());
    REQUIRE(put1(*t, 4, pattern(16384, 4)) == SPECKV_OK);  // no room: key 1, the oldest, moves out first
    CHECK(t->in_spill(1));
    CHECK(!t->in_spill(4));
    CHECK(t->stats().spilled == 1);
    REQUIRE(put1(*t, 5, pattern(100000, 5)) == SPECKV_OK);  // larger than the file: straight to the store
    CHECK(t->in_spill(5));
    CHECK(t->stats().spilled_direct == 1);
    CHECK((t->contains(5) && t->length(5) == 100000 && t->keys().size() == 5));
    CHECK((t->stats().keys == 5 && t->stats().spill_keys == 2));
    for (int k = 1; k <= 4; k++) {
        REQUIRE(get1(*t, uint64_t(k), &got) == SPECKV_OK);
        CHECK(got == pattern(16384, k));
    }
    REQUIRE(get1(*t, 5, &got) == SPECKV_OK);
    CHECK(got == pattern(100000, 5));
    // forget_if forgets exactly the copy it names; the store's copy goes at the next flush.
    uint64_t g = 0;
    REQUIRE(t->generation(1, &g));
    CHECK(t->forget_if(1, g + 1) == SPECKV_OK);
    CHECK(t->in_spill(1));
    CHECK(t->forget_if(1, g) == SPECKV_OK);
    CHECK(!t->contains(1));
    CHECK(s->kv.count(1) == 1);
    CHECK(t->flush_forgotten() == SPECKV_OK);
    CHECK(s->kv.count(1) == 0);
    // A copy the store lost is a miss, counted once; later gets do not ask.
    s->kv.erase(5);
    CHECK(get1(*t, 5, &got) == SPECKV_ENOENT);
    CHECK(get1(*t, 5, &got) == SPECKV_ENOENT);
    CHECK(t->stats().spill_lost == 1);
    CHECK(t->contains(5));  // still listed: its owner frees it
    // No answer is an error, not a loss: a later get asks again.
    REQUIRE(put1(*t, 6, pattern(16384, 6)) == SPECKV_OK);  // key 2 moves out
    REQUIRE(t->in_spill(2));
    s->answer = false;
    CHECK(get1(*t, 2, &got) == SPECKV_EIO);
    CHECK(t->stats().spill_failures == 1);
    s->answer = true;
    REQUIRE(get1(*t, 2, &got) == SPECKV_OK);
    CHECK(got == pattern(16384, 2));
    // Put into the file again, its store copy goes; dropping a spilled key deletes it there.
    REQUIRE(put1(*t, 2, pattern(16384, 7)) == SPECKV_OK);
    CHECK(!t->in_spill(2));
    REQUIRE(get1(*t, 2, &got) == SPECKV_OK);
    CHECK(got == pattern(16384, 7));
    CHECK(t->flush_forgotten() == SPECKV_OK);
    CHECK(s->kv.count(2) == 0);
    // At the end the store's copies stay: the directory beside the file lists them.
    const size_t left = s->kv.size();
    CHECK(left > 0);
    t.reset();
    CHECK(s->kv.size() == left);
}

TEST_CASE("cold tier: a put that may not spill (the pool lock is held) never calls the store") {
    ColdTierOptions o = small_opts("nospill", ColdEngine::kSync);
    o.capacity = 64 << 10;  // 16 blocks; a 16 KiB item takes 5
    auto t = open_tier(o);
    struct Counting : MemSpill {
        int calls = 0;
        void put(std::span<PutItem> items) override {
            calls++;
            MemSpill::put(items);
        }
        void del(std::span<DelItem> items) override {
            calls++;
            MemSpill::del(items);
        }
    };
    auto s = std::make_shared<Counting>();
    t->set_spill(s);
    for (int k = 1; k <= 3; k++) REQUIRE(put1(*t, uint64_t(k), pattern(16384, k)) == SPECKV_OK);
    REQUIRE(put1(*t, 4, pattern(16384, 4)) == SPECKV_OK);  // key 1 moves out: the store is called
    REQUIRE(t->in_spill(1));
    uint64_t g = 0;
    REQUIRE(t->generation(1, &g));
    REQUIRE(t->forget_if(1, g) == SPECKV_OK);  // its deletion waits for a flush
    const int before = s->calls;
    // The file is full: without the store the item fails, nothing moves out, the deletion waits.
    std::vector<unsigned char> data = pattern(16384, 9);
    ColdTier::PutItem it{9, data.data(), data.size()};
    CHECK(t->put({&it, 1}, /*may_spill=*/false) == SPECKV_ENOSPC);
    CHECK(it.status == SPECKV_ENOSPC);
    CHECK(!it.spilled);
    CHECK(s->calls == before);
    CHECK(s->kv.count(1) == 1);
    CHECK(!t->contains(9));
    std::vector<unsigned char> got;
    for (int k = 2; k <= 4; k++) {
        REQUIRE(get1(*t, uint64_t(k), &got) == SPECKV_OK);
        CHECK(got == pattern(16384, k));
    }
    // The same put allowed to spill succeeds, and the waiting deletion is done.
    CHECK(t->put({&it, 1}, /*may_spill=*/true) == SPECKV_OK);
    CHECK(s->calls > before);
    CHECK(s->kv.count(1) == 0);
    REQUIRE(get1(*t, 9, &got) == SPECKV_OK);
    CHECK(got == data);
}

TEST_CASE("cold tier: the spill store's copies outlive the tier; the next open finds them, frees delete them") {
    ColdTierOptions o = small_opts("spill-reopen", ColdEngine::kSync);
    o.capacity = 64 << 10;  // 16 blocks; a 16 KiB item takes 5
    auto s = std::make_shared<MemSpill>();
    uint64_t id = 0;
    {
        auto t = open_tier(o);
        t->set_spill(s);
        id = s->store_id;
        for (int k = 1; k <= 6; k++) REQUIRE(put1(*t, uint64_t(k), pattern(16384, k)) == SPECKV_OK);
        REQUIRE(put1(*t, 7, pattern(100000, 7)) == SPECKV_OK);  // straight to the store
        CHECK((t->in_spill(1) && t->in_spill(2) && t->in_spill(3) && t->in_spill(7)));
    }
    CHECK(s->kv.size() == 4);
    o.recover = true;
    std::vector<unsigned char> got;
    {
        // Without a store: listed, not readable (EIO, not a loss), not deleted.
        auto t = open_tier(o);
        CHECK(t->spill_listed());
        CHECK((t->contains(1) && t->in_spill(7) && t->length(7) == 100000));
        CHECK(get1(*t, 1, &got) == SPECKV_EIO);
        CHECK(t->drop(std::vector<uint64_t>{3}) == SPECKV_OK);  // its deletion waits for a store
        CHECK(s->kv.count(3) == 1);
    }
    {
        auto t = open_tier(o);
        t->set_spill(s);
        CHECK(s->store_id == id);  // the same namespace: the same copies
        CHECK(s->kv.count(3) == 0);  // the deletion that waited went out
        CHECK(!t->contains(3));
        for (int k : {1, 2, 4, 5, 6}) {
            REQUIRE(get1(*t, uint64_t(k), &got) == SPECKV_OK);
            CHECK(got == pattern(16384, k));
        }
        REQUIRE(get1(*t, 7, &got) == SPECKV_OK);
        CHECK(got == pattern(100000, 7));
        // A deletion the store does not confirm stays listed: retried at the next open.
        s->answer = false;
        CHECK(t->drop(std::vector<uint64_t>{2}) == SPECKV_OK);
        CHECK(t->flush_forgotten() == SPECKV_OK);
        s->answer = true;
        CHECK(s->kv.count(2) == 1);
    }
    CHECK(s->kv.count(2) == 1);
    {
        // A store that takes no new copies (remote.demote = 0) still serves and deletes the listed ones.
        auto t = open_tier(o);
        t->set_spill(s, false);
        CHECK(s->kv.count(2) == 0);
        REQUIRE(get1(*t, 7, &got) == SPECKV_OK);
        CHECK(got == pattern(100000, 7));
        CHECK(put1(*t, 8, pattern(100000, 8)) == SPECKV_ENOSPC);
        CHECK(!t->in_spill(8));
    }
    {
        auto t = open_tier(o);
        t->set_spill(s);
        CHECK(t->drop(std::vector<uint64_t>{1, 7}) == SPECKV_OK);
        CHECK(t->flush_forgotten() == SPECKV_OK);
        CHECK(s->kv.empty());
    }
    // A torn record at the end of the directory is ignored; an open without
    // recover (the file emptied) deletes whatever is still listed.
    {
        auto t = open_tier(o);
        t->set_spill(s);
        REQUIRE(put1(*t, 9, pattern(100000, 9)) == SPECKV_OK);
        CHECK(t->in_spill(9));
    }
    {
        FILE *f = std::fopen((o.path + ".l5").c_str(), "ab");
        REQUIRE(f != nullptr);
        const char torn[40] = "a record cut short by a crash";
        std::fwrite(torn, 1, sizeof torn, f);
        std::fclose(f);
    }
    {
        auto t = open_tier(o);
        t->set_spill(s);
        CHECK(t->in_spill(9));
        REQUIRE(get1(*t, 9, &got) == SPECKV_OK);
        CHECK(got == pattern(100000, 9));
    }
    CHECK(s->kv.size() == 1);
    o.recover = false;
    {
        auto t = open_tier(o);
        t->set_spill(s);
        CHECK(!t->contains(9));
        CHECK(s->kv.empty());
    }
}
