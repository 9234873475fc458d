// SPDX-License-Identifier: Apache-2.0
#include "paged_kv.h"

#include <algorithm>
#include <cstring>

namespace tinyllm {

PagedKv::PagedKv(speckv_pool *pool, uint64_t tenant, int n_layers, int kv_dim, bool prefetch, bool pin, bool split)
    : pool_(pool),
      tenant_(tenant),
      n_layers_(n_layers),
      kv_dim_(kv_dim),
      row_bytes_(size_t(kv_dim) * sizeof(float)),
      prefetch_(prefetch),
      pin_(pin),
      split_(split),
      buf_(size_t(2) * kPageTokens * row_bytes_) {}

int PagedKv::fail(int rc, const char *what) {
    err_ = std::string(what) + ": " + speckv_strerror(rc);
    const char *detail = speckv_errmsg();
    if (detail && *detail) err_ += std::string(" (") + detail + ")";
    return rc;
}

uint64_t PagedKv::page_id(speckv_handle b, uint64_t page) {
    auto [it, fresh] = first_page_id_.try_emplace(b, next_page_id_);
    if (fresh) next_page_id_ += (block_bytes() + page_size_ - 1) / page_size_;
    return it->second + page;
}

void PagedKv::note(speckv_handle b, uint64_t off, uint64_t len, bool write) {
    if (!trace_ || !len) return;
    for (uint64_t p = off / page_size_; p <= (off + len - 1) / page_size_; p++)
        write ? trace_->write(page_id(b, p)) : trace_->read(page_id(b, p));
}

int PagedKv::append(uint64_t request, int layer, int pos, const float *k, const float *v) {
    auto &layers = table_[request];
    if (layers.empty()) layers.resize(size_t(n_layers_));
    auto &pages = layers[size_t(layer)];
    const size_t page = size_t(pos / kPageTokens), slot = size_t(pos % kPageTokens);
    if (page == pages.size()) {
        speckv_hint h;
        std::memset(&h, 0, sizeof h);
        h.struct_size = sizeof h;
        h.tenant = tenant_;
        h.request = request;
        h.layer = uint32_t(layer);
        h.token_pos = uint64_t(page) * kPageTokens;
        h.token_count = kPageTokens;
        speckv_handle b = SPECKV_HANDLE_INVALID;
        if (split_) {
            auto &vl = vtable_[request];
            if (vl.empty()) vl.resize(size_t(n_layers_));
            speckv_handle vb = SPECKV_HANDLE_INVALID;
            h.flags = SPECKV_HINT_KEYS;
            if (int rc = speckv_alloc(pool_, block_bytes() / 2, SPECKV_DTYPE_FP32, &h, &b); rc != SPECKV_OK)
                return fail(rc, "speckv_alloc K");
            h.flags = SPECKV_HINT_VALUES;
            if (int rc = speckv_alloc(pool_, block_bytes() / 2, SPECKV_DTYPE_FP32, &h, &vb); rc != SPECKV_OK) {
                speckv_free(pool_, b);
                return fail(rc, "speckv_alloc V");
            }
            vl[size_t(layer)].push_back(vb);
            allocs_ += 2;
        } else {
            if (int rc = speckv_alloc(pool_, block_bytes(), SPECKV_DTYPE_FP32, &h, &b); rc != SPECKV_OK)
                return fail(rc, "speckv_alloc");
            allocs_++;
        }
        pages.push_back(b);
    } else if (page != pages.size() - 1) {
        err_ = "positions must be appended in order";
        return SPECKV_EINVAL;
    }
    const speckv_handle b = pages.back();
    if (int rc = speckv_write(pool_, b, slot * row_bytes_, k, row_bytes_); rc != SPECKV_OK)
        return fail(rc, "speckv_write K");
    note(b, slot * row_bytes_, row_bytes_, true);
    if (split_) {
        const speckv_handle vb = vtable_[request][size_t(layer)].back();
        if (int rc = speckv_write(pool_, vb, slot * row_bytes_, v, row_bytes_); rc != SPECKV_OK)
            return fail(rc, "speckv_write V");
        note(vb, slot * row_bytes_, row_bytes_, true);
        return SPECKV_OK;
    }
    if (int rc = speckv_write(pool_, b, (kPageTokens + slot) * row_bytes_, v, row_bytes_); rc != SPECKV_OK)
        return fail(rc, "speckv_write V");
    note(b, (kPageTokens + slot) * row_bytes_, row_bytes_, true);
    return SPECKV_OK;
}

int PagedKv::gather_page(uint64_t request, int layer, int page, int n, float *kc, float *vc) {
    auto it = table_.find(request);
    auto vt = vtable_.find(request);
    if (!split_ || it == table_.end() || vt == vtable_.end() || size_t(page) >= it->second[size_t(layer)].size()) {
        err_ = "gather_page: no such page (split layout only)";
        return SPECKV_ENOENT;
    }
    const size_t len = size_t(n) * row_bytes_;
    const speckv_handle kb = it->second[size_t(layer)][size_t(page)], vb = vt->second[size_t(layer)][size_t(page)];
    if (int rc = speckv_access(pool_, kb, 0, kc, len, SPECKV_ACCESS_DEFAULT); rc != SPECKV_OK)
        return fail(rc, "speckv_access K");
    note(kb, 0, len, false);
    if (int rc = speckv_access(pool_, vb, 0, vc, len, SPECKV_ACCESS_DEFAULT); rc != SPECKV_OK)
        return fail(rc, "speckv_access V");
    note(vb, 0, len, false);
    return SPECKV_OK;
}

int PagedKv::gather(uint64_t request, int layer, int npos, float *kc, float *vc) {
    auto it = table_.find(request);
    if (it == table_.end() || npos <= 0) {
        err_ = "gather: no K/V for this request";
        return SPECKV_ENOENT;
    }
    const auto &pages = it->second[size_t(layer)];
    const int npages = (npos + kPageTokens - 1) / kPageTokens;
    if (size_t(npages) > pages.size()) {
        err_ = "gather: positions not written yet";
        return SPECKV_ERANGE;
    }
    for (int p = 0; p < npages; p++) {
        if (split_) {  // K and V blocks share (request, layer, tokens): the engine's own table names them
            const int n = std::min(kPageTokens, npos - p * kPageTokens);
            const size_t first = size_t(p) * kPageTokens * size_t(kv_dim_);
            if (int rc = gather_page(request, layer, p, n, kc + first, vc + first); rc != SPECKV_OK) return rc;
            continue;
        }
        // Find the block as an engine's attention kernel would: by
        // (tenant, request, layer, token) through the pool's translation.
        speckv_handle b = SPECKV_HANDLE_INVALID;
        uint64_t off = ~uint64_t(0);
        if (int rc = speckv_translate(pool_, tenant_, request, uint32_t(layer), uint64_t(p) * kPageTokens, &b, &off);
            rc != SPECKV_OK)
            return fail(rc, "speckv_translate");
        translations_++;
        if (b != pages[size_t(p)] || off != 0) {
            err_ = "speckv_translate named a block other than the one this engine allocated";
            return SPECKV_EINTERNAL;
        }
        const int n = std::min(kPageTokens, npos - p * kPageTokens);
        // K rows [0, 16) then V rows [0, n): one contiguous read.
        const size_t len = (size_t(kPageTokens) + size_t(n)) * row_bytes_;
        const unsigned char *src = nullptr;
        if (pin_) {
            const void *ptr = nullptr;
            size_t got = 0;
            if (int rc = speckv_pin(pool_, b, &ptr, &got); rc != SPECKV_OK) return fail(rc, "speckv_pin");
            if (got < len) {
                speckv_unpin(pool_, b);
                err_ = "speckv_pin: block shorter than a page of K/V";
                return SPECKV_ERANGE;
            }
            src = static_cast<const unsigned char *>(ptr);
        } else {
            if (int rc = speckv_access(pool_, b, 0, buf_.data(), len, SPECKV_ACCESS_DEFAULT); rc != SPECKV_OK)
                return fail(rc, "speckv_access");
            note(b, 0, len, false);
            src = buf_.data();
        }
        const size_t first = size_t(p) * kPageTokens * size_t(kv_dim_);
        std::memcpy(kc + first, src, size_t(n) * row_bytes_);
        std::memcpy(vc + first, src + size_t(kPageTokens) * row_bytes_, size_t(n) * row_bytes_);
        if (pin_) {
            if (int rc = speckv_unpin(pool_, b); rc != SPECKV_OK) return fail(rc, "speckv_unpin");
        }
    }
    return SPECKV_OK;
}

int PagedKv::hint(uint64_t request, int layer, int pos) {
    if (!prefetch_) return SPECKV_OK;
    speckv_hint h;
    std::memset(&h, 0, sizeof h);
    h.struct_size = sizeof h;
    h.tenant = tenant_;
    h.request = request;
    h.layer = uint32_t(layer);
    h.token_pos = uint64_t(pos);
    h.token_count = 1;
    if (int rc = speckv_prefetch(pool_, &h); rc != SPECKV_OK) return fail(rc, "speckv_prefetch");
    hints_++;
    return SPECKV_OK;
}

int PagedKv::release(uint64_t request) {
    auto it = table_.find(request);
    if (it == table_.end()) return SPECKV_OK;
    int first = SPECKV_OK;
    for (auto &pages : it->second)
        for (speckv_handle b : pages) {
            if (int rc = speckv_free(pool_, b); rc != SPECKV_OK && first == SPECKV_OK) first = fail(rc, "speckv_free");
            first_page_id_.erase(b);
        }
    table_.erase(it);
    if (auto vt = vtable_.find(request); vt != vtable_.end()) {
        for (auto &pages : vt->second)
            for (speckv_handle b : pages) {
                if (int rc = speckv_free(pool_, b); rc != SPECKV_OK && first == SPECKV_OK)
                    first = fail(rc, "speckv_free V");
                first_page_id_.erase(b);
            }
        vtable_.erase(vt);
    }
    return first;
}

}  // namespace tinyllm
