// SPDX-License-Identifier: Apache-2.0
// ColdRole (pool/cold_role.h, which describes the protocol): taking and
// giving up the role, promotion, the background tick and ensure_hot.
// Demotion is cold_demote.cc.
#include <inttypes.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "util/crc32c.h"
#include "events/publisher.h"
#include "pool/cold_role.h"
#include "util/seqlock.h"
#include "util/status.h"

#include "pool/cold_payload.h"

namespace speckv {

using namespace fmt;

void ColdRole::bind(const PoolLayout &L, const Parts &parts, bool read_only) {
    L_ = L;
    p_ = parts;
    self_.read_only = read_only;
    choice_.bind(L);
    reqs_.bind(L.sh);
}

int ColdRole::open(const Config &cfg, const Self &self, events::Publisher *events) {
    self_ = self;
    events_ = events;
    const std::string path = cfg.get_str("cold.path");
    wait_ms_ = static_cast<uint32_t>(cfg.get("cold.wait_ms"));
    if (path.empty() || self_.read_only) return SPECKV_OK;
    batch_ = static_cast<uint32_t>(cfg.get("cold.batch"));
    SharedHeader *h = sh();
    bool rec;
    if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
    uint32_t other = h->cold_pid.load();
    if (other && other != uint32_t(getpid()) && process_alive(other, h->cold_start_time)) {
        unlock();
        return fail(SPECKV_EBUSY,
                    "the L4 tier of this pool is held by process %u: one process per pool holds it (open this one "
                    "without cold.path; docs/tiers.md §9)",
                    other);
    }
    h->cold_pid.store(uint32_t(getpid()));
    h->cold_start_time = proc_start_time(getpid());
    unlock();
    ColdTierOptions o;
    o.path = path;
    o.capacity = static_cast<uint64_t>(cfg.get("cold.capacity"));
    o.direct = cfg.get("cold.direct") != 0;
    o.durable = cfg.get("cold.durable") != 0;
    o.recover = true;  // the file outlives the process: its extents are found again
    o.access = file_access(Uri{}, &cfg);  // pool.owner, pool.group, pool.mode
    auto give_up = [&] {
        if (lock(&rec) == SPECKV_OK) {
            if (h->cold_pid.load() == uint32_t(getpid())) h->cold_pid.store(0);
            unlock();
        }
    };
    // The file's lock is ours now by the pool's record, but a holder that
    // just died may keep it a moment longer: its io_uring instance is torn
    // down asynchronously after the process is gone, and holds the file.
    int orc = ColdTier::open(o, &cold_);
    for (int i = 0; orc == SPECKV_EBUSY && i < 60; i++) {
        usleep(50000);
        orc = ColdTier::open(o, &cold_);
    }
    if (int rc = orc; rc != SPECKV_OK) {
        std::string why = last_error();
        give_up();
        return fail(rc, "L4 tier (cold.path = '%s'): %s", path.c_str(), why.c_str());
    }
    HeatParams hp;
    hp.w_recency = double(cfg.get("heat.w_recency_milli")) / 1000.0;
    hp.w_frequency = double(cfg.get("heat.w_frequency_milli")) / 1000.0;
    hp.w_position = double(cfg.get("heat.w_position_milli")) / 1000.0;
    hp.w_sharing = double(cfg.get("heat.w_sharing_milli")) / 1000.0;
    hp.t_hot = double(cfg.get("heat.t_hot_milli")) / 1000.0;
    hp.t_cold = double(cfg.get("heat.t_cold_milli")) / 1000.0;
    hp.pressure_target = double(cfg.get("heat.pressure_target_milli")) / 1000.0;
    if (int rc = HeatTracker::create(hp, &heat_); rc != SPECKV_OK) {
        cold_.reset();
        give_up();
        return rc;
    }
    // Reconcile the file with the pool: an L4 copy no record names (its
    // block was freed by a process that did not hold the tier, or a
    // demotion was cut short before its commit) is dropped.
    std::vector<uint64_t> stale;
    uint64_t hwm = std::min<uint64_t>(h->slot_hwm, sb()->max_blocks);
    for (uint64_t key : cold_->keys()) {
        uint64_t slot = slot_of(key);
        bool named = slot >= 1 && slot <= hwm && blocks()[slot - 1].handle.load() == key &&
                     (blocks()[slot - 1].tier_seq.load() & 1);
        if (!named) stale.push_back(key);
    }
    if (!stale.empty()) {
        cold_->drop(stale);
        clear_error();
        (*p_.log)(SPECKV_LOG_INFO, "L4 tier %s: dropped %zu copies of blocks no longer in it", path.c_str(), stale.size());
    }
    uint64_t missing = 0;
    for (uint64_t i = 0; i < hwm; i++) {
        uint64_t hd = blocks()[i].handle.load();
        if (hd && (blocks()[i].tier_seq.load() & 1) && !cold_->contains(hd)) missing++;
    }
    if (missing)
        (*p_.log)(SPECKV_LOG_ERROR,
            "L4 tier %s: %" PRIu64 " blocks of the pool are in L4 but this file holds no copy of them: reads of them fail "
            "(SPECKV_ECORRUPT) until they are freed",
            path.c_str(), missing);
    ColdRequests::Serve serve;
    serve.promote = [this](uint64_t hd) { return promote(hd); };
    serve.done = [this](uint64_t hd, int rc, uint32_t requester) {
        if (rc == SPECKV_OK)
            heat_->touch(hd, mono_ns());  // just used elsewhere: not the next background victim
        else
            (*p_.log)(SPECKV_LOG_WARN, "block 0x%" PRIx64 " asked for by process %u stays in L4: %s", hd, requester,
                last_error());
    };
    serve.idle = [this] {  // the on-disk headers of copies promoted or freed since (forget() left that I/O out of the lock)
        if (cold_->flush_forgotten() != SPECKV_OK) clear_error();
    };
    if (int rc = reqs_.start(std::move(serve)); rc != SPECKV_OK) {
        std::string why = last_error();
        cold_.reset();
        heat_.reset();
        give_up();
        return fail(rc, "%s", why.c_str());
    }
    return SPECKV_OK;
}

void ColdRole::close() {
    if (!cold_) return;
    if (self_.attach_pid != getpid()) {  // a fork() child: the role, the ring and the server are the parent's
        (void)cold_.release();
        (void)heat_.release();
        reqs_.forget_after_fork();
        return;
    }
    reqs_.stop();
    bool rec;
    if (self_.attach_slot >= 0 && lock(&rec) == SPECKV_OK) {
        if (sh()->cold_pid.load() == uint32_t(getpid())) sh()->cold_pid.store(0);
        unlock();
    }
    cold_.reset();
    heat_.reset();
}

void ColdRole::forget_copy_locked(uint64_t handle) {
    if (!holder()) return;  // the next holder drops it when it opens
    const uint64_t k = handle;
    cold_->forget(std::span<const uint64_t>(&k, 1));
    clear_error();
}
void ColdRole::promote_hot() {
    SharedHeader *h = sh();
    const double n = double(sb()->n_pages);
    const double below = heat_->params().pressure_target - kPromoteMargin;
    if (!h->cold_blocks.load(std::memory_order_relaxed) ||
        double(h->pages_used.load(std::memory_order_relaxed)) > below * n)
        return;
    bool rec;
    if (lock(&rec) != SPECKV_OK) {
        clear_error();
        return;
    }
    choice_.refresh_locked(*heat_, l1_miss_rate());
    const std::vector<ColdChoice::Hot> hot = choice_.hot_locked(*heat_);
    unlock();
    // Hottest first, one batch, while the pool stays under the band (so the
    // next pass does not demote them again).
    uint64_t moved = 0;
    for (const ColdChoice::Hot &x : hot) {
        if (moved >= batch_ ||
            double(h->pages_used.load(std::memory_order_relaxed) + x.pages) > (below + kPromoteMargin / 2) * n)
            break;
        if (promote(x.handle) == SPECKV_OK) {
            moved++;
            bump(PoolCounters::kL4Ahead);
        }
        clear_error();
    }
}

void ColdRole::tick() {
    if (!holder()) return;
    const SharedHeader *h = sh();
    const double n = double(sb()->n_pages);
    const double target = heat_->params().pressure_target;
    if (double(h->pages_used.load(std::memory_order_relaxed)) <= target * n) {
        promote_hot();  // well under the target: blocks in L4 above T_h come back ahead of use
        return;
    }
    bool rec;
    if (lock(&rec) != SPECKV_OK) {
        clear_error();
        return;
    }
    // One batch of blocks below T_c (the thresholds adapt to the pressure
    // and miss rate first), chosen under the lock and written to L4 off it:
    // allocations and frees of every process go on meanwhile, and each
    // victim's commit re-checks it under the lock.
    std::vector<uint64_t> batch = candidates_locked(UINT64_MAX, /*below_cold_only=*/true);
    unlock();
    if (batch.size() > batch_) batch.resize(batch_);
    if (!batch.empty()) demote_slots(batch, /*have_lock=*/false);
    clear_error();
}

bool ColdRole::drop_lost_block(uint64_t handle, uint64_t tseq) {
    bool rec;
    if (lock(&rec) != SPECKV_OK) {
        clear_error();
        return false;
    }
    bool dropped = false;
    BlockView now{};
    const uint64_t slot = slot_of(handle) - 1;
    BlockRecord &r = blocks()[slot];
    uint64_t none = 0;
    // As evict_locked: Dying first, so a lookup racing us either holds a
    // reference (we leave the block) or misses.
    if (resolve(handle, &now) == SPECKV_OK && now.cold() && now.tseq == tseq && (r.state & kBlockPublished) &&
        r.holders.compare_exchange_strong(none, kHoldersDying, std::memory_order_seq_cst)) {
        ports_.evict_dying_locked(r, slot, handle, events::Medium::kRemote);
        (*p_.log)(SPECKV_LOG_INFO, "published block 0x%" PRIx64 " dropped: its L5 copy is gone", handle);
        dropped = true;
    }
    clear_error();
    unlock();
    return dropped;
}

int ColdRole::promote(uint64_t handle) {
    if (!holder())
        return fail(SPECKV_ENOTSUP, "this pool handle does not hold the L4 tier (open the pool with config cold.path)");
    BlockView v{};
    if (int rc = resolve(handle, &v); rc != SPECKV_OK) return rc;
    if (!v.cold()) return SPECKV_OK;
    const int64_t len = cold_->length(handle);
    if (len < 0) {
        const uint64_t seen = v.tseq;
        if (int rc = resolve(handle, &v); rc != SPECKV_OK) return rc;  // freed meanwhile
        // Brought back meanwhile (its copy dropped), maybe moved out again:
        // the caller re-resolves and tries again.
        if (!v.cold() || v.tseq != seen) return SPECKV_OK;
        clear_error();
        return fail(SPECKV_ECORRUPT,
                    "block 0x%" PRIx64 " is in L4 but the L4 file %s holds no copy of it (file replaced or lost?)", handle,
                    cold_->options().path.c_str());
    }
    std::vector<unsigned char> buf(static_cast<size_t>(len));
    ColdTier::GetItem it{handle, buf.data(), buf.size()};
    const uint64_t seen = v.tseq;
    if (int rc = cold_->get(std::span<ColdTier::GetItem>(&it, 1)); rc != SPECKV_OK) {
        std::string why = last_error();
        // Another thread brought it back meanwhile (dropping the copy), and
        // maybe demoted it again (a new tier_seq): the caller re-resolves.
        if (resolve(handle, &v) == SPECKV_OK && (!v.cold() || v.tseq != seen)) {
            clear_error();
            return SPECKV_OK;
        }
        clear_error();
        if (rc == SPECKV_ENOENT && cold_->in_spill(handle) && drop_lost_block(handle, seen))
            return fail(rc, "block 0x%" PRIx64 " is gone: its L5 copy was lost (%s); it was published and "
                            "unreferenced, so it was dropped from the pool like an eviction",
                        handle, why.c_str());
        return fail(rc, "block 0x%" PRIx64 " stays in L4: reading it back failed: %s", handle, why.c_str());
    }
    // The payload passed its CRC32C; its layout is still checked against the record.
    ColdHead ch;
    std::memcpy(&ch, buf.data(), std::min(buf.size(), sizeof ch));
    const uint64_t np = v.stored();  // a packed block's image pages
    const size_t sb_bytes = ch.summary_bytes;
    const size_t meta = sizeof(ColdHead) + np * sizeof(ColdPage) + np * sb_bytes;
    if (buf.size() < sizeof ch || ch.magic != kColdMagic || ch.handle != handle || ch.npages != np ||
        ch.bytes != v.bytes || ch.page_size != L_.page_size || (sb_bytes != 0 && sb_bytes != L_.summary_bytes) ||
        ch.data_pages > np || buf.size() != meta + size_t(ch.data_pages) * L_.page_size)
        return fail(SPECKV_ECORRUPT, "block 0x%" PRIx64 ": its L4 copy does not match its record; it stays in L4", handle);
    const auto *cps = reinterpret_cast<const unsigned char *>(buf.data() + sizeof(ColdHead));
    const uint64_t slot = slot_of(handle) - 1;
    uint64_t first = UINT64_MAX;
    auto room = [&] { return p_.room->find_room_locked(np, &first); };
    for (int rounds = 0;;) {
        bool rec;
        if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
        BlockView now{};
        if (resolve(handle, &now) != SPECKV_OK || now.tseq != v.tseq) {  // freed or moved meanwhile
            unlock();
            clear_error();
            return resolve(handle, &now);
        }
        first = UINT64_MAX;
        if (room() || !demote_offlock_locked(slot, &rounds)) break;  // else: unlocked, start over
    }
    if (first == UINT64_MAX && !room()) demote_locked(room, slot);
    if (first == UINT64_MAX && !room()) {
        uint64_t freep = sb()->n_pages - sh()->pages_used.load();
        unlock();
        return fail(SPECKV_ENOSPC,
                    "no run of %" PRIu64 " free pages to bring block 0x%" PRIx64 " back from L4 (%" PRIu64
                    " pages free, nothing left to demote); it stays in L4",
                    np, handle, freep);
    }
    BlockRecord &r = blocks()[slot];
    SharedHeader *h = sh();
    uint64_t *bm = L_.bitmap;
    const unsigned char *data = buf.data() + meta;
    // The copy this promotion drops: the one in L4 now (nobody puts a block
    // that is in L4). Once tier_seq is even a demoter (off the pool lock)
    // may put a new copy before our drop below; that one must stay.
    uint64_t copy_gen = 0;
    const bool have_copy = cold_->generation(handle, &copy_gen);
    for (uint64_t i = 0; i < np; i++) {
        const uint64_t p = first + i;
        bm[p / 64] |= uint64_t(1) << (p % 64);
        PageEntry &pe = pages()[p];
        const uint64_t q = p_.plocks->claim(pe);  // a stale writer of the page's previous block may hold it a moment
        ColdPage cp;
        std::memcpy(&cp, cps + i * sizeof(ColdPage), sizeof cp);
        if (!(cp.flags & kPageZero)) {
            std::memcpy(page_data(p), data, L_.page_size);
            data += L_.page_size;
        }
        if (sb_bytes && L_.summaries)
            std::memcpy(L_.summaries + p * L_.summary_bytes, cps + np * sizeof(ColdPage) + i * sb_bytes, sb_bytes);
        pe.crc.store(cp.crc, std::memory_order_relaxed);
        pe.flags.store(cp.flags & ~kPageWriterMask & (sb_bytes && L_.summaries ? ~0u : ~kPageSummary),
                       std::memory_order_relaxed);
        pe.seq.store(q + 2, std::memory_order_release);
    }
    ports_.commit_placement_locked(r, slot, first, r.packed_pages, 1);  // commit point: the block is in the pool again
    h->pages_used.fetch_add(np, std::memory_order_relaxed);
    if (TenantEntry *t = p_.share->tenant_row(r.tenant)) t->used_pages.fetch_add(np, std::memory_order_relaxed);
    h->cold_blocks.fetch_sub(1, std::memory_order_relaxed);
    h->cold_bytes.fetch_sub(r.bytes, std::memory_order_relaxed);
    h->promotions.fetch_add(1, std::memory_order_relaxed);
    if (events_ && (r.state & kBlockPublished))
        events_->moved(r.tenant, r.content_hash, r.token_count,
                       it.spilled ? events::Medium::kRemote : events::Medium::kCold, events::Medium::kPool);
    h->alloc_cursor = first + np;
    // Drop exactly the copy read above (in memory; its header is cleared
    // later, off the lock): a demoter that saw the even tier_seq may have put
    // a newer copy already, and that one must stay.
    if (have_copy) cold_->forget_if(handle, copy_gen);
    clear_error();
    unlock();
    (*p_.log)(SPECKV_LOG_DEBUG, "promoted block 0x%" PRIx64 " (%" PRIu64 " pages) from L4", handle, np);
    return SPECKV_OK;
}

int ColdRole::ensure_hot(uint64_t handle, BlockView *v) {
    for (int attempt = 0; v->cold(); attempt++) {
        if (attempt >= 8) return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving between tiers", handle);
        if (!holder()) {
            // Another process holds L4: ask it (not from our prefetch thread,
            // which must not wait; not from a read-only mapping, which cannot
            // post; not with cold.wait_ms = 0).
            const SharedHeader *h = sh();
            uint32_t pid = h->cold_pid.load();
            const bool alive = pid && process_alive(pid, h->cold_start_time);
            const bool on_pf = ports_.on_prefetch_thread();
            // The prefetch thread asks without waiting: the block is in the
            // pool by the time it is used, if the holder keeps up.
            if (alive && on_pf && !self_.read_only && wait_ms_ != 0) reqs_.post_detached(handle);
            if (alive && (self_.read_only || wait_ms_ == 0 || on_pf))
                return fail(SPECKV_EBUSY,
                            "block 0x%" PRIx64 " is in the L4 cold tier held by process %u%s (docs/tiers.md §9.1)", handle,
                            pid,
                            self_.read_only ? "; a read-only handle cannot ask it to bring the block back"
                            : on_pf     ? "; the prefetch thread asked it and does not wait"
                                        : "; cold.wait_ms = 0: not asking it to bring the block back");
            int rc = alive ? reqs_.ask(handle, wait_ms_) : SPECKV_ENOENT;
            if (rc == SPECKV_ENOENT)
                return fail(SPECKV_EBUSY,
                            "block 0x%" PRIx64 " is in the L4 cold tier and no process holds the tier now: open the pool "
                            "with config cold.path = the L4 file to read it",
                            handle);
            if (rc != SPECKV_OK) return rc;
        } else if (int rc = promote(handle); rc != SPECKV_OK) {
            return rc;
        }
        if (int rc = resolve(handle, v); rc != SPECKV_OK) return rc;
    }
    return SPECKV_OK;
}

}  // namespace speckv
