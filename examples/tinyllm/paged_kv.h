// SPDX-License-Identifier: Apache-2.0
// A paged K/V cache that lives in a speckv pool, as a serving engine keeps it.
//
// One pool block per (request, layer, page of kPageTokens positions), allocated
// with a speckv_hint naming exactly that, so the pool can translate
// (tenant, request, layer, token) to the block and the prefetcher can find the
// blocks a hint names. A block holds the page's K rows, then its V rows:
//   [K row 0 .. K row 15 | V row 0 .. V row 15], each row kv_dim float32,
// or, in the split layout, a K block and a V block of 16 rows each,
// K after RoPE (as run.c caches it). Nothing is kept on the host between
// tokens except the handles: attention reads every row back through the pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "oracle/belady.h"
#include "speckv.h"

namespace tinyllm {

inline constexpr int kPageTokens = 16;

class PagedKv {
public:
    // `pin`: read with speckv_pin/speckv_unpin instead of speckv_access.
    // `prefetch`: send speckv_prefetch hints (off: hint() does nothing).
    // `split`: K and V of a page in two blocks, hinted SPECKV_HINT_KEYS and
    // SPECKV_HINT_VALUES (what speckv_select / speckv_attend work on; the
    // pool then keeps a summary of every K page).
    PagedKv(speckv_pool *pool, uint64_t tenant, int n_layers, int kv_dim, bool prefetch, bool pin, bool split = false);

    uint64_t block_bytes() const { return uint64_t(2) * kPageTokens * row_bytes_; }

    // Split layout only: the K/V rows [0, n) of page `page` of (request, layer).
    int gather_page(uint64_t request, int layer, int page, int n, float *kc, float *vc);

    // Stores the K and V rows (kv_dim floats each) of `request` at (layer, pos);
    // allocates the page's block when pos starts a page. Positions of a
    // request arrive in order 0, 1, 2, ... per layer.
    int append(uint64_t request, int layer, int pos, const float *k, const float *v);

    // Reads K and V of positions [0, npos) of (request, layer) into kc / vc
    // ([npos][kv_dim] each), block by block, through the pool.
    int gather(uint64_t request, int layer, int npos, float *kc, float *vc);

    // Tells the pool that `request` is about to run `layer` at `pos`.
    int hint(uint64_t request, int layer, int pos);

    // Frees every block of `request` (the request finished).
    int release(uint64_t request);

    // Records every page this engine reads through speckv_access and writes
    // through speckv_write into `trace` (null: stop), for the Belady
    // references (tools/oracle/belady.h). Pinned reads bypass L1 and L2 and
    // are not recorded. `page_size`: the pool's.
    void set_trace(speckv::oracle::Trace *trace, uint64_t page_size) { trace_ = trace, page_size_ = page_size; }

    // Text of the last failure ("speckv_write(...): <strerror>: <errmsg>").
    const std::string &error() const { return err_; }

    speckv_pool *pool() const { return pool_; }
    uint64_t blocks_allocated() const { return allocs_; }
    uint64_t hints_sent() const { return hints_; }
    uint64_t translations() const { return translations_; }

private:
    int fail(int rc, const char *what);
    // The trace's id of page `page` of block `b`: the pages of a block get
    // consecutive ids, never given to another block (a freed block's pages
    // are never read again, so its entry goes at release).
    uint64_t page_id(speckv_handle b, uint64_t page);
    void note(speckv_handle b, uint64_t off, uint64_t len, bool write);

    speckv_pool *pool_;
    uint64_t tenant_;
    int n_layers_, kv_dim_;
    size_t row_bytes_;
    bool prefetch_, pin_, split_;
    // Split layout: request -> [layer][page] -> V block (table_ holds the K blocks).
    std::unordered_map<uint64_t, std::vector<std::vector<speckv_handle>>> vtable_;
    // request -> [layer][page] -> handle: what this engine allocated. Reads
    // find the block through speckv_translate and check it against this.
    std::unordered_map<uint64_t, std::vector<std::vector<speckv_handle>>> table_;
    std::vector<unsigned char> buf_;
    uint64_t allocs_ = 0, hints_ = 0, translations_ = 0;
    std::string err_;
    speckv::oracle::Trace *trace_ = nullptr;
    uint64_t page_size_ = 4096, next_page_id_ = 0;
    std::unordered_map<speckv_handle, uint64_t> first_page_id_;
};

}  // namespace tinyllm
