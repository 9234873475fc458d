// SPDX-License-Identifier: Apache-2.0
// tinyllm — a tiny LLM serving engine whose K/V cache lives in a speckv pool.
//
// Runs a llama2.c checkpoint (data/models) on a small continuous batch:
// every step runs one token of each active sequence in slot order (prompt
// tokens one at a time, then greedy decoding); a finished sequence frees its
// blocks and the next prompt takes its slot. Attention reads K/V only through
// the public API (see paged_kv.h), and the engine hints the prefetcher before
// each layer. --check replays every prompt through the plain tools/llama2
// Runner (its own host K/V arrays) and requires the same token ids.
// The engine records the pages it reads and writes, and the summary sets the
// run's L1/L2 figures beside two references at the same capacity (DESIGN.md
// §6): no prefetch, and the Belady oracle (docs/tiers.md §11).
//
//   tinyllm [--model PATH] [--tokenizer PATH] [--uri URI] [--batch N] [--steps N]
//           [--requests N] [--prompt TEXT]... [--l1-bytes B] [--l2-bytes B]
//           [--no-prefetch] [--oracle] [--pin] [--codec MODE] [--check] [--json]
//
// The default model is stories260K of the project's data: $SPECKV_DATA_DIR/models/...
// when that variable is set, else the repository's data/models (compiled in).
//
// Exit status: 0 ok, 1 failure (or --check found a different token with --codec raw),
// 2 usage.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <cmath>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "data_dir.h"
#include "forward.h"
#include "llama2.h"
#include "oracle/belady.h"
#include "paged_kv.h"
#include "speckv.h"

namespace {

using tinyllm::NextUnit;
using tinyllm::PagedKv;
using tinyllm::PooledForward;

constexpr int kBos = 1;
constexpr uint64_t kTenant = 0x74696e79;  // "tiny"

const char *const kDefaultPrompts[] = {
    "Once upon a time",
    "Lily wanted to",
    "The little dog",
    "Tom and his mom went to the park",
    "One day, a big bird",
    "The sun was hot and",
    "Sara had a red ball",
    "Ben found a box",
};

struct Options {
    std::string model = speckv_data::path("models/stories260K/stories260K.bin");
    std::string tokenizer = speckv_data::path("models/stories260K/tok512.bin");
    std::string uri = "anon:?size=64M";
    int batch = 4, steps = 128, requests = 0;
    int64_t l1_bytes = -1, l2_bytes = -1;
    int64_t admit = -1;       // --cache-admit N: config cache.admit (L1 admission policy)
    bool prefetch = true, pin = false, check = false, json = false, oracle = false;
    std::string codec = "raw";
    std::string cold;         // --cold PATH: the pool's L4 tier file (config cold.path)
    double select_pct = 0;    // --select PCT: pages per layer kept (percent); 0 = full attention
    bool attend = false;      // --attend: the rest attended next to the pool, merged exactly
    std::string eval_text;    // --eval-text FILE: teacher-forced comparison with full attention
    std::vector<std::string> prompts;
};

// The usage notes CLI11's option list does not carry.
constexpr const char *kFooter =
    "--steps: sequence i runs at most steps*(8 - i%4)/8 positions. --codec is lossy: --check then\n"
    "reports how many tokens still match instead of failing; --select is approximate likewise.\n"
    "The summary sets this run's L1/L2 figures beside references at the same L1 and L2 sizes,\n"
    "from the pages it read and wrote: no prefetch, LRU and Belady (MIN) L1s, and the Belady\n"
    "oracle (docs/tiers.md §11; JSON key \"references\"; not with --pin or --select).";

// Returns -1 to continue, else the exit status (0 after --help, 2 for a bad command line).
int parse(int argc, char **argv, Options *o) {
    CLI::App app{"tinyllm: a tiny LLM serving engine whose K/V cache lives in a speckv pool", "tinyllm"};
    app.footer(kFooter);
    app.add_option("--model", o->model,
                   "llama2.c checkpoint (default: stories260K of the project's data, $SPECKV_DATA_DIR/models or "
                   "the repository's data/models)");
    app.add_option("--tokenizer", o->tokenizer, "llama2.c tokenizer (default: stories260K's)");
    app.add_option("--uri", o->uri, "pool holding the K/V cache (default anon:?size=64M)");
    app.add_option("--batch", o->batch, "sequences running at once (default 4)")->check(CLI::Range(1, 256));
    app.add_option("--steps", o->steps, "most positions per sequence, prompt included (default 128, at most the "
                                        "model's seq_len)")
        ->check(CLI::Range(2, 1 << 20));
    app.add_option("--requests", o->requests, "sequences in all (default 2*batch); prompts are reused in turn")
        ->check(CLI::Range(1, 1 << 20));
    app.add_option("--prompt", o->prompts, "a prompt (repeatable; default: 8 built-in prompts)")
        ->allow_extra_args(false)
        ->take_all();
    app.add_option("--l1-bytes", o->l1_bytes, "L1 hot buffer, config key cache.bytes")
        ->check(CLI::Range(int64_t(0), INT64_MAX));
    app.add_option("--cache-admit", o->admit, "L1 admission policy, config key cache.admit (0, 1, 2)")
        ->check(CLI::Range(int64_t(0), int64_t(2)));
    app.add_option("--l2-bytes", o->l2_bytes, "L2 prefetch buffer, config key prefetch.l2_bytes")
        ->check(CLI::Range(int64_t(0), INT64_MAX));
    bool no_prefetch = false;
    app.add_flag("--no-prefetch", no_prefetch, "send no speckv_prefetch hints");
    app.add_flag("--oracle", o->oracle,
                 "prefetch.policy = 1: fetch exactly the unit each hint names (a perfect next-unit predictor, "
                 "with the pool's own eviction)");
    app.add_flag("--pin", o->pin, "read K/V with speckv_pin/unpin instead of speckv_access");
    app.add_option("--codec", o->codec,
                   "store K/V pages as codec records (config codec.mode: paper, int8, k6, vp6, ...; default raw = "
                   "in clear)");
    app.add_option("--cold", o->cold,
                   "hold the pool's L4 cold tier in this file (config cold.path): the coldest blocks move there "
                   "and come back when read");
    app.add_option("--select", o->select_pct,
                   "near-memory page selection: each layer's attention reads only the PCT% best pages by the "
                   "pool's summaries (speckv_select)")
        ->check([](const std::string &v) {
            char *end = nullptr;
            const double d = std::strtod(v.c_str(), &end);
            return end != v.c_str() && !*end && d > 0 && d <= 100 ? std::string()
                                                                   : "'" + v + "' is not a percentage in (0, 100]";
        });
    app.add_flag("--attend", o->attend,
                 "with --select: attend the other pages next to the pool (speckv_attend) and merge exactly");
    app.add_option("--eval-text", o->eval_text,
                   "instead of serving: run this file's text teacher-forced through full attention and through "
                   "--select/--attend side by side");
    app.add_flag("--check", o->check, "also run the plain llama2 Runner; exit 1 unless every token matches");
    app.add_flag("--json", o->json, "print one JSON object instead of text");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        int rc = app.exit(e);
        return rc == 0 ? 0 : 2;
    }
    o->prefetch = !no_prefetch;
    if (o->attend && !o->select_pct) {
        std::fprintf(stderr, "tinyllm: --attend needs --select PCT (the pages kept on this side)\n");
        return 2;
    }
    if (!o->eval_text.empty() && !o->select_pct) {
        std::fprintf(stderr, "tinyllm: --eval-text compares --select [--attend] with full attention: give --select PCT\n");
        return 2;
    }
    if (o->requests == 0) o->requests = 2 * o->batch;
    if (o->prompts.empty()) o->prompts.assign(std::begin(kDefaultPrompts), std::end(kDefaultPrompts));
    return -1;
}

// One sequence of the batch.
struct Seq {
    int index = 0;           // request number (0-based), picks prompt and limit
    uint64_t id = 0;         // speckv request id
    std::vector<int> prompt; // BOS + prompt tokens
    int limit = 0;           // most positions
    int pos = 0, token = kBos;
    std::vector<int> out;    // generated token ids
    bool active = false;
};

// run.c's generate loop, one position: `logits` of `pos` -> next token. Returns
// false when the sequence ends (BOS produced, or the position limit reached).
bool advance(Seq &s, const float *logits, int vocab) {
    int next = s.pos < int(s.prompt.size()) - 1 ? s.prompt[size_t(s.pos) + 1] : llama2::argmax(logits, vocab);
    bool sampled = s.pos >= int(s.prompt.size()) - 1;
    s.pos++;
    if (next == kBos) return false;
    if (sampled) s.out.push_back(next);
    s.token = next;
    return s.pos < s.limit;
}

// The same loop on the plain Runner: the reference for --check.
std::vector<int> reference_run(const llama2::Model &m, const std::vector<int> &prompt, int limit) {
    llama2::Runner r(m);
    Seq s;
    s.prompt = prompt;
    s.limit = limit;
    while (advance(s, r.forward(s.token, s.pos), m.c.vocab_size)) {
    }
    return s.out;
}

std::string text_of(const llama2::Tokenizer &tok, const std::vector<int> &prompt, const std::vector<int> &out) {
    std::string t;
    int prev = kBos;
    auto add = [&](int id) {
        std::string p = tok.piece(prev, id);
        for (char ch : p)  // run.c safe_printf: drop control bytes except whitespace
            if (static_cast<unsigned char>(ch) >= 0x20 || ch == '\n' || ch == '\t') t += ch;
        prev = id;
    };
    for (size_t i = 1; i < prompt.size(); i++) add(prompt[i]);
    for (int id : out) add(id);
    return t;
}

using Json = nlohmann::ordered_json;  // keys in the order they are added

// Compact JSON text; bytes that are not UTF-8 (a token's text can hold any) become U+FFFD.
std::string json_text(const Json &j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// A figure rounded to `digits` significant digits, as "%.*g" printed it.
double sig(double v, int digits) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*g", digits, v);
    return std::strtod(b, nullptr);
}
// Rounded to `decimals` places, as "%.*f" printed it.
double fixed(double v, int decimals) {
    double m = std::pow(10.0, decimals);
    return std::round(v * m) / m;
}

double ratio(uint64_t a, uint64_t b) { return b ? double(a) / double(b) : 0.0; }

bool file_exists(const std::string &p) { return access(p.c_str(), R_OK) == 0; }

// Sets an integer config key; an unknown key is a warning (the library in use
// may predate it), a bad value an error.
bool set_key(speckv_config *cfg, const char *key, int64_t v) {
    int rc = speckv_config_set_int(cfg, key, v);
    if (rc == SPECKV_ENOENT) {
        std::fprintf(stderr, "tinyllm: warning: this libspeckv (%s) has no config key '%s'; ignored\n",
                     speckv_version_string(), key);
        return true;
    }
    if (rc != SPECKV_OK) {
        std::fprintf(stderr, "tinyllm: %s = %lld: %s (%s)\n", key, (long long)v, speckv_strerror(rc), speckv_errmsg());
        return false;
    }
    return true;
}

// --eval-text: the text's tokens run teacher-forced through two engines on
// the same pool, one with full attention, one with --select [--attend]; per
// position the next-token distributions are compared (KL, top-1) and the
// text's perplexity taken under both (docs/selection.md §7).
int eval_text(const llama2::Model &model, const llama2::Tokenizer &tok, speckv_pool *pool, const Options &o,
              tinyllm::Attn mode) {
    const llama2::Config &c = model.c;
    std::FILE *f = std::fopen(o.eval_text.c_str(), "rb");
    if (!f) {
        std::fprintf(stderr, "tinyllm: cannot read %s\n", o.eval_text.c_str());
        return 1;
    }
    std::string text;
    char buf[65536];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    std::fclose(f);
    std::vector<int> toks{kBos};
    for (int t : tok.encode(text)) toks.push_back(t);
    const int steps = std::min<int>(std::min(o.steps, c.seq_len), int(toks.size()));
    if (steps < 2) {
        std::fprintf(stderr, "tinyllm: %s gives fewer than 2 tokens\n", o.eval_text.c_str());
        return 1;
    }
    PagedKv kv_full(pool, kTenant, c.n_layers, c.kv_dim(), false, false, true),
        kv_sel(pool, kTenant, c.n_layers, c.kv_dim(), false, false, true);
    PooledForward full(model, kv_full), sel(model, kv_sel);
    sel.set_attention(mode, o.select_pct / 100.0, kTenant);
    const uint64_t rf = (uint64_t(getpid()) << 24) | 0xF00001, rs = rf + 1;
    double kl = 0, nll_f = 0, nll_s = 0;
    int agree = 0, n = 0;
    std::vector<double> pf(size_t(c.vocab_size)), ps(size_t(c.vocab_size));
    auto softmax_d = [&](const float *lg, std::vector<double> &p) {
        double m = -1e300, z = 0;
        for (int i = 0; i < c.vocab_size; i++) m = std::max(m, double(lg[i]));
        for (int i = 0; i < c.vocab_size; i++) z += (p[size_t(i)] = std::exp(double(lg[i]) - m));
        for (auto &x : p) x /= z;
    };
    for (int pos = 0; pos + 1 < steps; pos++) {
        const float *lf = nullptr, *ls = nullptr;
        int rc = full.forward(rf, toks[size_t(pos)], pos, NextUnit{}, &lf);
        if (rc == SPECKV_OK) rc = sel.forward(rs, toks[size_t(pos)], pos, NextUnit{}, &ls);
        if (rc != SPECKV_OK) {
            std::fprintf(stderr, "tinyllm: eval at position %d: %s (%s)\n", pos, speckv_strerror(rc), speckv_errmsg());
            kv_full.release(rf);
            kv_sel.release(rs);
            return 1;
        }
        softmax_d(lf, pf);
        softmax_d(ls, ps);
        for (int i = 0; i < c.vocab_size; i++)
            if (pf[size_t(i)] > 0) kl += pf[size_t(i)] * std::log(pf[size_t(i)] / std::max(ps[size_t(i)], 1e-300));
        agree += llama2::argmax(lf, c.vocab_size) == llama2::argmax(ls, c.vocab_size);
        const size_t next = size_t(toks[size_t(pos) + 1]);
        nll_f -= std::log(std::max(pf[next], 1e-300));
        nll_s -= std::log(std::max(ps[next], 1e-300));
        n++;
    }
    kv_full.release(rf);
    kv_sel.release(rs);
    const tinyllm::AttnStats &a = sel.attn_stats();
    const double ppl_f = std::exp(nll_f / n), ppl_s = std::exp(nll_s / n);
    const double page_bytes = 2.0 * tinyllm::kPageTokens * c.kv_dim() * sizeof(float);  // K + V
    const double recalled = double(a.pages_recalled) / n, total = double(a.pages_total) / n;
    const char *mname = mode == tinyllm::Attn::attend ? "attend" : "select";
    if (o.json) {
        Json j = {{"model", o.model},
                  {"text", o.eval_text},
                  {"mode", mname},
                  {"budget_pct", sig(o.select_pct, 6)},
                  {"positions", n},
                  {"kl", sig(kl / n, 6)},
                  {"top1_agree", fixed(double(agree) / n, 6)},
                  {"ppl_full", fixed(ppl_f, 6)},
                  {"ppl", fixed(ppl_s, 6)},
                  {"ppl_delta_pct", fixed(100 * (ppl_s / ppl_f - 1), 4)},
                  {"pages_per_token", fixed(total, 3)},
                  {"pages_recalled_per_token", fixed(recalled, 3)},
                  {"bytes_recalled_per_token", fixed(recalled * page_bytes, 1)},
                  {"bytes_full_per_token", fixed(total * page_bytes, 1)},
                  {"select_us_per_token", fixed(a.select_ns / n / 1e3, 3)},
                  {"attend_us_per_token", fixed(a.attend_ns / n / 1e3, 3)}};
        std::printf("%s\n", json_text(j).c_str());
    } else {
        std::printf("tinyllm eval: %s on %s, %d positions, --select %g%%%s\n", o.model.c_str(), o.eval_text.c_str(), n,
                    o.select_pct, mode == tinyllm::Attn::attend ? " --attend" : "");
        std::printf("  KL(full || %s)        %.6g nats/position\n", mname, kl / n);
        std::printf("  top-1 agreement        %.2f%%\n", 100.0 * agree / n);
        std::printf("  perplexity             %.4f full, %.4f %s (%+.2f%%)\n", ppl_f, ppl_s, mname, 100 * (ppl_s / ppl_f - 1));
        std::printf("  pages per token        %.1f of %.1f recalled (all layers): %.0f of %.0f bytes\n", recalled, total,
                    recalled * page_bytes, total * page_bytes);
        std::printf("  time per token         select %.1f us, attend next to the pool %.1f us\n", a.select_ns / n / 1e3,
                    a.attend_ns / n / 1e3);
    }
    return 0;
}

// The run's page events beside two references at its L1 and L2 sizes
// (DESIGN.md §6, docs/tiers.md §11): no prefetch and no L2 (this run's L1
// hits, every other read synchronous; a --no-prefetch run still has L2 for
// the pages L1 moves down, docs/tiers.md §2) and the Belady oracle (L1 hits of MIN, every other
// read an L2 hit, the fewest link pages any policy needs); plus LRU's and
// MIN's L1 alone without prefetch.
struct Row {
    const char *key, *name;
    uint64_t l1 = 0, l2 = 0, sync = 0, link = 0;
    double hit = 0, prec = -1, waste = -1;  // -1: nothing prefetched, does not apply
};

struct References {
    bool on = false;
    uint64_t l1_frames = 0, l2_frames = 0, reads = 0, writes = 0, pool_reads = 0;
    std::vector<Row> rows;
};

References references(const speckv::oracle::Trace &t, const speckv_pool_stats &st, uint64_t l1_frames,
                      uint64_t l2_frames, const char *run_name, bool prefetched) {
    References r;
    r.on = true;
    r.l1_frames = l1_frames, r.l2_frames = l2_frames;
    r.reads = t.reads(), r.writes = t.writes();
    r.pool_reads = st.cache_hits + st.cache_misses;
    Row run{"run", run_name, st.cache_hits, st.l2_hits, st.sync_reads, st.prefetch_pages + st.sync_reads,
            ratio(st.l2_hits, st.l2_hits + st.sync_reads)};
    if (prefetched) {
        run.prec = ratio(st.prefetch_used, st.prefetch_used + st.prefetch_wasted);
        run.waste = 1 - run.prec;
    }
    r.rows.push_back(run);
    if (prefetched)
        r.rows.push_back({"no_prefetch", "no prefetch, no L2 (run's L1)", st.cache_hits, 0, st.cache_misses,
                          st.cache_misses});
    // LRU beside MIN: how much of the L1 gap a recency policy (CLOCK, or any
    // associativity) could close at all.
    const speckv::oracle::CacheResult lru = speckv::oracle::lru(t.events(), l1_frames);
    r.rows.push_back({"lru_l1", "LRU L1, no prefetch", lru.hits, 0, lru.misses(), lru.misses()});
    const speckv::oracle::OracleResult o = speckv::oracle::full_oracle(t.events(), l1_frames, l2_frames);
    r.rows.push_back({"belady_l1", "Belady L1, no prefetch", o.l1_hits, 0, o.reads - o.l1_hits,
                      o.reads - o.l1_hits});
    r.rows.push_back({"belady_oracle", "Belady oracle (L1 + L2)", o.l1_hits, o.l2_hits(), o.sync_reads(),
                      o.prefetched, o.hit_rate(), o.precision(), o.waste()});
    return r;
}

void print_references(const References &r) {
    std::printf("\nbeside references at the same capacity (docs/tiers.md §11): L1 %" PRIu64 " frames, L2 %" PRIu64
                " frames;\n%" PRIu64 " page reads and %" PRIu64 " page writes recorded in this run\n",
                r.l1_frames, r.l2_frames, r.reads, r.writes);
    std::printf("  %-30s %9s %9s %10s %9s %10s %7s %11s\n", "", "L1 hits", "L2 hits", "sync reads", "hit rate",
                "precision", "waste", "link pages");
    for (const Row &w : r.rows) {
        char prec[16] = "-", waste[16] = "-";
        if (w.prec >= 0) std::snprintf(prec, sizeof prec, "%.1f%%", 100 * w.prec);
        if (w.waste >= 0) std::snprintf(waste, sizeof waste, "%.1f%%", 100 * w.waste);
        std::printf("  %-30s %9" PRIu64 " %9" PRIu64 " %10" PRIu64 " %8.1f%% %10s %7s %11" PRIu64 "\n", w.name, w.l1,
                    w.l2, w.sync, 100 * w.hit, prec, waste, w.link);
    }
    if (r.pool_reads != r.reads)
        std::printf("  (the pool counted %" PRIu64 " page reads by this process, the trace %" PRIu64
                    ": the references are for the trace)\n",
                    r.pool_reads, r.reads);
}

Json references_json(const References &r) {
    if (!r.on) return nullptr;
    Json rows = Json::object();
    for (const Row &w : r.rows)
        rows[w.key] = {{"name", w.name},
                       {"l1_hits", w.l1},
                       {"l2_hits", w.l2},
                       {"sync_reads", w.sync},
                       {"link_pages", w.link},
                       {"hit_rate", fixed(w.hit, 6)},
                       {"precision", w.prec >= 0 ? Json(fixed(w.prec, 6)) : Json(nullptr)},
                       {"waste", w.waste >= 0 ? Json(fixed(w.waste, 6)) : Json(nullptr)}};
    return {{"l1_frames", r.l1_frames},
            {"l2_frames", r.l2_frames},
            {"page_reads", r.reads},
            {"page_writes", r.writes},
            {"pool_page_reads", r.pool_reads},
            {"rows", std::move(rows)}};
}

}  // namespace

int main(int argc, char **argv) {
    Options o;
    if (int rc = parse(argc, argv, &o); rc >= 0) return rc;

    if (!file_exists(o.model) || !file_exists(o.tokenizer)) {
        std::fprintf(stderr, "tinyllm: %s\n",
                     speckv_data::missing(file_exists(o.model) ? o.tokenizer : o.model).c_str());
        return 1;
    }
    if (speckv_version_number() / 10000 != SPECKV_VERSION_MAJOR) {
        std::fprintf(stderr, "tinyllm: libspeckv %s, built for %s\n", speckv_version_string(), SPECKV_VERSION_STRING);
        return 1;
    }
    llama2::Model model;
    llama2::Tokenizer tok;
    std::string err;
    if (!model.load(o.model, &err) || !tok.load(o.tokenizer, model.c.vocab_size, &err)) {
        std::fprintf(stderr, "tinyllm: %s\n", err.c_str());
        return 1;
    }
    const llama2::Config &c = model.c;
    const int steps = std::min(o.steps, c.seq_len);

    // The requests: prompt (BOS + run.c's dummy-prefix space + text) and limit.
    std::vector<Seq> reqs(size_t(o.requests));
    for (int i = 0; i < o.requests; i++) {
        Seq &s = reqs[size_t(i)];
        s.index = i;
        s.id = (uint64_t(getpid()) << 24) | uint64_t(i + 1);  // unique per run in a shared pool
        s.prompt.push_back(kBos);
        for (int t : tok.encode(" " + o.prompts[size_t(i) % o.prompts.size()])) s.prompt.push_back(t);
        s.limit = std::max(2, steps * (8 - i % 4) / 8);
        if (int(s.prompt.size()) >= s.limit) {
            std::fprintf(stderr, "tinyllm: prompt %d has %zu tokens, more than its %d positions (raise --steps)\n", i,
                         s.prompt.size(), s.limit);
            return 2;
        }
    }

    speckv_config *cfg = nullptr;
    if (speckv_config_new(&cfg) != SPECKV_OK) return 1;
    bool cfg_ok = (o.l1_bytes < 0 || set_key(cfg, "cache.bytes", o.l1_bytes)) &&
                  (o.l2_bytes < 0 || set_key(cfg, "prefetch.l2_bytes", o.l2_bytes)) &&
                  (o.admit < 0 || set_key(cfg, "cache.admit", o.admit)) &&
                  (!o.oracle || set_key(cfg, "prefetch.policy", 1));
    if (cfg_ok && !o.cold.empty()) {
        int crc = speckv_config_set_str(cfg, "cold.path", o.cold.c_str());
        if (crc != SPECKV_OK) {
            std::fprintf(stderr, "tinyllm: --cold %s: %s (%s)\n", o.cold.c_str(), speckv_strerror(crc), speckv_errmsg());
            cfg_ok = false;
        }
    }
    // The codec: one preset for the block (K rows then V rows, kv_dim values per token).
    if (cfg_ok && o.codec != "raw") {
        int crc = speckv_config_set_str(cfg, "codec.mode", o.codec.c_str());
        if (crc != SPECKV_OK) {
            std::fprintf(stderr, "tinyllm: --codec %s: %s (%s)\n", o.codec.c_str(), speckv_strerror(crc), speckv_errmsg());
            cfg_ok = false;
        } else {
            cfg_ok = set_key(cfg, "codec.channels", c.kv_dim());
        }
    }
    // Near-memory selection: K pages get summaries in the pool (a summary
    // area of 16 + 4 * kv_dim bytes per page, rounded up to 16).
    if (cfg_ok && o.select_pct)
        cfg_ok = set_key(cfg, "pool.summary_bytes", (16 + 4 * int64_t(c.kv_dim()) + 15) / 16 * 16) &&
                 set_key(cfg, "select.channels", c.kv_dim());
    // The sizes the references use (the config's, defaults included).
    int64_t l1_bytes = 0, l2_bytes = 0, assoc = 0;
    speckv_config_get_int(cfg, "cache.bytes", &l1_bytes);
    speckv_config_get_int(cfg, "prefetch.l2_bytes", &l2_bytes);
    speckv_config_get_int(cfg, "cache.associative", &assoc);
    speckv_pool *pool = nullptr;
    int rc = cfg_ok ? speckv_pool_open(o.uri.c_str(), cfg, &pool) : SPECKV_EINVAL;
    speckv_config_free(cfg);
    if (rc != SPECKV_OK) {
        if (cfg_ok) std::fprintf(stderr, "tinyllm: open %s: %s (%s)\n", o.uri.c_str(), speckv_strerror(rc), speckv_errmsg());
        return 1;
    }

    const tinyllm::Attn mode = !o.select_pct ? tinyllm::Attn::full
                               : o.attend    ? tinyllm::Attn::attend
                                             : tinyllm::Attn::select;
    if (!o.eval_text.empty()) {
        int erc = eval_text(model, tok, pool, o, mode);
        speckv_pool_close(pool);
        return erc;
    }
    PagedKv kv(pool, kTenant, c.n_layers, c.kv_dim(), o.prefetch, o.pin, /*split=*/o.select_pct > 0);
    // Full attention read through speckv_access: every page read goes
    // through L1 and L2, so the trace is what the references need. (Pins
    // bypass both; --select reads through speckv_select / speckv_attend.)
    speckv::oracle::Trace trace;
    uint64_t page_size = 0;
    {
        speckv_pool_stats ps;
        std::memset(&ps, 0, sizeof ps);
        ps.struct_size = sizeof ps;
        if (speckv_stats(pool, &ps) == SPECKV_OK) page_size = ps.page_size;
    }
    const bool traced = !o.pin && mode == tinyllm::Attn::full && page_size > 0;
    if (traced) kv.set_trace(&trace, page_size);
    PooledForward fwd(model, kv);
    fwd.set_attention(mode, o.select_pct / 100.0, kTenant);

    // Continuous batching: slots run round-robin, one token each per step.
    std::vector<int> slot(size_t(o.batch), -1);  // request index or -1
    int admitted = 0, finished = 0;
    uint64_t tokens_run = 0;
    auto admit = [&](size_t j) {
        slot[j] = admitted < o.requests ? admitted++ : -1;
        if (slot[j] >= 0) reqs[size_t(slot[j])].active = true;
    };
    for (size_t j = 0; j < slot.size(); j++) admit(j);
    auto t0 = std::chrono::steady_clock::now();
    while (finished < o.requests && rc == SPECKV_OK) {
        for (size_t j = 0; j < slot.size() && rc == SPECKV_OK; j++) {
            if (slot[j] < 0) continue;
            Seq &s = reqs[size_t(slot[j])];
            // The next unit in batch order: the next occupied slot (this
            // step's if after j, the next step's if before), or s itself.
            NextUnit next;
            for (size_t d = 1; d <= slot.size(); d++) {
                size_t k = (j + d) % slot.size();
                if (slot[k] < 0) continue;
                const Seq &n = reqs[size_t(slot[k])];
                next.request = n.id;
                next.pos = k == j ? n.pos + 1 : n.pos;
                next.valid = true;
                break;
            }
            const float *logits = nullptr;
            if ((rc = fwd.forward(s.id, s.token, s.pos, next, &logits)) != SPECKV_OK) break;
            tokens_run++;
            if (!advance(s, logits, c.vocab_size)) {
                s.active = false;
                finished++;
                if ((rc = kv.release(s.id)) != SPECKV_OK) break;
                admit(j);  // the next prompt joins in this slot
            }
        }
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rc != SPECKV_OK) {
        std::fprintf(stderr, "tinyllm: %s\n", kv.error().empty() ? speckv_strerror(rc) : kv.error().c_str());
        for (const Seq &s : reqs) kv.release(s.id);
        speckv_pool_close(pool);
        return 1;
    }

    speckv_pool_stats st;
    std::memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    rc = speckv_stats(pool, &st);
    Json stats_json;  // null unless the library's JSON is read
    if (rc == SPECKV_OK && o.json) {
        // The pool is live (its prefetch thread still counts): the text can
        // grow between the size query and the copy, so leave headroom and ask
        // again on SPECKV_ERANGE.
        size_t need = 0;
        speckv_stats_json(pool, nullptr, 0, &need);
        std::string text;
        int jrc = SPECKV_ERANGE;
        for (int attempt = 0; attempt < 4 && jrc == SPECKV_ERANGE; attempt++) {
            text.assign(need + 256, '\0');
            jrc = speckv_stats_json(pool, text.data(), text.size(), &need);
        }
        if (jrc == SPECKV_OK) {
            text.resize(need);
            stats_json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
            if (stats_json.is_discarded()) stats_json = nullptr;
        }
    }
    speckv_pool_close(pool);
    if (rc != SPECKV_OK) {
        std::fprintf(stderr, "tinyllm: speckv_stats: %s (%s)\n", speckv_strerror(rc), speckv_errmsg());
        return 1;
    }
    References refs;
    // The direct-mapped L1 rounds its frames down to a power of two (lib/tiers/page_cache.cc).
    uint64_t l1_frames = page_size ? uint64_t(l1_bytes) / page_size : 0;
    if (!assoc)
        while (l1_frames & (l1_frames - 1)) l1_frames &= l1_frames - 1;
    if (traced)
        refs = references(trace, st, l1_frames, uint64_t(l2_bytes) / page_size,
                          !o.prefetch ? "this run (no prefetch)" : o.oracle ? "this run (hinted policy)"
                                                                            : "this run (learned policy)",
                          o.prefetch);

    // --check: the same prompts and limits on the plain Runner.
    int mismatched = 0;
    uint64_t compared = 0, agreed = 0;  // agreed: tokens before each sequence's first difference
    std::vector<int> first_diff(reqs.size(), -1);
    if (o.check) {
        for (size_t i = 0; i < reqs.size(); i++) {
            std::vector<int> ref = reference_run(model, reqs[i].prompt, reqs[i].limit);
            const std::vector<int> &got = reqs[i].out;
            size_t n = std::min(ref.size(), got.size()), d = 0;
            while (d < n && ref[d] == got[d]) d++;
            compared += n;
            agreed += d;
            if (d < n || ref.size() != got.size()) {
                first_diff[i] = int(d);
                mismatched++;
            }
        }
    }

    const double hit = ratio(st.l2_hits, st.l2_hits + st.sync_reads);
    const double prec = ratio(st.prefetch_used, st.prefetch_used + st.prefetch_wasted);
    const double tlb = ratio(st.tlb_hits, st.tlb_hits + st.tlb_misses);
    const double l1 = ratio(st.cache_hits, st.cache_hits + st.cache_misses);
    if (o.json) {
        Json j = {{"model", o.model},
                  {"uri", o.uri},
                  {"batch", o.batch},
                  {"requests", o.requests},
                  {"steps", steps},
                  {"prefetch", o.prefetch},
                  {"read", o.pin ? "pin" : "access"},
                  {"codec", o.codec},
                  {"page_tokens", tinyllm::kPageTokens},
                  {"block_bytes", kv.block_bytes()},
                  {"tokens", tokens_run},
                  {"seconds", fixed(secs, 6)}};
        Json seqs = Json::array();
        for (size_t i = 0; i < reqs.size(); i++) {
            Json q = {{"prompt_tokens", reqs[i].prompt.size()},
                      {"limit", reqs[i].limit},
                      {"tokens", reqs[i].out},
                      {"text", text_of(tok, reqs[i].prompt, reqs[i].out)}};
            if (o.check) q["identical"] = first_diff[i] < 0;
            seqs.push_back(std::move(q));
        }
        j["sequences"] = std::move(seqs);
        if (o.check)
            j["check"] = {{"sequences", reqs.size()},
                          {"mismatched", mismatched},
                          {"tokens_compared", compared},
                          {"tokens_before_divergence", agreed}};
        j["derived"] = {{"l1_hit_rate", fixed(l1, 6)},
                        {"hit_rate", fixed(hit, 6)},
                        {"precision", fixed(prec, 6)},
                        {"tlb_hit_rate", fixed(tlb, 6)},
                        {"beta", fixed(st.prefetch_beta_ppm / 1e6, 6)},
                        {"depth", st.prefetch_depth}};
        j["references"] = references_json(refs);
        j["stats"] = std::move(stats_json);
        std::printf("%s\n", json_text(j).c_str());
    } else {
        std::printf("tinyllm: %s (dim %d, %d layers, kv_dim %d, seq_len %d) on %s\n", o.model.c_str(), c.dim,
                    c.n_layers, c.kv_dim(), c.seq_len, o.uri.c_str());
        std::printf("batch %d, %d requests, %d-token pages (%" PRIu64 " B blocks), prefetch %s, reads by %s\n\n",
                    o.batch, o.requests, tinyllm::kPageTokens, kv.block_bytes(), o.prefetch ? "on" : "off",
                    o.pin ? "speckv_pin" : "speckv_access");
        for (size_t i = 0; i < reqs.size(); i++)
            std::printf("[%zu] %s\n", i, text_of(tok, reqs[i].prompt, reqs[i].out).c_str());
        std::printf("\n%" PRIu64 " tokens in %.3f s (%.0f tokens/s), %" PRIu64 " blocks allocated, %" PRIu64
                    " prefetch hints, %" PRIu64 " translations\n",
                    tokens_run, secs, secs > 0 ? double(tokens_run) / secs : 0.0, kv.blocks_allocated(),
                    kv.hints_sent(), kv.translations());
        if (o.check) {
            if (mismatched == 0)
                std::printf("check: all %zu sequences identical to the plain llama2 run (%" PRIu64 " tokens)\n",
                            reqs.size(), compared);
            for (size_t i = 0; i < reqs.size(); i++)
                if (first_diff[i] >= 0)
                    std::printf("check: sequence %zu differs from the plain llama2 run at generated token %d\n", i,
                                first_diff[i]);
        }
        std::printf("\npool stats (this process):\n");
        std::printf("  L1 hits (cache_hits)     %12" PRIu64 "   (L1 hit rate %.1f%%, misses %" PRIu64 ")\n",
                    st.cache_hits, 100 * l1, st.cache_misses);
        std::printf("  L2 hits                  %12" PRIu64 "\n", st.l2_hits);
        std::printf("  sync reads               %12" PRIu64 "\n", st.sync_reads);
        std::printf("  hit rate                 %11.1f%%   l2_hits / (l2_hits + sync_reads)\n", 100 * hit);
        std::printf("  precision                %11.1f%%   used %" PRIu64 " / (used + wasted %" PRIu64 ")\n",
                    100 * prec, st.prefetch_used, st.prefetch_wasted);
        std::printf("  waste bytes              %12" PRIu64 "\n", st.prefetch_wasted_bytes);
        std::printf("  prefetched pages         %12" PRIu64 "   (hints %" PRIu64 ", ignored %" PRIu64
                    ", dropped %" PRIu64 ")\n",
                    st.prefetch_pages, st.prefetch_hints, st.prefetch_ignored, st.prefetch_dropped);
        std::printf("  beta                     %12.3f\n", st.prefetch_beta_ppm / 1e6);
        std::printf("  depth                    %12u\n", st.prefetch_depth);
        std::printf("  TLB hit rate             %11.1f%%   (%" PRIu64 " hits, %" PRIu64 " misses)\n", 100 * tlb,
                    st.tlb_hits, st.tlb_misses);
        std::printf("  link bytes (L3 -> L2)    %12" PRIu64 "\n", st.link_bytes);
        if (o.codec != "raw")
            std::printf("  codec %-8s pages      %12" PRIu64 "   (%.2fx: %" PRIu64 " B -> %" PRIu64 " B; %" PRIu64
                        " left in clear; %" PRIu64 " decoded)\n",
                        o.codec.c_str(), st.codec_pages_encoded, ratio(st.codec_raw_bytes, st.codec_stored_bytes),
                        st.codec_raw_bytes, st.codec_stored_bytes, st.codec_pages_bypassed, st.codec_pages_decoded);
        if (!o.cold.empty())
            std::printf("  L4 (cold tier)           %12" PRIu64 "   blocks demoted, %" PRIu64 " promoted, %" PRIu64
                        " failed; %" PRIu64 " blocks (%" PRIu64 " B) there at the end\n",
                        st.l4_demotions, st.l4_promotions, st.l4_demote_failures, st.l4_blocks, st.l4_bytes);
        if (refs.on) print_references(refs);
    }
    // A lossy codec or approximate attention (--select without --attend)
    // changes tokens by design: --check then reports instead of failing.
    const bool lossy = o.codec != "raw" || (o.select_pct > 0 && !o.attend);
    if (o.check && mismatched && lossy) {
        if (!o.json)
            std::printf("check (lossy: %s%s): %zu of %zu sequences identical; %" PRIu64 " of %" PRIu64
                        " tokens generated before a sequence first differs\n",
                        o.codec != "raw" ? ("codec " + o.codec).c_str() : "",
                        o.select_pct > 0 && !o.attend ? (o.codec != "raw" ? ", --select" : "--select") : "",
                        reqs.size() - size_t(mismatched), reqs.size(), agreed, compared);
        return 0;
    }
    if (o.check && mismatched) {
        std::fprintf(stderr, "tinyllm: --check: %d of %zu sequences differ from the plain llama2 run\n", mismatched,
                     reqs.size());
        return 1;
    }
    return 0;
}
