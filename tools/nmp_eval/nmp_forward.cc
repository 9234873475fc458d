// SPDX-License-Identifier: Apache-2.0
// llama2.c forward pass with the attention routed through lib/nmp. The
// non-attention arithmetic is llama2::Pass's, as llama2::Runner's is, so that
// Mode::full gives bit-identical logits to llama2::Runner (tests/nmp checks).
#include "nmp_forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "speckv.h"
#include "util/status.h"

namespace nmp_eval {

namespace nmp = speckv::nmp;

Runner::Runner(const llama2::Model &m, const Options &o) : m_(m), pass_(m), o_(o) {
    const llama2::Config &c = m.c;
    g_.kv_heads = uint32_t(c.n_kv_heads);
    g_.head_dim = uint32_t(c.head_size());
    g_.q_per_kv = uint32_t(c.n_heads / c.n_kv_heads);
    sum_size_ = nmp::summary_size(g_.channels());
    const size_t cache = size_t(c.n_layers) * c.seq_len * c.kv_dim();
    key_cache_.assign(cache, 0.f);
    value_cache_.assign(cache, 0.f);
    const size_t max_pages = (size_t(c.seq_len) + o.page_tokens - 1) / o.page_tokens;
    summaries_.assign(size_t(c.n_layers) * max_pages * sum_size_, 0);
    prev_.assign(size_t(c.n_layers), std::vector<std::vector<uint32_t>>(g_.kv_heads));
    att_.resize(size_t(c.n_heads) * c.seq_len);
    pa_out_.resize(size_t(c.dim));
    pb_out_.resize(size_t(c.dim));
    pa_m_.resize(size_t(c.n_heads));
    pa_l_.resize(size_t(c.n_heads));
    pb_m_.resize(size_t(c.n_heads));
    pb_l_.resize(size_t(c.n_heads));
}

void Runner::attention(int l, int pos, const float *q, float *out) {
    const llama2::Config &c = m_.c;
    const uint32_t P = o_.page_tokens, G = g_.kv_heads, kv_dim = uint32_t(c.kv_dim());
    const uint32_t cur = uint32_t(pos) / P, sealed = cur, total = cur + 1;
    uint32_t k = uint32_t(std::ceil(o_.budget_frac * double(total) - 1e-9));
    k = std::max<uint32_t>(1, std::min(k, total));
    const uint32_t m = k - 1;  // sealed pages recalled besides the open one
    stats.layer_steps++;
    const double page_kv_bytes = double(P) * g_.head_dim * 2 /*K,V*/ * 2 /*FP16*/;
    stats.full_bytes += double(sealed) * G * page_kv_bytes;
    if (o_.mode == Mode::full || m >= sealed) {
        stats.recalled_bytes += double(sealed) * G * page_kv_bytes;
        const size_t loff = size_t(l) * c.seq_len * kv_dim;
        llama2::attention(c, q, key_cache_.data() + loff, value_cache_.data() + loff, pos + 1, att_.data(), out);
        return;
    }
    stats.dropped_steps++;
    const size_t loff = size_t(l) * c.seq_len * kv_dim;
    const uint8_t *lsum = summaries_.data() + size_t(l) * ((size_t(c.seq_len) + P - 1) / P) * sum_size_;
    // Selection per KV head group (sel_ holds G rows of m ids).
    sel_.assign(size_t(G) * m, 0);
    auto t0 = std::chrono::steady_clock::now();
    if (m > 0) {
        sptr_.resize(sealed);
        for (uint32_t p = 0; p < sealed; p++) sptr_[p] = lsum + size_t(p) * sum_size_;
        scores_.resize(size_t(G) * sealed);
        nmp::ScoreOptions so;
        so.impl = o_.impl;
        int rc = SPECKV_OK;
        if (o_.oracle) {
            // Exact: max over the page's tokens and the group's heads of q·k/sqrt(d).
            const uint32_t D = g_.head_dim;
            const float sc = 1.0f / std::sqrt(float(D));
            for (uint32_t g = 0; g < G; g++)
                for (uint32_t p = 0; p < sealed; p++) {
                    float best = -INFINITY;
                    for (uint32_t j = 0; j < g_.q_per_kv; j++) {
                        const float *qh = q + (size_t(g) * g_.q_per_kv + j) * D;
                        for (uint32_t t = 0; t < P; t++) {
                            const float *kr = key_cache_.data() + loff + (size_t(p) * P + t) * kv_dim + g * D;
                            float d = 0;
                            for (uint32_t c = 0; c < D; c++) d += qh[c] * kr[c];
                            best = std::max(best, d * sc);
                        }
                    }
                    scores_[size_t(g) * sealed + p] = best;
                }
        } else {
            rc = nmp::score_pages(g_, q, size_t(c.dim), sptr_.data(), sealed, scores_.data(), so);
        }
        for (uint32_t g = 0; g < G && rc == SPECKV_OK; g++) {
            nmp::SelectParams sp;
            sp.budget = m;
            sp.recent = std::min(o_.recent, m);
            sp.band = o_.band;
            const uint32_t sink = 0;
            const bool pin = o_.pin_sink && sp.recent < m;
            auto &prev = prev_[size_t(l)][g];
            uint32_t entered = 0;
            rc = nmp::select_pages(scores_.data() + size_t(g) * sealed, sealed, sp, pin ? &sink : nullptr, pin ? 1 : 0,
                                   prev.data(), prev.size(), sel_.data() + size_t(g) * m, m, &entered);
            if (rc == SPECKV_OK) {
                prev.assign(sel_.begin() + long(g) * m, sel_.begin() + long(g + 1) * m);
                stats.selections++;
                stats.entered += entered;
                stats.selected += m;
            }
        }
        if (rc != SPECKV_OK && error.empty()) error = speckv::last_error();
    }
    stats.select_ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    stats.recalled_bytes += double(m) * G * page_kv_bytes;
    stats.summary_bytes += m ? double(sealed) * double(sum_size_) : 0;

    pages_.resize(total);
    for (uint32_t p = 0; p < total; p++) {
        pages_[p].k = key_cache_.data() + loff + size_t(p) * P * kv_dim;
        pages_[p].v = value_cache_.data() + loff + size_t(p) * P * kv_dim;
        pages_[p].tokens = p < cur ? P : uint32_t(pos) - cur * P + 1;
        pages_[p].row_stride = kv_dim;
    }
    // "GPU" set per group: the selected sealed pages + the open page.
    ids_.clear();
    off_.assign(1, 0);
    for (uint32_t g = 0; g < G; g++) {
        ids_.insert(ids_.end(), sel_.begin() + long(g) * m, sel_.begin() + long(g + 1) * m);
        ids_.push_back(cur);
        off_.push_back(uint32_t(ids_.size()));
    }
    nmp::Partial a{pa_out_.data(), pa_m_.data(), pa_l_.data()};
    int rc = nmp::attend_pages(g_, SPECKV_DTYPE_FP32, q, size_t(c.dim), pages_.data(), total, ids_.data(),
                               ids_.size(), off_.data(), 0, a);
    if (rc != SPECKV_OK && error.empty()) error = speckv::last_error();
    if (o_.mode == Mode::png) {
        // Near-memory side: every sealed page the GPU did not get.
        cids_.clear();
        coff_.assign(1, 0);
        comp_.resize(sealed);
        for (uint32_t g = 0; g < G; g++) {
            const size_t nc = nmp::complement(sel_.data() + size_t(g) * m, m, sealed, comp_.data());
            cids_.insert(cids_.end(), comp_.begin(), comp_.begin() + long(nc));
            coff_.push_back(uint32_t(cids_.size()));
        }
        nmp::Partial b{pb_out_.data(), pb_m_.data(), pb_l_.data()};
        rc = nmp::attend_pages(g_, SPECKV_DTYPE_FP32, q, size_t(c.dim), pages_.data(), total, cids_.data(),
                               cids_.size(), coff_.data(), 0, b);
        if (rc != SPECKV_OK && error.empty()) error = speckv::last_error();
        nmp::merge_partials(g_.q_heads(), g_.head_dim, a, b, a);
    }
    std::memcpy(out, pa_out_.data(), size_t(c.dim) * 4);
}

void Runner::kv_rows(int l, int pos, float **k, float **v) {
    const size_t row = (size_t(l) * m_.c.seq_len + size_t(pos)) * m_.c.kv_dim();
    *k = key_cache_.data() + row;
    *v = value_cache_.data() + row;
}

int Runner::attend(int l, int pos, const float *q, float *out) {
    const llama2::Config &c = m_.c;
    const int kv_dim = c.kv_dim();
    const uint32_t P = o_.page_tokens;
    const size_t loff = size_t(l) * c.seq_len * kv_dim;
    // A page is sealed when its last token's K is written: summarise it.
    if ((uint32_t(pos) + 1) % P == 0 && o_.mode != Mode::full) {
        const uint32_t page = uint32_t(pos) / P;
        uint8_t *dst = summaries_.data() + (size_t(l) * ((size_t(c.seq_len) + P - 1) / P) + page) * sum_size_;
        int rc = speckv::nmp::summarize(SPECKV_DTYPE_FP32, key_cache_.data() + loff + size_t(page) * P * kv_dim,
                                        P, uint32_t(kv_dim), size_t(kv_dim), dst, sum_size_);
        if (rc != SPECKV_OK && error.empty()) error = speckv::last_error();
    }
    attention(l, pos, q, out);
    return 0;
}

const float *Runner::forward(int token, int pos) {
    stats.tokens++;
    const float *logits = nullptr;
    pass_.run(token, pos, *this, &logits);
    return logits;
}

namespace {
void log_softmax(const float *x, int n, std::vector<double> *out) {
    double mx = x[0];
    for (int i = 1; i < n; i++) mx = std::max(mx, double(x[i]));
    double s = 0;
    for (int i = 0; i < n; i++) s += std::exp(double(x[i]) - mx);
    const double lse = mx + std::log(s);
    out->resize(size_t(n));
    for (int i = 0; i < n; i++) (*out)[size_t(i)] = double(x[i]) - lse;
}
}  // namespace

Result evaluate(const llama2::Model &m, const std::vector<int> &text, const Options &o, int windows, int window_len) {
    const llama2::Config &c = m.c;
    window_len = std::min(window_len, c.seq_len);
    Result res;
    double nll_f = 0, nll_m = 0, kl = 0, kl_sel = 0;
    size_t agree = 0, agree_sel = 0, npos = 0, nsel = 0, npred = 0;
    Stats tot;
    std::vector<double> lpf, lpm;
    for (int w = 0; w < windows; w++) {
        const size_t off = size_t(w) * size_t(window_len - 1);
        if (off + size_t(window_len - 1) > text.size()) break;
        std::vector<int> toks{1};
        toks.insert(toks.end(), text.begin() + long(off), text.begin() + long(off + size_t(window_len - 1)));
        llama2::Runner ref(m);
        Runner run(m, o);
        const int n = int(toks.size());
        for (int pos = 0; pos < n; pos++) {
            const uint64_t dropped_before = run.stats.dropped_steps;
            const float *lf = ref.forward(toks[size_t(pos)], pos);
            log_softmax(lf, c.vocab_size, &lpf);
            const float *lm = run.forward(toks[size_t(pos)], pos);
            log_softmax(lm, c.vocab_size, &lpm);
            if (!run.error.empty()) {
                res.error = run.error;
                return res;
            }
            if (pos + 1 < n) {
                const int tgt = toks[size_t(pos + 1)];
                nll_f -= lpf[size_t(tgt)];
                nll_m -= lpm[size_t(tgt)];
                npred++;
            }
            double k = 0;
            for (int i = 0; i < c.vocab_size; i++) k += std::exp(lpf[size_t(i)]) * (lpf[size_t(i)] - lpm[size_t(i)]);
            const bool same = llama2::argmax(lf, c.vocab_size) == llama2::argmax(lm, c.vocab_size);
            kl += k;
            agree += same;
            npos++;
            if (run.stats.dropped_steps > dropped_before) {
                kl_sel += k;
                agree_sel += same;
                nsel++;
            }
        }
        const Stats &s = run.stats;
        tot.tokens += s.tokens;
        tot.selections += s.selections;
        tot.entered += s.entered;
        tot.selected += s.selected;
        tot.dropped_steps += s.dropped_steps;
        tot.layer_steps += s.layer_steps;
        tot.select_ns += s.select_ns;
        tot.recalled_bytes += s.recalled_bytes;
        tot.full_bytes += s.full_bytes;
        tot.summary_bytes += s.summary_bytes;
    }
    res.positions = npos;
    res.sel_positions = nsel;
    res.kl = npos ? kl / double(npos) : 0;
    res.top1 = npos ? double(agree) / double(npos) : 0;
    res.kl_sel = nsel ? kl_sel / double(nsel) : 0;
    res.top1_sel = nsel ? double(agree_sel) / double(nsel) : 1;
    res.ppl_full = std::exp(nll_f / double(std::max<size_t>(npred, 1)));
    res.ppl_mode = std::exp(nll_m / double(std::max<size_t>(npred, 1)));
    res.ppl_delta_pct = 100.0 * (res.ppl_mode / res.ppl_full - 1.0);
    const double T = double(std::max<uint64_t>(tot.tokens, 1));
    res.recalled_per_token = tot.recalled_bytes / T;
    res.full_per_token = tot.full_bytes / T;
    res.summary_per_token = tot.summary_bytes / T;
    res.select_us_per_token = tot.select_ns / 1e3 / T;
    res.churn = tot.selections ? double(tot.entered) / double(tot.selections) : 0;
    res.drop_share = tot.layer_steps ? double(tot.dropped_steps) / double(tot.layer_steps) : 0;
    return res;
}

}  // namespace nmp_eval
