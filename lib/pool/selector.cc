// SPDX-License-Identifier: Apache-2.0
// Selector (pool/selector.h): page summaries written with the K pages they
// describe, speckv_select and speckv_attend next to the pool.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "select/nmp.h"
#include "pool/selector.h"
#include "util/seqlock.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;
using enum PoolCounters::Counter;

bool Selector::summarize_page_locked(uint64_t page, const unsigned char *values, size_t logical, uint8_t dtype) {
    if (dtype != SPECKV_DTYPE_FP16 && dtype != SPECKV_DTYPE_FP32) return false;
    const size_t row = size_t(st_.channels) * codec::dtype_size(dtype);
    if (!row || logical % row || nmp::summary_size(st_.channels) > L_.summary_bytes) return false;
    const auto tokens = static_cast<uint32_t>(logical / row);
    if (nmp::summarize(dtype, values, tokens, st_.channels, st_.channels, L_.summaries + page * L_.summary_bytes,
                       L_.summary_bytes) != SPECKV_OK) {
        clear_error();  // NaN/Inf keys: no bound, so no summary (the page is then always selected)
        return false;
    }
    bump(kSummaries);
    return true;
}

int Selector::check_params(const speckv_select_params &p, const float *q, size_t q_len, bool select) const {
    if (p.struct_size != sizeof(speckv_select_params))
        return fail(SPECKV_ESTRUCT, "speckv_select_params.struct_size is %zu, this library knows %zu", p.struct_size,
                    sizeof(speckv_select_params));
    nmp::Geometry g{p.kv_heads, p.head_dim, p.q_per_kv};
    if (int rc = nmp::check_geometry(g); rc != SPECKV_OK) return rc;
    if (q_len != g.q_len())
        return fail(SPECKV_EINVAL, "q has %zu floats; %u query heads x %u head_dim need %zu", q_len, g.q_heads(),
                    p.head_dim, g.q_len());
    if (!(p.scale >= 0) || std::isinf(p.scale)) return fail(SPECKV_EINVAL, "scale %g is not a finite number >= 0", double(p.scale));
    if (std::isnan(p.band)) return fail(SPECKV_EINVAL, "band is NaN");
    for (size_t i = 0; i < q_len; i++)
        if (!std::isfinite(q[i])) return fail(SPECKV_EINVAL, "query element %zu is not finite", i);
    if (select && p.budget == 0 && p.budget_tokens == 0) return fail(SPECKV_EINVAL, "budget is 0: select at least one page");
    // Only once the arguments are known good: what this pool cannot do.
    if (!L_.summaries)
        return fail(SPECKV_ENOTSUP,
                    "this pool has no summary area: create it with pool.summary_bytes >= %zu for %u channels",
                    nmp::summary_size(g.channels()), g.channels());
    return SPECKV_OK;
}

int Selector::k_pages(uint64_t tenant, uint64_t request, uint32_t layer, uint32_t row_elems, uint64_t context_tokens,
                      std::vector<KPage> *out) {
    if (!resolver_->tenant_visible(tenant))
        return fail(SPECKV_EPERM, "this pool handle is bound to tenant %" PRId64 " (tenant.id), not %" PRIu64,
                    resolver_->tenant_id(), tenant);
    std::vector<uint64_t> hs;
    io_.collect(tenant, request, layer, &hs);
    struct Blk {
        uint64_t handle, token_pos;
        BlockView v;
    };
    std::vector<Blk> ks;
    for (uint64_t h : hs) {
        BlockView v{};
        if (resolver_->resolve(h, &v) != SPECKV_OK) {
            clear_error();  // freed meanwhile
            continue;
        }
        if (!(relaxed_field(v.rec->hint_flags) & SPECKV_HINT_KEYS)) continue;
        if (v.cold())  // in L4: back into the pool first (the holder), or a clear error, never a partial result
            if (int rc = io_.ensure_hot(h, &v); rc != SPECKV_OK) return rc;
        ks.push_back({h, relaxed_field(v.rec->token_pos), v});
    }
    std::sort(ks.begin(), ks.end(), [](const Blk &a, const Blk &b) {
        return a.token_pos != b.token_pos ? a.token_pos < b.token_pos : a.handle < b.handle;
    });
    out->clear();
    for (const Blk &b : ks) {
        if (b.v.dtype != SPECKV_DTYPE_FP16 && b.v.dtype != SPECKV_DTYPE_FP32)
            return fail(SPECKV_ENOTSUP, "K block 0x%" PRIx64 " holds dtype %u: selection needs FP16 or FP32 keys",
                        b.handle, b.v.dtype);
        const uint64_t row = uint64_t(row_elems) * codec::dtype_size(b.v.dtype);
        if (L_.page_size % row)
            return fail(SPECKV_ENOTSUP, "K rows of %" PRIu64 " bytes straddle the pool's %u-byte pages", row, L_.page_size);
        const uint64_t per_page = L_.page_size / row;
        // A packed block's summaries live in its image (docs/pool-format.md
        // "Packed blocks"), read optimistically: select re-checks tier_seq.
        uint32_t psb = 0;
        if (b.v.packed && L_.summaries) {
            PackHead ph;
            if (packed_->head(b.v, &ph) && ph.summary_bytes == L_.summary_bytes) psb = L_.summary_bytes;
        }
        for (uint32_t i = 0; i < b.v.npages; i++) {
            const uint64_t off = uint64_t(i) * L_.page_size;
            const uint64_t rows = std::min<uint64_t>(per_page, (b.v.bytes - off) / row);
            if (uint64_t(i) * per_page >= context_tokens - std::min(context_tokens, b.token_pos)) break;  // tp would pass the context (or wrap)
            const uint64_t tp = b.token_pos + uint64_t(i) * per_page;
            if (!rows || tp >= context_tokens) break;
            KPage k{b.handle, b.v.first_page + i, off, tp,
                    static_cast<uint32_t>(std::min<uint64_t>(rows, context_tokens - tp)), b.v.dtype, b.v.rec, b.v.tseq};
            if (b.v.packed) {
                k.page = UINT64_MAX;
                PackEntry e;
                if (psb && packed_->entry(b.v, i, &e) && (e.flags & (kPageSummary | kPageZero)) == kPageSummary)
                    k.psum = L_.data + (b.v.first_page << L_.page_shift) + sizeof(PackHead) + size_t(b.v.npages) * sizeof(PackEntry) +
                             size_t(i) * psb;
            }
            out->push_back(k);
        }
    }
    if (out->empty())
        return fail(SPECKV_ENOENT,
                    "no K page of tenant %" PRIu64 ", request %" PRIu64 ", layer %u below token %" PRIu64
                    " (blocks hinted SPECKV_HINT_KEYS)",
                    tenant, request, layer, context_tokens);
    return SPECKV_OK;
}

int Selector::select(uint64_t tenant, uint64_t request, uint32_t layer, const float *q, size_t q_len,
                     const speckv_select_params &p, speckv_page_ref *out, size_t cap, size_t *n_out, size_t *n_pages) {
    if (int rc = check_params(p, q, q_len, /*select=*/true); rc != SPECKV_OK) return rc;
    const nmp::Geometry g{p.kv_heads, p.head_dim, p.q_per_kv};
    const uint32_t C = g.channels();
    std::vector<KPage> pages;
    const size_t ssz = nmp::summary_size(C);
    std::vector<uint8_t> sums;
    std::vector<uint32_t> have;  // pages with a summary, by index
    uint32_t n = 0, budget = 0;
    for (int attempt = 0;; attempt++) {
    if (int rc = k_pages(tenant, request, layer, C, p.context_tokens, &pages); rc != SPECKV_OK) return rc;
    n = static_cast<uint32_t>(pages.size());
    if (n_pages) *n_pages = n;
    uint32_t want = p.budget;
    if (p.budget_tokens) {  // tokens -> pages: a page counts as the tokens a full one holds
        const uint64_t per_page = L_.page_size / (uint64_t(C) * codec::dtype_size(pages[0].dtype));
        want = static_cast<uint32_t>(std::min<uint64_t>(
            UINT32_MAX, p.budget_tokens / per_page + (p.budget_tokens % per_page != 0)));  // no wrap near 2^64
    }
    budget = std::min(want, n);
    if (cap < budget) return fail(SPECKV_ERANGE, "out holds %zu page refs, the selection has %u", cap, budget);

    // Copy each summary under its page's sequence lock: a consistent copy of
    // the summary of exactly the page's current keys, or none.
    sums.assign(size_t(n) * ssz, 0);
    have.clear();
    for (uint32_t i = 0; i < n; i++) {
        if (pages[i].page == UINT64_MAX) {  // a packed block's page: its summary is in the image
            if (pages[i].psum) {
                SEQLOCK_IGNORE_BEGIN();
                std::memcpy(&sums[size_t(i) * ssz], pages[i].psum, ssz);
                SEQLOCK_IGNORE_END();
                const uint8_t *sm = &sums[size_t(i) * ssz];
                const uint32_t ch = uint32_t(sm[8]) | uint32_t(sm[9]) << 8;
                std::atomic_thread_fence(std::memory_order_acquire);
                if (ch == C) {
                    have.push_back(i);
                } else if (pages[i].rec->tier_seq.load(std::memory_order_seq_cst) == pages[i].tseq) {
                    return fail(SPECKV_EINVAL,
                                "packed page %" PRIu64 " of block 0x%" PRIx64
                                " was summarised with %u channels per row (select.channels of its writer); the query has "
                                "%u x %u",
                                pages[i].offset / L_.page_size, pages[i].handle, ch, p.kv_heads, p.head_dim);
                }  // else it moved: taken again below
            }
            continue;
        }
        const PageEntry &pe = L_.pages[pages[i].page];
        for (;;) {
            const uint64_t s1 = pe.seq.load(std::memory_order_acquire);
            if (s1 & 1) {
                uint64_t s2;
                if (int rc = plocks_->wait_even(pe, &s2); rc != SPECKV_OK) return rc;
                continue;
            }
            const bool ok = (pe.flags.load(std::memory_order_acquire) & (kPageSummary | kPageZero)) == kPageSummary;
            if (ok) {
                SEQLOCK_IGNORE_BEGIN();
                std::memcpy(&sums[size_t(i) * ssz], L_.summaries + pages[i].page * L_.summary_bytes, ssz);
                SEQLOCK_IGNORE_END();
            }
            std::atomic_thread_fence(std::memory_order_acquire);
            if (pe.seq.load(std::memory_order_relaxed) != s1) continue;
            if (ok) {
                const uint8_t *sm = &sums[size_t(i) * ssz];
                const uint32_t ch = uint32_t(sm[8]) | uint32_t(sm[9]) << 8;
                if (ch != C)
                    return fail(SPECKV_EINVAL,
                                "page %" PRIu64 " was summarised with %u channels per row (select.channels of its "
                                "writer); the query has %u x %u",
                                pages[i].page, ch, p.kv_heads, p.head_dim);
                have.push_back(i);
            }
            break;
        }
    }
    // A K block that moved to L4 (or back) meanwhile: its pages may be
    // another block's by now. Take the pages again.
    bool moved = false;
    for (const KPage &k : pages) moved |= k.rec->tier_seq.load(std::memory_order_seq_cst) != k.tseq;
    if (!moved) break;
    if (attempt >= 8) return fail(SPECKV_EBUSY, "K blocks of request %" PRIu64 " layer %u kept moving between tiers", request, layer);
    }
    // Scores: max over KV head groups of the nmp upper bound; +inf for a page
    // without a summary (no bound: it must be kept).
    std::vector<float> score(n, std::numeric_limits<float>::infinity());
    if (!have.empty()) {
        std::vector<const uint8_t *> ptr(have.size());
        for (size_t j = 0; j < have.size(); j++) ptr[j] = &sums[size_t(have[j]) * ssz];
        std::vector<float> sc(size_t(p.kv_heads) * have.size());
        nmp::ScoreOptions so;
        so.scale = p.scale;
        if (int rc = nmp::score_pages(g, q, q_len, ptr.data(), have.size(), sc.data(), so); rc != SPECKV_OK) {
            if (rc == SPECKV_ECORRUPT) {
                // Name the pool page whose summary is bad.
                for (size_t j = 0; j < have.size(); j++)
                    if (nmp::check_summary(ptr[j], ssz, C) != SPECKV_OK) {
                        const KPage &k = pages[have[j]];
                        return fail(SPECKV_ECORRUPT,
                                    "the summary of %s %" PRIu64 " (block 0x%" PRIx64 ", tokens %" PRIu64 "..%" PRIu64
                                    ") fails its checksum: `speckv pool check` reports it; rewriting the page renews it",
                                    k.page == UINT64_MAX ? "packed page" : "page",
                                    k.page == UINT64_MAX ? k.offset / L_.page_size : k.page, k.handle, k.token_pos,
                                    k.token_pos + k.tokens - 1);
                    }
            }
            return rc;
        }
        for (size_t j = 0; j < have.size(); j++) {
            float m = -std::numeric_limits<float>::infinity();
            for (uint32_t gi = 0; gi < p.kv_heads; gi++) m = std::max(m, sc[size_t(gi) * have.size() + j]);
            score[have[j]] = m;
        }
    }
    nmp::SelectParams sp;
    sp.budget = budget;
    sp.recent = std::min(p.recent == UINT32_MAX ? st_.recent : p.recent, budget);
    sp.band = p.band < 0 ? st_.band : p.band;
    const std::string key = std::to_string(tenant) + "/" + std::to_string(request) + "/" + std::to_string(layer);
    std::vector<uint32_t> prev, ids(budget);
    {
        std::lock_guard gd(st_.mu);
        if (auto it = st_.prev.find(key); it != st_.prev.end()) prev = it->second;
    }
    uint32_t entered = 0;
    if (int rc = nmp::select_pages(score.data(), n, sp, nullptr, 0, prev.data(), prev.size(), ids.data(), ids.size(),
                                   &entered);
        rc != SPECKV_OK)
        return rc;
    {
        std::lock_guard gd(st_.mu);
        if (st_.prev.size() >= 65536) st_.prev.clear();  // bounded; the steady rule restarts
        st_.prev[key] = ids;
    }
    for (uint32_t j = 0; j < budget; j++) {
        const KPage &k = pages[ids[j]];
        out[j] = speckv_page_ref{k.handle, k.offset, k.token_pos, k.tokens, score[ids[j]]};
    }
    *n_out = budget;
    bump(kSelCalls);
    bump(kSelEntered, entered);
    return SPECKV_OK;
}

int Selector::attend(uint64_t tenant, uint64_t request, uint32_t layer, const float *q, size_t q_len,
                     const speckv_select_params &p, const speckv_page_ref *exclude, size_t n_exclude,
                     const speckv_partial &res) {
    if (int rc = check_params(p, q, q_len, /*select=*/false); rc != SPECKV_OK) return rc;
    const nmp::Geometry g{p.kv_heads, p.head_dim, p.q_per_kv};
    const uint32_t C = g.channels();
    std::vector<KPage> pages;
    if (int rc = k_pages(tenant, request, layer, C, p.context_tokens, &pages); rc != SPECKV_OK) return rc;
    // The V blocks of the same (tenant, request, layer), by token range.
    std::vector<uint64_t> hs;
    io_.collect(tenant, request, layer, &hs);
    struct VBlk {
        uint64_t handle, token_pos, bytes;
        uint8_t dtype;
    };
    std::vector<VBlk> vs;
    for (uint64_t h : hs) {
        BlockView v{};
        if (resolver_->resolve(h, &v) != SPECKV_OK) {
            clear_error();
            continue;
        }
        if (!(relaxed_field(v.rec->hint_flags) & SPECKV_HINT_VALUES)) continue;
        if (v.cold())
            if (int rc = io_.ensure_hot(h, &v); rc != SPECKV_OK) return rc;
        vs.push_back({h, relaxed_field(v.rec->token_pos), v.bytes, v.dtype});
    }
    const int dtype = pages[0].dtype;
    const size_t es = codec::dtype_size(dtype), row = size_t(C) * es;
    std::vector<size_t> keep;
    for (size_t i = 0; i < pages.size(); i++) {
        bool excluded = false;
        for (size_t j = 0; j < n_exclude && !excluded; j++)
            excluded = exclude[j].block == pages[i].handle && exclude[j].offset == pages[i].offset;
        if (!excluded) keep.push_back(i);
        if (pages[i].dtype != dtype)
            return fail(SPECKV_EINVAL, "K blocks of request %" PRIu64 " layer %u mix dtypes", request, layer);
    }
    // Read (and decode) K and V rows of the kept pages next to the pool.
    std::vector<unsigned char> kbuf(keep.size() * L_.page_size), vbuf(keep.size() * L_.page_size);
    std::vector<nmp::PageKV> kv(keep.size());
    for (size_t j = 0; j < keep.size(); j++) {
        const KPage &k = pages[keep[j]];
        const size_t len = size_t(k.tokens) * row;
        if (int rc = io_.read(k.handle, k.offset, kbuf.data() + j * L_.page_size, len); rc != SPECKV_OK) return rc;
        const VBlk *vb = nullptr;
        for (const VBlk &v : vs)
            if (k.token_pos >= v.token_pos && k.token_pos - v.token_pos <= v.bytes / row && k.token_pos - v.token_pos + k.tokens <= v.bytes / row) {
                vb = &v;
                break;
            }
        if (!vb)
            return fail(SPECKV_ENOENT,
                        "no block hinted SPECKV_HINT_VALUES holds the V rows of tokens %" PRIu64 "..%" PRIu64
                        " (request %" PRIu64 ", layer %u)",
                        k.token_pos, k.token_pos + k.tokens - 1, request, layer);
        if (vb->dtype != dtype) return fail(SPECKV_EINVAL, "V block 0x%" PRIx64 " has another dtype than its K block", vb->handle);
        if (int rc = io_.read(vb->handle, (k.token_pos - vb->token_pos) * row, vbuf.data() + j * L_.page_size, len);
            rc != SPECKV_OK)
            return rc;
        kv[j] = nmp::PageKV{kbuf.data() + j * L_.page_size, vbuf.data() + j * L_.page_size, k.tokens, C};
    }
    nmp::Partial part{res.out, res.max_score, res.sum_exp};
    if (keep.empty()) {  // every page excluded: the merge identity
        std::fill(res.out, res.out + g.q_len(), 0.0f);
        std::fill(res.max_score, res.max_score + g.q_heads(), -std::numeric_limits<float>::infinity());
        std::fill(res.sum_exp, res.sum_exp + g.q_heads(), 0.0f);
        bump(kAttendCalls);
        return SPECKV_OK;
    }
    std::vector<uint32_t> ids(keep.size());
    for (size_t j = 0; j < ids.size(); j++) ids[j] = static_cast<uint32_t>(j);
    if (int rc = nmp::attend_pages(g, dtype, q, q_len, kv.data(), kv.size(), ids.data(), ids.size(), nullptr, p.scale,
                                   part);
        rc != SPECKV_OK)
        return rc;
    bump(kAttendCalls);
    return SPECKV_OK;
}

}  // namespace speckv
