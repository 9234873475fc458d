// SPDX-License-Identifier: Apache-2.0
// Which codec preset a page is stored with (docs/codec.md §17): by the
// block's hint flags from codec.key_mode / value_mode / mode, and with
// codec.mode = adaptive a preset chosen per (layer, K or V) by measurement
// on the first whole page this process stores of it, re-chosen every
// codec.recalibrate pages. Process-local; thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "config/config.h"
#include "util/json_fwd.h"
#include "pool/log.h"

namespace speckv {

class CodecChoice {
  public:
    void configure(const Config &cfg);
    // The preset for a block: 0 (raw) = in clear.
    uint8_t mode_for(uint32_t hint_flags, uint8_t dtype) const {
        if (dtype == SPECKV_DTYPE_OPAQUE) return 0;
        if (hint_flags & SPECKV_HINT_KEYS) return kmode_;
        if (hint_flags & SPECKV_HINT_VALUES) return vmode_;
        return mode_;
    }
    // codec.mode = adaptive (docs/codec.md §17.1): the preset of (layer, K or
    // V), chosen by measurement from the first whole page (logical ==
    // page_size) this process stores of it and kept; 0 (in clear) for a
    // partial page before that.
    uint8_t adaptive(uint32_t layer, uint32_t hint_flags, const unsigned char *page, size_t logical, size_t page_size,
                     uint8_t dtype, const PoolLog &log);
    uint32_t channels() const { return channels_; }
    // speckv pool stats --json: codec_mode_l<layer>_<k|v>, the re-calibration counts.
    void add_json(Json *out) const;

  private:
    uint8_t mode_ = 0, kmode_ = 0, vmode_ = 0;  // codec::Mode ids
    uint32_t channels_ = 1;
    double err_ = 0.05, err_k_ = 0.02;   // codec.max_err_milli, codec.max_err_k_milli
    uint32_t every_ = 256;               // codec.recalibrate: pages between re-choices (0 = never)
    uint8_t set_ = 0;                    // codec.adaptive_set: a codec::AdaptiveSet (0 = fast)
    mutable std::mutex mu_;
    struct State {
        uint8_t mode;    // codec::Mode in use
        uint32_t since;  // pages encoded with it since it was (re)chosen
    };
    std::map<uint64_t, State> modes_;             // layer << 1 | is_key -> choice, under mu_
    uint64_t recalibrations_ = 0, switches_ = 0;  // under mu_
};

}  // namespace speckv
