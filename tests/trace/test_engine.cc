// SPDX-License-Identifier: Apache-2.0
// The engine model over a real pool: determinism, sanity orderings of the
// systems, prefix reuse through the library, capacity limits, real-byte mode.
#include <doctest/doctest.h>
#include <sys/resource.h>

#include <cstdio>
#include <map>

#include "gen_trace.h"
#include "trace.h"

using namespace speckv_trace;

namespace {


EngineOptions opts(const char *model, const char *gpu, const char *link) {
    EngineOptions o;
    o.model = *find_model(model);
    o.gpu = *find_gpu(gpu);
    o.link = *find_link(link);
    o.host_link = *find_link("pcie-host");
    return o;
}

Result run(const std::string &trace, System s, EngineOptions o) {
    std::string err;
    auto rd = open_reader_text(trace, Format::Auto, false, &err);
    REQUIRE(rd);
    o.block_tokens = rd->block_tokens();
    Result r;
    int rc = replay(*rd, s, o, &r, &err);
    REQUIRE_MESSAGE(rc == 0, err);
    return r;
}

std::map<std::string, Result> run_all(const std::string &trace, const EngineOptions &o) {
    std::map<std::string, Result> m;
    for (System s : all_systems()) m[system_name(s)] = run(trace, s, o);
    return m;
}

}  // namespace

TEST_CASE("engine: deterministic, and every request completes") {
    GenOptions g;
    g.workload = "summarization", g.count = 300, g.rate = 20, g.block_tokens = 64, g.prefix_share = 0.5;
    std::string t = make_trace(g);
    auto o = opts("llama-2-13b", "a100-40g", "cxl-direct");
    // cxl_speckv's step time comes from its library prefetcher, a background
    // thread on the wall clock: not deterministic, so not in this list. The
    // oracle's is (every page prefetched, whatever the library did).
    for (System s : {System::GpuOnly, System::CxlNoSpec, System::Oracle}) {
        Result a = run(t, s, o), b = run(t, s, o);
        CHECK(a.requests == 300);
        CHECK(a.output_tokens == b.output_tokens);
        CHECK(a.makespan_s == b.makespan_s);
        CHECK(a.ttft_p99_ms == b.ttft_p99_ms);
        CHECK(a.bytes_link == b.bytes_link);
        CHECK(a.pool_allocs == b.pool_allocs);
        // Everything but the library prefetcher's own counters (wall-clock, background thread).
        auto modelled = [&](const Result &r) {
            std::string j = to_json({r}, o, "x");
            size_t p = j.find("\"l1_hits\"");
            return j.substr(0, p);
        };
        CHECK(modelled(a) == modelled(b));
    }
}

TEST_CASE("engine: sanity orderings under KV pressure (long prompts, small GPU)") {
    GenOptions g;
    g.workload = "summarization", g.count = 400, g.rate = 50, g.block_tokens = 64, g.prefix_share = 0.6, g.prefixes = 4;
    std::string t = make_trace(g);
    auto o = opts("llama-2-13b", "a100-40g", "cxl-direct");
    auto m = run_all(t, o);
    for (auto &[n, r] : m) {
        CAPTURE(n);
        CHECK(r.requests == 400);
        CHECK(r.throughput_tps > 0);
        CHECK(r.ttft_p50_ms <= r.ttft_p99_ms);
        CHECK(r.tpot_p50_ms <= r.tpot_p99_ms);
        CHECK(r.max_batch <= o.max_batch);
    }
    // Without an offload tier nothing crosses a link.
    CHECK(m["gpu_only"].bytes_link == 0);
    CHECK(m["gpu_only"].prefetch_hit_rate < 0);
    // The oracle is an upper bound at the same capacity (every exact offload
    // system; test_real_traces.cc asserts it on the bundled traces, gpu_only
    // too where the HBM room is the same). Here gpu_only has more HBM for KV
    // (no 1 GiB per GPU staging buffer) and runs a larger batch: it is faster.
    for (const char *n : {"host_offload", "cxl_nospec", "cxl_compress", "cxl_speckv"}) {
        CAPTURE(std::string(n));
        CHECK(m["oracle"].throughput_tps >= m[n].throughput_tps);
        CHECK(m["oracle"].makespan_s <= m[n].makespan_s);
    }
    CHECK(m["oracle"].prefetch_hit_rate >= m["cxl_speckv"].prefetch_hit_rate);
    CHECK(m["oracle"].waste <= m["cxl_speckv"].waste);
    CHECK(m["oracle"].prefetch_hit_rate > 0.5);
    // Prefetching hides link time that the synchronous systems pay; the
    // library's prefetcher (cxl_speckv) found some of its pages in L2.
    CHECK(m["oracle"].latency_hidden > 0);
    CHECK(m["host_offload"].latency_hidden > 0);  // FlexGen-style overlap
    CHECK(m["cxl_nospec"].latency_hidden == 0);
    CHECK(m["cxl_compress"].throughput_tps >= m["cxl_nospec"].throughput_tps);
    CHECK(m["cxl_speckv"].prefetch_hit_rate > 0);
    CHECK(m["cxl_nospec"].prefetch_hit_rate == 0);
    // More capacity, more of the shared prefixes kept: more prefix hits.
    CHECK(m["cxl_speckv"].prefix_hit_rate >= m["gpu_only"].prefix_hit_rate);
    CHECK(m["gpu_only"].prefix_hit_rate > 0);
    // The pool adds capacity; compression multiplies the CXL part.
    CHECK(m["cxl_nospec"].tier_capacity > 0);
    CHECK(m["cxl_speckv"].tier_capacity == doctest::Approx(m["cxl_nospec"].tier_capacity * o.compression));
    CHECK(m["gpu_only"].tier_capacity == 0);
    // Only gpu_only evicts cached prefixes here (HBM is small); the pooled systems keep them all.
    CHECK(m["gpu_only"].pool_evictions > 0);
    CHECK(m["cxl_speckv"].pool_evictions == 0);
}

TEST_CASE("engine: prefix reuse goes through the library's sharing API") {
    GenOptions g;
    g.workload = "qa", g.count = 200, g.rate = 5, g.block_tokens = 64, g.prefix_share = 1.0, g.prefixes = 2,
    g.prefix_tokens = 512;
    std::string t = make_trace(g);
    Result r = run(t, System::CxlSpecKV, opts("llama-3-8b", "h100-80g", "cxl-pooled"));
    REQUIRE(r.sharing);
    // 8 shared blocks per request; only the first request of each prefix computes them.
    CHECK(r.pool_lookups > 0);
    CHECK(r.pool_lookup_hits >= 190 * 8);
    CHECK(r.prefix_hit_rate > 0.5);
}

TEST_CASE("engine: a model that does not fit, and real-byte mode limits, are clear errors") {
    GenOptions g;
    g.count = 5;
    std::string t = make_trace(g);
    auto o = opts("llama-3.1-405b", "a100-40g", "cxl-direct");
    o.gpus = 1;
    std::string err;
    auto rd = open_reader_text(t, Format::Auto, false, &err);
    Result r;
    CHECK(replay(*rd, System::GpuOnly, o, &r, &err) == -1);
    CHECK(err.find("does not fit") != std::string::npos);
    auto o2 = opts("llama-2-70b", "a100-80g", "cxl-direct");
    o2.real_bytes = true;
    auto rd2 = open_reader_text(t, Format::Auto, false, &err);
    CHECK(replay(*rd2, System::CxlSpecKV, o2, &r, &err) == -1);
    CHECK(err.find("real-byte mode is for small scale") != std::string::npos);
}

TEST_CASE("engine: real-byte mode at small scale (stories260k) reads and writes payloads") {
    GenOptions g;
    g.workload = "chat", g.count = 60, g.rate = 100, g.block_tokens = 64, g.prefix_share = 0.5;
    std::string t = make_trace(g);
    auto o = opts("stories260k", "a100-40g", "cxl-direct");
    o.real_bytes = true;
    o.pool_bytes = 64e6;
    o.host_bytes = 64e6;
    o.hbm_kv_bytes = 4e6;  // some KV outside HBM: the steps read it from the pool
    Result meta, real;
    {
        EngineOptions om = o;
        om.real_bytes = false;
        meta = run(t, System::CxlSpecKV, om);
    }
    real = run(t, System::CxlSpecKV, o);
    CHECK(real.requests == 60);
    CHECK(real.pool_reads > 0);
    // The same modelled time either way: only the stand-in blocks differ.
    CHECK(real.makespan_s == meta.makespan_s);
    CHECK(real.prefix_hit_rate == meta.prefix_hit_rate);
    // A compressing system's payload pages really went through the codec
    // (paper by default); a system without compression stores them in clear.
    CHECK(real.lib_codec_pages > 0);
    CHECK(real.lib_codec_stored_bytes < real.lib_codec_raw_bytes);
    CHECK(real.lib_codec_stored_bytes * 3 > real.lib_codec_raw_bytes);  // ~2x for paper on FP16
    Result plain = run(t, System::CxlNoSpec, o);
    CHECK(plain.lib_codec_pages == 0);
    CHECK(plain.makespan_s > 0);
    EngineOptions oi = o;
    oi.real_codec = "int8";
    Result i8 = run(t, System::CxlSpecKV, oi);
    CHECK(i8.lib_codec_pages > 0);
    CHECK(i8.makespan_s == real.makespan_s);  // the modelled time does not depend on the preset
    EngineOptions ob = o;
    ob.real_codec = "zstd";
    std::string err;
    auto rd = open_reader_text(t, Format::Auto, false, &err);
    Result bad;
    CHECK(replay(*rd, System::CxlSpecKV, ob, &bad, &err) == -1);
    CHECK(err.find("codec preset 'zstd'") != std::string::npos);
}

TEST_CASE("engine: a bad line stops the replay with its line number, or is skipped") {
    std::string t = "#speckv-trace v1 block_tokens=64\n0 100 10 0,1\n5 100 10 0,2\n4 100 10 0,3\n9 100 10 0,4\n";
    auto o = opts("llama-3-8b", "a100-80g", "cxl-direct");
    std::string err;
    auto rd = open_reader_text(t, Format::Auto, false, &err);
    Result r;
    CHECK(replay(*rd, System::CxlSpecKV, o, &r, &err) == -1);
    CHECK(err.rfind("line 4: timestamp goes back", 0) == 0);
    auto rd2 = open_reader_text(t, Format::Auto, true, &err);
    REQUIRE(replay(*rd2, System::CxlSpecKV, o, &r, &err) == 0);
    CHECK(r.requests == 3);
    CHECK(r.skipped == 1);
}

namespace {
// Streams a generator as a trace: nothing is ever materialised.
class GenReader : public Reader {
  public:
    explicit GenReader(const GenOptions &g) : g_(g) { block_tokens_ = g.block_tokens; }
    int next(Request *r) override { return g_.next(r) ? 1 : 0; }

  private:
    Generator g_;
};
long max_rss_kib() {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}
}  // namespace

TEST_CASE("engine: 100,000 requests replay in bounded memory (streamed, histograms)") {
    GenOptions g;
    g.workload = "qa", g.count = 100000, g.rate = 200, g.block_tokens = 64, g.prefix_share = 0.5;
    GenReader rd(g);
    auto o = opts("llama-3-8b", "h100-80g", "cxl-direct");
    o.block_tokens = 64;
    long before = max_rss_kib();
    Result r;
    std::string err;
    // cxl_compress: the engine's own memory (cxl_speckv's library
    // prefetcher grows by ~1 GB over this run, issue 22's report).
    REQUIRE_MESSAGE(replay(rd, System::CxlCompress, o, &r, &err) == 0, err);
    CHECK(r.requests == 100000);
    CHECK(r.ttft_p99_ms >= r.ttft_p50_ms);
    // The pool's metadata and the running batch, not the trace: well under
    // 100 MiB more (ASan's shadow memory and free-quarantine (256 MiB by
    // default) add to what the same allocations cost: 1.9x measured, so
    // the bound is scaled, not dropped).
#if defined(__SANITIZE_ADDRESS__)
    constexpr long kBoundKib = 400 * 1024;
#else
    constexpr long kBoundKib = 100 * 1024;
#endif
    CHECK(max_rss_kib() - before < kBoundKib);
}

TEST_CASE("engine: layer groups give the library's prefetcher layer-ahead units to fetch") {
    GenOptions g;
    g.workload = "chat", g.count = 120, g.rate = 20, g.block_tokens = 64, g.prefix_share = 0.5, g.seed = 7;
    std::string t = make_trace(g);
    auto o = opts("llama-2-13b", "a100-40g", "cxl-direct");
    o.hbm_kv_bytes = 2e9;  // KV pressure: most of the KV sits in the offload tier
    o.layer_groups = 4;
    Result a = run(t, System::CxlSpecKV, o), b = run(t, System::CxlSpecKV, o);
    CHECK(a.requests == 120);
    CHECK(a.layer_groups == 4);
    // The library's prefetcher fetched pages and reads found them in L2. On
    // the replay's virtual clock (the default: each hint carried out when it
    // is given) two runs are the same, figures and times.
    CHECK(a.lib_prefetch_pages > 0);
    CHECK(a.lib_l2_hits > 0);
    CHECK(a.lib_hit_rate > 0);
    CHECK(a.lib_precision >= 0);
    CHECK(b.requests == 120);
    CHECK(a.lib_prefetch_pages == b.lib_prefetch_pages);
    CHECK(a.lib_l2_hits == b.lib_l2_hits);
    CHECK(a.lib_sync_reads == b.lib_sync_reads);
    CHECK(a.lib_prefetch_used == b.lib_prefetch_used);
    CHECK(a.prefetch_hit_rate == b.prefetch_hit_rate);
    CHECK(a.throughput_tps == b.throughput_tps);
    // The oracle's time bounds the learned policy's. (Its pool runs the
    // hinted policy, one unit ahead: not a bound on the L2 hit rate, since
    // L2 also keeps the blocks outside HBM that every step reads again, and
    // a deeper plan keeps more of them.)
    Result orc = run(t, System::Oracle, o);
    MESSAGE("virtual clock: lib hit rate ", a.lib_hit_rate, " (oracle's pool ", orc.lib_hit_rate, "), precision ",
            a.lib_precision, ", waste ", a.lib_waste, "; on time ", a.prefetch_hit_rate, " (oracle ", orc.prefetch_hit_rate,
            ")");
    CHECK(orc.lib_hit_rate > 0.5);
    CHECK(orc.prefetch_hit_rate >= a.prefetch_hit_rate);
    CHECK(orc.throughput_tps >= a.throughput_tps * 0.999);
    // The prefetch thread on the wall clock: only > 0 is asserted.
    EngineOptions w = o;
    w.prefetch_virtual = false;
    Result wall = run(t, System::CxlSpecKV, w);
    CHECK(wall.requests == 120);
    CHECK(wall.lib_prefetch_pages > 0);
    // Grouping changes the pool's granularity: G pool blocks per KV block.
    // (Times are not compared: the library's prefetches decide them.)
    o.layer_groups = 1;
    Result one = run(t, System::CxlSpecKV, o);
    CHECK(one.requests == 120);
    CHECK(a.pool_allocs == 4 * one.pool_allocs);
}

// --pace: the replay lets real time pass in proportion to each (sequence,
// group) unit's modelled GPU time, so the library's prefetch thread gets the
// time an engine would give it. A stream where the unpaced replay leaves the
// prefetcher hopelessly behind (long contexts, no shared prefixes, an L2 far
// smaller than a step's reads): paced, its hit rate is far higher. Measured
// on the shared, loaded 2-vCPU VM (docs/notes/2026-12-04-evaluation-earlier-stages.md):
// release, 12 runs,
// unpaced 4.9-43.4 %, paced (0.1, yield) 87.9-94.0 %, 3.5-7.2 s; ASan, 3 runs,
// 4.8-5.5 % vs 90.9-93.6 %, 6-7 s. How far behind the unpaced replay leaves
// the prefetch thread depends on whether that thread gets a core of its own:
// on an idle 2-vCPU machine (2026-12-01, AMD EPYC) unpaced reached 52-56 %
// (release, 9 runs; paced 80-97 %) and 62-71 % (ASan, 3 runs; paced 82-95 %),
// smallest gaps 0.26 and 0.20. So the assertion asks a gap of 0.1 and > 0.7
// paced. Without pacing's effect (paced == unpaced) it fails. (The assertions
// below changed when L1's victims began to move into L2: see there.)
// The model's numbers are the same with and without pacing.
TEST_CASE("engine: pacing gives the library's prefetcher the modelled compute time") {
    GenOptions g;
    g.workload = "summarization", g.count = 40, g.rate = 50, g.block_tokens = 64, g.seed = 3;
    std::string t = make_trace(g);
    auto o = opts("llama-2-13b", "a100-40g", "cxl-direct");
    o.hbm_kv_bytes = 2e9;                      // most of the KV in the offload tier
    o.prefetch_buffer_bytes = 0.25 * (1 << 30);  // L2: ~160 group blocks, a step reads thousands
    o.layer_groups = 4;
    o.prefetch_virtual = false;  // the prefetch thread, racing the replay on the wall clock
    Result plain = run(t, System::CxlSpecKV, o);
    EngineOptions op = o;
    // R scales the time the library gets per unit; a sanitizer build runs the
    // library ~5x slower, so it gets 5x the pace (measured under ASan: R = 0.1
    // gives 14-27 % paced, R = 0.5 gives 95 %; release at 0.1: 95-96 %).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    op.pace = 0.5;
#else
    op.pace = 0.1;
#endif
    op.pace_wait = PaceWait::Yield;
    Result paced = run(t, System::CxlSpecKV, op);
    MESSAGE("lib hit rate unpaced ", plain.lib_hit_rate, ", paced ", paced.lib_hit_rate, " (", paced.wall_s, " s, waited ",
            paced.pace_wait_s, " s of ", paced.pace_budget_s, " s budget); sync reads ", plain.lib_sync_reads, " / ",
            paced.lib_sync_reads, ", prefetches used ", plain.lib_prefetch_used, " / ", paced.lib_prefetch_used,
            ", precision ", plain.lib_precision, " / ", paced.lib_precision, ", replay prefetch hit rate ",
            plain.prefetch_hit_rate, " / ", paced.prefetch_hit_rate, ", stall ", plain.stall_s, " / ", paced.stall_s);
    CHECK(plain.pace_units == 0);
    CHECK(paced.pace_units > 0);
    CHECK(paced.pace_budget_s > 0);
    CHECK(paced.pace_budget_s <= static_cast<double>(paced.pace_units) * op.pace_max_unit_s + 1e-9);
    // The library's measured hit rate, clearly higher when paced.
    REQUIRE(plain.lib_hit_rate >= 0);
    REQUIRE(paced.lib_hit_rate >= 0);
    CHECK(paced.lib_hit_rate > 0.7);
    // Since full pages L1 evicts move into L2 (docs/tiers.md §2), L2 also
    // hits without any prefetch, so the unpaced hit rate is no longer low
    // (0.64-0.86 here, 2026-12-02, load ~4) and the hit rates' gap says
    // little about the prefetcher. What pacing changes is the prefetcher's
    // own work: reads it left to be done synchronously fell 2.3-5x (e.g.
    // 205,456 -> 60,581) and prefetches read in time rose 1.6-3x.
    CHECK(paced.lib_sync_reads * 10 < plain.lib_sync_reads * 7);
    CHECK(paced.lib_prefetch_used > plain.lib_prefetch_used);
    // The library decides the replay's step times: fewer stalls when paced.
    CHECK(paced.stall_s < plain.stall_s);
}

TEST_CASE("engine: late prefetches — a slow link's latency makes shallow prefetch late, deeper prefetch hides it") {
    GenOptions g;
    g.workload = "summarization", g.count = 200, g.rate = 50, g.block_tokens = 64, g.prefix_share = 0.6, g.prefixes = 4;
    std::string t = make_trace(g);
    auto fast = opts("llama-2-13b", "a100-40g", "cxl-direct");
    auto slow = fast;
    slow.link.latency_s = 2e-3;  // 2 ms a fetch: longer than a unit's compute
    slow.prefetch_buffer_bytes = 1 << 20;  // a buffer of one unit: asked one unit ahead, too late
    // The oracle: deterministic (its every page is prefetched, as early as the buffer allows).
    Result f = run(t, System::Oracle, fast), s = run(t, System::Oracle, slow);
    REQUIRE(f.prefetch_hit_rate > 0);
    CHECK(f.prefetch_late >= 0);
    CHECK(s.prefetch_late > f.prefetch_late);
    CHECK(s.prefetch_late > 0.01);
    CHECK(s.prefetch_hit_rate < f.prefetch_hit_rate);  // late bytes are misses
    CHECK(s.throughput_tps < f.throughput_tps);        // and the steps waited for them
    // Synchronous systems have no late prefetches to speak of.
    CHECK(run(t, System::CxlNoSpec, slow).prefetch_late < 0);
}
