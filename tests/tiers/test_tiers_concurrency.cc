// SPDX-License-Identifier: Apache-2.0
// Threads at once on every tier component (labels tiers + concurrency: the
// TSan run covers it). Failures are counted in atomics inside the threads and
// checked after the join.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "tiers/cold_tier.h"
#include "prefetch/prefetch_ctl.h"
#include "tiers/tier_buffers.h"
#include "pool/tlb.h"
#include "util.h"

using namespace speckv;
using tiers_test::fill_page;
using tiers_test::page_ok;

namespace {
void run_all(std::vector<std::thread> &ts) {
    for (auto &t : ts) t.join();
    ts.clear();
}
}  // namespace

TEST_CASE("tlb: readers never see a mapping older than the last finished invalidation") {
    std::unique_ptr<Tlb> tlb;
    REQUIRE(Tlb::create(256, 0, &tlb) == SPECKV_OK);
    constexpr int kKeys = 64;
    std::atomic<uint64_t> truth[kKeys], done[kKeys];
    for (int i = 0; i < kKeys; i++) truth[i] = 1, done[i] = 1;
    auto key = [](int i) { return TlbKey{uint32_t(i % 2), uint32_t(i % 4), uint64_t(i), 0}; };
    std::atomic<uint64_t> stale{0}, lookups{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> ts;
    for (int w = 0; w < 2; w++)
        ts.emplace_back([&, w] {  // writer w owns the keys of its parity
            std::mt19937 rng(w);
            for (int n = 0; n < 8000; n++) {
                int i = int(rng() % (kKeys / 2)) * 2 + w;
                uint64_t v = truth[i].load() + 1;
                truth[i].store(v);  // the block table changes...
                if (n % 3 == 0) tlb->invalidate_request(uint32_t(i % 2), uint64_t(i));
                else if (n % 3 == 1) tlb->invalidate(key(i));
                else tlb->invalidate_all();
                done[i].store(v);  // ...and from here no lookup may return older
            }
        });
    for (int r = 0; r < 3; r++)
        ts.emplace_back([&, r] {
            std::mt19937 rng(100 + r);
            for (int n = 0; n < 20000 || !stop.load(std::memory_order_relaxed); n++) {  // some reads after the writers, too
                int i = int(rng() % kKeys);
                uint64_t floor = done[i].load();
                TlbValue v;
                bool ok = tlb->translate(key(i), &v, [&](const TlbKey &, TlbValue *out) {
                    *out = {truth[i].load(), uint64_t(i)};
                    return true;
                });
                if (!ok || v.handle < floor || v.page != uint64_t(i)) stale++;
                lookups++;
            }
        });
    ts[0].join();
    ts[1].join();
    stop = true;
    for (size_t i = 2; i < ts.size(); i++) ts[i].join();
    CHECK(stale.load() == 0);
    CHECK(lookups.load() > 0);
    TlbStats s = tlb->stats();
    CHECK(s.hits + s.misses == lookups.load());
}

TEST_CASE("L1: concurrent readers, pins and writers never see torn or stale bytes") {
    constexpr uint32_t kPage = 512;
    std::unique_ptr<HotBuffer> b;
    REQUIRE(HotBuffer::create(16 * kPage, kPage, &b) == SPECKV_OK);
    constexpr int kKeys = 48;
    std::atomic<uint64_t> tag[kKeys];
    for (auto &t : tag) t = 1;
    std::atomic<uint64_t> bad{0}, hits{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> ts;
    for (int w = 0; w < 2; w++)
        ts.emplace_back([&, w] {
            std::mt19937 rng(w);
            unsigned char p[kPage];
            for (int n = 0; n < 12000; n++) {
                int k = int(rng() % (kKeys / 2)) * 2 + w;
                if (n % 7 == 0) {
                    b->invalidate(uint64_t(k));
                    continue;
                }
                uint64_t t = tag[k].load();
                if (n % 5 == 0) t = tag[k].load() + 1;  // the page is rewritten
                fill_page(p, kPage, uint64_t(k), t);
                // Writer 1 stores as the pool's L1 does: skipped when busy.
                w ? (void)b->try_put(uint64_t(k), t, p) : (void)b->put(uint64_t(k), t, p);
                tag[k].store(t);
            }
        });
    for (int r = 0; r < 2; r++)
        ts.emplace_back([&, r] {
            std::mt19937 rng(50 + r);
            unsigned char out[kPage];
            for (int n = 0; n < 20000 || !stop.load(std::memory_order_relaxed); n++) {  // some reads after the writers, too
                int k = int(rng() % kKeys);
                uint64_t t = tag[k].load();
                if (rng() % 4 == 0) {
                    HotBuffer::Pin pin;
                    if (b->pin(uint64_t(k), t, &pin)) {
                        // Held for a while: the writers must leave these bytes alone.
                        auto *d = static_cast<const unsigned char *>(pin.data);
                        if (!page_ok(d, kPage, uint64_t(k), t)) bad++;
                        std::this_thread::yield();
                        if (!page_ok(d, kPage, uint64_t(k), t)) bad++;
                        b->unpin(pin);
                        hits++;
                    }
                } else if (b->get(uint64_t(k), t, 8, 100, out)) {
                    if (!page_ok(out, 100, uint64_t(k), t, 8)) bad++;
                    hits++;
                }
            }
        });
    ts[0].join();
    ts[1].join();
    stop = true;
    ts[2].join();
    ts[3].join();
    CHECK(bad.load() == 0);
    CHECK(hits.load() > 0);
    MESSAGE("try_put found the buffer busy ", b->stats().busy, " times");
}

TEST_CASE("L2: concurrent prefetches, reads and invalidations; every page resolved once") {
    constexpr uint32_t kPage = 512;
    std::unique_ptr<PrefetchBuffer> b;
    REQUIRE(PrefetchBuffer::create(32 * kPage, kPage, &b) == SPECKV_OK);
    std::atomic<uint64_t> resolved{0};
    b->set_resolve([](void *u, uint64_t, uint64_t, bool) { static_cast<std::atomic<uint64_t> *>(u)->fetch_add(1); },
                   &resolved);
    std::atomic<uint64_t> bad{0}, firsts{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> ts;
    ts.emplace_back([&] {
        std::mt19937 rng(1);
        unsigned char p[kPage];
        for (int n = 0; n < 8000; n++) {
            uint64_t k = rng() % 200, owner = k % 8;
            uint32_t g = b->generation(owner);
            if (n % 50 == 0) b->invalidate_request(rng() % 8);
            if (n % 37 == 0) b->invalidate(rng() % 200);
            fill_page(p, kPage, k, 1);
            b->insert(k, 1, owner, g, p);
        }
    });
    for (int r = 0; r < 3; r++)
        ts.emplace_back([&, r] {
            std::mt19937 rng(10 + r);
            unsigned char out[kPage];
            for (int n = 0; n < 20000 || !stop.load(std::memory_order_relaxed); n++) {  // some reads after the writers, too
                uint64_t k = rng() % 200;
                bool first = false;
                if (b->get(k, 1, 0, kPage, out, &first)) {
                    if (!page_ok(out, kPage, k, 1)) bad++;
                    if (first) firsts++;
                }
            }
        });
    ts[0].join();
    stop = true;
    for (size_t i = 1; i < ts.size(); i++) ts[i].join();
    BufferStats s = b->stats();
    CHECK(bad.load() == 0);
    CHECK(s.used == firsts.load());
    CHECK(resolved.load() == s.used + s.wasted);
    CHECK(s.used + s.wasted <= s.inserts);
    CHECK(s.inserts - (s.used + s.wasted) <= b->frames());  // only resident entries are unresolved
}

TEST_CASE("cold tier: batches from several threads") {
    ColdTierOptions o;
    o.path = tiers_test::fresh_path("mt");
    o.capacity = 64 << 20;
    o.queue_depth = 8;
    o.slot_bytes = 32 << 10;
    std::unique_ptr<ColdTier> t;
    REQUIRE_MESSAGE(ColdTier::open(o, &t) == SPECKV_OK, last_error());
    std::atomic<uint64_t> bad{0}, ops{0};
    std::vector<std::thread> ts;
    for (int w = 0; w < 3; w++)
        ts.emplace_back([&, w] {
            std::vector<unsigned char> back(100000);
            for (int n = 0; n < 40; n++) {
                uint64_t base = uint64_t(w) * 1000 + uint64_t(n % 5) * 10;
                std::vector<std::vector<unsigned char>> data;
                std::vector<ColdTier::PutItem> items;
                for (uint64_t i = 0; i < 4; i++) data.push_back(tiers_test::pattern(1000 + 9000 * i, base + i + n));
                for (uint64_t i = 0; i < 4; i++) items.push_back({base + i, data[i].data(), data[i].size()});
                if (t->put(items) != SPECKV_OK) bad++;
                for (uint64_t i = 0; i < 4; i++) {
                    ColdTier::GetItem g{base + i, back.data(), back.size()};
                    if (t->get({&g, 1}) != SPECKV_OK || g.len != data[i].size() ||
                        std::memcmp(back.data(), data[i].data(), g.len) != 0)
                        bad++;
                }
                if (n % 3 == 0) {
                    uint64_t k = base;
                    if (t->drop({&k, 1}) != SPECKV_OK) bad++;
                }
                ops++;
            }
        });
    run_all(ts);
    CHECK(bad.load() == 0);
    CHECK(ops.load() == 120);
}

TEST_CASE("prefetch controller: events, plans and ticks from several threads") {
    std::unique_ptr<PrefetchController> c;
    PrefetchParams pp;
    pp.max_requests = 16;
    pp.tick_ns = 10000;
    REQUIRE(PrefetchController::create(pp, nullptr, &c) == SPECKV_OK);
    std::atomic<uint64_t> resolves{0}, now{1000000};
    std::vector<std::thread> ts;
    for (int w = 0; w < 4; w++)
        ts.emplace_back([&, w] {
            std::mt19937 rng(w);
            PrefetchController::Plan plan;
            for (int n = 0; n < 3000; n++) {
                uint64_t r = rng() % 40;
                uint32_t l = rng() % 8;
                switch (n % 6) {
                    case 0: c->plan(r, l, &plan); break;
                    case 1: c->on_access(r, l, AccessOutcome(rng() % 3), 1 + rng() % 4); break;
                    case 2:
                        c->on_resolved(r, l, rng() % 2, 4096);
                        resolves++;
                        break;
                    case 3: c->on_transfer(4096 * (rng() % 8)); break;
                    case 4: c->tick(now.fetch_add(20000)); break;
                    case 5:
                        if (rng() % 10 == 0) c->on_request_end(r);
                        else c->on_hint(r, l, n);
                        break;
                }
            }
        });
    run_all(ts);
    PrefetchStats s = c->stats();
    CHECK(s.used + s.wasted == resolves.load());
    CHECK(s.requests <= 16);
    CHECK(s.beta >= pp.beta_min);
    CHECK(s.beta <= pp.beta_max);
}

TEST_CASE("L1 -> L2: pages L1 evicts move down while readers read both") {
    constexpr uint32_t kPage = 512;
    std::unique_ptr<HotBuffer> l1;
    std::unique_ptr<PrefetchBuffer> l2;
    REQUIRE(HotBuffer::create(8 * kPage, kPage, &l1) == SPECKV_OK);
    REQUIRE(PrefetchBuffer::create(16 * kPage, kPage, &l2) == SPECKV_OK);
    l1->set_evict([](void *u, uint64_t key, uint64_t tag, const void *data) {
        static_cast<PrefetchBuffer *>(u)->insert_victim(key, tag, data);
    }, l2.get());
    constexpr uint64_t kKeys = 48;
    std::atomic<uint64_t> bad{0}, from_l2{0};
    std::atomic<uint64_t> cur[kKeys];  // each key's latest version stored
    for (auto &c : cur) c.store(1);
    std::atomic<bool> stop{false};
    std::vector<std::thread> ts;
    for (int w = 0; w < 2; w++)
        ts.emplace_back([&, w] {  // writer w owns the keys of its parity; a key's tag is its version
            std::mt19937 rng{unsigned(w)};
            std::vector<uint64_t> ver(kKeys, 1);
            unsigned char page[kPage];
            for (int n = 0; n < 20000; n++) {
                uint64_t k = (rng() % (kKeys / 2)) * 2 + uint64_t(w);
                if (rng() % 4 == 0) ver[k]++;
                fill_page(page, kPage, k, ver[k]);
                l1->try_put(k, ver[k], page, rng() % 2 == 0, true);
                cur[k].store(ver[k], std::memory_order_relaxed);
            }
        });
    for (int r = 0; r < 2; r++)
        ts.emplace_back([&, r] {
            std::mt19937 rng(100u + unsigned(r));
            unsigned char out[kPage];
            for (int n = 0; n < 40000 || !stop.load(std::memory_order_relaxed); n++) {
                const uint64_t k = rng() % kKeys, c = cur[k].load(std::memory_order_relaxed);
                const uint64_t t = c > 1 ? c - rng() % 2 : c;  // the latest version or the one before
                if (l1->get(k, t, 0, kPage, out)) {
                    if (!page_ok(out, kPage, k, t)) bad++;
                } else if (l2->get(k, t, 0, kPage, out)) {
                    from_l2++;
                    if (!page_ok(out, kPage, k, t)) bad++;
                }
            }
        });
    ts[0].join();
    ts[1].join();
    stop = true;
    for (size_t i = 2; i < ts.size(); i++) ts[i].join();
    CHECK(bad.load() == 0);
    BufferStats s = l2->stats();
    CHECK(s.victims + s.victims_busy > 0);
    CHECK(s.used == 0);    // nothing was prefetched
    CHECK(s.wasted == 0);
    CHECK(s.inserts == 0);
    MESSAGE("L2 reads of moved pages: " << from_l2.load());
}
