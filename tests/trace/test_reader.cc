// SPDX-License-Identifier: Apache-2.0
// Trace readers: values, strictness (errors name the line), --skip-bad, writers.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "trace.h"

using namespace speckv_trace;

namespace {

std::unique_ptr<Reader> text(const std::string &t, Format f = Format::Auto, bool skip = false) {
    std::string err;
    auto r = open_reader_text(t, f, skip, &err);
    REQUIRE_MESSAGE(r, err);
    return r;
}

// Reads everything; returns the count, or -1 with the error in *err.
int64_t drain(Reader &r, std::string *err = nullptr) {
    Request q;
    int64_t n = 0;
    int rc;
    while ((rc = r.next(&q)) == 1) ++n;
    if (rc < 0) {
        if (err) *err = r.error();
        return -1;
    }
    return n;
}

const char *kGood =
    "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [0, 1]}\n"
    "{\"timestamp\": 0, \"input_length\": 512, \"output_length\": 0, \"hash_ids\": [0]}\n"
    "\n"
    "{\"hash_ids\": [0, 2, 3], \"output_length\": 7, \"input_length\": 1025, \"timestamp\": 1500, \"extra\": {\"a\": [1, \"x\"]}}\n";

}  // namespace

TEST_CASE("mooncake: values and key order") {
    auto r = text(kGood);
    Request q;
    REQUIRE(r->next(&q) == 1);
    CHECK(q.id == 0);
    CHECK(q.arrival_ms == 0);
    CHECK(q.input_len == 1000);
    CHECK(q.output_len == 5);
    CHECK(q.hash_ids == std::vector<uint64_t>{0, 1});
    REQUIRE(r->next(&q) == 1);
    CHECK(q.output_len == 0);
    REQUIRE(r->next(&q) == 1);
    CHECK(q.id == 2);
    CHECK(q.arrival_ms == 1500);
    CHECK(q.hash_ids.size() == 3);
    CHECK(r->next(&q) == 0);
    CHECK(r->line() == 4);
}

TEST_CASE("mooncake: malformed lines are errors naming the line") {
    struct Case {
        const char *line, *want;
    } cases[] = {
        {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0]", "line 2: bad JSON"},
        {"not json", "line 2: bad JSON"},
        {"{\"timestamp\": 1, \"input_length\": -10, \"output_length\": 5, \"hash_ids\": []}", "line 2: negative length"},
        {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": -1, \"hash_ids\": [0]}", "line 2: negative length"},
        {"{\"timestamp\": 1, \"input_length\": 1024, \"output_length\": 5, \"hash_ids\": [0]}",
         "line 2: hash_ids has 1 ids, input_length 1024 needs 2"},
        {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0, 1]}", "line 2: hash_ids has 2 ids"},
        {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 5}", "line 2: missing key \"hash_ids\""},
        {"{\"timestamp\": 1, \"timestamp\": 2, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0]}",
         "line 2: duplicate key"},
        {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0]} x", "line 2: bad JSON: trailing"},
        {"{\"timestamp\": 1, \"input_length\": 10.5, \"output_length\": 5, \"hash_ids\": [0]}", "line 2: \"input_length\" is not an integer"},
        {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [-1]}", "line 2: hash_ids holds"},
        {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [01]}", "line 2: bad JSON: leading zero"},
        {"{\"timestamp\": \"1\", \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0]}", "line 2: \"timestamp\" is not a number"},
        {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0], \"s\": \"a\\q\"}", "line 2: bad JSON: bad escape"},
    };
    for (auto &c : cases) {
        CAPTURE(c.line);
        std::string t = std::string("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}\n") + c.line + "\n";
        auto r = text(t, Format::Mooncake);
        std::string err;
        CHECK(drain(*r, &err) == -1);
        CHECK_MESSAGE(err.rfind(c.want, 0) == 0, err);
    }
}

TEST_CASE("mooncake: timestamps going back are an error, or skipped and counted") {
    std::string t = "{\"timestamp\": 100, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}\n"
                    "{\"timestamp\": 100, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}\n"
                    "{\"timestamp\": 99, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}\n"
                    "garbage\n"
                    "{\"timestamp\": 101, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}\n";
    std::string err;
    auto r = text(t);
    CHECK(drain(*r, &err) == -1);
    CHECK(err.rfind("line 3: timestamp goes back", 0) == 0);
    auto s = text(t, Format::Auto, /*skip_bad=*/true);
    CHECK(drain(*s) == 3);
    CHECK(s->skipped() == 2);
}

TEST_CASE("azure csv: CRLF, no final newline, times relative to the first row") {
    std::string t = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
                    "2023-11-16 18:15:46.6805900,374,44\r\n"
                    "2023-11-16 18:15:50.9951690,396,109\r\n"
                    "2023-11-17 00:00:00.0000000,2,7";
    auto r = text(t);
    Request q;
    REQUIRE(r->next(&q) == 1);
    CHECK(q.arrival_ms == 0);
    CHECK(q.input_len == 374);
    CHECK(q.output_len == 44);
    CHECK(q.hash_ids.empty());
    REQUIRE(r->next(&q) == 1);
    CHECK(q.arrival_ms == doctest::Approx(4314.579).epsilon(1e-9));
    REQUIRE(r->next(&q) == 1);  // across midnight
    CHECK(q.arrival_ms == doctest::Approx((5 * 3600 + 44 * 60 + 13.31941) * 1000).epsilon(1e-9));
    CHECK(r->next(&q) == 0);

    std::string err;
    auto b = text("TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.68,1,1\r\n2023-11-16 25:00:00,1,1\r\n");
    CHECK(drain(*b, &err) == -1);
    CHECK(err.rfind("line 3: bad TIMESTAMP", 0) == 0);
    auto c = text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1\n");
    CHECK(drain(*c, &err) == -1);
    CHECK(err.rfind("line 2: expected 3 comma-separated fields (as the header), found 2", 0) == 0);
    auto d = text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,-4,1\n");
    CHECK(drain(*d, &err) == -1);
    CHECK(err.rfind("line 2: negative length", 0) == 0);
}

TEST_CASE("native format: write then read back, header checked") {
    char *buf = nullptr;
    size_t len = 0;
    std::FILE *f = open_memstream(&buf, &len);
    write_header(f, Format::Native, 64);
    Request a;
    a.arrival_ms = 12.5, a.input_len = 130, a.output_len = 9, a.hash_ids = {4, 5, 6};
    Request b;
    b.arrival_ms = 20, b.input_len = 3, b.output_len = 1;
    write_request(f, Format::Native, a);
    write_request(f, Format::Native, b);
    std::fclose(f);
    std::string t(buf, len);
    std::free(buf);
    CHECK(t == "#speckv-trace v1 block_tokens=64\n12.500 130 9 4,5,6\n20.000 3 1 -\n");
    auto r = text(t);
    CHECK(r->block_tokens() == 64);
    Request q;
    REQUIRE(r->next(&q) == 1);
    CHECK(q.arrival_ms == 12.5);
    CHECK(q.hash_ids == a.hash_ids);
    REQUIRE(r->next(&q) == 1);
    CHECK(q.hash_ids.empty());
    CHECK(r->next(&q) == 0);

    std::string err;
    auto bad = text("#speckv-trace v1 block_tokens=64\n1 130 9 4,5\n", Format::Native);
    CHECK(drain(*bad, &err) == -1);
    CHECK(err.rfind("line 2: hash_ids has 2 ids, input 130 needs 3", 0) == 0);
    auto nohdr = text("1 2 3 -\n", Format::Native);
    CHECK(drain(*nohdr, &err) == -1);
    CHECK(err.rfind("line 1: not a native trace", 0) == 0);
}

TEST_CASE("writers: mooncake and azure output parse back") {
    for (Format fmt : {Format::Mooncake, Format::Azure}) {
        char *buf = nullptr;
        size_t len = 0;
        std::FILE *f = open_memstream(&buf, &len);
        write_header(f, fmt, 512);
        GenOptions g;
        g.count = 50, g.workload = "summarization", g.rate = 3, g.prefix_share = 0.5;
        Generator gen(g);
        Request q;
        std::vector<Request> want;
        while (gen.next(&q)) write_request(f, fmt, q), want.push_back(q);
        std::fclose(f);
        auto r = text(std::string(buf, len));
        std::free(buf);
        for (auto &w : want) {
            REQUIRE(r->next(&q) == 1);
            CHECK(q.input_len == w.input_len);
            CHECK(q.output_len == w.output_len);
            if (fmt == Format::Mooncake) CHECK(q.hash_ids == w.hash_ids);
            CHECK(std::abs(q.arrival_ms - (w.arrival_ms - want[0].arrival_ms)) <= 0.5 + 1e-6);  // mooncake: whole ms
        }
        CHECK(r->next(&q) == 0);
    }
}

// What one parser makes of a text: every request's fields, then the error.
std::string outcome(const std::string &t, JsonParser jp, bool skip) {
    std::string err, out;
    auto r = open_reader_text(t, Format::Mooncake, skip, &err, jp);
    if (!r) return "refused: " + err;
    Request q;
    int rc;
    while ((rc = r->next(&q)) == 1) {
        char b[96];
        std::snprintf(b, sizeof b, "%a %u %u %llu:", q.arrival_ms, q.input_len, q.output_len, static_cast<unsigned long long>(q.line));
        out += b;
        for (uint64_t id : q.hash_ids) out += std::to_string(id) + ",";
        out += "\n";
    }
    return out + (rc < 0 ? "error: " + r->error() : "end") + " skipped " + std::to_string(r->skipped());
}

TEST_CASE("mooncake: simdjson and the hand-written parser read every line the same") {
    if (!simdjson_available()) {
        MESSAGE("built without simdjson: nothing to compare");
        return;
    }
    const char *lines[] = {
        "{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0]}",
        "{\"timestamp\": 2.5e3, \"input_length\": 513, \"output_length\": 0, \"hash_ids\": [7, 9223372036854775807]}",
        "{\"timestamp\": -0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}",
        "{\"timestamp\": -1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}",
        "{\"timestamp\": 1e999, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}",
        "{\"timestamp\": 18446744073709551615, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}",
        "{\"timestamp\": 1, \"input_length\": 9223372036854775808, \"output_length\": 1, \"hash_ids\": [0]}",
        "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [18446744073709551615]}",
        "{\"timest\\u0061mp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}",
        "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0], \"x\": \"\\ud800\"}",
        "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0], \"x\": \"\xff\"}",
        "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]} {}",
        "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0], \"hash_ids\": [1]}",
        "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0], \"x\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
        "[1, 2]",
        "{\"timestamp\": 1, \"input_length\": 1.0, \"output_length\": 1, \"hash_ids\": [0]}",
        "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": {}}",
        "  {\"output_length\": 3, \"hash_ids\": [1, 2], \"input_length\": 600, \"timestamp\": 9, \"y\": null}  ",
    };
    for (bool skip : {false, true})
        for (auto *l : lines) {
            CAPTURE(l);
            std::string t = std::string("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}\n") + l + "\n" +
                            "{\"timestamp\": 1e4, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [3]}\n";
            CHECK(outcome(t, JsonParser::Hand, skip) == outcome(t, JsonParser::Simdjson, skip));
        }
}
