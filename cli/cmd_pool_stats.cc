// SPDX-License-Identifier: Apache-2.0
// `speckv pool stats URI [--json]`: the tier, prefetch and codec counters of
// every process attached to a pool, as each last published them into its
// attach record (at speckv_stats, every 100 ms from its prefetch thread, and
// at close), plus the totals of processes that have gone. Reads the pool
// without attaching. Definitions: docs/design.md §6, docs/tiers.md.
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include "commands.h"
#include "prometheus.h"
#include "pool/pool.h"
#include "pool/pool_format.h"
#include "util/json.h"

namespace speckv_cli {
namespace {

using namespace speckv::fmt;

double ratio(uint64_t a, uint64_t b) { return b ? double(a) / double(b) : 0.0; }

std::string when(uint64_t ns) {
    if (!ns) return "never";
    time_t t = time_t(ns / 1000000000ull);
    struct tm tm;
    gmtime_r(&t, &tm);
    char b[32];
    std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return b;
}

// The derived figures of one set of counters (docs/design.md §6), added to *o.
void json_counters(const uint64_t *c, bool gauges, speckv::Json *o) {
    auto r6 = [](uint64_t a, uint64_t b) { return speckv::json_fixed6(ratio(a, b)); };
    speckv::Json &j = *o;
    j["reads"] = c[kTcReads];
    j["l1_hits"] = c[kTcL1Hits];
    j["l1_misses"] = c[kTcL1Misses];
    j["l2_hits"] = c[kTcL2Hits];
    j["sync_reads"] = c[kTcSyncReads];
    j["prefetch_hints"] = c[kTcHints];
    j["prefetch_pages"] = c[kTcPfPages];
    j["prefetch_used"] = c[kTcPfUsed];
    j["prefetch_wasted"] = c[kTcPfWasted];
    j["waste_bytes"] = c[kTcPfWastedBytes];
    j["link_bytes"] = c[kTcLinkBytes];
    j["tlb_hits"] = c[kTcTlbHits];
    j["tlb_misses"] = c[kTcTlbMisses];
    j["codec_pages_encoded"] = c[kTcEncPages];
    j["codec_raw_bytes"] = c[kTcEncRaw];
    j["codec_stored_bytes"] = c[kTcEncStored];
    j["codec_pages_decoded"] = c[kTcDecPages];
    j["hit_rate"] = r6(c[kTcL2Hits], c[kTcL2Hits] + c[kTcSyncReads]);
    j["precision"] = r6(c[kTcPfUsed], c[kTcPfUsed] + c[kTcPfWasted]);
    j["tlb_hit_rate"] = r6(c[kTcTlbHits], c[kTcTlbHits] + c[kTcTlbMisses]);
    j["codec_ratio"] = r6(c[kTcEncRaw], c[kTcEncStored]);
    if (gauges) {
        j["beta"] = speckv::json_fixed6(double(c[kTcBetaDepth] >> 32) / 1e6);
        j["depth"] = unsigned(c[kTcBetaDepth] & 0xFFFFFFFFu);
    }
}

void text_row(const char *who, const uint64_t *c, bool gauges) {
    std::printf("%-22s %10" PRIu64 " %6.1f%% %10" PRIu64 " %9" PRIu64 " %6.1f%% %6.1f%% %12" PRIu64 " %12" PRIu64
                " %6.1f%% %8" PRIu64 " %6.2fx",
                who, c[kTcReads], 100 * ratio(c[kTcL1Hits], c[kTcL1Hits] + c[kTcL1Misses]), c[kTcL2Hits],
                c[kTcSyncReads], 100 * ratio(c[kTcL2Hits], c[kTcL2Hits] + c[kTcSyncReads]),
                100 * ratio(c[kTcPfUsed], c[kTcPfUsed] + c[kTcPfWasted]), c[kTcPfWastedBytes], c[kTcLinkBytes],
                100 * ratio(c[kTcTlbHits], c[kTcTlbHits] + c[kTcTlbMisses]), c[kTcEncPages],
                ratio(c[kTcEncRaw], c[kTcEncStored]));
    if (gauges)
        std::printf(" %5.2f %5u", double(c[kTcBetaDepth] >> 32) / 1e6, unsigned(c[kTcBetaDepth] & 0xFFFFFFFFu));
    std::printf("\n");
}

}  // namespace

void register_pool_stats_command(CLI::App &pool) {
    auto *st = pool.add_subcommand(
        "stats", "Tier, prefetch and codec counters of every attached process, as each last published them");
    static std::string uri;
    st->add_option("URI", uri, "file:/path or a plain path, file:NAME, dax:/dev/daxX.Y or numa:N?name=NAME")->required();
    add_json(st);
    static std::string format = "text";
    st->add_option("--format", format, "text, or prometheus (the text exposition format; names: README \"Metrics\")")
        ->check(CLI::IsMember({"text", "prometheus"}));
    st->callback([] {
        uri = pool_uri(uri);
        if (format == "prometheus") {
            std::vector<PoolError> errors;
            std::string text = prometheus_text({uri}, &errors);
            if (!errors.empty()) {
                error(errors.front().message, errors.front().code);
                return void(g_exit = 1);
            }
            std::fputs(text.c_str(), stdout);
            return;
        }
        const bool json = g_opt.json;
        std::unique_ptr<speckv::Pool> p;
        if (int rc = speckv::Pool::open_readonly_uri(uri, &p); rc != SPECKV_OK) {
            error(describe(rc), rc);
            return void(g_exit = 1);
        }
        speckv::PoolInfo i;
        p->info(&i);
        if (i.packed_damaged) g_exit = 1;  // told after the figures
        if (json && i.packed_damaged) {     // --json: one object, the error (figures incomplete)
            error(damaged_text(i.packed_damaged), SPECKV_ECORRUPT);
            return;
        }
        uint64_t total[kTierCounters] = {};
        for (uint32_t t = 0; t < kTcSummed; t++) total[t] = i.tier_detached[t];
        for (const auto &a : i.attach)
            for (uint32_t t = 0; t < kTcSummed; t++) total[t] += a.tier[t];
        if (json) {
            speckv::Json o = {{"pages_used", i.pages_used}, {"pages_total", i.n_pages}, {"coded_pages", i.pages_coded}};
            speckv::Json procs = speckv::Json::array();
            for (const auto &a : i.attach) {
                speckv::Json p = {{"pid", a.pid},
                                  {"attach_id", a.id},
                                  {"alive", a.alive},
                                  {"published", a.tier[kTcUpdatedNs] ? speckv::Json(when(a.tier[kTcUpdatedNs]))
                                                                     : speckv::Json(nullptr)}};
                json_counters(a.tier, true, &p);
                procs.push_back(std::move(p));
            }
            o["processes"] = std::move(procs);
            json_counters(i.tier_detached, false, &o["gone"]);
            json_counters(total, false, &o["total"]);
            std::printf("%s\n", speckv::json_text(o).c_str());
            return;
        }
        std::printf("pool %s: %" PRIu64 " of %" PRIu64 " pages used, %" PRIu64
                    " stored as codec records; %zu process%s attached\n",
                    uri.c_str(), i.pages_used, i.n_pages, i.pages_coded, i.attach.size(),
                    i.attach.size() == 1 ? "" : "es");
        std::printf("counters as each process last published them (speckv_stats, every 100 ms while it prefetches, close)\n\n");
        std::printf("%-22s %10s %7s %10s %9s %7s %7s %12s %12s %7s %8s %7s %5s %5s\n", "process", "reads", "L1 hit",
                    "L2 hits", "sync", "hit", "prec", "waste B", "link B", "TLB", "coded", "ratio", "beta", "depth");
        for (const auto &a : i.attach) {
            char who[64];
            std::snprintf(who, sizeof who, "pid %u%s", a.pid,
                          !a.alive ? " (dead)" : a.tier[kTcUpdatedNs] ? "" : " (not yet)");
            text_row(who, a.tier, true);
        }
        text_row("processes gone", i.tier_detached, false);
        text_row("total", total, false);
        std::printf("\nhit = L2 hits / (L2 hits + sync reads); prec = prefetched pages read / (read + evicted unread);\n"
                    "waste = bytes prefetched and never read; link = bytes moved L3 -> L2 (records for coded pages)\n");
        if (i.packed_damaged) error(damaged_text(i.packed_damaged), SPECKV_ECORRUPT);
    });
}

}  // namespace speckv_cli
