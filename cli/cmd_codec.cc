// SPDX-License-Identifier: Apache-2.0
// `speckv codec bench | check | vectors` — measure the codec on real K/V,
// check every implementation against the scalar reference, and write test
// vectors for the RTL (docs/codec.md §12).
#include <sys/stat.h>
#include <time.h>
#include <zstd.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "codec/codec_kernels.h"
#include "commands.h"
#include "data_dir.h"
#include "kv_eval.h"
#include "speckv.h"
#include "util/status.h"
#include "util/json.h"
#include "util/text.h"

namespace speckv_cli {

namespace {

namespace cdc = speckv::codec;
using speckv::Json;
using speckv::json_text;
using cdc::Mode;

const Mode kPresets[] = {Mode::raw,  Mode::paper, Mode::int8, Mode::k8,   Mode::v8,   Mode::k6,  Mode::v6,
                         Mode::k5,   Mode::v5,    Mode::p8r,  Mode::k4,   Mode::v4,   Mode::k9,  Mode::k10,
                         Mode::k12,  Mode::vp8,   Mode::vp6,  Mode::vp5,  Mode::k8s,  Mode::v8s, Mode::k6s,
                         Mode::v6s,  Mode::k5s,   Mode::v5s,  Mode::p8rs, Mode::k4s,  Mode::v4s, Mode::k9s,
                         Mode::k10s, Mode::k12s,  Mode::vp8s, Mode::vp6s, Mode::vp5s, Mode::k3p,
                         Mode::v3p,  Mode::k4p,   Mode::v4p,  Mode::k5p,  Mode::v5p};
static_assert(std::size(kPresets) == size_t(cdc::kModeCount), "every preset, in id order");
// The presets before §18: `codec vectors` writes their vectors first, exactly
// as before split Rice existed, and the §18 ones after them (docs §12).
constexpr size_t kPresetsV1 = 18;
// The presets before §19 (packed): `codec vectors` writes the packed ones
// last, so that every earlier vector keeps its id and bytes (docs §12).
constexpr size_t kPresetsV2 = size_t(Mode::k3p);

std::string dirname_of(const std::string &p) {
    auto s = p.find_last_of('/');
    return s == std::string::npos ? "." : p.substr(0, s);
}

// ------------------------------------------------------------------ data

// The pages a bench runs on: FP16, page_elems each, with channel layout C,
// tagged K or V and layer (for the adaptive policy).
struct PageSet {
    std::vector<uint16_t> data;
    size_t page_elems = 0, npages = 0;
    uint32_t channels = 1;
    std::vector<int> layer;      // per page
    std::vector<uint8_t> is_v;   // per page
    const uint16_t *page(size_t i) const { return data.data() + i * page_elems; }
};

void add_capture(const llama2::KvCapture &cap, int page_tokens, PageSet *ps) {
    ps->page_elems = size_t(page_tokens) * cap.kv_dim;
    ps->channels = uint32_t(cap.kv_dim);
    for (int l = 0; l < cap.n_layers; l++)
        for (int v = 0; v < 2; v++) {
            size_t np = 0;
            auto pages = llama2::fp16_pages(cap, l, v == 1, page_tokens, &np);
            ps->data.insert(ps->data.end(), pages.begin(), pages.end());
            for (size_t i = 0; i < np; i++) ps->layer.push_back(l), ps->is_v.push_back(uint8_t(v));
            ps->npages += np;
        }
}

// --------------------------------------------------------------- timing

// CPU time of this thread: "GB/s per core" stays meaningful on a shared,
// loaded machine where wall time would count other processes' slices.
double thread_seconds() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Median over `repeats` samples of the time of one call of f(); each sample
// runs f() enough times to last >= 20 ms.
template <class F>
double median_seconds(int repeats, F &&f) {
    int inner = 1;
    for (;;) {
        double t0 = thread_seconds();
        for (int i = 0; i < inner; i++) f();
        if (thread_seconds() - t0 >= 0.02 || inner >= (1 << 20)) break;
        inner *= 2;
    }
    std::vector<double> t;
    for (int r = 0; r < repeats; r++) {
        double t0 = thread_seconds();
        for (int i = 0; i < inner; i++) f();
        t.push_back((thread_seconds() - t0) / inner);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

struct Speed {
    double ratio = 0, encode_gbps = 0, decode_gbps = 0;
};

struct ModeResult {
    std::string name;
    Speed s;
    bool has_quality = false;
    llama2::EvalResult q;      // sealed policy (the pool's): the headline
    llama2::EvalResult q_all;  // every entry coded
};

volatile uint8_t g_sink;

// zstd on each page separately (the pool stores pages), bytes = what is fed.
Speed bench_zstd(const std::vector<std::vector<uint8_t>> &pages, size_t fp16_bytes, int level, int repeats) {
    Speed sp;
    std::vector<std::vector<uint8_t>> comp(pages.size());
    size_t in_bytes = 0, out_bytes = 0;
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    for (size_t i = 0; i < pages.size(); i++) {
        comp[i].resize(ZSTD_compressBound(pages[i].size()));
        size_t n = ZSTD_compressCCtx(cc, comp[i].data(), comp[i].size(), pages[i].data(), pages[i].size(), level);
        comp[i].resize(ZSTD_isError(n) ? 0 : n);
        in_bytes += pages[i].size();
        out_bytes += comp[i].size();
    }
    std::vector<uint8_t> tmp(1 << 20), dec(1 << 20);
    double te = median_seconds(repeats, [&] {
        for (auto &p : pages) g_sink = uint8_t(ZSTD_compressCCtx(cc, tmp.data(), tmp.size(), p.data(), p.size(), level));
    });
    double td = median_seconds(repeats, [&] {
        for (auto &c : comp) g_sink = uint8_t(ZSTD_decompressDCtx(dc, dec.data(), dec.size(), c.data(), c.size()));
    });
    ZSTD_freeCCtx(cc);
    ZSTD_freeDCtx(dc);
    sp.ratio = double(fp16_bytes) / double(out_bytes);
    sp.encode_gbps = double(in_bytes) / te / 1e9;
    sp.decode_gbps = double(in_bytes) / td / 1e9;
    return sp;
}

// Encode/decode every page with a per-page mode; speed in FP16 input bytes/s.
Speed bench_codec(const PageSet &ps, const std::vector<Mode> &mode_of_page, int repeats, cdc::Impl impl) {
    Speed sp;
    const size_t pb = ps.page_elems * 2;
    std::vector<std::vector<uint8_t>> recs(ps.npages);
    size_t total = 0;
    for (size_t i = 0; i < ps.npages; i++) {
        recs[i].resize(cdc::max_record_size(pb));
        size_t len = 0;
        cdc::encode(mode_of_page[i], SPECKV_DTYPE_FP16, ps.page(i), pb, {ps.channels}, recs[i].data(), recs[i].size(),
                    &len, impl);
        recs[i].resize(len);
        total += len;
    }
    std::vector<uint8_t> buf(cdc::max_record_size(pb)), out(pb);
    double te = median_seconds(repeats, [&] {
        for (size_t i = 0; i < ps.npages; i++) {
            size_t len;
            cdc::encode(mode_of_page[i], SPECKV_DTYPE_FP16, ps.page(i), pb, {ps.channels}, buf.data(), buf.size(), &len,
                        impl);
        }
    });
    double td = median_seconds(repeats, [&] {
        for (size_t i = 0; i < ps.npages; i++) {
            size_t n;
            cdc::decode(recs[i].data(), recs[i].size(), out.data(), out.size(), &n, impl);
        }
    });
    const double bytes = double(ps.npages * pb);
    sp.ratio = bytes / double(total);
    sp.encode_gbps = bytes / te / 1e9;
    sp.decode_gbps = bytes / td / 1e9;
    return sp;
}

// A measured figure: 6 significant digits (null when not finite).
Json jnum(double v) { return speckv::json_number(v, 6); }

Json jspeed(const Speed &s) {
    return {{"ratio", jnum(s.ratio)}, {"encode_gbps", jnum(s.encode_gbps)}, {"decode_gbps", jnum(s.decode_gbps)}};
}

Json jeval(const llama2::EvalResult &q, const char *policy) {
    return {{"policy", policy},          {"cosine", jnum(q.attn_cos)},
            {"attn_rel_err", jnum(q.attn_rel_err)}, {"kl", jnum(q.kl)},
            {"top1_agree", jnum(q.top1_agree)},     {"ppl_delta_pct", jnum(q.ppl_delta_pct)},
            {"ratio_coded", jnum(q.ratio)}};
}

// "quality": the sealed policy (what the pool does); "quality_all": every entry coded.
void add_quality(const ModeResult &m, Json *o) {
    (*o)["quality"] = m.has_quality ? jeval(m.q, "sealed") : Json(nullptr);
    (*o)["quality_all"] = m.has_quality ? jeval(m.q_all, "all") : Json(nullptr);
}

// ---------------------------------------------------------------- bench

struct BenchOpts {
    std::string model, input, mode, text, tokenizer;  // text "": the project's data/text/GPL-3
    bool json = false;
    int repeats = 7, windows = 0;
    unsigned channels = 32;
    double max_err = 0.05, max_err_k = -1;  // max_err_k < 0: the set's (codec::adaptive_max_err_k)
    // adaptive: the candidate set (codec::AdaptiveSet) and the budget, "kl"
    // (sealed KL on the calibration text, max_kl), "attn" (the attention outputs'
    // relative error there, max_attn_err) or "rms" (max_err, max_err_k).
    std::string adaptive_set = "fast", adaptive_budget = "kl", calibration = "held-out";
    double max_kl = 1e-3;  // top-1 >= 97 % on both models (docs/codec.md §10.1)
    double max_attn_err = 0.03;
    std::string impl = "best";
};

// A preset name, or "K/V": one preset for K pages and one for V pages.
bool parse_pair(const std::string &s, Mode *k, Mode *v) {
    const auto slash = s.find('/');
    if (slash == std::string::npos) return cdc::mode_from_name(s.c_str(), k) && (*v = *k, true);
    return cdc::mode_from_name(s.substr(0, slash).c_str(), k) && cdc::mode_from_name(s.substr(slash + 1).c_str(), v);
}

bool parse_impl(const std::string &s, cdc::Impl *out) {
    for (cdc::Impl i : {cdc::Impl::scalar, cdc::Impl::avx2, cdc::Impl::avx512, cdc::Impl::best})
        if (s == cdc::impl_name(i)) return *out = i, true;
    return false;
}

void run_bench(const BenchOpts &o) {
    cdc::Impl impl;
    if (!parse_impl(o.impl, &impl) || !cdc::impl_available(impl)) {
        error("--impl " + o.impl + " is not available on this CPU", SPECKV_ENOTSUP);
        return void(g_exit = 2);
    }
    cdc::AdaptiveSet aset;
    if (!cdc::adaptive_set_from_name(o.adaptive_set.c_str(), &aset)) {
        error("--adaptive-set " + o.adaptive_set + ": not fast or dense");
        return void(g_exit = 2);
    }
    // kl and attn: the ladder measured on the model (calibration text); rms: per page.
    const bool by_model = o.adaptive_budget == "kl" || o.adaptive_budget == "attn";
    const bool by_attn = o.adaptive_budget == "attn";
    const double max_err_k = o.max_err_k >= 0 ? o.max_err_k : cdc::adaptive_max_err_k(aset);
    std::vector<std::string> modes;
    if (!o.mode.empty()) {
        Mode m, mv;
        if (o.mode != "adaptive" && !parse_pair(o.mode, &m, &mv)) {
            error("unknown mode " + o.mode);
            return void(g_exit = 2);
        }
        modes.push_back(o.mode);
    } else {
        for (Mode m : kPresets) modes.push_back(cdc::mode_name(m));
    }
    if (o.model.empty() == o.input.empty()) {
        error("give exactly one of --model PATH or --input FILE");
        return void(g_exit = 2);
    }
    PageSet ps;
    llama2::Model model;
    std::vector<int> text_tokens;
    int page_tokens = 0;
    llama2::KvCapture cal;
    std::vector<int> cal_text;
    int windows = o.windows;
    std::string source;
    const std::string text_path = o.text.empty() ? speckv_data::path("text/GPL-3") : o.text;
    if (!o.model.empty()) {
        std::string err;
        if (!model.load(o.model, &err)) {
            error(err, SPECKV_EIO);
            return void(g_exit = 1);
        }
        llama2::Tokenizer tok;
        std::string tokp = o.tokenizer.empty() ? dirname_of(o.model) + "/tok512.bin" : o.tokenizer;
        if (!tok.load(tokp, model.c.vocab_size, &err)) {
            error(err, SPECKV_EIO);
            return void(g_exit = 1);
        }
        std::string text = llama2::read_text(text_path);
        if (text.empty()) {
            error(o.text.empty() ? speckv_data::missing(text_path) : "cannot read text " + o.text, SPECKV_EIO);
            return void(g_exit = 1);
        }
        text_tokens = tok.encode(text);
        if (windows <= 0) windows = std::max(1, 1024 / model.c.seq_len);
        page_tokens = std::max(1, 2048 / model.c.kv_dim());  // 4 KiB of FP16 per page
        // Bench data: the K/V of the first window of the text.
        std::vector<int> w{1};
        w.insert(w.end(), text_tokens.begin(), text_tokens.begin() + std::min<long>(long(text_tokens.size()), model.c.seq_len - 1));
        add_capture(llama2::capture_kv(model, w), page_tokens, &ps);
        // Calibration for the adaptive policy, never the tokens quality is
        // measured on. rms: the model's own greedy text. kl: by default the
        // window of --text right after the evaluated ones (held out); the
        // greedy text is confident, so its KL understates the text's (§10).
        auto g = llama2::greedy(model, model.c.seq_len - 1);
        if (o.calibration == "greedy") {
            cal_text = g;
        } else if (by_model && (o.mode.empty() || o.mode == "adaptive")) {
            const size_t from = size_t(windows) * size_t(model.c.seq_len - 1), len = size_t(model.c.seq_len - 1);
            if (text_tokens.size() < from + len) {
                error("--calibration held-out: " + text_path + " has " + std::to_string(text_tokens.size()) +
                      " tokens, the windows and the held-out one need " + std::to_string(from + len) +
                      " (fewer --windows, a longer --text, or --calibration greedy)");
                return void(g_exit = 2);
            }
            cal_text.assign(text_tokens.begin() + long(from), text_tokens.begin() + long(from + len));
        }
        g.insert(g.begin(), 1);
        cal = llama2::capture_kv(model, g);
        source = o.model;
    } else {
        std::string raw = llama2::read_text(o.input);
        if (raw.size() < 2) {
            error("cannot read " + o.input, SPECKV_EIO);
            return void(g_exit = 1);
        }
        ps.channels = o.channels;
        ps.page_elems = 2048;
        ps.npages = raw.size() / 4096;
        if (!ps.npages) {
            error(o.input + ": needs at least one 4096-byte page of FP16");
            return void(g_exit = 1);
        }
        ps.data.resize(ps.npages * 2048);
        std::memcpy(ps.data.data(), raw.data(), ps.npages * 4096);
        ps.layer.assign(ps.npages, 0);
        ps.is_v.assign(ps.npages, 0);
        source = o.input;
    }
    const size_t pb = ps.page_elems * 2, fp16_bytes = ps.npages * pb;

    // memcpy of the same bytes, page by page.
    std::vector<uint8_t> dst(pb);
    double tm = median_seconds(o.repeats, [&] {
        for (size_t i = 0; i < ps.npages; i++) {
            std::memcpy(dst.data(), ps.page(i), pb);
            asm volatile("" ::"r"(dst.data()) : "memory");
        }
    });
    const double memcpy_gbps = double(fp16_bytes) / tm / 1e9;

    // zstd on the FP16 pages and on the INT8-quantised pages (paper quantiser:
    // the q bytes of each page plus its 2-byte scale).
    std::vector<std::vector<uint8_t>> fp16_pages(ps.npages), int8_pages(ps.npages);
    std::map<int, size_t> hist;
    for (size_t i = 0; i < ps.npages; i++) {
        fp16_pages[i].assign(reinterpret_cast<const uint8_t *>(ps.page(i)), reinterpret_cast<const uint8_t *>(ps.page(i)) + pb);
        std::vector<uint32_t> u(ps.page_elems);
        cdc::canon_scalar(SPECKV_DTYPE_FP16, ps.page(i), ps.page_elems, u.data());
        uint32_t A = 0;
        for (uint32_t x : u) A = std::max(A, x & 0x7FFFFF00u);
        uint16_t field = 0;
        uint32_t es = 0, r = 0;
        if (A >= 0x800000u) {
            // §3.2 for b = 8 (same arithmetic as make_scale in codec_ref.cc)
            uint32_t Em = A >> 23, Mm = 0x8000u | ((A >> 8) & 0x7FFFu), j = 7;
            uint32_t Ms = ((Mm << j) + 256 * 127 - 1) / (256 * 127);
            if (Ms >= 256) j = 6, Ms = ((Mm << j) + 256 * 127 - 1) / (256 * 127);
            es = Em - j, r = 0x7FFFFFu / Ms, field = uint16_t((es << 7) | (Ms & 0x7F));
        }
        int8_pages[i].resize(2 + ps.page_elems);
        std::memcpy(int8_pages[i].data(), &field, 2);
        cdc::quant_const_scalar(u.data(), ps.page_elems, es, r, 127, reinterpret_cast<int8_t *>(int8_pages[i].data() + 2));
        for (size_t k = 0; k < ps.page_elems; k++) hist[int8_t(int8_pages[i][2 + k])]++;
    }
    double H = 0;
    const double N = double(ps.npages * ps.page_elems);
    for (auto &[v, c] : hist) H -= double(c) / N * std::log2(double(c) / N);
    const double entropy_ratio = 16.0 / std::max(H, 1e-9);
    Speed z1 = bench_zstd(fp16_pages, fp16_bytes, 1, o.repeats), z3 = bench_zstd(fp16_pages, fp16_bytes, 3, o.repeats);
    Speed z1q = bench_zstd(int8_pages, fp16_bytes, 1, o.repeats), z3q = bench_zstd(int8_pages, fp16_bytes, 3, o.repeats);

    // The adaptive policy (only with a model: it is per layer).
    // (The KL policy costs an evaluation per step: made only when it is reported.)
    llama2::KvPolicy adaptive;
    llama2::AdaptiveKl akl;
    const bool want_adaptive = !o.model.empty() && (o.mode.empty() || o.mode == "adaptive");
    if (want_adaptive && by_model) {
        akl = llama2::adaptive_policy_kl(model, cal_text, page_tokens, by_attn ? o.max_attn_err : o.max_kl, aset, impl,
                                         by_attn ? llama2::AdaptiveMetric::attn_err : llama2::AdaptiveMetric::kl);
        adaptive = akl.policy;
    } else if (want_adaptive) {
        adaptive = llama2::adaptive_policy(cal, page_tokens, max_err_k, o.max_err, aset);
    }

    std::vector<ModeResult> results;
    Progress prog("codec bench", modes.size() + (!o.model.empty() && o.mode.empty() ? 1 : 0));
    prog.update(0);
    for (const auto &name : modes) {
        ModeResult mr;
        mr.name = name;
        std::vector<Mode> per_page(ps.npages);
        llama2::KvPolicy pol;
        if (name == "adaptive") {
            if (o.model.empty()) continue;
            for (size_t i = 0; i < ps.npages; i++)
                per_page[i] = (ps.is_v[i] ? adaptive.v_mode : adaptive.k_mode)[size_t(ps.layer[i])];
            pol = adaptive;
        } else {
            Mode m, mv;
            parse_pair(name, &m, &mv);
            for (size_t i = 0; i < ps.npages; i++) per_page[i] = ps.is_v[i] ? mv : m;
            if (!o.model.empty()) pol = llama2::KvPolicy::uniform(model.c.n_layers, m, mv, page_tokens);
        }
        mr.s = bench_codec(ps, per_page, o.repeats, impl);
        if (!o.model.empty()) {
            pol.impl = impl;
            pol.coding = llama2::CodePolicy::sealed;
            mr.q = llama2::evaluate(model, text_tokens, pol, windows, model.c.seq_len);
            pol.coding = llama2::CodePolicy::all;
            mr.q_all = llama2::evaluate(model, text_tokens, pol, windows, model.c.seq_len);
            mr.has_quality = true;
        }
        results.push_back(mr);
        prog.update(results.size());
    }
    if (!o.model.empty() && o.mode.empty()) {
        ModeResult mr;
        mr.name = "adaptive";
        std::vector<Mode> per_page(ps.npages);
        for (size_t i = 0; i < ps.npages; i++)
            per_page[i] = (ps.is_v[i] ? adaptive.v_mode : adaptive.k_mode)[size_t(ps.layer[i])];
        mr.s = bench_codec(ps, per_page, o.repeats, impl);
        auto pol = adaptive;
        pol.impl = impl;
        pol.coding = llama2::CodePolicy::sealed;
        mr.q = llama2::evaluate(model, text_tokens, pol, windows, model.c.seq_len);
        pol.coding = llama2::CodePolicy::all;
        mr.q_all = llama2::evaluate(model, text_tokens, pol, windows, model.c.seq_len);
        mr.has_quality = true;
        results.push_back(mr);
        prog.update(results.size());
    }
    prog.finish();
    if (results.empty()) {
        error("mode adaptive needs --model");
        return void(g_exit = 2);
    }
    // The top-level figures: the --mode asked for, else adaptive (with a model), else paper.
    const std::string want = !o.mode.empty() ? o.mode : !o.model.empty() ? "adaptive" : "paper";
    const ModeResult *tp = &results.front();
    for (const auto &r : results)
        if (r.name == want) tp = &r;
    const ModeResult &top = *tp;

    if (g_opt.json) {
        Json j = {{"source", source},
                  {"pages", ps.npages},
                  {"page_bytes", pb},
                  {"impl", o.impl},
                  {"mode", top.name},
                  {"ratio", jnum(top.s.ratio)},
                  {"encode_gbps", jnum(top.s.encode_gbps)},
                  {"decode_gbps", jnum(top.s.decode_gbps)},
                  {"memcpy_gbps", jnum(memcpy_gbps)},
                  {"zstd1", jspeed(z1)},
                  {"zstd3", jspeed(z3)},
                  {"zstd1_int8", jspeed(z1q)},
                  {"zstd3_int8", jspeed(z3q)},
                  {"entropy_bound_ratio", jnum(entropy_ratio)}};
        add_quality(top, &j);
        Json modes = Json::object();
        for (const auto &m : results) {
            Json e = {{"ratio", jnum(m.s.ratio)},
                      {"encode_gbps", jnum(m.s.encode_gbps)},
                      {"decode_gbps", jnum(m.s.decode_gbps)},
                      {"memcpy_gbps", jnum(memcpy_gbps)},
                      {"zstd1", jspeed(z1)},
                      {"zstd3", jspeed(z3)},
                      {"entropy_bound_ratio", jnum(entropy_ratio)}};
            add_quality(m, &e);
            modes[m.name] = std::move(e);
        }
        j["modes"] = std::move(modes);
        if (want_adaptive) {
            Json k = Json::array(), v = Json::array();
            for (auto m : adaptive.k_mode) k.push_back(cdc::mode_name(m));
            for (auto m : adaptive.v_mode) v.push_back(cdc::mode_name(m));
            j["adaptive_policy"] = {{"k", std::move(k)},
                                    {"v", std::move(v)},
                                    {"set", o.adaptive_set},
                                    {"budget", o.adaptive_budget},
                                    {"calibration", by_model ? Json(o.calibration) : Json("greedy")},
                                    {"max_kl", by_model && !by_attn ? jnum(o.max_kl) : Json(nullptr)},
                                    {"max_attn_err", by_attn ? jnum(o.max_attn_err) : Json(nullptr)},
                                    {"calibration_kl", by_model ? jnum(akl.cal_kl) : Json(nullptr)},
                                    {"calibration_attn_err", by_model ? jnum(akl.cal_attn_err) : Json(nullptr)},
                                    {"evaluations", by_model ? Json(akl.evaluations) : Json(nullptr)},
                                    {"max_err", by_model ? Json(nullptr) : jnum(o.max_err)},
                                    {"max_err_k", by_model ? Json(nullptr) : jnum(max_err_k)}};
        }
        std::printf("%s\n", speckv::json_text_spaced(j).c_str());
        return;
    }
    std::printf("source %s: %zu pages of %zu bytes (FP16), impl %s\n", source.c_str(), ps.npages, pb, o.impl.c_str());
    std::printf("memcpy %.2f GB/s | zstd-1 fp16 %.2fx enc %.2f dec %.2f GB/s | zstd-3 fp16 %.2fx enc %.2f dec %.2f GB/s\n",
                memcpy_gbps, z1.ratio, z1.encode_gbps, z1.decode_gbps, z3.ratio, z3.encode_gbps, z3.decode_gbps);
    std::printf("zstd-1 int8 %.2fx enc %.2f dec %.2f GB/s | zstd-3 int8 %.2fx | order-0 entropy of int8 symbols %.3f bits -> %.2fx\n",
                z1q.ratio, z1q.encode_gbps, z1q.decode_gbps, z3q.ratio, H, entropy_ratio);
    if (!o.model.empty())
        std::printf("quality: sealed = completed pages coded, current page exact (the pool's policy); "
                    "all = every entry coded\n");
    std::printf("%-9s %7s %8s %8s %9s %9s %10s %7s %8s %10s %7s %8s\n", "mode", "ratio", "enc GB/s", "dec GB/s",
                "attn cos", "attn err", "KL", "top1", "ppl %", "KL all", "top1 all", "ppl% all");
    for (const auto &m : results) {
        std::printf("%-9s %7.3f %8.3f %8.3f", m.name.c_str(), m.s.ratio, m.s.encode_gbps, m.s.decode_gbps);
        if (m.has_quality)
            std::printf(" %9.6f %9.5f %10.3e %7.4f %+8.3f %10.3e %7.4f %+8.3f", m.q.attn_cos, m.q.attn_rel_err, m.q.kl,
                        m.q.top1_agree, m.q.ppl_delta_pct, m.q_all.kl, m.q_all.top1_agree, m.q_all.ppl_delta_pct);
        std::printf("\n");
    }
    if (want_adaptive) {
        if (by_attn)
            std::printf("adaptive policy (set %s, sealed attention error <= %.3g on the %s text: %.4f, KL %.3e, %d runs): K",
                        o.adaptive_set.c_str(), o.max_attn_err, o.calibration == "greedy" ? "model's greedy" : "held-out",
                        akl.cal_attn_err, akl.cal_kl, akl.evaluations);
        else if (by_model)
            std::printf("adaptive policy (set %s, sealed KL <= %.3g on the %s text: %.3e, %d runs): K",
                        o.adaptive_set.c_str(), o.max_kl, o.calibration == "greedy" ? "model's greedy" : "held-out",
                        akl.cal_kl, akl.evaluations);
        else
            std::printf("adaptive policy (set %s, max rel err K %.3g, V %.3g): K", o.adaptive_set.c_str(),
                        max_err_k, o.max_err);
        for (Mode m : adaptive.k_mode) std::printf(" %s", cdc::mode_name(m));
        std::printf(" | V");
        for (Mode m : adaptive.v_mode) std::printf(" %s", cdc::mode_name(m));
        std::printf("\n");
    }
    if (!o.model.empty())
        std::printf("ppl exact %.4f on %zu positions of %s\n", results.front().q.ppl_exact, results.front().q.positions,
                    text_path.c_str());
}

// ---------------------------------------------------------------- check

std::vector<uint8_t> gen_page(std::mt19937_64 &rng, int dtype, size_t n, int kind) {
    const size_t esz = cdc::dtype_size(dtype);
    std::vector<uint8_t> b(n * esz);
    std::normal_distribution<float> nd(0.f, 1.f);
    float scale = std::ldexp(1.0f, int(rng() % 24) - 12);
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        float f;
        switch (kind % 5) {
            case 0: f = nd(rng) * scale; break;
            case 1: f = nd(rng) * scale * ((i % 32 == 5) ? 50.f : 1.f); break;
            case 2: f = (i / 8 % 2) ? 0.f : std::sin(float(i) * 0.02f) * scale; break;
            default: f = 0; break;
        }
        if (kind % 5 == 3) {  // random bits, NaN/Inf included
            bits = uint32_t(rng());
        } else if (kind % 5 == 4) {  // subnormals and zeros
            bits = uint32_t(rng()) & (esz == 4 ? 0x807FFFFFu : dtype == SPECKV_DTYPE_BF16 ? 0x807Fu : 0x83FFu);
        } else if (dtype == SPECKV_DTYPE_FP32) {
            std::memcpy(&bits, &f, 4);
        } else {
            bits = dtype == SPECKV_DTYPE_FP16 ? cdc::fp32_to_fp16_rne(f) : cdc::fp32_to_bf16_rne(f);
        }
        std::memcpy(&b[i * esz], &bits, esz);
    }
    return b;
}

// With --json, run_check leaves its report here for the caller to finish (--rtl) and print.
Json g_check_report;

void run_check(unsigned pages, uint64_t seed) {
    std::vector<cdc::Impl> impls{cdc::Impl::scalar};
    for (cdc::Impl i : {cdc::Impl::avx2, cdc::Impl::avx512})
        if (cdc::impl_available(i)) impls.push_back(i);
    std::mt19937_64 rng(seed);
    size_t mismatches = 0, failures = 0, raw_pages = 0, in_bytes = 0, rec_bytes = 0;
    const int dtypes[] = {SPECKV_DTYPE_FP16, SPECKV_DTYPE_BF16, SPECKV_DTYPE_FP32};
    const uint32_t chans[] = {32, 64, 128, 16, 7, 1};
    std::vector<uint8_t> r0, r1, d0, d1;
    Progress prog("codec check", pages);
    for (unsigned p = 0; p < pages; p++) {
        prog.update(p);
        const int dt = dtypes[rng() % 3];
        const size_t n = (p % 4) ? 4096 / cdc::dtype_size(dt) : 1 + rng() % 3000;
        const uint32_t C = chans[rng() % 6];
        const Mode m = kPresets[rng() % cdc::kModeCount];
        auto src = gen_page(rng, dt, n, int(rng() % 5));
        r0.resize(cdc::max_record_size(src.size()));
        r1.resize(r0.size());
        d0.resize(src.size());
        d1.resize(src.size());
        size_t l0 = 0, n0 = 0;
        if (cdc::encode(m, dt, src.data(), src.size(), {C}, r0.data(), r0.size(), &l0, cdc::Impl::scalar) ||
            cdc::decode(r0.data(), l0, d0.data(), d0.size(), &n0, cdc::Impl::scalar) || n0 != src.size()) {
            failures++;
            continue;
        }
        raw_pages += r0[3] == 0;
        if (r0[3] == 0 && d0 != src) failures++;
        in_bytes += src.size();
        rec_bytes += l0;
        for (size_t k = 1; k < impls.size(); k++) {
            size_t l1 = 0, n1 = 0;
            bool bad = cdc::encode(m, dt, src.data(), src.size(), {C}, r1.data(), r1.size(), &l1, impls[k]) ||
                       l1 != l0 || std::memcmp(r0.data(), r1.data(), l0) != 0 ||
                       cdc::decode(r0.data(), l0, d1.data(), d1.size(), &n1, impls[k]) || d1 != d0;
            if (bad && mismatches++ < 5)
                std::fprintf(stderr, "mismatch: impl %s mode %s dtype %d n %zu C %u (page %u)\n",
                             cdc::impl_name(impls[k]), cdc::mode_name(m), dt, n, C, p);
        }
    }
    prog.finish();
    const double ratio = rec_bytes ? double(in_bytes) / double(rec_bytes) : 0.0;
    if (g_opt.json) {
        // The report is the result, failures included; no separate error object.
        Json names = Json::array();
        for (auto i : impls) names.push_back(cdc::impl_name(i));
        g_check_report = {{"pages", pages},
                          {"seed", seed},
                          {"impls", std::move(names)},
                          {"stored_raw", raw_pages},
                          {"mean_ratio", speckv::json_fixed6(ratio)},
                          {"round_trip_failures", failures},
                          {"cross_impl_mismatches", mismatches},
                          {"ok", !(failures || mismatches)}};
        if (failures || mismatches) g_exit = 1;
        return;  // the caller prints the report (after --rtl)
    }
    if (!g_opt.quiet || failures || mismatches) {
        std::printf("codec check: %u pages, impls:", pages);
        for (auto i : impls) std::printf(" %s", cdc::impl_name(i));
        std::printf("; %zu stored raw; mean ratio %.3f; round-trip failures %zu; cross-impl mismatches %zu\n", raw_pages,
                    ratio, failures, mismatches);
    }
    if (failures || mismatches) {
        error("codec check failed", SPECKV_EINTERNAL);
        g_exit = 1;
    }
}

// `codec check --rtl`: the same pages through the Verilog encoder/decoder,
// run by the Verilator testbench of fpga/sim (tb_codec.cc), which compares
// every byte with this reference and injects random valid/ready stalls.
// The testbench is found via $SPECKV_FPGA_TB, else where this build put it.
void run_rtl_check(unsigned pages, uint64_t seed) {
    const char *tb = std::getenv("SPECKV_FPGA_TB");
#ifdef SPECKV_FPGA_TB
    if (!tb || !*tb) tb = SPECKV_FPGA_TB;
#endif
    struct stat st;
    if (!tb || !*tb || stat(tb, &st) != 0) {
        error("the RTL testbench is not available: build with Verilator installed (SPECKV_BUILD_FPGA=ON, target "
              "fpga_tb_codec) or point SPECKV_FPGA_TB at it",
              SPECKV_ENOTSUP);
        g_exit = 2;
        return;
    }
    std::string cmd = "'" + std::string(tb) + "' --pages " + std::to_string(pages) + " --seed " + std::to_string(seed) +
                      " --stall 30";
    if (g_opt.json || g_opt.quiet) cmd += " >&2";  // stdout carries only the JSON report
    std::fflush(stdout);
    int rc = std::system(cmd.c_str());
    if (rc != 0) {
        error("RTL check failed (testbench exit status " + std::to_string(rc) + ")", SPECKV_EINTERNAL);
        g_exit = 1;
    }
}

// -------------------------------------------------------------- vectors

bool write_file(const std::string &path, const void *p, size_t n) {
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    bool ok = std::fwrite(p, 1, n, f) == n;
    return std::fclose(f) == 0 && ok;
}

// The §18 worked example: 16 FP16 values, the largest 3.0 (the scale of §11),
// then -S and 3S alternating (S = 194 * 2^-13, q = -1 and 3): one block, k = 1,
// low bits, unary codes, one escape and the K padding nibble.
std::vector<uint8_t> srice_example_page() {
    std::vector<uint16_t> h(16);
    h[0] = 0x4200;  // 3.0
    for (size_t i = 1; i < 16; i++) h[i] = (i & 1) ? 0xA610 : 0x2C8C;  // -S, 3S
    std::vector<uint8_t> src(32);
    std::memcpy(src.data(), h.data(), 32);
    return src;
}

void run_vectors(const std::string &out, const std::string &model_path, uint64_t seed) {
    ::mkdir(out.c_str(), 0755);
    std::string idx = "# id\tmode\tdtype\tcount\tchannels\tinput_bytes\trecord_bytes\tdecoded_bytes\tstored_mode\tnote\n";
    int id = 0;
    bool ok = true;
    auto emit = [&](Mode m, int dt, const std::vector<uint8_t> &src, uint32_t C, const std::string &note) {
        std::vector<uint8_t> rec(cdc::max_record_size(src.size())), dec(src.size());
        size_t len = 0, n = 0;
        if (cdc::encode(m, dt, src.data(), src.size(), {C}, rec.data(), rec.size(), &len, cdc::Impl::scalar) ||
            cdc::decode(rec.data(), len, dec.data(), dec.size(), &n, cdc::Impl::scalar)) {
            ok = false;
            return;
        }
        char base[64];
        std::snprintf(base, sizeof base, "%04d", id);
        std::string b = out + "/" + base;
        ok &= write_file(b + ".in", src.data(), src.size()) && write_file(b + ".rec", rec.data(), len) &&
              write_file(b + ".out", dec.data(), n);
        idx += std::string(base) + "\t" + cdc::mode_name(m) + "\t" + std::to_string(dt) + "\t" +
               std::to_string(src.size() / cdc::dtype_size(dt)) + "\t" + std::to_string(C) + "\t" +
               std::to_string(src.size()) + "\t" + std::to_string(len) + "\t" + std::to_string(n) + "\t" +
               cdc::mode_name(Mode(rec[3])) + "\t" + note + "\n";
        id++;
    };
    // One point of the parameter space (docs §4-§6, §13, §18) on the sweep
    // page, recorded under mode id 2 (ids are informational, §8).
    auto emit_sweep = [&](const std::vector<uint8_t> &src, unsigned b, unsigned g, unsigned ord, unsigned e) {
        std::vector<uint8_t> rec(cdc::max_record_size(src.size())), dec(src.size());
        size_t len = 0, n = 0;
        const cdc::Params prm{uint8_t(b), uint8_t(g), uint8_t(ord), uint8_t(e)};
        if (cdc::encode_params(Mode::int8, prm, SPECKV_DTYPE_FP16, src.data(), src.size(), {32}, rec.data(), rec.size(),
                               &len, cdc::Impl::scalar) ||
            cdc::decode(rec.data(), len, dec.data(), dec.size(), &n, cdc::Impl::scalar)) {
            ok = false;
            return;
        }
        char base[64], note[96];
        std::snprintf(base, sizeof base, "%04d", id);
        std::snprintf(note, sizeof note, "sweep b=%u group=%u order=%u entropy=%u", b, g, ord, e);
        std::string bp = out + "/" + base;
        ok &= write_file(bp + ".in", src.data(), src.size()) && write_file(bp + ".rec", rec.data(), len) &&
              write_file(bp + ".out", dec.data(), n);
        idx += std::string(base) + "\tsweep\t1\t2048\t32\t" + std::to_string(src.size()) + "\t" + std::to_string(len) +
               "\t" + std::to_string(n) + "\t" + (rec[3] == 0 ? "raw" : "sweep") + "\t" + note + "\n";
        id++;
    };
    // Random pages of every preset in [first, last) x dtype x kind, then the FP16 extremes.
    auto emit_presets = [&](std::mt19937_64 &rng, size_t first, size_t last) {
        for (size_t pi = first; pi < last; pi++)
            for (int dt : {SPECKV_DTYPE_FP16, SPECKV_DTYPE_BF16, SPECKV_DTYPE_FP32})
                for (int kind = 0; kind < 5; kind++) {
                    const size_t n = kind == 2 ? 999 : 4096 / cdc::dtype_size(dt);
                    emit(kPresets[pi], dt, gen_page(rng, dt, n, kind), kind == 2 ? 1 : 32,
                         kind == 0 ? "gaussian" : kind == 1 ? "outlier-channels" : kind == 2 ? "runs-odd-size"
                                                : kind == 3 ? "random-bits" : "subnormals");
                }
        // FP16 extremes: max, min subnormal, -0, saturation path
        std::vector<uint16_t> h(2048);
        for (size_t i = 0; i < h.size(); i++) h[i] = uint16_t(i % 4 == 0 ? 0x7BFF : i % 4 == 1 ? 0x0001 : i % 4 == 2 ? 0x8000 : 0xFBFF);
        std::vector<uint8_t> src(4096);
        std::memcpy(src.data(), h.data(), 4096);
        for (size_t pi = first; pi < last; pi++) emit(kPresets[pi], SPECKV_DTYPE_FP16, src, 32, "fp16-extremes");
    };
    // 1. the worked example of docs §11
    {
        uint16_t h[4] = {0x3C00, 0xB800, 0x3400, 0x4200};  // 1.0 -0.5 0.25 3.0
        std::vector<uint8_t> src(8);
        std::memcpy(src.data(), h, 8);
        emit(Mode::int8, SPECKV_DTYPE_FP16, src, 4, "worked-example");
        emit(Mode::paper, SPECKV_DTYPE_FP16, src, 4, "worked-example");
    }
    // 2. edge cases and random pages, every preset of §9-§16 x dtype
    std::mt19937_64 rng(seed);
    emit_presets(rng, 0, kPresetsV1);
    // 3. the whole parameter space of §4-§6 and §13 (entropy 0..2) on one page
    //    with outlier channels: 64 tokens x 32 channels, smooth per channel +
    //    noise, channel 5 x16 (all finite)
    std::vector<uint8_t> sweep(4096);
    {
        std::normal_distribution<float> nd(0.f, 1.f);
        for (size_t i = 0; i < 2048; i++) {
            float v = 0.3f * nd(rng) + float(i / 32 % 16) / 8.0f - float(i % 32) / 16.0f;
            uint16_t h = cdc::fp32_to_fp16_rne(i % 32 == 5 ? 16.0f * v : v);
            std::memcpy(&sweep[2 * i], &h, 2);
        }
        for (unsigned b = 3; b <= 12; b++)
            for (unsigned g = 0; g < 3; g++)
                for (unsigned ord = 0; ord < 3; ord++)
                    for (unsigned e = 0; e < 3; e++)
                        if (b <= 8 || e == cdc::kEntropyRice) emit_sweep(sweep, b, g, ord, e);
    }
    // 4. real K/V pages
    std::vector<std::pair<std::vector<uint8_t>, std::string>> real;  // (page, note)
    uint32_t real_c = 1;
    if (!model_path.empty()) {
        llama2::Model model;
        std::string err;
        if (!model.load(model_path, &err)) {
            error(err, SPECKV_EIO);
            return void(g_exit = 1);
        }
        auto g = llama2::greedy(model, model.c.seq_len - 1);
        g.insert(g.begin(), 1);
        auto cap = llama2::capture_kv(model, g);
        const int pt = std::max(1, 2048 / cap.kv_dim);
        real_c = uint32_t(cap.kv_dim);
        for (int l = 0; l < cap.n_layers; l++)
            for (int v = 0; v < 2; v++) {
                size_t np;
                auto pages = llama2::fp16_pages(cap, l, v == 1, pt, &np);
                if (!np) continue;
                std::vector<uint8_t> src(size_t(pt) * cap.kv_dim * 2);
                std::memcpy(src.data(), pages.data(), src.size());
                real.emplace_back(src, std::string(v ? "real-V" : "real-K") + "-layer" + std::to_string(l));
            }
        for (const auto &[src, note] : real)
            for (size_t pi = 0; pi < kPresetsV1; pi++) emit(kPresets[pi], SPECKV_DTYPE_FP16, src, real_c, note);
    }
    // 5. split Rice (§18), after everything above so that its vectors keep
    //    their ids and bytes: the worked example, every §18 preset on random
    //    and edge pages (its own random stream), the parameter space with
    //    entropy 3, the real K/V pages.
    emit(Mode::vp8s, SPECKV_DTYPE_FP16, srice_example_page(), 16, "worked-example-srice");
    std::mt19937_64 rng18(seed ^ 0x5352494345ull);
    emit_presets(rng18, kPresetsV1, kPresetsV2);
    for (unsigned b = 3; b <= 12; b++)
        for (unsigned g = 0; g < 3; g++)
            for (unsigned ord = 0; ord < 3; ord++) emit_sweep(sweep, b, g, ord, cdc::kEntropySplitRice);
    for (const auto &[src, note] : real)
        for (size_t pi = kPresetsV1; pi < kPresetsV2; pi++) emit(kPresets[pi], SPECKV_DTYPE_FP16, src, real_c, note);
    // 6. packed (§19), after everything above for the same reason: the worked
    //    example of §19.6, every packed preset on random and edge pages (its
    //    own random stream), the real K/V pages.
    {
        uint16_t h[4] = {0x3C00, 0xB800, 0x3400, 0x4200};  // 1.0 -0.5 0.25 3.0
        std::vector<uint8_t> src(8);
        std::memcpy(src.data(), h, 8);
        emit(Mode::v4p, SPECKV_DTYPE_FP16, src, 4, "worked-example-packed");
    }
    std::mt19937_64 rng19(seed ^ 0x5041434B4544ull);
    emit_presets(rng19, kPresetsV2, size_t(cdc::kModeCount));
    for (const auto &[src, note] : real)
        for (size_t pi = kPresetsV2; pi < size_t(cdc::kModeCount); pi++) emit(kPresets[pi], SPECKV_DTYPE_FP16, src, real_c, note);
    ok &= write_file(out + "/index.tsv", idx.data(), idx.size());
    if (!ok) {
        error("could not write vectors to " + out, SPECKV_EIO);
        g_exit = 1;
        return;
    }
    if (g_opt.json) std::printf("%s\n", json_text({{"vectors", id}, {"out", out}, {"index", "index.tsv"}}).c_str());
    else if (!g_opt.quiet) std::printf("wrote %d vectors to %s (index.tsv)\n", id, out.c_str());
}

}  // namespace

void register_codec_commands(CLI::App &app) {
    auto *codec = app.add_subcommand("codec", "KV codec: benchmark, self-check, RTL test vectors");
    codec->require_subcommand(1);

    static BenchOpts bo;
    auto *bench = codec->add_subcommand("bench", "Ratio, speed and end-to-end quality per mode on real K/V");
    bench->add_option("--model", bo.model, "llama2.c checkpoint: its K/V on --text are the data");
    bench->add_option("--input", bo.input, "raw FP16 file (4096-byte pages) instead of a model");
    bench->add_option("--mode", bo.mode, "one preset (raw, paper, int8, k8, v8, k6, v6, k5, v5, p8r, k4, v4, k9, k10, k12, vp8, vp6, vp5, or one of those Rice presets + s for split Rice: k8s, vp6s, ...; the packed k3p v3p k4p v4p k5p v5p), a pair K/V (k4p/v4p: K pages, V pages), or adaptive");
    add_json(bench);
    add_no_progress(bench);
    bench->add_option("--text", bo.text, "English text for perplexity (default: text/GPL-3 of the project's data: $SPECKV_DATA_DIR, else the source tree's data/)");
    bench->add_option("--tokenizer", bo.tokenizer, "tokenizer .bin (default: tok512.bin beside the model)");
    bench->add_option("--repeats", bo.repeats, "timing repeats (median)")->check(CLI::Range(1, 1000));
    bench->add_option("--windows", bo.windows, "text windows of seq_len tokens for quality (default ~1024 tokens)");
    bench->add_option("--channels", bo.channels, "channels per token for --input")->check(CLI::Range(1u, 65535u));
    bench->add_option("--adaptive-set", bo.adaptive_set,
                      "adaptive: the presets it chooses among: fast (int8 and k3p..v5p, no variable-length stage; "
                      "default) or dense (paper and the split Rice presets)")
        ->check(CLI::IsMember({"fast", "dense"}));
    bench->add_option("--adaptive-budget", bo.adaptive_budget,
                      "adaptive: kl (default: per layer and K/V the highest-ratio presets at which the whole policy's "
                      "sealed KL on the --calibration text stays within --max-kl), attn (the same ladder, bounding the "
                      "attention outputs' relative error there, --max-attn-err) or rms (relative RMS error per page, --max-err, "
                      "--max-err-k)")
        ->check(CLI::IsMember({"kl", "attn", "rms"}));
    bench->add_option("--max-kl", bo.max_kl,
                      "adaptive, kl budget: max mean next-token KL (nats) of the whole policy, sealed, on the "
                      "calibration text (default 0.001)")
        ->check(CLI::Range(0.0, 1e9));
    bench->add_option("--max-attn-err", bo.max_attn_err,
                      "adaptive, attn budget: max relative error of the attention outputs (same queries) of the whole "
                      "policy, sealed, on the calibration text (default 0.03)")
        ->check(CLI::Range(0.0, 1e9));
    bench->add_option("--calibration", bo.calibration,
                      "adaptive, kl or attn budget: the text the budget is measured on: held-out (default: the seq_len window of "
                      "--text after the evaluated windows) or greedy (the model's own greedy text)")
        ->check(CLI::IsMember({"held-out", "greedy"}));
    bench->add_option("--max-err", bo.max_err, "adaptive, rms budget: max relative RMS error of a layer's V pages")
        ->check(CLI::Range(0.0, 1e9));
    bench->add_option("--max-err-k", bo.max_err_k,
                      "adaptive, rms budget: max relative RMS error of a layer's K pages (default 0.02 with the fast "
                      "set, 0.005 with dense)")
        ->check(CLI::Range(0.0, 1e9));
    bench->add_option("--impl", bo.impl, "scalar, avx2, avx512 or best");
    bench->callback([] { run_bench(bo); });

    static unsigned pages = 10000;
    static uint64_t seed = 1;
    auto *check = codec->add_subcommand("check", "Round trip + every SIMD path byte-identical to scalar");
    check->add_option("--pages", pages, "pages to check")->check(CLI::Range(1u, 1u << 30));
    check->add_option("--seed", seed, "random seed");
    static bool rtl = false;
    check->add_flag("--rtl", rtl, "also encode/decode N pages (edge cases + random, the RTL harness generator) in the FPGA RTL under Verilator and compare every byte with this reference");
    add_json(check, "one JSON object on stdout: the report (failures included) or the error");
    add_quiet(check);
    add_no_progress(check);
    check->callback([] {
        run_check(pages, seed);
        const bool report = g_opt.json && (g_exit == 0 || g_exit == 1);  // run_check left its report
        if (rtl && g_exit == 0) {
            run_rtl_check(pages, seed);
            if (report) {
                // Inside the report, not as a second object.
                std::string why = take_error();
                g_check_report["rtl"] = {{"passed", g_exit == 0}, {"error", why.empty() ? Json(nullptr) : Json(why)}};
            }
        }
        if (report) std::printf("%s\n", json_text(g_check_report).c_str());
    });

    static std::string out, vmodel;
    static uint64_t vseed = 1;
    auto *vec = codec->add_subcommand("vectors", "Write input/record/decoded triples for the RTL (docs/codec.md §12)");
    vec->add_option("--out", out, "output directory")->required();
    vec->add_option("--model", vmodel, "also write real K/V pages of this llama2.c checkpoint");
    vec->add_option("--seed", vseed, "random seed");
    add_json(vec);
    add_quiet(vec);
    vec->callback([] { run_vectors(out, vmodel, vseed); });
}

}  // namespace speckv_cli
