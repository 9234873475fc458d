// SPDX-License-Identifier: Apache-2.0
// A small llama2.c ("version 0" checkpoint) forward pass, used to produce real
// K/V caches for the codec and to measure end-to-end quality with the K/V
// cache passed through it. Follows run.c exactly (see data/README.md, the llama2.c format).
// The one forward pass of the project: `Pass` runs run.c's arithmetic and
// asks a `Layers` where each layer's K/V go and how its attention reads them;
// the Runner below, tools/nmp_eval's Runner and examples/tinyllm's
// PooledForward are three such Layers (library target speckv_llama2_forward).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace llama2 {

// The three kernels of run.c, in its operation order. Every forward pass in
// this project (tools/nmp_eval, examples/tinyllm) calls these, so their
// results are bit-identical to the Runner's.
void rmsnorm(float *o, const float *x, const float *w, int n);
void softmax(float *x, int n);
// W (d, n) @ x (n) -> xout (d)
void matmul(float *xout, const float *x, const float *w, int n, int d);

struct Config {
    int dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, seq_len = 0;
    bool shared_classifier = true;
    int head_size() const { return dim / n_heads; }
    int kv_dim() const { return dim * n_kv_heads / n_heads; }
};

struct Model {
    Config c;
    std::vector<float> data;
    const float *tok_emb = nullptr, *rms_att = nullptr, *wq = nullptr, *wk = nullptr, *wv = nullptr,
                *wo = nullptr, *rms_ffn = nullptr, *w1 = nullptr, *w2 = nullptr, *w3 = nullptr,
                *rms_final = nullptr, *wcls = nullptr;
    // Loads a legacy v0 checkpoint. Returns false with *err set on failure.
    bool load(const std::string &path, std::string *err);
};

// RoPE at position pos on q (dim) and k (kv_dim), head size hs, as run.c.
void rope(float *q, float *k, int pos, int dim, int kv_dim, int hs);
// The rest of layer l once attention has left its output in xb: the output
// projection and residual, then the SwiGLU FFN and its residual, into x.
// xb2 (dim), hb and hb2 (hidden_dim) are scratch.
void attn_out_and_ffn(const Model &m, int l, float *x, float *xb, float *xb2, float *hb, float *hb2);
// run.c's multi-head (grouped-query) attention of q (dim) over positions
// [0, npos) of kc / vc (rows of kv_dim floats in position order): scores in
// att (n_heads x seq_len scratch), the result in out (dim).
void attention(const Config &c, const float *q, const float *kc, const float *vc, int npos, float *att, float *out);

// What a forward pass does in each layer besides run.c's arithmetic.
class Layers {
public:
    virtual ~Layers() = default;
    // Before layer l's first step (e.g. a prefetch hint). Non-zero stops the pass.
    virtual int begin(int l, int pos) {
        (void)l, (void)pos;
        return 0;
    }
    // Where layer l's K and V at pos (kv_dim floats each) are written; K gets RoPE there.
    virtual void kv_rows(int l, int pos, float **k, float **v) = 0;
    // Layer l's attention once its K/V at pos are written: q (dim, after
    // RoPE) -> out (dim). Non-zero stops the pass.
    virtual int attend(int l, int pos, const float *q, float *out) = 0;
};

// run.c's forward pass of one token and its buffers.
class Pass {
public:
    explicit Pass(const Model &m);
    // Runs token at pos; *logits = vocab_size floats, valid until the next
    // run. Returns 0, or the non-zero a Layers step returned.
    int run(int token, int pos, Layers &layers, const float **logits);

private:
    const Model &m_;
    std::vector<float> x_, xb_, xb2_, hb_, hb2_, q_, logits_;
};

struct Tokenizer {
    std::vector<std::string> vocab;
    std::vector<float> scores;
    std::unordered_map<std::string, int> index;
    bool load(const std::string &path, int vocab_size, std::string *err);
    // BPE as run.c encode(), applied word by word (each piece keeps its
    // leading space) so long texts stay linear; no BOS/EOS added.
    std::vector<int> encode(const std::string &text) const;
    std::string piece(int prev, int tok) const;
};

// One sequence's state. The attention reads K/V from `k_read`/`v_read`, which
// are the exact caches unless a hook replaces what was written.
class Runner : private Layers {
public:
    explicit Runner(const Model &m);
    // Runs token at pos; returns the logits (vocab_size floats).
    const float *forward(int token, int pos);

    // Exact caches as run.c keeps them: [layer][seq_len][kv_dim], K after RoPE.
    std::vector<float> key_cache, value_cache;
    // What attention reads. Same layout. Set `use_read_cache` to read these.
    std::vector<float> k_read, v_read;
    bool use_read_cache = false;
    // Called after K/V of (layer, pos) are written to the exact caches and
    // before attention reads; may update k_read/v_read.
    std::function<void(int layer, int pos)> on_kv_write;
    // When set with use_read_cache, also computes attention from the exact
    // cache and accumulates its difference (same q, same position).
    bool measure_attention = false;
    double attn_err2 = 0, attn_ref2 = 0, attn_cos_sum = 0;
    uint64_t attn_count = 0;

    const Model &model() const { return m_; }

private:
    void kv_rows(int l, int pos, float **k, float **v) override;
    int attend(int l, int pos, const float *q, float *out) override;
    const Model &m_;
    Pass pass_;
    std::vector<float> xbx_, att_;
};

int argmax(const float *v, int n);

}  // namespace llama2
