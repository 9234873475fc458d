// SPDX-License-Identifier: Apache-2.0
#include "forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

namespace tinyllm {

namespace {

// The three kernels of run.c, the very functions the plain Runner calls:
// token identity with the plain run depends on the same operation order.
using llama2::matmul;
using llama2::rmsnorm;
using llama2::softmax;

}  // namespace

PooledForward::PooledForward(const llama2::Model &m, PagedKv &kv) : m_(m), kv_(kv) {
    const llama2::Config &c = m.c;
    x_.resize(size_t(c.dim));
    xb_.resize(size_t(c.dim));
    xb2_.resize(size_t(c.dim));
    hb_.resize(size_t(c.hidden_dim));
    hb2_.resize(size_t(c.hidden_dim));
    q_.resize(size_t(c.dim));
    k_.resize(size_t(c.kv_dim()));
    v_.resize(size_t(c.kv_dim()));
    att_.resize(size_t(c.n_heads) * c.seq_len);
    logits_.resize(size_t(c.vocab_size));
    kc_.resize(size_t(c.seq_len) * c.kv_dim());
    vc_.resize(size_t(c.seq_len) * c.kv_dim());
}

// Multi-head (grouped-query) attention of q_ over positions [0, npos) of the
// K/V gathered from the pool into kc_/vc_; result in xb_.
void PooledForward::attention(int npos) {
    const llama2::Config &c = m_.c;
    const int hs = c.head_size(), kv_dim = c.kv_dim(), kv_mul = c.n_heads / c.n_kv_heads;
    for (int h = 0; h < c.n_heads; h++) {
        const float *q = q_.data() + h * hs;
        float *att = att_.data() + size_t(h) * c.seq_len;
        for (int t = 0; t < npos; t++) {
            const float *k = kc_.data() + size_t(t) * kv_dim + (h / kv_mul) * hs;
            float score = 0;
            for (int i = 0; i < hs; i++) score += q[i] * k[i];
            att[t] = score / std::sqrt(float(hs));
        }
        softmax(att, npos);
        float *xb = xb_.data() + h * hs;
        std::fill(xb, xb + hs, 0.f);
        for (int t = 0; t < npos; t++) {
            const float *v = vc_.data() + size_t(t) * kv_dim + (h / kv_mul) * hs;
            for (int i = 0; i < hs; i++) xb[i] += att[t] * v[i];
        }
    }
}

// Attention through near-memory selection: speckv_select picks the pages
// (the pool scores its page summaries against q_), only those are read back;
// with Attn::attend the rest is attended next to the pool and merged exactly.
int PooledForward::sparse_attention(uint64_t request, int layer, int npos) {
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
    if (int rc = speckv_select(kv_.pool(), tenant_, request, uint32_t(layer), q_.data(), size_t(c.dim), &sp,
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
        attention(m);
        return SPECKV_OK;
    }
    // Attn::attend: this side's partial over the selected tokens ...
    pout_.assign(size_t(H) * hs, 0.f);
    pmax_.assign(size_t(H), 0.f);
    psum_.assign(size_t(H), 0.f);
    for (int h = 0; h < H; h++) {
        const float *q = q_.data() + h * hs;
        float *att = att_.data() + size_t(h) * c.seq_len;
        float mx = -INFINITY;
        for (int t = 0; t < m; t++) {
            const float *k = kc_.data() + size_t(t) * kv_dim + (h / kv_mul) * hs;
            float score = 0;
            for (int i = 0; i < hs; i++) score += q[i] * k[i];
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
    if (int rc = speckv_attend(kv_.pool(), tenant_, request, uint32_t(layer), q_.data(), size_t(c.dim), &sp,
                               refs_.data(), refs_.size(), &near);
        rc != SPECKV_OK)
        return rc;
    ast_.attend_ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    rmax_.resize(size_t(H));
    rsum_.resize(size_t(H));
    speckv_partial res{sizeof(speckv_partial), xb_.data(), rmax_.data(), rsum_.data()};
    return speckv_merge_partials(uint32_t(H), uint32_t(hs), &mine, &near, &res);
}

int PooledForward::forward(uint64_t request, int token, int pos, const NextUnit &next, const float **logits) {
    const llama2::Config &c = m_.c;
    const int dim = c.dim, kv_dim = c.kv_dim(), hs = c.head_size();
    if (token < 0 || token >= c.vocab_size || pos < 0 || pos >= c.seq_len) {
        return SPECKV_EINVAL;
    }
    float *x = x_.data();
    std::memcpy(x, m_.tok_emb + size_t(token) * dim, size_t(dim) * sizeof(float));
    for (int l = 0; l < c.n_layers; l++) {
        // What runs after this layer: the next layer of this request, or the
        // first layer of the next request in the batch.
        int rc = l + 1 < c.n_layers ? kv_.hint(request, l + 1, pos)
                 : next.valid       ? kv_.hint(next.request, 0, next.pos)
                                    : SPECKV_OK;
        if (rc != SPECKV_OK) return rc;

        rmsnorm(xb_.data(), x, m_.rms_att + size_t(l) * dim, dim);
        float *k = k_.data(), *v = v_.data();
        matmul(q_.data(), xb_.data(), m_.wq + size_t(l) * dim * dim, dim, dim);
        matmul(k, xb_.data(), m_.wk + size_t(l) * dim * kv_dim, dim, kv_dim);
        matmul(v, xb_.data(), m_.wv + size_t(l) * dim * kv_dim, dim, kv_dim);
        llama2::rope(q_.data(), k, pos, dim, kv_dim, hs);
        // The cache lives in the pool: append this position, then read the
        // whole history [0, pos] back for attention.
        if ((rc = kv_.append(request, l, pos, k, v)) != SPECKV_OK) return rc;
        if (mode_ != Attn::full) {
            if ((rc = sparse_attention(request, l, pos + 1)) != SPECKV_OK) return rc;
        } else {
            if ((rc = kv_.gather(request, l, pos + 1, kc_.data(), vc_.data())) != SPECKV_OK) return rc;
            attention(pos + 1);
            ast_.steps++;
            ast_.pages_total += uint64_t(pos / kPageTokens + 1);
            ast_.pages_recalled += uint64_t(pos / kPageTokens + 1);
        }

        llama2::attn_out_and_ffn(m_, l, x, xb_.data(), xb2_.data(), hb_.data(), hb2_.data());
    }
    rmsnorm(x, x, m_.rms_final, dim);
    matmul(logits_.data(), x, m_.wcls, dim, c.vocab_size);
    *logits = logits_.data();
    return SPECKV_OK;
}

}  // namespace tinyllm
