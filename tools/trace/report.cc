// SPDX-License-Identifier: Apache-2.0
// Output of a replay: a table for people, JSON and CSV for scripts, SVG charts.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sys/stat.h>

#include "trace.h"
#include "util/json.h"

namespace speckv_trace {

namespace {

std::string num(double v, int prec = 4) {
    if (!std::isfinite(v)) return "null";
    char b[64];
    std::snprintf(b, sizeof b, "%.*g", prec + 4, v);
    return b;
}


std::string pct(double v) {
    if (v < 0) return "-";
    char b[32];
    std::snprintf(b, sizeof b, "%.1f%%", 100 * v);
    return b;
}
std::string fix(double v, int p) {
    char b[32];
    std::snprintf(b, sizeof b, "%.*f", p, v);
    return b;
}

}  // namespace

void print_table(std::FILE *f, const std::vector<Result> &rs) {
    struct Row {
        const char *name;
        std::string (*get)(const Result &);
    };
    static const Row rows[] = {
        {"throughput (out tok/s)", [](const Result &r) { return fix(r.throughput_tps, 1); }},
        {"throughput (all tok/s)", [](const Result &r) { return fix(r.total_tps, 1); }},
        {"TTFT p50 (ms)", [](const Result &r) { return fix(r.ttft_p50_ms, 1); }},
        {"TTFT p99 (ms)", [](const Result &r) { return fix(r.ttft_p99_ms, 1); }},
        {"TPOT p50 (ms)", [](const Result &r) { return fix(r.tpot_p50_ms, 2); }},
        {"TPOT p99 (ms)", [](const Result &r) { return fix(r.tpot_p99_ms, 2); }},
        {"max batch", [](const Result &r) { return std::to_string(r.max_batch); }},
        {"mean batch", [](const Result &r) { return fix(r.mean_batch, 1); }},
        {"preemptions (swapped)", [](const Result &r) { return std::to_string(r.preemptions) + " (" + std::to_string(r.preempt_swaps) + ")"; }},
        {"prefix hit rate", [](const Result &r) { return pct(r.prefix_hit_rate); }},
        {"prefetch hit rate", [](const Result &r) { return pct(r.prefetch_hit_rate); }},
        {"precision", [](const Result &r) { return pct(r.precision); }},
        {"waste", [](const Result &r) { return pct(r.waste); }},
        {"late prefetches", [](const Result &r) { return pct(r.prefetch_late); }},
        {"latency hidden", [](const Result &r) { return pct(r.latency_hidden); }},
        {"link GB moved", [](const Result &r) { return fix(r.bytes_link / 1e9, 1); }},
        {"HBM GB read", [](const Result &r) { return fix(r.bytes_hbm / 1e9, 0); }},
        {"HBM KV occupancy", [](const Result &r) { return pct(r.occupancy_hbm); }},
        {"pool occupancy", [](const Result &r) { return pct(r.occupancy_tier); }},
        {"KV capacity GB (HBM+tier)", [](const Result &r) { return fix((r.gpu_kv_capacity + r.tier_capacity) / 1e9, 0); }},
        {"makespan (s)", [](const Result &r) { return fix(r.makespan_s, 1); }},
        {"requests", [](const Result &r) { return std::to_string(r.requests); }},
        {"pool lookups/hits", [](const Result &r) { return std::to_string(r.pool_lookups) + "/" + std::to_string(r.pool_lookup_hits); }},
        {"pool evictions", [](const Result &r) { return std::to_string(r.pool_evictions); }},
        {"lib L2 hits/sync reads", [](const Result &r) { return std::to_string(r.lib_l2_hits) + "/" + std::to_string(r.lib_sync_reads); }},
        {"lib prefetch used/wasted", [](const Result &r) { return std::to_string(r.lib_prefetch_used) + "/" + std::to_string(r.lib_prefetch_wasted); }},
        {"lib hit rate (measured)", [](const Result &r) { return pct(r.lib_hit_rate); }},
        {"lib precision (measured)", [](const Result &r) { return pct(r.lib_precision); }},
        {"lib waste (measured)", [](const Result &r) { return pct(r.lib_waste); }},
    };
    // Paced replays (--pace) add their wall-clock rows.
    static const Row paced_rows[] = {
        {"paced units (capped)", [](const Result &r) { return std::to_string(r.pace_units) + " (" + std::to_string(r.pace_capped) + ")"; }},
        {"pace budget / waited (s)", [](const Result &r) { return fix(r.pace_budget_s, 1) + "/" + fix(r.pace_wait_s, 1); }},
        {"replay wall (s)", [](const Result &r) { return fix(r.wall_s, 1); }},
        {"lib thread CPU (s)", [](const Result &r) { return fix(r.lib_thread_cpu_s, 1); }},
    };
    // cxl_pnm adds its near-memory rows ("-" for the other systems).
    static const Row pnm_rows[] = {
        {"decode-only tok/s", [](const Result &r) { return fix(r.decode_s > 0 ? r.decode_tokens / r.decode_s : 0, 2); }},
        {"PNM steps", [](const Result &r) { return r.system == "cxl_pnm" ? std::to_string(r.pnm_steps) : std::string("-"); }},
        {"PNM selected / moved GB",
         [](const Result &r) { return r.system == "cxl_pnm" ? fix(r.pnm_recall_bytes / 1e9, 1) + "/" + fix(r.pnm_moved_bytes / 1e9, 1) : std::string("-"); }},
        {"PNM attended GB", [](const Result &r) { return r.system == "cxl_pnm" ? fix(r.pnm_scan_bytes / 1e9, 1) : std::string("-"); }},
        {"PNM select / attend (s)",
         [](const Result &r) { return r.system == "cxl_pnm" ? fix(r.pnm_select_s, 1) + "/" + fix(r.pnm_attend_s, 1) : std::string("-"); }},
    };
    // Real-byte mode: the codec ratio the library measured on the payload pages.
    static const Row codec_rows[] = {
        {"codec ratio (measured)",
         [](const Result &r) { return r.lib_codec_stored_bytes ? fix(static_cast<double>(r.lib_codec_raw_bytes) / r.lib_codec_stored_bytes, 3) + "x" : std::string("-"); }},
    };
    bool has_pnm = std::any_of(rs.begin(), rs.end(), [](const Result &r) { return r.system == "cxl_pnm"; });
    bool coded = std::any_of(rs.begin(), rs.end(), [](const Result &r) { return r.lib_codec_pages > 0; });
    bool paced = std::any_of(rs.begin(), rs.end(), [](const Result &r) { return r.pace_units > 0; });
    const int w0 = 26, w = 14;
    std::fprintf(f, "%-*s", w0, "");
    for (auto &r : rs) std::fprintf(f, "%*s", w, r.system.c_str());
    std::fputc('\n', f);
    auto print_row = [&](const Row &row) {
        std::fprintf(f, "%-*s", w0, row.name);
        for (auto &r : rs) std::fprintf(f, "%*s", w, row.get(r).c_str());
        std::fputc('\n', f);
    };
    for (auto &row : rows) print_row(row);
    if (has_pnm)
        for (auto &row : pnm_rows) print_row(row);
    if (coded)
        for (auto &row : codec_rows) print_row(row);
    if (paced)
        for (auto &row : paced_rows) print_row(row);
}

std::string to_json(const std::vector<Result> &rs, const EngineOptions &o, const std::string &trace) {
    using speckv::Json;
    auto n = [](double v) { return speckv::json_number(v, 8); };  // as num(): 8 significant digits
    auto nopt = [&](double v) { return v < 0 ? Json(nullptr) : n(v); };
    const bool any_pnm = std::any_of(rs.begin(), rs.end(), [](const Result &r) { return r.system == "cxl_pnm"; });
    Json j = {{"trace", trace},
              {"model", o.model.name},
              {"gpu", o.gpu.name},
              {"gpus", rs.empty() ? o.gpus : rs[0].gpus},
              {"link", o.link.name},
              {"link_latency_ns", n(o.link.latency_s * 1e9)},
              {"seed", o.seed},
              {"compression", n(o.compression)},
              {"block_tokens", o.block_tokens},
              {"layer_groups", std::max<uint32_t>(o.layer_groups, 1)},
              {"admission", admission_name(o.admission)},
              {"preempt", preempt_name(o.preempt)}};
    j["prefetch_clock"] = o.virtual_clock() ? "virtual" : "wall";
    if (o.prefetch_depth > 0) j["prefetch_depth"] = o.prefetch_depth;
    if (o.pace > 0) {
        j["pace"] = n(o.pace);
        j["pace_wait"] = pace_wait_name(o.pace_wait);
        j["pace_max_unit_us"] = n(o.pace_max_unit_s * 1e6);
    }
    if (any_pnm) {
        j["pnm_budget"] = n(o.pnm_budget);
        j["pnm_recent"] = o.pnm_recent;
        j["pnm_page_tokens"] = o.pnm_page_tokens;
        j["pnm_gbps"] = n(o.pnm_bw / 1e9);
        j["pnm_devices"] = o.pnm_devices;
        j["pnm_select_x"] = n(o.pnm_select_x);
        j["pnm_churn"] = n(o.pnm_churn);
    }
    j["mode"] = o.real_bytes ? "real-bytes" : "metadata-only";
    if (o.real_bytes) j["payload"] = payload_name(o.payload);
    Json systems = Json::object();
    for (const Result &r : rs) {
        Json x = {{"throughput_tps", n(r.throughput_tps)},
                  {"total_tps", n(r.total_tps)},
                  {"ttft_p50_ms", n(r.ttft_p50_ms)},
                  {"ttft_p99_ms", n(r.ttft_p99_ms)},
                  {"tpot_p50_ms", n(r.tpot_p50_ms)},
                  {"tpot_p99_ms", n(r.tpot_p99_ms)},
                  {"max_batch", r.max_batch},
                  {"mean_batch", n(r.mean_batch)},
                  {"preemptions", r.preemptions},
                  {"preempt_swaps", r.preempt_swaps},
                  {"recompute_tokens", n(r.recompute_tokens)},
                  {"swap_bytes", n(r.swap_bytes)},
                  {"swap_s", n(r.swap_s)},
                  {"prefill_tokens", n(r.prefill_tokens)},
                  {"prefix_hit_rate", n(r.prefix_hit_rate)},
                  {"prefetch_hit_rate", nopt(r.prefetch_hit_rate)},
                  {"precision", nopt(r.precision)},
                  {"waste", nopt(r.waste)},
                  {"latency_hidden", nopt(r.latency_hidden)},
                  {"prefetch_late", nopt(r.prefetch_late)}};
        if (!r.depth_curve.empty()) {  // hit rate had the prefetcher run at depth k, this run's steps
            Json d = Json::object();
            for (const auto &[depth, rate] : r.depth_curve) d[std::to_string(depth)] = n(rate);
            x["hit_rate_by_depth"] = std::move(d);
        }
        x["bytes_link"] = n(r.bytes_link);
        x["bytes_hbm"] = n(r.bytes_hbm);
        x["occupancy_hbm"] = n(r.occupancy_hbm);
        x["occupancy_pool"] = n(r.occupancy_tier);
        x["kv_capacity_hbm_bytes"] = n(r.gpu_kv_capacity);
        x["kv_capacity_tier_bytes"] = n(r.tier_capacity);
        x["stall_s"] = n(r.stall_s);
        x["compute_s"] = n(r.compute_s);
        x["makespan_s"] = n(r.makespan_s);
        x["requests"] = r.requests;
        x["skipped"] = r.skipped;
        x["input_tokens"] = r.input_tokens;
        x["output_tokens"] = r.output_tokens;
        x["iterations"] = r.iterations;
        x["gpus"] = r.gpus;
        if (any_pnm)  // beside cxl_pnm, every system's decode-only rate (output without cxl_pnm unchanged)
            x["decode_tps"] = n(r.decode_s > 0 ? r.decode_tokens / r.decode_s : 0);
        if (r.system == "cxl_pnm") {  // near-memory path (docs/trace.md "PNM model"); other systems' output unchanged
            x["pnm_steps"] = r.pnm_steps;
            x["pnm_recall_bytes"] = n(r.pnm_recall_bytes);
            x["pnm_moved_bytes"] = n(r.pnm_moved_bytes);
            x["pnm_scan_bytes"] = n(r.pnm_scan_bytes);
            x["pnm_summary_bytes"] = n(r.pnm_summary_bytes);
            x["pnm_select_s"] = n(r.pnm_select_s);
            x["pnm_attend_s"] = n(r.pnm_attend_s);
            x["pnm_select_x"] = n(r.pnm_select_x);  // the cost used: measured, or the option
            x["pnm_select_x_source"] = r.pnm_select_x_measured ? "measured" : "option";
        }
        Json p = {{"allocs", r.pool_allocs},
                  {"lookups", r.pool_lookups},
                  {"lookup_hits", r.pool_lookup_hits},
                  {"evictions", r.pool_evictions},
                  {"prefetch_hints", r.pool_prefetch_hints},
                  {"reads", r.pool_reads},
                  {"blocks_peak", r.pool_blocks_peak},
                  {"sharing", r.sharing},
                  {"l1_hits", r.lib_l1_hits},
                  {"l2_hits", r.lib_l2_hits},
                  {"sync_reads", r.lib_sync_reads},
                  {"prefetch_pages", r.lib_prefetch_pages},
                  {"prefetch_used", r.lib_prefetch_used},
                  {"prefetch_wasted", r.lib_prefetch_wasted},
                  {"prefetch_ignored", r.lib_prefetch_ignored},
                  {"link_bytes", r.lib_link_bytes},
                  {"prefetch_depth", r.lib_prefetch_depth},
                  {"prefetch_beta_ppm", r.lib_beta_ppm}};
        if (o.real_bytes) {  // real-byte mode only: the library's codec on the payload pages
            p["codec_pages_encoded"] = r.lib_codec_pages;
            p["codec_raw_bytes"] = r.lib_codec_raw_bytes;
            p["codec_stored_bytes"] = r.lib_codec_stored_bytes;
            p["codec_pages_bypassed"] = r.lib_codec_bypassed;
            p["codec_ratio"] = r.lib_codec_stored_bytes
                                   ? n(static_cast<double>(r.lib_codec_raw_bytes) / r.lib_codec_stored_bytes)
                                   : Json(nullptr);
        }
        if (r.layer_groups > 1) {  // layer groups only (the default output is unchanged)
            p["prefetch_dropped"] = r.lib_prefetch_dropped;
            p["reads_foreign"] = r.pool_reads_foreign;
        }
        x["pool"] = std::move(p);
        // The library's measured rates, after every modelled number (they vary from run to run).
        x["lib_prefetch_hit_rate"] = nopt(r.lib_hit_rate);
        x["lib_precision"] = nopt(r.lib_precision);
        x["lib_waste"] = nopt(r.lib_waste);
        if (o.pace > 0) {  // wall clock: only in paced runs (the default output stays deterministic)
            x["wall_s"] = n(r.wall_s);
            x["pace_units"] = r.pace_units;
            x["pace_capped"] = r.pace_capped;
            x["pace_budget_s"] = n(r.pace_budget_s);
            x["pace_wait_s"] = n(r.pace_wait_s);
            x["lib_thread_cpu_s"] = n(r.lib_thread_cpu_s);
        }
        systems[r.system] = std::move(x);
    }
    j["systems"] = std::move(systems);
    // One line, ", " and ": " between items, as this report has always been.
    return speckv::json_text_spaced(j) + "\n";
}

std::string to_csv(const std::vector<Result> &rs) {
    std::string s = "system,throughput_tps,total_tps,ttft_p50_ms,ttft_p99_ms,tpot_p50_ms,tpot_p99_ms,max_batch,mean_batch,"
                    "prefix_hit_rate,prefetch_hit_rate,precision,waste,latency_hidden,bytes_link,occupancy_hbm,occupancy_pool,"
                    "makespan_s,requests,skipped,preemptions\n";
    auto o = [](double v) { return v < 0 ? std::string() : num(v); };
    for (auto &r : rs)
        s += r.system + "," + num(r.throughput_tps) + "," + num(r.total_tps) + "," + num(r.ttft_p50_ms) + "," + num(r.ttft_p99_ms) +
             "," + num(r.tpot_p50_ms) + "," + num(r.tpot_p99_ms) + "," + std::to_string(r.max_batch) + "," + num(r.mean_batch) +
             "," + num(r.prefix_hit_rate) + "," + o(r.prefetch_hit_rate) + "," + o(r.precision) + "," + o(r.waste) + "," +
             o(r.latency_hidden) + "," + num(r.bytes_link) + "," + num(r.occupancy_hbm) + "," + num(r.occupancy_tier) + "," +
             num(r.makespan_s) + "," + std::to_string(r.requests) + "," + std::to_string(r.skipped) + "," +
             std::to_string(r.preemptions) + "\n";
    return s;
}

// ------------------------------------------------------------------ SVG

namespace {

const char *kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#b07aa1", "#9c755f"};
constexpr double kW = 720, kH = 420, kL = 80, kR = 190, kT = 40, kB = 70;

struct Svg {
    std::string s;
    Svg(const std::string &title, const std::string &xl, const std::string &yl) {
        s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kW) + "\" height=\"" + num(kH) +
            "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
        text(kW / 2, 22, title, "middle", 15);
        text(kL + (kW - kL - kR) / 2, kH - 10, xl, "middle");
        s += "<text transform=\"translate(14," + num((kT + kH - kB) / 2) + ") rotate(-90)\" text-anchor=\"middle\">" + xml(yl) + "</text>\n";
        line(kL, kH - kB, kW - kR, kH - kB, "black");
        line(kL, kT, kL, kH - kB, "black");
    }
    static std::string xml(const std::string &t) {
        std::string o;
        for (char c : t) o += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
        return o;
    }
    void text(double x, double y, const std::string &t, const char *anchor = "start", int size = 12) {
        s += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + anchor + "\" font-size=\"" +
             std::to_string(size) + "\">" + xml(t) + "</text>\n";
    }
    void line(double x1, double y1, double x2, double y2, const char *c) {
        s += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) + "\" stroke=\"" + c + "\"/>\n";
    }
    void rect(double x, double y, double w, double h, const char *c) {
        s += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" + num(h) + "\" fill=\"" + c + "\"/>\n";
    }
    void yaxis(double ymax) {
        for (int i = 0; i <= 4; ++i) {
            double v = ymax * i / 4, y = kH - kB - (kH - kB - kT) * i / 4;
            line(kL - 4, y, kL, y, "black");
            char b[32];
            std::snprintf(b, sizeof b, "%.3g", v);
            text(kL - 6, y + 4, b, "end");
        }
    }
    void legend(int i, const std::string &name) {
        rect(kW - kR + 10, kT + 18 * i, 12, 12, kColors[i % 7]);
        text(kW - kR + 28, kT + 18 * i + 10, name);
    }
    std::string done() { return s + "</svg>\n"; }
};

double nice_max(double v) {
    if (v <= 0) return 1;
    double p = std::pow(10, std::floor(std::log10(v)));
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
        if (m * p >= v) return m * p;
    return 10 * p;
}

std::string bars(const std::string &title, const std::string &yl, const std::vector<std::string> &names,
                 const std::vector<std::vector<double>> &stacks, const std::vector<std::string> &parts) {
    Svg g(title, "", yl);
    double ymax = 0;
    for (auto &st : stacks) {
        double t = 0;
        for (double v : st) t += v;
        ymax = std::max(ymax, t);
    }
    ymax = nice_max(ymax);
    g.yaxis(ymax);
    double slot = (kW - kL - kR) / std::max<size_t>(1, names.size());
    for (size_t i = 0; i < names.size(); ++i) {
        double y = kH - kB;
        for (size_t j = 0; j < stacks[i].size(); ++j) {
            double h = (kH - kB - kT) * stacks[i][j] / ymax;
            g.rect(kL + slot * i + slot * 0.15, y - h, slot * 0.7, h, kColors[parts.size() > 1 ? j : i % 7]);
            y -= h;
        }
        // Labels turned 30 degrees: seven system names do not fit side by side.
        g.s += "<text transform=\"translate(" + num(kL + slot * (i + 0.5)) + "," + num(kH - kB + 12) +
               ") rotate(30)\" text-anchor=\"start\" font-size=\"10\">" + Svg::xml(names[i]) + "</text>\n";
    }
    for (size_t j = 0; parts.size() > 1 && j < parts.size(); ++j) g.legend(static_cast<int>(j), parts[j]);
    return g.done();
}

std::string lines(const std::string &title, const std::string &xl, const std::string &yl,
                  const std::vector<std::pair<std::string, std::vector<std::pair<uint32_t, double>>>> &series, double ymax_fixed,
                  const std::string &empty_why = "no data") {
    Svg g(title, xl, yl);
    if (series.empty()) {
        g.text(kL + (kW - kL - kR) / 2, (kT + kH - kB) / 2, empty_why, "middle");
        return g.done();
    }
    double xmax = 1, ymax = 0;
    for (auto &[n, pts] : series)
        for (auto &[x, y] : pts) xmax = std::max<double>(xmax, x), ymax = std::max(ymax, y);
    ymax = ymax_fixed > 0 ? ymax_fixed : nice_max(ymax);
    xmax = nice_max(xmax);
    g.yaxis(ymax);
    for (int i = 0; i <= 4; ++i) {
        double x = kL + (kW - kL - kR) * i / 4;
        char b[32];
        std::snprintf(b, sizeof b, "%.3g", xmax * i / 4);
        g.text(x, kH - kB + 16, b, "middle");
    }
    for (size_t k = 0; k < series.size(); ++k) {
        std::string pts;
        for (auto &[x, y] : series[k].second)
            pts += num(kL + (kW - kL - kR) * x / xmax) + "," + num(kH - kB - (kH - kB - kT) * y / ymax) + " ";
        g.s += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" + std::string(kColors[k % 7]) + "\" points=\"" + pts + "\"/>\n";
        g.legend(static_cast<int>(k), series[k].first);
    }
    return g.done();
}

bool put(const std::string &path, const std::string &text, std::string *err) {
    std::FILE *f = std::fopen(path.c_str(), "w");
    if (!f) return *err = path + ": " + std::strerror(errno), false;
    std::fwrite(text.data(), 1, text.size(), f);
    if (std::fclose(f) != 0) return *err = path + ": write failed", false;
    return true;
}

}  // namespace

bool write_plots(const std::string &dir, const std::vector<Result> &rs, std::string *err) {
    if (mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) return *err = dir + ": " + std::strerror(errno), false;
    std::vector<std::string> names;
    std::vector<std::vector<double>> tput, lat;
    for (auto &r : rs) {
        names.push_back(r.system);
        tput.push_back({r.throughput_tps});
        double it = r.iterations ? 1000.0 / static_cast<double>(r.iterations) : 0;
        lat.push_back({r.compute_s * it, r.stall_s * it});
    }
    std::vector<std::pair<std::string, std::vector<std::pair<uint32_t, double>>>> curve, depth;
    for (auto &r : rs) {
        // Thin the batch curve to buckets of 8 for a readable line.
        std::vector<std::pair<uint32_t, double>> pts;
        for (auto &p : r.batch_curve)
            if (pts.empty() || p.first >= pts.back().first + 8) pts.push_back(p);
        curve.push_back({r.system, pts});
        if (!r.depth_curve.empty()) depth.push_back({r.system, r.depth_curve});
    }
    return put(dir + "/throughput.svg",
               bars("End-to-end throughput (generated tokens / makespan)", "output tokens/s", names, tput, {"tokens/s"}), err) &&
           put(dir + "/latency_breakdown.svg",
               bars("Mean iteration time", "ms per iteration", names, lat, {"GPU compute/memory", "link stall"}), err) &&
           put(dir + "/throughput_vs_batch.svg",
               lines("Throughput vs batch (decode-only iterations)", "batch", "tokens/s", curve, 0), err) &&
           put(dir + "/hit_rate_vs_depth.svg", lines("Prefetch hit rate vs depth k", "depth k", "hit rate", depth, 1.0,
                                                       "empty: no speculative system read remote KV (every context fit HBM)"), err);
}

}  // namespace speckv_trace
