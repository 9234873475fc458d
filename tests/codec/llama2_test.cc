// SPDX-License-Identifier: Apache-2.0
// The llama2.c forward pass reproduces the documented greedy ids, and the K/V
// it makes goes through the codec end to end with bounded quality loss.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "data_dir.h"
#include "kv_eval.h"
#include "speckv.h"

namespace c = speckv::codec;

static std::string models() { return speckv_data::path("models"); }

TEST_CASE("llama2: stories260K greedy ids match data/README.md") {
    llama2::Model m;
    std::string err;
    REQUIRE_MESSAGE(m.load(models() + "/stories260K/stories260K.bin", &err), err);
    CHECK(m.c.n_layers == 5);
    CHECK(m.c.kv_dim() == 32);
    const std::vector<int> want = {403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421,
                                   395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292};
    CHECK(llama2::greedy(m, 24) == want);
    llama2::Tokenizer tok;
    REQUIRE_MESSAGE(tok.load(models() + "/stories260K/tok512.bin", m.c.vocab_size, &err), err);
    std::string text;
    int prev = 1;
    for (int t : want) {
        text += tok.piece(prev, t);
        prev = t;
    }
    CHECK(text.rfind("Once upon a time, there was a little girl named Lily.", 0) == 0);
}

TEST_CASE("llama2: aidreams260K loads and its KV capture has the documented geometry") {
    llama2::Model m;
    std::string err;
    REQUIRE_MESSAGE(m.load(models() + "/aidreams260K/aidreams260K.bin", &err), err);
    CHECK(m.c.n_layers == 4);
    CHECK(m.c.kv_dim() == 64);
    CHECK(m.c.seq_len == 128);
    auto toks = llama2::greedy(m, 16);
    toks.insert(toks.begin(), 1);
    auto cap = llama2::capture_kv(m, toks);
    CHECK(cap.tokens == 17);
    CHECK(cap.k.size() == size_t(4 * 17 * 64));
}

TEST_CASE("llama2: loader rejects a file that is not a checkpoint") {
    llama2::Model m;
    std::string err;
    CHECK_FALSE(m.load(models() + "/stories260K/tok512.bin", &err));
    CHECK_FALSE(err.empty());
}

TEST_CASE("llama2: KV through the codec, lossless raw and bounded paper mode") {
    llama2::Model m;
    std::string err;
    REQUIRE(m.load(models() + "/stories260K/stories260K.bin", &err));
    // Teacher-forced on the model's own greedy continuation (no text file needed).
    auto text = llama2::greedy(m, 200);
    auto raw = llama2::evaluate(m, text, llama2::KvPolicy::uniform(5, c::Mode::raw, c::Mode::raw, 64), 1, 128);
    CHECK(raw.top1_agree > 0.99);
    CHECK(raw.kl < 1e-4);
    CHECK(raw.ratio == doctest::Approx(2048.0 / 2072.0).epsilon(0.02));
    auto paper = llama2::evaluate(m, text, llama2::KvPolicy::uniform(5, c::Mode::paper, c::Mode::paper, 64), 1, 128);
    CHECK(paper.ratio > 1.2);
    CHECK(paper.attn_cos > 0.99);
    CHECK(paper.top1_agree > 0.9);
    CHECK(std::abs(paper.ppl_delta_pct) < 10.0);
}

TEST_CASE("llama2: sealed policy codes completed pages only; all codes every entry") {
    llama2::Model m;
    std::string err;
    REQUIRE(m.load(models() + "/stories260K/stories260K.bin", &err));
    auto text = llama2::greedy(m, 200);
    auto pol = llama2::KvPolicy::uniform(5, c::Mode::k4p, c::Mode::v4p, 64);
    CHECK(pol.coding == llama2::CodePolicy::sealed);  // the default is the pool's policy
    auto sealed = llama2::evaluate(m, text, pol, 1, 128);
    pol.coding = llama2::CodePolicy::all;
    auto all = llama2::evaluate(m, text, pol, 1, 128);
    // 64 x 32 FP16 pages: k4p 24 + 128 + 1024 bytes, v4p 24 + 256 + 1024 (docs §19.7).
    CHECK(sealed.ratio == doctest::Approx(8192.0 / 2480.0).epsilon(1e-9));
    CHECK(all.ratio == doctest::Approx(8192.0 / 2480.0).epsilon(0.01));
    // The first page's reads are exact under sealed until position 63: less error.
    CHECK(sealed.kl < all.kl);
    CHECK(sealed.top1_agree >= all.top1_agree);
    CHECK(sealed.attn_rel_err < all.attn_rel_err);
    CHECK(sealed.kl > 0.0);  // completed pages are coded
}

TEST_CASE("adaptive: per-layer choice follows the error budget") {
    llama2::Model m;
    std::string err;
    REQUIRE(m.load(models() + "/stories260K/stories260K.bin", &err));
    auto toks = llama2::greedy(m, m.c.seq_len - 1);
    toks.insert(toks.begin(), 1);
    auto cal = llama2::capture_kv(m, toks);
    // No budget: nothing qualifies -> raw. Loose budget: the highest-ratio candidate.
    const auto dense = c::AdaptiveSet::dense;  // the split Rice candidates: b 4..12 for K
    auto none = llama2::adaptive_policy(cal, 64, -1.0, -1.0, dense);
    for (auto md : none.k_mode) CHECK(md == c::Mode::raw);
    auto loose = llama2::adaptive_policy(cal, 64, 10.0, 10.0, dense);
    for (auto md : loose.k_mode) CHECK(md == c::Mode::k4s);  // the candidates are the split Rice presets (§18)
    // Tight key budget keeps more key bits than a loose one, per layer.
    auto tight = llama2::adaptive_policy(cal, 64, 0.002, 0.05, dense);
    for (int l = 0; l < m.c.n_layers; l++)
        CHECK(c::mode_params(tight.k_mode[size_t(l)]).bits > c::mode_params(loose.k_mode[size_t(l)]).bits);
    // Scores come back and respect the objective.
    size_t np = 0;
    auto pages = llama2::fp16_pages(cal, 0, false, 64, &np);
    c::ModeScore sc[32];
    size_t ns = 32;
    const c::Mode cands[] = {c::Mode::k8, c::Mode::k6, c::Mode::k4};
    auto pick = c::choose_mode(SPECKV_DTYPE_FP16, pages.data(), np, 64 * 32, {32}, 0.01, cands, 3, sc, &ns);
    REQUIRE(ns == 3);
    for (size_t i = 0; i < ns; i++)
        if (sc[i].mode == pick) CHECK(sc[i].rel_rmse <= 0.01);
    CHECK(sc[0].ratio < sc[2].ratio);      // k8 < k4 in ratio
    CHECK(sc[0].rel_rmse < sc[2].rel_rmse);  // and in error
}

TEST_CASE("adaptive by KL: fast presets only, the whole policy's sealed KL on the calibration text within budget") {
    llama2::Model m;
    std::string err;
    REQUIRE_MESSAGE(m.load(models() + "/aidreams260K/aidreams260K.bin", &err), err);
    const auto text = llama2::greedy(m, m.c.seq_len - 1);  // the calibration text (BOS excluded)
    const int P = std::max(1, 2048 / m.c.kv_dim());      // 4 KiB pages, as codec bench
    const auto fast = c::AdaptiveSet::fast;
    auto in_fast = [&](c::Mode md, bool key) {
        size_t nc = 0;
        const c::Mode *cs = c::adaptive_candidates(key, fast, &nc);
        return md == c::Mode::raw || std::find(cs, cs + nc, md) != cs + nc;
    };
    // No budget: every step is over it -> all in clear.
    auto none = llama2::adaptive_policy_kl(m, text, P, -1.0, fast);
    for (int l = 0; l < m.c.n_layers; l++) {
        CHECK(none.policy.k_mode[size_t(l)] == c::Mode::raw);
        CHECK(none.policy.v_mode[size_t(l)] == c::Mode::raw);
    }
    // No limit: the top of every ladder, the highest-ratio fast presets.
    auto top = llama2::adaptive_policy_kl(m, text, P, 1e9, fast);
    for (int l = 0; l < m.c.n_layers; l++) {
        CHECK(top.policy.k_mode[size_t(l)] == c::Mode::k3p);
        CHECK(top.policy.v_mode[size_t(l)] == c::Mode::v3p);
    }
    REQUIRE(top.cal_kl > 0);
    // A budget between: within it by construction (measured again here), fast
    // presets only, some (layer, kind) coded and some below the top.
    const double budget = top.cal_kl / 3;
    auto mid = llama2::adaptive_policy_kl(m, text, P, budget, fast);
    CHECK(mid.cal_kl <= budget);
    auto pol = mid.policy;
    const double again = llama2::evaluate(m, text, pol, 1, m.c.seq_len).kl;
    CHECK(again == doctest::Approx(mid.cal_kl).epsilon(1e-9));
    CHECK(again <= budget);
    int coded = 0, below_top = 0;
    for (int l = 0; l < m.c.n_layers; l++) {
        for (bool key : {true, false}) {
            const c::Mode md = (key ? pol.k_mode : pol.v_mode)[size_t(l)];
            CAPTURE(l);
            CAPTURE(c::mode_name(md));
            CHECK(in_fast(md, key));
            coded += md != c::Mode::raw;
            below_top += md != (key ? c::Mode::k3p : c::Mode::v3p);
        }
    }
    CHECK(coded > 0);
    CHECK(below_top > 0);
    CHECK(mid.evaluations > 2 * m.c.n_layers);  // a step per (layer, kind) at least, measured
}
