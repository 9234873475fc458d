// SPDX-License-Identifier: Apache-2.0
// L1 hot buffer and L2 prefetch buffer, single-threaded semantics.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "oracle/belady.h"
#include "tiers/tier_buffers.h"
#include "util.h"

using namespace speckv;
using tiers_test::fill_page;
using tiers_test::page_ok;

namespace {
constexpr uint32_t kPage = 4096;
std::vector<unsigned char> page(uint64_t key, uint64_t tag) {
    std::vector<unsigned char> p(kPage);
    fill_page(p.data(), kPage, key, tag);
    return p;
}
}  // namespace

TEST_CASE("L1: bounds") {
    std::unique_ptr<HotBuffer> b;
    CHECK(HotBuffer::create(1 << 20, 1000, &b) == SPECKV_EINVAL);
    CHECK(HotBuffer::create(100, 4096, &b) == SPECKV_EINVAL);  // no whole page
    CHECK(HotBuffer::create(1 << 20, 4096, &b) == SPECKV_OK);
    CHECK(b->frames() == 256);
    std::unique_ptr<PrefetchBuffer> p;
    CHECK(PrefetchBuffer::create(4096, 4096, &p) == SPECKV_EINVAL);  // needs two banks
    CHECK(PrefetchBuffer::create(3 * 4096, 4096, &p) == SPECKV_OK);
    CHECK(p->frames() == 2);
}

TEST_CASE("L1: hits, tags, ranges, CLOCK eviction") {
    std::unique_ptr<HotBuffer> b;
    REQUIRE(HotBuffer::create(8 * kPage, kPage, &b) == SPECKV_OK);
    unsigned char out[kPage];
    CHECK_FALSE(b->get(1, 1, 0, kPage, out));
    REQUIRE(b->put(1, 1, page(1, 1).data()));
    REQUIRE(b->get(1, 1, 0, kPage, out));
    CHECK(page_ok(out, kPage, 1, 1));
    REQUIRE(b->get(1, 1, 100, 50, out));
    CHECK(page_ok(out, 50, 1, 1, 100));
    CHECK_FALSE(b->get(1, 1, kPage - 10, 11, out));  // past the page
    CHECK_FALSE(b->get(1, 2, 0, 16, out));           // the page was rewritten: tag 2
    REQUIRE(b->put(1, 2, page(1, 2).data()));
    REQUIRE(b->get(1, 2, 0, kPage, out));
    CHECK(page_ok(out, kPage, 1, 2));
    CHECK_FALSE(b->get(1, 1, 0, 16, out));

    // 8 frames: keep touching key 1, stream 20 others through; 1 survives (CLOCK).
    for (uint64_t k = 100; k < 120; k++) {
        REQUIRE(b->put(k, 1, page(k, 1).data()));
        REQUIRE(b->get(1, 2, 0, 16, out));
    }
    CHECK(b->contains(1, 2));
    int resident = 0;
    for (uint64_t k = 100; k < 120; k++) resident += b->contains(k, 1);
    CHECK(resident == 7);
    for (uint64_t k = 113; k < 120; k++) CHECK(b->contains(k, 1));  // the most recent
    BufferStats s = b->stats();
    CHECK(s.evictions == 13);
    b->invalidate(1);
    CHECK_FALSE(b->contains(1, 2));
    CHECK_FALSE(b->put(kMaxBufferKey + 1, 1, page(1, 1).data()));
    // try_put with nobody else storing is put (the pool's L1 uses it).
    REQUIRE(b->try_put(300, 1, page(300, 1).data()));
    REQUIRE(b->get(300, 1, 0, kPage, out));
    CHECK(page_ok(out, kPage, 300, 1));
    CHECK(b->stats().busy == 0);
    CHECK_FALSE(b->try_put(kMaxBufferKey + 1, 1, page(1, 1).data()));
}

TEST_CASE("L1: pins hold the bytes; all pinned means no room") {
    std::unique_ptr<HotBuffer> b;
    REQUIRE(HotBuffer::create(2 * kPage, kPage, &b) == SPECKV_OK);
    REQUIRE(b->put(1, 1, page(1, 1).data()));
    HotBuffer::Pin p1;
    REQUIRE(b->pin(1, 1, &p1));
    CHECK(page_ok(static_cast<const unsigned char *>(p1.data), kPage, 1, 1));
    // A newer version of the pinned page goes to another frame.
    REQUIRE(b->put(1, 2, page(1, 2).data()));
    CHECK(page_ok(static_cast<const unsigned char *>(p1.data), kPage, 1, 1));
    unsigned char out[kPage];
    REQUIRE(b->get(1, 2, 0, kPage, out));
    CHECK(page_ok(out, kPage, 1, 2));
    HotBuffer::Pin p2;
    REQUIRE(b->pin(1, 2, &p2));
    // Both frames pinned: no room for a third page.
    CHECK_FALSE(b->put(3, 1, page(3, 1).data()));
    CHECK(b->stats().insert_failures == 1);
    b->unpin(p1);
    REQUIRE(b->put(3, 1, page(3, 1).data()));  // takes the frame p1 released
    CHECK(page_ok(static_cast<const unsigned char *>(p2.data), kPage, 1, 2));
    b->invalidate(1);  // pinned readers keep their bytes
    CHECK(page_ok(static_cast<const unsigned char *>(p2.data), kPage, 1, 2));
    CHECK_FALSE(b->pin(1, 2, &p1));
    b->unpin(p2);
}

namespace {
struct Resolved {
    int used = 0, wasted = 0;
    uint64_t last_owner = 0;
};
void on_resolve(void *u, uint64_t owner, uint64_t, bool used) {
    auto *r = static_cast<Resolved *>(u);
    (used ? r->used : r->wasted)++;
    r->last_owner = owner;
}
}  // namespace

TEST_CASE("L2: first reads, consumed frames first, waste accounting") {
    std::unique_ptr<PrefetchBuffer> b;
    REQUIRE(PrefetchBuffer::create(8 * kPage, kPage, &b) == SPECKV_OK);  // two banks of 4
    Resolved r;
    b->set_resolve(on_resolve, &r);
    uint32_t g = b->generation(7);
    for (uint64_t k = 1; k <= 4; k++) REQUIRE(b->insert(k, 1, 7, g, page(k, 1).data()));
    unsigned char out[kPage];
    bool first = false;
    REQUIRE(b->get(2, 1, 0, kPage, out, &first));
    CHECK(first);
    CHECK(page_ok(out, kPage, 2, 1));
    REQUIRE(b->get(2, 1, 0, 8, out, &first));
    CHECK_FALSE(first);  // the second read of an entry is not a second "use"
    CHECK(r.used == 1);
    CHECK(r.last_owner == 7);
    CHECK_FALSE(b->insert(3, 1, 7, g, page(3, 1).data()));  // already there: no second prefetch

    // The empty frames fill; then the one just consumed (key 2, read) goes
    // first, while key 1, prefetched and not read yet, stays.
    for (uint64_t k = 5; k <= 8; k++) REQUIRE(b->insert(k, 1, 7, g, page(k, 1).data()));
    CHECK(b->contains(1, 1));
    REQUIRE(b->insert(9, 1, 7, g, page(9, 1).data()));
    CHECK(b->contains(1, 1));
    CHECK_FALSE(b->contains(2, 1));
    CHECK(r.wasted == 0);  // key 2 was read: already counted used
    // Nothing consumed left: CLOCK. The hand visited key 1 at the last pick
    // (it was stored since: a second chance) and finds it unread now.
    REQUIRE(b->insert(10, 1, 7, g, page(10, 1).data()));
    CHECK_FALSE(b->contains(1, 1));
    CHECK(r.wasted == 1);  // key 1, never read
    BufferStats s = b->stats();
    CHECK(s.flips == 2);  // the hand went round both banks once looking for key 10's frame
    CHECK(s.used == 1);
    CHECK(s.wasted == 1);
    CHECK(s.inserts == 10);
    CHECK(s.bytes_wasted == kPage);
    CHECK(s.precision() == doctest::Approx(0.5));
    for (uint64_t k = 3; k <= 10; k++) CHECK(b->contains(k, 1));
}

TEST_CASE("L2: lazy invalidation by request generation") {
    std::unique_ptr<PrefetchBuffer> b;
    REQUIRE(PrefetchBuffer::create(8 * kPage, kPage, &b) == SPECKV_OK);
    Resolved r;
    b->set_resolve(on_resolve, &r);
    uint32_t g7 = b->generation(7), g8 = b->generation(8);
    REQUIRE(b->insert(1, 1, 7, g7, page(1, 1).data()));
    REQUIRE(b->insert(2, 1, 8, g8, page(2, 1).data()));
    // A prefetch issued for request 7, then 7's prediction turns out wrong.
    uint32_t issued_gen = b->generation(7);
    b->invalidate_request(7);
    unsigned char out[kPage];
    CHECK_FALSE(b->get(1, 1, 0, 16, out));  // stale: a miss, not wrong bytes
    CHECK(b->stats().stale == 1);
    REQUIRE(b->get(2, 1, 0, 16, out));       // request 8 untouched
    CHECK_FALSE(b->insert(3, 1, 7, issued_gen, page(3, 1).data()));  // dead on arrival
    CHECK(r.wasted == 1);
    // The stale entry is resolved as wasted when its frame is reused.
    for (uint64_t k = 10; k < 18; k++) REQUIRE(b->insert(k, 1, 9, b->generation(9), page(k, 1).data()));
    // 10, 11 fill bank 0; 12..15 bank 1; 16, 17 reuse frames 0 and 1: key 1
    // (stale, unread) is wasted, key 2 (read) was already counted used.
    CHECK(r.wasted == 2);  // the dead-on-arrival one and key 1
    CHECK(r.used == 1);
    BufferStats s = b->stats();
    CHECK(s.used + s.wasted + 8 == s.inserts);  // 10..17 are still unresolved
    // A fresh prefetch under the new generation works again.
    REQUIRE(b->insert(1, 1, 7, b->generation(7), page(1, 1).data()));
    REQUIRE(b->get(1, 1, 0, 16, out));
    b->invalidate(1);
    CHECK_FALSE(b->contains(1, 1));
}

TEST_CASE("L2: fill in place, and an abandoned fill") {
    std::unique_ptr<PrefetchBuffer> b;
    REQUIRE(PrefetchBuffer::create(4 * kPage, kPage, &b) == SPECKV_OK);
    auto fill = [](void *u, void *dst) {
        fill_page(static_cast<unsigned char *>(dst), kPage, *static_cast<uint64_t *>(u), 3);
        return true;
    };
    uint64_t key = 42;
    REQUIRE(b->insert_with(42, 3, 1, b->generation(1), fill, &key));
    unsigned char out[kPage];
    REQUIRE(b->get(42, 3, 0, kPage, out));
    CHECK(page_ok(out, kPage, 42, 3));
    CHECK_FALSE(b->insert_with(43, 3, 1, b->generation(1), [](void *, void *) { return false; }, nullptr));
    CHECK_FALSE(b->contains(43, 3));
    CHECK(b->stats().insert_failures == 1);
}

TEST_CASE("L1: the index survives many evictions (tombstone rebuilds)") {
    std::unique_ptr<HotBuffer> b;
    REQUIRE(HotBuffer::create(16 * 512, 512, &b) == SPECKV_OK);
    std::vector<unsigned char> p(512);
    unsigned char out[512];
    for (uint64_t k = 0; k < 5000; k++) {
        fill_page(p.data(), 512, k, 1);
        REQUIRE(b->put(k, 1, p.data()));
        REQUIRE(b->get(k, 1, 0, 512, out));
        REQUIRE(page_ok(out, 512, k, 1));
    }
    int resident = 0;
    for (uint64_t k = 0; k < 5000; k++) resident += b->contains(k, 1);
    CHECK(resident == 16);
    CHECK(b->contains(4999, 1));
}

namespace {
// Reads `cycles` rounds of keys [0, n) in order through an L1 of `frames`,
// storing each miss as a read does (consumed); returns the hits.
uint64_t l1_cyclic_hits(size_t frames, uint64_t n, int cycles, speckv::oracle::Trace *t) {
    std::unique_ptr<HotBuffer> b;
    REQUIRE(HotBuffer::create(frames * 512, 512, &b) == SPECKV_OK);
    std::vector<unsigned char> p(512);
    unsigned char out[512];
    uint64_t hits = 0;
    for (int c = 0; c < cycles; c++)
        for (uint64_t k = 0; k < n; k++) {
            if (t) t->read(k);
            if (b->get(k, 1, 0, 512, out)) {
                REQUIRE(page_ok(out, 512, k, 1));
                hits++;
                continue;
            }
            fill_page(p.data(), 512, k, 1);
            REQUIRE(b->put(k, 1, p.data(), /*consumed=*/true));
        }
    return hits;
}
}  // namespace

TEST_CASE("L1: a cyclic scan longer than the buffer keeps a fixed part of it, as MIN does") {
    // The decode pattern: every step reads the same pages in the same order.
    // CLOCK or LRU would hit nothing here.
    for (auto [frames, n] : {std::pair<size_t, uint64_t>{16, 24}, {64, 300}, {64, 96}}) {
        speckv::oracle::Trace t;
        const uint64_t hits = l1_cyclic_hits(frames, n, 40, &t);
        const uint64_t min = speckv::oracle::belady(t.events(), frames).hits;
        const uint64_t lru = speckv::oracle::lru(t.events(), frames).hits;
        INFO(frames << " frames, cycle " << n << ": hits " << hits << ", MIN " << min << ", LRU " << lru);
        CHECK(lru == 0);
        CHECK(hits >= min * 8 / 10);
    }
}

TEST_CASE("L2: a cyclic scan longer than the buffer: fetches near MIN's misses") {
    for (auto [frames, n] : {std::pair<size_t, uint64_t>{16, 24}, {256, 384}, {256, 300}}) {
        std::unique_ptr<PrefetchBuffer> b;
        REQUIRE(PrefetchBuffer::create(frames * 512, 512, &b) == SPECKV_OK);
        std::vector<unsigned char> p(512);
        unsigned char out[512];
        speckv::oracle::Trace t;
        uint64_t fetched = 0;
        for (int c = 0; c < 40; c++)
            for (uint64_t k = 0; k < n; k++) {
                t.read(k);
                // Prefetched just ahead of its read, as the pool does for a unit.
                if (!b->contains(k, 1)) {
                    fill_page(p.data(), 512, k, 1);
                    REQUIRE(b->insert(k, 1, 1, b->generation(1), p.data()));
                    fetched++;
                }
                REQUIRE(b->get(k, 1, 0, 512, out));
                REQUIRE(page_ok(out, 512, k, 1));
            }
        const uint64_t min = speckv::oracle::belady(t.events(), frames, false).misses();
        INFO(frames << " frames, cycle " << n << ": fetched " << fetched << ", MIN's misses " << min);
        CHECK(fetched <= min * 13 / 10);
        CHECK(b->stats().wasted == 0);
    }
}

TEST_CASE("L1 -> L2: an evicted page moves down, counted as no prefetch") {
    std::unique_ptr<HotBuffer> l1;
    std::unique_ptr<PrefetchBuffer> l2;
    REQUIRE(HotBuffer::create(2 * kPage, kPage, &l1) == SPECKV_OK);
    REQUIRE(PrefetchBuffer::create(4 * kPage, kPage, &l2) == SPECKV_OK);
    Resolved r;
    l2->set_resolve(on_resolve, &r);
    l1->set_evict([](void *u, uint64_t key, uint64_t tag, const void *data) {
        static_cast<PrefetchBuffer *>(u)->insert_victim(key, tag, data);
    }, l2.get());
    // Two frames; each put evicts the newest consumed frame. Key 9 (stored
    // without demote) is dropped, key 3 (with) moves down into L2.
    REQUIRE(l1->put(1, 5, page(1, 5).data(), true, true));
    REQUIRE(l1->put(9, 5, page(9, 5).data(), true));
    REQUIRE(l1->put(3, 5, page(3, 5).data(), true, true));
    CHECK_FALSE(l1->contains(9, 5));
    CHECK_FALSE(l2->contains(9, 5));
    REQUIRE(l1->put(2, 5, page(2, 5).data(), true, true));
    CHECK(l1->contains(1, 5));
    CHECK(l1->contains(2, 5));
    CHECK_FALSE(l1->contains(3, 5));
    REQUIRE(l2->contains(3, 5));
    unsigned char out[kPage];
    bool first = true;
    REQUIRE(l2->get(3, 5, 0, kPage, out, &first));
    CHECK(page_ok(out, kPage, 3, 5));  // the bytes L1 held
    CHECK_FALSE(first);                 // not a prefetch's first read
    CHECK_FALSE(l2->get(3, 6, 0, 8, out));  // another version misses
    // Already there with this tag: no second copy.
    CHECK(l2->insert_victim(3, 5, page(3, 5).data()));
    BufferStats s = l2->stats();
    CHECK(s.victims == 1);
    CHECK(s.inserts == 0);
    CHECK(s.used == 0);
    // Retired from L2 unread by a prefetcher: no waste either. A request's
    // invalidation does not reach it; invalidating the key does.
    for (uint64_t k = 10; k < 14; k++) REQUIRE(l2->insert(k, 1, 7, l2->generation(7), page(k, 1).data()));
    l2->invalidate_request(7);
    CHECK(r.used == 0);
    REQUIRE(l2->insert_victim(20, 1, page(20, 1).data()));
    l2->invalidate_request(~0ull - 1);
    CHECK(l2->contains(20, 1));
    l2->invalidate(20);
    CHECK_FALSE(l2->contains(20, 1));
    CHECK(l2->stats().victims == 2);
    CHECK(r.wasted == l2->stats().wasted);
    // A victim never displaces a prefetch nobody has read yet: with every
    // frame holding one, it is dropped and counted, and the prefetches stay.
    for (uint64_t k = 30; k < 34; k++) REQUIRE(l2->insert(k, 1, 8, l2->generation(8), page(k, 1).data()));
    CHECK_FALSE(l2->insert_victim(40, 1, page(40, 1).data()));
    CHECK(l2->stats().victims_dropped == 1);
    for (uint64_t k = 30; k < 34; k++) CHECK(l2->contains(k, 1));
    // Once one is read (consumed), its frame takes the next victim.
    REQUIRE(l2->get(31, 1, 0, 8, out));
    CHECK(l2->insert_victim(40, 1, page(40, 1).data()));
    CHECK(l2->contains(40, 1));
    CHECK_FALSE(l2->contains(31, 1));
    for (uint64_t k : {30, 32, 33}) CHECK(l2->contains(k, 1));
}
