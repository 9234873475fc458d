// The llama2.c forward pass (run.c semantics, FP32) with the K/V cache in a
// speckv pool. The arithmetic is run.c's, in the same order as
// tools/llama2's Runner, so with exact K/V the logits are bit-identical; the
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

class PooledForward {
public:
    PooledForward(const llama2::Model &m, PagedKv &kv);

    // Runs `token` at `pos` of `request`. Before layer l it hints
    // (request, l + 1, pos), and before the last layer `next` (its layer 0).
    // On success *logits points at vocab_size floats, valid until the next call.
    int forward(uint64_t request, int token, int pos, const NextUnit &next, const float **logits);

private:
    void attention(int npos);
    const llama2::Model &m_;
    PagedKv &kv_;
    std::vector<float> x_, xb_, xb2_, hb_, hb2_, q_, k_, v_, att_, logits_, kc_, vc_;
};

}  // namespace tinyllm
