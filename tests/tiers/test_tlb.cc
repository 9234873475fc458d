// SPDX-License-Identifier: Apache-2.0
// The software TLB: hits, coverage of a page's tokens, every invalidation
// kind, the stale-insert guard, and counters.
#include <doctest/doctest.h>

#include "pool/tlb.h"

using namespace speckv;

TEST_CASE("tlb: bounds") {
    std::unique_ptr<Tlb> t;
    CHECK(Tlb::create(100, 4, &t) == SPECKV_EINVAL);   // not a power of two
    CHECK(Tlb::create(32, 4, &t) == SPECKV_EINVAL);    // too small
    CHECK(Tlb::create(1 << 21, 4, &t) == SPECKV_EINVAL);
    CHECK(Tlb::create(256, 21, &t) == SPECKV_EINVAL);
    CHECK(Tlb::create(256, 4, &t) == SPECKV_OK);
    CHECK(t->entries() == 256);
}

TEST_CASE("tlb: translate, coverage, invalidation") {
    std::unique_ptr<Tlb> t;
    REQUIRE(Tlb::create(256, 4, &t) == SPECKV_OK);  // 16 tokens per entry
    int walks = 0;
    auto walk = [&](const TlbKey &k, TlbValue *v) {
        walks++;
        if (k.request == 99) return false;  // an unknown request: nothing to cache
        *v = {k.request * 1000 + k.layer, k.token / 16 + 7 * k.tenant};
        return true;
    };
    TlbValue v;
    REQUIRE(t->translate({1, 2, 3, 40}, &v, walk));
    CHECK(v.handle == 3002);
    CHECK(v.page == 2 + 7);
    CHECK(walks == 1);
    // Tokens 32..47 share the entry: no walk.
    REQUIRE(t->translate({1, 2, 3, 32}, &v, walk));
    REQUIRE(t->translate({1, 2, 3, 47}, &v, walk));
    CHECK(walks == 1);
    REQUIRE(t->translate({1, 2, 3, 48}, &v, walk));  // next entry
    CHECK(walks == 2);
    // Other tenant / layer / request: separate entries.
    REQUIRE(t->translate({2, 2, 3, 40}, &v, walk));
    CHECK(v.page == 2 + 14);
    REQUIRE(t->translate({1, 3, 3, 40}, &v, walk));
    REQUIRE(t->translate({1, 2, 4, 40}, &v, walk));
    CHECK(walks == 5);
    CHECK_FALSE(t->translate({1, 2, 99, 0}, &v, walk));
    CHECK_FALSE(t->lookup({1, 2, 99, 0}, &v));

    t->invalidate({1, 2, 3, 33});  // any token of the entry
    CHECK_FALSE(t->lookup({1, 2, 3, 40}, &v));
    CHECK(t->lookup({1, 2, 3, 48}, &v));

    t->invalidate_request(1, 3);  // every layer and position of tenant 1, request 3
    CHECK_FALSE(t->lookup({1, 2, 3, 48}, &v));
    CHECK_FALSE(t->lookup({1, 3, 3, 40}, &v));
    CHECK(t->lookup({2, 2, 3, 40}, &v));  // tenant 2's request 3 untouched
    CHECK(t->lookup({1, 2, 4, 40}, &v));

    t->invalidate_all();
    CHECK_FALSE(t->lookup({2, 2, 3, 40}, &v));
    CHECK_FALSE(t->lookup({1, 2, 4, 40}, &v));
    REQUIRE(t->translate({1, 2, 4, 40}, &v, walk));  // refilled after the epoch bump
    CHECK(t->lookup({1, 2, 4, 40}, &v));
    CHECK(v.handle == 4002);
}

TEST_CASE("tlb: an insert that raced with an invalidation is dropped") {
    std::unique_ptr<Tlb> t;
    REQUIRE(Tlb::create(64, 0, &t) == SPECKV_OK);
    uint64_t seen = t->inval_seq();
    t->invalidate_request(0, 5);  // the block was freed while the walk ran
    CHECK_FALSE(t->insert({0, 0, 5, 1}, {1, 1}, seen));
    TlbValue v;
    CHECK_FALSE(t->lookup({0, 0, 5, 1}, &v));
    CHECK(t->insert({0, 0, 5, 1}, {1, 1}, t->inval_seq()));
    CHECK(t->lookup({0, 0, 5, 1}, &v));
    CHECK(t->stats().insert_skips == 1);
}

TEST_CASE("tlb: never wrong when over capacity; counters add up") {
    std::unique_ptr<Tlb> t;
    REQUIRE(Tlb::create(64, 0, &t) == SPECKV_OK);
    for (uint64_t i = 0; i < 1000; i++) t->insert({uint32_t(i % 3), uint32_t(i % 5), i, i * 3}, {i, i + 1}, t->inval_seq());
    int hits = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        TlbValue v;
        if (t->lookup({uint32_t(i % 3), uint32_t(i % 5), i, i * 3}, &v)) {
            hits++;
            CHECK(v.handle == i);
            CHECK(v.page == i + 1);
        }
    }
    CHECK(hits > 0);
    CHECK(hits <= 64);
    TlbStats s = t->stats();
    CHECK(s.hits == uint64_t(hits));
    CHECK(s.misses == uint64_t(1000 - hits));
    CHECK(s.hit_rate() == doctest::Approx(hits / 1000.0));
    CHECK(s.inserts == 1000);
}
