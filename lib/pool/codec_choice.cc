// SPDX-License-Identifier: Apache-2.0
#include "pool/codec_choice.h"

#include "codec/codec.h"
#include "util/json.h"
#include "util/seqlock.h"
#include "util/status.h"

namespace speckv {

void CodecChoice::configure(const Config &cfg) {
    mode_ = static_cast<uint8_t>(cfg.get("codec.mode"));
    kmode_ = cfg.is_set("codec.key_mode") ? static_cast<uint8_t>(cfg.get("codec.key_mode")) : mode_;
    vmode_ = cfg.is_set("codec.value_mode") ? static_cast<uint8_t>(cfg.get("codec.value_mode")) : mode_;
    channels_ = static_cast<uint32_t>(cfg.get("codec.channels"));
    err_ = double(cfg.get("codec.max_err_milli")) / 1000.0;
    every_ = static_cast<uint32_t>(cfg.get("codec.recalibrate"));
    set_ = static_cast<uint8_t>(cfg.get("codec.adaptive_set"));
    // Unset, the K budget is the set's (docs/codec.md §17.1).
    err_k_ = cfg.is_set("codec.max_err_k_milli") ? double(cfg.get("codec.max_err_k_milli")) / 1000.0
                                                   : codec::adaptive_max_err_k(codec::AdaptiveSet(set_));
}

uint8_t CodecChoice::adaptive(uint32_t layer, uint32_t hint_flags, const unsigned char *page, size_t logical,
                              size_t page_size, uint8_t dtype, const PoolLog &log) {
    const bool key = hint_flags & SPECKV_HINT_KEYS;
    const uint64_t k = uint64_t(layer) << 1 | uint64_t(key);
    const size_t es = codec::dtype_size(dtype);
    const bool whole = logical == page_size && es != 0;
    {
        std::lock_guard g(mu_);
        if (auto it = modes_.find(k); it != modes_.end()) {
            // Re-chosen every codec.recalibrate pages, on a whole page, as
            // the layer's data drifts (the first page is one sample).
            if (!whole || every_ == 0 || ++it->second.since < every_) return it->second.mode;
            it->second.since = 0;
        }
    }
    if (!whole) return 0;  // calibrate on a whole page only
    // The candidates (codec.adaptive_set) and budgets of the offline RMS
    // policy (docs/codec.md §10): keys get the tight budget, values (and
    // unhinted blocks) the loose one.
    size_t nc = 0;
    const codec::Mode *cands = codec::adaptive_candidates(key, codec::AdaptiveSet(set_), &nc);
    SEQLOCK_IGNORE_BEGIN();  // the page is locked by this write
    codec::Mode m = codec::choose_mode(dtype, page, 1, logical / es, codec::Layout{channels_},
                                       key ? err_k_ : err_, cands, nc);
    SEQLOCK_IGNORE_END();
    clear_error();
    std::lock_guard g(mu_);
    auto [it, fresh] = modes_.try_emplace(k, State{static_cast<uint8_t>(m), 0});
    if (fresh) {
        log(SPECKV_LOG_INFO, "codec adaptive: layer %u %s -> %s", layer, key ? "K" : "V", codec::mode_name(m));
    } else {
        recalibrations_++;
        if (it->second.mode != static_cast<uint8_t>(m)) {
            switches_++;
            log(SPECKV_LOG_INFO, "codec adaptive: layer %u %s %s -> %s (re-calibrated)", layer, key ? "K" : "V",
                codec::mode_name(codec::Mode(it->second.mode)), codec::mode_name(m));
            it->second.mode = static_cast<uint8_t>(m);
        }
    }
    return it->second.mode;
}

void CodecChoice::add_json(Json *out) const {
    std::lock_guard g(mu_);
    for (const auto &[k, st] : modes_)
        (*out)["codec_mode_l" + std::to_string(k >> 1) + ((k & 1) ? "_k" : "_v")] = st.mode;
    (*out)["codec_recalibrations"] = recalibrations_;
    (*out)["codec_mode_switches"] = switches_;
}

}  // namespace speckv
