// SPDX-License-Identifier: Apache-2.0
// The pool's reports: Pool::stats_json (speckv_stats_json, `speckv pool stats --json`).
#include <cinttypes>
#include <cstdio>
#include <string>

#include "pool/pool.h"
#include "share/share_table.h"

namespace speckv {

std::string Pool::stats_json() const {
    speckv_pool_stats s;
    stats(&s);
    auto ratio = [](uint64_t a, uint64_t b) { return b ? double(a) / double(b) : 0.0; };
    char buf[3072];
    std::snprintf(buf, sizeof buf,
                  "{\"pool_bytes\":%" PRIu64 ",\"page_size\":%" PRIu64 ",\"pages_total\":%" PRIu64
                  ",\"pages_used\":%" PRIu64 ",\"blocks_live\":%" PRIu64 ",\"blocks_max\":%" PRIu64
                  ",\"allocs\":%" PRIu64 ",\"frees\":%" PRIu64 ",\"bytes_written\":%" PRIu64 ",\"bytes_read\":%" PRIu64
                  ",\"reads\":%" PRIu64 ",\"cache_hits\":%" PRIu64 ",\"cache_misses\":%" PRIu64
                  ",\"checksum_failures\":%" PRIu64 ",\"prefetch_hints\":%" PRIu64 ",\"attached\":%" PRIu64
                  ",\"blocks_published\":%" PRIu64 ",\"shared_bytes\":%" PRIu64 ",\"lookups\":%" PRIu64
                  ",\"lookup_hits\":%" PRIu64 ",\"dedup_bytes\":%" PRIu64 ",\"evictions\":%" PRIu64
                  ",\"reclaimed_blocks\":%" PRIu64 ",\"l2_hits\":%" PRIu64 ",\"sync_reads\":%" PRIu64
                  ",\"prefetch_pages\":%" PRIu64 ",\"prefetch_used\":%" PRIu64 ",\"prefetch_wasted\":%" PRIu64
                  ",\"prefetch_wasted_bytes\":%" PRIu64 ",\"prefetch_ignored\":%" PRIu64 ",\"prefetch_dropped\":%" PRIu64
                  ",\"link_bytes\":%" PRIu64 ",\"tlb_hits\":%" PRIu64 ",\"tlb_misses\":%" PRIu64
                  ",\"prefetch_beta\":%.6f,\"prefetch_depth\":%u,\"hit_rate\":%.6f,\"precision\":%.6f"
                  ",\"tlb_hit_rate\":%.6f,\"codec_pages_encoded\":%" PRIu64 ",\"codec_raw_bytes\":%" PRIu64
                  ",\"codec_stored_bytes\":%" PRIu64 ",\"codec_pages_bypassed\":%" PRIu64
                  ",\"codec_pages_decoded\":%" PRIu64 ",\"codec_ratio\":%.6f,\"summaries_written\":%" PRIu64
                  ",\"select_calls\":%" PRIu64 ",\"select_entered\":%" PRIu64 ",\"select_churn\":%.6f"
                  ",\"attend_calls\":%" PRIu64 ",\"l4_blocks\":%" PRIu64 ",\"l4_bytes\":%" PRIu64
                  ",\"l4_demotions\":%" PRIu64 ",\"l4_promotions\":%" PRIu64 ",\"l4_demote_failures\":%" PRIu64
                  ",\"l4_holder\":%s}",
                  s.pool_bytes, s.page_size, s.pages_total, s.pages_used, s.blocks_live, s.blocks_max, s.allocs, s.frees,
                  s.bytes_written, s.bytes_read, s.reads, s.cache_hits, s.cache_misses, s.checksum_failures,
                  s.prefetch_hints, s.attached, s.blocks_published, s.shared_bytes, s.lookups, s.lookup_hits,
                  s.dedup_bytes, s.evictions, s.reclaimed_blocks, s.l2_hits, s.sync_reads, s.prefetch_pages,
                  s.prefetch_used, s.prefetch_wasted, s.prefetch_wasted_bytes, s.prefetch_ignored, s.prefetch_dropped,
                  s.link_bytes, s.tlb_hits, s.tlb_misses, s.prefetch_beta_ppm / 1e6, s.prefetch_depth,
                  ratio(s.l2_hits, s.l2_hits + s.sync_reads), ratio(s.prefetch_used, s.prefetch_used + s.prefetch_wasted),
                  ratio(s.tlb_hits, s.tlb_hits + s.tlb_misses), s.codec_pages_encoded, s.codec_raw_bytes,
                  s.codec_stored_bytes, s.codec_pages_bypassed, s.codec_pages_decoded,
                  ratio(s.codec_raw_bytes, s.codec_stored_bytes), total(kSummaries), total(kSelCalls),
                  total(kSelEntered), ratio(total(kSelEntered), total(kSelCalls)), total(kAttendCalls), s.l4_blocks,
                  s.l4_bytes, s.l4_demotions, s.l4_promotions, s.l4_demote_failures, cold_ ? "true" : "false");
    // Placement (docs/devices.md): numbers only, like every other key here.
    std::string out = buf;
    out.pop_back();  // the closing brace
    // Layer-aware placement: blocks allocated after an earlier block of their
    // (request, layer), and how many of them went right after it.
    out += ",\"unit_followers\":" + std::to_string(total(kUnitFollowers)) +
           ",\"unit_contiguous\":" + std::to_string(total(kUnitContiguous));
    // Prefetch hints and planned units the reader had already moved past when
    // the prefetch thread got to them, and units cut short (docs/tiers.md "Stale hints").
    out += ",\"prefetch_hints_stale\":" + std::to_string(total(kPfHintsStale)) +
           ",\"prefetch_units_stale\":" + std::to_string(total(kPfUnitsStale)) +
           ",\"prefetch_units_cut\":" + std::to_string(total(kPfUnitsCut));
    // Packed blocks (docs/pool-format.md "Packed blocks"), this process's:
    // blocks packed, pool pages they gave back, packings skipped, unpackings.
    out += ",\"codec_blocks_packed\":" + std::to_string(total(kPacks)) +
           ",\"codec_pages_saved\":" + std::to_string(total(kPackSaved)) +
           ",\"codec_packs_skipped\":" + std::to_string(total(kPackSkipped)) +
           ",\"codec_blocks_unpacked\":" + std::to_string(total(kUnpacks));
    // Blocks the L4 holder brought back above T_h with no access asking for them.
    out += ",\"l4_promotions_ahead\":" + std::to_string(total(kL4Ahead));
    // Blocks demoted for an allocation with the pool lock released during the L4 write.
    out += ",\"l4_demotions_offlock\":" + std::to_string(total(kL4Offlock));
    // Requests of processes without the L4 tier that its holder answered OK (pool-wide, ever).
    out += ",\"l4_remote_requests\":" + std::to_string(sh()->cold_remote.load(std::memory_order_relaxed));
    out += ",\"placement_latency_ns\":" + std::to_string(placement_.latency_ns) +
           ",\"placement_bandwidth\":" + std::to_string(placement_.bandwidth) +
           ",\"placement_distance\":" + std::to_string(placement_.distance);
    // codec.mode = adaptive: the preset id chosen per layer and K/V, as
    // codec_mode_l<layer>_<k|v> (flat numbers, like every key here).
    codec_.append_json(&out);
    return out + "}";
}

}  // namespace speckv
