// SPDX-License-Identifier: Apache-2.0
// Optimistic admission and preemption (docs/trace.md "Preemption"): a larger
// batch than reserving whole outputs, preemptions when KV runs out, every
// request still completes with all its tokens, recompute pays prefill again,
// swap moves KV over the link instead.
#include <doctest/doctest.h>

#include <cstdio>

#include "gen_trace.h"
#include "trace.h"

using namespace speckv_trace;

namespace {

std::string trace_of(const GenOptions &g) { return make_trace(g); }

Result replay_one(const std::string &trace, System s, EngineOptions o) {
    std::string err;
    auto rd = open_reader_text(trace, Format::Auto, false, &err);
    REQUIRE(rd);
    o.block_tokens = rd->block_tokens();
    Result r;
    int rc = replay(*rd, s, o, &r, &err);
    REQUIRE_MESSAGE(rc == 0, err);
    return r;
}

// Short prompts, long outputs, a burst: reserving whole outputs keeps the
// batch small; optimistic admission fills HBM and must preempt as it decodes.
EngineOptions tight() {
    EngineOptions o;
    o.model = *find_model("llama-3-8b");
    o.gpu = *find_gpu("a100-80g");
    o.link = *find_link("cxl-direct");
    o.host_link = *find_link("pcie-host");
    o.hbm_kv_bytes = 2e9;  // ~15 k tokens of KV
    return o;
}

std::string burst() {
    GenOptions g;
    g.workload = "code", g.count = 120, g.rate = 400, g.block_tokens = 64, g.seed = 5;
    return trace_of(g);
}

}  // namespace

TEST_CASE("preempt: optimistic admission reaches a larger batch and preempts (gpu_only recomputes)") {
    std::string t = burst();
    EngineOptions o = tight();
    Result res = replay_one(t, System::GpuOnly, o);
    o.admission = Admission::Optimistic;
    Result opt = replay_one(t, System::GpuOnly, o);
    Result again = replay_one(t, System::GpuOnly, o);
    CHECK(res.preemptions == 0);
    CHECK(opt.max_batch > res.max_batch);
    CHECK(opt.mean_batch > res.mean_batch);
    CHECK(opt.preemptions > 0);
    CHECK(opt.preempt_swaps == 0);  // gpu_only has no tier: recompute
    // Every request completes with all its output tokens.
    CHECK(opt.requests == 120);
    CHECK(opt.output_tokens == res.output_tokens);
    CHECK(opt.input_tokens == res.input_tokens);
    // Recompute pays prefill again: more prompt tokens computed than the
    // reserving run (which computes each prompt once).
    CHECK(opt.recompute_tokens > 0);
    CHECK(res.prefill_tokens <= static_cast<double>(res.input_tokens));
    CHECK(opt.prefill_tokens > res.prefill_tokens);
    CHECK(opt.swap_bytes == 0);
    CHECK(opt.bytes_link == 0);
    // Deterministic.
    CHECK(again.makespan_s == opt.makespan_s);
    CHECK(again.preemptions == opt.preemptions);
    CHECK(again.prefill_tokens == opt.prefill_tokens);
}

TEST_CASE("preempt: offload systems swap to their tier over the link (or recompute when told)") {
    std::string t = burst();
    EngineOptions o = tight();
    o.link = *find_link("nvme");  // a slow tier: the batch soon outgrows the link's peak
    o.pool_bytes = 8e9;
    o.admission = Admission::Optimistic;
    for (System s : {System::CxlNoSpec, System::CxlSpecKV, System::HostOffload}) {
        CAPTURE(system_name(s));
        Result sw = replay_one(t, s, o);
        CHECK(sw.requests == 120);
        CHECK(sw.preemptions > 0);
        CHECK(sw.preempt_swaps > 0);
        CHECK(sw.swap_bytes > 0);
        CHECK(sw.swap_s > 0);
        CHECK(sw.bytes_link >= sw.swap_bytes);
        EngineOptions orc = o;
        orc.preempt = Preempt::Recompute;
        Result rc = replay_one(t, s, orc);
        CHECK(rc.requests == 120);
        CHECK(rc.output_tokens == sw.output_tokens);
        CHECK(rc.preempt_swaps == 0);
        CHECK(rc.swap_bytes == 0);
        if (rc.preemptions > 0) CHECK(rc.prefill_tokens > sw.prefill_tokens - sw.recompute_tokens);
    }
}

TEST_CASE("preempt: a tight pool with swapped requests still completes (the tier gives their room up)") {
    std::string t = burst();
    EngineOptions o = tight();
    o.link = *find_link("nvme");
    o.pool_bytes = 1e9;  // HBM + tier barely above one request's KV at times
    o.admission = Admission::Optimistic;
    for (System s : {System::GpuOnly, System::CxlNoSpec, System::CxlSpecKV}) {
        CAPTURE(system_name(s));
        Result r = replay_one(t, s, o);
        CHECK(r.requests + r.skipped == 120);
        CHECK(r.preemptions > 0);
    }
}

TEST_CASE("preempt: names parse; reserve is the default and never preempts") {
    Admission a;
    Preempt p;
    CHECK(parse_admission("optimistic", &a));
    CHECK(a == Admission::Optimistic);
    CHECK_FALSE(parse_admission("greedy", &a));
    CHECK(parse_preempt("swap", &p));
    CHECK(p == Preempt::Swap);
    CHECK_FALSE(parse_preempt("kill", &p));
    EngineOptions o;
    CHECK(o.admission == Admission::Reserve);
    CHECK(o.preempt == Preempt::Auto);
}
