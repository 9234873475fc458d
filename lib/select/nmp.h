// SPDX-License-Identifier: Apache-2.0
// Near-memory page selection and partial attention (issue 10: the PNM-KV /
// PnG-KV design). The code a CXL-side processor would run next to the pool:
// page summaries of sealed K pages, Quest-style upper bounds of q·k, top-k
// selection with a steady (hysteresis) rule, attention over a page set that
// returns a mergeable partial, and the exact flash-decoding merge.
//
// No pool dependency: everything works on arrays of summaries and of decoded
// K/V page pointers; the pool layer owns where they live. docs/selection.md
// has the math. All functions are thread-safe on distinct outputs (no shared
// mutable state besides a thread_local scratch buffer in attend_pages()).
// Internal (speckv::nmp, not exported from the shared object); the C ABI
// verbs speckv_select / speckv_attend are to be built on these.
#pragma once
#include <cstddef>
#include <cstdint>

namespace speckv::nmp {

// Which scoring kernel. `best` = the fastest this CPU has (AVX-512 for
// head_dim % 16 == 0, else AVX2 for head_dim % 8 == 0, else scalar). All give
// identical scores (docs/selection.md §2.3 fixes the summation order).
enum class Impl { scalar, avx2, avx512, best };
bool impl_available(Impl impl);
const char *impl_name(Impl impl);

// Geometry of one layer's K/V as the engine pages it. A page holds `tokens`
// rows; a row is `kv_heads * head_dim` elements (KV head g = channels
// [g*head_dim, (g+1)*head_dim)). Query head h reads KV head h / q_per_kv.
struct Geometry {
    uint32_t kv_heads = 0;
    uint32_t head_dim = 0;
    uint32_t q_per_kv = 1;  // GQA group size (1 = plain multi-head attention)
    uint32_t channels() const { return kv_heads * head_dim; }
    uint32_t q_heads() const { return kv_heads * q_per_kv; }
    size_t q_len() const { return size_t(q_heads()) * head_dim; }
};
// SPECKV_OK or SPECKV_EINVAL (a zero field, or channels() > 65535).
int check_geometry(const Geometry &g);

// ---- page summaries (§1)

// Bytes of one summary of a page with `channels` channels: a 16-byte header
// (CRC32C, magic, channels, tokens, exponent, source dtype) then `channels`
// FP16 minima and `channels` FP16 maxima, rounded outward (min toward -inf,
// max toward +inf) after scaling by 2^-exp, so the bound stays a bound.
size_t summary_size(uint32_t channels);
constexpr size_t kSummaryHeader = 16;

// Summary of a sealed K page: `tokens` rows of `channels` keys (dtype
// SPECKV_DTYPE_FP16 or SPECKV_DTYPE_FP32), consecutive rows `row_stride`
// elements apart (>= channels). Writes summary_size(channels) bytes to `out`.
// Returns SPECKV_OK, SPECKV_EINVAL (NULL, tokens 0 or > 65535, channels 0 or
// > 65535, stride < channels, other dtype, a key NaN or infinite), SPECKV_ERANGE
// (out_cap too small).
int summarize(int dtype, const void *keys, uint32_t tokens, uint32_t channels, size_t row_stride, void *out,
              size_t out_cap);

// Verifies one summary: size, magic, channel count and checksum. SPECKV_OK,
// SPECKV_EINVAL (NULL), SPECKV_ECORRUPT (anything else, with the reason).
int check_summary(const void *summary, size_t len, uint32_t channels);

// Tokens covered by a summary (header field; 0 when `summary` is NULL).
uint32_t summary_tokens(const void *summary);

// ---- scoring (§2)

struct ScoreOptions {
    float scale = 0;      // multiplies every bound; 0 = 1/sqrt(head_dim), so scores are attention logits
    bool verify = true;   // check each summary's CRC32C before using it
    Impl impl = Impl::best;
    size_t stride = 0;    // distance between the score rows of two groups; 0 = n. Lets
                          // threads score page ranges into one [kv_heads][N] table.
};

// For every page p and KV head group g:
//   scores[g * stride + p] = max over query heads h of g of scale * Σ_c max(q_h[c]*min[c], q_h[c]*max[c])
// which is >= scale * q_h·k for every key k of the page (exact arithmetic;
// float evaluation adds at most ~head_dim·2^-24 relative, §2.2). A head whose
// sum overflows to NaN (|q| near FLT_MAX) does not count; a zero score is +0.
// `q` holds q_heads()*head_dim floats (head-major), `q_len` their count;
// `summaries[p]` points to page p's summary (summary_size(channels) bytes).
// O(n · channels · q_per_kv). On error nothing in `scores` is meaningful.
// Returns SPECKV_OK, SPECKV_EINVAL (NULL, wrong q_len, q not finite, n 0,
// bad geometry, stride < n), SPECKV_ECORRUPT (a summary for a different channel count, or a
// summary fails its checksum: the page is named), SPECKV_ENOTSUP (impl not on this CPU).
int score_pages(const Geometry &g, const float *q, size_t q_len, const uint8_t *const *summaries, size_t n,
                float *scores, const ScoreOptions &opt = {});

// ---- selection (§3)

struct SelectParams {
    uint32_t budget = 0;   // pages to return, forced ones included; 1..n
    uint32_t recent = 1;   // the `recent` highest page ids are always selected
    float band = 0;        // hysteresis in score units (>= 0; 0 = plain top-k)
};

// Top-`budget` pages of one score row (n pages): the forced pages (the
// `recent` last ones and every id in `pinned`), then previous-step pages
// (`prev`) whose score is >= cut - band, where cut is the score of the last
// page plain top-k would admit, then the best remaining pages. Order: score
// descending, lower page id first on ties. `out` receives `budget` ids sorted
// ascending; `*entered` (may be NULL) = pages in `out` not in `prev` (churn).
// O(n) expected. Returns SPECKV_OK, SPECKV_EINVAL (NULL, budget 0 or > n,
// band < 0 or NaN, a pinned id >= n, forced pages > budget, a NaN score),
// SPECKV_ERANGE (out_cap < budget). Ids in `prev` that are >= n are ignored.
int select_pages(const float *scores, uint32_t n, const SelectParams &p, const uint32_t *pinned, size_t n_pinned,
                 const uint32_t *prev, size_t n_prev, uint32_t *out, size_t out_cap, uint32_t *entered);

// The ids in [0, n) not in `sel` (sorted ascending, duplicates allowed), in
// ascending order, to `out` (cap >= n - |sel|). Returns the count written.
size_t complement(const uint32_t *sel, size_t n_sel, uint32_t n, uint32_t *out);

// ---- partial attention and the merge (§4)

// One decoded page: `tokens` rows of K and of V, each row channels()
// elements of the call's dtype (FP16 or FP32), rows `row_stride` elements
// apart (0 = channels()).
struct PageKV {
    const void *k = nullptr;
    const void *v = nullptr;
    uint32_t tokens = 0;
    uint32_t row_stride = 0;
};

// A partial result per query head: out[h*head_dim ...] = softmax-weighted mean
// of V over the set, max_score[h] = max logit, sum_exp[h] = Σ exp(logit - max).
// An empty set gives out 0, max -inf, sum 0 (the merge identity).
struct Partial {
    float *out = nullptr;        // q_heads * head_dim
    float *max_score = nullptr;  // q_heads
    float *sum_exp = nullptr;    // q_heads
};

// Attention of `q` over the pages `ids` of `pages` (n_pages entries).
// `group_off` (kv_heads+1 offsets into `ids`, CSR) gives each KV head group its
// own set; NULL = `ids[0..n_ids)` for every group. logit = scale * q·k
// (scale 0 = 1/sqrt(head_dim)). Returns SPECKV_OK, SPECKV_EINVAL (NULL, wrong
// q_len, bad dtype or geometry, an id >= n_pages, a page with no data or
// tokens 0, group_off not monotone or past n_ids).
int attend_pages(const Geometry &g, int dtype, const float *q, size_t q_len, const PageKV *pages, size_t n_pages,
                 const uint32_t *ids, size_t n_ids, const uint32_t *group_off, float scale, const Partial &res);

// Exact merge of two partials over disjoint sets (flash-decoding):
//   M = max(m1, m2), a_i = l_i exp(m_i - M), L = a1 + a2, o = (a1 o1 + a2 o2) / L.
// `out` may alias `a` or `b`. heads = q_heads.
void merge_partials(uint32_t heads, uint32_t head_dim, const Partial &a, const Partial &b, const Partial &out);

}  // namespace speckv::nmp
