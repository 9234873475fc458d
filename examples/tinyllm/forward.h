// SPDX-License-Identifier: Apache-2.0
// The llama2.c forward pass (run.c semantics, FP32) with the K/V cache in a
// speckv pool. The arithmetic is llama2::Pass's, as tools/llama2's Runner's
// is, so with exact K/V the logits are bit-identical; the
// difference is where K and V live: every layer's attention reads them back
// through PagedKv (speckv_translate + speckv_access / speckv_pin), and the
// pass hints the prefetcher before each layer.
#pragma once

#include <cstdint>
#include <vector>

#include "llama2.h"
#include "paged_kv.h"

namespace tinyllm {

// The unit that runs after the last layer of this token: the next request in
// batch order and the position it will run (an engine knows its schedule).
struct NextUnit {
    uint64_t request = 0;
    int pos = 0;
    bool valid = false;
};

// How a layer's attention gets its K/V (docs/selection.md §7):
//   full    every page, read through the pool (run.c's arithmetic: exact);
//   select  only the pages speckv_select returns (approximate attention);
//   attend  the selected pages here, every other page by speckv_attend next
//           to the pool, merged with speckv_merge_partials (exact up to float
//           rounding). select/attend need a PagedKv in the split layout.
enum class Attn { full, select, attend };

struct AttnStats {
    uint64_t steps = 0;             // (layer, position) attentions
    uint64_t pages_total = 0;       // K/V pages that existed, summed over steps
    uint64_t pages_recalled = 0;    // pages read back to "the GPU", summed
    double select_ns = 0, attend_ns = 0;
};

class PooledForward : private llama2::Layers {
public:
    PooledForward(const llama2::Model &m, PagedKv &kv);

    // select/attend: budget = max(1, ceil(frac * pages)) pages per layer.
    void set_attention(Attn mode, double frac, uint64_t tenant) {
        mode_ = mode;
        frac_ = frac;
        tenant_ = tenant;
    }
    const AttnStats &attn_stats() const { return ast_; }

    // Runs `token` at `pos` of `request`. Before layer l it hints
    // (request, l + 1, pos), and before the last layer `next` (its layer 0).
    // On success *logits points at vocab_size floats, valid until the next call.
    int forward(uint64_t request, int token, int pos, const NextUnit &next, const float **logits);

private:
    int begin(int l, int pos) override;
    void kv_rows(int l, int pos, float **k, float **v) override;
    int attend(int l, int pos, const float *q, float *out) override;
    int sparse_attention(uint64_t request, int layer, int npos, const float *q, float *out);
    const llama2::Model &m_;
    PagedKv &kv_;
    llama2::Pass pass_;
    uint64_t request_ = 0;  // the unit forward() runs
    NextUnit next_;
    std::vector<float> k_, v_, att_, kc_, vc_;
    Attn mode_ = Attn::full;
    double frac_ = 1.0;
    uint64_t tenant_ = 0;
    AttnStats ast_;
    std::vector<speckv_page_ref> refs_;
    std::vector<float> pout_, pmax_, psum_, nout_, nmax_, nsum_, rmax_, rsum_;
};

}  // namespace tinyllm
