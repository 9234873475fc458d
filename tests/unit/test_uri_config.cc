// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>

#include "config/config.h"
#include "util/crc32c.h"
#include "util/status.h"
#include "testutil.h"
#include "config/uri.h"

using namespace speckv;

TEST_CASE("parse_size accepts binary suffixes and rejects the rest") {
    int64_t v = 0;
    CHECK(parse_size("4096", &v));
    CHECK(v == 4096);
    CHECK(parse_size("8G", &v));
    CHECK(v == (int64_t(8) << 30));
    CHECK(parse_size("64MiB", &v));
    CHECK(v == (64 << 20));
    CHECK(parse_size("1k", &v));
    CHECK(v == 1024);
    CHECK_FALSE(parse_size("", &v));
    CHECK_FALSE(parse_size("G", &v));
    CHECK_FALSE(parse_size("12X", &v));
    CHECK_FALSE(parse_size("-5", &v));
    CHECK_FALSE(parse_size("99999999999999999999", &v));
    CHECK_FALSE(parse_size("9000000T", &v));  // overflows int64
}

TEST_CASE("URIs: every scheme, named pools, parameters") {
    Uri u;
    REQUIRE(parse_uri("file:/tmp/x.pool?size=8G&page_size=8192", &u) == SPECKV_OK);
    CHECK(u.scheme == Scheme::File);
    CHECK(u.target == "/tmp/x.pool");
    CHECK(u.params["size"] == (int64_t(8) << 30));
    CHECK(u.params["page_size"] == 8192);

    REQUIRE(parse_uri("file:default", &u) == SPECKV_OK);
    CHECK(u.named);
    CHECK(u.target.find("default.pool") != std::string::npos);

    REQUIRE(parse_uri("anon:?size=1G", &u) == SPECKV_OK);
    CHECK(u.scheme == Scheme::Anon);
    REQUIRE(parse_uri("dax:/dev/dax0.0", &u) == SPECKV_OK);
    CHECK(u.scheme == Scheme::Dax);
    REQUIRE(parse_uri("numa:2?size=64G", &u) == SPECKV_OK);
    CHECK(u.target == "2");
}

TEST_CASE("malformed URIs are SPECKV_EURI with a message") {
    const char *bad[] = {"",          "nocolon",          "http://x",          "file:",        "file:a b",
                         "file:.hidden", "anon:/x",        "anon:?size=",       "anon:?size=1G&size=2G",
                         "anon:?bogus=1", "anon:?size=abc", "dax:dev",           "numa:x",       "numa:",
                         "file:/x?novalue", "file:/x?=3"};
    for (const char *b : bad) {
        Uri u;
        CAPTURE(b);
        CHECK(parse_uri(b, &u) == SPECKV_EURI);
        CHECK(std::strlen(last_error()) > 0);
    }
}

TEST_CASE("config keys: bounds, strings, unknown keys") {
    Config c;
    CHECK(c.get("pool.page_size") == 4096);
    CHECK(c.set_int("pool.page_size", 8192) == SPECKV_OK);
    CHECK(c.set_int("pool.page_size", 12288) == SPECKV_EINVAL);  // not a power of two
    CHECK(c.set_int("pool.page_size", 1024) == SPECKV_EINVAL);   // below min
    CHECK(c.set_str("pool.size", "1G") == SPECKV_OK);
    CHECK(c.get("pool.size") == (1 << 30));
    CHECK(c.set_str("pool.size", "lots") == SPECKV_EINVAL);
    CHECK(c.set_int("no.such.key", 1) == SPECKV_ENOENT);
    int64_t v;
    CHECK(c.get_int("cache.bytes", &v) == SPECKV_OK);
    CHECK(find_key("log.level") != nullptr);
}

TEST_CASE("TOML: applies all keys or none, errors name the line") {
    Config c;
    std::string good = "[pool]\nsize = \"512M\"\npage_size = 8192\ncreate = false\n[cache]\nbytes = 0\n";
    REQUIRE(c.load_toml_text(good, "good.toml") == SPECKV_OK);
    CHECK(c.get("pool.size") == (512 << 20));
    CHECK(c.get("pool.page_size") == 8192);
    CHECK(c.get("pool.create") == 0);
    CHECK(c.get("cache.bytes") == 0);

    Config d;
    std::string bad = "[pool]\nsize = \"1G\"\n[lock]\ntimeout_ms = 0\n";  // second key out of bounds
    CHECK(d.load_toml_text(bad, "bad.toml") == SPECKV_EINVAL);
    CHECK(std::string(last_error()).find("bad.toml:4") != std::string::npos);
    CHECK(d.get("pool.size") == (256 << 20));  // nothing applied

    CHECK(d.load_toml_text("[pool\n", "syntax.toml") == SPECKV_EINVAL);
    CHECK(d.load_toml_text("size = 3\n", "flat.toml") == SPECKV_EINVAL);
    CHECK(d.load_toml_text("[pool]\nnope = 3\n", "unknown.toml") == SPECKV_ENOENT);
    CHECK(d.load_toml_text("[pool]\nsize = 1.5\n", "float.toml") == SPECKV_EINVAL);
    CHECK(d.load_toml_file("/nonexistent/speckv.toml") == SPECKV_ENOENT);

    std::string path = test_dir() + "/cfg.toml";
    std::ofstream(path) << "[log]\nlevel = 3\n";
    CHECK(d.load_toml_file(path.c_str()) == SPECKV_OK);
    CHECK(d.get("log.level") == 3);
}

TEST_CASE("CRC32C: known vectors, hardware and table paths agree") {
    const char *s = "123456789";
    CHECK(crc32c(0, s, 9) == 0xE3069283u);
    CHECK(crc32c_portable(0, s, 9) == 0xE3069283u);
    static unsigned char buf[20000];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = static_cast<unsigned char>(i * 131 + 7);
    for (size_t off = 0; off < 9; off++)
        for (size_t n : {0, 1, 7, 8, 9, 63, 64, 1000, 2039, 2040, 2041, 4096, 6123, 19000}) CHECK(crc32c(0, buf + off, n) == crc32c_portable(0, buf + off, n));
    CHECK(crc32c(crc32c(0, buf, 100), buf + 100, 900) == crc32c(0, buf, 1000));
}
