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

// The derived figures of one set of counters (docs/design.md §6).
void json_counters(const uint64_t *c, bool gauges) {
    std::printf("\"reads\":%" PRIu64 ",\"l1_hits\":%" PRIu64 ",\"l1_misses\":%" PRIu64 ",\"l2_hits\":%" PRIu64
                ",\"sync_reads\":%" PRIu64 ",\"prefetch_hints\":%" PRIu64 ",\"prefetch_pages\":%" PRIu64
                ",\"prefetch_used\":%" PRIu64 ",\"prefetch_wasted\":%" PRIu64 ",\"waste_bytes\":%" PRIu64
                ",\"link_bytes\":%" PRIu64 ",\"tlb_hits\":%" PRIu64 ",\"tlb_misses\":%" PRIu64
                ",\"codec_pages_encoded\":%" PRIu64 ",\"codec_raw_bytes\":%" PRIu64 ",\"codec_stored_bytes\":%" PRIu64
                ",\"codec_pages_decoded\":%" PRIu64 ",\"hit_rate\":%.6f,\"precision\":%.6f,\"tlb_hit_rate\":%.6f"
                ",\"codec_ratio\":%.6f",
                c[kTcReads], c[kTcL1Hits], c[kTcL1Misses], c[kTcL2Hits], c[kTcSyncReads], c[kTcHints], c[kTcPfPages],
                c[kTcPfUsed], c[kTcPfWasted], c[kTcPfWastedBytes], c[kTcLinkBytes], c[kTcTlbHits], c[kTcTlbMisses],
                c[kTcEncPages], c[kTcEncRaw], c[kTcEncStored], c[kTcDecPages],
                ratio(c[kTcL2Hits], c[kTcL2Hits] + c[kTcSyncReads]),
                ratio(c[kTcPfUsed], c[kTcPfUsed] + c[kTcPfWasted]), ratio(c[kTcTlbHits], c[kTcTlbHits] + c[kTcTlbMisses]),
                ratio(c[kTcEncRaw], c[kTcEncStored]));
    if (gauges)
        std::printf(",\"beta\":%.6f,\"depth\":%u", double(c[kTcBetaDepth] >> 32) / 1e6,
                    unsigned(c[kTcBetaDepth] & 0xFFFFFFFFu));
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
            std::printf("{\"pages_used\":%" PRIu64 ",\"pages_total\":%" PRIu64 ",\"coded_pages\":%" PRIu64
                        ",\"processes\":[",
                        i.pages_used, i.n_pages, i.pages_coded);
            for (size_t k = 0; k < i.attach.size(); k++) {
                const auto &a = i.attach[k];
                std::printf("%s{\"pid\":%u,\"attach_id\":%" PRIu64 ",\"alive\":%s,\"published\":", k ? "," : "", a.pid,
                            a.id, a.alive ? "true" : "false");
                if (a.tier[kTcUpdatedNs]) std::printf("\"%s\",", when(a.tier[kTcUpdatedNs]).c_str());
                else std::printf("null,");
                json_counters(a.tier, true);
                std::printf("}");
            }
            std::printf("],\"gone\":{");
            json_counters(i.tier_detached, false);
            std::printf("},\"total\":{");
            json_counters(total, false);
            std::printf("}}\n");
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
