// SPDX-License-Identifier: Apache-2.0
// The serving-engine model: continuous batching in virtual time over a real
// speckv pool. Every KV block of the replay is a block of the pool (a one-page
// stand-in in metadata-only mode); prefix reuse goes through the library's
// sharing API (hash, lookup, publish, free), capacity limits are the pool's.
// Only time is modelled: GPU roofline, link bandwidth/latency with a queueing
// term, and the prefetch decisions. With layer_groups = 1 a block spans all
// layers and the library's prefetcher has no layer-ahead unit to fetch; with
// layer_groups = G each KV block is G pool blocks (one per layer group) and
// the replay hints and reads them group by group, so the library's prefetcher
// runs for real beside the model (docs/trace.md). With pace > 0 the replay
// also lets real time pass in proportion to each unit's modelled GPU time,
// so that thread gets the time an engine would give it. docs/trace.md
// explains every formula.
#include <malloc.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>

#include "speckv.h"
#include "pnm_cost.h"
#include "trace.h"

// Weak: a library built without the sharing API leaves these null and the
// replay runs without prefix reuse (Result::sharing, "note:" in the table).
#pragma weak speckv_publish
#pragma weak speckv_lookup
#pragma weak speckv_block_hash

namespace speckv_trace {

const char *system_name(System s) {
    switch (s) {
    case System::GpuOnly: return "gpu_only";
    case System::HostOffload: return "host_offload";
    case System::CxlNoSpec: return "cxl_nospec";
    case System::CxlCompress: return "cxl_compress";
    case System::CxlSpecKV: return "cxl_speckv";
    case System::Oracle: return "oracle";
    case System::CxlPnm: return "cxl_pnm";
    }
    return "?";
}

const std::vector<System> &all_systems() {
    static const std::vector<System> v = {System::GpuOnly, System::HostOffload, System::CxlNoSpec,
                                          System::CxlCompress, System::CxlSpecKV, System::Oracle,
                                          System::CxlPnm};
    return v;
}

bool parse_system(const std::string &s, System *out) {
    for (System x : all_systems())
        if (s == system_name(x)) return *out = x, true;
    return false;
}

const char *admission_name(Admission a) { return a == Admission::Reserve ? "reserve" : "optimistic"; }

bool parse_admission(const std::string &s, Admission *out) {
    for (Admission a : {Admission::Reserve, Admission::Optimistic})
        if (s == admission_name(a)) return *out = a, true;
    return false;
}

const char *preempt_name(Preempt p) {
    switch (p) {
    case Preempt::Auto: return "auto";
    case Preempt::Recompute: return "recompute";
    case Preempt::Swap: return "swap";
    }
    return "?";
}

bool parse_preempt(const std::string &s, Preempt *out) {
    for (Preempt p : {Preempt::Auto, Preempt::Recompute, Preempt::Swap})
        if (s == preempt_name(p)) return *out = p, true;
    return false;
}

const char *payload_name(Payload p) { return p == Payload::Synthetic ? "synthetic" : "model"; }

bool parse_payload(const std::string &s, Payload *out) {
    for (Payload p : {Payload::Synthetic, Payload::Model})
        if (s == payload_name(p)) return *out = p, true;
    return false;
}

const char *pace_wait_name(PaceWait w) {
    switch (w) {
    case PaceWait::Sleep: return "sleep";
    case PaceWait::Spin: return "spin";
    case PaceWait::Yield: return "yield";
    }
    return "?";
}

bool parse_pace_wait(const std::string &s, PaceWait *out) {
    for (PaceWait w : {PaceWait::Sleep, PaceWait::Spin, PaceWait::Yield})
        if (s == pace_wait_name(w)) return *out = w, true;
    return false;
}

namespace {

constexpr uint64_t kTenant = 1;
constexpr double kGiB = 1024.0 * 1024 * 1024;
constexpr double kActReserve = 2.0 * kGiB;  // activations/workspace per GPU
constexpr double kQueueDepth = 16;          // outstanding transfers per link device

using Hash = std::array<uint8_t, SPECKV_HASH_BYTES>;

uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Lets real time pass until `deadline` (CLOCK_MONOTONIC ns): asleep (the
// core is free for the prefetch thread; the caller sets a 1 ns timer slack),
// busy (exact, but holds a core), or yielding the core in a loop.
void wait_until(uint64_t deadline, PaceWait how) {
    switch (how) {
    case PaceWait::Sleep: {
        timespec ts{static_cast<time_t>(deadline / 1'000'000'000ull), static_cast<long>(deadline % 1'000'000'000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
        }
        return;
    }
    case PaceWait::Spin:
        while (mono_ns() < deadline) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
        return;
    case PaceWait::Yield:
        while (mono_ns() < deadline) sched_yield();
        return;
    }
}

double cpu_s(int who) {
    rusage ru{};
    getrusage(who, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// Log-bucket histogram (1 % wide buckets, 1 us .. 1e6 s): bounded memory for percentiles.
class Histogram {
  public:
    void add(double ms) {
        double us = std::max(1.0, ms * 1000.0);
        size_t b = std::min<size_t>(kBuckets - 1, static_cast<size_t>(std::log(us) / std::log(1.01)));
        ++n_[b], ++total_;
    }
    double pct(double p) const {
        if (!total_) return 0;
        uint64_t want = static_cast<uint64_t>(std::ceil(p * static_cast<double>(total_))), acc = 0;
        for (size_t b = 0; b < kBuckets; ++b)
            if ((acc += n_[b]) >= want && want) return std::pow(1.01, static_cast<double>(b) + 0.5) / 1000.0;
        return 0;
    }

  private:
    static constexpr size_t kBuckets = 2800;
    std::vector<uint64_t> n_ = std::vector<uint64_t>(kBuckets);
    uint64_t total_ = 0;
};

struct Seq {
    Request req;
    double arrival_s = 0, first_token_s = -1;
    uint32_t prompt_done = 0;   // prompt tokens computed or taken from the cache
    uint32_t generated = 0;     // output tokens produced
    uint32_t hit_blocks = 0;    // prompt blocks found by lookup
    uint32_t regen_left = 0;    // generated tokens whose KV is still to be recomputed (prefilled again)
    uint64_t order = 0;         // admission order: the youngest (largest) is preempted first
    uint64_t token_iter = ~0ull;  // the iteration whose prefill chunk yielded a token
    bool swapped = false;       // preempted by swap: its blocks wait in the tier
    uint32_t prompt_blocks = 0, decode_blocks = 0;
    uint64_t reserved = 0;      // blocks reserved, not allocated yet
    bool looked_up = false, scheduled = false, fetched_prefix = false;
    uint64_t tried_epoch = ~0ull;      // finish_epoch_ of the last exact capacity test
    std::vector<speckv_handle> blocks;  // prompt blocks then decode blocks; 0 = not allocated
    std::vector<uint8_t> published;
    std::vector<uint8_t> foreign;       // the block is another request's (a prefix hit, or its canonical copy)
    std::vector<Hash> hashes;           // prompt block hashes (with sharing)
    uint32_t ctx() const { return prompt_done + generated - regen_left; }  // tokens whose KV exists
    uint64_t nblocks() const { return prompt_blocks + decode_blocks; }  // KV blocks (each layer_groups pool blocks)
    bool decoding() const { return prompt_done >= req.input_len && regen_left == 0; }
};

class Engine {
  public:
    Engine(Reader &rd, System s, const EngineOptions &o, Result *r) : rd_(rd), sys_(s), o_(o), r_(*r) {}
    ~Engine() { speckv_pool_close(pool_); }
    int run(std::string *err);

  private:
    bool offload() const { return sys_ != System::GpuOnly; }
    bool compressed() const {
        return sys_ == System::CxlCompress || sys_ == System::CxlSpecKV || sys_ == System::Oracle || sys_ == System::CxlPnm;
    }
    // cxl_pnm prefetches as cxl_speckv does when it takes the link path.
    bool speculative() const { return sys_ == System::CxlSpecKV || sys_ == System::Oracle || sys_ == System::CxlPnm; }
    bool pnm() const { return sys_ == System::CxlPnm; }

    int setup(std::string *err);
    int fail(std::string *err, const std::string &what, int rc) {
        *err = what + ": " + speckv_strerror(rc) + (std::strlen(speckv_errmsg()) ? std::string(" (") + speckv_errmsg() + ")" : "");
        return -1;
    }
    int pull(std::string *err);
    int prepare(Seq &s, std::string *err);
    int take_prefix(Seq &s, std::string *err);
    int drop_prefix(Seq &s, std::string *err);
    int alloc_block(Seq &s, uint32_t idx, std::string *err);
    void fill_kv(const Seq &s, uint64_t pos0, uint32_t g);
    // The library in the loop (speculative systems): what one decode step's
    // reads found, turned into virtual time (docs/trace.md "Library in the loop").
    struct StepLink {
        double t0 = 0;            // virtual time the units start (after the step's synchronous prefix fetches)
        double remote_share = 0;  // share of each sequence's KV outside HBM
        double comp = 1;          // compression of the link bytes
        double lat = 0;           // per-transfer latency (with the queueing term)
    };
    int run_groups(const std::vector<Seq *> &stepping, double tg, const StepLink *sl, double *t_end, std::string *err);
    size_t slot(uint64_t idx, uint32_t g) const { return static_cast<size_t>(idx * LG_ + g); }
    // The block index a decode step appends to (in HBM: never read from the pool).
    uint64_t tail_block(const Seq &s) const { return s.prompt_blocks + s.generated / o_.block_tokens; }
    // A unit's blocks in the pool, the tail left out.
    uint64_t unit_blocks(const Seq &s, uint32_t g) const;
    // Of those, the ones outside HBM: the oldest ceil(share x all) (HBM keeps
    // a sequence's newest tokens); *end (may be null): the token after the last.
    uint64_t remote_blocks(const Seq &s, uint32_t g, double share, uint64_t *end) const;
    // Blocks held by admitted requests, in KV blocks (held_ counts pool blocks).
    uint64_t held_blocks() const { return (held_.size() + LG_ - 1) / LG_; }
    int publish_block(Seq &s, uint32_t idx, std::string *err);
    int finish(Seq &s, std::string *err);
    // Optimistic admission (docs/trace.md "Preemption").
    bool optimistic() const { return o_.admission == Admission::Optimistic; }
    bool can_swap() const { return offload() && o_.preempt != Preempt::Recompute; }
    uint64_t want_blocks(const Seq &s) const;     // KV blocks the request needs admitted, not allocated yet
    int drop_kv(Seq &s, std::string *err);         // frees the KV (recompute)
    int preempt(size_t i, bool swap, std::string *err);  // running_[i] back to the waiting queue's head
    int drop_swapped(bool *dropped, std::string *err);   // the youngest swapped request's KV is dropped
    int swap_in(Seq &s, std::string *err);
    void add_swap(double bytes, double blocks) { swap_bytes_now_ += bytes, swap_xfers_now_ += blocks * LG_; }
    // Share of the running KV (plus extra_ctx tokens) that HBM holds: the
    // rest is in the tier already ("Where KV sits"), so a swap moves only
    // a sequence's HBM share.
    double hbm_share(double extra_ctx) const {
        double ctx = extra_ctx;
        for (auto &p : running_) ctx += p->ctx();
        return ctx * kvpt_ > gpu_kv_ ? gpu_kv_ / (ctx * kvpt_) : 1.0;
    }
    void hold(speckv_handle h) { ++held_[h]; }
    void release(speckv_handle h) {
        auto it = held_.find(h);
        if (it != held_.end() && --it->second == 0) held_.erase(it);
    }
    // Decode-only iteration time for a hypothetical batch (admission guard).
    double est_decode(double batch, double ctx_tokens) const;
    // cxl_pnm: one decode step on the near-memory path (PnG-KV), docs/trace.md
    // "PNM model". In: the step's GPU tokens and attended context, HBM-local
    // KV, remote KV bytes (raw), the bytes recalled (raw: budget + recent
    // pages), selection pages per layer (summed over sequences), other link
    // bytes (compressed), sequences with remote KV, transfers, latency.
    struct PnmStep {
        double t = 0, tg = 0, t_sel = 0, t_pnm = 0, link = 0, summary = 0, scan = 0;
    };
    PnmStep pnm_step(double tokens, double attn_ctx, double kv_local, double remote, double moved, double recall, double pages,
                     double other_link, double remote_seqs, double xfers, double lat) const;
    // Selected bytes that cross the link this step: steady pages resident in
    // the staging buffer are recalled only at the churn rate.
    double pnm_moved(double selected) const {
        double resident = std::min(selected, pbuf_);
        return selected - resident + o_.pnm_churn * resident;
    }
    double gpu_time(double tokens, double attn_ctx_tokens, double kv_local_bytes) const;

    Reader &rd_;
    System sys_;
    EngineOptions o_;
    Result &r_;
    speckv_pool *pool_ = nullptr;
    bool sharing_ = false;
    uint32_t G_ = 1;
    uint32_t LG_ = 1;  // layer groups: pool blocks per KV block
    double pnm_bw_ = 0, pnm_sel_x_ = 0, summary_page_ = 0;  // cxl_pnm: aggregate scan B/s, selection cost, summary bytes per page-layer
    double block_bytes_ = 0, kvpt_ = 0, gpu_kv_ = 0, tier_ = 0, link_bw_ = 0, link_lat_ = 0, link_dev_ = 1, pbuf_ = 0;
    uint64_t cap_blocks_ = 0, ballast_pages_ = 0, reserved_ = 0;
    std::unordered_map<speckv_handle, uint32_t> held_;  // blocks referenced by admitted requests
    std::deque<Seq> waiting_;
    std::vector<std::unique_ptr<Seq>> running_;
    Request next_;
    bool have_next_ = false, eof_ = false;
    uint64_t read_ = 0, rejected_ = 0, excluded_ = 0, finish_epoch_ = 0;  // finish_epoch_: completions so far
    double now_ = 0, rho_ = 0;
    Histogram ttft_, tpot_;
    // accounting
    uint64_t prompt_blocks_total_ = 0, prompt_hits_ = 0;
    double hit_bytes_ = 0, miss_bytes_ = 0;  // link bytes served by prefetch / fetched synchronously
    double prefetched_ = 0, wasted_ = 0, stall_ = 0, stall_sync_ = 0, depth_sum_ = 0, depth_n_ = 0;
    double late_bytes_ = 0;  // prefetched, but after the layer that needed them started (counted as misses)
    double link_free_ = 0;   // virtual time the offload link is next idle (library-in-the-loop steps)
    uint64_t step_no_ = 0;   // decode steps read unit by unit (rotates the read sample)
    std::vector<double> unit_start_, prev_start_;  // virtual start of each unit of the current / previous step
    // Learned plans (not the oracle): when the library was first asked, since
    // a unit's last read, for a plan that reached it (the hint's virtual time),
    // by (request id, group). A unit's prefetched bytes leave then.
    std::unordered_map<uint64_t, double> issued_at_;
    double batch_sum_ = 0, peak_kv_ = 0, peak_pages_ = 0;
    uint64_t admitted_ = 0;                             // admissions so far (Seq::order)
    double swap_bytes_now_ = 0, swap_xfers_now_ = 0;    // swaps of this iteration (moved as stored)
    std::map<uint32_t, std::pair<double, double>> curve_;  // batch -> (tokens, seconds)
    std::array<std::array<double, 2>, 9> depth_hits_{};    // depth -> (accesses, hits)
    std::vector<char> payload_;
    uint64_t pace_wait_ns_ = 0;  // real time spent waiting (pacing)
};

int Engine::setup(std::string *err) {
    const ModelSpec &m = o_.model;
    kvpt_ = m.kv_bytes_per_token();
    block_bytes_ = kvpt_ * o_.block_tokens;
    LG_ = std::max<uint32_t>(o_.layer_groups, 1);
    if (LG_ > m.layers) {
        *err = "--layer-groups " + std::to_string(LG_) + " exceeds the model's " + std::to_string(m.layers) + " layers";
        return -1;
    }
    G_ = o_.gpus;
    if (!G_) {
        G_ = 1;
        while (G_ < 64 && m.weight_bytes() > 0.3 * G_ * o_.gpu.hbm_bytes) G_ *= 2;
    }
    double hbm_free = 0.9 * G_ * o_.gpu.hbm_bytes - m.weight_bytes() - G_ * kActReserve;
    pbuf_ = offload() ? G_ * o_.prefetch_buffer_bytes : 0;  // staging/prefetch buffer of every offload system
    gpu_kv_ = hbm_free - pbuf_;
    if (o_.hbm_kv_bytes > 0) gpu_kv_ = std::min(gpu_kv_, o_.hbm_kv_bytes);
    if (gpu_kv_ < block_bytes_) {
        *err = "the model does not fit: " + std::to_string(G_) + " x " + o_.gpu.name + " leave " +
               std::to_string(static_cast<int64_t>(gpu_kv_ / kGiB)) + " GiB for KV (try --gpus)";
        return -1;
    }
    if (sys_ == System::HostOffload) {
        link_bw_ = G_ * o_.host_link.bw, link_lat_ = o_.host_link.latency_s, link_dev_ = G_;
        tier_ = o_.host_bytes;
    } else if (offload()) {
        uint32_t dev = o_.link_devices ? o_.link_devices : o_.link.devices;
        link_bw_ = dev * o_.link.bw, link_lat_ = o_.link.latency_s, link_dev_ = dev;
        tier_ = o_.pool_bytes > 0 ? o_.pool_bytes : dev * o_.link.device_bytes;
        if (compressed()) tier_ *= o_.compression;
    }
    double cap = std::floor((gpu_kv_ + tier_) / block_bytes_);
    cap_blocks_ = static_cast<uint64_t>(std::min(cap, 2.0e6));
    if (pnm()) {
        uint32_t dev = o_.pnm_devices ? o_.pnm_devices : static_cast<uint32_t>(link_dev_);
        pnm_bw_ = dev * o_.pnm_bw;
        // Score (CRC checked) + select for every KV head group, x a memcpy of
        // the summaries: measured now on this library (pnm_cost.h), once per
        // geometry and budget in a process, unless --pnm-select-x fixes it.
        if (o_.pnm_select_x > 0) {
            pnm_sel_x_ = o_.pnm_select_x;
        } else {
            const SelectCost c = measure_select_cost(m.kv_heads, m.head_dim, m.q_heads, o_.pnm_budget);
            if (!(c.x > 0)) {
                *err = "cxl_pnm: the library's page selection refused the geometry of " + std::string(m.name) +
                       " (set --pnm-select-x)";
                return -1;
            }
            pnm_sel_x_ = c.x;
            r_.pnm_select_x_measured = true;
        }
        r_.pnm_select_x = pnm_sel_x_;
        summary_page_ = 16.0 + 4.0 * m.kv_heads * m.head_dim;  // summary_size(C), C = K row channels
    }
    r_.gpus = G_;
    r_.gpu_kv_capacity = gpu_kv_;
    r_.tier_capacity = tier_;

    // The pool: one page per block in metadata-only mode; real block bytes
    // otherwise (small models only).
    const uint64_t page = 4096;
    uint64_t pages_per_block = 1;  // per pool block (a KV block is LG_ pool blocks)
    if (o_.real_bytes) {
        pages_per_block = static_cast<uint64_t>(std::ceil(block_bytes_ / LG_ / page));
        if (block_bytes_ > 4.0 * 1024 * 1024 || static_cast<double>(cap_blocks_) * block_bytes_ > 4.0 * kGiB) {
            *err = "real-byte mode is for small scale: " + std::to_string(cap_blocks_) + " blocks of " +
                   std::to_string(static_cast<uint64_t>(block_bytes_)) + " bytes exceed 4 GiB (use --metadata-only, "
                   "a small model such as stories260k, and small --pool-gb, --host-gb, --hbm-kv-gb)";
            return -1;
        }
        payload_.resize(static_cast<size_t>(std::ceil(block_bytes_ / LG_)));
        if (o_.payload == Payload::Model) {
            const KvBank *kb = o_.kv_bank.get();
            if (!kb || !kb->positions) return *err = "--payload model needs the model's K/V (--kv-model)", -1;
            if (kb->layers != m.layers || kb->kv_dim != m.kv_heads * m.head_dim || m.dtype_bytes != 2) {
                *err = kb->source + " has " + std::to_string(kb->layers) + " layers x " + std::to_string(kb->kv_dim) +
                       " K/V channels; --model " + m.name + " has " + std::to_string(m.layers) + " x " +
                       std::to_string(m.kv_heads * m.head_dim) + " (use the matching preset, e.g. stories260k)";
                return -1;
            }
        }
    }
    const uint64_t nblk = cap_blocks_ * LG_;  // pool blocks at full capacity
    if (nblk + 1024 > (1u << 24) - 1) {
        *err = std::to_string(cap_blocks_) + " KV blocks x " + std::to_string(LG_) +
               " layer groups exceed the pool's 16M block slots (fewer --layer-groups, or smaller --pool-gb)";
        return -1;
    }
    // Layer groups: the library's tiers are sized as the modelled ones. L1
    // (the per-process page cache) is off: the modelled GPU keeps no KV of
    // the offload tier beyond the prefetch buffer, and a 64 MiB L1 would hold
    // the whole stand-in working set. L2 holds as many pool blocks as the
    // modelled buffer holds (compressed) group blocks.
    speckv_config *cfg = nullptr;
    struct CfgFree {
        speckv_config *&c;
        ~CfgFree() { speckv_config_free(c); }
    } cfg_free{cfg};
    const bool coded = o_.real_bytes && compressed() && o_.real_codec != "raw";
    const bool unit_reads = LG_ > 1 || speculative();  // the replay reads unit by unit (run_groups)
    if (unit_reads || coded) {
        if (int rc = speckv_config_new(&cfg); rc != SPECKV_OK) return fail(err, "speckv_config_new", rc);
    }
    if (coded) {
        // The payload pages go through the library's codec, as the modelled
        // compressing systems' KV would.
        if (int rc = speckv_config_set_str(cfg, "codec.mode", o_.real_codec.c_str()); rc != SPECKV_OK)
            return fail(err, "codec preset '" + o_.real_codec + "'", rc);
    }
    if (unit_reads) {
        double comp = compressed() ? o_.compression : 1.0;
        double group_blocks = std::floor(pbuf_ * comp / (block_bytes_ / LG_));
        double l2 = std::clamp(group_blocks, 64.0, 1048576.0) * static_cast<double>(pages_per_block * page);
        int rc = speckv_config_set_int(cfg, "cache.bytes", 0);
        if (rc == SPECKV_OK) rc = speckv_config_set_int(cfg, "prefetch.l2_bytes", static_cast<int64_t>(l2));
        // The oracle's pool fetches exactly the unit each hint names, and the
        // replay's hints name the true next unit (its time assumes more:
        // every page in time, see run_groups).
        if (rc == SPECKV_OK && sys_ == System::Oracle) rc = speckv_config_set_int(cfg, "prefetch.policy", 1);
        // Virtual time: each hint is carried out when it is given (the
        // link model decides when its pages arrive), not by a thread racing
        // the replay on the wall clock.
        if (rc == SPECKV_OK && o_.virtual_clock()) rc = speckv_config_set_int(cfg, "prefetch.sync", 1);
        // A fixed depth (--prefetch-depth): the plans go that many units ahead.
        if (rc == SPECKV_OK && o_.prefetch_depth > 0) rc = speckv_config_set_int(cfg, "prefetch.k_max", o_.prefetch_depth);
        if (rc == SPECKV_OK && o_.prefetch_depth > 0) rc = speckv_config_set_int(cfg, "prefetch.k_min", o_.prefetch_depth);
        if (rc != SPECKV_OK) return fail(err, "speckv_config_set_int", rc);
    }
    uint64_t want = nblk * pages_per_block;
    for (int attempt = 0; attempt < 4; ++attempt) {
        uint64_t bytes = (want + 2048 + want / 8 + (attempt * want) / 4) * page + (nblk + 1024) * 256;
        bytes = (bytes + (2u << 20) - 1) & ~uint64_t((2u << 20) - 1);
        std::string uri = "anon:?size=" + std::to_string(bytes) + "&max_blocks=" + std::to_string(nblk + 1024);
        if (pool_) speckv_pool_close(pool_), pool_ = nullptr;
        if (int rc = speckv_pool_open(uri.c_str(), cfg, &pool_); rc != SPECKV_OK) return fail(err, "opening " + uri, rc);
        speckv_pool_stats st{};
        st.struct_size = sizeof st;
        speckv_stats(pool_, &st);
        if (st.pages_total < want) continue;
        ballast_pages_ = st.pages_total - want;
        if (ballast_pages_) {
            // Pins the pool to exactly the modelled capacity.
            speckv_handle b;
            if (int rc = speckv_alloc(pool_, ballast_pages_ * page, SPECKV_DTYPE_OPAQUE, nullptr, &b); rc != SPECKV_OK)
                return fail(err, "reserving ballast", rc);
        }
        break;
    }
    if (!pool_) return *err = "could not size the pool", -1;
    sharing_ = speckv_publish && speckv_lookup && speckv_block_hash;
    return 0;
}

double Engine::gpu_time(double tokens, double attn_ctx_tokens, double kv_local_bytes) const {
    const ModelSpec &m = o_.model;
    double qdim = static_cast<double>(m.q_heads) * m.head_dim;
    double flops = 2.0 * m.params * tokens + 4.0 * m.layers * qdim * attn_ctx_tokens;
    double tc = flops / (G_ * o_.gpu.flops * o_.mfu);
    double tm = (m.weight_bytes() + kv_local_bytes) / (G_ * o_.gpu.hbm_bw * o_.bw_eff);
    return std::max(tc, tm) + m.layers * o_.layer_overhead_s;
}

double Engine::est_decode(double batch, double ctx) const {
    if (batch <= 0) return 1;
    double kv = ctx * kvpt_, local = std::min(kv, gpu_kv_);
    double tg = gpu_time(batch, ctx, local);
    double tl = (kv - local) / (compressed() ? o_.compression : 1.0) / std::max(link_bw_, 1.0);
    double t = speculative() ? std::max(tg, tl) : tg + tl;
    if (pnm() && kv > local) {
        // The near-memory path, sequences of equal context (admission guard).
        double remote = kv - local, per_seq = remote / batch;
        double recall = batch * std::min(per_seq, o_.pnm_budget * per_seq + o_.pnm_recent * o_.pnm_page_tokens * kvpt_);
        double pages = batch * std::ceil(per_seq / kvpt_ / o_.pnm_page_tokens);
        PnmStep p = pnm_step(batch, ctx, local, remote, pnm_moved(recall), recall, pages, 0, batch, o_.model.layers * batch, link_lat_);
        t = std::min(t, p.t);
    }
    return t;
}

Engine::PnmStep Engine::pnm_step(double tokens, double attn_ctx, double kv_local, double remote, double moved, double recall,
                                 double pages, double other_link, double remote_seqs, double xfers, double lat) const {
    const ModelSpec &m = o_.model;
    const double L = m.layers;
    PnmStep p;
    p.scan = std::max(0.0, remote - recall);       // attended next to memory, never moved
    p.summary = pages * L * summary_page_;          // every remote page's K summary, every layer
    // Selection: score the summaries at the processors' scan rate x the
    // measured cost ratio, plus per layer the query down and the page list back.
    p.t_sel = pnm_sel_x_ * p.summary / pnm_bw_ + L * 2 * lat;
    p.t_pnm = p.scan / pnm_bw_;
    // Link: the selected pages (compressed, as stored), the query to the
    // processors (FP16) and their partial back (FP32 out + max + sum per head).
    double qh = m.q_heads, hd = m.head_dim;
    p.link = moved / (compressed() ? o_.compression : 1.0) + other_link + remote_seqs * L * (qh * hd * 2 + qh * (hd + 2) * 4);
    // The selection depends on the layer's query, so the recall cannot be
    // prefetched layer-ahead: it is synchronous on the GPU's path.
    double t_recall = p.link / link_bw_ + xfers * lat / (link_dev_ * kQueueDepth);
    // The GPU attends HBM-resident KV and the recalled pages (read from HBM
    // after the recall); the processors attend the rest.
    p.tg = gpu_time(tokens, std::max(0.0, attn_ctx - p.scan / kvpt_), kv_local + recall);
    double t_merge = L * o_.layer_overhead_s;  // one merge kernel per layer (flash-decoding merge, docs/selection.md §4)
    p.t = p.t_sel + std::max(p.tg + t_recall, p.t_pnm) + t_merge;
    return p;
}

int Engine::pull(std::string *err) {
    if (have_next_ || eof_) return 0;
    int rc = rd_.next(&next_);
    if (rc < 0) return *err = rd_.error(), -1;
    // --max-requests bounds the part of the trace replayed: a request left
    // out (exclude_ids) counts, so that a rerun without it replays the same
    // requests less those, not later ones in their place.
    if (rc == 0 || (o_.max_requests && read_ + excluded_ >= o_.max_requests)) return eof_ = true, 0;
    if (!o_.exclude_ids.empty() && std::binary_search(o_.exclude_ids.begin(), o_.exclude_ids.end(), next_.id)) {
        ++excluded_;
        return pull(err);
    }
    have_next_ = true;
    if (++read_ % 256 == 0 && o_.progress) o_.progress(o_.progress_user, read_);
    return 0;
}

// Sizes the request's block table and computes the chained hashes of its
// prompt blocks (from the trace's hash_ids), once.
int Engine::prepare(Seq &s, std::string *err) {
    s.looked_up = true;
    const Request &q = s.req;
    s.prompt_blocks = (q.input_len + o_.block_tokens - 1) / o_.block_tokens;
    s.decode_blocks = (std::max<uint32_t>(q.output_len, 1) + o_.block_tokens - 1) / o_.block_tokens;
    s.blocks.assign(s.nblocks() * LG_, SPECKV_HANDLE_INVALID);
    s.published.assign(s.blocks.size(), 0);
    s.foreign.assign(s.blocks.size(), 0);
    if (!sharing_ || q.hash_ids.size() != s.prompt_blocks) return 0;
    // One chain per layer group (group g's block i has group g's block i-1 as
    // parent); with one group the external id is the trace's alone.
    s.hashes.resize(static_cast<size_t>(s.prompt_blocks) * LG_);
    for (uint32_t i = 0; i < s.prompt_blocks; ++i)
        for (uint32_t g = 0; g < LG_; ++g) {
            uint64_t id = q.hash_ids[i];
            uint8_t ext[12];
            std::memcpy(ext, &id, 8);
            std::memcpy(ext + 8, &g, 4);
            int rc = speckv_block_hash(SPECKV_HASH_NATIVE, kTenant, i ? s.hashes[slot(i - 1, g)].data() : nullptr, nullptr, 0,
                                       ext, LG_ > 1 ? 12 : 8, s.hashes[slot(i, g)].data());
            if (rc != SPECKV_OK) return fail(err, "speckv_block_hash", rc);
        }
    return 0;
}

// Looks the prompt's prefix blocks up, holding a reference to each hit; stops
// at the first miss (prefix semantics).
int Engine::take_prefix(Seq &s, std::string *err) {
    // A KV block is a hit when every layer group of it is found.
    for (uint32_t i = 0; i < s.hashes.size() / LG_; ++i) {
        uint32_t g = 0;
        for (; g < LG_; ++g) {
            speckv_handle h;
            int rc = speckv_lookup(pool_, kTenant, s.hashes[slot(i, g)].data(), &h);
            if (rc == SPECKV_ENOENT) break;
            if (rc != SPECKV_OK) return fail(err, "speckv_lookup", rc);
            s.blocks[slot(i, g)] = h;
            s.published[slot(i, g)] = 1;
            s.foreign[slot(i, g)] = 1;
            hold(h);
        }
        if (g < LG_) {  // a group was evicted: give back the ones found, stop
            for (uint32_t j = 0; j < g; ++j) {
                if (int rc = speckv_free(pool_, s.blocks[slot(i, j)]); rc != SPECKV_OK) return fail(err, "speckv_free", rc);
                release(s.blocks[slot(i, j)]);
                s.blocks[slot(i, j)] = SPECKV_HANDLE_INVALID;
                s.published[slot(i, j)] = 0;
                s.foreign[slot(i, j)] = 0;
            }
            break;
        }
        ++s.hit_blocks;
    }
    // At least one prompt token is computed (it yields the first output token).
    s.prompt_done = std::min<uint32_t>(s.hit_blocks * o_.block_tokens, s.req.input_len - 1);
    return 0;
}

// Gives the references back (the request could not be admitted after all).
int Engine::drop_prefix(Seq &s, std::string *err) {
    for (size_t i = 0; i < slot(s.hit_blocks, 0); ++i) {
        if (int rc = speckv_free(pool_, s.blocks[i]); rc != SPECKV_OK) return fail(err, "speckv_free", rc);
        release(s.blocks[i]);
        s.blocks[i] = SPECKV_HANDLE_INVALID;
        s.published[i] = 0;
        s.foreign[i] = 0;
    }
    s.hit_blocks = 0;
    s.prompt_done = 0;
    return 0;
}

int Engine::alloc_block(Seq &s, uint32_t idx, std::string *err) {
    if (s.blocks[slot(idx, 0)] != SPECKV_HANDLE_INVALID) return 0;
    for (uint32_t g = 0; g < LG_; ++g) {
        speckv_hint h{};
        h.struct_size = sizeof h;
        h.tenant = kTenant;
        h.request = s.req.id + 1;
        h.layer = g;  // layer group g (one group: the block holds all layers of its tokens)
        h.token_pos = idx < s.prompt_blocks ? static_cast<uint64_t>(idx) * o_.block_tokens
                                            : s.req.input_len + static_cast<uint64_t>(idx - s.prompt_blocks) * o_.block_tokens;
        h.token_count = o_.block_tokens;
        if (idx < s.prompt_blocks && !s.hashes.empty()) {
            h.flags = SPECKV_HINT_HAS_HASH;
            std::memcpy(h.content_hash, s.hashes[slot(idx, g)].data(), SPECKV_HASH_BYTES);
        }
        uint64_t bytes = o_.real_bytes ? static_cast<uint64_t>(payload_.size()) : 4096;
        speckv_handle out;
        int rc = speckv_alloc(pool_, bytes, o_.real_bytes ? SPECKV_DTYPE_FP16 : SPECKV_DTYPE_OPAQUE, &h, &out);
        if (rc != SPECKV_OK)
            return fail(err, "speckv_alloc (" + std::to_string(held_.size()) + " pool blocks held, " +
                                 std::to_string(cap_blocks_ * LG_) + " modelled)", rc);
        if (o_.real_bytes && o_.payload == Payload::Model) {
            fill_kv(s, h.token_pos, g);
            if ((rc = speckv_write(pool_, out, 0, payload_.data(), payload_.size())) != SPECKV_OK) return fail(err, "speckv_write", rc);
        } else if (o_.real_bytes) {
            // Deterministic FP16-looking payload (small normal values).
            uint64_t x = out * 0x9E3779B97F4A7C15ull;
            for (size_t i = 0; i + 1 < payload_.size(); i += 2) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                uint16_t v = static_cast<uint16_t>(0x2c00 + ((x >> 40) & 0x3ff)) | static_cast<uint16_t>((x >> 20) & 0x8000);
                std::memcpy(&payload_[i], &v, 2);
            }
            if ((rc = speckv_write(pool_, out, 0, payload_.data(), payload_.size())) != SPECKV_OK) return fail(err, "speckv_write", rc);
        } else if (LG_ > 1 || speculative()) {
            // The prefetcher skips zero (never written) pages: give the
            // stand-in page a few bytes so it has something to fetch.
            uint64_t mark = out | 1;
            if ((rc = speckv_write(pool_, out, 0, &mark, sizeof mark)) != SPECKV_OK) return fail(err, "speckv_write", rc);
        }
        s.blocks[slot(idx, g)] = out;
        hold(out);
        ++r_.pool_allocs;
    }
    if (s.reserved) --s.reserved, --reserved_;
    return 0;
}

// Real K/V payload of the block at token pos0 of request s, layer group g:
// per layer of the group, the tokens' K rows then their V rows (FP16), from
// the bank at (token + the request's offset) % positions. The offset is a
// hash of the request id and the seed, so a replay is deterministic.
void Engine::fill_kv(const Seq &s, uint64_t pos0, uint32_t g) {
    const KvBank &kb = *o_.kv_bank;
    const uint32_t L = o_.model.layers, l0 = g * L / LG_, l1 = (g + 1) * L / LG_, C = kb.kv_dim;
    uint64_t x = (s.req.id + 1) * 0x9E3779B97F4A7C15ull ^ o_.seed * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    const uint64_t off = x % kb.positions;
    std::fill(payload_.begin(), payload_.end(), 0);
    size_t at = 0;
    for (uint32_t l = l0; l < l1; ++l)
        for (const std::vector<uint16_t> *src : {&kb.k, &kb.v})
            for (uint32_t t = 0; t < o_.block_tokens; ++t) {
                size_t row = (static_cast<size_t>(l) * kb.positions + (pos0 + t + off) % kb.positions) * C;
                if (at >= payload_.size()) return;  // groups of unequal size: the payload is the mean
                size_t n = std::min<size_t>(C * 2, payload_.size() - at);
                std::memcpy(&payload_[at], src->data() + row, n);
                at += n;
            }
}

int Engine::publish_block(Seq &s, uint32_t idx, std::string *err) {
    for (uint32_t g = 0; g < LG_; ++g) {
        size_t k = slot(idx, g);
        if (!sharing_ || s.hashes.empty() || s.published[k]) continue;
        speckv_handle canon = SPECKV_HANDLE_INVALID, mine = s.blocks[k];
        int rc = speckv_publish(pool_, mine, s.hashes[k].data(), &canon);
        if (rc == SPECKV_EEXIST) {
            // Someone published the same prefix block first: use theirs.
            if ((rc = speckv_free(pool_, mine)) != SPECKV_OK) return fail(err, "speckv_free", rc);
            release(mine);
            s.blocks[k] = canon;
            s.foreign[k] = 1;
            hold(canon);
        } else if (rc != SPECKV_OK) {
            return fail(err, "speckv_publish", rc);
        }
        s.published[k] = 1;
    }
    return 0;
}

int Engine::finish(Seq &s, std::string *err) {
    for (speckv_handle h : s.blocks) {
        if (h == SPECKV_HANDLE_INVALID) continue;
        if (int rc = speckv_free(pool_, h); rc != SPECKV_OK) return fail(err, "speckv_free", rc);
        release(h);
    }
    reserved_ -= s.reserved;
    s.reserved = 0;
    double ttft = (s.first_token_s - s.arrival_s) * 1000.0;
    ttft_.add(ttft);
    if (s.req.output_len > 1) tpot_.add((now_ - s.first_token_s) * 1000.0 / (s.req.output_len - 1));
    ++r_.requests;
    r_.input_tokens += s.req.input_len;
    r_.output_tokens += std::max<uint32_t>(s.req.output_len, 1);
    return 0;
}

// Reserve: the whole request. Optimistic: the prompt and the decode blocks up
// to the next token (the first one for a new request; after a recompute,
// those of the tokens generated so far, which are prefilled again).
uint64_t Engine::want_blocks(const Seq &s) const {
    uint64_t k = s.nblocks();
    if (optimistic()) k = s.prompt_blocks + std::min<uint64_t>(s.decode_blocks, s.generated / o_.block_tokens + 1);
    uint64_t n = 0;
    for (uint64_t b = 0; b < k; ++b) n += s.blocks[slot(b, 0)] == SPECKV_HANDLE_INVALID;
    return n;
}

int Engine::drop_kv(Seq &s, std::string *err) {
    for (size_t i = 0; i < s.blocks.size(); ++i) {
        if (s.blocks[i] == SPECKV_HANDLE_INVALID) continue;
        if (int rc = speckv_free(pool_, s.blocks[i]); rc != SPECKV_OK) return fail(err, "speckv_free", rc);
        release(s.blocks[i]);
        s.blocks[i] = SPECKV_HANDLE_INVALID;
        s.published[i] = 0;
        s.foreign[i] = 0;
    }
    r_.recompute_tokens += s.ctx();
    s.hit_blocks = 0;
    s.regen_left = s.generated;
    s.prompt_done = 0;
    s.fetched_prefix = false;
    s.swapped = false;
    ++finish_epoch_;  // capacity changed: the queue's head may test again
    return 0;
}

// Preempts running_[i]: swap keeps its blocks (the tier holds them) and
// moves the HBM share of its KV over the link now and back when it resumes;
// recompute frees them. Either way it goes back to the head of the queue (vLLM serves
// preempted requests first).
int Engine::preempt(size_t i, bool swap, std::string *err) {
    Seq &s = *running_[i];
    ++r_.preemptions;
    reserved_ -= s.reserved;
    s.reserved = 0;
    if (swap) {
        ++r_.preempt_swaps;
        s.swapped = true;
        double have = 0;  // KV blocks it holds
        for (speckv_handle h : s.blocks) have += h != SPECKV_HANDLE_INVALID ? 1.0 / LG_ : 0;
        add_swap(s.ctx() * kvpt_ * hbm_share(0) / (compressed() ? o_.compression : 1.0), have);
    } else if (drop_kv(s, err)) {
        return -1;
    }
    s.tried_epoch = ~0ull;
    waiting_.push_front(std::move(s));
    running_[i] = std::move(running_.back());
    running_.pop_back();
    return 0;
}

// The tier is full: the youngest swapped request loses its KV (recompute).
int Engine::drop_swapped(bool *dropped, std::string *err) {
    *dropped = false;
    Seq *y = nullptr;
    for (auto &w : waiting_)
        if (w.swapped && (!y || w.order > y->order)) y = &w;
    if (!y) return 0;
    *dropped = true;
    return drop_kv(*y, err);
}

// Resuming a swapped request: its blocks come back over the link (the library
// reads each one).
int Engine::swap_in(Seq &s, std::string *err) {
    char probe[64];
    double have = 0;
    for (size_t i = 0; i < s.blocks.size(); ++i) {
        if (s.blocks[i] == SPECKV_HANDLE_INVALID) continue;
        if (int rc = speckv_access(pool_, s.blocks[i], 0, probe, sizeof probe, 0); rc != SPECKV_OK) return fail(err, "speckv_access", rc);
        ++r_.pool_reads;
        have += 1.0 / LG_;
    }
    add_swap(s.ctx() * kvpt_ * hbm_share(s.ctx()) / (compressed() ? o_.compression : 1.0), have);
    s.swapped = false;
    return 0;
}

uint64_t Engine::unit_blocks(const Seq &s, uint32_t g) const {
    const uint64_t tail = tail_block(s);
    uint64_t n = 0;
    for (uint64_t b = 0; b < s.nblocks(); ++b) n += s.blocks[slot(b, g)] != SPECKV_HANDLE_INVALID && b != tail;
    return n;
}

uint64_t Engine::remote_blocks(const Seq &s, uint32_t g, double share, uint64_t *end) const {
    const uint64_t all = unit_blocks(s, g);
    const uint64_t r = share <= 0 ? 0 : std::min<uint64_t>(all, static_cast<uint64_t>(std::ceil(share * static_cast<double>(all))));
    if (end) {
        // The r-th block in the pool, counted from the sequence's start.
        const uint64_t tail = tail_block(s);
        uint64_t seen = 0;
        *end = 0;
        for (uint64_t b = 0; b < s.nblocks() && seen < r; ++b)
            if (s.blocks[slot(b, g)] != SPECKV_HANDLE_INVALID && b != tail) {
                // As alloc_block places it: prompt blocks from 0, decode blocks after the prompt.
                uint64_t pos = b < s.prompt_blocks ? b * o_.block_tokens
                                                   : s.req.input_len + (b - s.prompt_blocks) * o_.block_tokens;
                ++seen, *end = pos + o_.block_tokens;
            }
    }
    return r;
}

// One decode step with layer groups, as an engine runs it (and as
// examples/tinyllm hints): sequence by sequence, group by group. Before group
// g of a sequence computes, the unit that runs after it is hinted (group g+1
// of the same sequence; after the last group, group 0 of the next sequence,
// wrapping to the batch's first for the next step), then group g's blocks are
// read, every one the sequence has except the block it is appending to (that
// one the engine has just written: it is in HBM, and the library's prefetcher
// skips it for the same reason); on a speculative system's step, only the
// ones outside HBM (remote_blocks), which the hint names (SPECKV_HINT_SPAN).
//
// Pacing (o_.pace > 0, offload systems): each (sequence, group) unit gets
// budget = pace * tg / (sequences * groups) real seconds (at most
// pace_max_unit_s), counted from before its hint; after its reads the replay
// waits out what is left of it. The reads count as part of the unit's
// compute (an engine reads a layer's KV while computing it). A unit whose
// reads overrun its budget does not wait, and the next unit does not make up
// for it: no catch-up bursts.
int Engine::run_groups(const std::vector<Seq *> &stepping, double tg, const StepLink *sl, double *t_end, std::string *err) {
    speckv_hint hint{};
    hint.struct_size = sizeof hint;
    hint.tenant = kTenant;
    char probe[64];
    const bool paced = o_.pace > 0 && offload();
    const double units = static_cast<double>(stepping.size()) * LG_;
    uint64_t budget_ns = 0;
    if (paced) {
        double b = o_.pace * tg / units;
        if (b > o_.pace_max_unit_s) b = o_.pace_max_unit_s, r_.pace_capped += stepping.size() * LG_;
        budget_ns = static_cast<uint64_t>(b * 1e9);
        r_.pace_budget_s += b * units;
        r_.pace_units += stepping.size() * LG_;
    }
    // Virtual time of the step (sl != null): unit u computes for tu; the
    // library's outcome for the unit's reads decides how long it waits first.
    const double tu = tg / units;
    const bool oracle = sys_ == System::Oracle;
    double T = sl ? sl->t0 : 0, t_begin = T;
    if (sl) unit_start_.assign(stepping.size() * LG_ + 1, 0.0);
    size_t u = 0;
    speckv_pool_stats s0{}, s1{};
    s0.struct_size = s1.struct_size = sizeof s0;
    // The oracle's time takes nothing from the library's counters (every
    // page in time, no waste, k = what the buffer holds): it reads them not.
    const bool counts = sl && !oracle;
    if (counts) speckv_stats(pool_, &s0);
    ++step_no_;
    for (size_t i = 0; i < stepping.size(); ++i) {
        Seq &p = *stepping[i];
        // The block this step's token is appended to (run before the token is counted).
        const uint64_t tail = tail_block(p);
        for (uint32_t g = 0; g < LG_; ++g, ++u) {
            uint64_t t0 = paced ? mono_ns() : 0;
            bool hinted_now = false;
            const double t_hint = T;
            if (offload()) {
                const Seq &n = g + 1 < LG_ ? p : *stepping[(i + 1) % stepping.size()];
                const uint32_t ng = g + 1 < LG_ ? g + 1 : 0;
                hint.request = n.req.id + 1;
                hint.layer = ng;
                hint.token_pos = n.ctx();
                // Speculative steps: the unit's reader reads from the pool
                // only its blocks outside HBM, the oldest (remote_blocks); the
                // hint says how far that goes, and a unit wholly in HBM is
                // not hinted (nothing to fetch).
                uint64_t end = 0;
                const bool hinted = !sl || remote_blocks(n, ng, sl->remote_share, &end) > 0;
                hint.token_count = sl ? end : 0;
                hint.flags = sl ? SPECKV_HINT_SPAN : 0;
                if (hinted) {
                    if (int rc = speckv_prefetch(pool_, &hint); rc != SPECKV_OK) return fail(err, "speckv_prefetch", rc);
                    ++r_.pool_prefetch_hints;
                    hinted_now = true;
                }
            }
            // The unit's blocks (all but the tail; speculative steps: those
            // outside HBM); with reads_per_unit, a rotating window of that many.
            uint64_t have = sl ? remote_blocks(p, g, sl->remote_share, nullptr) : unit_blocks(p, g);
            uint64_t want = o_.reads_per_unit && have > o_.reads_per_unit ? o_.reads_per_unit : have;
            uint64_t skip = have > want ? (step_no_ * want) % have : 0, seen = 0, done = 0;
            for (uint64_t b = 0; b < p.nblocks() && done < want && seen < have; ++b) {
                speckv_handle h = p.blocks[slot(b, g)];
                if (h == SPECKV_HANDLE_INVALID || b == tail) continue;
                if (seen++ < skip) continue;
                if (int rc = speckv_access(pool_, h, 0, probe, sizeof probe, 0); rc != SPECKV_OK)
                    return fail(err, "speckv_access", rc);
                ++done;
                ++r_.pool_reads;
                r_.pool_reads_foreign += p.foreign[slot(b, g)];
            }
            if (done < want && have > want) {  // the window wrapped
                seen = 0;
                for (uint64_t b = 0; b < p.nblocks() && done < want && seen < have; ++b) {
                    speckv_handle h = p.blocks[slot(b, g)];
                    if (h == SPECKV_HANDLE_INVALID || b == tail) continue;
                    ++seen;
                    if (speckv_access(pool_, h, 0, probe, sizeof probe, 0) != SPECKV_OK) break;
                    ++done, ++r_.pool_reads;
                    r_.pool_reads_foreign += p.foreign[slot(b, g)];
                }
            }
            if (sl) {
                if (counts) speckv_stats(pool_, &s1);
                // The unit's remote bytes (as they cross the link) and what the
                // library did for its reads: pages found in L2 (prefetched),
                // read synchronously, and prefetched pages that left L2 unread.
                const double R = static_cast<double>(p.ctx()) * kvpt_ * sl->remote_share / LG_ / sl->comp;
                double hits = static_cast<double>((s1.l2_hits - s0.l2_hits) + (s1.cache_hits - s0.cache_hits));
                double syncs = static_cast<double>(s1.sync_reads - s0.sync_reads);
                double wasted = static_cast<double>(s1.prefetch_wasted - s0.prefetch_wasted);
                double n = hits + syncs;
                double per_page = done ? R / static_cast<double>(done) : 0;
                double H = n > 0 ? R * hits / n : 0, S = n > 0 ? R * syncs / n : R, W = wasted * per_page;
                // Depth: the buffer holds kb units of this size; the library's
                // plan is k units ahead (never more than the buffer holds).
                double kb = R > 0 ? std::clamp(std::floor(pbuf_ / R), 1.0, 64.0) : 64.0;
                double k = std::min(kb, std::max(1.0, static_cast<double>(s1.prefetch_depth)));
                if (oracle) H = R, S = 0, W = 0, k = kb;  // knows the future: every page, as early as the buffer allows
                unit_start_[u] = T;
                // Asked k units ahead: at the start of unit u - k, which may
                // be one of the previous step's units. The oracle asks as early
                // as any plan that fits the buffer could: a hint given at the
                // start of unit v names v + 1 and its plan reaches v + 1 + kb.
                size_t kk = static_cast<size_t>(k) + (oracle ? 1 : 0);
                double issue = u >= kk                          ? unit_start_[u - kk]
                               : prev_start_.size() >= kk - u ? prev_start_[prev_start_.size() - (kk - u)]
                               : !prev_start_.empty()          ? prev_start_.front()
                                                               : t_begin;
                if (counts) {
                    // The library's own plans: this unit's bytes left when the
                    // first plan that reached it since its last read was made
                    // (a plan at the hint naming unit v reaches v+1 .. v+depth).
                    // A unit no plan reached (its pages came from an older plan,
                    // or the predictor was wrong) keeps the estimate above.
                    const uint64_t key = (static_cast<uint64_t>(p.req.id) << 8) | g;
                    if (auto it = issued_at_.find(key); it != issued_at_.end()) {
                        issue = it->second;
                        issued_at_.erase(it);
                    }
                    if (hinted_now) {
                        // This unit's hint named the next unit (position u + 1);
                        // its plan, s1.prefetch_depth deep, reaches u + 2 ...
                        const size_t n = stepping.size() * LG_;
                        // (no deeper than the buffer holds: the library's L2 caps
                        // a plan's window likewise)
                        const size_t depth = std::min(static_cast<size_t>(kb), std::max<size_t>(1, s1.prefetch_depth));
                        for (size_t q = u + 2; q <= u + 1 + depth && q < u + 1 + n; ++q) {
                            const size_t w = q % n;
                            const Seq &v = *stepping[w / LG_];
                            issued_at_.try_emplace((static_cast<uint64_t>(v.req.id) << 8) | (w % LG_), t_hint);
                        }
                    }
                    if (issued_at_.size() > (size_t(1) << 20)) issued_at_.clear();  // ended requests' units
                }
                double stall = 0, ontime = 0;
                if (H > 0) {
                    double st = std::max(issue, link_free_);
                    link_free_ = st + H / link_bw_;
                    double arrive = link_free_ + sl->lat;
                    if (arrive > T) {
                        stall += arrive - T, T = arrive;
                        late_bytes_ += H, miss_bytes_ += H;
                    } else {
                        hit_bytes_ += H, ontime = H;
                    }
                }
                if (S > 0) {
                    // A demand read goes ahead of the prefetches on the link:
                    // it arrives after its own transfer, and the prefetch
                    // stream loses that much link time (link_free_ moves by
                    // it, from wherever it is: prefetches issued before now
                    // keep their lead, less what the read took).
                    double got = T + S / link_bw_ + sl->lat;
                    link_free_ += S / link_bw_;
                    stall += got - T, T = got;
                    miss_bytes_ += S;
                }
                if (W > 0) link_free_ = std::max(link_free_, T) + W / link_bw_;  // wasted pages held the link too
                prefetched_ += H + W, wasted_ += W;
                r_.bytes_link += H + S + W;
                stall_ += stall;
                stall_sync_ += R > 0 ? R / link_bw_ + sl->lat : 0;
                depth_sum_ += k, depth_n_ += 1;
                int kd = static_cast<int>(std::min(8.0, k));
                depth_hits_[kd][0] += R;
                depth_hits_[kd][1] += ontime;
                T += tu;
                s0 = s1;
            }
            if (paced) {
                uint64_t t1 = mono_ns();
                if (t1 < t0 + budget_ns) {
                    wait_until(t0 + budget_ns, o_.pace_wait);
                    pace_wait_ns_ += mono_ns() - t1;
                }
            }
        }
    }
    if (sl) {
        unit_start_.resize(u);
        prev_start_.swap(unit_start_);
    }
    if (t_end) *t_end = T;
    return 0;
}

int Engine::run(std::string *err) {
    if (setup(err)) return -1;
    const ModelSpec &m = o_.model;
    const double L = m.layers;
    uint64_t iter = 0;
    for (;;) {
        // Arrivals up to now.
        for (;;) {
            if (pull(err)) return -1;
            if (!have_next_ || next_.arrival_ms * o_.time_scale / 1000.0 > now_) break;
            Seq s;
            s.req = std::move(next_);
            s.arrival_s = s.req.arrival_ms * o_.time_scale / 1000.0;
            have_next_ = false;
            waiting_.push_back(std::move(s));
        }
        if (running_.empty() && waiting_.empty()) {
            if (!have_next_) break;
            now_ = next_.arrival_ms * o_.time_scale / 1000.0;
            continue;
        }
        // Admission, FIFO: the head waits until its blocks fit (as vLLM's
        // scheduler); offload systems also stop once a larger batch would lower
        // decode throughput (link-bound), as FlexGen's policy search would.
        // Contexts are judged at their final length (prompt + output, as the
        // reservation): admitting on today's short contexts lets the batch
        // outgrow HBM as they decode, and even the mean over a sequence's life
        // underestimates the running batch (long sequences stay longer).
        // Optimistic admission judges contexts as they are (prompt + tokens
        // generated so far) and preempts when they outgrow the room.
        auto life_ctx = [this](const Seq &q) {
            return static_cast<double>(q.req.input_len) + (optimistic() ? q.generated : q.req.output_len);
        };
        double ctx_running = 0;
        for (auto &p : running_) ctx_running += life_ctx(*p);
        // Decode blocks this iteration's step appends (optimistic: not reserved).
        uint64_t grow = 0;
        if (optimistic())
            for (auto &p : running_)
                grow += p->decoding() && p->generated % o_.block_tokens == 0 && p->generated < p->req.output_len;
        bool preempted = false;
        if (optimistic()) {
            auto youngest = [this] {
                size_t y = 0;
                for (size_t i = 1; i < running_.size(); ++i)
                    if (running_[i]->order > running_[y]->order) y = i;
                return y;
            };
            // The pool (HBM; HBM + tier for the offload systems) cannot take
            // this step's blocks: swapped requests lose their KV first (the
            // tier is full), then the youngest running request is recomputed.
            while (held_blocks() + reserved_ + grow > cap_blocks_) {
                bool dropped;
                if (drop_swapped(&dropped, err)) return -1;
                if (dropped) continue;
                if (running_.size() < 2) break;  // alone it fits (larger requests are skipped)
                size_t y = youngest();
                const Seq &v = *running_[y];
                grow -= v.decoding() && v.generated % o_.block_tokens == 0 && v.generated < v.req.output_len;
                ctx_running -= life_ctx(v);
                if (preempt(y, false, err)) return -1;
                preempted = true;
            }
            // Offload systems: the batch has grown past the one whose decode
            // throughput peaks (the admission guard, on today's contexts):
            // the youngest is swapped out to the tier (or recomputed).
            while (offload() && running_.size() >= 2 && ctx_running * kvpt_ > gpu_kv_) {
                size_t y = youngest();
                double b = static_cast<double>(running_.size()), cv = life_ctx(*running_[y]);
                if (b / est_decode(b, ctx_running) >= (b - 1) / est_decode(b - 1, ctx_running - cv)) break;
                const Seq &v = *running_[y];
                grow -= v.decoding() && v.generated % o_.block_tokens == 0 && v.generated < v.req.output_len;
                ctx_running -= cv;
                if (preempt(y, can_swap(), err)) return -1;
                preempted = true;
            }
        }
        const uint64_t room = cap_blocks_ - std::min(cap_blocks_, optimistic() ? grow + cap_blocks_ / 100 : 0);  // vLLM's 1 % watermark
        while (!preempted && !waiting_.empty() && running_.size() < o_.max_batch) {
            Seq &s = waiting_.front();
            if (!s.looked_up && prepare(s, err)) return -1;
            if (s.nblocks() > cap_blocks_) {  // can never fit
                ++rejected_;
                r_.rejected_ids.push_back(s.req.id);
                r_.rejected_lines.push_back(s.req.line);
                r_.rejected_blocks_max = std::max<uint64_t>(r_.rejected_blocks_max, s.nblocks());
                waiting_.pop_front();
                continue;
            }
            // Offload systems: not past the batch where decode throughput peaks.
            double b = static_cast<double>(running_.size());
            if (offload() && b > 0) {
                double c2 = ctx_running + life_ctx(s);
                if (c2 * kvpt_ > gpu_kv_ && (b + 1) / est_decode(b + 1, c2) < b / est_decode(b, ctx_running)) break;
            }
            // Capacity: blocks referenced by admitted requests + blocks reserved
            // for them + this request's. Looking the prefix up pins its hits
            // (they stop being evictable), so that happens only when the request
            // fits even counting every block, or, once capacity changed, to
            // test the exact need (and the references go back if it still fails).
            // A swapped request holds its blocks already.
            uint64_t used = held_blocks() + reserved_;
            if (s.swapped) {
                if (used + want_blocks(s) > room) {
                    if (!running_.empty()) break;
                    bool dropped;  // nothing runs: make room in the tier
                    if (drop_swapped(&dropped, err)) return -1;
                    if (dropped) continue;
                    *err = "deadlock: a swapped request does not fit the modelled capacity";
                    return -1;
                }
                if (swap_in(s, err)) return -1;
            } else if (used + want_blocks(s) > room) {
                if (s.tried_epoch == finish_epoch_) {
                    bool dropped = false;  // nothing runs: swapped requests give their room up
                    if (running_.empty() && drop_swapped(&dropped, err)) return -1;
                    if (dropped) continue;
                    break;
                }
                s.tried_epoch = finish_epoch_;
                if (take_prefix(s, err)) return -1;
                if (held_blocks() + reserved_ + want_blocks(s) > room) {
                    if (drop_prefix(s, err)) return -1;
                    bool dropped = false;
                    if (running_.empty() && drop_swapped(&dropped, err)) return -1;
                    if (dropped) continue;
                    break;
                }
            } else if (take_prefix(s, err)) {
                return -1;
            }
            uint64_t need = want_blocks(s);
            if (!s.order) {  // first admission (a preempted request has its order)
                prompt_blocks_total_ += s.prompt_blocks;
                prompt_hits_ += s.hit_blocks;
            }
            if (!s.order) s.order = ++admitted_;  // arrival order: a resumed request keeps its age
            s.reserved = need;
            reserved_ += need;
            ctx_running += life_ctx(s);
            running_.push_back(std::make_unique<Seq>(std::move(s)));
            waiting_.pop_front();
        }
        if (running_.empty() && waiting_.empty()) continue;  // every waiting request was rejected (too large)
        if (running_.empty()) {  // head blocked with nothing running: cannot happen unless capacity is tiny
            *err = "deadlock: a request does not fit the modelled capacity";
            return -1;
        }

        // One iteration: every decoding sequence yields a token; prefill chunks
        // fill the rest of the token budget (chunked prefill), FIFO.
        double decode_n = 0, decode_ctx = 0, prefill_tokens = 0, prefill_attn = 0, fetch_bytes = 0;
        for (auto &p : running_)
            if (p->decoding()) decode_n += 1, decode_ctx += p->ctx();
        double budget = std::max(0.0, static_cast<double>(o_.token_budget) - decode_n);
        std::vector<std::pair<Seq *, uint32_t>> chunks;
        for (auto &p : running_) {
            if (p->decoding() || budget < 1) continue;
            // A recomputed request prefills its prompt, then its generated tokens.
            uint32_t c = static_cast<uint32_t>(std::min<double>(budget, p->req.input_len - p->prompt_done + p->regen_left));
            budget -= c;
            prefill_tokens += c;
            r_.prefill_tokens += c;
            prefill_attn += c * (p->ctx() + c / 2.0);
            chunks.push_back({p.get(), c});
            if (!p->fetched_prefix && p->hit_blocks && offload()) {
                double fb = static_cast<double>(p->prompt_done) * kvpt_;
                fetch_bytes += fb;
            }
            p->fetched_prefix = true;
        }
        // Where the decode KV sits: HBM holds up to gpu_kv_; the rest streams
        // over the link every step (spread evenly over sequences and layers).
        double kv_total = decode_ctx * kvpt_;
        double kv_local = std::min(kv_total, gpu_kv_);
        double remote_share = kv_total > 0 ? (kv_total - kv_local) / kv_total : 0;
        double decode_remote = offload() ? kv_total - kv_local : 0;
        double remote_seqs = 0, pnm_recall = 0, pnm_pages = 0;
        const bool pnm_now = pnm() && decode_remote > 0;
        for (auto &p : running_) {
            if (!p->decoding()) continue;
            double sb = p->ctx() * kvpt_ * remote_share;
            if (sb > 0) remote_seqs += 1;
            if (pnm_now && sb > 0) {
                // The GPU recalls the budget's share of the sequence's remote
                // pages plus its newest pages (forced); the rest stays.
                pnm_recall += std::min(sb, o_.pnm_budget * sb + static_cast<double>(o_.pnm_recent) * o_.pnm_page_tokens * kvpt_);
                pnm_pages += std::ceil(sb / kvpt_ / o_.pnm_page_tokens);
            }
        }
        double tg = gpu_time(decode_n + prefill_tokens, decode_ctx + prefill_attn, kv_local);
        double comp = compressed() ? o_.compression : 1.0;
        double link_bytes = (decode_remote + fetch_bytes) / comp;
        double t = tg, tg_used = tg;
        bool png = false;  // cxl_pnm took the near-memory path this step
        // The decode step, unit by unit through the pool (layer groups, and
        // always for the speculative systems, whose step time it decides).
        std::vector<Seq *> stepping;
        if (LG_ > 1 || speculative())
            for (auto &p : running_)
                if (p->decoding()) stepping.push_back(p.get());
        double t_lib = -1;  // speculative: the step's time as the library's prefetches make it
        struct Acc {
            double hit, miss, late, pref, wasted, sync, dsum, dn, lfree, link;
            std::array<std::array<double, 2>, 9> dh;
        } acc0{hit_bytes_, miss_bytes_, late_bytes_, prefetched_, wasted_, stall_sync_, depth_sum_, depth_n_, link_free_, r_.bytes_link, depth_hits_};
        if (speculative()) {
            double lat = link_lat_ / (1.0 - std::min(rho_, 0.9));
            StepLink sl;
            sl.remote_share = remote_share, sl.comp = comp, sl.lat = lat;
            sl.t0 = now_;
            if (double prefix = fetch_bytes / comp; prefix > 0) {
                // Cached prefix blocks a prefill starts from: nothing hints
                // them, so they are fetched synchronously before the step —
                // except by the oracle, which asked for them when the previous
                // step began (it knows who is admitted next).
                double ask = sys_ == System::Oracle && !prev_start_.empty() ? prev_start_.front() : now_;
                double st = std::max(ask, link_free_);
                link_free_ = st + prefix / link_bw_;
                double got = link_free_ + lat;
                sl.t0 = std::max(now_, got);
                if (sys_ == System::Oracle && got <= now_) hit_bytes_ += prefix, prefetched_ += prefix;
                else if (sys_ == System::Oracle) late_bytes_ += prefix, miss_bytes_ += prefix, prefetched_ += prefix;
                else miss_bytes_ += prefix;
                stall_sync_ += prefix / link_bw_ + lat, r_.bytes_link += prefix;
            }
            double t_end = sl.t0 + tg;
            if (!stepping.empty() && run_groups(stepping, tg, &sl, &t_end, err)) return -1;
            t_lib = t_end - now_;
        } else if (!stepping.empty() && run_groups(stepping, tg, nullptr, nullptr, err)) {
            return -1;
        }
        if (offload() && link_bytes > 0) {
            double xfers = L * (remote_seqs + chunks.size());
            double lat = link_lat_ / (1.0 - std::min(rho_, 0.9));  // queueing: waits grow with utilisation
            double t_link = link_bytes / link_bw_ + xfers * lat / (link_dev_ * kQueueDepth);
            if (!speculative()) {
                // Synchronous fetches. host_offload overlaps them with compute
                // layer by layer as FlexGen's schedule does (the next layer's KV
                // loads while this one computes); the first layer's cannot.
                stall_sync_ += t_link;
                t = sys_ == System::HostOffload ? std::max(tg, t_link) + t_link / L : tg + t_link;
                miss_bytes_ += link_bytes;
                r_.bytes_link += link_bytes;
            } else {
                t = t_lib;  // the library's prefetches, in virtual time (run_groups)
                PnmStep ps;
                if (pnm_now) {
                    // cxl_pnm: the near-memory path when it is the faster one
                    // (the scheduler knows both sizes); else the link path above.
                    ps = pnm_step(decode_n + prefill_tokens, decode_ctx + prefill_attn, kv_local, decode_remote, pnm_moved(pnm_recall), pnm_recall,
                                  pnm_pages, fetch_bytes / comp, remote_seqs, xfers, lat);
                }
                if (pnm_now && ps.t < t) {
                    // The link path's accounting is undone: this step took the other.
                    hit_bytes_ = acc0.hit, miss_bytes_ = acc0.miss, late_bytes_ = acc0.late, prefetched_ = acc0.pref;
                    wasted_ = acc0.wasted, stall_sync_ = acc0.sync, depth_sum_ = acc0.dsum, depth_n_ = acc0.dn;
                    link_free_ = acc0.lfree, r_.bytes_link = acc0.link, depth_hits_ = acc0.dh;
                    stall_sync_ += t_link;
                    r_.bytes_link += ps.link;
                    t = ps.t, tg_used = ps.tg, link_bytes = ps.link, png = true;
                    miss_bytes_ += ps.link;  // synchronous: the selection needs the layer's query
                    ++r_.pnm_steps;
                    r_.pnm_scan_bytes += ps.scan, r_.pnm_summary_bytes += ps.summary, r_.pnm_recall_bytes += pnm_recall;
                    r_.pnm_moved_bytes += pnm_moved(pnm_recall);
                    r_.pnm_select_s += ps.t_sel, r_.pnm_attend_s += ps.t_pnm;
                }
            }
            rho_ = 0.8 * rho_ + 0.2 * std::min(1.0, link_bytes / link_bw_ / t);
            stall_ += t - tg_used;
        }
        if (swap_bytes_now_ > 0) {
            // Preemption swaps of this iteration (out and in), synchronous:
            // the step waits for the moved KV (as vLLM's swap).
            double lat = link_lat_ / (1.0 - std::min(rho_, 0.9));
            double ts = swap_bytes_now_ / link_bw_ + swap_xfers_now_ * lat / (link_dev_ * kQueueDepth);
            t += ts, stall_ += ts;
            r_.swap_s += ts, r_.swap_bytes += swap_bytes_now_, r_.bytes_link += swap_bytes_now_;
            swap_bytes_now_ = swap_xfers_now_ = 0;
        }
        r_.compute_s += tg_used;
        r_.bytes_hbm += kv_local + m.weight_bytes() + (png ? pnm_recall : 0);
        if (chunks.empty() && decode_n > 0) {
            auto &c = curve_[static_cast<uint32_t>(decode_n)];
            c.first += decode_n, c.second += t;
            r_.decode_tokens += decode_n, r_.decode_s += t;
        }
        now_ += t;
        ++iter;
        batch_sum_ += static_cast<double>(running_.size());
        r_.max_batch = std::max<uint32_t>(r_.max_batch, static_cast<uint32_t>(running_.size()));
        peak_kv_ = std::max(peak_kv_, kv_total);

        // Apply the iteration to the pool: allocate what was computed, publish
        // completed prompt blocks, hint and read what the next step needs.
        for (auto &[p, c] : chunks) {
            uint32_t pc = std::min(c, p->req.input_len - p->prompt_done), rc = c - pc;  // prompt, recomputed output tokens
            if (pc) {
                uint32_t first = p->prompt_done / o_.block_tokens;
                p->prompt_done += pc;
                uint32_t last = (p->prompt_done - 1) / o_.block_tokens;
                for (uint32_t b = first; b <= last; ++b)
                    if (alloc_block(*p, b, err)) return -1;
                for (uint32_t b = first; b <= last; ++b) {
                    bool complete = (b + 1) * o_.block_tokens <= p->prompt_done || p->prompt_done == p->req.input_len;
                    if (complete && publish_block(*p, b, err)) return -1;
                }
            }
            if (rc) {
                uint32_t from = p->generated - p->regen_left;
                for (uint32_t b = from / o_.block_tokens; b <= (from + rc - 1) / o_.block_tokens; ++b)
                    if (alloc_block(*p, p->prompt_blocks + b, err)) return -1;
                p->regen_left -= rc;
            }
            if (!p->decoding()) continue;
            if (p->generated == 0) {  // prefill yields the first token
                p->generated = 1, p->first_token_s = now_;
                if (alloc_block(*p, p->prompt_blocks, err)) return -1;
            } else {  // a recompute's prefill yields the next one
                uint32_t pos = p->generated;
                if (pos % o_.block_tokens == 0 && alloc_block(*p, p->prompt_blocks + pos / o_.block_tokens, err)) return -1;
                ++p->generated;
            }
            p->token_iter = iter;
        }
        speckv_hint hint{};
        hint.struct_size = sizeof hint;
        hint.tenant = kTenant;
        char probe[64];
        for (auto &p : running_) {
            p->scheduled = true;
            if (!p->decoding() || p->token_iter == iter) continue;
            uint32_t pos = p->generated;  // output position of this token
            if (pos % o_.block_tokens == 0 && alloc_block(*p, p->prompt_blocks + pos / o_.block_tokens, err)) return -1;
            ++p->generated;
            if (LG_ > 1 || speculative()) continue;  // read unit by unit above (run_groups)
            if (offload()) {
                hint.request = p->req.id + 1;
                hint.token_pos = p->ctx();
                if (int rc = speckv_prefetch(pool_, &hint); rc != SPECKV_OK) return fail(err, "speckv_prefetch", rc);
                ++r_.pool_prefetch_hints;
            }
            // The step reads the whole KV: the pool is read one block per step,
            // round robin, so every block is touched over the sequence's life.
            speckv_handle h = p->blocks[iter % p->blocks.size()];
            if (h == SPECKV_HANDLE_INVALID) h = p->blocks[p->prompt_blocks + (pos - 1) / o_.block_tokens];
            if (h != SPECKV_HANDLE_INVALID) {
                if (int rc = speckv_access(pool_, h, 0, probe, sizeof probe, 0); rc != SPECKV_OK)
                    return fail(err, "speckv_access", rc);
                ++r_.pool_reads;
            }
        }
        // Completions.
        for (size_t i = 0; i < running_.size();) {
            Seq &s = *running_[i];
            if (s.decoding() && s.generated >= std::max<uint32_t>(s.req.output_len, 1)) {
                if (finish(s, err)) return -1;
                ++finish_epoch_;
                running_[i] = std::move(running_.back());
                running_.pop_back();
            } else {
                ++i;
            }
        }
        if (iter % 512 == 0) {
            speckv_pool_stats st{};
            st.struct_size = sizeof st;
            speckv_stats(pool_, &st);
            peak_pages_ = std::max(peak_pages_, static_cast<double>(st.pages_used - ballast_pages_));
        }
    }

    if (read_ == 0 && excluded_ == 0) {
        *err = rd_.skipped() ? "no valid request: all " + std::to_string(rd_.skipped()) + " lines were bad (--skip-bad)"
                             : "the trace holds no requests (an empty file, or a header only)";
        return -1;
    }
    speckv_pool_stats st{};
    st.struct_size = sizeof st;
    speckv_stats(pool_, &st);
    peak_pages_ = std::max(peak_pages_, static_cast<double>(st.pages_used - ballast_pages_));
    r_.capacity_blocks = cap_blocks_;
    r_.system = system_name(sys_);
    r_.skipped = rd_.skipped() + rejected_;
    r_.iterations = iter;
    r_.makespan_s = now_;
    r_.throughput_tps = now_ > 0 ? static_cast<double>(r_.output_tokens) / now_ : 0;
    r_.total_tps = now_ > 0 ? static_cast<double>(r_.output_tokens + r_.input_tokens) / now_ : 0;
    r_.ttft_p50_ms = ttft_.pct(0.5), r_.ttft_p99_ms = ttft_.pct(0.99);
    r_.tpot_p50_ms = tpot_.pct(0.5), r_.tpot_p99_ms = tpot_.pct(0.99);
    r_.mean_batch = iter ? batch_sum_ / static_cast<double>(iter) : 0;
    r_.prefix_hit_rate = prompt_blocks_total_ ? static_cast<double>(prompt_hits_) / static_cast<double>(prompt_blocks_total_) : 0;
    r_.sharing = sharing_;
    r_.stall_s = stall_;
    if (offload()) {
        double acc = hit_bytes_ + miss_bytes_;
        r_.prefetch_hit_rate = acc > 0 ? hit_bytes_ / acc : -1.0;  // nothing fetched: not applicable
        r_.prefetch_late = speculative() && acc > 0 ? late_bytes_ / acc : -1.0;
        // Nothing fetched at all: not applicable. Synchronous systems hide nothing.
        r_.latency_hidden = stall_sync_ <= 0 ? -1.0 : speculative() || sys_ == System::HostOffload ? std::clamp(1.0 - stall_ / stall_sync_, 0.0, 1.0) : 0.0;
        if (speculative()) {
            r_.precision = prefetched_ > 0 ? 1.0 - wasted_ / prefetched_ : -1.0;  // nothing prefetched: n/a
            r_.waste = prefetched_ > 0 ? wasted_ / prefetched_ : -1.0;
            r_.waste_bytes = wasted_;
            r_.depth_mean_x100 = depth_n_ > 0 ? static_cast<int>(std::lround(100 * depth_sum_ / depth_n_)) : 0;
            for (int d = 1; d <= 8; ++d)
                if (depth_hits_[d][0] > 0) r_.depth_curve.push_back({static_cast<uint32_t>(d), depth_hits_[d][1] / depth_hits_[d][0]});
        }
    }
    r_.occupancy_hbm = gpu_kv_ > 0 ? std::min(1.0, peak_kv_ / gpu_kv_) : 0;
    r_.occupancy_tier = cap_blocks_ ? peak_pages_ / static_cast<double>(cap_blocks_ * LG_) : 0;  // pool pages / stand-in pages at capacity
    r_.pool_lookups = st.lookups;
    r_.pool_lookup_hits = st.lookup_hits;
    r_.pool_evictions = st.evictions;
    r_.pool_blocks_peak = static_cast<uint64_t>(peak_pages_);
    r_.lib_l1_hits = st.cache_hits, r_.lib_l2_hits = st.l2_hits, r_.lib_sync_reads = st.sync_reads;
    r_.lib_prefetch_pages = st.prefetch_pages, r_.lib_prefetch_used = st.prefetch_used;
    r_.lib_prefetch_wasted = st.prefetch_wasted, r_.lib_prefetch_ignored = st.prefetch_ignored;
    r_.lib_prefetch_dropped = st.prefetch_dropped;
    r_.lib_link_bytes = st.link_bytes, r_.lib_prefetch_depth = st.prefetch_depth, r_.lib_beta_ppm = st.prefetch_beta_ppm;
    r_.lib_codec_pages = st.codec_pages_encoded, r_.lib_codec_raw_bytes = st.codec_raw_bytes;
    r_.lib_codec_stored_bytes = st.codec_stored_bytes, r_.lib_codec_bypassed = st.codec_pages_bypassed;
    if (st.l2_hits + st.sync_reads) r_.lib_hit_rate = static_cast<double>(st.l2_hits) / static_cast<double>(st.l2_hits + st.sync_reads);
    if (uint64_t pu = st.prefetch_used + st.prefetch_wasted) {
        r_.lib_precision = static_cast<double>(st.prefetch_used) / static_cast<double>(pu);
        r_.lib_waste = static_cast<double>(st.prefetch_wasted) / static_cast<double>(pu);
    }
    r_.layer_groups = LG_;
    r_.pace_wait_s = static_cast<double>(pace_wait_ns_) * 1e-9;
    for (auto &[b, tv] : curve_)
        if (tv.second > 0) r_.batch_curve.push_back({b, tv.first / tv.second});
    return 0;
}

}  // namespace

int replay(Reader &reader, System s, const EngineOptions &o, Result *out, std::string *err) {
    // The library's eviction scan and the replay's per-step vectors allocate
    // and free blocks of megabytes at every step; glibc's default trims the
    // heap (brk) or unmaps them each time, a syscall and a TLB flush per
    // step (12 % of host_offload's CPU, perf). Keep freed memory mapped.
    static std::once_flag malloc_once;
    std::call_once(malloc_once, [] {
        mallopt(M_MMAP_THRESHOLD, 64 << 20);
        mallopt(M_TRIM_THRESHOLD, 256 << 20);
    });
    *out = Result{};
    out->system = system_name(s);
    // Sleeping waits of a few microseconds need a fine timer slack (the
    // default, 50 us, would stretch every one); set for this thread only,
    // and put back.
    int slack = -1;
    if (o.pace > 0 && o.pace_wait == PaceWait::Sleep) {
        slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
        prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
    }
    uint64_t t0 = mono_ns();
    double all0 = cpu_s(RUSAGE_SELF), me0 = cpu_s(RUSAGE_THREAD);
    int rc;
    {
        Engine e(reader, s, o, out);
        rc = e.run(err);
    }  // the pool closes here: its prefetch thread has stopped and its CPU time is counted
    out->wall_s = static_cast<double>(mono_ns() - t0) * 1e-9;
    out->lib_thread_cpu_s = std::max(0.0, (cpu_s(RUSAGE_SELF) - all0) - (cpu_s(RUSAGE_THREAD) - me0));
    if (slack > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(slack), 0, 0, 0);
    return rc;
}

}  // namespace speckv_trace
