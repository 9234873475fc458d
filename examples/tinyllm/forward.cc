// SPDX-License-Identifier: Apache-2.0
#include "forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

namespace tinyllm {

PooledForward::PooledForward(const llama2::Model &m, PagedKv &kv) : m_(m), kv_(kv), pass_(m) {
    const llama2::Config &c = m.c;
    k_.resize(size_t(c.kv_dim()));
    v_.resize(size_t(c.kv_dim()));
    att_.resize(size_t(c.n_heads) * c.seq_len);
    kc_.resize(size_t(c.seq_len) * c.kv_dim());
    vc_.resize(size_t(c.seq_len) * c.kv_dim());
}

// Attention through near-memory selection: speckv_select picks the pages
// (the pool scores its page summaries against q), only those are read back;
// with Attn::attend the rest is attended next to the pool and merged exactly.
int PooledForward::sparse_attention(uint64_t request, int layer, int npos, const float *q, float *out) {
    const llama2::Config &c = m_.c;
    const int hs = c.head_size(), kv_dim = c.kv_dim(), kv_mul = c.n_heads / c.n_kv_heads, H = c.n_heads;
    const int npages = (npos + kPageTokens - 1) / kPageTokens;
    speckv_select_params sp;
    std::memset(&sp, 0, sizeof sp);
    sp.struct_size = sizeof sp;
    sp.kv_heads = uint32_t(c.n_kv_heads);
    sp.head_dim = uint32_t(hs);
    sp.q_per_kv = uint32_t(kv_mul);
    sp.budget = uint32_t(std::max(1.0, std::ceil(frac_ * npages)));
    sp.recent = 1;
    sp.context_tokens = uint64_t(npos);
    refs_.resize(sp.budget);
    size_t n = 0;
    auto t0 = std::chrono::steady_clock::now();
    if (int rc = speckv_select(kv_.pool(), tenant_, request, uint32_t(layer), q, size_t(c.dim), &sp,
                               refs_.data(), refs_.size(), &n, nullptr);
        rc != SPECKV_OK)
        return rc;
    ast_.select_ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    refs_.resize(n);
    ast_.steps++;
    ast_.pages_total += uint64_t(npages);
    ast_.pages_recalled += n;
    // The selected pages, compacted: tokens in page order.
    int m = 0;
    for (const speckv_page_ref &r : refs_) {
        const int page = int(r.token_pos / kPageTokens);
        if (int rc = kv_.gather_page(request, layer, page, int(r.tokens), kc_.data() + size_t(m) * kv_dim,
                                     vc_.data() + size_t(m) * kv_dim);
            rc != SPECKV_OK)
            return rc;
        m += int(r.tokens);
    }
    if (mode_ == Attn::select) {
        llama2::attention(c, q, kc_.data(), vc_.data(), m, att_.data(), out);
        return SPECKV_OK;
    }
    // Attn::attend: this side's partial over the selected tokens ...
    pout_.assign(size_t(H) * hs, 0.f);
    pmax_.assign(size_t(H), 0.f);
    psum_.assign(size_t(H), 0.f);
    for (int h = 0; h < H; h++) {
        const float *qh = q + h * hs;
        float *att = att_.data() + size_t(h) * c.seq_len;
        float mx = -INFINITY;
        for (int t = 0; t < m; t++) {
            const float *k = kc_.data() + size_t(t) * kv_dim + (h / kv_mul) * hs;
            float score = 0;
            for (int i = 0; i < hs; i++) score += qh[i] * k[i];
            att[t] = score / std::sqrt(float(hs));
            mx = std::max(mx, att[t]);
        }
        float sum = 0;
        for (int t = 0; t < m; t++) sum += (att[t] = std::exp(att[t] - mx));
        float *o = pout_.data() + size_t(h) * hs;
        for (int t = 0; t < m; t++) {
            const float *v = vc_.data() + size_t(t) * kv_dim + (h / kv_mul) * hs;
            for (int i = 0; i < hs; i++) o[i] += att[t] / sum * v[i];
        }
        pmax_[size_t(h)] = mx;
        psum_[size_t(h)] = sum;
    }
    // ... the pool's over the rest, and the exact merge.
    nout_.assign(size_t(H) * hs, 0.f);
    nmax_.assign(size_t(H), 0.f);
    nsum_.assign(size_t(H), 0.f);
    speckv_partial mine{sizeof(speckv_partial), pout_.data(), pmax_.data(), psum_.data()};
    speckv_partial near{sizeof(speckv_partial), nout_.data(), nmax_.data(), nsum_.data()};
    t0 = std::chrono::steady_clock::now();
    if (int rc = speckv_attend(kv_.pool(), tenant_, request, uint32_t(layer), q, size_t(c.dim), &sp,
                               refs_.data(), refs_.size(), &near);
        rc != SPECKV_OK)
        return rc;
    ast_.attend_ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    rmax_.resize(size_t(H));
    rsum_.resize(size_t(H));
    speckv_partial res{sizeof(speckv_partial), out, rmax_.data(), rsum_.data()};
    return speckv_merge_partials(uint32_t(H), uint32_t(hs), &mine, &near, &res);
}

// What runs after layer l: the next layer of this request, or the first
// layer of the next request in the batch.
int PooledForward::begin(int l, int pos) {
    return l + 1 < m_.c.n_layers ? kv_.hint(request_, l + 1, pos)
           : next_.valid         ? kv_.hint(next_.request, 0, next_.pos)
                                 : SPECKV_OK;
}

void PooledForward::kv_rows(int, int, float **k, float **v) {
    *k = k_.data();
    *v = v_.data();
}

// The cache lives in the pool: append this position, then read the whole
// history [0, pos] back for attention.
int PooledForward::attend(int l, int pos, const float *q, float *out) {
    if (int rc = kv_.append(request_, l, pos, k_.data(), v_.data()); rc != SPECKV_OK) return rc;
    if (mode_ != Attn::full) return sparse_attention(request_, l, pos + 1, q, out);
    if (int rc = kv_.gather(request_, l, pos + 1, kc_.data(), vc_.data()); rc != SPECKV_OK) return rc;
    llama2::attention(m_.c, q, kc_.data(), vc_.data(), pos + 1, att_.data(), out);
    ast_.steps++;
    ast_.pages_total += uint64_t(pos / kPageTokens + 1);
    ast_.pages_recalled += uint64_t(pos / kPageTokens + 1);
    return SPECKV_OK;
}

int PooledForward::forward(uint64_t request, int token, int pos, const NextUnit &next, const float **logits) {
    const llama2::Config &c = m_.c;
    if (token < 0 || token >= c.vocab_size || pos < 0 || pos >= c.seq_len) {
        return SPECKV_EINVAL;
    }
    request_ = request;
    next_ = next;
    return pass_.run(token, pos, *this, logits);
}

}  // namespace tinyllm
