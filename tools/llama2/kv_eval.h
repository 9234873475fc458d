// SPDX-License-Identifier: Apache-2.0
// Real K/V for the codec: capture a model's cache, and measure end-to-end
// quality when every K/V read goes through the codec (encode + decode of the
// page that holds it, FP16 pages of `page_tokens` tokens x kv_dim).
#pragma once
#include <string>
#include <vector>

#include "codec/codec.h"
#include "llama2.h"

namespace llama2 {

// K/V of every layer after running `tokens` teacher-forced from position 0.
// Layout [layer][token][kv_dim], FP32 (K after RoPE), as run.c caches it.
struct KvCapture {
    int n_layers = 0, kv_dim = 0, tokens = 0;
    std::vector<float> k, v;
    const float *k_layer(int l) const { return k.data() + size_t(l) * tokens * kv_dim; }
    const float *v_layer(int l) const { return v.data() + size_t(l) * tokens * kv_dim; }
};
KvCapture capture_kv(const Model &m, const std::vector<int> &tokens);

// Greedy (temperature 0) continuation of BOS for `steps` tokens (BOS excluded).
std::vector<int> greedy(const Model &m, int steps);

// Which cache entries an attention read sees through the codec.
//   sealed: what the pool does. A page is coded when a write completes it;
//           the page being filled stays exact (FP32 as written).
//   all:    every entry is coded: the page being filled is re-encoded on
//           every write, so every read sees a quantised current page.
enum class CodePolicy { sealed, all };
const char *policy_name(CodePolicy p);

// Per layer, which codec preset K and V pages use.
struct KvPolicy {
    std::vector<speckv::codec::Mode> k_mode, v_mode;
    int page_tokens = 64;
    CodePolicy coding = CodePolicy::sealed;
    speckv::codec::Impl impl = speckv::codec::Impl::best;
    static KvPolicy uniform(int n_layers, speckv::codec::Mode k, speckv::codec::Mode v, int page_tokens);
};

struct EvalResult {
    double attn_rel_err = 0;  // sqrt(sum |a-a*|^2 / sum |a*|^2), attention outputs, same q
    double attn_cos = 0;      // mean cosine(a, a*) over (layer, position)
    double kl = 0;            // mean KL(p_exact || p_codec) of the next-token distribution (nats)
    double top1_agree = 0;    // share of positions where argmax agrees
    double ppl_exact = 0, ppl_codec = 0, ppl_delta_pct = 0;
    double ratio = 0;         // FP16 bytes / record bytes, over the pages coded (sealed: completed
                              // pages only; all: every page, the last partial one included)
    size_t fp16_bytes = 0, record_bytes = 0, positions = 0;
};

// Runs `windows` windows of `window_len` tokens (BOS + text) from `text`
// twice in lockstep: exact FP32 cache and cache through the codec, coded
// per policy.coding.
EvalResult evaluate(const Model &m, const std::vector<int> &text, const KvPolicy &policy, int windows,
                    int window_len);

// Pages (FP16, page_tokens x kv_dim) of one layer's K or V from a capture.
std::vector<uint16_t> fp16_pages(const KvCapture &cap, int layer, bool value, int page_tokens, size_t *npages);

// Per layer adaptive choice (docs/codec.md §10) by a reconstruction error
// budget: for each layer, K among the key candidates of `set` and V among
// its value candidates, by codec::choose_mode (highest ratio within the
// error budget) on pages from `cal` (a calibration capture). Keys get their
// own, tighter budget: attention is far more sensitive to K error than to V
// error (measured, docs §14). What the pool does, with no model at hand.
KvPolicy adaptive_policy(const KvCapture &cal, int page_tokens, double k_max_err, double v_max_err,
                         speckv::codec::AdaptiveSet set);

// Per layer adaptive choice by a KL budget under the sealed policy (docs/codec.md
// §10): every (layer, K or V) starts in clear and climbs its ladder (the
// candidates of `set` by ratio on its pages of the K/V of BOS + cal_text,
// ascending) one step per round, round-robin over the layers: to the next
// rung at which the mean next-token KL of the whole policy on BOS + cal_text
// (one window, at most seq_len tokens, sealed) stays within max_kl; a
// (layer, kind) with no such rung left stays where it is. The KL of the
// returned policy on cal_text is within max_kl by construction.
// AdaptiveMetric::attn_err budgets the attention outputs' relative error
// (EvalResult::attn_rel_err, same queries) instead of the KL: max_kl is then that bound.
enum class AdaptiveMetric { kl, attn_err };
struct AdaptiveKl {
    KvPolicy policy;
    double cal_kl = 0;        // sealed KL of `policy` on cal_text (<= max_kl with the kl metric)
    double cal_attn_err = 0;  // its attention relative error (<= the bound with attn_err)
    int evaluations = 0;      // evaluate() runs it took
};
AdaptiveKl adaptive_policy_kl(const Model &m, const std::vector<int> &cal_text, int page_tokens, double max_kl, speckv::codec::AdaptiveSet set,
                              speckv::codec::Impl impl = speckv::codec::Impl::best,
                              AdaptiveMetric metric = AdaptiveMetric::kl);

// Reads a whole file ("" on failure).
std::string read_text(const std::string &path);

}  // namespace llama2
