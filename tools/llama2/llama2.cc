// SPDX-License-Identifier: Apache-2.0
// llama2.c forward pass (run.c semantics, FP32). Written from the format
// description in data/README.md (the llama2.c format notes).
#include "llama2.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace llama2 {

void rmsnorm(float *o, const float *x, const float *w, int n) {
    float ss = 0;
    for (int j = 0; j < n; j++) ss += x[j] * x[j];
    ss /= float(n);
    ss += 1e-5f;
    ss = 1.0f / std::sqrt(ss);
    for (int j = 0; j < n; j++) o[j] = w[j] * (ss * x[j]);
}

void softmax(float *x, int n) {
    float mx = x[0];
    for (int i = 1; i < n; i++) mx = std::max(mx, x[i]);
    float sum = 0;
    for (int i = 0; i < n; i++) {
        x[i] = std::exp(x[i] - mx);
        sum += x[i];
    }
    for (int i = 0; i < n; i++) x[i] /= sum;
}

// W (d,n) @ x (n) -> xout (d)
void matmul(float *xout, const float *x, const float *w, int n, int d) {
    for (int i = 0; i < d; i++) {
        float val = 0;
        const float *row = w + size_t(i) * n;
        for (int j = 0; j < n; j++) val += row[j] * x[j];
        xout[i] = val;
    }
}

void rope(float *q, float *k, int pos, int dim, int kv_dim, int hs) {
    // RoPE on adjacent pairs (run.c): q in every head, k in the KV heads.
    for (int i = 0; i < dim; i += 2) {
        int head_dim = i % hs;
        float freq = 1.0f / std::pow(10000.0f, float(head_dim) / float(hs));
        float val = float(pos) * freq;
        float fcr = std::cos(val), fci = std::sin(val);
        int rotn = i < kv_dim ? 2 : 1;
        for (int vv = 0; vv < rotn; vv++) {
            float *vec = vv == 0 ? q : k;
            float v0 = vec[i], v1 = vec[i + 1];
            vec[i] = v0 * fcr - v1 * fci;
            vec[i + 1] = v0 * fci + v1 * fcr;
        }
    }
}

void attn_out_and_ffn(const Model &m, int l, float *x, float *xb, float *xb2, float *hb, float *hb2) {
    const int dim = m.c.dim, hd = m.c.hidden_dim;
    matmul(xb2, xb, m.wo + size_t(l) * dim * dim, dim, dim);
    for (int i = 0; i < dim; i++) x[i] += xb2[i];
    rmsnorm(xb, x, m.rms_ffn + size_t(l) * dim, dim);
    matmul(hb, xb, m.w1 + size_t(l) * dim * hd, dim, hd);
    matmul(hb2, xb, m.w3 + size_t(l) * dim * hd, dim, hd);
    for (int i = 0; i < hd; i++) {
        float val = hb[i];
        val *= 1.0f / (1.0f + std::exp(-val));
        hb[i] = val * hb2[i];
    }
    matmul(xb, hb, m.w2 + size_t(l) * dim * hd, hd, dim);
    for (int i = 0; i < dim; i++) x[i] += xb[i];
}

void attention(const Config &c, const float *q, const float *kc, const float *vc, int npos, float *att_all,
               float *out) {
    const int hs = c.head_size(), kv_dim = c.kv_dim(), kv_mul = c.n_heads / c.n_kv_heads;
    for (int h = 0; h < c.n_heads; h++) {
        const float *qh = q + h * hs;
        float *att = att_all + size_t(h) * c.seq_len;
        for (int t = 0; t < npos; t++) {
            const float *k = kc + size_t(t) * kv_dim + (h / kv_mul) * hs;
            float score = 0;
            for (int i = 0; i < hs; i++) score += qh[i] * k[i];
            att[t] = score / std::sqrt(float(hs));
        }
        softmax(att, npos);
        float *xb = out + h * hs;
        std::fill(xb, xb + hs, 0.f);
        for (int t = 0; t < npos; t++) {
            const float *v = vc + size_t(t) * kv_dim + (h / kv_mul) * hs;
            for (int i = 0; i < hs; i++) xb[i] += att[t] * v[i];
        }
    }
}

Pass::Pass(const Model &m) : m_(m) {
    const Config &c = m.c;
    x_.resize(size_t(c.dim));
    xb_.resize(size_t(c.dim));
    xb2_.resize(size_t(c.dim));
    hb_.resize(size_t(c.hidden_dim));
    hb2_.resize(size_t(c.hidden_dim));
    q_.resize(size_t(c.dim));
    logits_.resize(size_t(c.vocab_size));
}

int Pass::run(int token, int pos, Layers &layers, const float **logits) {
    const Config &c = m_.c;
    const int dim = c.dim, kv_dim = c.kv_dim(), hs = c.head_size();
    float *x = x_.data(), *xb = xb_.data(), *q = q_.data();
    std::memcpy(x, m_.tok_emb + size_t(token) * dim, size_t(dim) * sizeof(float));
    for (int l = 0; l < c.n_layers; l++) {
        if (int rc = layers.begin(l, pos)) return rc;
        rmsnorm(xb, x, m_.rms_att + size_t(l) * dim, dim);
        float *k, *v;
        layers.kv_rows(l, pos, &k, &v);
        matmul(q, xb, m_.wq + size_t(l) * dim * dim, dim, dim);
        matmul(k, xb, m_.wk + size_t(l) * dim * kv_dim, dim, kv_dim);
        matmul(v, xb, m_.wv + size_t(l) * dim * kv_dim, dim, kv_dim);
        rope(q, k, pos, dim, kv_dim, hs);
        if (int rc = layers.attend(l, pos, q, xb)) return rc;
        attn_out_and_ffn(m_, l, x, xb, xb2_.data(), hb_.data(), hb2_.data());
    }
    rmsnorm(x, x, m_.rms_final, dim);
    matmul(logits_.data(), x, m_.wcls, dim, c.vocab_size);
    *logits = logits_.data();
    return 0;
}

namespace {

bool read_file(const std::string &path, std::vector<char> *out, std::string *err) {
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) {
        *err = "cannot open " + path;
        return false;
    }
    std::fseek(f, 0, SEEK_END);
    long sz = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    out->resize(size_t(std::max(0L, sz)));
    size_t got = out->empty() ? 0 : std::fread(out->data(), 1, out->size(), f);
    std::fclose(f);
    if (got != out->size()) {
        *err = "short read of " + path;
        return false;
    }
    return true;
}

}  // namespace

bool Model::load(const std::string &path, std::string *err) {
    std::vector<char> buf;
    if (!read_file(path, &buf, err)) return false;
    if (buf.size() < 28) {
        *err = path + ": too small for a llama2.c header";
        return false;
    }
    int32_t h[7];
    std::memcpy(h, buf.data(), 28);
    c.dim = h[0], c.hidden_dim = h[1], c.n_layers = h[2], c.n_heads = h[3], c.n_kv_heads = h[4];
    c.shared_classifier = h[5] > 0;
    c.vocab_size = std::abs(h[5]);
    c.seq_len = h[6];
    if (c.dim <= 0 || c.hidden_dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 ||
        c.vocab_size <= 0 || c.seq_len <= 0 || c.dim % c.n_heads || c.n_heads % c.n_kv_heads || c.dim > 1 << 16 ||
        c.n_layers > 1024 || c.seq_len > 1 << 20 || c.vocab_size > 1 << 20 || c.hidden_dim > 1 << 18) {
        *err = path + ": implausible llama2.c header";
        return false;
    }
    const size_t D = c.dim, H = c.hidden_dim, L = c.n_layers, V = c.vocab_size, KV = c.kv_dim(),
                 hs = c.head_size(), S = c.seq_len;
    size_t need = V * D + L * D + L * D * D + 2 * L * KV * D + L * D * D + L * D + 3 * L * H * D + D + S * hs;
    if (!c.shared_classifier) need += V * D;
    if ((buf.size() - 28) % 4 || (buf.size() - 28) / 4 != need) {
        *err = path + ": size does not match its header (not a legacy v0 checkpoint?)";
        return false;
    }
    data.resize(need);
    std::memcpy(data.data(), buf.data() + 28, need * 4);
    const float *p = data.data();
    tok_emb = p, p += V * D;
    rms_att = p, p += L * D;
    wq = p, p += L * D * D;
    wk = p, p += L * KV * D;
    wv = p, p += L * KV * D;
    wo = p, p += L * D * D;
    rms_ffn = p, p += L * D;
    w1 = p, p += L * H * D;
    w2 = p, p += L * D * H;
    w3 = p, p += L * H * D;
    rms_final = p, p += D;
    p += S * hs;  // legacy RoPE tables (cos, sin), recomputed instead
    wcls = c.shared_classifier ? tok_emb : p;
    return true;
}

bool Tokenizer::load(const std::string &path, int vocab_size, std::string *err) {
    std::vector<char> buf;
    if (!read_file(path, &buf, err)) return false;
    size_t o = 4;
    vocab.assign(size_t(vocab_size), {});
    scores.assign(size_t(vocab_size), 0.f);
    for (int i = 0; i < vocab_size; i++) {
        int32_t len;
        if (o + 8 > buf.size()) {
            *err = path + ": truncated tokenizer";
            return false;
        }
        std::memcpy(&scores[size_t(i)], buf.data() + o, 4);
        std::memcpy(&len, buf.data() + o + 4, 4);
        o += 8;
        if (len < 0 || o + size_t(len) > buf.size()) {
            *err = path + ": bad token length";
            return false;
        }
        vocab[size_t(i)].assign(buf.data() + o, size_t(len));
        o += size_t(len);
        index.emplace(vocab[size_t(i)], i);
    }
    return true;
}

std::vector<int> Tokenizer::encode(const std::string &text) const {
    std::vector<int> out;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find(' ', start + 1);
        if (end == std::string::npos) end = text.size();
        std::string word = text.substr(start, end - start);
        start = end;
        // run.c: one token per UTF-8 code point, byte fallback (+3), then merges.
        std::vector<int> t;
        for (size_t i = 0; i < word.size();) {
            size_t l = 1;
            while (i + l < word.size() && l < 4 && (uint8_t(word[i + l]) & 0xC0) == 0x80) l++;
            auto it = index.find(word.substr(i, l));
            if (it != index.end()) {
                t.push_back(it->second);
            } else {
                for (size_t k = 0; k < l; k++) t.push_back(int(uint8_t(word[i + k])) + 3);
            }
            i += l;
        }
        for (;;) {
            float best = -1e10f;
            int bid = -1;
            size_t bidx = 0;
            for (size_t i = 0; i + 1 < t.size(); i++) {
                auto it = index.find(vocab[size_t(t[i])] + vocab[size_t(t[i + 1])]);
                if (it != index.end() && scores[size_t(it->second)] > best) {
                    best = scores[size_t(it->second)];
                    bid = it->second;
                    bidx = i;
                }
            }
            if (bid < 0) break;
            t[bidx] = bid;
            t.erase(t.begin() + long(bidx) + 1);
        }
        out.insert(out.end(), t.begin(), t.end());
    }
    return out;
}

std::string Tokenizer::piece(int prev, int tok) const {
    std::string s = vocab[size_t(tok)];
    if (prev == 1 && !s.empty() && s[0] == ' ') s.erase(0, 1);
    unsigned b;
    if (s.size() == 6 && std::sscanf(s.c_str(), "<0x%02X>", &b) == 1) s = std::string(1, char(b));
    return s;
}

Runner::Runner(const Model &m) : m_(m), pass_(m) {
    const Config &c = m.c;
    const size_t cache = size_t(c.n_layers) * c.seq_len * c.kv_dim();
    key_cache.assign(cache, 0.f);
    value_cache.assign(cache, 0.f);
    k_read.assign(cache, 0.f);
    v_read.assign(cache, 0.f);
    xbx_.resize(size_t(c.dim));
    att_.resize(size_t(c.n_heads) * c.seq_len);
}

void Runner::kv_rows(int l, int pos, float **k, float **v) {
    const size_t row = (size_t(l) * m_.c.seq_len + size_t(pos)) * m_.c.kv_dim();
    *k = key_cache.data() + row;
    *v = value_cache.data() + row;
}

int Runner::attend(int l, int pos, const float *q, float *out) {
    const Config &c = m_.c;
    const int dim = c.dim, kv_dim = c.kv_dim();
    const size_t loff = size_t(l) * c.seq_len * kv_dim;
    if (use_read_cache) {
        std::memcpy(k_read.data() + loff + size_t(pos) * kv_dim, key_cache.data() + loff + size_t(pos) * kv_dim,
                    size_t(kv_dim) * 4);
        std::memcpy(v_read.data() + loff + size_t(pos) * kv_dim, value_cache.data() + loff + size_t(pos) * kv_dim,
                    size_t(kv_dim) * 4);
    }
    if (on_kv_write) on_kv_write(l, pos);
    if (!use_read_cache) {
        attention(c, q, key_cache.data() + loff, value_cache.data() + loff, pos + 1, att_.data(), out);
        return 0;
    }
    attention(c, q, k_read.data() + loff, v_read.data() + loff, pos + 1, att_.data(), out);
    if (measure_attention) {
        attention(c, q, key_cache.data() + loff, value_cache.data() + loff, pos + 1, att_.data(), xbx_.data());
        double e2 = 0, r2 = 0, a2 = 0, dot = 0;
        for (int i = 0; i < dim; i++) {
            double a = out[i], b = xbx_[size_t(i)];
            e2 += (a - b) * (a - b);
            r2 += b * b;
            a2 += a * a;
            dot += a * b;
        }
        attn_err2 += e2;
        attn_ref2 += r2;
        attn_cos_sum += (a2 > 0 && r2 > 0) ? dot / std::sqrt(a2 * r2) : 1.0;
        attn_count++;
    }
    return 0;
}

const float *Runner::forward(int token, int pos) {
    const float *logits = nullptr;
    pass_.run(token, pos, *this, &logits);
    return logits;
}

int argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

}  // namespace llama2
