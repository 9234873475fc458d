// SPDX-License-Identifier: Apache-2.0
// A synthetic continuous-batching decode stream, replayed through the real
// L2 PrefetchBuffer under three policies at the same buffer size:
//   none    every page read is a synchronous fetch;
//   learned the PrefetchController (learned predictor, UCB depth, beta);
//   oracle  knows the trace: fetches the next pages in order, as far ahead as
//           one bank of the buffer holds (so it never evicts a page it needs);
// and, in run_belady(), an ideal L2 of the same size under the oracle of
// DESIGN.md §6: Belady eviction, perfect next access (docs/tiers.md §11).
// Virtual time: reading a page costs 1 unit of compute; the L3->L2 link moves
// one page per `xfer` units after `latency` units, demand and prefetch in one
// FIFO queue (so over-prefetching delays demand fetches, as on a real link).
// Shared by tests/tiers and bench/bench_tiers.cc.
#pragma once
#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "oracle/belady.h"
#include "prefetch/prefetch_ctl.h"
#include "tiers/tier_buffers.h"

namespace speckv::sim {

struct SimConfig {
    uint32_t batch = 8;          // requests running at once
    uint32_t layers = 16;
    uint32_t tokens_per_page = 16;
    uint32_t ctx_min = 64, ctx_max = 256;  // context at arrival (tokens)
    uint32_t len_min = 8, len_max = 48;    // decode steps before a request ends
    uint32_t prefix_pages = 2;             // shared system-prompt pages per request
    uint32_t steps = 200;                  // decode steps simulated
    double xfer = 0.5;                     // link units per page (1 / bandwidth)
    double latency = 12;                   // link latency, units
    size_t l2_pages = 256;                 // L2 size in pages (two banks)
    bool shuffle = false;                  // a new batch order every step (an engine that reorders)
    uint32_t seed = 1;
};

struct UnitAccess {
    uint64_t request;
    uint32_t layer;
    uint32_t pages;
    bool first_step;  // the request's first decode step (prefix pages arrive with it)
};

// The trace: unit accesses in order, layer-major within a step.
inline std::vector<UnitAccess> make_trace(const SimConfig &c) {
    std::mt19937_64 rng(c.seed);
    auto uni = [&](uint32_t lo, uint32_t hi) { return lo + uint32_t(rng() % (hi - lo + 1)); };
    struct Slot {
        uint64_t id;
        uint32_t ctx, left;
        bool fresh;
    };
    std::vector<Slot> slots;
    uint64_t next_id = 1;
    for (uint32_t i = 0; i < c.batch; i++) slots.push_back({next_id++, uni(c.ctx_min, c.ctx_max), uni(c.len_min, c.len_max), true});
    std::vector<UnitAccess> t;
    for (uint32_t s = 0; s < c.steps; s++) {
        if (c.shuffle) std::shuffle(slots.begin(), slots.end(), rng);
        for (uint32_t l = 0; l < c.layers; l++)
            for (auto &sl : slots) t.push_back({sl.id, l, (sl.ctx + c.tokens_per_page - 1) / c.tokens_per_page, sl.fresh});
        for (auto &sl : slots) {
            sl.ctx++;
            sl.fresh = false;
            if (--sl.left == 0) sl = {next_id++, uni(c.ctx_min, c.ctx_max), uni(c.len_min, c.len_max), true};
        }
    }
    return t;
}

inline uint64_t page_key(uint64_t request, uint32_t layer, uint32_t page) {
    return request << 28 | uint64_t(layer) << 16 | page;
}

enum class Policy { kNone, kLearned, kOracle };

struct SimResult {
    uint64_t accesses = 0, l2_hits = 0, late_hits = 0, sync = 0;
    uint64_t prefetched = 0, used = 0;
    double stall = 0, time = 0;
    double beta_min = 1, beta_end = 1, mean_depth = 0;
    double hit_rate() const { return accesses ? double(l2_hits) / double(accesses) : 0; }
    double precision() const { return prefetched ? double(used) / double(prefetched) : 0; }
    double waste() const { return prefetched ? 1.0 - precision() : 0; }
    // Pages over the L3->L2 link (prefetched or fetched on demand) per page read.
    double link_per_read() const { return accesses ? double(prefetched + sync) / double(accesses) : 0; }
};

inline SimResult run(const SimConfig &c, const std::vector<UnitAccess> &trace, Policy policy,
                     PrefetchParams pp = PrefetchParams{}) {
    constexpr uint32_t kPage = 512;
    constexpr double kNsPerUnit = 100;  // one page of attention compute
    std::unique_ptr<PrefetchBuffer> l2;
    PrefetchBuffer::create(c.l2_pages * kPage, kPage, &l2);
    std::unique_ptr<PrefetchController> ctl;
    pp.bandwidth = double(kPage) / (c.xfer * kNsPerUnit * 1e-9);
    pp.tick_ns = uint64_t(200 * kNsPerUnit);
    PrefetchController::create(pp, nullptr, &ctl);
    struct Ctx {
        PrefetchController *ctl;
        uint64_t used = 0;
    } cx{ctl.get()};
    l2->set_resolve(
        [](void *u, uint64_t owner, uint64_t key, bool used) {
            auto *x = static_cast<Ctx *>(u);
            x->ctl->on_resolved(owner, uint32_t(key >> 16) & 0xfff, used, kPage);
            if (used) x->used++;
        },
        &cx);

    SimResult r;
    double now = 0, link_free = 0;
    unsigned char page[kPage] = {};
    unsigned char dst[64];
    struct Flight {
        double arrive;
        uint64_t key, owner;
        uint32_t gen;
    };
    std::deque<Flight> flights;  // FIFO link: arrivals in issue order
    std::unordered_set<uint64_t> in_flight;
    auto land = [&](double t) {
        while (!flights.empty() && flights.front().arrive <= t) {
            Flight f = flights.front();
            flights.pop_front();
            in_flight.erase(f.key);
            l2->insert(f.key, 1, f.owner, f.gen, page);
        }
    };
    auto fetch = [&](double t) {  // one page over the link, issued at t: its arrival
        double start = std::max(t, link_free);
        link_free = start + c.xfer;
        ctl->on_transfer(kPage);
        return link_free + c.latency;
    };
    auto prefetch_unit = [&](uint64_t req, uint32_t layer, uint32_t pages) {
        uint32_t issued = 0;
        for (uint32_t p = 0; p < pages; p++) {
            uint64_t k = page_key(req, layer, p);
            if (in_flight.count(k) || l2->contains(k, 1)) continue;
            flights.push_back({fetch(now), k, req, l2->generation(req)});
            in_flight.insert(k);
            issued++;
        }
        r.prefetched += issued;
        if (issued) ctl->on_issued(req, issued, uint64_t(issued) * kPage);
    };
    // Pages per (request, layer) as the trace will have them: what a real
    // tier manager knows from its block table.
    std::unordered_map<uint64_t, uint32_t> pages_of;
    std::vector<uint64_t> running;
    const size_t step_units = size_t(c.batch) * c.layers;
    std::vector<uint64_t> off(trace.size() + 1, 0);  // first page of each unit, trace-wide
    for (size_t i = 0; i < trace.size(); i++) off[i + 1] = off[i] + trace[i].pages;
    uint64_t og = 0;     // the oracle's next page to issue (trace-wide index)
    size_t ounit = 0;    // the unit holding it
    size_t bank = l2->frames() / 2;
    double depth_sum = 0;
    size_t depth_n = 0;
    PrefetchController::Plan plan;

    for (size_t i = 0; i < trace.size(); i++) {
        const UnitAccess &u = trace[i];
        pages_of[u.request << 8 | u.layer] = u.pages;
        land(now);
        if (policy == Policy::kLearned) {
            // The scheduler at a step boundary: who finished, who joins.
            if (i % step_units == 0) {
                std::vector<uint64_t> now_running;  // in batch order, as the engine reports them
                for (size_t j = i; j < i + c.batch && j < trace.size(); j++) now_running.push_back(trace[j].request);
                auto has = [](const std::vector<uint64_t> &v, uint64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); };
                for (uint64_t r0 : running)
                    if (!has(now_running, r0)) ctl->on_request_end(r0);
                for (size_t j = i; j < i + c.batch && j < trace.size(); j++) {
                    const UnitAccess &a = trace[j];
                    if (has(running, a.request) || !a.first_step || i == 0) continue;
                    std::vector<uint64_t> prefix;
                    for (uint32_t p = 0; p < c.prefix_pages && p < a.pages; p++)
                        for (uint32_t l = 0; l < c.layers; l++) prefix.push_back(page_key(a.request, l, p));
                    ctl->on_new_request(a.request, prefix);
                }
                running = std::move(now_running);
            }
            ctl->on_hint(u.request, u.layer, 0);
            ctl->plan(u.request, u.layer, &plan);
            depth_sum += plan.effective;
            depth_n++;
            for (const PrefetchUnit &pu : plan.units) {
                auto f = pages_of.find(pu.request << 8 | pu.layer);
                // Not seen yet (its first layer): assume the size of this unit.
                prefetch_unit(pu.request, pu.layer, f != pages_of.end() ? f->second : u.pages);
            }
            for (uint64_t k : plan.prefix_blocks) {
                if (in_flight.count(k) || l2->contains(k, 1)) continue;
                uint64_t owner = k >> 28;
                flights.push_back({fetch(now), k, owner, l2->generation(owner)});
                in_flight.insert(k);
                r.prefetched++;
                ctl->on_issued(owner, 1, kPage);
            }
        } else if (policy == Policy::kOracle) {
            // Every future page in trace order, up to one bank past the current
            // unit's start (the bank FIFO keeps each until it is read).
            if (og < off[i + 1]) og = off[i + 1], ounit = i + 1;
            while (ounit < trace.size() && og < off[i] + bank) {
                const UnitAccess &f = trace[ounit];
                uint64_t k = page_key(f.request, f.layer, uint32_t(og - off[ounit]));
                if (!in_flight.count(k) && !l2->contains(k, 1)) {
                    flights.push_back({fetch(now), k, f.request, l2->generation(f.request)});
                    in_flight.insert(k);
                    r.prefetched++;
                }
                if (++og == off[ounit + 1]) ounit++;
            }
        }
        // The unit's reads.
        uint32_t hits = 0, late = 0, misses = 0;
        for (uint32_t p = 0; p < u.pages; p++) {
            uint64_t k = page_key(u.request, u.layer, p);
            r.accesses++;
            land(now);
            bool waited = false;
            if (in_flight.count(k)) {  // late: wait for it rather than fetch again
                waited = true;
                double t = 0;
                for (auto &f : flights)
                    if (f.key == k) t = f.arrive;
                r.stall += t - now;
                now = t;
                land(now);
                r.late_hits++;
            }
            if (policy != Policy::kNone && l2->get(k, 1, 0, sizeof dst, dst)) {
                r.l2_hits++;
                (waited ? late : hits)++;
            } else {
                double t = fetch(now);
                r.stall += t - now;
                now = t;
                r.sync++;
                misses++;
            }
            now += 1;  // compute on the page
        }
        if (policy == Policy::kLearned) {
            if (hits) ctl->on_access(u.request, u.layer, AccessOutcome::kL2Hit, hits);
            if (late) ctl->on_access(u.request, u.layer, AccessOutcome::kL2Late, late);
            if (misses) ctl->on_access(u.request, u.layer, AccessOutcome::kMiss, misses);
            ctl->tick(uint64_t(now * kNsPerUnit));
            r.beta_min = std::min(r.beta_min, ctl->beta());
        }
    }
    r.used = cx.used;
    r.time = now;
    r.beta_end = ctl->beta();
    r.mean_depth = depth_n ? depth_sum / double(depth_n) : 0;
    return r;
}

// The page reads of a trace, in order (what the oracle knows).
inline std::vector<oracle::Event> page_reads(const std::vector<UnitAccess> &trace) {
    std::vector<oracle::Event> ev;
    for (const UnitAccess &u : trace)
        for (uint32_t p = 0; p < u.pages; p++) ev.push_back({page_key(u.request, u.layer, p), false});
    return ev;
}

// The fewest pages any policy must move over the link for this trace with
// an L2 of c.l2_pages frames: Belady's (MIN's) misses. A bound, not a policy.
inline uint64_t min_link_pages(const SimConfig &c, const std::vector<UnitAccess> &trace) {
    return oracle::belady(page_reads(trace), c.l2_pages).misses();
}

// The Belady oracle in the same virtual time, link and L2 size as run():
// it knows every future read. Whenever the link can take a page, it fetches
// the next page that will be read and is neither held nor on its way,
// evicting the held page whose next read is furthest away, provided that
// read comes after the one being fetched for (else it waits: fetching would
// only trade a page needed sooner for one needed later). This is the
// "aggressive" integrated prefetching-and-caching rule of Cao, Felten,
// Karlin and Li (SIGMETRICS 1995): Belady for eviction, perfect next access
// for prefetch. A page it evicts is never one a read before the fetched one
// needs, so nothing it prefetches is evicted unread (precision 1). A read
// whose page is neither held nor on its way (the link fell behind) fetches
// it on demand, as in run(); a page on its way is waited for (a late hit).
// Cao et al. bound this rule's elapsed time within 1 + F/K of the optimum
// (fetch time F, K frames) for a link that moves one page at a time; this
// link is pipelined, so its stall here is what a strong oracle achieves, not
// a proven minimum. It never moves fewer pages than min_link_pages().
inline SimResult run_belady(const SimConfig &c, const std::vector<UnitAccess> &trace) {
    const std::vector<oracle::Event> ev = page_reads(trace);
    const std::vector<uint64_t> next = oracle::next_reads(ev);
    const size_t cap = std::max<size_t>(1, c.l2_pages), n = ev.size();
    std::unordered_map<uint64_t, uint64_t> held;       // page (landed or on its way) -> its next read
    std::set<std::pair<uint64_t, uint64_t>> landed;    // (next read, page): the eviction candidates
    std::unordered_map<uint64_t, double> flying;       // page -> arrival
    std::deque<std::pair<double, uint64_t>> flights;   // FIFO link
    std::unordered_set<uint64_t> unread;               // prefetched, not read yet
    SimResult r;
    double now = 0, link_free = 0;
    auto fetch = [&](double t) {
        double start = std::max(t, link_free);
        link_free = start + c.xfer;
        return link_free + c.latency;
    };
    auto land = [&](double t) {
        while (!flights.empty() && flights.front().first <= t) {
            uint64_t k = flights.front().second;
            flights.pop_front();
            flying.erase(k);
            landed.insert({held[k], k});
        }
    };
    auto evict_after = [&](uint64_t read) {  // frees a frame held by a page next read after `read`
        if (held.size() < cap) return true;
        if (landed.empty() || std::prev(landed.end())->first <= read) return false;
        auto far = std::prev(landed.end());
        unread.erase(far->second);  // never a page still unread (see above); were it one, it counts as not used
        held.erase(far->second);
        landed.erase(far);
        return true;
    };
    size_t ahead = 0;  // the next read to consider prefetching for
    // Keeps the link busy until `horizon`: no read happens before it, so
    // what is held, and when it is read next, cannot change meanwhile.
    auto pump = [&](size_t j, double horizon) {
        for (ahead = std::max(ahead, j); ahead < n && link_free < horizon; ahead++) {
            const uint64_t q = ev[ahead].page;
            if (held.count(q)) continue;  // held or on its way: its next read is at or before `ahead`
            if (!evict_after(ahead)) break;
            double t = fetch(now);
            held[q] = ahead;
            flying[q] = t;
            flights.push_back({t, q});
            unread.insert(q);
            r.prefetched++;
        }
    };
    for (size_t j = 0; j < n; j++) {
        const uint64_t p = ev[j].page;
        land(now);
        pump(j, now + 1);  // up to the next read (one unit of compute)
        r.accesses++;
        if (auto f = flying.find(p); f != flying.end()) {  // late: wait for it, the link busy meanwhile
            const double t = f->second;
            pump(j, t);
            r.stall += t - now;
            now = t;
            land(now);
            r.late_hits++;
        }
        if (held.count(p)) {
            r.l2_hits++;
            r.used += unread.erase(p);
            landed.erase({held[p], p});
            held[p] = next[j];
            landed.insert({next[j], p});
        } else {
            const double t = fetch(now);
            r.sync++;
            if (next[j] != oracle::kNever && evict_after(next[j])) {  // keep it if it beats the furthest page
                held[p] = next[j];
                landed.insert({next[j], p});
            }
            pump(j + 1, t);
            r.stall += t - now;
            now = t;
        }
        now += 1;
    }
    r.time = now;
    return r;
}

}  // namespace speckv::sim
