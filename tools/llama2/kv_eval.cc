// SPDX-License-Identifier: Apache-2.0
#include "kv_eval.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "speckv.h"
#include "util/status.h"

namespace llama2 {

namespace cdc = speckv::codec;

KvCapture capture_kv(const Model &m, const std::vector<int> &tokens) {
    Runner r(m);
    const Config &c = m.c;
    KvCapture cap;
    cap.n_layers = c.n_layers;
    cap.kv_dim = c.kv_dim();
    cap.tokens = std::min<int>(int(tokens.size()), c.seq_len);
    for (int p = 0; p < cap.tokens; p++) r.forward(tokens[size_t(p)], p);
    const size_t per = size_t(cap.tokens) * cap.kv_dim;
    cap.k.resize(per * c.n_layers);
    cap.v.resize(per * c.n_layers);
    for (int l = 0; l < c.n_layers; l++) {
        const size_t off = size_t(l) * c.seq_len * cap.kv_dim;
        std::copy_n(r.key_cache.data() + off, per, cap.k.data() + l * per);
        std::copy_n(r.value_cache.data() + off, per, cap.v.data() + l * per);
    }
    return cap;
}

std::vector<int> greedy(const Model &m, int steps) {
    Runner r(m);
    std::vector<int> out;
    int tok = 1;
    for (int pos = 0; pos < steps && pos < m.c.seq_len; pos++) {
        const float *lg = r.forward(tok, pos);
        tok = argmax(lg, m.c.vocab_size);
        out.push_back(tok);
    }
    return out;
}

const char *policy_name(CodePolicy p) { return p == CodePolicy::sealed ? "sealed" : "all"; }

KvPolicy KvPolicy::uniform(int n_layers, cdc::Mode k, cdc::Mode v, int page_tokens) {
    KvPolicy p;
    p.k_mode.assign(size_t(n_layers), k);
    p.v_mode.assign(size_t(n_layers), v);
    p.page_tokens = page_tokens;
    return p;
}

namespace {

void log_softmax(const float *x, int n, std::vector<double> *out) {
    double mx = x[0];
    for (int i = 1; i < n; i++) mx = std::max(mx, double(x[i]));
    double s = 0;
    for (int i = 0; i < n; i++) s += std::exp(double(x[i]) - mx);
    double lse = mx + std::log(s);
    out->resize(size_t(n));
    for (int i = 0; i < n; i++) (*out)[size_t(i)] = double(x[i]) - lse;
}

// Encodes + decodes rows [t0, t1] of one layer's cache into `dst_cache`.
void pass_page(const float *src, float *dst, size_t rows, int kv_dim, cdc::Mode mode, cdc::Impl impl,
               std::vector<uint16_t> &h, std::vector<uint8_t> &rec, std::vector<uint16_t> &dec, size_t *rec_len) {
    const size_t n = rows * size_t(kv_dim);
    h.resize(n);
    for (size_t i = 0; i < n; i++) h[i] = cdc::fp32_to_fp16_rne(src[i]);
    rec.resize(cdc::max_record_size(n * 2));
    dec.resize(n);
    size_t len = 0, out = 0;
    if (cdc::encode(mode, SPECKV_DTYPE_FP16, h.data(), n * 2, cdc::Layout{uint32_t(kv_dim)}, rec.data(), rec.size(),
                    &len, impl) != SPECKV_OK ||
        cdc::decode(rec.data(), len, dec.data(), n * 2, &out, impl) != SPECKV_OK) {
        std::fprintf(stderr, "kv_eval: codec failed: %s\n", speckv::last_error());
        std::abort();
    }
    for (size_t i = 0; i < n; i++) dst[i] = cdc::fp16_to_fp32(dec[i]);
    *rec_len = len;
}

}  // namespace

EvalResult evaluate(const Model &m, const std::vector<int> &text, const KvPolicy &policy, int windows,
                    int window_len) {
    const Config &c = m.c;
    const int kv_dim = c.kv_dim(), P = policy.page_tokens;
    window_len = std::min(window_len, c.seq_len);
    EvalResult res;
    double nll_e = 0, nll_c = 0, kl = 0;
    size_t agree = 0, npos = 0;
    std::vector<double> lpe, lpc;
    std::vector<uint16_t> h, dec;
    std::vector<uint8_t> rec;
    double attn_err2 = 0, attn_ref2 = 0, attn_cos = 0;
    uint64_t attn_n = 0;
    for (int w = 0; w < windows; w++) {
        const size_t off = size_t(w) * size_t(window_len - 1);
        if (off + size_t(window_len - 1) > text.size()) break;
        std::vector<int> toks{1};
        toks.insert(toks.end(), text.begin() + long(off), text.begin() + long(off + size_t(window_len - 1)));
        Runner ex(m), cd(m);
        cd.use_read_cache = true;
        cd.measure_attention = true;
        int cur_len = int(toks.size());
        const bool sealed = policy.coding == CodePolicy::sealed;
        cd.on_kv_write = [&](int l, int pos) {
            const size_t loff = size_t(l) * c.seq_len * kv_dim;
            const int t0 = (pos / P) * P;
            const size_t rows = size_t(pos - t0 + 1);
            const size_t roff = loff + size_t(t0) * kv_dim;
            // sealed (the pool's policy): the entry just written is read
            // exact (Runner copied it into k_read/v_read) until the write
            // that completes its page seals (codes) the page.
            if (sealed && int(rows) != P) return;
            size_t lk = 0, lv = 0;
            pass_page(cd.key_cache.data() + roff, cd.k_read.data() + roff, rows, kv_dim, policy.k_mode[size_t(l)],
                      policy.impl, h, rec, dec, &lk);
            pass_page(cd.value_cache.data() + roff, cd.v_read.data() + roff, rows, kv_dim,
                      policy.v_mode[size_t(l)], policy.impl, h, rec, dec, &lv);
            if (int(rows) == P || pos == cur_len - 1) {
                res.fp16_bytes += 2 * rows * size_t(kv_dim) * 2;
                res.record_bytes += lk + lv;
            }
        };
        for (int pos = 0; pos < cur_len; pos++) {
            const float *le = ex.forward(toks[size_t(pos)], pos);
            log_softmax(le, c.vocab_size, &lpe);
            const float *lc = cd.forward(toks[size_t(pos)], pos);
            log_softmax(lc, c.vocab_size, &lpc);
            if (pos + 1 < cur_len) {
                const int tgt = toks[size_t(pos + 1)];
                nll_e -= lpe[size_t(tgt)];
                nll_c -= lpc[size_t(tgt)];
            }
            double k = 0;
            for (int i = 0; i < c.vocab_size; i++) k += std::exp(lpe[size_t(i)]) * (lpe[size_t(i)] - lpc[size_t(i)]);
            kl += k;
            agree += argmax(le, c.vocab_size) == argmax(lc, c.vocab_size);
            npos++;
        }
        attn_err2 += cd.attn_err2;
        attn_ref2 += cd.attn_ref2;
        attn_cos += cd.attn_cos_sum;
        attn_n += cd.attn_count;
    }
    const size_t npred = npos > size_t(windows) ? npos - size_t(windows) : 1;
    res.positions = npos;
    res.kl = npos ? kl / double(npos) : 0;
    res.top1_agree = npos ? double(agree) / double(npos) : 0;
    res.ppl_exact = std::exp(nll_e / double(npred));
    res.ppl_codec = std::exp(nll_c / double(npred));
    res.ppl_delta_pct = 100.0 * (res.ppl_codec / res.ppl_exact - 1.0);
    res.attn_rel_err = attn_ref2 > 0 ? std::sqrt(attn_err2 / attn_ref2) : 0;
    res.attn_cos = attn_n ? attn_cos / double(attn_n) : 1;
    res.ratio = res.record_bytes ? double(res.fp16_bytes) / double(res.record_bytes) : 0;
    return res;
}

std::vector<uint16_t> fp16_pages(const KvCapture &cap, int layer, bool value, int page_tokens, size_t *npages) {
    const float *src = value ? cap.v_layer(layer) : cap.k_layer(layer);
    const size_t np = size_t(cap.tokens / page_tokens);
    const size_t n = np * size_t(page_tokens) * cap.kv_dim;
    std::vector<uint16_t> out(n);
    for (size_t i = 0; i < n; i++) out[i] = cdc::fp32_to_fp16_rne(src[i]);
    *npages = np;
    return out;
}

KvPolicy adaptive_policy(const KvCapture &cal, int page_tokens, double k_max_err, double v_max_err,
                         cdc::AdaptiveSet set) {
    KvPolicy p = KvPolicy::uniform(cal.n_layers, cdc::Mode::raw, cdc::Mode::raw, page_tokens);
    for (int l = 0; l < cal.n_layers; l++) {
        for (int v = 0; v < 2; v++) {
            size_t np = 0;
            auto pages = fp16_pages(cal, l, v == 1, page_tokens, &np);
            if (!np) continue;
            size_t nc = 0;
            const cdc::Mode *cands = cdc::adaptive_candidates(v == 0, set, &nc);
            cdc::Mode mode = cdc::choose_mode(SPECKV_DTYPE_FP16, pages.data(), np, size_t(page_tokens) * cal.kv_dim,
                                              cdc::Layout{uint32_t(cal.kv_dim)}, v ? v_max_err : k_max_err, cands, nc);
            (v ? p.v_mode : p.k_mode)[size_t(l)] = mode;
        }
    }
    return p;
}

AdaptiveKl adaptive_policy_kl(const Model &m, const std::vector<int> &cal_text, int page_tokens, double max_kl,
                              cdc::AdaptiveSet set, cdc::Impl impl, AdaptiveMetric metric) {
    const int L = m.c.n_layers;
    const int window = int(std::min<size_t>(cal_text.size() + 1, size_t(m.c.seq_len)));
    std::vector<int> bos_text{1};
    bos_text.insert(bos_text.end(), cal_text.begin(), cal_text.begin() + long(window - 1));
    const KvCapture cal = capture_kv(m, bos_text);
    // Each (layer, kind)'s ladder: the candidates by their ratio on its
    // calibration pages, ascending; of two within 0.5 % the cheaper encoder
    // (choose_mode's tie rule), so every rung gains ratio.
    std::vector<std::vector<cdc::Mode>> ladder(size_t(2 * L));
    for (int l = 0; l < L; l++)
        for (int v = 0; v < 2; v++) {
            size_t np = 0;
            auto pages = fp16_pages(cal, l, v == 1, page_tokens, &np);
            if (!np) continue;  // shorter than a page: stays in clear
            size_t nc = 0;
            const cdc::Mode *cands = cdc::adaptive_candidates(v == 0, set, &nc);
            std::vector<cdc::ModeScore> sc(nc);
            size_t ns = nc;
            cdc::choose_mode(SPECKV_DTYPE_FP16, pages.data(), np, size_t(page_tokens) * cal.kv_dim,
                             cdc::Layout{uint32_t(cal.kv_dim)}, HUGE_VAL, cands, nc, sc.data(), &ns);
            sc.resize(ns);
            std::sort(sc.begin(), sc.end(), [](const cdc::ModeScore &a, const cdc::ModeScore &b) {
                return a.ratio < b.ratio;
            });
            std::vector<cdc::ModeScore> rungs;
            for (const auto &s : sc) {
                if (!rungs.empty() && s.ratio <= rungs.back().ratio * 1.005) {
                    if (s.encode_ns_per_value < rungs.back().encode_ns_per_value) rungs.back() = s;
                    continue;
                }
                rungs.push_back(s);
            }
            for (const auto &s : rungs) ladder[size_t(2 * l + v)].push_back(s.mode);
        }
    AdaptiveKl out;
    out.policy = KvPolicy::uniform(L, cdc::Mode::raw, cdc::Mode::raw, page_tokens);
    out.policy.coding = CodePolicy::sealed;
    out.policy.impl = impl;
    // The budgeted metric of a policy; *kl and *attn get both figures.
    auto metric_of = [&](const KvPolicy &p, double *kl, double *attn) {
        out.evaluations++;
        const EvalResult e = evaluate(m, cal_text, p, 1, window);
        *kl = e.kl, *attn = e.attn_rel_err;
        return metric == AdaptiveMetric::kl ? e.kl : e.attn_rel_err;
    };
    metric_of(out.policy, &out.cal_kl, &out.cal_attn_err);  // in clear: FP16 rounding only
    std::vector<size_t> rung(size_t(2 * L), 0);  // next rung to try; 0 = in clear
    std::vector<bool> frozen(size_t(2 * L), false);
    for (bool moved = true; moved;) {
        moved = false;
        for (size_t s = 0; s < size_t(2 * L); s++) {
            if (frozen[s]) continue;
            // One step: the next rung within budget. A rung over budget is
            // skipped, not final: the ladder goes by ratio, and a preset of
            // another grouping may cost less KL (int8's one scale per page
            // against k5p's per channel, on keys with outlier channels).
            auto &slot = (s & 1 ? out.policy.v_mode : out.policy.k_mode)[s / 2];
            const cdc::Mode was = slot;
            bool stepped = false;
            for (size_t r = rung[s]; r < ladder[s].size() && !stepped; r++) {
                slot = ladder[s][r];
                double kl = 0, attn = 0;
                if (metric_of(out.policy, &kl, &attn) <= max_kl)
                    rung[s] = r + 1, out.cal_kl = kl, out.cal_attn_err = attn, stepped = moved = true;
            }
            if (!stepped) slot = was, frozen[s] = true;
        }
    }
    return out;
}

std::string read_text(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return {};
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

}  // namespace llama2
