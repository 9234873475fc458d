// SPDX-License-Identifier: Apache-2.0
// The L4 tier the cold-file fuzz targets open over a file they wrote: 1 MiB,
// 512-byte blocks, synchronous I/O, opened with recovery (fuzz_cold_file,
// fuzz_remote's L5 directory part).
#pragma once
#include <string>

#include "tiers/cold_tier.h"

inline speckv::ColdTierOptions fuzz_cold_file_options(const std::string &path) {
    speckv::ColdTierOptions o;
    o.path = path;
    o.capacity = 1u << 20;
    o.block = 512;
    o.queue_depth = 2;
    o.slot_bytes = 4096;
    o.grow_bytes = 0;
    o.create = false;
    o.direct = false;
    o.recover = true;
    o.engine = speckv::ColdEngine::kSync;
    return o;
}
