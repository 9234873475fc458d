// SPDX-License-Identifier: Apache-2.0
// The Prometheus names of speckv's counters: the one table below, used by
// `speckv pool stats --format prometheus` and `speckv exporter`. Conventions
// (prometheus.io/docs/practices/naming): the speckv_ prefix, _total on
// counters, base units (_bytes, _seconds), the pool as a label.
// Definitions of the counters: docs/design.md §6, docs/tiers.md, include/speckv.h.
#include "prometheus.h"

#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <memory>

#include "commands.h"
#include "pool/pool.h"
#include "pool/pool_format.h"

namespace speckv_cli {
namespace {

using speckv::AttachInfo;
using speckv::PoolInfo;
using namespace speckv::fmt;

// One set of process counters: an attach record, or the totals of the gone.
struct Proc {
    const AttachInfo *a;  // null: processes gone
    const uint64_t *tier;
};

enum Kind { kCounter, kGauge };

// A metric: pool-wide (pool != null) or per process (proc != null, or
// tier_index for a summed tier counter). `attached_only`: no sample for the
// processes gone (a gauge of a live process means nothing summed).
struct Metric {
    const char *name;
    Kind kind;
    const char *help;
    uint64_t (*pool)(const PoolInfo &) = nullptr;
    int tier_index = -1;
    double (*proc)(const Proc &) = nullptr;
    bool attached_only = false;
};

#define POOL(expr) [](const PoolInfo &i) -> uint64_t { return (expr); }

const Metric kMetrics[] = {
    // Pool-wide, from the pool's header and tables.
    {"speckv_pool_size_bytes", kGauge, "Size of the pool mapping.", POOL(i.pool_bytes)},
    {"speckv_pool_page_size_bytes", kGauge, "Page size of the pool.", POOL(i.page_size)},
    {"speckv_pool_pages", kGauge, "Data pages in the pool.", POOL(i.n_pages)},
    {"speckv_pool_pages_used", kGauge, "Data pages in use.", POOL(i.pages_used)},
    {"speckv_pool_pages_coded", kGauge, "Pages stored as codec records.", POOL(i.pages_coded)},
    {"speckv_pool_pages_quarantined", kGauge, "Pages quarantined after a failed check.", POOL(i.pages_quarantined)},
    {"speckv_pool_blocks", kGauge, "Live blocks in the pool.", POOL(i.blocks_live)},
    {"speckv_pool_blocks_max", kGauge, "Block slots in the pool.", POOL(i.max_blocks)},
    {"speckv_pool_blocks_packed", kGauge, "Blocks stored packed.", POOL(i.blocks_packed)},
    {"speckv_pool_attached_processes", kGauge, "Processes attached to the pool now.", POOL(i.attached)},
    {"speckv_pool_blocks_published", kGauge, "Published (shared) blocks in the pool now.", POOL(i.blocks_published)},
    {"speckv_pool_shared_bytes", kGauge, "Bytes of the published blocks.", POOL(i.shared_bytes)},
    {"speckv_pool_lookups_total", kCounter, "Lookups of published blocks, by any process.", POOL(i.lookups)},
    {"speckv_pool_lookup_hits_total", kCounter, "Lookups that found a block.", POOL(i.lookup_hits)},
    {"speckv_pool_dedup_bytes_total", kCounter, "Bytes not stored again thanks to sharing.", POOL(i.dedup_bytes)},
    {"speckv_pool_evictions_total", kCounter, "Unreferenced published blocks evicted for room.", POOL(i.evictions)},
    {"speckv_pool_reclaimed_blocks_total", kCounter, "Blocks of dead processes reclaimed.", POOL(i.reclaimed)},
    {"speckv_pool_recoveries_total", kCounter, "Recoveries run on the pool.", POOL(i.recoveries)},
    {"speckv_l4_blocks", kGauge, "Blocks in the L4 cold tier now.", POOL(i.cold_blocks)},
    {"speckv_l4_bytes", kGauge, "Bytes of the blocks in the L4 cold tier.", POOL(i.cold_bytes)},
    {"speckv_l4_demotions_total", kCounter, "Blocks moved from the pool (L3) to L4.", POOL(i.demotions)},
    {"speckv_l4_promotions_total", kCounter, "Blocks moved back from L4 to the pool.", POOL(i.promotions)},
    {"speckv_l4_demote_failures_total", kCounter, "Demotions that failed (the block stayed in the pool).",
     POOL(i.demote_failures)},
    // Per process, as each last published them into its attach record.
    {"speckv_reads_total", kCounter, "Successful reads (speckv_access calls).", nullptr, kTcReads},
    {"speckv_l1_hits_total", kCounter, "Pages served from the verified-page cache (L1).", nullptr, kTcL1Hits},
    {"speckv_l1_misses_total", kCounter, "Pages not in L1.", nullptr, kTcL1Misses},
    {"speckv_l2_hits_total", kCounter, "Pages served from the prefetch buffer (L2).", nullptr, kTcL2Hits},
    {"speckv_sync_reads_total", kCounter, "Pages read synchronously from the pool (in neither L1 nor L2).", nullptr,
     kTcSyncReads},
    {"speckv_prefetch_hints_total", kCounter, "Prefetch hints given.", nullptr, kTcHints},
    {"speckv_prefetch_pages_total", kCounter, "Pages the prefetcher brought into L2.", nullptr, kTcPfPages},
    {"speckv_prefetch_used_pages_total", kCounter, "Prefetched pages read before they left L2.", nullptr, kTcPfUsed},
    {"speckv_prefetch_wasted_pages_total", kCounter, "Prefetched pages that left L2 unread.", nullptr, kTcPfWasted},
    {"speckv_prefetch_wasted_bytes_total", kCounter, "Bytes prefetched and never read.", nullptr, kTcPfWastedBytes},
    {"speckv_link_bytes_total", kCounter, "Bytes moved from the pool (L3) to L2 by the prefetcher.", nullptr,
     kTcLinkBytes},
    {"speckv_tlb_hits_total", kCounter, "Translation cache hits.", nullptr, kTcTlbHits},
    {"speckv_tlb_misses_total", kCounter, "Translation cache misses.", nullptr, kTcTlbMisses},
    {"speckv_codec_pages_encoded_total", kCounter, "Pages stored as codec records.", nullptr, kTcEncPages},
    {"speckv_codec_raw_bytes_total", kCounter, "Bytes in clear of the encoded pages.", nullptr, kTcEncRaw},
    {"speckv_codec_stored_bytes_total", kCounter, "Record bytes of the encoded pages.", nullptr, kTcEncStored},
    {"speckv_codec_pages_decoded_total", kCounter, "Coded pages decoded on a read, prefetch or pin.", nullptr,
     kTcDecPages},
    {"speckv_prefetch_beta", kGauge, "Prefetch aggressiveness beta (0 to 1) of the last plan.", nullptr, -1,
     [](const Proc &p) { return double(p.tier[kTcBetaDepth] >> 32) / 1e6; }, true},
    {"speckv_prefetch_depth", kGauge, "Prefetch depth (units ahead) of the last plan.", nullptr, -1,
     [](const Proc &p) { return double(p.tier[kTcBetaDepth] & 0xFFFFFFFFu); }, true},
    {"speckv_process_alive", kGauge, "1 if the attached process is alive, 0 if it died attached.", nullptr, -1,
     [](const Proc &p) { return p.a->alive ? 1.0 : 0.0; }, true},
    {"speckv_process_published_timestamp_seconds", kGauge,
     "When the process last published its counters (Unix time; 0 = not yet).", nullptr, -1,
     [](const Proc &p) { return double(p.tier[kTcUpdatedNs]) / 1e9; }, true},
};

#undef POOL

// A label value: backslash, double quote and newline escaped.
std::string label(const std::string &v) {
    std::string o;
    for (char c : v) {
        if (c == '\\') o += "\\\\";
        else if (c == '"') o += "\\\"";
        else if (c == '\n') o += "\\n";
        else o += c;
    }
    return o;
}

void put(std::string *o, const char *name, const std::string &labels, uint64_t v) {
    char b[32];
    auto r = std::to_chars(b, b + sizeof b, v);
    *o += name;
    *o += '{' + labels + "} ";
    o->append(b, r.ptr);
    *o += '\n';
}

void put(std::string *o, const char *name, const std::string &labels, double v) {
    char b[64];
    auto r = std::to_chars(b, b + sizeof b, v);  // shortest round-trip form
    *o += name;
    *o += '{' + labels + "} ";
    if (std::isnan(v)) *o += "NaN";
    else o->append(b, r.ptr);
    *o += '\n';
}

struct Read {
    std::string uri;
    bool up = false;
    PoolInfo info;
};

}  // namespace

std::string prometheus_text(const std::vector<std::string> &uris, std::vector<PoolError> *errors) {
    std::vector<Read> pools(uris.size());
    for (size_t k = 0; k < uris.size(); k++) {
        pools[k].uri = uris[k];
        std::unique_ptr<speckv::Pool> p;
        int rc = speckv::Pool::open_readonly_uri(uris[k], &p);
        if (rc != SPECKV_OK) {
            if (errors) errors->push_back({rc, uris[k] + ": " + describe(rc)});
            continue;
        }
        p->info(&pools[k].info);
        pools[k].up = true;
    }
    std::string o;
    o += "# HELP speckv_pool_up 1 if the pool could be read, 0 if not.\n# TYPE speckv_pool_up gauge\n";
    for (const auto &r : pools) put(&o, "speckv_pool_up", "pool=\"" + label(r.uri) + '"', uint64_t(r.up));
    for (const Metric &m : kMetrics) {
        o += std::string("# HELP ") + m.name + ' ' + m.help + "\n# TYPE " + m.name +
             (m.kind == kCounter ? " counter\n" : " gauge\n");
        for (const auto &r : pools) {
            if (!r.up) continue;
            const std::string pool = "pool=\"" + label(r.uri) + '"';
            if (m.pool) {
                put(&o, m.name, pool, m.pool(r.info));
                continue;
            }
            std::vector<Proc> procs;
            for (const auto &a : r.info.attach) procs.push_back({&a, a.tier});
            if (!m.attached_only) procs.push_back({nullptr, r.info.tier_detached});
            for (const Proc &p : procs) {
                std::string l = pool;
                if (p.a) l += ",process=\"" + std::to_string(p.a->pid) + "\",attach_id=\"" + std::to_string(p.a->id) + '"';
                else l += ",process=\"gone\"";
                if (m.tier_index >= 0) put(&o, m.name, l, p.tier[m.tier_index]);
                else put(&o, m.name, l, m.proc(p));
            }
        }
    }
    return o;
}

}  // namespace speckv_cli
