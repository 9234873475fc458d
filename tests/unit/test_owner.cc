// SPDX-License-Identifier: Apache-2.0
// Issue 25, security 1: a pool file (or L4 file) that another user owns is
// refused unless the caller names that owner or group. Needs root (to make a
// file another uid's, and to be the root that a planted pool would fool):
// without it this exits 77, which CTest reports as skipped (SKIP_RETURN_CODE).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "pool/pool.h"
#include "speckv.h"
#include "testutil.h"

namespace {

constexpr uid_t kNobody = 65534;
constexpr gid_t kOtherGroup = 65533;

std::string fresh_dir(const char *tag) {
    std::string d = test_dir() + "/" + tag + "-" + std::to_string(getpid());
    std::string rm = "rm -rf '" + d + "'";
    REQUIRE(system(rm.c_str()) == 0);
    REQUIRE(mkdir(d.c_str(), 0755) == 0);
    return d;
}

std::string make_pool(const std::string &path) {
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open(("file:" + path + "?size=4M").c_str(), nullptr, &p) == SPECKV_OK);
    speckv_handle h;
    REQUIRE(speckv_alloc(p, 4096, SPECKV_DTYPE_OPAQUE, nullptr, &h) == SPECKV_OK);
    speckv_pool_close(p);
    return path;
}

int open_with(const std::string &uri, const char *key = nullptr, const char *value = nullptr) {
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    if (key) REQUIRE(speckv_config_set_str(c, key, value) == SPECKV_OK);
    speckv_pool *p = nullptr;
    int rc = speckv_pool_open(uri.c_str(), c, &p);
    speckv_config_free(c);
    if (rc == SPECKV_OK) speckv_pool_close(p);
    return rc;
}

}  // namespace

TEST_CASE("a pool file planted by another user is refused, and accepted when its owner or group is named") {
    const std::string d = fresh_dir("owner");
    const std::string pool = make_pool(d + "/a.pool");
    REQUIRE(chown(pool.c_str(), kNobody, kOtherGroup) == 0);

    CHECK(open_with("file:" + pool) == SPECKV_EPERM);
    const std::string msg = speckv_errmsg();
    CHECK(msg.find("uid 65534") != std::string::npos);  // what was found
    CHECK(msg.find("owner=65534") != std::string::npos);  // how to opt in
    CHECK(msg.find("pool.owner") != std::string::npos);
    std::unique_ptr<speckv::Pool> ro;
    CHECK(speckv::Pool::open_readonly_uri("file:" + pool, &ro) == SPECKV_EPERM);  // inspect/check too
    CHECK(speckv::Pool::reset_uri("file:" + pool, true) == SPECKV_EPERM);

    // Opting in, by URI or config, by owner or group.
    CHECK(open_with("file:" + pool + "?owner=65534") == SPECKV_OK);
    CHECK(open_with("file:" + pool + "?group=65533") == SPECKV_OK);
    CHECK(open_with("file:" + pool, "pool.owner", "65534") == SPECKV_OK);
    CHECK(open_with("file:" + pool, "pool.group", "65533") == SPECKV_OK);
    CHECK(open_with("file:" + pool + "?owner=65000") == SPECKV_EPERM);  // someone else named
    CHECK(speckv::Pool::open_readonly_uri("file:" + pool + "?owner=65534", &ro) == SPECKV_OK);

    // Root's own files are fine for everyone.
    REQUIRE(chown(pool.c_str(), 0, 0) == 0);
    CHECK(open_with("file:" + pool) == SPECKV_OK);
}

TEST_CASE("a pool created by another user (a real process of that uid) is refused") {
    // Under /tmp: the other uid must reach it (the test directory is root's, 0700).
    char tmpl[] = "/tmp/speckv-planted-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    const std::string d = tmpl;
    REQUIRE(chmod(d.c_str(), 01777) == 0);  // shared like /dev/shm: anyone may create, sticky
    const std::string pool = d + "/kv.pool";
    pid_t c = fork();
    if (c == 0) {
        if (setgid(kOtherGroup) != 0 || setuid(kNobody) != 0) _exit(2);
        speckv_pool *p = nullptr;
        if (speckv_pool_open(("file:" + pool + "?size=4M&mode=0666").c_str(), nullptr, &p) != SPECKV_OK) _exit(3);
        speckv_pool_close(p);
        _exit(0);
    }
    int st;
    REQUIRE(waitpid(c, &st, 0) == c);
    REQUIRE(WIFEXITED(st));
    REQUIRE(WEXITSTATUS(st) == 0);
    struct stat sb;
    REQUIRE(stat(pool.c_str(), &sb) == 0);
    REQUIRE(sb.st_uid == kNobody);
    CHECK(open_with("file:" + pool) == SPECKV_EPERM);
    CHECK(open_with("file:" + pool + "?owner=" + std::to_string(kNobody)) == SPECKV_OK);
    unlink(pool.c_str());
    rmdir(d.c_str());
}

TEST_CASE("an L4 file owned by another user is refused") {
    const std::string d = fresh_dir("l4owner");
    const std::string pool = make_pool(d + "/a.pool");
    const std::string l4 = d + "/l4.bin";
    REQUIRE(open_with("file:" + pool, "cold.path", l4.c_str()) == SPECKV_OK);  // creates it
    REQUIRE(chown(l4.c_str(), kNobody, kOtherGroup) == 0);
    CHECK(open_with("file:" + pool, "cold.path", l4.c_str()) == SPECKV_EPERM);
    CHECK(std::string(speckv_errmsg()).find("L4 file") != std::string::npos);
    // pool.owner covers the L4 file too.
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    REQUIRE(speckv_config_set_str(c, "cold.path", l4.c_str()) == SPECKV_OK);
    REQUIRE(speckv_config_set_int(c, "pool.owner", kNobody) == SPECKV_OK);
    speckv_pool *p = nullptr;
    CHECK_MESSAGE(speckv_pool_open(("file:" + pool).c_str(), c, &p) == SPECKV_OK, speckv_errmsg());
    if (p) speckv_pool_close(p);
    speckv_config_free(c);
}

int main(int argc, char **argv) {
    if (geteuid() != 0) {
        std::printf("skipped: these tests need root (to give a file to another uid)\n");
        return 77;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
