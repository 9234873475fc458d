// SPDX-License-Identifier: Apache-2.0
// A llama2.c forward pass whose attention goes through the near-memory
// selector (lib/select/nmp.h): the engine side of PNM-KV (attend only to the pages
// the selector returns) and of PnG-KV (those pages plus the merged partial the
// "near-memory" side computes over the rest). The weights and tokenizer come
// from tools/llama2 (llama2::Model); the reference is llama2::Runner.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "llama2.h"
#include "select/nmp.h"

namespace nmp_eval {

enum class Mode {
    full,    // all pages, same arithmetic as llama2::Runner (bit-identical logits)
    select,  // PNM-KV: the open page + the selected sealed pages only
    png,     // PnG-KV: selected pages "on the GPU" + near-memory partial over the rest, merged
};

struct Options {
    Mode mode = Mode::full;
    double budget_frac = 0.25;  // pages attended (open page included) / pages in the context, rounded up
    uint32_t page_tokens = 16;
    uint32_t recent = 0;        // most recent sealed pages always selected (the open page always is)
    bool pin_sink = false;      // page 0 pinned as a steady page
    float band = 0;             // hysteresis, in attention-logit units (nats)
    bool oracle = false;        // rank pages by their exact max logit instead of the bound (a reference)
    speckv::nmp::Impl impl = speckv::nmp::Impl::best;
};

// Per-run counters (all layers, all KV head groups).
struct Stats {
    uint64_t tokens = 0;          // forward() calls
    uint64_t selections = 0;      // select_pages() calls (one per layer x group when pages are dropped)
    uint64_t entered = 0;         // sum of pages entering the selection (churn)
    uint64_t selected = 0;        // sum of pages chosen by score (forced excluded from nothing: all chosen)
    uint64_t dropped_steps = 0;   // layer-steps where some sealed page was not recalled
    uint64_t layer_steps = 0;
    double select_ns = 0;         // time in score_pages + select_pages
    double recalled_bytes = 0;    // FP16 K+V of recalled sealed pages
    double full_bytes = 0;        // FP16 K+V of all sealed pages (what recalling everything moves)
    double summary_bytes = 0;     // summaries read next to memory
};

class Runner : private llama2::Layers {
public:
    Runner(const llama2::Model &m, const Options &o);
    const float *forward(int token, int pos);
    Stats stats;
    // Set when a selector call failed (the message), and the run is void.
    std::string error;

private:
    void kv_rows(int l, int pos, float **k, float **v) override;
    int attend(int l, int pos, const float *q, float *out) override;
    void attention(int l, int pos, const float *q, float *out);
    const llama2::Model &m_;
    llama2::Pass pass_;
    Options o_;
    speckv::nmp::Geometry g_;
    size_t sum_size_;
    std::vector<float> key_cache_, value_cache_;
    std::vector<uint8_t> summaries_;                   // [layer][page] summary_size bytes
    std::vector<std::vector<std::vector<uint32_t>>> prev_;  // [layer][group] previous selection
    std::vector<float> att_;
    // scratch
    std::vector<const uint8_t *> sptr_;
    std::vector<float> scores_, pa_out_, pa_m_, pa_l_, pb_out_, pb_m_, pb_l_;
    std::vector<uint32_t> ids_, off_, cids_, coff_, sel_, comp_;
    std::vector<speckv::nmp::PageKV> pages_;
};

struct Result {
    double kl = 0;           // mean KL(p_full || p_mode), nats, all positions
    double kl_sel = 0;       // same, over positions where some layer dropped pages
    double top1 = 0;         // argmax agreement, all positions
    double top1_sel = 0;     // over positions where pages were dropped
    double ppl_full = 0, ppl_mode = 0, ppl_delta_pct = 0;
    double recalled_per_token = 0, full_per_token = 0, summary_per_token = 0;  // bytes per decode step
    double select_us_per_token = 0;
    double churn = 0;        // pages entering per selection (per layer x group), averaged
    double drop_share = 0;   // layer-steps that dropped pages / all layer-steps
    size_t positions = 0, sel_positions = 0;
    std::string error;
};

// Teacher-forced over `windows` windows of `window_len` tokens (BOS + text),
// llama2::Runner (reference) and Runner(o) in lockstep.
Result evaluate(const llama2::Model &m, const std::vector<int> &text, const Options &o, int windows, int window_len);

}  // namespace nmp_eval
