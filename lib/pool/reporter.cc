// SPDX-License-Identifier: Apache-2.0
// PoolReporter (pool/reporter.h): block info, block list, this process's
// counters and the pool's (stats, stats JSON), `speckv pool info`.
#include "pool/reporter.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "codec/codec.h"
#include "events/publisher.h"
#include "pool/pool_internal.h"
#include "prefetch/prefetch_ctl.h"
#include "tiers/tier_buffers.h"
#include "pool/tlb.h"
#include "util/json.h"
#include "util/seqlock.h"
#include "util/self_pid.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;
using enum PoolCounters::Counter;

int PoolReporter::block_info(uint64_t handle, speckv_block_meta *out) const {
    BlockView v{};
    if (int rc = s_.resolver->resolve(handle, &v); rc != SPECKV_OK) return rc;
    const BlockRecord *r = v.rec;
    speckv_block_meta m;
    std::memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    m.bytes = v.bytes;
    m.dtype = v.dtype;
    // The hint fields are copied optimistically: if the slot was freed and
    // reused meanwhile, the handle check below throws the copy away.
    SEQLOCK_IGNORE_BEGIN();
    m.flags = r->hint_flags;
    m.tenant = r->tenant;
    m.request = r->request;
    m.layer = r->layer;
    m.token_pos = r->token_pos;
    m.token_count = r->token_count;
    std::memcpy(m.content_hash, r->content_hash, sizeof m.content_hash);
    SEQLOCK_IGNORE_END();
    std::atomic_thread_fence(std::memory_order_acquire);
    if (r->handle.load(std::memory_order_relaxed) != handle)
        return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " was freed meanwhile", handle);
    *out = m;
    return SPECKV_OK;
}

// ------------------------------------------------- stats, inspect, check

void PoolReporter::stats_local(speckv_pool_stats *st) const {
    const Superblock &s = sb();
    const SharedHeader *h = sh();
    speckv_pool_stats v{};
    v.struct_size = sizeof v;
    v.pool_bytes = s.pool_bytes;
    v.page_size = s.page_size;
    v.pages_total = s.n_pages;
    v.pages_used = h->pages_used.load(std::memory_order_relaxed);
    v.blocks_live = h->blocks_live.load(std::memory_order_relaxed);
    v.blocks_max = s.max_blocks;
    v.allocs = total(kAllocs);
    v.frees = total(kFrees);
    v.bytes_written = total(kWBytes);
    v.bytes_read = total(kRBytes);
    v.reads = total(kReads);
    v.cache_hits = total(kHits);
    v.cache_misses = total(kMisses);
    v.checksum_failures = total(kCrcFail);
    v.prefetch_hints = total(kPrefetch);
    v.attached = 0;
    v.lookups = h->lookups.load(std::memory_order_relaxed);
    v.lookup_hits = h->lookup_hits.load(std::memory_order_relaxed);
    v.dedup_bytes = h->dedup_bytes.load(std::memory_order_relaxed);
    for (const auto &a : h->attach) {
        if (!a.pid.load(std::memory_order_relaxed)) continue;
        v.attached++;
        v.lookups += a.lookups.load(std::memory_order_relaxed);
        v.lookup_hits += a.lookup_hits.load(std::memory_order_relaxed);
        v.dedup_bytes += a.dedup_bytes.load(std::memory_order_relaxed);
    }
    v.blocks_published = h->blocks_published.load(std::memory_order_relaxed);
    v.shared_bytes = h->shared_bytes.load(std::memory_order_relaxed);
    v.evictions = h->evictions.load(std::memory_order_relaxed);
    v.reclaimed_blocks = h->reclaimed.load(std::memory_order_relaxed);
    v.l2_hits = total(kL2Hits);
    v.sync_reads = total(kSyncReads);
    v.prefetch_ignored = total(kPfIgnored);
    v.prefetch_dropped = total(kPfDropped);
    v.link_bytes = total(kLinkBytes);
    v.codec_pages_encoded = total(kEncPages);
    v.codec_raw_bytes = total(kEncRaw);
    v.codec_stored_bytes = total(kEncStored);
    v.codec_pages_bypassed = total(kEncBypass);
    v.codec_pages_decoded = total(kDecPages);
    v.l4_blocks = h->cold_blocks.load(std::memory_order_relaxed);
    v.l4_bytes = h->cold_bytes.load(std::memory_order_relaxed);
    v.l4_demotions = h->demotions.load(std::memory_order_relaxed);
    v.l4_promotions = h->promotions.load(std::memory_order_relaxed);
    v.l4_demote_failures = h->demote_failures.load(std::memory_order_relaxed);
    v.prefetch_pages = total(kPfPages);
    if (s_.l2) {
        BufferStats b = s_.l2->stats();
        v.prefetch_used = b.used;
        v.prefetch_wasted = b.wasted;
        v.prefetch_wasted_bytes = b.bytes_wasted;
    }
    if (s_.tlb) {
        TlbStats t = s_.tlb->stats();
        v.tlb_hits = t.hits;
        v.tlb_misses = t.misses;
    }
    if (const PrefetchController *c = s_.ctl) {
        v.prefetch_beta_ppm = static_cast<uint32_t>(c->beta() * 1e6 + 0.5);
        v.prefetch_depth = static_cast<uint32_t>(c->last_mean_depth() + 0.5);
    } else {
        v.prefetch_beta_ppm = static_cast<uint32_t>(s_.beta_max * 1e6 + 0.5);
    }
    *st = v;
}

void PoolReporter::stats(speckv_pool_stats *st) const {
    stats_local(st);
    publish_tier_counters(st);
}

void PoolReporter::publish_tier_counters(const speckv_pool_stats *have) const {
    if (s_.attach_slot < 0 || s_.attach_pid != self_pid() || !s_.writable) return;
    speckv_pool_stats v;
    if (have) {
        v = *have;
    } else {
        v.struct_size = sizeof v;
        stats_local(&v);
    }
    const uint64_t vals[kTierCounters] = {
        v.reads, v.cache_hits, v.cache_misses, v.l2_hits, v.sync_reads, v.prefetch_hints, v.prefetch_pages,
        v.prefetch_used, v.prefetch_wasted, v.prefetch_wasted_bytes, v.link_bytes, v.tlb_hits, v.tlb_misses,
        v.codec_pages_encoded, v.codec_raw_bytes, v.codec_stored_bytes, v.codec_pages_decoded,
        uint64_t(v.prefetch_beta_ppm) << 32 | v.prefetch_depth, now_ns()};
    AttachRecord &a = sh()->attach[s_.attach_slot];
    for (uint32_t i = 0; i < kTierCounters; i++) a.tier[i].store(vals[i], std::memory_order_relaxed);
}

std::string PoolReporter::stats_json() const {
    speckv_pool_stats s;
    stats(&s);
    // Ratios to 6 decimals, as the reports have always printed them.
    auto ratio = [](uint64_t a, uint64_t b) { return json_fixed6(b ? double(a) / double(b) : 0.0); };
    // Flat: every value a number (or l4_holder a boolean); the keys' order is
    // the order they were added in over the releases.
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
        {"l4_holder", s_.l4_holder},
        // Layer-aware placement: blocks allocated after an earlier block of their
        // (request, layer), and how many of them went right after it.
        {"unit_followers", total(kUnitFollowers)},
        {"unit_contiguous", total(kUnitContiguous)},
        // Prefetch hints and planned units the reader had already moved past when
        // the prefetch thread got to them, and units cut short (docs/tiers.md "Stale hints").
        {"prefetch_hints_stale", total(kPfHintsStale)},
        {"prefetch_units_stale", total(kPfUnitsStale)},
        {"prefetch_units_cut", total(kPfUnitsCut)},
        // Planned units left out because the plan's window would not fit L2 (docs/tiers.md).
        {"prefetch_units_capped", total(kPfUnitsCapped)},
        {"prefetch_blocks_outside_span", total(kPfOutsideSpan)},
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
        {"placement_latency_ns", s_.placement->latency_ns},
        {"placement_bandwidth", s_.placement->bandwidth},
        {"placement_distance", s_.placement->distance},
    };
    if (s_.events) {  // KV events (docs/events.md): sent, batches, dropped, replays
        const events::Counters c = s_.events->counters();
        j["events_sent"] = c.events;
        j["event_batches"] = c.batches;
        j["events_dropped"] = c.dropped;
        j["event_replays"] = c.replays;
    }
    {  // L1 evictions moved down into L2 (docs/tiers.md "L1 -> L2"), this process's; 0 without L2
        const BufferStats b = s_.l2 ? s_.l2->stats() : BufferStats{};
        j["l2_victims"] = b.victims;
        j["l2_victims_busy"] = b.victims_busy;
        j["l2_victims_dropped"] = b.victims_dropped;
    }
    // codec.mode = adaptive: the preset id chosen per layer and K/V, as
    // codec_mode_l<layer>_<k|v> (flat numbers, like every key here).
    s_.codec->add_json(&j);
    return json_text(j);
}

void PoolReporter::info(PoolInfo *o) const {
    const Superblock &s = sb();
    const SharedHeader *h = sh();
    o->location = s_.location->empty() ? "anonymous memory" : *s_.location;
    o->format_version = s.format_version;
    std::memcpy(o->uuid, s.uuid, 16);
    o->created_ns = s.created_ns;
    o->pool_bytes = s.pool_bytes;
    o->page_size = s.page_size;
    o->n_pages = s.n_pages;
    o->max_blocks = s.max_blocks;
    o->data_off = s.data_off;
    o->pages_used = h->pages_used.load();
    o->blocks_live = h->blocks_live.load();
    for (int d = 0; d < 4; d++) o->bytes_by_dtype[d] = h->bytes_by_dtype[d].load();
    o->epoch = h->epoch.load();
    o->recoveries = h->recoveries.load();
    o->attached = 0;
    for (const auto &a : h->attach) o->attached += a.pid.load() != 0;
    o->clean = h->clean.load() != 0;
    speckv_pool_stats st;
    stats(&st);
    o->blocks_published = st.blocks_published;
    o->shared_bytes = st.shared_bytes;
    o->lookups = st.lookups;
    o->lookup_hits = st.lookup_hits;
    o->dedup_bytes = st.dedup_bytes;
    o->evictions = st.evictions;
    o->reclaimed = st.reclaimed_blocks;
    o->cold_blocks = h->cold_blocks.load();
    o->cold_bytes = h->cold_bytes.load();
    o->demotions = h->demotions.load();
    o->promotions = h->promotions.load();
    o->demote_failures = h->demote_failures.load();
    o->cold_pid = process_alive(h->cold_pid.load(), h->cold_start_time) ? h->cold_pid.load() : 0;
    o->attach.clear();
    for (const auto &a : h->attach) {
        uint32_t pid = a.pid.load();
        if (!pid) continue;
        AttachInfo ai{pid, process_alive(pid, a.start_time), a.id, a.attach_ns, a.lookups.load(), a.lookup_hits.load(), {}};
        for (uint32_t t = 0; t < kTierCounters; t++) ai.tier[t] = a.tier[t].load(std::memory_order_relaxed);
        o->attach.push_back(ai);
    }
    for (uint32_t t = 0; t < kTcSummed; t++) o->tier_detached[t] = h->tier_detached[t].load(std::memory_order_relaxed);
    o->tenants.clear();
    for (uint32_t t = 0; t < std::min<uint32_t>(h->tenants_used, kMaxTenants); t++)
        o->tenants.push_back({s_.L->tenants[t].tenant, s_.L->tenants[t].quota_pages, s_.L->tenants[t].used_pages.load()});
    o->pages_quarantined = o->pages_in_write = 0;
    o->pages_coded = o->coded_raw_bytes = o->coded_stored_bytes = 0;
    o->blocks_packed = o->packed_pages = o->packed_saved = o->packed_damaged = 0;
    // Packed blocks: what their directories say (a snapshot: a block moved
    // meanwhile is skipped).
    for (uint64_t i = 0, hwm = std::min<uint64_t>(h->slot_hwm, s.max_blocks); i < hwm; i++) {
        const BlockRecord &r = s_.L->blocks[i];
        const uint64_t hd = r.handle.load();
        BlockView v{};
        if (!hd || !relaxed_load(r.packed_pages) || s_.resolver->resolve(hd, &v) != SPECKV_OK || v.cold() || !v.packed) {
            clear_error();
            continue;
        }
        uint64_t coded = 0, raw = 0, stored = 0;
        bool damaged = false;
        for (uint32_t k = 0; k < v.npages && !damaged; k++) {
            PackEntry e;
            if (!s_.packed->entry(v, k, &e)) damaged = true;  // the accessor, as every reader: a bad entry is never followed
            if (damaged || !(e.flags & kPageCoded)) continue;
            uint8_t hb[codec::kHeaderSize];
            copy_from_pool(hb, s_.L->data + (v.first_page << s_.L->page_shift) + e.off, sizeof hb);
            codec::Header ch;
            if (codec::peek_header(hb, e.len, &ch) != SPECKV_OK) continue;
            coded++;
            raw += ch.decoded_bytes();
            stored += ch.record_len();
        }
        clear_error();
        if (v.moved()) continue;
        if (damaged) {
            o->packed_damaged++;
            continue;
        }
        o->blocks_packed++;
        o->packed_pages += v.packed;
        o->packed_saved += v.npages - v.packed;
        o->pages_coded += coded;
        o->coded_raw_bytes += raw;
        o->coded_stored_bytes += stored;
    }
    for (uint64_t p = 0; p < s.n_pages; p++) {
        uint32_t fl = s_.L->pages[p].flags.load();
        uint64_t q = s_.L->pages[p].seq.load();
        o->pages_quarantined += (fl & kPageQuarantined) != 0;
        o->pages_in_write += q & 1;
        if ((fl & (kPageCoded | kPageZero)) != kPageCoded || (q & 1)) continue;
        if (!(__atomic_load_n(&s_.L->bitmap[p / 64], __ATOMIC_RELAXED) >> (p % 64) & 1)) continue;  // a freed page keeps its last flags
        // The record's own header says what it holds (a page rewritten
        // meanwhile is skipped: figures of a live pool are a snapshot).
        uint8_t hb[codec::kHeaderSize];
        copy_from_pool(hb, s_.L->data + (p << s_.L->page_shift), sizeof hb);
        codec::Header ch;
        if (s_.L->pages[p].seq.load() != q || codec::peek_header(hb, s.page_size, &ch) != SPECKV_OK) {
            clear_error();
            continue;
        }
        o->pages_coded++;
        o->coded_raw_bytes += ch.decoded_bytes();
        o->coded_stored_bytes += ch.record_len();
    }
}

int PoolReporter::list_blocks(std::vector<BlockInfo> *out) const {
    const Superblock &s = sb();
    uint64_t hwm = std::min<uint64_t>(sh()->slot_hwm, s.max_blocks);
    for (uint64_t i = 0; i < hwm; i++) {
        const BlockRecord &r = s_.L->blocks[i];
        uint64_t hd = r.handle.load();
        if (!hd) continue;
        BlockInfo b{};
        b.handle = hd;
        b.slot = i;
        b.first_page = r.first_page;
        b.npages = r.npages;
        b.bytes = r.bytes;
        b.dtype = r.dtype;
        b.tenant = r.tenant;
        b.request = r.request;
        b.layer = r.layer;
        b.hint_flags = r.hint_flags;
        b.token_pos = r.token_pos;
        b.token_count = r.token_count;
        std::memcpy(b.content_hash, r.content_hash, sizeof b.content_hash);
        b.published = r.state & kBlockPublished;
        b.cold = r.tier_seq.load() & 1;
        b.packed_pages = r.packed_pages;
        b.holders = static_cast<uint32_t>(__builtin_popcountll(r.holders.load() & ~kHoldersDying));
        b.owner = r.owner;
        out->push_back(b);
    }
    return SPECKV_OK;
}

}  // namespace speckv
