// SPDX-License-Identifier: Apache-2.0
// Builds a KvBank (trace.h) from a llama2.c checkpoint: the model's greedy
// continuation of BOS, every seq_len tokens, K and V of every layer in FP16.
// Header-only so speckv_trace itself needs no forward pass: the CLI and the
// tests, which link speckv_llama2, include it.
#pragma once
#include <memory>
#include <string>

#include "codec/codec.h"
#include "kv_eval.h"
#include "trace.h"

namespace speckv_trace {

// Round to nearest even, as a cast to _Float16 does (which clang 14 does
// not take on x86-64): the codec's conversion.
inline uint16_t fp16_of(float f) { return speckv::codec::fp32_to_fp16_rne(f); }

// Returns nullptr with *err when the checkpoint does not load.
inline std::shared_ptr<const KvBank> load_kv_bank(const std::string &model_path, std::string *err) {
    llama2::Model m;
    if (!m.load(model_path, err)) return nullptr;
    auto toks = llama2::greedy(m, m.c.seq_len - 1);
    toks.insert(toks.begin(), 1);  // BOS, as the model saw it
    llama2::KvCapture cap = llama2::capture_kv(m, toks);
    auto b = std::make_shared<KvBank>();
    b->layers = static_cast<uint32_t>(cap.n_layers);
    b->kv_dim = static_cast<uint32_t>(cap.kv_dim);
    b->positions = static_cast<uint32_t>(cap.tokens);
    b->source = model_path;
    b->k.resize(cap.k.size());
    b->v.resize(cap.v.size());
    for (size_t i = 0; i < cap.k.size(); ++i) b->k[i] = fp16_of(cap.k[i]);
    for (size_t i = 0; i < cap.v.size(); ++i) b->v[i] = fp16_of(cap.v[i]);
    if (!b->positions) return *err = model_path + ": no K/V captured", nullptr;
    return b;
}

}  // namespace speckv_trace
