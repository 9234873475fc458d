// SPDX-License-Identifier: Apache-2.0
// On the real stories260K / aidreams260K: the selector's forward pass equals
// llama2::Runner with full attention, PnG equals full attention, the bound
// holds on real keys and real queries, selection costs some quality.
#include <doctest/doctest.h>

#include <cstring>

#include "data_dir.h"
#include "kv_eval.h"
#include "nmp_forward.h"
#include "nmp_test_util.h"

using namespace nmp_test;

namespace {
std::string models() { return speckv_data::path("models"); }
llama2::Model load(const char *rel) {
    llama2::Model m;
    std::string err;
    if (!m.load(models() + rel, &err)) FAIL(err);
    return m;
}
}  // namespace

TEST_CASE("nmp model: Mode::full gives llama2::Runner's logits bit for bit") {
    auto m = load("/stories260K/stories260K.bin");
    auto toks = llama2::greedy(m, 40);
    llama2::Runner ref(m);
    nmp_eval::Runner run(m, nmp_eval::Options{});
    int tok = 1;
    for (int pos = 0; pos < 40; pos++) {
        const float *a = ref.forward(tok, pos);
        const float *b = run.forward(tok, pos);
        REQUIRE(std::memcmp(a, b, size_t(m.c.vocab_size) * 4) == 0);
        tok = toks[size_t(pos)];
    }
}

TEST_CASE("nmp model: PnG matches full attention, selection alone does not") {
    for (std::string path : {"/stories260K/stories260K.bin", "/aidreams260K/aidreams260K.bin"}) {
        CAPTURE(path);
        auto m = load(path.c_str());
        auto text = llama2::greedy(m, 127);
        nmp_eval::Options o;
        o.budget_frac = 0.25;
        o.mode = nmp_eval::Mode::png;
        auto png = nmp_eval::evaluate(m, text, o, 1, 128);
        REQUIRE(png.error.empty());
        CHECK(png.kl < 1e-6);
        CHECK(png.top1 == 1.0);
        CHECK(png.drop_share > 0.3);
        CHECK(png.recalled_per_token < 0.5 * png.full_per_token);
        o.mode = nmp_eval::Mode::select;
        auto sel = nmp_eval::evaluate(m, text, o, 1, 128);
        REQUIRE(sel.error.empty());
        CHECK(sel.kl > png.kl);
        CHECK(sel.recalled_per_token == png.recalled_per_token);
        MESSAGE(path << ": PnG KL " << png.kl << ", select KL " << sel.kl << " top1 " << sel.top1);
    }
}

TEST_CASE("nmp model: the bound holds on the real keys of stories260K") {
    auto m = load("/stories260K/stories260K.bin");
    auto toks = llama2::greedy(m, 255);
    toks.insert(toks.begin(), 1);
    auto cap = llama2::capture_kv(m, toks);
    const nmp::Geometry g{uint32_t(m.c.n_kv_heads), uint32_t(m.c.head_size()), uint32_t(m.c.n_heads / m.c.n_kv_heads)};
    std::mt19937 rng(3);
    for (int l = 0; l < cap.n_layers; l++) {
        PageSet s;
        s.channels = g.channels();
        s.tokens = 16;
        for (int p = 0; p < cap.tokens / 16; p++) {
            const float *k = cap.k_layer(l) + size_t(p) * 16 * cap.kv_dim;
            s.keys.emplace_back(k, k + 16 * cap.kv_dim);
            s.sums.emplace_back(nmp::summary_size(g.channels()));
            REQUIRE(nmp::summarize(SPECKV_DTYPE_FP32, k, 16, g.channels(), g.channels(), s.sums.back().data(),
                                   s.sums.back().size()) == SPECKV_OK);
        }
        for (auto &v : s.sums) s.ptrs.push_back(v.data());
        // Queries: real keys of other tokens, per head (keys and queries share
        // the RoPE frame), and scaled Gaussians.
        for (int r = 0; r < 8; r++) {
            std::vector<float> q(g.q_len());
            for (uint32_t h = 0; h < g.q_heads(); h++) {
                const int t = int(rng() % uint32_t(cap.tokens));
                std::memcpy(q.data() + h * g.head_dim, cap.k_layer(l) + size_t(t) * cap.kv_dim +
                                                           (h / g.q_per_kv) * g.head_dim, g.head_dim * 4);
            }
            if (r % 2) q = random_q(rng, g.q_len(), 3.0f);
            std::vector<float> sc(size_t(g.kv_heads) * s.ptrs.size());
            REQUIRE(nmp::score_pages(g, q.data(), q.size(), s.ptrs.data(), s.ptrs.size(), sc.data()) == SPECKV_OK);
            const double scale = 1.0 / std::sqrt(double(g.head_dim));
            auto ex = exact_max(g, q, s, scale);
            auto mag = bound_magnitude(g, q, s, scale);
            for (size_t i = 0; i < sc.size(); i++) CHECK(double(sc[i]) >= ex[i] - 1e-5 * mag[i]);
        }
    }
}
