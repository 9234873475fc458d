// SPDX-License-Identifier: Apache-2.0
// The real traces of data/ (or $SPECKV_DATA_DIR): every line parses with the
// facts data/README.md states, and a slice of the Mooncake conversation trace replays.
#include <doctest/doctest.h>

#include <map>

#include "data_dir.h"
#include "trace.h"

using namespace speckv_trace;

namespace {
const std::string kData = speckv_data::dir();

// LLaMA-2-70B on 8 x A100-80G, offload over cxl-direct (host link pcie-host).
EngineOptions llama70b_a100() {
    EngineOptions o;
    o.model = *find_model("llama-2-70b");
    o.gpu = *find_gpu("a100-80g");
    o.link = *find_link("cxl-direct");
    o.host_link = *find_link("pcie-host");
    return o;
}
}

TEST_CASE("mooncake conversation trace: 12,031 requests, hash_ids consistent, ids by first appearance") {
    std::string err;
    auto r = open_reader(kData + "/traces/mooncake_fast25/conversation_trace.jsonl", Format::Auto, false, &err);
    REQUIRE_MESSAGE(r, err);
    Request q;
    uint64_t n = 0, refs = 0, seen_max = 0, in = 0;
    bool first = true, starts_zero = true;
    double last = 0;
    int rc;
    while ((rc = r->next(&q)) == 1) {
        ++n, refs += q.hash_ids.size(), in += q.input_len;
        starts_zero = starts_zero && q.hash_ids[0] == 0;
        for (auto h : q.hash_ids) {
            if (!first && h > seen_max) CHECK(h == seen_max + 1);
            if (first || h > seen_max) seen_max = h, first = false;
        }
        last = q.arrival_ms;
    }
    REQUIRE_MESSAGE(rc == 0, r->error());
    CHECK(n == 12031);
    CHECK(refs == 288500);
    CHECK(seen_max + 1 == 182790);
    CHECK(last == 3536999);
    CHECK(starts_zero);
    CHECK(static_cast<double>(in) / n == doctest::Approx(12035).epsilon(0.001));
}

TEST_CASE("mooncake synthetic and azure traces parse completely") {
    std::string err;
    auto s = open_reader(kData + "/traces/mooncake_fast25/synthetic_trace.jsonl", Format::Auto, false, &err);
    REQUIRE(s);
    Request q;
    uint64_t n = 0;
    while (s->next(&q) == 1) ++n;
    CHECK(s->error().empty());
    CHECK(n == 3993);
    auto a = open_reader(kData + "/traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv", Format::Auto, false, &err);
    REQUIRE(a);
    n = 0;
    double in = 0, last = 0;
    while (a->next(&q) == 1) ++n, in += q.input_len, last = q.arrival_ms;
    CHECK(a->error().empty());
    CHECK(n == 19366);
    CHECK(in / n == doctest::Approx(1154.7).epsilon(0.001));
    CHECK(last / 1000 == doctest::Approx(3501.7).epsilon(0.001));  // 18:15:46.68 - 19:14:08.40
}

TEST_CASE("replay of the first 1,500 Mooncake requests: prefix reuse through the pool, sane orderings") {
    std::map<std::string, Result> m;
    for (System s : all_systems()) {
        std::string err;
        auto r = open_reader(kData + "/traces/mooncake_fast25/conversation_trace.jsonl", Format::Auto, false, &err);
        REQUIRE(r);
        EngineOptions o = llama70b_a100();
        o.max_requests = 1500;
        Result res;
        REQUIRE_MESSAGE(replay(*r, s, o, &res, &err) == 0, err);
        CHECK(res.requests == 1500);
        CHECK(res.gpus == 8);
        m[res.system] = res;
    }
    // Every request starts with block 0: it is always found once published.
    for (auto &[n, r] : m) {
        CAPTURE(n);
        CHECK(r.sharing);
        CHECK(r.pool_lookup_hits > 1400);
        CHECK(r.prefix_hit_rate > 0.04);
    }
    CHECK(m["cxl_speckv"].prefix_hit_rate > m["gpu_only"].prefix_hit_rate);
    // Within 0.1 %: the pool's LRU stamps use CLOCK_MONOTONIC_COARSE (ms ticks,
    // ties by slot), so which cached prefix is evicted can vary run to run.
    CHECK(m["oracle"].throughput_tps >= m["cxl_speckv"].throughput_tps * 0.999);
    CHECK(m["cxl_speckv"].throughput_tps > m["cxl_nospec"].throughput_tps);
    CHECK(m["cxl_nospec"].throughput_tps > m["host_offload"].throughput_tps);
}

// The oracle (same engine, same capacities, a prefetcher that knows the
// future) bounds every other system on every metric it bounds, on every
// bundled trace (issue 22). cxl_pnm attends most remote KV next to memory
// instead of moving it (approximate selection, fewer bytes, and a selection
// step of its own on the timeline): the oracle bounds its precision and waste,
// not its speed and not its on-time rate. A slower selection gives its recalls
// more time: on the conversation trace here its hit rate is 65-67 % at
// --pnm-select-x 1-3 and 83-87 % at 8-15, against the oracle's 81.1 %. Left
// to be measured, the selection cost follows the machine's load (an ASan run
// on a loaded machine measured ~15), so this test fixes it: the replay is the
// same everywhere.
TEST_CASE("oracle bounds every system on every bundled trace") {
    const char *traces[] = {"/traces/mooncake_fast25/conversation_trace.jsonl", "/traces/mooncake_fast25/synthetic_trace.jsonl",
                            "/traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv"};
    for (const char *t : traces) {
        const std::string trace = t;
        CAPTURE(trace);
        std::map<std::string, Result> m;
        for (System s : all_systems()) {
            std::string err;
            auto r = open_reader(kData + t, Format::Auto, false, &err);
            REQUIRE(r);
            EngineOptions o = llama70b_a100();
            o.hbm_kv_bytes = 40e9;  // KV pressure: part of the decode KV streams over the link
            o.max_requests = 200;
            o.reads_per_unit = 4;
            o.pnm_select_x = 2.5;  // about what a quiet machine measures (see above)
            Result res;
            REQUIRE_MESSAGE(replay(*r, s, o, &res, &err) == 0, err);
            m[res.system] = res;
        }
        const Result &o = m["oracle"];
        if (o.precision >= 0) CHECK(o.precision == 1.0);  // -1: nothing was remote (every context fit HBM)
        if (o.waste >= 0) CHECK(o.waste == 0.0);
        for (auto &[n, r] : m) {
            CAPTURE(n);
            if (n == "oracle") continue;
            CHECK(o.requests == r.requests);
            if (n != "cxl_pnm") {
                // 0.1 %: the pool's LRU ticks (see above) may evict another prefix.
                CHECK(o.throughput_tps >= r.throughput_tps * 0.999);
                CHECK(o.makespan_s <= r.makespan_s * 1.001);
            }
            if (r.prefetch_hit_rate >= 0 && n != "cxl_pnm") CHECK(o.prefetch_hit_rate >= r.prefetch_hit_rate);
            // Latency hidden is relative to a system's own synchronous stall:
            // comparable on the same link only (host_offload's is PCIe).
            if (r.latency_hidden >= 0 && n != "cxl_pnm" && n != "host_offload") CHECK(o.latency_hidden >= r.latency_hidden);
            if (r.precision >= 0) CHECK(o.precision >= r.precision);
            if (r.waste >= 0) CHECK(o.waste <= r.waste);
        }
    }
}

// Issue 22's target, on the library's own counts: the replay on its virtual
// clock (each hint carried out when it is given), the library's learned
// predictor planning 64 units ahead, a buffer that holds them (8 GiB per
// GPU). cxl_speckv's on-time prefetch hit rate (byte-weighted: pages the
// library had in L2 whose modelled transfer ended before their unit ran)
// comes within 3 points of the oracle's, at precision >= 90 % and waste
// <= 10 %, and its L2 hit rate within 3 points of the oracle pool's (the
// hinted policy fed the true next unit). Measured (2026-12-03): 98.1 vs
// 100 % on time, precision 100 %, L2 97.6 vs 97.6 %. With the learned depth
// (1..8) and 1 GiB the on-time rate is far lower (docs/evaluation.md); the
// oracle bounds both.
TEST_CASE("virtual clock: the library's prefetcher comes within 3 points of the oracle (Mooncake conversation)") {
    std::map<std::string, Result> m;
    for (System s : {System::CxlSpecKV, System::Oracle}) {
        std::string err;
        auto r = open_reader(kData + "/traces/mooncake_fast25/conversation_trace.jsonl", Format::Auto, false, &err);
        REQUIRE(r);
        EngineOptions o = llama70b_a100();
        o.hbm_kv_bytes = 40e9;
        o.max_requests = 40;
        o.layer_groups = 8;
        o.prefetch_depth = 64;
        o.prefetch_buffer_bytes = 8.0 * (1ull << 30);
        Result res;
        REQUIRE_MESSAGE(replay(*r, s, o, &res, &err) == 0, err);
        m[res.system] = res;
    }
    const Result &c = m["cxl_speckv"], &o = m["oracle"];
    MESSAGE("on time ", c.prefetch_hit_rate, " (oracle ", o.prefetch_hit_rate, "), precision ", c.precision, ", waste ",
            c.waste, ", L2 ", c.lib_hit_rate, " (oracle's pool ", o.lib_hit_rate, ")");
    REQUIRE(c.prefetch_hit_rate >= 0);
    CHECK(o.prefetch_hit_rate >= c.prefetch_hit_rate);
    CHECK(c.prefetch_hit_rate >= o.prefetch_hit_rate - 0.03);
    CHECK(c.precision >= 0.9);
    CHECK(c.waste <= 0.1);
    CHECK(c.lib_hit_rate >= o.lib_hit_rate - 0.03);
    CHECK(c.lib_precision >= 0.9);
    CHECK(o.throughput_tps >= c.throughput_tps * 0.999);
}
