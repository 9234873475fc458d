// SPDX-License-Identifier: Apache-2.0
// Issue 25: files speckv creates and opens (mode, links, directories, stale
// temporary files), sizes near 2^64, URI and config bounds, handles of
// another pool, check after a death inside the pool lock, select's argument
// order. Ownership by another user needs root: tests/unit/test_owner.cc.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "pool/pool.h"
#include "pool/pool_format.h"
#include "speckv.h"
#include "util/status.h"
#include "testutil.h"
#include "config/uri.h"

namespace {

mode_t file_mode(const std::string &path) {
    struct stat st;
    REQUIRE(stat(path.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

std::string fresh_dir(const char *tag) {
    std::string d = test_dir() + "/" + tag + "-" + std::to_string(getpid());
    std::string rm = "rm -rf '" + d + "'";
    REQUIRE(system(rm.c_str()) == 0);
    REQUIRE(mkdir(d.c_str(), 0700) == 0);
    return d;
}

// A pid that is not running: a child that has exited and been reaped.
pid_t dead_pid() {
    pid_t c = fork();
    if (c == 0) _exit(0);
    int st;
    REQUIRE(waitpid(c, &st, 0) == c);
    return c;
}

}  // namespace

TEST_CASE("new pool files are 0600 whatever the umask; pool.mode / mode= widen them exactly") {
    const std::string d = fresh_dir("mode");
    const mode_t old = umask(0);  // 0660 & ~umask was group-writable here
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open(("file:" + d + "/a.pool?size=4M").c_str(), nullptr, &p) == SPECKV_OK);
    speckv_pool_close(p);
    CHECK(file_mode(d + "/a.pool") == 0600);

    umask(077);  // a deliberate sharing mode is not narrowed by the umask
    REQUIRE(speckv_pool_open(("file:" + d + "/b.pool?size=4M&mode=0640").c_str(), nullptr, &p) == SPECKV_OK);
    speckv_pool_close(p);
    CHECK(file_mode(d + "/b.pool") == 0640);

    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    CHECK(speckv_config_set_str(c, "pool.mode", "0660") == SPECKV_OK);
    REQUIRE(speckv_pool_open(("file:" + d + "/c.pool?size=4M").c_str(), c, &p) == SPECKV_OK);
    speckv_pool_close(p);
    CHECK(file_mode(d + "/c.pool") == 0660);
    // Modes that lock the owner out, or add execute/set-id bits, are refused.
    CHECK(speckv_config_set_str(c, "pool.mode", "0400") == SPECKV_EINVAL);
    CHECK(speckv_config_set_str(c, "pool.mode", "0700") == SPECKV_EINVAL);
    CHECK(speckv_config_set_str(c, "pool.mode", "4600") == SPECKV_EINVAL);
    CHECK(speckv_config_set_int(c, "pool.mode", 0644) == SPECKV_OK);
    CHECK(speckv_config_set_int(c, "pool.mode", 0700) == SPECKV_EINVAL);
    speckv_config_free(c);
    umask(old);
}

TEST_CASE("the L4 file is created 0600 too") {
    const std::string d = fresh_dir("coldmode");
    const mode_t old = umask(0);
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    REQUIRE(speckv_config_set_str(c, "cold.path", (d + "/l4.bin").c_str()) == SPECKV_OK);
    speckv_pool *p = nullptr;
    REQUIRE_MESSAGE(speckv_pool_open(("file:" + d + "/a.pool?size=4M").c_str(), c, &p) == SPECKV_OK, speckv_errmsg());
    speckv_pool_close(p);
    speckv_config_free(c);
    CHECK(file_mode(d + "/l4.bin") == 0600);
    umask(old);
}

TEST_CASE("a pool or L4 file reached through a symbolic link is refused") {
    const std::string d = fresh_dir("link");
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open(("file:" + d + "/real.pool?size=4M").c_str(), nullptr, &p) == SPECKV_OK);
    speckv_pool_close(p);
    REQUIRE(symlink((d + "/real.pool").c_str(), (d + "/link.pool").c_str()) == 0);
    CHECK(speckv_pool_open(("file:" + d + "/link.pool").c_str(), nullptr, &p) == SPECKV_EPERM);
    CHECK(std::string(speckv_errmsg()).find("symbolic link") != std::string::npos);
    std::unique_ptr<speckv::Pool> ro;
    CHECK(speckv::Pool::open_readonly_uri("file:" + d + "/link.pool", &ro) == SPECKV_EPERM);

    // The L4 file: a link planted where it would be created.
    { std::ofstream(d + "/target.bin") << "x"; }
    REQUIRE(symlink((d + "/target.bin").c_str(), (d + "/l4.bin").c_str()) == 0);
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    REQUIRE(speckv_config_set_str(c, "cold.path", (d + "/l4.bin").c_str()) == SPECKV_OK);
    CHECK(speckv_pool_open(("file:" + d + "/real.pool").c_str(), c, &p) == SPECKV_EPERM);
    CHECK(std::string(speckv_errmsg()).find("symbolic link") != std::string::npos);
    speckv_config_free(c);
}

TEST_CASE("a pool in a world-writable directory without the sticky bit is refused") {
    const std::string d = fresh_dir("wdir");
    REQUIRE(chmod(d.c_str(), 0777) == 0);
    speckv_pool *p = nullptr;
    CHECK(speckv_pool_open(("file:" + d + "/a.pool?size=4M").c_str(), nullptr, &p) == SPECKV_EPERM);
    const std::string msg = speckv_errmsg();
    CHECK(msg.find("sticky") != std::string::npos);
    CHECK(msg.find("0777") != std::string::npos);
    CHECK(access((d + "/a.pool").c_str(), F_OK) != 0);  // nothing created
    // An existing pool there is refused too.
    REQUIRE(chmod(d.c_str(), 0700) == 0);
    REQUIRE(speckv_pool_open(("file:" + d + "/a.pool?size=4M").c_str(), nullptr, &p) == SPECKV_OK);
    speckv_pool_close(p);
    REQUIRE(chmod(d.c_str(), 0777) == 0);
    CHECK(speckv_pool_open(("file:" + d + "/a.pool").c_str(), nullptr, &p) == SPECKV_EPERM);
    // With the sticky bit (as /tmp and /dev/shm have) it is fine.
    REQUIRE(chmod(d.c_str(), 01777) == 0);
    REQUIRE_MESSAGE(speckv_pool_open(("file:" + d + "/a.pool").c_str(), nullptr, &p) == SPECKV_OK, speckv_errmsg());
    speckv_pool_close(p);
    chmod(d.c_str(), 0700);
}

TEST_CASE("stale NAME.tmp.PID files of dead creators are swept at the next create, live ones kept") {
    const std::string d = fresh_dir("tmp");
    const std::string pool = d + "/a.pool";
    const std::string stale = pool + ".tmp." + std::to_string(dead_pid());
    const std::string live = pool + ".tmp." + std::to_string(getppid());  // a running process
    { std::ofstream(stale) << ""; }
    { std::ofstream(live) << ""; }
    auto found = speckv::stale_temp_files(pool, /*sweep=*/false);
    REQUIRE(found.size() == 1);
    CHECK(found[0] == stale);
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open(("file:" + pool + "?size=4M").c_str(), nullptr, &p) == SPECKV_OK);
    speckv_pool_close(p);
    CHECK(access(stale.c_str(), F_OK) != 0);
    CHECK(access(live.c_str(), F_OK) == 0);
    CHECK(speckv::stale_temp_files(pool, false).empty());
}

TEST_CASE("alloc sizes near 2^64 are ENOSPC, leaving nothing behind") {
    const std::string path = fresh_pool("huge");
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open(("file:" + path + "?size=4M").c_str(), nullptr, &p) == SPECKV_OK);
    for (uint64_t bytes : {UINT64_MAX, UINT64_MAX - 4094, UINT64_MAX - 4095, UINT64_MAX - 4096, uint64_t(1) << 63,
                           (uint64_t(UINT32_MAX) + 1) * 4096}) {
        CAPTURE(bytes);
        speckv_handle h = 0;
        CHECK(speckv_alloc(p, bytes, SPECKV_DTYPE_OPAQUE, nullptr, &h) == SPECKV_ENOSPC);
    }
    // A hint whose token range runs past 2^64.
    speckv_hint hint{};
    hint.struct_size = sizeof hint;
    hint.token_pos = UINT64_MAX - 3;
    hint.token_count = 8;
    speckv_handle h = 0;
    CHECK(speckv_alloc(p, 4096, SPECKV_DTYPE_OPAQUE, &hint, &h) == SPECKV_EINVAL);
    speckv_pool_stats st{};
    st.struct_size = sizeof st;
    REQUIRE(speckv_stats(p, &st) == SPECKV_OK);
    CHECK(st.blocks_live == 0);
    speckv_pool_close(p);
    std::unique_ptr<speckv::Pool> ro;
    REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
    speckv::CheckReport r;
    ro->check(&r);
    CHECK(r.problems.empty());
}

TEST_CASE("URI size= is held to pool.size's bounds; stray '&' and '?' are refused") {
    const std::string d = fresh_dir("usize");
    speckv_pool *p = nullptr;
    CHECK(speckv_pool_open(("file:" + d + "/a.pool?size=3M").c_str(), nullptr, &p) == SPECKV_EINVAL);
    CHECK(speckv_pool_open(("file:" + d + "/a.pool?size=65T").c_str(), nullptr, &p) == SPECKV_EINVAL);
    CHECK(speckv_pool_open(("file:" + d + "/a.pool?size=128T").c_str(), nullptr, &p) == SPECKV_EINVAL);
    CHECK(std::string(speckv_errmsg()).find("pool.size") != std::string::npos);
    CHECK(access((d + "/a.pool").c_str(), F_OK) != 0);
    CHECK(speckv_pool_open("anon:?size=3M", nullptr, &p) == SPECKV_EINVAL);
    for (const char *bad : {"file:/x.pool?size=8M&", "file:/x.pool?", "file:/x.pool?&size=8M",
                            "file:/x.pool?size=8M&&create=1", "anon:?size=8M&"}) {
        CAPTURE(bad);
        speckv::Uri u;
        CHECK(speckv::parse_uri(bad, &u) == SPECKV_EURI);
    }
    speckv::Uri u;
    REQUIRE(speckv::parse_uri("file:/x.pool?mode=0640&owner=65534&group=0", &u) == SPECKV_OK);
    CHECK(u.params["mode"] == 0640);
    CHECK(u.params["owner"] == 65534);
    CHECK(u.params["group"] == 0);
    REQUIRE(speckv::parse_uri("file:/x.pool?owner=root", &u) == SPECKV_OK);
    CHECK(u.params["owner"] == 0);
    for (const char *bad : {"file:/x.pool?mode=0700", "file:/x.pool?mode=640x", "file:/x.pool?mode=0400",
                            "file:/x.pool?owner=no-such-user-speckv", "file:/x.pool?owner=1&owner=2",
                            "anon:?owner=1", "dax:/dev/dax0.0?mode=0600"}) {
        CAPTURE(bad);
        CHECK(speckv::parse_uri(bad, &u) == SPECKV_EURI);
    }
}

TEST_CASE("a directory as the TOML config path is an error") {
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    CHECK(speckv_config_load_toml(c, test_dir().c_str()) == SPECKV_EIO);
    CHECK(std::string(speckv_errmsg()).find("directory") != std::string::npos);
    speckv_config_free(c);
    speckv::Config k;
    CHECK(k.load_toml_text("[pool]\nmode = 0o640\n", "octal.toml") == SPECKV_OK);
    CHECK(k.get("pool.mode") == 0640);
    CHECK(k.load_toml_text("[pool]\nmode = \"0660\"\n", "text.toml") == SPECKV_OK);
    CHECK(k.get("pool.mode") == 0660);
}

TEST_CASE("a handle of another pool is not a handle of this one") {
    const std::string a = fresh_pool("tagA"), b = fresh_pool("tagB");
    speckv_pool *pa = nullptr, *pb = nullptr;
    REQUIRE(speckv_pool_open(("file:" + a + "?size=4M").c_str(), nullptr, &pa) == SPECKV_OK);
    REQUIRE(speckv_pool_open(("file:" + b + "?size=4M").c_str(), nullptr, &pb) == SPECKV_OK);
    speckv_handle ha = 0, hb = 0;
    REQUIRE(speckv_alloc(pa, 4096, SPECKV_DTYPE_OPAQUE, nullptr, &ha) == SPECKV_OK);
    REQUIRE(speckv_alloc(pb, 4096, SPECKV_DTYPE_OPAQUE, nullptr, &hb) == SPECKV_OK);
    CHECK(ha != hb);  // both were 0x1000001
    unsigned char buf[16];
    CHECK(speckv_access(pb, ha, 0, buf, sizeof buf, 0) == SPECKV_EBADHANDLE);
    CHECK(speckv_free(pb, ha) == SPECKV_EBADHANDLE);
    // Within a pool a reused slot still gets a new generation.
    REQUIRE(speckv_free(pa, ha) == SPECKV_OK);
    speckv_handle ha2 = 0;
    REQUIRE(speckv_alloc(pa, 4096, SPECKV_DTYPE_OPAQUE, nullptr, &ha2) == SPECKV_OK);
    CHECK(ha2 != ha);
    CHECK(speckv_access(pa, ha, 0, buf, sizeof buf, 0) == SPECKV_EBADHANDLE);
    speckv_pool_close(pa);
    speckv_pool_close(pb);
    std::unique_ptr<speckv::Pool> ro;
    REQUIRE(speckv::Pool::open_readonly(a, &ro) == SPECKV_OK);
    speckv::CheckReport r;
    ro->check(&r);
    CHECK(r.problems.empty());
}

TEST_CASE("check after a death inside the pool lock (recovery cut short): recovery pending, then repaired") {
    const std::string path = fresh_pool("midrecovery");
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open(("file:" + path + "?size=8M").c_str(), nullptr, &p) == SPECKV_OK);
    std::vector<speckv_handle> hs(8);
    std::vector<unsigned char> page(4096, 0x5a);
    for (auto &h : hs) {
        REQUIRE(speckv_alloc(p, 4096, SPECKV_DTYPE_OPAQUE, nullptr, &h) == SPECKV_OK);
        REQUIRE(speckv_write(p, h, 0, page.data(), page.size()) == SPECKV_OK);
    }
    pid_t pid = fork();
    if (pid == 0) {
        // What recovery does first, then death: the lock held, the bitmap
        // cleared, nothing rebuilt yet.
        int fd = open(path.c_str(), O_RDWR);
        auto *m = static_cast<unsigned char *>(mmap(nullptr, 8 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        speckv::fmt::Superblock s;
        std::memcpy(&s, m, sizeof s);
        auto *sh = reinterpret_cast<speckv::fmt::SharedHeader *>(m + s.shared_off);
        pthread_mutex_lock(&sh->lock);
        std::memset(m + s.bitmap_off, 0, (s.n_pages + 63) / 64 * 8);
        _exit(0);
    }
    int st;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    {
        std::unique_ptr<speckv::Pool> ro;
        REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
        speckv::CheckReport r;
        ro->check(&r);
        CHECK(r.recovery_pending);
        REQUIRE(r.problems.size() > 1);
        CHECK(r.problems[0].find("died holding the pool lock") != std::string::npos);
    }
    // The next user of the lock recovers; then check is clean.
    speckv_handle h;
    REQUIRE(speckv_alloc(p, 4096, SPECKV_DTYPE_OPAQUE, nullptr, &h) == SPECKV_OK);
    for (auto hh : hs) {
        std::vector<unsigned char> got(4096);
        REQUIRE(speckv_access(p, hh, 0, got.data(), got.size(), 0) == SPECKV_OK);
        CHECK(got == page);
    }
    speckv_pool_close(p);
    std::unique_ptr<speckv::Pool> ro;
    REQUIRE(speckv::Pool::open_readonly(path, &ro) == SPECKV_OK);
    speckv::CheckReport r;
    ro->check(&r);
    CHECK_FALSE(r.recovery_pending);
    CHECK(r.problems.empty());
}

TEST_CASE("speckv_select validates its arguments before saying the pool has no summary area") {
    const std::string path = fresh_pool("selorder");
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open(("file:" + path + "?size=4M").c_str(), nullptr, &p) == SPECKV_OK);  // no summaries
    speckv_select_params sp{};
    sp.struct_size = sizeof sp;
    sp.kv_heads = 1;
    sp.head_dim = 8;
    sp.q_per_kv = 1;
    sp.budget = 1;
    sp.recent = UINT32_MAX;
    sp.context_tokens = 16;
    std::vector<float> q(8, 0.5f);
    std::vector<speckv_page_ref> out(4);
    size_t n = 0;
    CHECK(speckv_select(p, 0, 0, 0, q.data(), q.size(), &sp, out.data(), out.size(), &n, nullptr) == SPECKV_ENOTSUP);
    q[3] = std::nanf("");
    CHECK(speckv_select(p, 0, 0, 0, q.data(), q.size(), &sp, out.data(), out.size(), &n, nullptr) == SPECKV_EINVAL);
    q[3] = 0.5f;
    sp.budget = 0;
    CHECK(speckv_select(p, 0, 0, 0, q.data(), q.size(), &sp, out.data(), out.size(), &n, nullptr) == SPECKV_EINVAL);
    sp.budget = 1;
    sp.scale = -1.f;
    CHECK(speckv_select(p, 0, 0, 0, q.data(), q.size(), &sp, out.data(), out.size(), &n, nullptr) == SPECKV_EINVAL);
    speckv_pool_close(p);
}
