// SPDX-License-Identifier: Apache-2.0
// cxl_pnm's selection cost, measured on the library: how long speckv's own
// page selection (nmp::score_pages with CRC checks, then nmp::select_pages
// for every KV head group, one call as speckv_select makes it) takes over a
// set of page summaries, as a multiple of a memcpy of the same summaries,
// timed in the same run (docs/trace.md "PNM model", docs/selection.md §6.2).
#pragma once
#include <cstdint>

namespace speckv_trace {

struct SelectCost {
    double x = 0;           // median over paired runs of (score + select) / memcpy
    uint32_t pages = 0;     // summaries per run
    uint64_t bytes = 0;     // of summaries per run
    int runs = 0;
};

// For a model's K geometry (kv_heads x head_dim channels per row, q_heads
// query heads) and a budget (share of pages selected). Measured once per
// geometry and budget in a process (a mutex guards the cache), a few hundred
// milliseconds the first time. x is 0 if the library refused the geometry.
SelectCost measure_select_cost(uint32_t kv_heads, uint32_t head_dim, uint32_t q_heads, double budget);

}  // namespace speckv_trace
