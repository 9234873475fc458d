// SPDX-License-Identifier: Apache-2.0
// The pool's L4 cold tier (docs/tiers.md §9): blocks demoted from the pool
// live in a file on NVMe (lib/cold_tier.*: io_uring, O_DIRECT, registered
// buffers), keyed by their handle, and come back on their next use.
//
// One live process per pool holds the tier (SharedHeader::cold_pid): the one
// opened with config cold.path. It alone moves blocks, so a move needs no
// cross-process protocol beyond the pool lock and the block's tier_seq:
//   demote: under the lock, snapshot the block's pages (seqlock copies), write
//           them to L4, then lock every page, check none changed since the
//           snapshot and no pin appeared, bump tier_seq to odd (the commit
//           point) and free the pages. A failed L4 write leaves the block as
//           it was: nothing is lost.
//   promote: read the L4 copy (CRC32C checked), then under the lock take a
//           run of free pages, fill them, point the record at them, bump
//           tier_seq to even (the commit point), and drop the L4 copy.
// Readers and writers that resolved the block before a move see tier_seq
// changed after their copy and start again (lib/pool/pool_io.cc). A crash before a
// commit leaves the block where it was (recovery rebuilds the page bitmap
// from the records, and the next holder drops L4 copies no record names).
#include <inttypes.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "util/crc32c.h"
#include "pool/pool.h"
#include "util/seqlock.h"
#include "util/status.h"
#include "pool/resolve.h"

namespace speckv {

using namespace fmt;

namespace {

constexpr uint32_t kColdMagic = 0x344C4B53;  // "SKL4": a block's L4 payload

// A block's L4 payload: this header, one ColdPage per page, the pages'
// summary slots (when the pool has a summary area), then the bytes of every
// page not flagged zero, in page order.
struct ColdHead {
    uint32_t magic;
    uint32_t npages;
    uint64_t handle;
    uint64_t bytes;
    uint32_t page_size;
    uint32_t summary_bytes;
    uint32_t data_pages;
    uint32_t pad;
};
static_assert(sizeof(ColdHead) == 40);

struct ColdPage {
    uint32_t crc, flags;
};

uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

uint64_t slot_of(uint64_t handle) { return handle & ((uint64_t(1) << kSlotBits) - 1); }

// Futexes on words of the shared mapping (not FUTEX_PRIVATE: the waiter and
// the waker are different processes).
void futex_wait(std::atomic<uint32_t> *w, uint32_t seen, uint64_t ns) {
    timespec ts{time_t(ns / 1000000000ull), long(ns % 1000000000ull)};
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(w), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t> *w) {
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(w), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

uint64_t mono_fine_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

int Pool::init_cold(const Config &cfg) {
    const std::string path = cfg.get_str("cold.path");
    cold_wait_ms_ = static_cast<uint32_t>(cfg.get("cold.wait_ms"));
    if (path.empty() || read_only()) return SPECKV_OK;
    cold_batch_ = static_cast<uint32_t>(cfg.get("cold.batch"));
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
        log(SPECKV_LOG_INFO, "L4 tier %s: dropped %zu copies of blocks no longer in it", path.c_str(), stale.size());
    }
    uint64_t missing = 0;
    for (uint64_t i = 0; i < hwm; i++) {
        uint64_t hd = blocks()[i].handle.load();
        if (hd && (blocks()[i].tier_seq.load() & 1) && !cold_->contains(hd)) missing++;
    }
    if (missing)
        log(SPECKV_LOG_ERROR,
            "L4 tier %s: %" PRIu64 " blocks of the pool are in L4 but this file holds no copy of them: reads of them fail "
            "(SPECKV_ECORRUPT) until they are freed",
            path.c_str(), missing);
    cold_srv_stop_.store(false);
    try {
        cold_srv_ = std::make_unique<std::thread>([this] { cold_server(); });
    } catch (...) {
        cold_.reset();
        heat_.reset();
        give_up();
        return fail(SPECKV_ENOMEM, "L4 tier: cannot start the thread that serves other processes' requests");
    }
    return SPECKV_OK;
}

// The holder's server: waits on cold_req_seq, brings back each posted
// block, answers in its row and wakes the requesters. Rows left behind by
// dead requesters (or by a dead earlier holder mid-serve) are freed when
// it is idle.
void Pool::cold_server() {
    SharedHeader *h = sh();
    const uint32_t me = uint32_t(getpid());
    uint64_t last_sweep = 0;
    uint64_t answered[kColdRequests] = {};  // handle of each row answered at the last sweep
    while (!cold_srv_stop_.load(std::memory_order_acquire)) {
        const uint32_t seen = h->cold_req_seq.load(std::memory_order_acquire);
        bool served = false;
        for (uint32_t i = 0; i < kColdRequests; i++) {
            ColdRequest &q = h->cold_req[i];
            uint32_t st = kReqPosted;
            if (!q.state.compare_exchange_strong(st, kReqServing, std::memory_order_acq_rel)) continue;
            q.server.store(me, std::memory_order_relaxed);
            const uint64_t hd = q.handle.load(std::memory_order_relaxed);
            const bool detached = q.rc.load(std::memory_order_relaxed) == kReqDetached;
            int rc = promote(hd);
            if (rc == SPECKV_OK) {
                heat_->touch(hd, mono_ns());  // just used elsewhere: not the next background victim
                h->cold_remote.fetch_add(1, std::memory_order_relaxed);
            } else {
                log(SPECKV_LOG_WARN, "block 0x%" PRIx64 " asked for by process %u stays in L4: %s", hd,
                    q.pid.load(std::memory_order_relaxed), last_error());
            }
            clear_error();
            if (detached) {  // nobody waits for the answer
                q.state.store(kReqFree, std::memory_order_release);
                continue;
            }
            q.rc.store(rc, std::memory_order_relaxed);
            q.state.store(kReqAnswered, std::memory_order_release);
            served = true;
        }
        if (served) {
            h->cold_ans_seq.fetch_add(1, std::memory_order_acq_rel);
            futex_wake_all(&h->cold_ans_seq);
        }
        const uint64_t now = mono_ns();
        if (now - last_sweep > 1000000000ull) {  // once a second: rows nobody will free
            last_sweep = now;
            for (uint32_t i = 0; i < kColdRequests; i++) {
                ColdRequest &q = h->cold_req[i];
                uint32_t st = q.state.load(std::memory_order_acquire);
                const uint64_t hd = q.handle.load(std::memory_order_relaxed);
                // Answered at two sweeps in a row: its requester gave up
                // waiting (a live one reads its answer within ~20 ms).
                const bool stale = st == kReqAnswered && answered[i] == hd;
                answered[i] = st == kReqAnswered ? hd : 0;
                if (st == kReqFree || st == kReqServing) continue;
                if (stale || !process_alive(q.pid.load(std::memory_order_relaxed), q.start_time)) {
                    if (q.state.compare_exchange_strong(st, kReqFree)) answered[i] = 0;
                }
            }
        }
        if (!served) {
            // Idle: clear the on-disk headers of copies promoted or freed
            // since (forget() left that I/O out of the pool lock).
            if (cold_->flush_forgotten() != SPECKV_OK) clear_error();
            futex_wait(&h->cold_req_seq, seen, 100000000ull);
        }
    }
}

void Pool::post_detached(uint64_t handle) {
    SharedHeader *h = sh();
    // At most half the rows for requests nobody waits for, one per block.
    uint32_t detached = 0;
    for (uint32_t i = 0; i < kColdRequests; i++) {
        const ColdRequest &q = h->cold_req[i];
        uint32_t st = q.state.load(std::memory_order_acquire);
        if ((st == kReqPosted || st == kReqServing) && q.rc.load(std::memory_order_relaxed) == kReqDetached) {
            if (q.handle.load(std::memory_order_relaxed) == handle) return;
            detached++;
        }
    }
    if (detached >= kColdRequests / 2) return;
    for (uint32_t i = 0; i < kColdRequests; i++) {
        ColdRequest &q = h->cold_req[i];
        uint32_t st = kReqFree;
        if (!q.state.compare_exchange_strong(st, kReqClaimed, std::memory_order_acq_rel)) continue;
        q.pid.store(uint32_t(getpid()), std::memory_order_relaxed);
        q.start_time = proc_start_time(getpid());
        q.handle.store(handle, std::memory_order_relaxed);
        q.rc.store(kReqDetached, std::memory_order_relaxed);
        q.server.store(0, std::memory_order_relaxed);
        q.state.store(kReqPosted, std::memory_order_release);
        h->cold_req_seq.fetch_add(1, std::memory_order_acq_rel);
        futex_wake_all(&h->cold_req_seq);
        return;
    }
}

int Pool::ask_holder(uint64_t handle) {
    SharedHeader *h = sh();
    const uint64_t deadline = mono_fine_ns() + uint64_t(cold_wait_ms_) * 1000000ull;
    auto holder_pid = [&]() -> uint32_t {
        uint32_t pid = h->cold_pid.load();
        return pid && process_alive(pid, h->cold_start_time) ? pid : 0;
    };
    auto timed_out = [&](uint32_t pid) {
        return fail(SPECKV_EBUSY,
                    "block 0x%" PRIx64 " is in the L4 cold tier held by process %u, which did not bring it back within "
                    "cold.wait_ms = %u ms",
                    handle, pid, cold_wait_ms_);
    };
    const uint32_t me = uint32_t(getpid());
    ColdRequest *q = nullptr;
    while (!q) {  // claim a free row
        for (uint32_t i = 0; i < kColdRequests && !q; i++) {
            uint32_t st = kReqFree;
            if (h->cold_req[i].state.compare_exchange_strong(st, kReqClaimed, std::memory_order_acq_rel))
                q = &h->cold_req[i];
        }
        if (q) break;
        uint32_t pid = holder_pid();
        if (!pid) return SPECKV_ENOENT;  // nobody to ask: the caller says so
        if (mono_fine_ns() >= deadline) return timed_out(pid);
        usleep(1000);  // every row is taken: rows free as requests are answered
    }
    q->pid.store(me, std::memory_order_relaxed);
    q->start_time = proc_start_time(pid_t(me));
    q->handle.store(handle, std::memory_order_relaxed);
    q->rc.store(SPECKV_OK, std::memory_order_relaxed);
    q->server.store(0, std::memory_order_relaxed);
    q->state.store(kReqPosted, std::memory_order_release);
    h->cold_req_seq.fetch_add(1, std::memory_order_acq_rel);
    futex_wake_all(&h->cold_req_seq);
    for (;;) {
        const uint32_t seen = h->cold_ans_seq.load(std::memory_order_acquire);
        uint32_t st = q->state.load(std::memory_order_acquire);
        if (st == kReqAnswered) {
            int rc = q->rc.load(std::memory_order_relaxed);
            q->state.store(kReqFree, std::memory_order_release);
            if (rc == SPECKV_OK) return SPECKV_OK;
            return fail(rc,
                        "block 0x%" PRIx64 " stays in the L4 cold tier: the process holding it (%u) could not bring it "
                        "back: %s",
                        handle, q->server.load(std::memory_order_relaxed), speckv_strerror(rc));
        }
        const uint32_t pid = holder_pid();
        if (st == kReqServing) {
            uint32_t srv = q->server.load(std::memory_order_relaxed);
            if (srv && srv != pid) {  // its server died mid-serve: post again for the next holder (or give up)
                q->state.store(pid ? kReqPosted : kReqFree, std::memory_order_release);
                if (!pid) return SPECKV_ENOENT;
                h->cold_req_seq.fetch_add(1, std::memory_order_acq_rel);
                futex_wake_all(&h->cold_req_seq);
                continue;
            }
            // Taken, not answered in time (a holder stopped or stuck in
            // I/O): give up; its answer stays in the row until the holder's
            // sweep frees it.
            if (mono_fine_ns() >= deadline) return timed_out(pid);
        } else if (st != kReqPosted) {
            return SPECKV_OK;  // the row was freed under us (not while we wait): ensure_hot re-checks and asks again
        } else if (!pid || mono_fine_ns() >= deadline) {  // posted, not taken: withdraw it
            uint32_t want = kReqPosted;
            if (q->state.compare_exchange_strong(want, kReqFree, std::memory_order_acq_rel))
                return pid ? timed_out(pid) : SPECKV_ENOENT;
            continue;  // the holder took it just now: wait for the answer
        }
        futex_wait(&h->cold_ans_seq, seen, 20000000ull);
    }
}

void Pool::close_cold() {
    if (!cold_) return;
    if (attach_pid_ != getpid()) {  // a fork() child: the role, the ring and the server are the parent's
        (void)cold_.release();
        (void)heat_.release();
        (void)cold_srv_.release();
        return;
    }
    if (cold_srv_) {
        cold_srv_stop_.store(true, std::memory_order_release);
        sh()->cold_req_seq.fetch_add(1, std::memory_order_acq_rel);
        futex_wake_all(&sh()->cold_req_seq);
        cold_srv_->join();
        cold_srv_.reset();
    }
    bool rec;
    if (attach_slot_ >= 0 && lock(&rec) == SPECKV_OK) {
        if (sh()->cold_pid.load() == uint32_t(getpid())) sh()->cold_pid.store(0);
        unlock();
    }
    cold_.reset();
    heat_.reset();
}

void Pool::cold_forget_locked(uint64_t handle) {
    if (!holder()) return;  // the next holder drops it when it opens
    const uint64_t k = handle;
    cold_->forget(std::span<const uint64_t>(&k, 1));
    clear_error();
}

// One block demote_slots moves: where it was when snapshot, its pages'
// sequence numbers then, and its L4 payload.
struct Pool::DemoteVictim {
    uint64_t slot, handle, first, np, tseq;
    std::vector<uint64_t> seqs;
    std::vector<unsigned char> payload;
};

// Why the last block demote_slots skipped was skipped (the error it reports
// when none moved).
struct Pool::DemoteWhy {
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
bool Pool::demote_claim(uint64_t hd) {
    std::lock_guard g(demote_mu_);
    return demoting_.insert(hd).second;
}

void Pool::demote_unclaim(uint64_t hd) {
    std::lock_guard g(demote_mu_);
    demoting_.erase(hd);
}

bool Pool::demote_snapshot(uint64_t slot, uint64_t mine, DemoteWhy *w, DemoteVictim *out) {
    BlockRecord &r = blocks()[slot];
    const uint64_t hd = r.handle.load(std::memory_order_acquire);
    if (!hd) return false;
    // Claimed before the view is read: a view read first could predate
    // another thread's whole demotion of the block, and our put would
    // then replace its committed L4 copy (and our undo forget it).
    if (!demote_claim(hd)) {
        w->skip(SPECKV_EBUSY, "block 0x%" PRIx64 " is being demoted by another thread", hd);
        return false;
    }
    // The view resolve() would give, whatever this handle's tenant binding.
    BlockView bv{&r, relaxed_field(r.first_page), relaxed_field(r.bytes), relaxed_field(r.npages), 0,
                 r.tier_seq.load(std::memory_order_acquire), relaxed_field(r.packed_pages)};
    if (bv.cold() || !geometry_ok(*sb(), bv.first_page, bv.packed, bv.npages, bv.bytes, relaxed_field(r.dtype), false) ||
        r.handle.load(std::memory_order_acquire) != hd) {
        demote_unclaim(hd);
        return false;  // in L4 already, or freed / being reused meanwhile
    }
    if (r.holders.load() & ~mine) {  // referenced there: maybe pinned
        demote_unclaim(hd);
        w->skip(SPECKV_EBUSY, "block 0x%" PRIx64 " is referenced by another process", hd);
        return false;
    }
    // A packed block goes as its image (its pool pages), and comes back as it.
    DemoteVictim v{slot, hd, bv.first_page, bv.stored(), bv.tseq, {}, {}};
    const uint64_t np = v.np;
    const bool sums = summaries_ != nullptr;
    size_t meta = sizeof(ColdHead) + np * sizeof(ColdPage) + (sums ? np * summary_bytes_ : 0);
    v.payload.resize(meta);
    v.seqs.resize(np);
    uint32_t data_pages = 0;
    const bool ok = demote_copy_pages(&v, &data_pages);
    clear_error();
    if (!ok) {
        demote_unclaim(hd);
        w->skip(SPECKV_EBUSY, "block 0x%" PRIx64 " has a page being written or quarantined", hd);
        return false;
    }
    ColdHead ch{kColdMagic, uint32_t(np), hd, bv.bytes, page_size_, sums ? summary_bytes_ : 0, data_pages, 0};
    std::memcpy(v.payload.data(), &ch, sizeof ch);
    *out = std::move(v);
    return true;
}

bool Pool::demote_copy_pages(DemoteVictim *vp, uint32_t *data_pages) {
    DemoteVictim &v = *vp;
    const uint64_t first = v.first, np = v.np;
    const bool sums = summaries_ != nullptr;
    bool ok = true;
    for (uint64_t i = 0; ok && i < np; i++) {
        PageEntry &pe = pages()[first + i];
        for (int tries = 0;; tries++) {
            uint64_t s1;
            if (wait_even(pe, &s1) != SPECKV_OK || tries > 8) {
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
                v.payload.resize(at + page_size_);
                std::atomic_thread_fence(std::memory_order_acquire);
                SEQLOCK_IGNORE_BEGIN();  // validated by the page's sequence below
                std::memcpy(v.payload.data() + at, page_data(first + i), page_size_);
                SEQLOCK_IGNORE_END();
            }
            if (sums) {
                SEQLOCK_IGNORE_BEGIN();
                std::memcpy(v.payload.data() + sizeof(ColdHead) + np * sizeof(ColdPage) + i * summary_bytes_,
                            summaries_ + (first + i) * summary_bytes_, summary_bytes_);
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

bool Pool::demote_commit_locked(const DemoteVictim &v, uint64_t mine) {
    SharedHeader *h = sh();
    BlockRecord &r = blocks()[v.slot];
    const uint64_t first = v.first, np = v.np;
    PinShard &ps = pin_shard(v.handle);
    std::unique_lock pins(ps.mu);  // pin() registers under it and re-checks tier_seq
    bool ok = r.handle.load() == v.handle && r.tier_seq.load() == v.tseq && !ps.pinned(v.handle);
    uint64_t locked = 0;
    for (; ok && locked < np; locked++) {
        PageEntry &pe = pages()[first + locked];
        uint64_t want = v.seqs[locked];
        if (!pe.seq.compare_exchange_strong(want, want + 1)) ok = false;  // written since the snapshot
        else if (attach_slot_ >= 0) pe.flags.fetch_or(uint32_t(attach_slot_ + 1) << kPageWriterShift);
        if (!ok) break;
    }
    if (ok) {
        r.tier_seq.fetch_add(1, std::memory_order_seq_cst);  // commit point: the block is in L4
        // A reference another process took meanwhile (to pin it?): its
        // pin() re-checks tier_seq after taking the reference, we check
        // the references after moving tier_seq (both seq_cst), so one of
        // us sees the other. Seen here: the move is undone.
        if (r.holders.load(std::memory_order_seq_cst) & ~mine) {
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
    uint64_t *bm = bitmap();
    for (uint64_t i = 0; i < np; i++) {
        PageEntry &pe = pages()[first + i];
        pe.flags.store(kPageZero, std::memory_order_relaxed);
        pe.seq.store(v.seqs[i] + 2, std::memory_order_release);  // cached copies of it miss from now on
        bm[(first + i) / 64] &= ~(uint64_t(1) << ((first + i) % 64));
    }
    h->pages_used.fetch_sub(np, std::memory_order_relaxed);
    if (first < h->alloc_cursor) h->alloc_cursor = first;
    if (TenantEntry *t = share_.tenant_row(r.tenant)) t->used_pages.fetch_sub(np, std::memory_order_relaxed);
    h->cold_blocks.fetch_add(1, std::memory_order_relaxed);
    h->cold_bytes.fetch_add(r.bytes, std::memory_order_relaxed);
    h->demotions.fetch_add(1, std::memory_order_relaxed);
    return true;
}

uint64_t Pool::demote_slots(const std::vector<uint64_t> &slots, bool have_lock, int *why) {
    SharedHeader *h = sh();
    const uint64_t mine = attach_slot_ >= 0 ? uint64_t(1) << attach_slot_ : 0;
    std::vector<DemoteVictim> vs;
    DemoteWhy w;
    // 1. Snapshot. Without the pool lock this is safe: the view comes from
    // resolve() and every page copy from its sequence lock; the commit below
    // re-checks, under the lock, that the block is still that block at those
    // pages (handle, tier_seq) and that no page changed (sequence CAS).
    for (uint64_t slot : slots) {
        DemoteVictim v;
        if (demote_snapshot(slot, mine, &w, &v)) vs.push_back(std::move(v));
    }
    if (vs.empty()) {
        if (w.rc != SPECKV_OK) fail(w.rc, "%s", w.why.c_str());
        if (why) *why = w.rc;
        return 0;
    }
    // 2. One batch of L4 writes (off the pool lock unless the caller holds it).
    std::vector<ColdTier::PutItem> items;
    items.reserve(vs.size());
    for (auto &v : vs) items.push_back({v.handle, v.payload.data(), v.payload.size()});
    cold_->put(items);
    std::string put_why = last_error();
    // 3. Commit, under the lock.
    std::vector<uint64_t> undo;  // written to L4 but not committed: their copies go
    auto finish = [&] {
        if (!undo.empty()) {
            cold_->forget(undo);
            clear_error();
        }
        for (auto &v : vs) demote_unclaim(v.handle);
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
        const DemoteVictim &v = vs[k];
        if (items[k].status != SPECKV_OK) {
            h->demote_failures.fetch_add(1);
            log(SPECKV_LOG_WARN, "demoting block 0x%" PRIx64 " to L4 failed; it stays in the pool: %s", v.handle,
                put_why.c_str());
            w.rc = items[k].status;
            w.why = put_why;
            continue;
        }
        if (!demote_commit_locked(v, mine)) {
            undo.push_back(v.handle);
            w.rc = SPECKV_EBUSY;
            w.why = "the block was written, pinned, referenced, moved or freed while it was being demoted";
            continue;
        }
        moved++;
        log(SPECKV_LOG_DEBUG, "demoted block 0x%" PRIx64 " (%" PRIu64 " pages) to L4", v.handle, v.np);
    }
    // The forgotten copies are this process's only: forget under the lock or
    // not, nobody else puts them (the claim above).
    if (!have_lock) unlock();
    finish();
    if (!moved && w.rc != SPECKV_OK) fail(w.rc, "%s", w.why.c_str());
    if (why) *why = moved ? SPECKV_OK : w.rc;
    return moved;
}

std::vector<uint64_t> Pool::demote_candidates_locked(uint64_t keep, bool below_cold_only) {
    const SharedHeader *h = sh();
    const uint64_t hwm = std::min<uint64_t>(h->slot_hwm, sb()->max_blocks), now = mono_ns();
    const uint64_t mine = attach_slot_ >= 0 ? uint64_t(1) << attach_slot_ : 0;
    struct Cand {
        double heat;
        uint64_t last_use, slot;
        bool operator<(const Cand &o) const {
            return heat != o.heat ? heat < o.heat : last_use != o.last_use ? last_use < o.last_use : slot < o.slot;
        }
    };
    // The thresholds follow pressure and the fast tiers' miss rate
    // (lib/tiers/heat.h). Under an allocation that finds no room the coldest go
    // first, below T_c or not; the background pass takes only blocks below T_c.
    refresh_heat_locked();
    uint64_t hits = total(kHits), misses = total(kMisses);
    heat_->adapt(double(h->pages_used.load(std::memory_order_relaxed)) / double(sb()->n_pages),
                 hits + misses ? double(misses) / double(hits + misses) : 0.0);
    const double below = below_cold_only ? heat_->t_cold() : 2.0;  // scores are in [0, 1]
    std::vector<Cand> cand;
    for (uint64_t i = 0; i < hwm; i++) {
        const BlockRecord &r = blocks()[i];
        uint64_t hd = r.handle.load(std::memory_order_relaxed);
        if (!hd || i == keep || (r.tier_seq.load(std::memory_order_relaxed) & 1)) continue;
        if (r.holders.load(std::memory_order_relaxed) & ~mine) continue;  // others hold it (maybe pinned there)
        if (!(r.state & kBlockPublished) && r.owner != 0 && r.owner != attach_id_)
            continue;  // another live process's unpublished block: its own to move
        if (pinned(hd)) continue;
        const double heat = heat_->score(hd, now);
        if (heat >= below) continue;
        cand.push_back({heat, r.last_use.load(std::memory_order_relaxed), i});
    }
    std::sort(cand.begin(), cand.end());
    std::vector<uint64_t> out;
    out.reserve(cand.size());
    for (const Cand &c : cand) out.push_back(c.slot);
    return out;
}

uint64_t Pool::demote_locked(const std::function<bool()> &fits, uint64_t keep, bool below_cold_only) {
    if (!holder()) return 0;
    const std::vector<uint64_t> cand = demote_candidates_locked(keep, below_cold_only);
    uint64_t moved = 0;
    for (size_t at = 0; at < cand.size();) {
        std::vector<uint64_t> batch;
        for (; at < cand.size() && batch.size() < cold_batch_; at++) batch.push_back(cand[at]);
        moved += demote_slots(batch, /*have_lock=*/true);
        if (fits()) break;
    }
    clear_error();
    return moved;
}

void Pool::refresh_heat_locked() {
    // Position: a block's first token against its request's end (the end of
    // its latest block here), so attention-sink and recent-window blocks are
    // hot; sharing: how many processes reference it.
    const uint64_t hwm = std::min<uint64_t>(sh()->slot_hwm, sb()->max_blocks);
    auto key = [](const BlockRecord &r) { return r.tenant * 0x9E3779B97F4A7C15ull ^ r.request; };
    std::unordered_map<uint64_t, uint64_t> ends;
    for (uint64_t i = 0; i < hwm; i++) {
        const BlockRecord &r = blocks()[i];
        if (!r.handle.load(std::memory_order_relaxed) || !r.token_count) continue;
        uint64_t &e = ends[key(r)];
        e = std::max(e, r.token_pos + r.token_count);
    }
    for (uint64_t i = 0; i < hwm; i++) {
        const BlockRecord &r = blocks()[i];
        const uint64_t hd = r.handle.load(std::memory_order_relaxed);
        if (!hd) continue;
        heat_->set_sharing(hd, uint32_t(__builtin_popcountll(r.holders.load(std::memory_order_relaxed) & ~kHoldersDying)));
        if (r.token_count) heat_->set_position(hd, r.token_pos, ends[key(r)]);
    }
}

void Pool::promote_hot() {
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
    refresh_heat_locked();
    uint64_t hits = total(kHits), misses = total(kMisses);
    heat_->adapt(double(h->pages_used.load(std::memory_order_relaxed)) / n,
                 hits + misses ? double(misses) / double(hits + misses) : 0.0);
    const double th = heat_->t_hot();
    const uint64_t now = mono_ns(), hwm = std::min<uint64_t>(h->slot_hwm, sb()->max_blocks);
    struct Hot {
        double heat;
        uint64_t handle, pages;
    };
    std::vector<Hot> hot;
    for (uint64_t i = 0; i < hwm; i++) {
        const BlockRecord &r = blocks()[i];
        const uint64_t hd = r.handle.load(std::memory_order_relaxed);
        if (!hd || !(r.tier_seq.load(std::memory_order_relaxed) & 1)) continue;  // in L4 only
        if (const double s = heat_->score(hd, now); s > th) hot.push_back({s, hd, r.packed_pages ? r.packed_pages : r.npages});
    }
    unlock();
    std::sort(hot.begin(), hot.end(), [](const Hot &a, const Hot &b) { return a.heat > b.heat; });
    // Hottest first, one batch, while the pool stays under the band (so the
    // next pass does not demote them again).
    uint64_t moved = 0;
    for (const Hot &x : hot) {
        if (moved >= cold_batch_ ||
            double(h->pages_used.load(std::memory_order_relaxed) + x.pages) > (below + kPromoteMargin / 2) * n)
            break;
        if (promote(x.handle) == SPECKV_OK) {
            moved++;
            bump(kL4Ahead);
        }
        clear_error();
    }
}

void Pool::cold_tick() {
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
    std::vector<uint64_t> batch = demote_candidates_locked(UINT64_MAX, /*below_cold_only=*/true);
    unlock();
    if (batch.size() > cold_batch_) batch.resize(cold_batch_);
    if (!batch.empty()) demote_slots(batch, /*have_lock=*/false);
    clear_error();
}

int Pool::demote(uint64_t handle) {
    if (read_only()) return fail(SPECKV_EPERM, "pool is open read-only");
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

int Pool::promote(uint64_t handle) {
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
    if (int rc = cold_->get(std::span<ColdTier::GetItem>(&it, 1)); rc != SPECKV_OK) {
        std::string why = last_error();
        if (resolve(handle, &v) == SPECKV_OK && !v.cold()) return SPECKV_OK;
        clear_error();
        return fail(rc, "block 0x%" PRIx64 " stays in L4: reading it back failed: %s", handle, why.c_str());
    }
    // The payload passed its CRC32C; its layout is still checked against the record.
    ColdHead ch;
    std::memcpy(&ch, buf.data(), std::min(buf.size(), sizeof ch));
    const uint64_t np = v.stored();  // a packed block's image pages
    const size_t sb_bytes = ch.summary_bytes;
    const size_t meta = sizeof(ColdHead) + np * sizeof(ColdPage) + np * sb_bytes;
    if (buf.size() < sizeof ch || ch.magic != kColdMagic || ch.handle != handle || ch.npages != np ||
        ch.bytes != v.bytes || ch.page_size != page_size_ || (sb_bytes != 0 && sb_bytes != summary_bytes_) ||
        ch.data_pages > np || buf.size() != meta + size_t(ch.data_pages) * page_size_)
        return fail(SPECKV_ECORRUPT, "block 0x%" PRIx64 ": its L4 copy does not match its record; it stays in L4", handle);
    const auto *cps = reinterpret_cast<const unsigned char *>(buf.data() + sizeof(ColdHead));
    bool rec;
    if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
    BlockView now{};
    if (resolve(handle, &now) != SPECKV_OK || now.tseq != v.tseq) {  // freed or moved meanwhile
        unlock();
        clear_error();
        return resolve(handle, &now);
    }
    const uint64_t slot = slot_of(handle) - 1;
    uint64_t first = UINT64_MAX;
    auto room = [&] { return find_room_locked(np, &first); };
    if (!room()) demote_locked(room, slot);
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
    uint64_t *bm = bitmap();
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
        const uint64_t q = claim_page(pe);  // a stale writer of the page's previous block may hold it a moment
        ColdPage cp;
        std::memcpy(&cp, cps + i * sizeof(ColdPage), sizeof cp);
        if (!(cp.flags & kPageZero)) {
            std::memcpy(page_data(p), data, page_size_);
            data += page_size_;
        }
        if (sb_bytes && summaries_)
            std::memcpy(summaries_ + p * summary_bytes_, cps + np * sizeof(ColdPage) + i * sb_bytes, sb_bytes);
        pe.crc.store(cp.crc, std::memory_order_relaxed);
        pe.flags.store(cp.flags & ~kPageWriterMask & (sb_bytes && summaries_ ? ~0u : ~kPageSummary),
                       std::memory_order_relaxed);
        pe.seq.store(q + 2, std::memory_order_release);
    }
    commit_placement_locked(r, slot, first, r.packed_pages, 1);  // commit point: the block is in the pool again
    h->pages_used.fetch_add(np, std::memory_order_relaxed);
    if (TenantEntry *t = share_.tenant_row(r.tenant)) t->used_pages.fetch_add(np, std::memory_order_relaxed);
    h->cold_blocks.fetch_sub(1, std::memory_order_relaxed);
    h->cold_bytes.fetch_sub(r.bytes, std::memory_order_relaxed);
    h->promotions.fetch_add(1, std::memory_order_relaxed);
    h->alloc_cursor = first + np;
    // Drop exactly the copy read above (in memory; its header is cleared
    // later, off the lock): a demoter that saw the even tier_seq may have put
    // a newer copy already, and that one must stay.
    if (have_copy) cold_->forget_if(handle, copy_gen);
    clear_error();
    unlock();
    log(SPECKV_LOG_DEBUG, "promoted block 0x%" PRIx64 " (%" PRIu64 " pages) from L4", handle, np);
    return SPECKV_OK;
}

int Pool::ensure_hot(uint64_t handle, BlockView *v) {
    for (int attempt = 0; v->cold(); attempt++) {
        if (attempt >= 8) return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving between tiers", handle);
        if (!holder()) {
            // Another process holds L4: ask it (not from our prefetch thread,
            // which must not wait; not from a read-only mapping, which cannot
            // post; not with cold.wait_ms = 0).
            const SharedHeader *h = sh();
            uint32_t pid = h->cold_pid.load();
            const bool alive = pid && process_alive(pid, h->cold_start_time);
            const bool on_pf = pf_thread_ && pf_thread_->get_id() == std::this_thread::get_id();
            // The prefetch thread asks without waiting: the block is in the
            // pool by the time it is used, if the holder keeps up.
            if (alive && on_pf && !read_only() && cold_wait_ms_ != 0) post_detached(handle);
            if (alive && (read_only() || cold_wait_ms_ == 0 || on_pf))
                return fail(SPECKV_EBUSY,
                            "block 0x%" PRIx64 " is in the L4 cold tier held by process %u%s (docs/tiers.md §9.1)", handle,
                            pid,
                            read_only() ? "; a read-only handle cannot ask it to bring the block back"
                            : on_pf     ? "; the prefetch thread asked it and does not wait"
                                        : "; cold.wait_ms = 0: not asking it to bring the block back");
            int rc = alive ? ask_holder(handle) : SPECKV_ENOENT;
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
