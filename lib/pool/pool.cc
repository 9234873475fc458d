// SPDX-License-Identifier: Apache-2.0
// The pool coordinator: open, attach and close, the pool lock, recovery
// (docs/pool-format.md "Recovery"), repair and reset. The operations live
// in the other pool_*.cc files (docs/architecture.md says which).
#include "pool/pool.h"
#include "pool/resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>

#include "codec/codec.h"
#include "events/publisher.h"
#include "util/crc32c.h"
#include "backend/prefault.h"
#include "backend/registry.h"
#include "share/index_key.h"
#include "util/flush.h"
#include "util/log_env.h"
#include "select/nmp.h"
#include "util/status.h"
#include "config/uri.h"

#include "util/seqlock.h"

#include "pool/pool_internal.h"

namespace speckv {

using namespace fmt;

// ------------------------------------------------------------------ open

void Pool::bind_layout() {
    const PoolLayout L = PoolLayout::bind(map_.base());
    page_size_ = L.page_size;
    page_shift_ = L.page_shift;
    sh_ = L.sh;
    pages_ = L.pages;
    blocks_ = L.blocks;
    bitmap_ = L.bitmap;
    buckets_ = L.buckets;
    summaries_ = L.summaries;
    summary_bytes_ = L.summary_bytes;
    bucket_mask_ = L.bucket_mask;
    tenants_ = L.tenants;
    data_ = L.data;
    share_.bind(L);
    xlate_index_.bind(L);
}

int Pool::open(const std::string &uri_text, const Config &cfg, std::unique_ptr<Pool> *out) {
    Uri uri;
    if (int rc = parse_uri(uri_text, &uri); rc != SPECKV_OK) return rc;
    int64_t size = uri.params.count("size") ? uri.params["size"] : cfg.get("pool.size");
    int64_t page_size = uri.params.count("page_size") ? uri.params["page_size"] : cfg.get("pool.page_size");
    int64_t max_blocks = uri.params.count("max_blocks") ? uri.params["max_blocks"] : cfg.get("pool.max_blocks");
    int64_t create = uri.params.count("create") ? uri.params["create"] : cfg.get("pool.create");
    const auto sumb = static_cast<uint32_t>(cfg.get("pool.summary_bytes"));
    if (page_size < 4096 || page_size > (2 << 20) || (page_size & (page_size - 1)))
        return fail(SPECKV_EINVAL, "page_size %lld is not a power of two in [4096, 2 MiB]", static_cast<long long>(page_size));
    if (size <= 0 || size % page_size)
        return fail(SPECKV_EINVAL, "pool size %lld is not a positive multiple of the page size %lld",
                    static_cast<long long>(size), static_cast<long long>(page_size));
    // The URI's size= is held to pool.size's bounds (a size past them would
    // only fail later, in fallocate, as ENOSPC).
    if (const KeySpec *ks = find_key("pool.size"); uri.params.count("size") && (size < ks->min || size > ks->max))
        return fail(SPECKV_EINVAL, "URI size=%lld is too %s: pool.size's bounds are [%lld, %lld] (4 MiB ... 64 TiB)",
                    static_cast<long long>(size), size < ks->min ? "small" : "large", static_cast<long long>(ks->min),
                    static_cast<long long>(ks->max));
    if (create < 0 || create > 1) return fail(SPECKV_EURI, "create must be 0 or 1");
    // Who may own the pool file, and the mode of a new one: the URI's
    // owner=/group=/mode= win over pool.owner/pool.group/pool.mode; carried in
    // the URI so that every backend below sees them.
    const FileAccess access = file_access(uri, &cfg);
    if (access.owner >= 0) uri.params["owner"] = access.owner;
    if (access.group >= 0) uri.params["group"] = access.group;
    uri.params["mode"] = access.mode;
    // What the backend is given to make a pool: the geometry check, the format
    // of fresh memory, and the adoption of a device mapped whole.
    struct Make {
        int64_t size, page_size, max_blocks;
        uint32_t sumb;
    } mk{size, page_size, max_blocks, sumb};
    const PoolMaker make{
        &mk,
        [](void *c) {
            auto &m = *static_cast<Make *>(c);
            Superblock plan;
            return plan_geometry(uint64_t(m.size), uint32_t(m.page_size), uint64_t(m.max_blocks), &plan, m.sumb);
        },
        [](void *c, unsigned char *b, size_t n) {
            auto &m = *static_cast<Make *>(c);
            return format_pool(b, n, static_cast<uint32_t>(m.page_size), static_cast<uint64_t>(m.max_blocks),
                               /*zeroed=*/true, m.sumb);
        },
        [](void *c, const Mapping &map, bool create) {
            auto &m = *static_cast<Make *>(c);
            bool formatted;
            return format_if_blank(map, static_cast<uint32_t>(m.page_size), static_cast<uint64_t>(m.max_blocks), create,
                                   &formatted, m.sumb);
        }};

    std::unique_ptr<Pool> p(new Pool);
    p->cfg_ = cfg;
    const Backend &backend = backend_of(uri);
    if (int rc = backend.open(uri, OpenArgs{static_cast<size_t>(size), create != 0, access, make}, &p->map_); rc)
        return rc;
    const char *label = backend.label ? backend.label(uri) : nullptr;
    const char *where = label ? label : uri.target.c_str();
    if (int rc = validate_superblock(p->map_, where); rc != SPECKV_OK) return rc;
    // No page-fault storm on the first pass after attaching (issue 27).
    if (backend.prefault)
        prefault_mapping(p->map_.base(), p->map_.size(), p->map_.writable(), static_cast<size_t>(cfg.get("pool.prefault")));
    p->bind_layout();
    p->lock_timeout_ms_ = static_cast<int>(cfg.get("lock.timeout_ms"));
    p->log_ = PoolLog{cfg.log_fn, cfg.log_user, static_cast<int>(cfg.get("log.level"))};
    p->tenant_id_ = cfg.get("tenant.id");
    p->flush_ = cfg.get("share.flush") != 0;
    p->codec_.configure(cfg);
    p->unit_slack_ = static_cast<uint32_t>(cfg.get("alloc.unit_slack"));
    p->pack_ = cfg.get("codec.pack") != 0;
    p->select_channels_ = static_cast<uint32_t>(cfg.get("select.channels"));
    p->select_recent_ = static_cast<uint32_t>(cfg.get("select.recent"));
    p->select_band_ = float(cfg.get("select.band_milli")) / 1000.0f;
    p->cache_ = std::make_unique<PageCache>(static_cast<size_t>(cfg.get("cache.bytes")), p->page_size_,
                                            cfg.get("cache.associative") != 0, static_cast<int>(cfg.get("cache.admit")));
    if (int rc = p->init_tiers(cfg); rc != SPECKV_OK) return rc;
    if (int rc = events::Publisher::open(cfg, &p->events_); rc != SPECKV_OK) return rc;  // docs/events.md
    if (int rc = p->attach(); rc != SPECKV_OK) return rc;
    if (int rc = p->init_cold(cfg); rc != SPECKV_OK) {
        std::string why = last_error();
        p->close();
        return fail(rc, "%s", why.c_str());
    }
    *out = std::move(p);
    return SPECKV_OK;
}

int Pool::open_readonly(const std::string &path, std::unique_ptr<Pool> *out, const FileAccess &access) {
    Mapping m;
    if (int rc = Mapping::open_file(path, false, &m, access); rc != SPECKV_OK) return rc;
    if (int rc = validate_superblock(m, path.c_str()); rc != SPECKV_OK) return rc;
    return open_image(std::move(m), out);
}

int Pool::open_readonly_uri(const std::string &uri_text, std::unique_ptr<Pool> *out) {
    Uri uri;
    if (int rc = parse_uri(uri_text, &uri); rc != SPECKV_OK) return rc;
    const Backend &backend = backend_of(uri);
    if (!backend.attach)
        return fail(SPECKV_ENOTSUP,
                    "%s: pools live in one process's private memory: there is nothing to open from outside it",
                    backend.scheme);
    Mapping m;
    if (int rc = backend.attach(uri, false, &m); rc != SPECKV_OK) return rc;
    return open_image(std::move(m), out);
}

int Pool::open_image(Mapping &&m, std::unique_ptr<Pool> *out) {
    if (int rc = validate_superblock(m, m.path().empty() ? "pool image" : m.path().c_str()); rc != SPECKV_OK) return rc;
    std::unique_ptr<Pool> p(new Pool);
    p->map_ = std::move(m);
    p->bind_layout();
    p->cache_ = std::make_unique<PageCache>(0, p->page_size_);
    *out = std::move(p);
    return SPECKV_OK;
}

Pool::~Pool() { close(); }

int Pool::close() {
    stop_prefetcher();
    close_cold();
    events_.reset();  // sends what is queued (bounded wait)
    if (attach_slot_ >= 0 && attach_pid_ != getpid()) attach_slot_ = -1;  // a fork() child: the record is the parent's
    if (attach_slot_ >= 0 && map_.base()) {
        bool rec;
        if (lock(&rec) == SPECKV_OK) {
            SharedHeader *h = sh();
            AttachRecord &a = h->attach[attach_slot_];
            // Our references go; our unpublished blocks become the pool's
            // (they persist, as a clean detach promises).
            uint64_t bit = uint64_t(1) << attach_slot_;
            for (RefShard &rs : refs_.ref_shards()) {
                std::lock_guard g(rs.mu);
                for (auto &[slot, e] : rs.map)
                    if (e.second) blocks()[slot].holders.fetch_and(~bit);
                rs.map.clear();
            }
            uint64_t hwm = std::min<uint64_t>(h->slot_hwm, sb()->max_blocks);
            for (uint64_t i = 0; i < hwm; i++)
                if (blocks()[i].owner == attach_id_ && blocks()[i].handle.load(std::memory_order_relaxed))
                    blocks()[i].owner = 0;
            h->lookups.fetch_add(a.lookups.exchange(0));
            h->lookup_hits.fetch_add(a.lookup_hits.exchange(0));
            h->dedup_bytes.fetch_add(a.dedup_bytes.exchange(0));
            publish_tier_counters();
            fold_tier_counters(h, a);
            a.pid.store(0);
            if (h->attached) h->attached--;
            if (h->attached == 0) h->clean.store(1);
            unlock();
        }
        attach_slot_ = -1;
    }
    map_.reset();
    return SPECKV_OK;
}

void Pool::log(int level, const char *fmtstr, ...) const {
    va_list ap;
    va_start(ap, fmtstr);
    log_.vlog(level, fmtstr, ap);
    va_end(ap);
}

// ------------------------------------------------------- lock and recovery

int Pool::lock(bool *recovered) {
    *recovered = false;
    SharedHeader *h = sh();
    if (h->lock_magic != kLockMagic)
        return fail(SPECKV_ECORRUPT, "the pool's lock is not initialised: metadata corrupt (speckv pool reset --force)");
    int e = pthread_mutex_trylock(&h->lock);  // the common, uncontended case: no clock read
    if (e == EBUSY) {
        timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += lock_timeout_ms_ / 1000;
        ts.tv_nsec += (lock_timeout_ms_ % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        e = pthread_mutex_timedlock(&h->lock, &ts);
    }
    if (e == EOWNERDEAD) {
        pthread_mutex_consistent(&h->lock);
        recover_locked("a process died holding the pool lock");
        *recovered = true;
        return SPECKV_OK;
    }
    if (e == ETIMEDOUT)
        return fail(SPECKV_EBUSY, "pool lock not acquired within %d ms (another process holds it)", lock_timeout_ms_);
    if (e == ENOTRECOVERABLE)
        return fail(SPECKV_ECORRUPT, "the pool's lock is unrecoverable (speckv pool reset --force)");
    if (e) return fail(SPECKV_EINTERNAL, "pthread_mutex_timedlock: %s", strerror(e));
    return SPECKV_OK;
}

void Pool::unlock() { pthread_mutex_unlock(&sh()->lock); }

bool Pool::any_dead_locked() const {
    for (const AttachRecord &a : sh()->attach) {
        uint32_t pid = a.pid.load();
        if (pid && !process_alive(pid, a.start_time)) return true;
    }
    return false;
}

int Pool::attach() {
    bool recovered;
    if (int rc = lock(&recovered); rc != SPECKV_OK) return rc;
    SharedHeader *h = sh();
    // Recovery frees the records of dead processes (and what they held)
    // before any of their records can be handed out again.
    if (!recovered) {
        bool anyone = false;
        for (const AttachRecord &a : h->attach) anyone |= a.pid.load() != 0;
        if (any_dead_locked()) recover_locked("attached processes died");
        else if (!anyone && h->clean.load() == 0) recover_locked("the pool was not closed cleanly");
    }
    int freeslot = -1;
    uint32_t live = 0;
    for (uint32_t i = 0; i < kMaxAttach; i++) {
        if (h->attach[i].pid.load()) live++;
        else if (freeslot < 0) freeslot = static_cast<int>(i);
    }
    h->attached = live;
    if (freeslot < 0) {
        unlock();
        return fail(SPECKV_EBUSY, "%u processes are attached: no attach record free", kMaxAttach);
    }
    AttachRecord &a = h->attach[freeslot];
    a.start_time = proc_start_time(getpid());
    a.attach_ns = now_ns();
    a.epoch = h->epoch.load();
    a.id = ++h->next_attach_id;
    a.lookups.store(0);
    a.lookup_hits.store(0);
    a.dedup_bytes.store(0);
    for (auto &t : a.tier) t.store(0);
    attach_id_ = a.id;
    a.pid.store(static_cast<uint32_t>(getpid()));
    h->attached++;
    h->clean.store(0);
    attach_slot_ = freeslot;
    attach_pid_ = getpid();
    unlock();
    return SPECKV_OK;
}

void Pool::recover_locked(const char *why) {
    log(SPECKV_LOG_WARN, "recovering pool: %s", why);
    // 1. Attach records: a dead process's record is freed and its counters
    //    kept; what it held is dropped below.
    std::vector<uint64_t> live_ids;
    const uint64_t live_mask = recover_attach_locked(&live_ids);
    // 2. Blocks: validate each record, rebuild the page bitmap and counters
    //    from the ones that stand.
    RecoveredTotals t;
    recover_blocks_locked(live_mask, live_ids, &t);
    // 3. Torn page writes.
    recover_pages_locked(live_mask);
    store_recovered_totals_locked(t);
    // 4. The hash and translation indexes are derived from the records.
    share_.rebuild_locked();
    xlate_index_.rebuild_locked();
    SharedHeader *h = sh();
    h->epoch.fetch_add(1);
    h->recoveries.fetch_add(1);
}

uint64_t Pool::recover_attach_locked(std::vector<uint64_t> *live_ids) {
    SharedHeader *h = sh();
    uint64_t live_mask = 0;
    for (uint32_t i = 0; i < kMaxAttach; i++) {
        AttachRecord &a = h->attach[i];
        uint32_t pid = a.pid.load();
        if (!pid) continue;
        if (process_alive(pid, a.start_time)) {
            live_mask |= uint64_t(1) << i;
            live_ids->push_back(a.id);
            continue;
        }
        log(SPECKV_LOG_WARN, "process %u attached to the pool is gone: its references and unpublished blocks are reclaimed",
            pid);
        h->lookups.fetch_add(a.lookups.exchange(0));
        h->lookup_hits.fetch_add(a.lookup_hits.exchange(0));
        h->dedup_bytes.fetch_add(a.dedup_bytes.exchange(0));
        fold_tier_counters(h, a);
        a.pid.store(0);
    }
    h->attached = static_cast<uint32_t>(__builtin_popcountll(live_mask));
    return live_mask;
}

void Pool::finish_cut_move_locked(uint64_t hwm) {
    SharedHeader *h = sh();
    // A block move cut short between its record's stores: finish it (its new
    // pages were written before the move was recorded).
    if (const uint64_t ms = h->move_slot.load(); ms && ms <= hwm) {
        BlockRecord &r = blocks()[ms - 1];
        if (r.handle.load()) {
            r.first_page = h->move_first_page;
            r.packed_pages = h->move_packed_pages;
            r.crc = record_crc(r);
            // The mover may have died before it bumped tier_seq: readers'
            // views of the old placement must see a move (parity kept).
            r.tier_seq.fetch_add(2);
            log(SPECKV_LOG_WARN, "recovery: finished the move of block slot %" PRIu64 " cut short by a crash", ms - 1);
        }
        h->move_slot.store(0);
    }
}

void Pool::recover_blocks_locked(uint64_t live_mask, const std::vector<uint64_t> &live_ids, RecoveredTotals *t) {
    const Superblock &s = *sb();
    SharedHeader *h = sh();
    uint64_t *bm = bitmap();
    std::memset(bm, 0, (s.n_pages + 63) / 64 * 8);
    uint64_t hwm = std::min<uint64_t>(h->slot_hwm, s.max_blocks);
    h->slot_hwm = hwm;
    uint32_t nt = std::min<uint32_t>(h->tenants_used, kMaxTenants);
    h->tenants_used = nt;
    for (uint32_t i = 0; i < nt; i++) tenants()[i].used_pages.store(0);
    finish_cut_move_locked(hwm);
    for (uint64_t i = 0; i < hwm; i++) {
        BlockRecord &r = blocks()[i];
        uint64_t hd = r.handle.load();
        if (!hd) continue;
        const bool cold = r.tier_seq.load() & 1;  // in L4: no pages to check or mark
        // A packed block's pages are its image's (fewer than npages; format 6 only).
        const uint64_t np = r.packed_pages ? r.packed_pages : r.npages;
        bool ok = (hd & ((1u << kSlotBits) - 1)) == i + 1 && (hd >> kSlotBits) == r.generation &&
                  r.generation <= kMaxGeneration &&
                  geometry_ok(s, r.first_page, r.packed_pages, r.npages, r.bytes, r.dtype, cold) && record_crc(r) == r.crc;
        for (uint64_t p = r.first_page; ok && !cold && p < r.first_page + np; p++)
            if (bm[p / 64] >> (p % 64) & 1) ok = false;  // overlaps an earlier block
        if (!ok) {
            log(SPECKV_LOG_ERROR, "recovery: block slot %" PRIu64 " is corrupt; dropped", i);
            r.handle.store(0);
            continue;
        }
        bool pub = r.state & kBlockPublished;
        uint64_t holders = r.holders.load();
        bool orphan = !pub && r.owner != 0 &&
                      std::find(live_ids.begin(), live_ids.end(), r.owner) == live_ids.end();
        if (orphan && (holders & live_mask)) {  // a live process has it pinned: it becomes the pool's, not freed
            r.owner = 0;
            orphan = false;
        }
        if (orphan || (holders & kHoldersDying)) {
            // An unpublished block of a dead process (nothing says its
            // contents were complete), or an eviction cut short by a crash.
            r.handle.store(0);
            t->reclaimed += orphan;
            continue;
        }
        r.holders.fetch_and(live_mask);  // references (and, on unpublished blocks, pins) of live processes
        t->live++;
        if (pub) {
            t->published++;
            t->shared += r.bytes;
        }
        t->by_dtype[r.dtype] += r.bytes;
        if (cold) {
            t->cold_n++;
            t->cold_b += r.bytes;
            continue;
        }
        for (uint64_t p = r.first_page; p < r.first_page + np; p++) bm[p / 64] |= uint64_t(1) << (p % 64);
        t->used += np;
        if (TenantEntry *te = share_.tenant_row(r.tenant)) te->used_pages.fetch_add(np);
    }
    // Free-slot list, lowest slot first.
    h->slot_free_head = 0;
    for (uint64_t i = hwm; i-- > 0;) {
        BlockRecord &r = blocks()[i];
        if (r.handle.load() || r.generation >= kMaxGeneration) continue;
        r.next_free = h->slot_free_head;
        h->slot_free_head = i + 1;
    }
}

void Pool::recover_pages_locked(uint64_t live_mask) {
    const Superblock &s = *sb();
    // Torn page writes: the writer died between locking and unlocking.
    // The writer's attach slot is in the page flags; a live writer's page
    // is left alone (it is mid-copy). An untagged odd page (the writer was
    // between taking the lock and tagging it) is repaired only when no
    // process is attached; otherwise it is fixed when its pages are reused.
    for (uint64_t p = 0; p < s.n_pages; p++) {
        PageEntry &pe = pages()[p];
        uint64_t q = pe.seq.load();
        if (!(q & 1)) continue;
        uint32_t fl = pe.flags.load();
        uint32_t tag = (fl & kPageWriterMask) >> kPageWriterShift;
        if (tag ? (live_mask >> (tag - 1) & 1) : live_mask != 0) continue;
        // A page still flagged zero never finished its first write: it
        // keeps reading as zeros (its media bytes may be a freed block's,
        // which must never leak). Otherwise the bytes are this block's own,
        // old and new mixed: re-seal them.
        if (!(fl & kPageZero)) pe.crc.store(crc32c(0, page_data(p), page_size_));
        // A coded page cut short holds no valid record: it is quarantined
        // (reads fail naming it) rather than decoded into garbage.
        if ((fl & (kPageZero | kPageCoded)) == kPageCoded) {
            unsigned char *dec = decoded_page_scratch(page_size_);
            if (decode_page(p, page_data(p), dec) != SPECKV_OK) {
                clear_error();
                fl |= kPageQuarantined;
            }
        }
        pe.flags.store(fl & ~(kPageWriterMask | kPageSummary));  // the summary may be of other bytes
        pe.seq.store(q + 1);
    }
}

void Pool::store_recovered_totals_locked(const RecoveredTotals &t) {
    SharedHeader *h = sh();
    h->blocks_live.store(t.live);
    h->pages_used.store(t.used);
    h->cold_blocks.store(t.cold_n);
    h->cold_bytes.store(t.cold_b);
    if (!process_alive(h->cold_pid.load(), h->cold_start_time)) h->cold_pid.store(0);
    for (int d = 0; d < 4; d++) h->bytes_by_dtype[d].store(t.by_dtype[d]);
    h->blocks_published.store(t.published);
    h->shared_bytes.store(t.shared);
    h->reclaimed.fetch_add(t.reclaimed);
    h->alloc_cursor = 0;
}


int Pool::repair() {
    if (read_only() || attach_slot_ < 0) return fail(SPECKV_EPERM, "pool is open read-only");
    bool rec;
    if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
    if (!rec) recover_locked("repair requested");
    unlock();
    return SPECKV_OK;
}

int Pool::reset_uri(const std::string &uri_text, bool even_if_attached) {
    Uri uri;
    if (int rc = parse_uri(uri_text, &uri); rc != SPECKV_OK) return rc;
    const Backend &backend = backend_of(uri);
    if (!backend.attach)
        return fail(SPECKV_ENOTSUP, "%s: pools live in one process's private memory: nothing to reset from outside",
                    backend.scheme);
    Mapping m;
    if (int rc = backend.attach(uri, true, &m); rc != SPECKV_OK) return rc;
    return reset_pool_mapping(std::move(m), uri.target, even_if_attached);
}


}  // namespace speckv
