// SPDX-License-Identifier: Apache-2.0
// nmp_eval: the selection/PnG quality tables of docs/selection.md, on the two
// real tiny models and the GPL-3 text the codec measurements use.
//   nmp_eval [models_dir] [text_file]
// models_dir defaults to the project's data: $SPECKV_DATA_DIR/models, else data/models;
// text_file to its text/GPL-3.
#include <cstdio>
#include <string>
#include <vector>

#include "../data_dir.h"
#include "kv_eval.h"
#include "nmp_forward.h"

namespace {

struct ModelSpec {
    const char *name, *bin, *tok;
    int windows;
};

const char *mode_name(const nmp_eval::Options &o) {
    static char buf[96];
    const char *m = o.mode == nmp_eval::Mode::full ? "full" : o.mode == nmp_eval::Mode::select ? "select" : "PnG";
    std::snprintf(buf, sizeof buf, "%s%s%s%s", m, o.oracle ? " oracle" : "", o.pin_sink ? "+sink" : "",
                  o.band > 0 ? (o.band >= 1 ? " band 1.0" : " band 0.5") : "");
    return buf;
}

}  // namespace

int main(int argc, char **argv) {
    const std::string models = argc > 1 ? std::string(argv[1]) : speckv_data::path("models");
    const std::string text_path = argc > 2 ? std::string(argv[2]) : speckv_data::path("text/GPL-3");
    const std::string text = llama2::read_text(text_path);
    if (text.empty()) {
        std::fprintf(stderr, "nmp_eval: cannot read %s\n", text_path.c_str());
        return 1;
    }
    const ModelSpec specs[] = {{"stories260K", "/stories260K/stories260K.bin", "/stories260K/tok512.bin", 2},
                               {"aidreams260K", "/aidreams260K/aidreams260K.bin", "/aidreams260K/tok512.bin", 8}};
    for (const ModelSpec &ms : specs) {
        llama2::Model m;
        llama2::Tokenizer tok;
        std::string err;
        if (!m.load(models + ms.bin, &err) || !tok.load(models + ms.tok, m.c.vocab_size, &err)) {
            std::fprintf(stderr, "nmp_eval: %s\n", err.c_str());
            return 1;
        }
        const std::vector<int> toks = tok.encode(text);
        std::printf("\n### %s (%d layers, %d q heads / %d KV heads x %d, seq_len %d): %d windows x %d tokens of %s, "
                    "pages of 16 tokens\n\n",
                    ms.name, m.c.n_layers, m.c.n_heads, m.c.n_kv_heads, m.c.head_size(), m.c.seq_len, ms.windows,
                    m.c.seq_len, text_path.c_str());
        std::printf("| budget | mode | KL | KL (dropping) | top1 | top1 (dropping) | ppl %% | recalled B/step | "
                    "of full | summaries B/step | select us/step | churn | dropping steps |\n");
        std::printf("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (double frac : {0.125, 0.25, 0.5}) {
            std::vector<nmp_eval::Options> runs;
            nmp_eval::Options o;
            o.budget_frac = frac;
            o.mode = nmp_eval::Mode::select;
            runs.push_back(o);
            o.oracle = true;
            runs.push_back(o);
            o.oracle = false;
            o.pin_sink = true;
            runs.push_back(o);
            o.pin_sink = false;
            o.band = 0.5f;
            runs.push_back(o);
            o.band = 1.0f;
            runs.push_back(o);
            o.mode = nmp_eval::Mode::png;
            o.band = 0;
            runs.push_back(o);
            for (const auto &r : runs) {
                auto res = nmp_eval::evaluate(m, toks, r, ms.windows, m.c.seq_len);
                if (!res.error.empty()) {
                    std::fprintf(stderr, "nmp_eval: %s\n", res.error.c_str());
                    return 1;
                }
                std::printf("| %.1f%% | %s | %.2e | %.2e | %.3f | %.3f | %+.2f | %.0f | %.1f%% | %.0f | %.2f | %.3f | "
                            "%.0f%% |\n",
                            100 * frac, mode_name(r), res.kl, res.kl_sel, res.top1, res.top1_sel, res.ppl_delta_pct,
                            res.recalled_per_token, 100 * res.recalled_per_token / res.full_per_token,
                            res.summary_per_token, res.select_us_per_token, res.churn, 100 * res.drop_share);
                std::fflush(stdout);
            }
        }
        nmp_eval::Options full;
        auto res = nmp_eval::evaluate(m, toks, full, ms.windows, m.c.seq_len);
        std::printf("\nfull (sanity: must be KL 0, top1 1): KL %.2e, top1 %.3f, ppl %.2f, %zu positions\n", res.kl,
                    res.top1, res.ppl_full, res.positions);
        // In-domain text: the model's own greedy continuation (one window).
        const std::vector<int> own = llama2::greedy(m, m.c.seq_len - 1);
        std::printf("\nIn domain (%s's own greedy text, 1 window of %zu tokens):\n\n", ms.name, own.size() + 1);
        std::printf("| budget | mode | KL | top1 | ppl %% | recalled of full | churn |\n|---:|---|---:|---:|---:|---:|---:|\n");
        for (double frac : {0.125, 0.25, 0.5}) {
            for (int k = 0; k < 3; k++) {
                nmp_eval::Options o;
                o.budget_frac = frac;
                o.mode = k == 2 ? nmp_eval::Mode::png : nmp_eval::Mode::select;
                o.oracle = k == 1;
                auto r = nmp_eval::evaluate(m, own, o, 1, m.c.seq_len);
                if (!r.error.empty()) {
                    std::fprintf(stderr, "nmp_eval: %s\n", r.error.c_str());
                    return 1;
                }
                std::printf("| %.1f%% | %s | %.2e | %.3f | %+.2f | %.1f%% | %.3f |\n", 100 * frac, mode_name(o), r.kl,
                            r.top1, r.ppl_delta_pct, 100 * r.recalled_per_token / r.full_per_token, r.churn);
                std::fflush(stdout);
            }
        }
    }
    return 0;
}
