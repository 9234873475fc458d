// SPDX-License-Identifier: Apache-2.0
// Per-layer adaptive mode choice (docs/codec.md §10): measure every candidate
// preset on sample pages of the layer and keep the best by the objective
// "highest ratio whose relative error is within budget, then lowest cost".
#include <chrono>
#include <cmath>
#include <cstring>
#include <iterator>
#include <vector>

#include "codec/codec.h"
#include "speckv.h"

namespace speckv::codec {

namespace {
double to_double(int dtype, const void *p, size_t i) {
    auto b = static_cast<const uint8_t *>(p);
    if (dtype == SPECKV_DTYPE_FP32) {
        float f;
        __builtin_memcpy(&f, b + 4 * i, 4);
        return f;
    }
    uint16_t h;
    __builtin_memcpy(&h, b + 2 * i, 2);
    return dtype == SPECKV_DTYPE_BF16 ? bf16_to_fp32(h) : fp16_to_fp32(h);
}
}  // namespace

const char *adaptive_set_name(AdaptiveSet s) { return s == AdaptiveSet::fast ? "fast" : "dense"; }

bool adaptive_set_from_name(const char *name, AdaptiveSet *out) {
    if (!name) return false;
    for (AdaptiveSet s : {AdaptiveSet::fast, AdaptiveSet::dense})
        if (std::strcmp(name, adaptive_set_name(s)) == 0) return *out = s, true;
    return false;
}

const Mode *adaptive_candidates(bool keys, AdaptiveSet set, size_t *n) {
    // fast: every candidate decodes without a variable-length stage (§19.10,
    // §14.4: int8 0.5-0.68x memcpy, k4p/v4p 0.24-0.47x, k5p/v5p 0.12-0.2x;
    // the Rice and split Rice presets 0.01-0.09x). K per channel and V per
    // token, the groupings §14 found best for each.
    static const Mode kFastKeys[] = {Mode::int8, Mode::k5p, Mode::k4p, Mode::k3p};
    static const Mode kFastVals[] = {Mode::int8, Mode::v5p, Mode::v4p, Mode::v3p};
    // dense: the split Rice presets (§18) stand in for the Rice ones: the
    // same values, 0.15-0.4 % more bytes, and 4-6x faster to decode
    // (docs/codec.md §18.3). The Rice presets stay decodable and selectable
    // by name.
    static const Mode kKeys[] = {Mode::paper, Mode::k8s, Mode::k6s, Mode::k5s,
                                 Mode::k4s,   Mode::k9s, Mode::k10s, Mode::k12s};
    static const Mode kVals[] = {Mode::paper, Mode::v8s,  Mode::v6s,  Mode::v5s,  Mode::v4s,
                                 Mode::k8s,   Mode::k6s,  Mode::k5s,  Mode::k4s,  Mode::p8rs,
                                 Mode::vp8s,  Mode::vp6s, Mode::vp5s};
    if (set == AdaptiveSet::fast) {
        *n = keys ? std::size(kFastKeys) : std::size(kFastVals);
        return keys ? kFastKeys : kFastVals;
    }
    *n = keys ? std::size(kKeys) : std::size(kVals);
    return keys ? kKeys : kVals;
}

Mode choose_mode(int dtype, const void *pages, size_t npages, size_t page_elems, Layout layout,
                 double max_rel_err, const Mode *candidates, size_t ncandidates, ModeScore *scores_out,
                 size_t *nscores) {
    static const Mode kAll[] = {Mode::paper, Mode::int8, Mode::k8, Mode::v8, Mode::k6, Mode::v6,
                                Mode::k5,    Mode::v5,   Mode::p8r, Mode::k4, Mode::v4, Mode::k9, Mode::k10, Mode::k12,
                                Mode::vp8, Mode::vp6, Mode::vp5, Mode::k8s, Mode::v8s, Mode::k6s, Mode::v6s,
                                Mode::k5s, Mode::v5s, Mode::p8rs, Mode::k4s, Mode::v4s, Mode::k9s, Mode::k10s,
                                Mode::k12s, Mode::vp8s, Mode::vp6s, Mode::vp5s, Mode::k3p, Mode::v3p, Mode::k4p,
                                Mode::v4p, Mode::k5p, Mode::v5p};
    if (!candidates) {
        candidates = kAll;
        ncandidates = sizeof(kAll) / sizeof(kAll[0]);
    }
    const size_t esz = dtype_size(dtype);
    const size_t page_bytes = page_elems * esz;
    std::vector<uint8_t> rec(max_record_size(page_bytes));
    std::vector<uint8_t> dec(page_bytes);
    Mode best = Mode::raw;
    double best_ratio = 0, best_cost = 0;
    size_t ns = 0;
    for (size_t ci = 0; ci < ncandidates; ci++) {
        Mode m = candidates[ci];
        size_t bytes = 0;
        double err2 = 0, ref2 = 0;
        auto t0 = std::chrono::steady_clock::now();
        bool ok = true;
        for (size_t p = 0; p < npages && ok; p++) {
            const uint8_t *src = static_cast<const uint8_t *>(pages) + p * page_bytes;
            size_t len = 0, out = 0;
            ok = encode(m, dtype, src, page_bytes, layout, rec.data(), rec.size(), &len) == SPECKV_OK &&
                 decode(rec.data(), len, dec.data(), dec.size(), &out) == SPECKV_OK;
            bytes += len;
            for (size_t i = 0; ok && i < page_elems; i++) {
                double x = to_double(dtype, src, i), y = to_double(dtype, dec.data(), i);
                err2 += (x - y) * (x - y);
                ref2 += x * x;
            }
        }
        double ns_total = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
        if (!ok || bytes == 0) continue;
        ModeScore sc{m, double(npages * page_elems * 2) / double(bytes), ref2 > 0 ? std::sqrt(err2 / ref2) : 0.0,
                     ns_total / double(npages * page_elems)};
        if (scores_out && nscores && ns < *nscores) scores_out[ns++] = sc;
        if (sc.rel_rmse > max_rel_err) continue;
        bool better = best == Mode::raw || sc.ratio > best_ratio * 1.005 ||
                      (sc.ratio > best_ratio * 0.995 && sc.encode_ns_per_value < best_cost);
        if (better) best = m, best_ratio = sc.ratio, best_cost = sc.encode_ns_per_value;
    }
    if (nscores) *nscores = ns;
    return best;
}

}  // namespace speckv::codec
