// SPDX-License-Identifier: Apache-2.0
// Near-memory selection's per-pool state (docs/selection.md): the settings
// read at open (select.channels: the K rows summarised when a page is
// written, 0 = none; select.recent and select.band_milli: speckv_select's
// defaults), the previous selection per (tenant, request, layer) that the
// steady rule keeps to, and KPage, one K page of a (tenant, request, layer)
// as selection walks them in token order. Invariants: `prev` is read and
// written under `mu` only and is bounded (cleared past 65,536 keys: the
// steady rule restarts); a KPage names the block's tier_seq when its page
// was read off it, so a move since is detected before its scores are used.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.h"
#include "pool/pool_format.h"

namespace speckv {

struct KPage {
    uint64_t handle, page, offset, token_pos;
    uint32_t tokens;
    uint8_t dtype;
    const fmt::BlockRecord *rec;
    uint64_t tseq;  // the block's tier_seq when `page` was read off it
    // A page of a packed block (page = UINT64_MAX): its summary slot in the
    // image, or null when it has none.
    const unsigned char *psum = nullptr;
};

struct SelectState {
    uint32_t channels = 0;  // select.channels
    uint32_t recent = 1;    // select.recent
    float band = 0;         // select.band_milli / 1000
    std::mutex mu;
    std::unordered_map<std::string, std::vector<uint32_t>> prev;  // under mu

    void configure(const Config &cfg) {
        channels = static_cast<uint32_t>(cfg.get("select.channels"));
        recent = static_cast<uint32_t>(cfg.get("select.recent"));
        band = float(cfg.get("select.band_milli")) / 1000.0f;
    }
};

}  // namespace speckv
