// SPDX-License-Identifier: Apache-2.0
// ColdRole's demotion to L4 (pool/cold_role.h has the protocol):
// demote_slots and its steps (claim, snapshot, copy the pages under their
// sequence locks, one batched L4 write, commit under the lock), the
// candidates by heat, demote_locked for allocation, and speckv_demote.
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


// One block demote_slots moves: where it was when snapshot, its pages'
// sequence numbers then, and its L4 payload.
struct ColdRole::Victim {
    uint64_t slot, handle, first, np, tseq;
    std::vector<uint64_t> seqs;
    std::vector<unsigned char> payload;
    bool remote = false;  // its L4 put sent it to L5 (events: medium REMOTE)
};

// Why the last block demote_slots skipped was skipped (the error it reports
// when none moved).
struct ColdRole::Why {
    int rc = SPECKV_OK;
    std::string why;
    void skip(int r, const char *f, uint64_t hd) {
        rc = r;
        char buf[256];
        std::snprintf(buf, sizeof buf, f, hd);
        why = buf;
    }
};

// Blocks this process is moving to L4 right now: no two demotions of one
// block at once (the loser's undo would forget the winner's copy).
bool ColdRole::claim(uint64_t hd) {
    std::lock_guard g(demote_mu_);
    return demoting_.insert(hd).second;
}

void ColdRole::unclaim(uint64_t hd) {
    std::lock_guard g(demote_mu_);
    demoting_.erase(hd);
}

bool ColdRole::snapshot(uint64_t slot, Why *w, Victim *out) {
    BlockRecord &r = blocks()[slot];
    const uint64_t hd = r.handle.load(std::memory_order_acquire);
    if (!hd) return false;
    // Claimed before the view is read: a view read first could predate
    // another thread's whole demotion of the block, and our put would
    // then replace its committed L4 copy (and our undo forget it).
    if (!claim(hd)) {
        w->skip(SPECKV_EBUSY, "block 0x%" PRIx64 " is being demoted by another thread", hd);
        return false;
    }
    // The view resolve() would give, whatever this handle's tenant binding.
    BlockView bv{&r, relaxed_field(r.first_page), relaxed_field(r.bytes), relaxed_field(r.npages), 0,
                 r.tier_seq.load(std::memory_order_acquire), relaxed_field(r.packed_pages)};
    if (bv.cold() || !record_geometry_ok(*sb(), bv.first_page, bv.packed, bv.npages, bv.bytes, relaxed_field(r.dtype), false) ||
        r.handle.load(std::memory_order_acquire) != hd) {
        unclaim(hd);
        return false;  // in L4 already, or freed / being reused meanwhile
    }
    if (r.holders.load() & ~mine_mask()) {  // referenced there: maybe pinned
        unclaim(hd);
        w->skip(SPECKV_EBUSY, "block 0x%" PRIx64 " is referenced by another process", hd);
        return false;
    }
    // A packed block goes as its image (its pool pages), and comes back as it.
    Victim v{slot, hd, bv.first_page, bv.stored(), bv.tseq, {}, {}};
    const uint64_t np = v.np;
    const bool sums = L_.summaries != nullptr;
    size_t meta = sizeof(ColdHead) + np * sizeof(ColdPage) + (sums ? np * L_.summary_bytes : 0);
    v.payload.resize(meta);
    v.seqs.resize(np);
    uint32_t data_pages = 0;
    const bool ok = copy_pages(&v, &data_pages);
    clear_error();
    if (!ok) {
        unclaim(hd);
        w->skip(SPECKV_EBUSY, "block 0x%" PRIx64 " has a page being written or quarantined", hd);
        return false;
    }
    ColdHead ch{kColdMagic, uint32_t(np), hd, bv.bytes, L_.page_size, sums ? L_.summary_bytes : 0, data_pages, 0};
    std::memcpy(v.payload.data(), &ch, sizeof ch);
    *out = std::move(v);
    return true;
}

bool ColdRole::copy_pages(Victim *vp, uint32_t *data_pages) {
    Victim &v = *vp;
    const uint64_t first = v.first, np = v.np;
    const bool sums = L_.summaries != nullptr;
    bool ok = true;
    for (uint64_t i = 0; ok && i < np; i++) {
        PageEntry &pe = pages()[first + i];
        for (int tries = 0;; tries++) {
            uint64_t s1;
            if (p_.plocks->wait_even(pe, &s1) != SPECKV_OK || tries > 8) {
                ok = false;
                break;
            }
            uint32_t fl = pe.flags.load(std::memory_order_acquire) & ~kPageWriterMask;
            if (fl & kPageQuarantined) {  // a damaged page is not carried anywhere: it stays where check sees it
                ok = false;
                break;
            }
            ColdPage cp{pe.crc.load(std::memory_order_relaxed), fl};
            size_t at = v.payload.size();
            if (!(fl & kPageZero)) {
                v.payload.resize(at + L_.page_size);
                std::atomic_thread_fence(std::memory_order_acquire);
                SEQLOCK_IGNORE_BEGIN();  // validated by the page's sequence below
                std::memcpy(v.payload.data() + at, page_data(first + i), L_.page_size);
                SEQLOCK_IGNORE_END();
            }
            if (sums) {
                SEQLOCK_IGNORE_BEGIN();
                std::memcpy(v.payload.data() + sizeof(ColdHead) + np * sizeof(ColdPage) + i * L_.summary_bytes,
                            L_.summaries + (first + i) * L_.summary_bytes, L_.summary_bytes);
                SEQLOCK_IGNORE_END();
            }
            std::atomic_thread_fence(std::memory_order_acquire);
            if (pe.seq.load(std::memory_order_relaxed) != s1) {  // a writer got in: copy it again
                v.payload.resize(at);
                continue;
            }
            std::memcpy(v.payload.data() + sizeof(ColdHead) + i * sizeof(ColdPage), &cp, sizeof cp);
            v.seqs[i] = s1;
            *data_pages += !(fl & kPageZero);
            break;
        }
    }
    return ok;
}

bool ColdRole::commit_locked(const Victim &v) {
    SharedHeader *h = sh();
    BlockRecord &r = blocks()[v.slot];
    const uint64_t first = v.first, np = v.np;
    PinShard &ps = p_.refs->pin_shard(v.handle);
    std::unique_lock pins(ps.mu);  // pin() registers under it and re-checks tier_seq
    bool ok = r.handle.load() == v.handle && r.tier_seq.load() == v.tseq && !ps.pinned(v.handle);
    uint64_t locked = 0;
    for (; ok && locked < np; locked++) {
        PageEntry &pe = pages()[first + locked];
        uint64_t want = v.seqs[locked];
        if (!pe.seq.compare_exchange_strong(want, want + 1)) ok = false;  // written since the snapshot
        else if (self_.attach_slot >= 0) pe.flags.fetch_or(uint32_t(self_.attach_slot + 1) << kPageWriterShift);
        if (!ok) break;
    }
    if (ok) {
        r.tier_seq.fetch_add(1, std::memory_order_seq_cst);  // commit point: the block is in L4
        // A reference another process took meanwhile (to pin it?): its
        // pin() re-checks tier_seq after taking the reference, we check
        // the references after moving tier_seq (both seq_cst), so one of
        // us sees the other. Seen here: the move is undone.
        if (r.holders.load(std::memory_order_seq_cst) & ~mine_mask()) {
            r.tier_seq.fetch_add(1, std::memory_order_seq_cst);  // back in the pool, at the same pages
            ok = false;
        }
    }
    if (!ok) {
        for (uint64_t i = 0; i < locked; i++) {
            PageEntry &pe = pages()[first + i];
            pe.flags.fetch_and(~kPageWriterMask);
            pe.seq.store(v.seqs[i] + 2, std::memory_order_release);
        }
        return false;
    }
    pins.unlock();
    uint64_t *bm = L_.bitmap;
    for (uint64_t i = 0; i < np; i++) {
        PageEntry &pe = pages()[first + i];
        pe.flags.store(kPageZero, std::memory_order_relaxed);
        pe.seq.store(v.seqs[i] + 2, std::memory_order_release);  // cached copies of it miss from now on
        bm[(first + i) / 64] &= ~(uint64_t(1) << ((first + i) % 64));
    }
    h->pages_used.fetch_sub(np, std::memory_order_relaxed);
    if (first < h->alloc_cursor) h->alloc_cursor = first;
    if (TenantEntry *t = p_.share->tenant_row(r.tenant)) t->used_pages.fetch_sub(np, std::memory_order_relaxed);
    h->cold_blocks.fetch_add(1, std::memory_order_relaxed);
    h->cold_bytes.fetch_add(r.bytes, std::memory_order_relaxed);
    h->demotions.fetch_add(1, std::memory_order_relaxed);
    if (events_ && (r.state & kBlockPublished))
        events_->moved(r.tenant, r.content_hash, r.token_count, events::Medium::kPool,
                       v.remote ? events::Medium::kRemote : events::Medium::kCold);
    return true;
}

uint64_t ColdRole::demote_slots(const std::vector<uint64_t> &slots, bool have_lock, int *why) {
    SharedHeader *h = sh();
    std::vector<Victim> vs;
    Why w;
    // 1. Snapshot. Without the pool lock this is safe: the view comes from
    // resolve() and every page copy from its sequence lock; the commit below
    // re-checks, under the lock, that the block is still that block at those
    // pages (handle, tier_seq) and that no page changed (sequence CAS).
    for (uint64_t slot : slots) {
        Victim v;
        if (snapshot(slot, &w, &v)) vs.push_back(std::move(v));
    }
    if (vs.empty()) {
        if (w.rc != SPECKV_OK) fail(w.rc, "%s", w.why.c_str());
        if (why) *why = w.rc;
        return 0;
    }
    // 2. One batch of L4 writes (off the pool lock unless the caller holds it;
    // under it, nothing goes to L5: no network round trip holds the pool lock).
    std::vector<ColdTier::PutItem> items;
    items.reserve(vs.size());
    for (auto &v : vs) items.push_back({v.handle, v.payload.data(), v.payload.size()});
    cold_->put(items, /*may_spill=*/!have_lock);
    std::string put_why = last_error();
    for (size_t k = 0; k < vs.size(); k++) vs[k].remote = items[k].spilled;
    const std::vector<uint64_t> to_l5 = cold_->take_spill_moves();  // others moved L4 -> L5 to make room
    // 3. Commit, under the lock.
    std::vector<uint64_t> undo;  // written to L4 but not committed: their copies go
    auto finish = [&] {
        if (!undo.empty()) {
            cold_->forget(undo);
            clear_error();
        }
        for (auto &v : vs) unclaim(v.handle);
    };
    bool rec;
    if (!have_lock) {
        if (int rc = lock(&rec); rc != SPECKV_OK) {
            std::string lwhy = last_error();
            for (size_t k = 0; k < vs.size(); k++)
                if (items[k].status == SPECKV_OK) undo.push_back(vs[k].handle);
            finish();
            if (why) *why = rc;
            fail(rc, "%s", lwhy.c_str());
            return 0;
        }
    }
    uint64_t moved = 0;
    for (size_t k = 0; k < vs.size(); k++) {
        const Victim &v = vs[k];
        if (items[k].status != SPECKV_OK) {
            h->demote_failures.fetch_add(1);
            (*p_.log)(SPECKV_LOG_WARN, "demoting block 0x%" PRIx64 " to L4 failed; it stays in the pool: %s", v.handle,
                put_why.c_str());
            w.rc = items[k].status;
            w.why = put_why;
            continue;
        }
        if (!commit_locked(v)) {
            undo.push_back(v.handle);
            w.rc = SPECKV_EBUSY;
            w.why = "the block was written, pinned, referenced, moved or freed while it was being demoted";
            continue;
        }
        moved++;
        (*p_.log)(SPECKV_LOG_DEBUG, "demoted block 0x%" PRIx64 " (%" PRIu64 " pages) to L4", v.handle, v.np);
    }
    // Blocks the put moved from the L4 file to L5 (their record says L4 for
    // both): routers see them leave NVME for REMOTE.
    for (uint64_t hd : to_l5) {
        const uint64_t s = slot_of(hd);
        if (!events_ || s < 1 || s > sb()->max_blocks) continue;
        const BlockRecord &r = blocks()[s - 1];
        if (r.handle.load() == hd && (r.tier_seq.load() & 1) && (r.state & kBlockPublished))
            events_->moved(r.tenant, r.content_hash, r.token_count, events::Medium::kCold, events::Medium::kRemote);
    }
    // The forgotten copies are this process's only: forget under the lock or
    // not, nobody else puts them (the claim above).
    if (!have_lock) unlock();
    finish();
    if (!moved && w.rc != SPECKV_OK) fail(w.rc, "%s", w.why.c_str());
    if (why) *why = moved ? SPECKV_OK : w.rc;
    return moved;
}

std::vector<uint64_t> ColdRole::candidates_locked(uint64_t keep, bool below_cold_only) {
    choice_.refresh_locked(*heat_, l1_miss_rate());
    return choice_.candidates_locked(*heat_, keep, below_cold_only,
                                          mine_mask(), self_.attach_id,
                                          [this](uint64_t hd) { return pinned(hd); });
}

bool ColdRole::demote_offlock_locked(uint64_t keep, int *rounds) {
    if (!holder() || *rounds >= kOfflockRounds) return false;
    std::vector<uint64_t> batch = candidates_locked(keep, /*below_cold_only=*/false);
    if (batch.empty()) return false;
    if (batch.size() > batch_) batch.resize(batch_);
    unlock();
    (*rounds)++;
    bump(PoolCounters::kL4Offlock, demote_slots(batch, /*have_lock=*/false));
    clear_error();
    return true;
}

uint64_t ColdRole::demote_locked(const std::function<bool()> &fits, uint64_t keep, bool below_cold_only) {
    if (!holder()) return 0;
    const std::vector<uint64_t> cand = candidates_locked(keep, below_cold_only);
    uint64_t moved = 0;
    for (size_t at = 0; at < cand.size();) {
        std::vector<uint64_t> batch;
        for (; at < cand.size() && batch.size() < batch_; at++) batch.push_back(cand[at]);
        moved += demote_slots(batch, /*have_lock=*/true);
        if (fits()) break;
    }
    clear_error();
    return moved;
}

int ColdRole::demote(uint64_t handle) {
    if (self_.read_only) return fail(SPECKV_EPERM, "pool is open read-only");
    BlockView v{};
    if (int rc = resolve(handle, &v); rc != SPECKV_OK) return rc;
    if (!holder())
        return fail(SPECKV_ENOTSUP, "this pool handle does not hold the L4 tier (open the pool with config cold.path)");
    if (v.cold()) return SPECKV_OK;
    if (pinned(handle)) return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " is pinned: unpin it before demoting", handle);
    // The L4 write happens off the pool lock; the commit re-checks the block.
    int rc = SPECKV_OK;
    uint64_t moved = demote_slots({slot_of(handle) - 1}, /*have_lock=*/false, &rc);
    if (!moved) {
        std::string why = last_error();
        if (int rrc = resolve(handle, &v); rrc != SPECKV_OK) return rrc;  // freed meanwhile
        if (v.cold()) return SPECKV_OK;  // another thread moved it meanwhile
        return fail(rc == SPECKV_OK ? SPECKV_EBUSY : rc, "demoting block 0x%" PRIx64 ": %s", handle, why.c_str());
    }
    return SPECKV_OK;
}

}  // namespace speckv
