// SPDX-License-Identifier: Apache-2.0
// Near-memory page selection through the C ABI (docs/selection.md §5): page
// summaries written with K pages, speckv_select against a reference built
// from the same keys with lib/nmp directly, the steady rule, and
// speckv_attend + speckv_merge_partials against full attention.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "util/crc32c.h"
#include "select/nmp.h"
#include "pool/pool.h"
#include "pool/pool_format.h"
#include "speckv.h"
#include "testutil.h"

namespace {

constexpr uint32_t kHeads = 2, kDim = 32, kQpk = 2, kC = kHeads * kDim;  // 64 channels: 128-byte FP16 rows
constexpr uint32_t kRowsPerPage = 4096 / (kC * 2);                       // 32 tokens a page
constexpr uint32_t kBlockTokens = 4 * kRowsPerPage;                      // 4 pages a block

struct Fixture {
    std::string path;
    speckv_pool *p = nullptr;
    std::vector<uint16_t> k, v;  // [token][kC] FP16, everything written
    uint64_t tokens = 0;
    std::vector<speckv_handle> kb, vb;

    explicit Fixture(uint64_t ntok, std::initializer_list<std::pair<const char *, const char *>> extra = {},
                     bool summaries = true) {
        path = fresh_pool("select");
        speckv_config *c = nullptr;
        REQUIRE(speckv_config_new(&c) == SPECKV_OK);
        if (summaries) REQUIRE(speckv_config_set_int(c, "pool.summary_bytes", 16 + 4 * kC) == SPECKV_OK);
        REQUIRE(speckv_config_set_int(c, "select.channels", kC) == SPECKV_OK);
        for (auto &[a, b] : extra) REQUIRE_MESSAGE(speckv_config_set_str(c, a, b) == SPECKV_OK, a);
        REQUIRE(speckv_pool_open(("file:" + path + "?size=32M").c_str(), c, &p) == SPECKV_OK);
        speckv_config_free(c);
        tokens = ntok;
        std::mt19937 rng(7);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        k.resize(ntok * kC);
        v.resize(ntok * kC);
        for (uint64_t t = 0; t < ntok; t++)
            for (uint32_t ch = 0; ch < kC; ch++) {
                // A few pages carry keys aligned with the query direction (channel 3 of each head).
                float bump = (t / kRowsPerPage) % 5 == 2 && ch % kDim == 3 ? 4.0f : 0.0f;
                k[t * kC + ch] = speckv::codec::fp32_to_fp16_rne(nd(rng) + bump);
                v[t * kC + ch] = speckv::codec::fp32_to_fp16_rne(nd(rng));
            }
        // Append token by token, as a decoder does: K and V blocks of 128 tokens.
        for (uint64_t t = 0; t < ntok; t++) {
            if (t % kBlockTokens == 0) {
                for (uint32_t kind : {SPECKV_HINT_KEYS, SPECKV_HINT_VALUES}) {
                    speckv_hint h{};
                    h.struct_size = sizeof h;
                    h.tenant = 3;
                    h.request = 11;
                    h.layer = 2;
                    h.token_pos = t;
                    h.token_count = kBlockTokens;
                    h.flags = kind;
                    speckv_handle b = 0;
                    REQUIRE(speckv_alloc(p, kBlockTokens * kC * 2, SPECKV_DTYPE_FP16, &h, &b) == SPECKV_OK);
                    (kind == SPECKV_HINT_KEYS ? kb : vb).push_back(b);
                }
            }
            uint64_t off = (t % kBlockTokens) * kC * 2;
            REQUIRE(speckv_write(p, kb.back(), off, &k[t * kC], kC * 2) == SPECKV_OK);
            REQUIRE(speckv_write(p, vb.back(), off, &v[t * kC], kC * 2) == SPECKV_OK);
        }
    }
    ~Fixture() {
        speckv_pool_close(p);
        unlink(path.c_str());
    }
    speckv_select_params params(uint32_t budget, uint32_t recent = 1, float band = 0) const {
        speckv_select_params sp{};
        sp.struct_size = sizeof sp;
        sp.kv_heads = kHeads;
        sp.head_dim = kDim;
        sp.q_per_kv = kQpk;
        sp.budget = budget;
        sp.recent = recent;
        sp.band = band;
        sp.context_tokens = tokens;
        return sp;
    }
};

std::vector<float> query(uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 0.3f);
    std::vector<float> q(size_t(kHeads) * kQpk * kDim);
    for (size_t i = 0; i < q.size(); i++) q[i] = nd(rng) + (i % kDim == 3 ? 1.0f : 0.0f);
    return q;
}

// The reference: summaries of every complete page from the keys themselves,
// nmp scores (max over groups), nmp top-k. Incomplete pages score +inf.
std::vector<uint32_t> reference_select(const Fixture &f, const std::vector<float> &q, uint32_t budget,
                                       std::vector<float> *scores) {
    const uint32_t n = uint32_t((f.tokens + kRowsPerPage - 1) / kRowsPerPage);
    scores->assign(n, std::numeric_limits<float>::infinity());
    std::vector<std::vector<uint8_t>> sums;
    std::vector<uint32_t> full;
    for (uint32_t i = 0; i < n; i++) {
        if ((i + 1) * uint64_t(kRowsPerPage) > f.tokens) continue;
        sums.emplace_back(speckv::nmp::summary_size(kC));
        REQUIRE(speckv::nmp::summarize(SPECKV_DTYPE_FP16, &f.k[size_t(i) * kRowsPerPage * kC], kRowsPerPage, kC, kC,
                                       sums.back().data(), sums.back().size()) == SPECKV_OK);
        full.push_back(i);
    }
    std::vector<const uint8_t *> ptr;
    for (auto &s : sums) ptr.push_back(s.data());
    std::vector<float> sc(size_t(kHeads) * full.size());
    speckv::nmp::Geometry g{kHeads, kDim, kQpk};
    REQUIRE(speckv::nmp::score_pages(g, q.data(), q.size(), ptr.data(), ptr.size(), sc.data()) == SPECKV_OK);
    for (size_t j = 0; j < full.size(); j++)
        (*scores)[full[j]] = std::max(sc[j], sc[full.size() + j]);
    speckv::nmp::SelectParams sp;
    sp.budget = budget;
    sp.recent = 1;
    std::vector<uint32_t> ids(budget);
    REQUIRE(speckv::nmp::select_pages(scores->data(), n, sp, nullptr, 0, nullptr, 0, ids.data(), ids.size(), nullptr) ==
            SPECKV_OK);
    return ids;
}

// Full attention in double precision from the raw FP16 keys and values.
void full_attention(const Fixture &f, const std::vector<float> &q, std::vector<double> *out) {
    const uint32_t H = kHeads * kQpk;
    out->assign(size_t(H) * kDim, 0.0);
    const double scale = 1.0 / std::sqrt(double(kDim));
    for (uint32_t h = 0; h < H; h++) {
        const uint32_t g = h / kQpk;
        std::vector<double> lg(f.tokens);
        double m = -1e300;
        for (uint64_t t = 0; t < f.tokens; t++) {
            double s = 0;
            for (uint32_t c = 0; c < kDim; c++)
                s += double(q[size_t(h) * kDim + c]) * speckv::codec::fp16_to_fp32(f.k[t * kC + g * kDim + c]);
            lg[t] = s * scale;
            m = std::max(m, lg[t]);
        }
        double sum = 0;
        for (uint64_t t = 0; t < f.tokens; t++) sum += std::exp(lg[t] - m);
        for (uint64_t t = 0; t < f.tokens; t++) {
            double w = std::exp(lg[t] - m) / sum;
            for (uint32_t c = 0; c < kDim; c++)
                (*out)[size_t(h) * kDim + c] += w * speckv::codec::fp16_to_fp32(f.v[t * kC + g * kDim + c]);
        }
    }
}

struct PartialBuf {
    std::vector<float> out, mx, sum;
    speckv_partial p{};
    PartialBuf() : out(size_t(kHeads) * kQpk * kDim), mx(kHeads * kQpk), sum(kHeads * kQpk) {
        p.struct_size = sizeof p;
        p.out = out.data();
        p.max_score = mx.data();
        p.sum_exp = sum.data();
    }
};

std::string stats_json(speckv_pool *p) {
    size_t need = 0;
    speckv_stats_json(p, nullptr, 0, &need);
    std::string s(need + 256, '\0');  // headroom: a live pool's counters can grow in between
    REQUIRE(speckv_stats_json(p, s.data(), s.size(), &need) == SPECKV_OK);
    s.resize(need);
    return s;
}

}  // namespace

TEST_CASE("speckv_select: the pool's summaries give the same selection as nmp on the keys themselves") {
    Fixture f(16 * kRowsPerPage - 5);  // 16 pages, the last one still being appended
    auto q = query(1);
    std::vector<float> ref_scores;
    auto ref = reference_select(f, q, 5, &ref_scores);
    auto sp = f.params(5);
    std::vector<speckv_page_ref> out(5);
    size_t n = 0, npages = 0;
    REQUIRE_MESSAGE(speckv_select(f.p, 3, 11, 2, q.data(), q.size(), &sp, out.data(), out.size(), &n, &npages) == SPECKV_OK,
                    speckv_errmsg());
    CHECK(npages == 16);
    REQUIRE(n == 5);
    for (size_t j = 0; j < n; j++) {
        const uint32_t id = uint32_t(out[j].token_pos / kRowsPerPage);
        CHECK(id == ref[j]);
        CHECK(out[j].score == ref_scores[id]);
        CHECK(out[j].block == f.kb[id / 4]);
        CHECK(out[j].offset == (id % 4) * 4096ull);
    }
    // The page being appended has no summary: +inf, and it is the recent one.
    CHECK(std::isinf(out[n - 1].score));
    CHECK(out[n - 1].tokens == kRowsPerPage - 5);
    // Every score bounds the true largest logit of its page.
    for (size_t j = 0; j + 1 < n; j++) {
        double best = -1e300;
        for (uint32_t h = 0; h < kHeads * kQpk; h++)
            for (uint32_t t = 0; t < out[j].tokens; t++) {
                double s = 0;
                for (uint32_t c = 0; c < kDim; c++)
                    s += double(q[h * kDim + c]) *
                         speckv::codec::fp16_to_fp32(f.k[(out[j].token_pos + t) * kC + (h / kQpk) * kDim + c]);
                best = std::max(best, s / std::sqrt(double(kDim)));
            }
        CHECK(double(out[j].score) >= best - 1e-4);
    }
    // The pages with the aligned keys (page % 5 == 2) are the ones chosen.
    CHECK(std::count_if(out.begin(), out.end() - 1, [](const speckv_page_ref &r) { return r.token_pos / kRowsPerPage % 5 == 2; }) >= 3);
}

TEST_CASE("speckv_select: a budget in tokens, and the layout before budget_tokens") {
    Fixture f(16 * kRowsPerPage - 5);
    auto q = query(1);
    auto pages_of = [&](speckv_select_params sp) {
        std::vector<speckv_page_ref> out(16);
        size_t n = 0, npages = 0;
        REQUIRE_MESSAGE(speckv_select(f.p, 3, 11, 2, q.data(), q.size(), &sp, out.data(), out.size(), &n, &npages) ==
                            SPECKV_OK,
                        speckv_errmsg());
        std::vector<uint64_t> pos;
        for (size_t j = 0; j < n; j++) pos.push_back(out[j].token_pos);
        return pos;
    };
    // 4.5 pages' worth of tokens -> the 5 pages a page budget of 5 selects.
    auto by_pages = pages_of(f.params(5));
    auto sp = f.params(0);
    sp.budget_tokens = 4 * kRowsPerPage + kRowsPerPage / 2;
    CHECK(pages_of(sp) == by_pages);
    sp.budget = 9;  // budget_tokens, when set, wins
    CHECK(pages_of(sp) == by_pages);
    sp.budget_tokens = 1;  // one token: one page (the recent one)
    CHECK(pages_of(sp).size() == 1);
    // A caller built against the header before budget_tokens: its struct_size.
    auto old = f.params(5);
    old.budget_tokens = 777;  // beyond its struct_size: never read
    old.struct_size = offsetof(speckv_select_params, budget_tokens);
    CHECK(pages_of(old) == by_pages);
    old.struct_size = offsetof(speckv_select_params, budget_tokens) + 4;
    std::vector<speckv_page_ref> out(16);
    size_t n = 0;
    CHECK(speckv_select(f.p, 3, 11, 2, q.data(), q.size(), &old, out.data(), out.size(), &n, nullptr) == SPECKV_ESTRUCT);
}

TEST_CASE("speckv_select: the steady rule keeps the set while scores stay in the band, and churn is counted") {
    Fixture f(16 * kRowsPerPage);
    std::vector<speckv_page_ref> a(6), b(6), c(6);
    size_t n = 0;
    auto sp = f.params(6, 1, 0.0f);
    auto q1 = query(1), q2 = query(2);
    REQUIRE(speckv_select(f.p, 3, 11, 2, q1.data(), q1.size(), &sp, a.data(), 6, &n, nullptr) == SPECKV_OK);
    REQUIRE(speckv_select(f.p, 3, 11, 2, q2.data(), q2.size(), &sp, b.data(), 6, &n, nullptr) == SPECKV_OK);
    auto same = [](const std::vector<speckv_page_ref> &x, const std::vector<speckv_page_ref> &y) {
        size_t k = 0;
        for (auto &r : x)
            for (auto &s : y) k += r.block == s.block && r.offset == s.offset;
        return k;
    };
    const size_t plain = same(a, b);
    // Back to q1, then q2 again with a wide band: the q1 set stays.
    REQUIRE(speckv_select(f.p, 3, 11, 2, q1.data(), q1.size(), &sp, a.data(), 6, &n, nullptr) == SPECKV_OK);
    sp.band = 100.0f;
    REQUIRE(speckv_select(f.p, 3, 11, 2, q2.data(), q2.size(), &sp, c.data(), 6, &n, nullptr) == SPECKV_OK);
    CHECK(same(a, c) == 6);
    MESSAGE("pages kept between q1 and q2: plain top-k " << plain << " of 6, band 100: 6 of 6");
    std::string js = stats_json(f.p);
    CHECK(js.find("\"select_calls\":4") != std::string::npos);
    CHECK(js.find("\"select_entered\":") != std::string::npos);
    // Config defaults: recent = UINT32_MAX and band < 0 take select.recent / select.band_milli.
    sp.recent = UINT32_MAX;
    sp.band = -1.0f;
    REQUIRE(speckv_select(f.p, 3, 11, 2, q2.data(), q2.size(), &sp, c.data(), 6, &n, nullptr) == SPECKV_OK);
    CHECK(c[5].token_pos == 15 * kRowsPerPage);  // select.recent = 1 by default: the last page is in
}

TEST_CASE("speckv_attend: near-memory part + GPU part, merged, equals full attention") {
    Fixture f(12 * kRowsPerPage + 7);
    auto q = query(3);
    std::vector<double> ref;
    full_attention(f, q, &ref);
    auto sp = f.params(4);
    std::vector<speckv_page_ref> sel(4);
    size_t n = 0, npages = 0;
    REQUIRE(speckv_select(f.p, 3, 11, 2, q.data(), q.size(), &sp, sel.data(), sel.size(), &n, &npages) == SPECKV_OK);
    REQUIRE(npages == 13);
    // The complement, as the GPU would be asked to attend only `sel`: gather
    // every page ref by selecting all of them.
    std::vector<speckv_page_ref> all(npages);
    auto spall = f.params(uint32_t(npages));
    size_t nall = 0;
    REQUIRE(speckv_select(f.p, 3, 11, 2, q.data(), q.size(), &spall, all.data(), all.size(), &nall, nullptr) == SPECKV_OK);
    std::vector<speckv_page_ref> rest;
    for (auto &r : all)
        if (std::none_of(sel.begin(), sel.end(), [&](auto &s) { return s.block == r.block && s.offset == r.offset; }))
            rest.push_back(r);
    REQUIRE(rest.size() == npages - 4);
    PartialBuf near, gpu, merged, full;
    REQUIRE_MESSAGE(speckv_attend(f.p, 3, 11, 2, q.data(), q.size(), &sp, sel.data(), sel.size(), &near.p) == SPECKV_OK,
                    speckv_errmsg());
    REQUIRE(speckv_attend(f.p, 3, 11, 2, q.data(), q.size(), &sp, rest.data(), rest.size(), &gpu.p) == SPECKV_OK);
    REQUIRE(speckv_merge_partials(kHeads * kQpk, kDim, &near.p, &gpu.p, &merged.p) == SPECKV_OK);
    REQUIRE(speckv_attend(f.p, 3, 11, 2, q.data(), q.size(), &sp, nullptr, 0, &full.p) == SPECKV_OK);
    double err = 0, norm = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        err = std::max(err, std::fabs(double(merged.out[i]) - ref[i]));
        norm = std::max(norm, std::fabs(ref[i]));
        CHECK(std::fabs(double(full.out[i]) - ref[i]) < 1e-4 * (1 + std::fabs(ref[i])));
    }
    MESSAGE("max |merged - full attention| = " << err << " (max |out| " << norm << ")");
    CHECK(err < 1e-4 * (1 + norm));
    // Everything excluded: the merge identity.
    PartialBuf none;
    REQUIRE(speckv_attend(f.p, 3, 11, 2, q.data(), q.size(), &sp, all.data(), all.size(), &none.p) == SPECKV_OK);
    CHECK(none.sum[0] == 0.0f);
    CHECK(std::isinf(none.mx[0]));
    CHECK(none.out[0] == 0.0f);
    CHECK(stats_json(f.p).find("\"attend_calls\":4") != std::string::npos);
}

TEST_CASE("speckv_select: summaries stay with the pages (other processes, coded pages, reopen)") {
    // Keys stored as int8 records: the summary bounds the decoded keys, which
    // is what attention (and speckv_access) sees.
    Fixture f(8 * kRowsPerPage, {{"codec.key_mode", "int8"}, {"codec.channels", "64"}});
    auto q = query(5);
    auto sp = f.params(3);
    std::vector<speckv_page_ref> out(3);
    size_t n = 0;
    REQUIRE(speckv_select(f.p, 3, 11, 2, q.data(), q.size(), &sp, out.data(), 3, &n, nullptr) == SPECKV_OK);
    std::vector<uint16_t> dec(kRowsPerPage * kC);
    for (auto &r : out) {
        REQUIRE(speckv_access(f.p, r.block, r.offset, dec.data(), dec.size() * 2, 0) == SPECKV_OK);
        CHECK(std::memcmp(dec.data(), &f.k[r.token_pos * kC], dec.size() * 2) != 0);  // lossy: really coded
        double best = -1e300;
        for (uint32_t h = 0; h < kHeads * kQpk; h++)
            for (uint32_t t = 0; t < kRowsPerPage; t++) {
                double s = 0;
                for (uint32_t c = 0; c < kDim; c++)
                    s += double(q[h * kDim + c]) * speckv::codec::fp16_to_fp32(dec[t * kC + (h / kQpk) * kDim + c]);
                best = std::max(best, s / std::sqrt(double(kDim)));
            }
        CHECK(double(r.score) >= best - 1e-4);
    }
    // Another process (no select.channels of its own) finds the same pages.
    pid_t pid = fork();
    if (pid == 0) {
        speckv_pool *o = nullptr;
        if (speckv_pool_open(("file:" + f.path).c_str(), nullptr, &o) != SPECKV_OK) _exit(2);
        std::vector<speckv_page_ref> x(3);
        size_t m = 0;
        if (speckv_select(o, 3, 11, 2, q.data(), q.size(), &sp, x.data(), 3, &m, nullptr) != SPECKV_OK) _exit(3);
        for (size_t j = 0; j < 3; j++)
            if (x[j].block != out[j].block || x[j].offset != out[j].offset || x[j].score != out[j].score) _exit(4);
        speckv_pool_close(o);
        _exit(0);
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    speckv::CheckReport rep;
    REQUIRE(f.p->rep->check(&rep) == SPECKV_OK);
    CHECK(rep.problems.empty());
}

TEST_CASE("speckv_select and speckv_attend: bad input gets a clear error") {
    Fixture f(4 * kRowsPerPage);
    auto q = query(1);
    auto sp = f.params(2);
    std::vector<speckv_page_ref> out(4);
    size_t n = 0;
    CHECK(speckv_select(f.p, 3, 11, 2, q.data(), q.size() - 1, &sp, out.data(), 4, &n, nullptr) == SPECKV_EINVAL);
    CHECK(std::string(speckv_errmsg()).find("query heads") != std::string::npos);
    auto bad = sp;
    bad.budget = 0;
    CHECK(speckv_select(f.p, 3, 11, 2, q.data(), q.size(), &bad, out.data(), 4, &n, nullptr) == SPECKV_EINVAL);
    bad = sp;
    bad.struct_size = 8;
    CHECK(speckv_select(f.p, 3, 11, 2, q.data(), q.size(), &bad, out.data(), 4, &n, nullptr) == SPECKV_ESTRUCT);
    bad = sp;
    bad.kv_heads = 4;  // 128 channels: the pages were summarised with 64
    std::vector<float> q4(size_t(4) * kQpk * kDim, 0.1f);
    CHECK(speckv_select(f.p, 3, 11, 2, q4.data(), q4.size(), &bad, out.data(), 4, &n, nullptr) == SPECKV_EINVAL);
    CHECK(speckv_select(f.p, 3, 12, 2, q.data(), q.size(), &sp, out.data(), 4, &n, nullptr) == SPECKV_ENOENT);
    CHECK(speckv_select(f.p, 3, 11, 2, q.data(), q.size(), &sp, out.data(), 1, &n, nullptr) == SPECKV_ERANGE);
    CHECK(speckv_select(f.p, 3, 11, 2, nullptr, q.size(), &sp, out.data(), 4, &n, nullptr) == SPECKV_EINVAL);
    std::vector<float> qnan = q;
    qnan[0] = std::nanf("");
    CHECK(speckv_select(f.p, 3, 11, 2, qnan.data(), qnan.size(), &sp, out.data(), 4, &n, nullptr) == SPECKV_EINVAL);
    PartialBuf pb;
    pb.p.struct_size = 4;
    CHECK(speckv_attend(f.p, 3, 11, 2, q.data(), q.size(), &sp, nullptr, 0, &pb.p) == SPECKV_ESTRUCT);
    CHECK(speckv_merge_partials(0, kDim, &pb.p, &pb.p, &pb.p) == SPECKV_EINVAL);
    // A summary damaged on media: check reports it, select names the page.
    REQUIRE(speckv_select(f.p, 3, 11, 2, q.data(), q.size(), &sp, out.data(), 4, &n, nullptr) == SPECKV_OK);
    speckv::BlockInfo bi{};
    std::vector<speckv::BlockInfo> blocks;
    REQUIRE(f.p->rep->list_blocks(&blocks) == SPECKV_OK);
    for (auto &b : blocks)
        if (b.handle == f.kb[0]) bi = b;
    {
        int fd = ::open(f.path.c_str(), O_RDWR);
        REQUIRE(fd >= 0);
        size_t size = size_t(lseek(fd, 0, SEEK_END));
        auto *base = static_cast<unsigned char *>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        REQUIRE(base != MAP_FAILED);
        auto *sb = reinterpret_cast<speckv::fmt::Superblock *>(base);
        base[sb->summary_off + bi.first_page * sb->summary_bytes + 40] ^= 0x10;
        munmap(base, size);
        ::close(fd);
    }
    speckv::CheckReport rep;
    REQUIRE(f.p->rep->check(&rep) == SPECKV_OK);
    REQUIRE(!rep.problems.empty());
    CHECK(rep.problems[0].find("summary") != std::string::npos);
    CHECK(speckv_select(f.p, 3, 11, 2, q.data(), q.size(), &sp, out.data(), 4, &n, nullptr) == SPECKV_ECORRUPT);
    CHECK(std::string(speckv_errmsg()).find("checksum") != std::string::npos);
}

TEST_CASE("speckv_select: a pool created without a summary area says how to get one") {
    Fixture f(2 * kRowsPerPage, {}, /*summaries=*/false);
    auto q = query(1);
    auto sp = f.params(1);
    speckv_page_ref r;
    size_t n = 0;
    CHECK(speckv_select(f.p, 3, 11, 2, q.data(), q.size(), &sp, &r, 1, &n, nullptr) == SPECKV_ENOTSUP);
    CHECK(std::string(speckv_errmsg()).find("pool.summary_bytes") != std::string::npos);
    speckv_config *c = nullptr;
    REQUIRE(speckv_config_new(&c) == SPECKV_OK);
    CHECK(speckv_config_set_int(c, "pool.summary_bytes", 100) == SPECKV_OK);  // bounds only here; geometry at open:
    speckv_pool *p = nullptr;
    CHECK(speckv_pool_open("anon:?size=8M", c, &p) == SPECKV_EINVAL);
    CHECK(std::string(speckv_errmsg()).find("multiple of 16") != std::string::npos);
    speckv_config_free(c);
}
