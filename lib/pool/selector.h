// SPDX-License-Identifier: Apache-2.0
// Selector: near-memory page selection inside the pool (docs/selection.md
// §5). It writes the summary of a K page when the page is written
// (summarize_page_locked), and answers speckv_select (score the summaries of
// a (tenant, request, layer)'s K pages against a query, keep the best pages,
// steadily) and speckv_attend (attention over the pages the GPU does not
// get, computed here). The arithmetic is select/nmp.*; this part finds the
// pages and keeps their summaries with them. It reads the image, the block
// table (BlockResolver) and packed images; what needs the rest of the pool
// (the translation index, L4, the checked read path) it asks through the
// three jobs of SelectorPorts, which Pool gives it once at open.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "pool/block_resolver.h"
#include "pool/counters.h"
#include "pool/image.h"
#include "pool/packed_image.h"
#include "pool/page_lock.h"
#include "pool/select_state.h"
#include "speckv.h"

namespace speckv {

struct SelectorPorts {
    // The live handles of (tenant, request, layer), any order (the translation index).
    std::function<void(uint64_t tenant, uint64_t request, uint32_t layer, std::vector<uint64_t> *handles)> collect;
    // A block in L4 back into the pool (or a clear error); re-resolves *v.
    std::function<int(uint64_t handle, BlockView *v)> ensure_hot;
    // The pool's checked read of a live block (speckv_read's path).
    std::function<int(uint64_t handle, uint64_t off, void *dst, size_t len)> read;
};

class Selector {
  public:
    void bind(const PoolLayout &L, const BlockResolver *resolver, const PackedImage *packed, const PageLocks *plocks,
              PoolCounters *counters) {
        L_ = L;
        resolver_ = resolver;
        packed_ = packed;
        plocks_ = plocks;
        counters_ = counters;
    }
    void configure(const Config &cfg) { st_.configure(cfg); }
    void set_ports(SelectorPorts ports) { io_ = std::move(ports); }
    // select.channels: K rows are summarised when written (0 = none).
    uint32_t channels() const { return st_.channels; }

    // With page `page` locked and `values` (page_size bytes) what reads of it
    // return: writes its summary if its block holds keys (select.channels,
    // a summary area). Returns whether it did.
    bool summarize_page_locked(uint64_t page, const unsigned char *values, size_t logical, uint8_t dtype);
    int select(uint64_t tenant, uint64_t request, uint32_t layer, const float *q, size_t q_len,
               const speckv_select_params &p, speckv_page_ref *out, size_t cap, size_t *n_out, size_t *n_pages);
    int attend(uint64_t tenant, uint64_t request, uint32_t layer, const float *q, size_t q_len,
               const speckv_select_params &p, const speckv_page_ref *exclude, size_t n_exclude,
               const speckv_partial &out);

  private:
    // The K pages of (tenant, request, layer) in token order.
    int k_pages(uint64_t tenant, uint64_t request, uint32_t layer, uint32_t row_elems, uint64_t context_tokens,
                std::vector<KPage> *out);
    // Every argument first (EINVAL/ESTRUCT), then what the pool cannot do
    // (ENOTSUP: no summary area). select: the budget must be > 0.
    int check_params(const speckv_select_params &p, const float *q, size_t q_len, bool select) const;
    void bump(PoolCounters::Counter c, uint64_t n = 1) { counters_->bump(c, n); }

    PoolLayout L_;
    const BlockResolver *resolver_ = nullptr;
    const PackedImage *packed_ = nullptr;
    const PageLocks *plocks_ = nullptr;
    PoolCounters *counters_ = nullptr;
    SelectState st_;  // settings and previous selections (pool/select_state.h)
    SelectorPorts io_;
};

}  // namespace speckv
