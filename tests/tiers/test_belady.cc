// SPDX-License-Identifier: Apache-2.0
// The Belady references (tools/oracle/belady.h, docs/tiers.md §11): textbook
// MIN counts, an exhaustive search on small traces, Belady >= LRU at every
// capacity, the inclusion (stack) property the two-level oracle relies on,
// and the Belady oracle of the synthetic decode stream (decode_sim.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "decode_sim.h"
#include "oracle/belady.h"

using namespace speckv;
using oracle::Event;

namespace {

std::vector<Event> reads(std::initializer_list<uint64_t> pages) {
    std::vector<Event> ev;
    for (uint64_t p : pages) ev.push_back({p, false});
    return ev;
}

// Random events: `pages` distinct pages, reads with probability 1 - wp,
// pages drawn from a skewed (hot/cold) or a uniform distribution.
std::vector<Event> random_events(std::mt19937_64 &rng, size_t n, uint64_t pages, double wp, bool skewed) {
    std::vector<Event> ev;
    std::uniform_real_distribution<double> u(0, 1);
    for (size_t i = 0; i < n; i++) {
        uint64_t p = skewed ? uint64_t(double(pages) * u(rng) * u(rng)) : rng() % pages;
        ev.push_back({std::min(p, pages - 1), u(rng) < wp});
    }
    return ev;
}

// The most read hits any policy gets with `cap` frames, by trying every
// choice: items are (page, version); at a reference of an item not held the
// policy may store it (evicting any one held item when full) or, with
// `bypass`, not store it. Memoised on (event, held items).
struct Exhaustive {
    std::vector<uint64_t> item;  // per event: page * 1000 + version
    std::vector<bool> is_read;
    size_t cap;
    bool bypass;
    std::map<std::pair<size_t, std::vector<uint64_t>>, int> memo;

    Exhaustive(const std::vector<Event> &ev, size_t c, bool b) : cap(c), bypass(b) {
        std::map<uint64_t, uint64_t> ver;
        for (const Event &e : ev) {
            if (e.write) ver[e.page]++;
            item.push_back(e.page * 1000 + ver[e.page]);
            is_read.push_back(!e.write);
        }
    }
    int best(size_t i, std::vector<uint64_t> held) {
        if (i == item.size()) return 0;
        std::sort(held.begin(), held.end());
        auto key = std::make_pair(i, held);
        if (auto it = memo.find(key); it != memo.end()) return it->second;
        const uint64_t x = item[i];
        int r;
        if (std::find(held.begin(), held.end(), x) != held.end()) {
            r = int(is_read[i]) + best(i + 1, held);
        } else {
            r = -1;
            if (bypass || cap == 0) r = best(i + 1, held);
            if (held.size() < cap) {
                auto h = held;
                h.push_back(x);
                r = std::max(r, best(i + 1, h));
            } else {
                for (size_t v = 0; v < held.size(); v++) {
                    auto h = held;
                    h[v] = x;
                    r = std::max(r, best(i + 1, h));
                }
            }
        }
        memo[key] = r;
        return r;
    }
};

}  // namespace

TEST_CASE("belady: next reads, with writes starting a new version") {
    // R1 R2 W1 R1 R2 R1 W2
    std::vector<Event> ev{{1, false}, {2, false}, {1, true}, {1, false}, {2, false}, {1, false}, {2, true}};
    auto n = oracle::next_reads(ev);
    const uint64_t N = oracle::kNever;
    CHECK(n == std::vector<uint64_t>{N, 4, 3, 5, N, N, N});  // the read of 1 at 0 never sees the write's version
}

TEST_CASE("belady: textbook MIN and LRU counts") {
    // Silberschatz et al., Operating System Concepts, 3 frames: OPT 9 faults, LRU 12 (FIFO 15).
    auto s = reads({7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1});
    CHECK(oracle::belady(s, 3, false).misses() == 9);
    CHECK(oracle::lru(s, 3).misses() == 12);
    // Belady's anomaly string: OPT 7 faults with 3 frames, 6 with 4; LRU 10 and 8.
    auto a = reads({1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5});
    CHECK(oracle::belady(a, 3, false).misses() == 7);
    CHECK(oracle::belady(a, 4, false).misses() == 6);
    CHECK(oracle::lru(a, 3).misses() == 10);
    CHECK(oracle::lru(a, 4).misses() == 8);
    // Enough frames: only the first reference of each page misses.
    CHECK(oracle::belady(s, 6, false).misses() == 6);
    CHECK(oracle::belady(s, 0, true).hits == 0);
}

TEST_CASE("belady: bypass keeps a page that a demand cache would have to drop") {
    // One frame, A B A: storing B costs A's second read; not storing it keeps it.
    auto ev = reads({1, 2, 1});
    CHECK(oracle::belady(ev, 1, false).hits == 0);
    CHECK(oracle::belady(ev, 1, true).hits == 1);
    // A cyclic scan over 4 pages with 3 frames: LRU misses every read, MIN
    // one per turn after the first (no policy does better), either way.
    auto cyc = reads({1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4});
    CHECK(oracle::lru(cyc, 3).hits == 0);
    CHECK(oracle::belady(cyc, 3, false).hits == 6);
    CHECK(oracle::belady(cyc, 3, true).hits == 6);
}

TEST_CASE("belady: a write brings its page in, and the old version is dead") {
    // One frame: R1 R2 W1 R1: the write puts page 1 back (over page 2), so the last read hits.
    std::vector<Event> ev{{1, false}, {2, false}, {1, true}, {1, false}};
    CHECK(oracle::belady(ev, 1, false).hits == 1);
    CHECK(oracle::belady(ev, 1, true).hits == 1);
    CHECK(oracle::lru(ev, 1).hits == 1);
    // R1 W1 R2 R1 with one frame: the old copy of 1 cannot serve the last read; the written one can, if kept.
    std::vector<Event> ev2{{1, false}, {1, true}, {2, false}, {1, false}};
    CHECK(oracle::belady(ev2, 1, true).hits == 1);   // 2 is not stored
    CHECK(oracle::belady(ev2, 1, false).hits == 0);  // 2 must be stored, over 1
}

TEST_CASE("belady: MIN equals an exhaustive search on small traces") {
    std::mt19937_64 rng(11);
    int cases = 0;
    for (int t = 0; t < 300; t++) {
        const size_t n = 4 + rng() % 9;
        const uint64_t pages = 2 + rng() % 4;
        auto ev = random_events(rng, n, pages, t % 3 == 0 ? 0.0 : 0.25, t % 2);
        for (size_t cap = 0; cap <= pages; cap++)
            for (bool bypass : {false, true}) {
                Exhaustive x(ev, cap, bypass);
                INFO("trace " << t << ", cap " << cap << ", bypass " << bypass);
                CHECK(oracle::belady(ev, cap, bypass).hits == uint64_t(x.best(0, {})));
                cases++;
            }
    }
    CHECK(cases > 1000);
}

TEST_CASE("belady: at every capacity, MIN with bypass >= MIN >= LRU, each monotone") {
    std::mt19937_64 rng(5);
    for (int t = 0; t < 60; t++) {
        const uint64_t pages = 8 + rng() % 120;
        auto ev = random_events(rng, 3000, pages, t % 4 == 0 ? 0.0 : 0.15, t % 2);
        const auto next = oracle::next_reads(ev);
        uint64_t prev_b = 0, prev_m = 0, prev_l = 0;
        for (size_t cap = 0; cap <= pages + 1; cap++) {
            auto b = oracle::belady(ev, next, cap, true), m = oracle::belady(ev, next, cap, false);
            auto l = oracle::lru(ev, cap);
            INFO("trace " << t << ", " << pages << " pages, cap " << cap);
            REQUIRE(b.hits >= m.hits);
            REQUIRE(m.hits >= l.hits);
            REQUIRE(b.hits >= prev_b);
            REQUIRE(m.hits >= prev_m);
            REQUIRE(l.hits >= prev_l);
            prev_b = b.hits, prev_m = m.hits, prev_l = l.hits;
        }
        // Frames for every page: all three hit on every read but a version's first.
        CHECK(prev_b == prev_l);
    }
}

TEST_CASE("belady: inclusion, so the two-level oracle's L1 and L2 fit at once") {
    // What MIN keeps in c frames (pages it will still read) is always among
    // what it keeps in c + k: the L1 of full_oracle() is MIN(l1), and L2
    // holds MIN(l1 + l2) less that, never more than l2 pages.
    std::mt19937_64 rng(9);
    for (int t = 0; t < 40; t++) {
        const uint64_t pages = 6 + rng() % 40;
        auto ev = random_events(rng, 2000, pages, t % 3 == 0 ? 0.0 : 0.2, t % 2);
        const auto next = oracle::next_reads(ev);
        for (bool bypass : {true, false})
            for (size_t c = 1; c < 8; c++) {
                oracle::Belady small(c, bypass), big(c + 1 + rng() % 6, bypass);
                std::map<uint64_t, uint64_t> live;  // page -> next read (held pages read again)
                bool ok = true;
                for (size_t i = 0; i < ev.size() && ok; i++) {
                    small.step(ev[i], next[i]);
                    big.step(ev[i], next[i]);
                    live[ev[i].page] = next[i];
                    for (auto [p, nx] : live)
                        if (nx != oracle::kNever && small.contains(p) && !big.contains(p)) ok = false;
                }
                INFO("trace " << t << ", c " << c << ", bypass " << bypass);
                CHECK(ok);
            }
    }
}

TEST_CASE("belady: the full oracle's counts add up") {
    std::mt19937_64 rng(3);
    auto ev = random_events(rng, 5000, 200, 0.2, true);
    auto o = oracle::full_oracle(ev, 16, 48);
    CHECK(o.reads + o.writes == ev.size());
    CHECK(o.l1_hits + o.l2_kept + o.prefetched == o.reads);
    CHECK(o.l1_hits == oracle::belady(ev, 16).hits);
    CHECK(o.prefetched == oracle::belady(ev, 64).misses());
    CHECK(o.hit_rate() == 1.0);
    CHECK(o.precision() == 1.0);
    CHECK(o.sync_reads() == 0);
    CHECK(o.l1_hits >= oracle::lru(ev, 16).hits);
}

TEST_CASE("synthetic decode stream: the Belady oracle beside the others") {
    for (bool tight : {false, true}) {
        sim::SimConfig cfg;
        cfg.steps = 60;
        if (tight) cfg.l2_pages = 64, cfg.xfer = 1.5;  // small L2, link slower than demand
        auto trace = sim::make_trace(cfg);
        auto none = sim::run(cfg, trace, sim::Policy::kNone);
        auto oracle = sim::run(cfg, trace, sim::Policy::kOracle);
        auto bel = sim::run_belady(cfg, trace);
        const uint64_t min_link = sim::min_link_pages(cfg, trace);
        INFO("tight " << tight << ": belady hit " << bel.hit_rate() << " link/read " << bel.link_per_read() << " stall "
                      << bel.stall << "; oracle hit " << oracle.hit_rate() << " link/read " << oracle.link_per_read()
                      << " stall " << oracle.stall << "; min link " << min_link);
        CHECK(bel.accesses == none.accesses);
        CHECK(bel.precision() == 1.0);                   // nothing prefetched is evicted unread
        CHECK(bel.prefetched + bel.sync >= min_link);    // never below MIN's misses
        CHECK(bel.l2_hits + bel.sync == bel.accesses);
        CHECK(bel.stall <= oracle.stall);                // at least as good as the next-pages oracle
        CHECK(bel.prefetched + bel.sync <= oracle.prefetched + oracle.sync);
        if (!tight) CHECK(bel.hit_rate() > 0.99);
        CHECK(bel.stall < 0.1 * none.stall);
    }
}
