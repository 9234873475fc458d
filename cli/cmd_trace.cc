// SPDX-License-Identifier: Apache-2.0
// `speckv trace replay|gen|presets`: replays request traces through a real pool
// in virtual time (docs/trace.md) and generates the paper's workloads.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.h"
#include "kv_bank.h"
#include "util/json.h"
#include "util/text.h"
#include "trace.h"

namespace speckv_cli {
namespace {

namespace st = speckv_trace;

struct ReplayArgs {
    std::string real_codec = "paper";
    std::string trace, model = "llama-2-70b", gpu = "a100-80g", link = "cxl-direct", system, csv, plot, format = "auto",
                pace_wait = "yield", prefetch_clock, admission = "reserve", preempt = "auto",
                payload = "synthetic", kv_model;
    bool all = false, skip_bad = false, metadata_only = false, real_bytes = false;
    uint64_t seed = 1, max_requests = 0;
    uint32_t prefetch_depth = 0;
    uint32_t gpus = 0, devices = 0, max_batch = 256, budget = 8192, block_tokens = 0, layer_groups = 1, reads_per_unit = 0;
    double compression = 1.96, time_scale = 1.0, pool_gb = 0, host_gb = 1024, buffer_gb = 1, hbm_kv_gb = 0;
    double pace = 0, pace_max_us = 1000;
    double link_latency_ns = -1;  // < 0: the link preset's
    double pnm_budget = 0.125, pnm_gbps = 512, pnm_select_x = 0, pnm_churn = 1.0;
    uint32_t pnm_recent = 1, pnm_page_tokens = 16, pnm_devices = 0;
};

struct ReplayProgress {
    uint64_t total = 0;
    std::string label;
};

void progress_cb(void *user, uint64_t done) {
    auto *p = static_cast<ReplayProgress *>(user);
    int w = 30, n = p->total ? static_cast<int>(w * std::min<double>(1.0, static_cast<double>(done) / p->total)) : 0;
    std::fprintf(stderr, "\r%-13s [%s%s] %llu/%llu", p->label.c_str(), std::string(n, '#').c_str(),
                 std::string(w - n, ' ').c_str(), static_cast<unsigned long long>(done),
                 static_cast<unsigned long long>(p->total));
    std::fflush(stderr);
}

uint64_t count_lines(const std::string &path) {
    std::FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) return 0;
    uint64_t n = 0;
    char buf[1 << 16];
    size_t k;
    while ((k = std::fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t i = 0; i < k; ++i) n += buf[i] == '\n';
    std::fclose(f);
    return n;
}

int do_replay(const ReplayArgs &a) {
    st::EngineOptions o;
    const st::ModelSpec *m = st::find_model(a.model);
    const st::GpuSpec *g = st::find_gpu(a.gpu);
    const st::LinkSpec *l = st::find_link(a.link);
    if (!m) return error("unknown model \"" + a.model + "\" (see `speckv trace presets`)"), 2;
    if (!g) return error("unknown GPU \"" + a.gpu + "\" (see `speckv trace presets`)"), 2;
    if (!l) return error("unknown link \"" + a.link + "\" (see `speckv trace presets`)"), 2;
    st::Format fmt;
    if (!st::parse_format(a.format, &fmt)) return error("unknown format \"" + a.format + "\""), 2;
    if (a.layer_groups < 1 || a.layer_groups > m->layers)
        return error("--layer-groups must be 1.." + std::to_string(m->layers) + " for " + m->name), 2;
    if (a.metadata_only && a.real_bytes) return error("--metadata-only and --real-bytes exclude each other"), 2;
    if (!(a.pace >= 0 && a.pace <= 1e3)) return error("--pace must be in 0..1000 (real seconds per virtual second)"), 2;
    if (a.pace > 0 && a.layer_groups < 2)
        return error("--pace needs --layer-groups 2 or more (it paces the library's prefetcher between layer groups)"), 2;
    if (!(a.pace_max_us > 0 && a.pace_max_us <= 1e7)) return error("--pace-max-us must be in (0, 1e7]"), 2;
    if (!a.prefetch_clock.empty() && a.prefetch_clock != "virtual" && a.prefetch_clock != "wall")
        return error("unknown --prefetch-clock \"" + a.prefetch_clock + "\" (virtual, wall)"), 2;
    if (a.prefetch_depth > 64) return error("--prefetch-depth must be 0 (learned) or 1..64 units"), 2;
    if (a.pace > 0 && a.prefetch_clock == "virtual")
        return error("--pace runs the library's prefetch thread on the wall clock: it needs --prefetch-clock wall, not virtual"), 2;
    if (a.link_latency_ns != -1 && !(a.link_latency_ns >= 0 && a.link_latency_ns <= 1e9))
        return error("--link-latency-ns must be in 0..1e9 (nanoseconds per access of the offload tier)"), 2;
    if (!(a.pnm_budget > 0 && a.pnm_budget <= 1)) return error("--pnm-budget must be in (0, 1] (share of remote pages recalled)"), 2;
    if (!(a.pnm_gbps > 0)) return error("--pnm-gbps must be > 0"), 2;
    if (!(a.pnm_churn >= 0 && a.pnm_churn <= 1)) return error("--pnm-churn must be in [0, 1]"), 2;
    if (a.pnm_page_tokens < 1) return error("--pnm-page-tokens must be >= 1"), 2;
    if (!(a.pnm_select_x >= 0)) return error("--pnm-select-x must be >= 0 (0 = measured on the library at start)"), 2;
    st::PaceWait pace_wait;
    st::Payload payload;
    if (!st::parse_payload(a.payload, &payload)) return error("unknown --payload \"" + a.payload + "\" (synthetic, model)"), 2;
    if (payload == st::Payload::Model && !a.real_bytes) return error("--payload model needs --real-bytes"), 2;
    if (payload == st::Payload::Model && a.kv_model.empty())
        return error("--payload model needs --kv-model PATH (a llama2.c checkpoint, e.g. stories260K.bin)"), 2;
    st::Admission admission;
    st::Preempt preempt;
    if (!st::parse_admission(a.admission, &admission)) return error("unknown --admission \"" + a.admission + "\" (reserve, optimistic)"), 2;
    if (!st::parse_preempt(a.preempt, &preempt)) return error("unknown --preempt \"" + a.preempt + "\" (auto, recompute, swap)"), 2;
    if (!st::parse_pace_wait(a.pace_wait, &pace_wait)) return error("unknown --pace-wait \"" + a.pace_wait + "\" (sleep, spin, yield)"), 2;
    std::vector<st::System> systems;
    if (a.all || a.system.empty()) {
        systems = st::all_systems();
    } else {
        st::System s;
        if (!st::parse_system(a.system, &s)) return error("unknown system \"" + a.system + "\""), 2;
        systems.push_back(s);
        if (s != st::System::Oracle) systems.push_back(st::System::Oracle);  // always a reference
    }
    o.model = *m, o.gpu = *g, o.link = *l, o.host_link = *st::find_link("pcie-host");
    if (a.link_latency_ns >= 0) o.link.latency_s = a.link_latency_ns * 1e-9;
    o.gpus = a.gpus, o.link_devices = a.devices, o.max_batch = a.max_batch, o.token_budget = a.budget;
    o.compression = a.compression, o.time_scale = a.time_scale, o.seed = a.seed, o.real_bytes = a.real_bytes;
    o.real_codec = a.real_codec;
    o.pool_bytes = a.pool_gb * 1e9, o.host_bytes = a.host_gb * 1e9, o.prefetch_buffer_bytes = a.buffer_gb * (1ull << 30);
    o.max_requests = a.max_requests;
    o.admission = admission, o.preempt = preempt;
    o.payload = payload;
    if (payload == st::Payload::Model) {
        std::string err;
        o.kv_bank = st::load_kv_bank(a.kv_model, &err);
        if (!o.kv_bank) return error(err, SPECKV_EIO), 1;
    }
    o.layer_groups = a.layer_groups;
    o.reads_per_unit = a.reads_per_unit;
    o.prefetch_virtual = a.prefetch_clock != "wall" && a.pace <= 0;
    o.prefetch_depth = a.prefetch_depth;
    o.pace = a.pace, o.pace_max_unit_s = a.pace_max_us * 1e-6, o.pace_wait = pace_wait;
    o.hbm_kv_bytes = a.hbm_kv_gb * 1e9;
    o.pnm_budget = a.pnm_budget, o.pnm_recent = a.pnm_recent, o.pnm_page_tokens = a.pnm_page_tokens;
    o.pnm_bw = a.pnm_gbps * 1e9, o.pnm_devices = a.pnm_devices, o.pnm_select_x = a.pnm_select_x, o.pnm_churn = a.pnm_churn;
    ReplayProgress prog;
    bool tty = progress_enabled() && a.trace != "-";
    if (tty) {
        prog.total = count_lines(a.trace);
        if (a.max_requests) prog.total = std::min(prog.total, a.max_requests);
        o.progress = progress_cb, o.progress_user = &prog;
    }
    // Every system reads the trace again: stdin is spooled to a temporary file.
    std::string path = a.trace;
    struct Unlink {
        std::string p;
        ~Unlink() { if (!p.empty()) unlink(p.c_str()); }
    } spool;
    if (path == "-") {
        const char *dir = std::getenv("TMPDIR");
        std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/speckv-trace-XXXXXX";
        int fd = mkstemp(tmpl.data());
        if (fd < 0) return error("cannot create a temporary file for stdin", SPECKV_EIO), 1;
        spool.p = tmpl;
        char buf[1 << 16];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0)
            if (write(fd, buf, n) != static_cast<ssize_t>(n)) return close(fd), error("cannot spool stdin", SPECKV_EIO), 1;
        close(fd);
        path = tmpl;
    }
    std::vector<st::Result> rs;
    auto run_all = [&]() -> int {
        rs.clear();
        for (st::System s : systems) {
            std::string err;
            auto rd = st::open_reader(path, fmt, a.skip_bad, &err);
            if (!rd) return error(err, SPECKV_EIO), 1;
            o.block_tokens = a.block_tokens ? a.block_tokens : rd->block_tokens();
            prog.label = st::system_name(s);
            st::Result r;
            int rc = st::replay(*rd, s, o, &r, &err);
            if (tty) std::fprintf(stderr, "\r%-60s\r", "");
            if (rc) return error(a.trace + ": " + err, SPECKV_EIO), 1;
            rs.push_back(std::move(r));
        }
        return 0;
    };
    if (int rc = run_all()) return rc;
    // A request that can never fit a system's capacity is skipped there, with
    // a warning naming its line. Systems that skipped different requests are
    // not compared over different request sets: all of them run again
    // without every request any of them skipped (like with like).
    std::vector<uint64_t> excl;
    for (auto &r : rs) {
        if (r.rejected_lines.empty()) continue;
        std::string lines;
        for (size_t i = 0; i < r.rejected_lines.size() && i < 10; ++i) lines += (i ? ", " : "") + std::to_string(r.rejected_lines[i]);
        if (r.rejected_lines.size() > 10) lines += ", ...";
        std::fprintf(stderr, "speckv: warning: %s skipped %zu request(s) larger than its KV capacity (%llu blocks; the largest needs %llu): line %s\n",
                     r.system.c_str(), r.rejected_lines.size(), static_cast<unsigned long long>(r.capacity_blocks),
                     static_cast<unsigned long long>(r.rejected_blocks_max), lines.c_str());
        excl.insert(excl.end(), r.rejected_ids.begin(), r.rejected_ids.end());
    }
    std::sort(excl.begin(), excl.end());
    excl.erase(std::unique(excl.begin(), excl.end()), excl.end());
    bool uneven = false;
    for (auto &r : rs) uneven = uneven || r.rejected_ids.size() != excl.size();
    if (uneven) {
        std::fprintf(stderr, "speckv: warning: systems skipped different requests; all run again without the %zu request(s) any of them skipped\n",
                     excl.size());
        o.exclude_ids = excl;
        if (int rc = run_all()) return rc;
    }
    if (g_opt.json) {
        std::fputs(st::to_json(rs, o, a.trace).c_str(), stdout);
    } else {
        std::printf("%s: %s on %u x %s, offload link %s, %s, block %u tokens", a.trace.c_str(), m->name, rs[0].gpus, g->name,
                    l->name, !a.real_bytes ? "metadata-only" : payload == st::Payload::Model ? "real bytes (model K/V)" : "real bytes",
                    o.block_tokens);
        if (o.admission == st::Admission::Optimistic) std::printf(", optimistic admission (preempt %s)", st::preempt_name(o.preempt));
        if (o.layer_groups > 1)
            std::printf(", %u layer groups (lib rows measured%s)", o.layer_groups,
                        o.virtual_clock() ? "" : ", prefetch thread on the wall clock: not deterministic");
        if (o.pace > 0)
            std::printf(", paced %g real s per virtual s of GPU time (%s, at most %g us per unit)", o.pace,
                        st::pace_wait_name(o.pace_wait), a.pace_max_us);
        std::printf("\n");
        if (rs[0].skipped) std::printf("skipped %llu bad or oversized requests\n", static_cast<unsigned long long>(rs[0].skipped));
        if (!o.exclude_ids.empty())
            std::printf("left out %zu request(s) that some system could not fit, for every system (like with like)\n", o.exclude_ids.size());
        if (!rs[0].sharing) std::printf("note: the library's sharing API is not linked: no prefix reuse\n");
        st::print_table(stdout, rs);
    }
    if (!a.csv.empty()) {
        std::FILE *f = std::fopen(a.csv.c_str(), "w");
        if (!f) return error("cannot write " + a.csv, SPECKV_EIO), 1;
        std::fputs(st::to_csv(rs).c_str(), f);
        std::fclose(f);
    }
    if (!a.plot.empty()) {
        std::string err;
        if (!st::write_plots(a.plot, rs, &err)) return error(err, SPECKV_EIO), 1;
    }
    return 0;
}

struct GenArgs {
    std::string workload = "chat", out = "-", format = "native";
    double rate = 1.0, prefix_share = 0;
    uint64_t count = 1000, seed = 1;
    uint32_t block_tokens = 512;
};

int do_gen(const GenArgs &a) {
    st::Format fmt;
    if (!st::parse_format(a.format, &fmt) || fmt == st::Format::Auto) return error("unknown format \"" + a.format + "\""), 2;
    if (!st::find_workload(a.workload)) return error("unknown workload \"" + a.workload + "\" (chat, summarization, code, qa)"), 2;
    if (!(a.rate > 0)) return error("--rate must be > 0"), 2;
    if (fmt == st::Format::Mooncake && a.block_tokens != 512) return error("the Mooncake format has 512-token blocks"), 2;
    if (g_opt.json && a.out == "-") return error("--json needs -o FILE: without it the trace itself goes to stdout"), 2;
    std::FILE *f = a.out == "-" ? stdout : std::fopen(a.out.c_str(), "w");
    if (!f) return error("cannot write " + a.out, SPECKV_EIO), 1;
    st::GenOptions g;
    g.workload = a.workload, g.rate = a.rate, g.count = a.count, g.seed = a.seed, g.block_tokens = a.block_tokens;
    g.prefix_share = a.prefix_share;
    st::Generator gen(g);
    st::write_header(f, fmt, a.block_tokens);
    st::Request r;
    uint64_t n = 0;
    while (gen.next(&r)) st::write_request(f, fmt, r), n++;
    if (f != stdout && std::fclose(f) != 0) return error("cannot write " + a.out, SPECKV_EIO), 1;
    if (g_opt.json)
        std::printf("%s\n",
                    speckv::json_text({{"requests", n}, {"output", a.out}, {"format", a.format}, {"workload", a.workload}})
                        .c_str());
    return 0;
}

void print_presets_json() {
    // Whole numbers of bytes, FLOP/s, ... print as integers.
    auto whole = [](double v) { return static_cast<uint64_t>(std::llround(v)); };
    speckv::Json models = speckv::Json::array(), gpus = speckv::Json::array(), links = speckv::Json::array(),
                 workloads = speckv::Json::array(), systems = speckv::Json::array();
    for (auto &m : st::models())
        models.push_back({{"name", m.name},
                          {"layers", m.layers},
                          {"q_heads", m.q_heads},
                          {"kv_heads", m.kv_heads},
                          {"head_dim", m.head_dim},
                          {"kv_bytes_per_token", whole(m.kv_bytes_per_token())},
                          {"weight_bytes", whole(m.weight_bytes())}});
    for (auto &g : st::gpus())
        gpus.push_back(
            {{"name", g.name}, {"hbm_bytes", whole(g.hbm_bytes)}, {"hbm_bytes_per_s", whole(g.hbm_bw)}, {"flops", whole(g.flops)}});
    for (auto &l : st::links())
        links.push_back({{"name", l.name},
                         {"latency_s", l.latency_s},
                         {"bytes_per_s", whole(l.bw)},
                         {"devices", l.devices},
                         {"device_bytes", whole(l.device_bytes)}});
    for (auto &w : st::workloads())
        workloads.push_back({{"name", w.name},
                             {"input_tokens", {w.in_lo, w.in_hi}},
                             {"output_tokens", {w.out_lo, w.out_hi}}});
    for (auto sy : st::all_systems()) systems.push_back(st::system_name(sy));
    speckv::Json o = {{"models", std::move(models)},
                      {"gpus", std::move(gpus)},
                      {"links", std::move(links)},
                      {"workloads", std::move(workloads)},
                      {"systems", std::move(systems)}};
    std::printf("%s\n", speckv::json_text(o).c_str());
}

void print_presets() {
    std::printf("models (KV bytes/token, weights):\n");
    for (auto &m : st::models())
        std::printf("  %-16s %3u layers, %3u q heads, %3u kv heads, head %3u: %8.0f B/token, %.1f GB\n", m.name, m.layers,
                    m.q_heads, m.kv_heads, m.head_dim, m.kv_bytes_per_token(), m.weight_bytes() / 1e9);
    std::printf("gpus:\n");
    for (auto &g : st::gpus())
        std::printf("  %-10s %5.0f GB HBM, %5.2f TB/s, %5.0f TFLOP/s\n", g.name, g.hbm_bytes / 1e9, g.hbm_bw / 1e12, g.flops / 1e12);
    std::printf("links:\n");
    for (auto &l : st::links())
        std::printf("  %-10s %7.0f ns, %5.1f GB/s per device, %u devices x %.0f GB\n", l.name, l.latency_s * 1e9, l.bw / 1e9,
                    l.devices, l.device_bytes / 1e9);
    std::printf("workloads (input/output tokens):\n");
    for (auto &w : st::workloads())
        std::printf("  %-14s %u-%u / %u-%u\n", w.name, w.in_lo, w.in_hi, w.out_lo, w.out_hi);
    std::printf("systems:");
    for (auto s : st::all_systems()) std::printf(" %s", st::system_name(s));
    std::printf("\n");
}

}  // namespace

void register_trace_command(CLI::App &app) {
    auto *t = app.add_subcommand("trace", "Replay request traces through a pool in virtual time (docs/trace.md)");
    t->require_subcommand(1);

    auto ra = std::make_shared<ReplayArgs>();
    auto *r = t->add_subcommand("replay", "Replay a trace against the modelled systems");
    r->add_option("TRACE", ra->trace, "trace file: Mooncake JSONL, Azure CSV or native (- = stdin)")->required();
    r->add_option("--format", ra->format, "auto|mooncake|azure|native");
    r->add_option("--model", ra->model, "model geometry (speckv trace presets)");
    r->add_option("--gpu", ra->gpu, "GPU preset");
    r->add_option("--link", ra->link, "offload tier of the cxl_* systems: cxl-direct, cxl-pooled, nvme, redis-25gbe (L5: a remote tier)");
    auto *sys = r->add_option("--system", ra->system, "one system (the oracle is always added)");
    r->add_flag("--all", ra->all, "every system (the default)")->excludes(sys);
    add_json(r, "JSON on stdout (errors too)");
    r->add_option("--csv", ra->csv, "also write a CSV table to this file");
    r->add_option("--plot", ra->plot, "write SVG charts into this directory");
    r->add_option("--seed", ra->seed, "seed, recorded in --json (the engine itself draws no random numbers)");
    r->add_flag("--skip-bad", ra->skip_bad, "skip malformed lines (counted) instead of failing");
    r->add_flag("--metadata-only", ra->metadata_only, "one-page stand-in blocks, no payload (the default)");
    r->add_flag("--real-bytes", ra->real_bytes, "blocks hold real payload bytes (small models only)");
    r->add_option("--real-codec", ra->real_codec,
                  "with --real-bytes: codec preset the compressing systems' payload pages are stored with (default paper; raw = none)");
    r->add_option("--payload", ra->payload,
                  "with --real-bytes: synthetic (default: FP16-looking noise) or model (real K/V of --kv-model, captured once "
                  "from its greedy text)");
    r->add_option("--kv-model", ra->kv_model, "with --payload model: llama2.c checkpoint whose K/V fill the blocks (stories260K.bin)");
    r->add_option("--gpus", ra->gpus, "tensor-parallel GPUs (default: fewest, a power of 2, whose HBM the weights fill at most 30%)");
    r->add_option("--devices", ra->devices, "link devices (default: the preset's)");
    r->add_option("--link-latency-ns", ra->link_latency_ns,
                  "access latency of the offload tier (the cxl_* systems' --link), ns (default: the preset's)");
    r->add_option("--pool-gb", ra->pool_gb, "CXL pool capacity in GB (default: devices x preset capacity)");
    r->add_option("--host-gb", ra->host_gb, "host DRAM for host_offload, GB");
    r->add_option("--hbm-kv-gb", ra->hbm_kv_gb, "cap the HBM room for KV (all GPUs), GB");
    r->add_option("--buffer-gib", ra->buffer_gb, "prefetch/staging buffer per GPU, GiB");
    r->add_option("--compression", ra->compression, "codec ratio of cxl_compress/cxl_speckv/oracle");
    r->add_option("--max-batch", ra->max_batch, "largest batch");
    r->add_option("--admission", ra->admission,
                  "reserve (default: a request's whole output is reserved, never preempted) or optimistic (admitted on its "
                  "current context, as vLLM; the youngest running request is preempted when KV space runs out)");
    r->add_option("--preempt", ra->preempt,
                  "with --admission optimistic: auto (default: swap to the tier where the system has one, recompute on "
                  "gpu_only), recompute (every system) or swap");
    r->add_option("--token-budget", ra->budget, "tokens per iteration (decode + chunked prefill)");
    r->add_option("--block-tokens", ra->block_tokens, "tokens per KV block (default: the trace's, 512)");
    r->add_option("--time-scale", ra->time_scale, "multiply arrival times (0.5 = twice the load)");
    r->add_option("--max-requests", ra->max_requests, "replay only the first N requests");
    r->add_option("--reads-per-unit", ra->reads_per_unit,
                  "speculative systems: read at most N blocks of each (sequence, layer group) unit per step, a rotating "
                  "sample whose outcomes are scaled to the unit's bytes (0 = every block; docs/trace.md)");
    r->add_option("--layer-groups", ra->layer_groups,
                  "pool blocks per KV block, one per group of layers, hinted and read group by group so the "
                  "library's prefetcher runs (default 1: one block holds all layers)");
    r->add_option("--prefetch-clock", ra->prefetch_clock,
                  "virtual (default: each hint is carried out when the replay gives it, on its virtual clock; "
                  "deterministic) or wall (the library's prefetch thread races the replay on the wall clock; --pace's mode)");
    r->add_option("--prefetch-depth", ra->prefetch_depth,
                  "the library's prefetch depth: 0 (default: learned by its bandit within 1..8 units) or K = every plan "
                  "K units ahead (1..64)");
    r->add_option("--pace", ra->pace,
                  "with --layer-groups: let R real seconds pass per virtual second of modelled GPU time, unit by "
                  "unit, so the library's prefetch thread runs between groups (default 0: no pacing)");
    r->add_option("--pace-max-us", ra->pace_max_us, "cap of one (sequence, group) unit's paced time, microseconds (1000)");
    r->add_option("--pace-wait", ra->pace_wait, "how paced time passes: yield (default: sched_yield until due), sleep or spin");
    r->add_option("--pnm-budget", ra->pnm_budget, "cxl_pnm: share of a sequence's remote pages the GPU recalls (0.125)");
    r->add_option("--pnm-recent", ra->pnm_recent, "cxl_pnm: newest pages per sequence and layer always recalled (1)");
    r->add_option("--pnm-page-tokens", ra->pnm_page_tokens, "cxl_pnm: tokens per selection page (16)");
    r->add_option("--pnm-gbps", ra->pnm_gbps, "cxl_pnm: KV GB/s one near-memory processor attends (512)");
    r->add_option("--pnm-devices", ra->pnm_devices, "cxl_pnm: near-memory processors (default: one per link device)");
    r->add_option("--pnm-churn", ra->pnm_churn,
                  "cxl_pnm: share of the selected pages recalled per step; the rest stay in the staging buffer as far as it "
                  "holds them (steady pages; default 1: all recalled every step)");
    r->add_option("--pnm-select-x", ra->pnm_select_x,
                  "cxl_pnm: selection cost, x a memcpy of the summaries (default 0: measured at start on this library's page selection, docs/trace.md)");
    add_no_progress(r);
    r->callback([ra] { g_exit = do_replay(*ra); });

    auto ga = std::make_shared<GenArgs>();
    auto *g = t->add_subcommand("gen", "Generate a workload trace (Poisson arrivals)");
    g->add_option("--workload", ga->workload, "chat, summarization, code or qa");
    g->add_option("--rate", ga->rate, "requests per second");
    g->add_option("--count", ga->count, "requests");
    g->add_option("--seed", ga->seed, "seed");
    g->add_option("--prefix-share", ga->prefix_share, "share of requests starting with a shared system prompt (0-1)");
    g->add_option("--block-tokens", ga->block_tokens, "tokens per hash_ids block");
    g->add_option("--format", ga->format, "native (default), mooncake or azure");
    g->add_option("-o,--output", ga->out, "output file (- = stdout)");
    add_json(g, "a JSON summary on stdout (needs -o FILE; errors too)");
    g->callback([ga] { g_exit = do_gen(*ga); });

    auto *p = t->add_subcommand("presets", "List models, GPUs, links, workloads and systems");
    add_json(p);
    p->callback([] {
        if (g_opt.json) print_presets_json();
        else print_presets();
    });
}

}  // namespace speckv_cli
