// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the nmp tests: random pages, summaries, exact bounds.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "codec/codec.h"
#include "select/nmp.h"
#include "speckv.h"

namespace nmp_test {

namespace nmp = speckv::nmp;

// `pages` K pages of `tokens` x `channels` FP32 keys with per-channel offsets
// and an outlier channel (as real keys have), and their summaries.
struct PageSet {
    uint32_t channels = 0, tokens = 0;
    std::vector<std::vector<float>> keys;
    std::vector<std::vector<uint8_t>> sums;
    std::vector<const uint8_t *> ptrs;
};

inline PageSet make_pages(std::mt19937 &rng, uint32_t n, uint32_t tokens, uint32_t channels, float spread = 1.0f) {
    PageSet s;
    s.channels = channels;
    s.tokens = tokens;
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> offs(channels);
    for (auto &o : offs) o = nd(rng) * spread;
    if (channels > 3) offs[3] = 8.0f * spread;  // outlier channel
    for (uint32_t p = 0; p < n; p++) {
        std::vector<float> k(size_t(tokens) * channels);
        const float drift = nd(rng);
        for (uint32_t t = 0; t < tokens; t++)
            for (uint32_t c = 0; c < channels; c++) k[size_t(t) * channels + c] = offs[c] + drift * 0.5f + nd(rng) * spread;
        std::vector<uint8_t> sum(nmp::summary_size(channels));
        if (nmp::summarize(SPECKV_DTYPE_FP32, k.data(), tokens, channels, channels, sum.data(), sum.size()) !=
            SPECKV_OK)
            std::abort();
        s.keys.push_back(std::move(k));
        s.sums.push_back(std::move(sum));
    }
    for (auto &v : s.sums) s.ptrs.push_back(v.data());
    return s;
}

inline std::vector<float> random_q(std::mt19937 &rng, size_t n, float scale = 1.0f) {
    std::normal_distribution<float> nd(0.f, scale);
    std::vector<float> q(n);
    for (auto &x : q) x = nd(rng);
    return q;
}

// max over tokens of q_h·k (double) for every (group, page), max over the
// group's query heads: what the bound must not be below.
inline std::vector<double> exact_max(const nmp::Geometry &g, const std::vector<float> &q, const PageSet &s,
                                     double scale) {
    const uint32_t n = uint32_t(s.keys.size()), D = g.head_dim, C = g.channels();
    std::vector<double> out(size_t(g.kv_heads) * n, -INFINITY);
    for (uint32_t p = 0; p < n; p++)
        for (uint32_t k = 0; k < g.kv_heads; k++)
            for (uint32_t j = 0; j < g.q_per_kv; j++) {
                const float *qh = q.data() + (size_t(k) * g.q_per_kv + j) * D;
                for (uint32_t t = 0; t < s.tokens; t++) {
                    double d = 0;
                    for (uint32_t c = 0; c < D; c++) d += double(qh[c]) * s.keys[p][size_t(t) * C + k * D + c];
                    out[size_t(k) * n + p] = std::max(out[size_t(k) * n + p], d * scale);
                }
            }
    return out;
}

// Σ|q_c|·max(|min_c|,|max_c|) per (group, page): the scale of the float
// rounding error of a computed bound.
inline std::vector<double> bound_magnitude(const nmp::Geometry &g, const std::vector<float> &q, const PageSet &s,
                                           double scale) {
    const uint32_t n = uint32_t(s.keys.size()), D = g.head_dim, C = g.channels();
    std::vector<double> out(size_t(g.kv_heads) * n, 0);
    for (uint32_t p = 0; p < n; p++)
        for (uint32_t k = 0; k < g.kv_heads; k++)
            for (uint32_t j = 0; j < g.q_per_kv; j++) {
                const float *qh = q.data() + (size_t(k) * g.q_per_kv + j) * D;
                double m = 0;
                for (uint32_t c = 0; c < D; c++) {
                    double a = 0;
                    for (uint32_t t = 0; t < s.tokens; t++)
                        a = std::max(a, double(std::fabs(s.keys[p][size_t(t) * C + k * D + c])));
                    m += std::fabs(double(qh[c])) * a;
                }
                out[size_t(k) * n + p] = std::max(out[size_t(k) * n + p], m * scale);
            }
    return out;
}

}  // namespace nmp_test
