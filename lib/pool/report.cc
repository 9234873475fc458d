// SPDX-License-Identifier: Apache-2.0
// The pool's reports: Pool::stats_json (speckv_stats_json, `speckv pool stats --json`).
#include <string>

#include "events/publisher.h"
#include "pool/pool.h"
#include "share/share_table.h"
#include "util/json.h"

namespace speckv {

std::string Pool::stats_json() const {
    speckv_pool_stats s;
    stats(&s);
    // Ratios to 6 decimals, as the reports have always printed them.
    auto ratio = [](uint64_t a, uint64_t b) { return json_fixed6(b ? double(a) / double(b) : 0.0); };
    // Flat: every value a number (or l4_holder a boolean); the keys' order is
    // the order they were added in over the releases (docs/cli.md).
    Json j = {
        {"pool_bytes", s.pool_bytes},
        {"page_size", s.page_size},
        {"pages_total", s.pages_total},
        {"pages_used", s.pages_used},
        {"blocks_live", s.blocks_live},
        {"blocks_max", s.blocks_max},
        {"allocs", s.allocs},
        {"frees", s.frees},
        {"bytes_written", s.bytes_written},
        {"bytes_read", s.bytes_read},
        {"reads", s.reads},
        {"cache_hits", s.cache_hits},
        {"cache_misses", s.cache_misses},
        {"checksum_failures", s.checksum_failures},
        {"prefetch_hints", s.prefetch_hints},
        {"attached", s.attached},
        {"blocks_published", s.blocks_published},
        {"shared_bytes", s.shared_bytes},
        {"lookups", s.lookups},
        {"lookup_hits", s.lookup_hits},
        {"dedup_bytes", s.dedup_bytes},
        {"evictions", s.evictions},
        {"reclaimed_blocks", s.reclaimed_blocks},
        {"l2_hits", s.l2_hits},
        {"sync_reads", s.sync_reads},
        {"prefetch_pages", s.prefetch_pages},
        {"prefetch_used", s.prefetch_used},
        {"prefetch_wasted", s.prefetch_wasted},
        {"prefetch_wasted_bytes", s.prefetch_wasted_bytes},
        {"prefetch_ignored", s.prefetch_ignored},
        {"prefetch_dropped", s.prefetch_dropped},
        {"link_bytes", s.link_bytes},
        {"tlb_hits", s.tlb_hits},
        {"tlb_misses", s.tlb_misses},
        {"prefetch_beta", json_fixed6(s.prefetch_beta_ppm / 1e6)},
        {"prefetch_depth", s.prefetch_depth},
        {"hit_rate", ratio(s.l2_hits, s.l2_hits + s.sync_reads)},
        {"precision", ratio(s.prefetch_used, s.prefetch_used + s.prefetch_wasted)},
        {"tlb_hit_rate", ratio(s.tlb_hits, s.tlb_hits + s.tlb_misses)},
        {"codec_pages_encoded", s.codec_pages_encoded},
        {"codec_raw_bytes", s.codec_raw_bytes},
        {"codec_stored_bytes", s.codec_stored_bytes},
        {"codec_pages_bypassed", s.codec_pages_bypassed},
        {"codec_pages_decoded", s.codec_pages_decoded},
        {"codec_ratio", ratio(s.codec_raw_bytes, s.codec_stored_bytes)},
        {"summaries_written", total(kSummaries)},
        {"select_calls", total(kSelCalls)},
        {"select_entered", total(kSelEntered)},
        {"select_churn", ratio(total(kSelEntered), total(kSelCalls))},
        {"attend_calls", total(kAttendCalls)},
        {"l4_blocks", s.l4_blocks},
        {"l4_bytes", s.l4_bytes},
        {"l4_demotions", s.l4_demotions},
        {"l4_promotions", s.l4_promotions},
        {"l4_demote_failures", s.l4_demote_failures},
        {"l4_holder", cold_ != nullptr},
        // Layer-aware placement: blocks allocated after an earlier block of their
        // (request, layer), and how many of them went right after it.
        {"unit_followers", total(kUnitFollowers)},
        {"unit_contiguous", total(kUnitContiguous)},
        // Prefetch hints and planned units the reader had already moved past when
        // the prefetch thread got to them, and units cut short (docs/tiers.md "Stale hints").
        {"prefetch_hints_stale", total(kPfHintsStale)},
        {"prefetch_units_stale", total(kPfUnitsStale)},
        {"prefetch_units_cut", total(kPfUnitsCut)},
        // Packed blocks (docs/pool-format.md "Packed blocks"), this process's:
        // blocks packed, pool pages they gave back, packings skipped, unpackings.
        {"codec_blocks_packed", total(kPacks)},
        {"codec_pages_saved", total(kPackSaved)},
        {"codec_packs_skipped", total(kPackSkipped)},
        {"codec_blocks_unpacked", total(kUnpacks)},
        // Blocks the L4 holder brought back above T_h with no access asking for them.
        {"l4_promotions_ahead", total(kL4Ahead)},
        // Blocks demoted for an allocation with the pool lock released during the L4 write.
        {"l4_demotions_offlock", total(kL4Offlock)},
        // Requests of processes without the L4 tier that its holder answered OK (pool-wide, ever).
        {"l4_remote_requests", sh()->cold_remote.load(std::memory_order_relaxed)},
        // Placement (docs/devices.md): numbers only, like every other key here.
        {"placement_latency_ns", placement_.latency_ns},
        {"placement_bandwidth", placement_.bandwidth},
        {"placement_distance", placement_.distance},
    };
    if (events_) {  // KV events (docs/events.md): sent, batches, dropped, replays
        const events::Counters c = events_->counters();
        j["events_sent"] = c.events;
        j["event_batches"] = c.batches;
        j["events_dropped"] = c.dropped;
        j["event_replays"] = c.replays;
    }
    // codec.mode = adaptive: the preset id chosen per layer and K/V, as
    // codec_mode_l<layer>_<k|v> (flat numbers, like every key here).
    codec_.add_json(&j);
    return json_text(j);
}

}  // namespace speckv
