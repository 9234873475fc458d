// SPDX-License-Identifier: Apache-2.0
// Near-memory page selection: summaries, bounds, steady top-k, partial
// attention and its merge. The scalar scoring kernel here is the reference
// the AVX2 and AVX-512 ones (nmp_avx2.cc, nmp_avx512.cc) must equal bit for
// bit. docs/selection.md.
#include "select/nmp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "codec/codec.h"
#include "util/crc32c.h"
#include "select/nmp_kernels.h"
#include "speckv.h"
#include "util/status.h"

namespace speckv::nmp {

namespace {

constexpr uint32_t kMagic = 0x31534D4E;  // "NMS1"
constexpr float kF16Max = 65504.0f;

uint16_t rd16(const uint8_t *p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}
uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// Neighbours of an FP16 value toward -inf / +inf (finite inputs only).
uint16_t f16_toward_neg(uint16_t h) {
    if (h == 0x0000) return 0x8001;
    return (h & 0x8000) ? uint16_t(h + 1) : uint16_t(h - 1);
}
uint16_t f16_toward_pos(uint16_t h) {
    if (h == 0x8000) return 0x0001;
    return (h & 0x8000) ? uint16_t(h - 1) : uint16_t(h + 1);
}
// Largest FP16 <= x, smallest FP16 >= x (|x| <= 65504).
uint16_t f16_floor(float x) {
    uint16_t h = codec::fp32_to_fp16_rne(x);
    return codec::fp16_to_fp32(h) > x ? f16_toward_neg(h) : h;
}
uint16_t f16_ceil(float x) {
    uint16_t h = codec::fp32_to_fp16_rne(x);
    return codec::fp16_to_fp32(h) < x ? f16_toward_pos(h) : h;
}

float default_scale(const Geometry &g, float scale) {
    return scale != 0 ? scale : 1.0f / std::sqrt(float(g.head_dim));
}

// Selection order (score desc, id asc; a strict total order on the ids of
// non-NaN scores) as one integer: key(a) < key(b) iff a comes before b.
// High half: the score's bits mapped so that larger floats give smaller
// values (-0 taken as +0, since they compare equal); low half: the id.
uint64_t order_key(float s, uint32_t id) {
    uint32_t u;
    std::memcpy(&u, &s, 4);
    if ((u & 0x7FFFFFFFu) == 0) u = 0;
    const uint32_t asc = (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // increases with s
    return (uint64_t(~asc) << 32) | id;
}

}  // namespace

bool impl_available(Impl impl) {
    switch (impl) {
        case Impl::scalar:
        case Impl::best: return true;
        case Impl::avx2: return avx2_score_pages() != nullptr;
        case Impl::avx512: return avx512_score_pages() != nullptr;
    }
    return false;
}

const char *impl_name(Impl impl) {
    switch (impl) {
        case Impl::scalar: return "scalar";
        case Impl::avx2: return "avx2";
        case Impl::avx512: return "avx512";
        case Impl::best: return "best";
    }
    return "?";
}

int check_geometry(const Geometry &g) {
    if (!g.kv_heads || !g.head_dim || !g.q_per_kv)
        return fail(SPECKV_EINVAL, "nmp: geometry has a zero field (kv_heads %u, head_dim %u, q_per_kv %u)",
                    g.kv_heads, g.head_dim, g.q_per_kv);
    if (uint64_t(g.kv_heads) * g.head_dim > 65535 || g.q_per_kv > 1024)
        return fail(SPECKV_EINVAL, "nmp: geometry too large (%u x %u channels, %u query heads per KV head)",
                    g.kv_heads, g.head_dim, g.q_per_kv);
    return SPECKV_OK;
}

// ------------------------------------------------------------ summaries

size_t summary_size(uint32_t channels) { return kSummaryHeader + 4 * size_t(channels); }

int summarize(int dtype, const void *keys, uint32_t tokens, uint32_t channels, size_t row_stride, void *out,
              size_t out_cap) {
    if (!keys || !out) return fail(SPECKV_EINVAL, "nmp: summarize: NULL keys or output");
    if (dtype != SPECKV_DTYPE_FP16 && dtype != SPECKV_DTYPE_FP32)
        return fail(SPECKV_EINVAL, "nmp: summarize: keys must be FP16 or FP32 (dtype %d)", dtype);
    if (!tokens || tokens > 65535 || !channels || channels > 65535)
        return fail(SPECKV_EINVAL, "nmp: summarize: %u tokens x %u channels out of range", tokens, channels);
    if (row_stride < channels)
        return fail(SPECKV_EINVAL, "nmp: summarize: row stride %zu < %u channels", row_stride, channels);
    if (out_cap < summary_size(channels))
        return fail(SPECKV_ERANGE, "nmp: summarize: output holds %zu bytes, summary needs %zu", out_cap,
                    summary_size(channels));
    std::vector<float> lo(channels, std::numeric_limits<float>::infinity()),
        hi(channels, -std::numeric_limits<float>::infinity());
    for (uint32_t t = 0; t < tokens; t++) {
        for (uint32_t c = 0; c < channels; c++) {
            const size_t i = size_t(t) * row_stride + c;
            const float x = dtype == SPECKV_DTYPE_FP32 ? static_cast<const float *>(keys)[i]
                                                       : codec::fp16_to_fp32(static_cast<const uint16_t *>(keys)[i]);
            if (!std::isfinite(x))
                return fail(SPECKV_EINVAL, "nmp: summarize: key at token %u channel %u is not finite", t, c);
            lo[c] = std::min(lo[c], x);
            hi[c] = std::max(hi[c], x);
        }
    }
    float amax = 0;
    for (uint32_t c = 0; c < channels; c++) amax = std::max({amax, std::fabs(lo[c]), std::fabs(hi[c])});
    // Power-of-two scale so every value fits FP16: exact, and undone exactly at scoring.
    int e = 0;
    while (std::ldexp(amax, -e) > kF16Max) e++;
    auto *o = static_cast<uint8_t *>(out);
    std::memset(o, 0, kSummaryHeader);
    const uint32_t magic = kMagic;
    const uint16_t ch16 = uint16_t(channels), tok16 = uint16_t(tokens);
    std::memcpy(o + 4, &magic, 4);
    std::memcpy(o + 8, &ch16, 2);
    std::memcpy(o + 10, &tok16, 2);
    o[12] = uint8_t(int8_t(e));
    o[13] = uint8_t(dtype);
    uint8_t *mn = o + kSummaryHeader, *mx = mn + 2 * size_t(channels);
    for (uint32_t c = 0; c < channels; c++) {
        const uint16_t a = f16_floor(std::ldexp(lo[c], -e)), b = f16_ceil(std::ldexp(hi[c], -e));
        std::memcpy(mn + 2 * size_t(c), &a, 2);
        std::memcpy(mx + 2 * size_t(c), &b, 2);
    }
    const uint32_t crc = crc32c(0, o + 4, summary_size(channels) - 4);
    std::memcpy(o, &crc, 4);
    return SPECKV_OK;
}

namespace {
// Header checks every use needs (cheap); the CRC only when `verify`.
int check_header(const uint8_t *s, uint32_t channels, bool verify, size_t page) {
    if (rd32(s + 4) != kMagic) return fail(SPECKV_ECORRUPT, "nmp: summary of page %zu: bad magic", page);
    if (rd16(s + 8) != channels)
        return fail(SPECKV_ECORRUPT, "nmp: summary of page %zu has %u channels, expected %u", page, rd16(s + 8),
                    channels);
    if (verify && crc32c(0, s + 4, summary_size(channels) - 4) != rd32(s))
        return fail(SPECKV_ECORRUPT, "nmp: summary of page %zu fails its checksum", page);
    const int e = int8_t(s[12]);
    if (rd16(s + 10) == 0 || e < 0 || e > 127)
        return fail(SPECKV_ECORRUPT, "nmp: summary of page %zu: bad header fields", page);
    return SPECKV_OK;
}
}  // namespace

int check_summary(const void *summary, size_t len, uint32_t channels) {
    if (!summary) return fail(SPECKV_EINVAL, "nmp: NULL summary");
    if (!channels || channels > 65535 || len != summary_size(channels))
        return fail(SPECKV_ECORRUPT, "nmp: summary of %zu bytes does not fit %u channels", len, channels);
    return check_header(static_cast<const uint8_t *>(summary), channels, true, 0);
}

uint32_t summary_tokens(const void *summary) {
    return summary ? rd16(static_cast<const uint8_t *>(summary) + 10) : 0;
}

// ------------------------------------------------------------ scoring

QueryForm::QueryForm(const float *src, uint32_t qh, uint32_t D)
    : q_heads(qh), head_dim(D), q(src, src + size_t(qh) * D), neg(size_t(qh) * ((D + 15) / 16), 0) {
    const uint32_t W = words();
    for (uint32_t h = 0; h < qh; h++)
        for (uint32_t c = 0; c < D; c++)
            neg[size_t(h) * W + c / 16] |= uint16_t(uint16_t(std::signbit(src[size_t(h) * D + c])) << (c % 16));
}

void score_pages_scalar(const KernelArgs &a) {
    const uint32_t D = a.head_dim, C = a.kv_heads * a.head_dim, H = a.kv_heads * a.q_per_kv;
    for (size_t p = 0; p < a.n; p++) {
        for (uint32_t g = 0; g < a.kv_heads; g++) {
            const uint16_t *lo = a.payload[p] + size_t(g) * D, *hi = a.payload[p] + C + size_t(g) * D;
            for (uint32_t j = 0; j < a.q_per_kv; j++) {
                const size_t h = size_t(g) * a.q_per_kv + j;
                const float *qh = a.query->q.data() + h * D;
                float acc[16] = {};
                for (uint32_t c = 0; c < D; c++) {
                    // The corner of [min, max] that maximises q·k; one rounding, as vfmadd.
                    const float x = qh[c];
                    acc[c % 16] = std::fma(x, codec::fp16_to_fp32(std::signbit(x) ? lo[c] : hi[c]), acc[c % 16]);
                }
                float v[8], t[4];
                for (int l = 0; l < 8; l++) v[l] = acc[l] + acc[l + 8];
                for (int l = 0; l < 4; l++) t[l] = v[l] + v[l + 4];
                a.out[p * H + h] = (t[0] + t[2]) + (t[1] + t[3]);
            }
            a.gmax[p * a.kv_heads + g] = group_max(a.out + p * H + size_t(g) * a.q_per_kv, a.q_per_kv);
        }
    }
}

int score_pages(const Geometry &g, const float *q, size_t q_len, const uint8_t *const *summaries, size_t n,
                float *scores, const ScoreOptions &opt) {
    if (int rc = check_geometry(g)) return rc;
    if (!q || !summaries || !scores) return fail(SPECKV_EINVAL, "nmp: score_pages: NULL argument");
    if (q_len != g.q_len())
        return fail(SPECKV_EINVAL, "nmp: query has %zu floats, the geometry needs %zu (%u heads x %u)", q_len,
                    g.q_len(), g.q_heads(), g.head_dim);
    if (!n) return fail(SPECKV_EINVAL, "nmp: score_pages: no pages");
    const size_t stride = opt.stride ? opt.stride : n;
    if (stride < n) return fail(SPECKV_EINVAL, "nmp: score row stride %zu < %zu pages", stride, n);
    for (size_t i = 0; i < q_len; i++)
        if (!std::isfinite(q[i])) return fail(SPECKV_EINVAL, "nmp: query element %zu is not finite", i);
    const float scale = default_scale(g, opt.scale);
    if (!(scale > 0) || !std::isfinite(scale)) return fail(SPECKV_EINVAL, "nmp: score scale must be > 0");
    if (!impl_available(opt.impl))
        return fail(SPECKV_ENOTSUP, "nmp: %s scoring not available on this CPU", impl_name(opt.impl));
    // Every kernel gives the same floats; a head_dim a SIMD kernel does not
    // cover falls back to the next narrower one.
    ScorePagesFn fn = score_pages_scalar;
    const bool want512 = opt.impl == Impl::avx512 || opt.impl == Impl::best;
    const bool want256 = want512 || opt.impl == Impl::avx2;
    if (want512 && g.head_dim % 16 == 0 && avx512_score_pages())
        fn = avx512_score_pages();
    else if (want256 && g.head_dim % 8 == 0 && avx2_score_pages())
        fn = avx2_score_pages();
    const uint32_t C = g.channels(), qh = g.q_heads(), qpk = g.q_per_kv;
    // Batches of pages: headers (and CRCs) first, then the kernel, while the
    // batch is in L2. The kernel prefetches the summaries kAhead pages on, so
    // that memory streams while it computes (at 4+ query heads per KV head
    // the arithmetic takes about as long as reading the summaries).
    constexpr size_t kBatch = 16, kAhead = 32;
    std::vector<float> raw(kBatch * qh), gmax(kBatch * g.kv_heads);
    const QueryForm qf(q, qh, g.head_dim);
    const uint16_t *pay[kBatch];
    KernelArgs ka;
    ka.kv_heads = g.kv_heads;
    ka.head_dim = g.head_dim;
    ka.q_per_kv = qpk;
    ka.query = &qf;
    ka.payload = pay;
    ka.out = raw.data();
    ka.gmax = gmax.data();
    ka.summary_bytes = summary_size(C);
    for (size_t p0 = 0; p0 < n; p0 += kBatch) {
        const size_t nb = std::min(kBatch, n - p0);
        for (size_t i = 0; i < nb; i++) {
            const uint8_t *s = summaries[p0 + i];
            if (!s) return fail(SPECKV_EINVAL, "nmp: summary of page %zu is NULL", p0 + i);
            if (int rc = check_header(s, C, opt.verify, p0 + i)) return rc;
            pay[i] = reinterpret_cast<const uint16_t *>(s + kSummaryHeader);
        }
        ka.n = nb;
        ka.ahead = summaries + std::min(n, p0 + kAhead);
        ka.n_ahead = std::min(n, p0 + kAhead + nb) - std::min(n, p0 + kAhead);
        fn(ka);
        // Group score = (max_j r_j * 2^e) * scale. Multiplying by positive
        // factors rounds monotonically, so this is max_j ((r_j * 2^e) * scale)
        // with two multiplies per group instead of per head.
        for (size_t i = 0; i < nb; i++) {
            const uint32_t ebits = uint32_t(127 + int8_t(summaries[p0 + i][12])) << 23;  // 2^e, e in [0, 127]
            float f;
            std::memcpy(&f, &ebits, 4);
            for (uint32_t k = 0; k < g.kv_heads; k++)
                scores[size_t(k) * stride + p0 + i] = (gmax[i * g.kv_heads + k] * f) * scale;
        }
    }
    return SPECKV_OK;
}

// ------------------------------------------------------------ selection

int select_pages(const float *scores, uint32_t n, const SelectParams &p, const uint32_t *pinned, size_t n_pinned,
                 const uint32_t *prev, size_t n_prev, uint32_t *out, size_t out_cap, uint32_t *entered) {
    if (!scores || !out || (n_pinned && !pinned) || (n_prev && !prev))
        return fail(SPECKV_EINVAL, "nmp: select_pages: NULL argument");
    if (p.budget == 0) return fail(SPECKV_EINVAL, "nmp: selection budget is 0");
    if (p.budget > n) return fail(SPECKV_EINVAL, "nmp: budget %u pages > %u pages in the context", p.budget, n);
    if (!(p.band >= 0)) return fail(SPECKV_EINVAL, "nmp: hysteresis band must be >= 0");
    if (out_cap < p.budget) return fail(SPECKV_ERANGE, "nmp: output holds %zu ids, budget is %u", out_cap, p.budget);
    for (uint32_t i = 0; i < n; i++)
        if (std::isnan(scores[i])) return fail(SPECKV_EINVAL, "nmp: score of page %u is NaN", i);

    enum : uint8_t { kFree = 0, kForced = 1, kKept = 2, kPrev = 4, kChosen = 8 };
    std::vector<uint8_t> st(n, kFree);
    uint32_t forced = 0;
    for (uint32_t i = n - std::min(p.recent, n); i < n; i++) st[i] = kForced, forced++;
    for (size_t i = 0; i < n_pinned; i++) {
        if (pinned[i] >= n) return fail(SPECKV_EINVAL, "nmp: pinned page %u >= %u pages", pinned[i], n);
        if (!(st[pinned[i]] & kForced)) st[pinned[i]] |= kForced, forced++;
    }
    if (forced > p.budget)
        return fail(SPECKV_EINVAL, "nmp: %u recent + pinned pages exceed the budget of %u", forced, p.budget);
    for (size_t i = 0; i < n_prev; i++)
        if (prev[i] < n) st[prev[i]] |= kPrev;

    // Candidates as 64-bit keys that sort in the selection order (score
    // descending, id ascending): nth_element then compares integers in place
    // instead of chasing ids into the score array.
    const uint32_t m = p.budget - forced;  // slots chosen by score
    if (m) {
        std::vector<uint64_t> cand;
        cand.reserve(n - forced);
        for (uint32_t i = 0; i < n; i++)
            if (!(st[i] & kForced)) cand.push_back(order_key(scores[i], i));
        std::nth_element(cand.begin(), cand.begin() + (m - 1), cand.end());
        const float cut = scores[uint32_t(cand[m - 1])];
        if (p.band > 0 && n_prev) {
            // Steady rule: an incumbent keeps its slot while within `band` of the cut.
            std::vector<uint64_t> kept;
            for (size_t i = 0; i < n_prev; i++) {
                const uint32_t id = prev[i];
                if (id < n && st[id] == kPrev && scores[id] >= cut - p.band) {
                    st[id] |= kKept;
                    kept.push_back(order_key(scores[id], id));
                }
            }
            if (kept.size() > m) {
                std::nth_element(kept.begin(), kept.begin() + (m - 1), kept.end());
                for (size_t i = m; i < kept.size(); i++) st[uint32_t(kept[i])] &= uint8_t(~kKept);
                kept.resize(m);
            }
            const size_t r = m - kept.size();
            if (r) {
                size_t w = 0;  // the candidates not kept, compacted in place
                for (uint64_t k : cand)
                    if (!(st[uint32_t(k)] & kKept)) cand[w++] = k;
                std::nth_element(cand.begin(), cand.begin() + long(r - 1), cand.begin() + long(w));
                for (size_t i = 0; i < r; i++) st[uint32_t(cand[i])] |= kChosen;
            }
        } else {
            for (uint32_t i = 0; i < m; i++) st[uint32_t(cand[i])] |= kChosen;
        }
    }
    // Output in id order: one pass over the marks, no sort.
    uint32_t in = 0, w = 0;
    for (uint32_t i = 0; i < n; i++)
        if (st[i] & (kForced | kKept | kChosen)) {
            out[w++] = i;
            in += !(st[i] & kPrev);
        }
    if (entered) *entered = in;
    return SPECKV_OK;
}

size_t complement(const uint32_t *sel, size_t n_sel, uint32_t n, uint32_t *out) {
    size_t w = 0, j = 0;
    for (uint32_t i = 0; i < n; i++) {
        while (j < n_sel && sel[j] < i) j++;
        if (j < n_sel && sel[j] == i) continue;
        out[w++] = i;
    }
    return w;
}

// ------------------------------------------------------------ attention

namespace {
void load_row(int dtype, const void *base, size_t off, uint32_t n, float *dst) {
    if (dtype == SPECKV_DTYPE_FP32) {
        std::memcpy(dst, static_cast<const float *>(base) + off, size_t(n) * 4);
    } else {
        const uint16_t *h = static_cast<const uint16_t *>(base) + off;
        for (uint32_t i = 0; i < n; i++) dst[i] = codec::fp16_to_fp32(h[i]);
    }
}
}  // namespace

int attend_pages(const Geometry &g, int dtype, const float *q, size_t q_len, const PageKV *pages, size_t n_pages,
                 const uint32_t *ids, size_t n_ids, const uint32_t *group_off, float scale, const Partial &res) {
    if (int rc = check_geometry(g)) return rc;
    if (!q || (!pages && n_pages) || (!ids && n_ids) || !res.out || !res.max_score || !res.sum_exp)
        return fail(SPECKV_EINVAL, "nmp: attend_pages: NULL argument");
    if (dtype != SPECKV_DTYPE_FP16 && dtype != SPECKV_DTYPE_FP32)
        return fail(SPECKV_EINVAL, "nmp: attend_pages: K/V must be FP16 or FP32 (dtype %d)", dtype);
    if (q_len != g.q_len())
        return fail(SPECKV_EINVAL, "nmp: query has %zu floats, the geometry needs %zu", q_len, g.q_len());
    scale = default_scale(g, scale);
    if (!(scale > 0) || !std::isfinite(scale)) return fail(SPECKV_EINVAL, "nmp: attention scale must be > 0");
    const uint32_t C = g.channels(), D = g.head_dim;
    if (group_off) {
        if (group_off[0] > n_ids) return fail(SPECKV_EINVAL, "nmp: bad group offsets");
        for (uint32_t k = 0; k < g.kv_heads; k++)
            if (group_off[k + 1] < group_off[k] || group_off[k + 1] > n_ids)
                return fail(SPECKV_EINVAL, "nmp: group offsets not monotone or past %zu ids", n_ids);
    }
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] >= n_pages) return fail(SPECKV_EINVAL, "nmp: page id %u >= %zu pages", ids[i], n_pages);
        const PageKV &pg = pages[ids[i]];
        if (!pg.k || !pg.v || !pg.tokens) return fail(SPECKV_EINVAL, "nmp: page %u has no data", ids[i]);
        if (pg.row_stride && pg.row_stride < C)
            return fail(SPECKV_EINVAL, "nmp: page %u row stride %u < %u channels", ids[i], pg.row_stride, C);
    }
    static thread_local std::vector<float> logits, row, acc;
    row.resize(D);
    acc.resize(D);
    for (uint32_t k = 0; k < g.kv_heads; k++) {
        const size_t b = group_off ? group_off[k] : 0, e = group_off ? group_off[k + 1] : n_ids;
        size_t T = 0;
        for (size_t i = b; i < e; i++) T += pages[ids[i]].tokens;
        logits.resize(T);
        for (uint32_t j = 0; j < g.q_per_kv; j++) {
            const size_t h = size_t(k) * g.q_per_kv + j;
            const float *qh = q + h * D;
            float *o = res.out + h * D;
            if (T == 0) {
                std::fill(o, o + D, 0.0f);
                res.max_score[h] = -std::numeric_limits<float>::infinity();
                res.sum_exp[h] = 0;
                continue;
            }
            float mx = -std::numeric_limits<float>::infinity();
            size_t x = 0;
            for (size_t i = b; i < e; i++) {
                const PageKV &pg = pages[ids[i]];
                const size_t stride = pg.row_stride ? pg.row_stride : C;
                for (uint32_t t = 0; t < pg.tokens; t++) {
                    load_row(dtype, pg.k, t * stride + size_t(k) * D, D, row.data());
                    float s = 0;
                    for (uint32_t c = 0; c < D; c++) s += qh[c] * row[c];
                    s *= scale;
                    logits[x++] = s;
                    mx = std::max(mx, s);
                }
            }
            std::fill(acc.begin(), acc.end(), 0.0f);
            float l = 0;
            x = 0;
            for (size_t i = b; i < e; i++) {
                const PageKV &pg = pages[ids[i]];
                const size_t stride = pg.row_stride ? pg.row_stride : C;
                for (uint32_t t = 0; t < pg.tokens; t++) {
                    const float w = std::exp(logits[x++] - mx);
                    l += w;
                    load_row(dtype, pg.v, t * stride + size_t(k) * D, D, row.data());
                    for (uint32_t c = 0; c < D; c++) acc[c] += w * row[c];
                }
            }
            for (uint32_t c = 0; c < D; c++) o[c] = acc[c] / l;
            res.max_score[h] = mx;
            res.sum_exp[h] = l;
        }
    }
    return SPECKV_OK;
}

void merge_partials(uint32_t heads, uint32_t head_dim, const Partial &a, const Partial &b, const Partial &out) {
    for (uint32_t h = 0; h < heads; h++) {
        const double m1 = a.max_score[h], m2 = b.max_score[h], l1 = a.sum_exp[h], l2 = b.sum_exp[h];
        const double M = std::max(m1, m2);
        const float *o1 = a.out + size_t(h) * head_dim, *o2 = b.out + size_t(h) * head_dim;
        float *o = out.out + size_t(h) * head_dim;
        if (!(l1 > 0) && !(l2 > 0)) {
            std::fill(o, o + head_dim, 0.0f);
            out.max_score[h] = -std::numeric_limits<float>::infinity();
            out.sum_exp[h] = 0;
            continue;
        }
        const double w1 = l1 > 0 ? l1 * std::exp(m1 - M) : 0, w2 = l2 > 0 ? l2 * std::exp(m2 - M) : 0;
        const double L = w1 + w2;
        for (uint32_t c = 0; c < head_dim; c++) o[c] = float((w1 * o1[c] + w2 * o2[c]) / L);
        out.max_score[h] = float(M);
        out.sum_exp[h] = float(L);
    }
}

}  // namespace speckv::nmp
