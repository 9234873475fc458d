// SPDX-License-Identifier: Apache-2.0
// speckv_trace: request traces (readers, writers, generators) and the
// virtual-time serving-engine model that replays them through a real pool
// (docs/trace.md). Internal to the CLI, tests and benchmarks: not public API.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace speckv_trace {

// One request of a trace. hash_ids: one id per block_tokens-token prompt
// block (empty when the trace has no prefix information).
struct Request {
    uint64_t id = 0;          // 0-based position in the trace
    double arrival_ms = 0;    // relative to the trace start
    uint32_t input_len = 0;   // prompt tokens
    uint32_t output_len = 0;  // generated tokens
    std::vector<uint64_t> hash_ids;
    uint64_t line = 0;        // line of the trace file it came from (warnings)
};

enum class Format { Auto, Mooncake, Azure, Native };
const char *format_name(Format f);
// "mooncake" | "azure" | "native" | "auto"; false on anything else.
bool parse_format(const std::string &s, Format *out);

// Streams a trace, one request at a time (bounded memory). A malformed line
// is an error naming the line ("line 17: hash_ids has 3 ids, input_length
// 2048 needs 4"); with skip_bad the reader counts it and goes on.
class Reader {
  public:
    virtual ~Reader() = default;
    // 1: *r filled; 0: end of trace; -1: error (see error()).
    virtual int next(Request *r) = 0;
    const std::string &error() const { return err_; }
    uint64_t skipped() const { return skipped_; }
    uint64_t line() const { return line_; }
    // Tokens per hash_ids block (512 for Mooncake; from the native header).
    uint32_t block_tokens() const { return block_tokens_; }

  protected:
    std::string err_;
    uint64_t skipped_ = 0, line_ = 0;
    uint32_t block_tokens_ = 512;
};

// The Mooncake reader's JSON parser. Simdjson (when built with it) takes the
// lines it can take whole and hands every other line to the hand-written
// parser, which decides and words the error: the same requests and errors
// either way (tests/trace, bench_trace_reader measures both).
enum class JsonParser { Default, Hand, Simdjson };
bool simdjson_available();
const char *json_parser_name(JsonParser p);  // what Default means in this build: "hand" or "simdjson"

// Opens `path` ("-" = stdin) as format `f` (Auto: by the first line).
// Returns nullptr and sets *err when the file cannot be opened or its header
// is wrong.
std::unique_ptr<Reader> open_reader(const std::string &path, Format f, bool skip_bad, std::string *err,
                                    JsonParser jp = JsonParser::Default);
// The same over text in memory (tests).
std::unique_ptr<Reader> open_reader_text(std::string text, Format f, bool skip_bad, std::string *err,
                                         JsonParser jp = JsonParser::Default);

// Writers. Native: "#speckv-trace v1 block_tokens=N" then one line per request
// "<arrival_ms> <input> <output> <id,id,...|->". Mooncake: its JSONL schema.
void write_header(std::FILE *f, Format fmt, uint32_t block_tokens);
void write_request(std::FILE *f, Format fmt, const Request &r);

// ------------------------------------------------------------- generators

// The paper's workloads: token lengths uniform in [in_lo,in_hi] / [out_lo,out_hi].
struct Workload {
    const char *name;
    uint32_t in_lo, in_hi, out_lo, out_hi;
};
const std::vector<Workload> &workloads();  // chat, summarization, code, qa
const Workload *find_workload(const std::string &name);

struct GenOptions {
    std::string workload = "chat";
    double rate = 1.0;          // requests per second (Poisson arrivals)
    uint64_t count = 1000;
    uint64_t seed = 1;
    uint32_t block_tokens = 512;
    // Share of requests that start with one of `prefixes` shared system prompts
    // of prefix_tokens tokens (gives hash_ids something to reuse); 0 = none.
    double prefix_share = 0.0;
    uint32_t prefixes = 8, prefix_tokens = 1024;
};
// Draws requests one at a time (deterministic for a seed).
class Generator {
  public:
    explicit Generator(const GenOptions &o);
    bool next(Request *r);  // false after `count`
  private:
    GenOptions o_;
    const Workload *w_;
    uint64_t state_, n_ = 0, next_id_;
    double t_ms_ = 0;
    double uniform();
};

// ---------------------------------------------------------------- presets

struct ModelSpec {
    const char *name;
    uint32_t layers, q_heads, kv_heads, head_dim;
    double params;        // parameters
    uint32_t dtype_bytes; // KV and weights (FP16/BF16 = 2)
    double kv_bytes_per_token() const { return 2.0 * layers * kv_heads * head_dim * dtype_bytes; }
    double weight_bytes() const { return params * dtype_bytes; }
};
struct GpuSpec {
    const char *name;
    double hbm_bytes, hbm_bw, flops;  // per GPU: bytes, bytes/s, dense FP16 FLOP/s
};
struct LinkSpec {
    const char *name;
    double latency_s, bw;     // per device: access latency, bytes/s
    uint32_t devices;         // devices in the preset (aggregate bandwidth = devices * bw)
    double device_bytes;      // capacity per device
};
const std::vector<ModelSpec> &models();
const std::vector<GpuSpec> &gpus();
const std::vector<LinkSpec> &links();
const ModelSpec *find_model(const std::string &name);  // case-insensitive
const GpuSpec *find_gpu(const std::string &name);
const LinkSpec *find_link(const std::string &name);

// ----------------------------------------------------------------- engine

enum class System { GpuOnly, HostOffload, CxlNoSpec, CxlCompress, CxlSpecKV, Oracle, CxlPnm };
const char *system_name(System s);
bool parse_system(const std::string &s, System *out);
// How a paced replay lets real time pass (EngineOptions::pace_wait).
enum class PaceWait { Sleep, Spin, Yield };
const char *pace_wait_name(PaceWait w);
bool parse_pace_wait(const std::string &s, PaceWait *out);  // sleep, spin or yield
const std::vector<System> &all_systems();
// Admission (docs/trace.md "Scheduling and capacity"). Reserve: a request is
// admitted when its whole output fits (never preempted; the default).
// Optimistic: admitted on its current context (prompt + first block, as
// vLLM), preempting the youngest running request when KV space runs out.
enum class Admission { Reserve, Optimistic };
const char *admission_name(Admission a);
bool parse_admission(const std::string &s, Admission *out);  // reserve or optimistic
// What a preemption does with the victim's KV. Auto: swap to the tier on the
// systems that have one, recompute on gpu_only (vLLM's default mode).
// Recompute: drop it and prefill again later. Swap: move it to the tier over
// the link and back (gpu_only has no tier and recomputes).
enum class Preempt { Auto, Recompute, Swap };
const char *preempt_name(Preempt p);
bool parse_preempt(const std::string &s, Preempt *out);  // auto, recompute or swap

// Real-byte mode's payload. Synthetic: FP16-looking noise (small normal
// values). Model: real K and V of a small model (KvBank).
enum class Payload { Synthetic, Model };
const char *payload_name(Payload p);
bool parse_payload(const std::string &s, Payload *out);  // synthetic or model

// Real K/V (FP16, K after RoPE) of a small model's own greedy text,
// [layer][position][kv_dim], captured once (kv_bank.h builds it). A block's
// payload is, per layer of the block, its tokens' K rows then their V rows,
// each token at bank position (token + offset(request)) % positions.
struct KvBank {
    uint32_t layers = 0, kv_dim = 0, positions = 0;
    std::vector<uint16_t> k, v;
    std::string source;  // the model file
};

struct EngineOptions {
    ModelSpec model{};
    GpuSpec gpu{};
    LinkSpec link{};          // the CXL (or NVMe) tier of the cxl_* systems
    LinkSpec host_link{};     // host_offload's PCIe link (one per GPU)
    uint32_t gpus = 0;        // tensor-parallel GPUs; 0 = fewest (power of 2) whose HBM the weights fill at most 30 %
    uint32_t link_devices = 0;  // 0 = the preset's
    double host_bytes = 1024.0 * (1ull << 30);  // host DRAM for host_offload
    double pool_bytes = 0;    // CXL pool capacity; 0 = devices * device_bytes
    double hbm_kv_bytes = 0;  // caps the HBM room for KV (all GPUs); 0 = what the weights leave
    double compression = 1.96;  // codec ratio of cxl_compress/cxl_speckv/oracle ("paper" mode, docs/codec.md §14.1)
    uint32_t max_batch = 256;
    Admission admission = Admission::Reserve;
    Preempt preempt = Preempt::Auto;  // optimistic admission only
    uint32_t token_budget = 8192;  // tokens per iteration (decode + chunked prefill)
    uint32_t block_tokens = 512;
    double mfu = 0.5;          // share of peak FLOP/s reached
    double bw_eff = 0.8;       // share of peak HBM bandwidth reached
    double layer_overhead_s = 20e-6;  // launch/sync cost per layer per iteration
    double prefetch_buffer_bytes = 1.0 * (1ull << 30);  // L2 prefetch / staging buffer per GPU
    uint32_t max_depth = 4;    // layer-ahead depth bound
    double time_scale = 1.0;   // arrival times are multiplied by this
    uint64_t seed = 1;
    bool real_bytes = false;   // blocks hold real payload bytes (small models only)
    // Real-byte mode, systems that compress (cxl_compress, cxl_speckv,
    // cxl_pnm, oracle): the library's codec preset for the payload pages
    // (config codec.mode), so the bytes really go through the codec.
    std::string real_codec = "paper";
    Payload payload = Payload::Synthetic;      // real-byte mode's payload
    std::shared_ptr<const KvBank> kv_bank;     // Payload::Model: the K/V (geometry = the model preset's)
    uint64_t max_requests = 0; // 0 = all
    // Trace ids left out (as if not in the trace): the CLI's like-with-like
    // rerun when systems skipped different requests. Sorted.
    std::vector<uint64_t> exclude_ids;
    // Pool blocks per block_tokens-token KV block: one per group of
    // layers/layer_groups layers (hint.layer = group index), so the library's
    // prefetcher has layer-ahead units to fetch (docs/trace.md). 1 = one
    // block holds every layer (the default; fastest).
    uint32_t layer_groups = 1;
    // Speculative systems (cxl_speckv, cxl_pnm's link path, oracle) read their
    // decode KV unit by unit (sequence x layer group) through the pool and
    // the library's prefetcher decides the step time (docs/trace.md "Library
    // in the loop"). reads_per_unit caps the blocks read per unit (a
    // rotating sample, outcomes scaled to the unit's bytes); 0 = every block.
    uint32_t reads_per_unit = 0;
    // The library's prefetcher on the replay's virtual clock (docs/trace.md
    // "Prefetch clock"): its pools run `prefetch.sync = 1`, each hint carried
    // out inside speckv_prefetch, so what it fetched before a unit's reads
    // depends on its decisions only (deterministic). false: the prefetch
    // thread on the wall clock (what --pace needs).
    bool prefetch_virtual = true;
    // The library's prefetch depth: 0 = learned (its bandit within
    // prefetch.k_min..k_max, 1..8); K = every plan K units ahead (1..64).
    uint32_t prefetch_depth = 0;
    // Whether the prefetcher runs on the virtual clock (pacing needs the thread).
    bool virtual_clock() const { return prefetch_virtual && pace <= 0; }
    // Pacing (layer groups only; docs/trace.md "--pace"): after hinting the
    // next unit and reading a (sequence, group) unit, the replay lets real
    // time pass until pace x that unit's share of the iteration's modelled
    // GPU time (tg / (decoding sequences x layer_groups)) has elapsed since
    // the unit began, at most pace_max_unit_s, so the library's prefetch
    // thread runs in the time the GPU would give it. 0 = off (the default:
    // no waiting, as before). Waiting never changes the model's numbers.
    double pace = 0;               // real seconds per virtual second of GPU compute
    double pace_max_unit_s = 1e-3; // cap per unit (keeps a paced replay practical)
    PaceWait pace_wait = PaceWait::Yield;  // how the replay's thread lets time pass (docs/trace.md: yield measured best)
    // cxl_pnm (docs/trace.md "PNM model", docs/evaluation.md): near-memory
    // page selection + partial attention (PnG-KV) for decode KV outside HBM.
    double pnm_budget = 0.125;      // share of a sequence's remote pages the GPU recalls (top-k by bound)
    uint32_t pnm_recent = 1;        // newest pages per sequence and layer always recalled (forced)
    uint32_t pnm_page_tokens = 16;  // tokens per selection page (docs/selection.md's pages)
    double pnm_bw = 512e9;          // KV bytes per second one near-memory processor scans (attention)
    uint32_t pnm_devices = 0;       // near-memory processors; 0 = one per link device
    // Steady pages (the paper's steady-token selection, docs/selection.md §3):
    // selected pages stay in the GPU's staging buffer (as far as it holds
    // them, uncompressed) and only this share of them is recalled per step.
    // 1 = every selected page crosses the link every step (the default).
    double pnm_churn = 1.0;
    double pnm_select_x = 0;        // selection cost, x a memcpy of the summaries; 0 = measured on the library (pnm_cost.h)
    // Called every ~1% of the trace read (progress bar); may be null.
    void (*progress)(void *user, uint64_t done) = nullptr;
    void *progress_user = nullptr;
};

// Per-system results (docs/trace.md defines each).
struct Result {
    std::string system;
    uint64_t requests = 0, skipped = 0, input_tokens = 0, output_tokens = 0, iterations = 0;
    // Requests skipped because they can never fit the modelled capacity
    // (their trace ids and lines), and the size of the largest one in KV blocks.
    std::vector<uint64_t> rejected_ids, rejected_lines;
    uint64_t rejected_blocks_max = 0, capacity_blocks = 0;
    double makespan_s = 0, throughput_tps = 0, total_tps = 0;
    double ttft_p50_ms = 0, ttft_p99_ms = 0, tpot_p50_ms = 0, tpot_p99_ms = 0;
    uint32_t max_batch = 0;
    double mean_batch = 0;
    // Optimistic admission: running requests preempted (each time), of them
    // swapped to the tier; context tokens prefilled again (recompute); KV
    // bytes moved over the link by swaps (out + in, as stored) and the
    // virtual seconds those moves took.
    uint64_t preemptions = 0, preempt_swaps = 0;
    double recompute_tokens = 0, swap_bytes = 0, swap_s = 0;
    double prefill_tokens = 0;  // prompt tokens computed (not taken from the cache), recomputes included
    double prefix_hit_rate = 0;           // prompt blocks found by lookup / prompt blocks
    double prefetch_hit_rate = -1, precision = -1, waste = -1, latency_hidden = -1;  // -1 = not applicable
    double waste_bytes = 0;
    // Share of the bytes a speculative system's layers read that were
    // prefetched but arrived after the layer started (late: counted as misses
    // in prefetch_hit_rate). -1 = not applicable.
    double prefetch_late = -1;
    double bytes_hbm = 0, bytes_link = 0;  // KV bytes read from HBM / moved over the offload link
    double stall_s = 0, compute_s = 0;     // time waiting on the link / GPU time
    double gpu_kv_capacity = 0, tier_capacity = 0;  // modelled bytes
    double occupancy_hbm = 0, occupancy_tier = 0;   // peak share of each tier in use
    uint64_t pool_allocs = 0, pool_lookups = 0, pool_lookup_hits = 0, pool_evictions = 0,
             pool_prefetch_hints = 0, pool_reads = 0, pool_blocks_peak = 0;
    // Layer groups: reads of blocks another request allocated (prefix hits
    // and their canonical copies). The library's translation index files a
    // block under the request that allocated it, so a hint naming the
    // reading request cannot reach these (docs/trace.md).
    uint64_t pool_reads_foreign = 0;
    // The library's own prefetcher (issue 5), fed by the replay's hints and
    // reads. It runs on a background thread in wall-clock time, so these
    // counters describe the library's behaviour on this access stream, not
    // the virtual-time model above (they vary from run to run).
    uint64_t lib_l1_hits = 0, lib_l2_hits = 0, lib_sync_reads = 0, lib_prefetch_pages = 0, lib_prefetch_used = 0,
             lib_prefetch_wasted = 0, lib_prefetch_ignored = 0, lib_prefetch_dropped = 0, lib_link_bytes = 0;
    uint32_t lib_prefetch_depth = 0, lib_beta_ppm = 0;
    // The library's measured rates (-1 = nothing to measure): hit rate =
    // l2_hits / (l2_hits + sync_reads), precision = used / (used + wasted),
    // waste = wasted / (used + wasted). Not deterministic (wall clock).
    double lib_hit_rate = -1, lib_precision = -1, lib_waste = -1;
    // Real-byte mode: what the library's codec did with the payload pages.
    uint64_t lib_codec_pages = 0, lib_codec_raw_bytes = 0, lib_codec_stored_bytes = 0, lib_codec_bypassed = 0;
    uint32_t layer_groups = 1;
    // Wall clock (not deterministic; reported only when paced): the replay's
    // real seconds, the sum of the units' budgets (after the cap), the real
    // seconds spent waiting, the paced units and how many hit the cap, and
    // the CPU seconds of the process's other threads (the library's prefetch
    // thread) during the replay.
    double wall_s = 0, pace_budget_s = 0, pace_wait_s = 0, lib_thread_cpu_s = 0;
    uint64_t pace_units = 0, pace_capped = 0;
    bool sharing = false;                  // the library's sharing API was used
    uint32_t gpus = 0;
    int depth_mean_x100 = 0;               // mean layer-ahead depth *100 (speckv)
    // cxl_pnm only: decode steps that took the near-memory path (PnG), KV
    // bytes the near-memory processors attended, summary bytes scored, the
    // selected bytes recalled over the link (before compression), and the
    // virtual seconds of selection and of near-memory attention.
    uint64_t pnm_steps = 0;
    double decode_tokens = 0, decode_s = 0;  // decode-only iterations (every system; reported beside cxl_pnm)
    double pnm_moved_bytes = 0;  // of the selected bytes, those recalled over the link (before compression; churn)
    double pnm_scan_bytes = 0, pnm_summary_bytes = 0, pnm_recall_bytes = 0, pnm_select_s = 0, pnm_attend_s = 0;
    // cxl_pnm's selection cost used (x a memcpy of the summaries): measured on
    // the library at the start of the run (pnm_cost.h), or --pnm-select-x.
    double pnm_select_x = 0;
    bool pnm_select_x_measured = false;
    // Throughput vs batch (for the plots): decode-only iterations bucketed by batch.
    std::vector<std::pair<uint32_t, double>> batch_curve;  // (batch, tokens/s)
    std::vector<std::pair<uint32_t, double>> depth_curve;  // (depth k, hit rate)
};

// Replays `reader` for system `s`. Returns 0, or -1 with *err (a trace error
// with its line, or a library failure).
int replay(Reader &reader, System s, const EngineOptions &o, Result *out, std::string *err);

// Output.
void print_table(std::FILE *f, const std::vector<Result> &rs);
std::string to_json(const std::vector<Result> &rs, const EngineOptions &o, const std::string &trace);
std::string to_csv(const std::vector<Result> &rs);
// Writes throughput_vs_batch.svg, latency_breakdown.svg, hit_rate_vs_depth.svg,
// throughput.svg into dir. Returns false with *err.
bool write_plots(const std::string &dir, const std::vector<Result> &rs, std::string *err);

}  // namespace speckv_trace
