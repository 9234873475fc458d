// SPDX-License-Identifier: Apache-2.0
// The pool core: layout, attach/detach, recovery, alloc/free, and the
// page-level read/write protocol. docs/pool-format.md explains the rules.
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
#include "share/index_key.h"
#include "util/flush.h"
#include "util/log_env.h"
#include "select/nmp.h"
#include "util/status.h"
#include "config/uri.h"

#include "util/seqlock.h"

namespace speckv {

using namespace fmt;

namespace {

uint64_t now_ns(clockid_t c = CLOCK_REALTIME) {
    timespec ts;
    clock_gettime(c, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void copy_from_pool(void *dst, const void *src, size_t n) {
    SEQLOCK_IGNORE_BEGIN();
    std::memcpy(dst, src, n);
    SEQLOCK_IGNORE_END();
}

// Copies n bytes out of the pool and returns the CRC32C of the copy, in one pass.
uint32_t copy_crc_from_pool(void *dst, const void *src, size_t n) {
    SEQLOCK_IGNORE_BEGIN();
    uint32_t c = crc32c_copy(0, dst, src, n);
    SEQLOCK_IGNORE_END();
    return c;
}

uint32_t crc_of_pool(const void *src, size_t n) {
    SEQLOCK_IGNORE_BEGIN();
    uint32_t c = crc32c(0, src, n);
    SEQLOCK_IGNORE_END();
    return c;
}

// A detaching or dead process's last published tier counters go to the
// pool-wide totals of processes gone (`speckv pool stats`).
void fold_tier_counters(SharedHeader *h, AttachRecord &a) {
    for (uint32_t i = 0; i < kTcSummed; i++) h->tier_detached[i].fetch_add(a.tier[i].exchange(0));
    for (uint32_t i = kTcSummed; i < kTierCounters; i++) a.tier[i].store(0);
}

thread_local std::vector<unsigned char> t_scratch;
// Codec staging: a page's record (cap max_record_size(page)) and a decoded page.
thread_local std::vector<unsigned char> t_record, t_decoded;
unsigned char *scratch_of(std::vector<unsigned char> &v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

// Block-record fields that lock-free readers snapshot are accessed atomically.
template <typename T>
T relaxed_load(const T &field) {
    return std::atomic_ref<T>(const_cast<T &>(field)).load(std::memory_order_relaxed);
}
template <typename T>
void relaxed_store(T &field, T v) {
    std::atomic_ref<T>(field).store(v, std::memory_order_relaxed);
}

}  // namespace

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
    auto init = [&](unsigned char *b, size_t n) {
        return format_pool(b, n, static_cast<uint32_t>(page_size), static_cast<uint64_t>(max_blocks), /*zeroed=*/true, sumb);
    };

    std::unique_ptr<Pool> p(new Pool);
    p->cfg_ = cfg;
    switch (uri.scheme) {
        case Scheme::File: {
            if (uri.named) {
                std::string dir = uri.target.substr(0, uri.target.find_last_of('/'));
                if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
                    return fail(SPECKV_EIO, "cannot create pool directory '%s': %s", dir.c_str(), strerror(errno));
            }
            int rc = Mapping::open_file(uri.target, true, &p->map_, access);
            if (rc == SPECKV_ENOENT) {
                if (!create)
                    return fail(SPECKV_ENOENT, "pool '%s' does not exist (and create=0)", uri.target.c_str());
                Superblock plan;
                if (int prc = plan_geometry(uint64_t(size), uint32_t(page_size), uint64_t(max_blocks), &plan, sumb); prc)
                    return prc;
                rc = Mapping::create_file(uri.target, static_cast<size_t>(size), init, &p->map_, true, access);
                if (rc == SPECKV_EEXIST) rc = Mapping::open_file(uri.target, true, &p->map_, access);
            }
            if (rc != SPECKV_OK) return rc;
            break;
        }
        case Scheme::Anon: {
            Superblock plan;
            if (int rc = plan_geometry(uint64_t(size), uint32_t(page_size), uint64_t(max_blocks), &plan, sumb); rc) return rc;
            if (int rc = Mapping::open_anon(static_cast<size_t>(size), &p->map_); rc) return rc;
            if (int rc = init(p->map_.base(), p->map_.size()); rc) return rc;
            break;
        }
        case Scheme::Dax: {
            if (int rc = Mapping::open_dax(uri.target, true, &p->map_); rc) return rc;
            // A device without a pool gets one over its whole size (its own
            // size wins over pool.size), unless create=0.
            bool formatted;
            if (int rc = format_if_blank(p->map_, static_cast<uint32_t>(page_size), static_cast<uint64_t>(max_blocks),
                                         create != 0, &formatted, sumb);
                rc)
                return rc;
            break;
        }
        case Scheme::Numa: {
            Superblock plan;
            if (int rc = plan_geometry(uint64_t(size), uint32_t(page_size), uint64_t(max_blocks), &plan, sumb); rc) return rc;
            // Unnamed: private memory on the node, formatted by init. Named
            // (name=): the shared tmpfs file, attached if it exists (init not
            // called) or created bound to the node (lib/backend/backend_numa.cc).
            if (int rc = Mapping::open_numa_uri(uri, static_cast<size_t>(size), create != 0, init, &p->map_); rc)
                return rc;
            break;
        }
    }
    const char *where = uri.scheme == Scheme::Anon ? "anonymous pool"
                        : uri.scheme == Scheme::Numa && !uri.named ? "NUMA pool"
                                                     : uri.target.c_str();
    if (int rc = validate_superblock(p->map_, where); rc != SPECKV_OK) return rc;
    // No page-fault storm on the first pass after attaching (issue 27).
    if (uri.scheme == Scheme::File)
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
    switch (uri.scheme) {
        case Scheme::File:
            return open_readonly(uri.target, out, file_access(uri, nullptr));
        case Scheme::Dax: {
            Mapping m;
            if (int rc = Mapping::open_dax(uri.target, false, &m); rc != SPECKV_OK) return rc;
            return open_image(std::move(m), out);
        }
        case Scheme::Numa: {  // named: its shared file; unnamed: SPECKV_ENOTSUP saying how to name it
            Mapping m;
            if (int rc = Mapping::attach_numa_uri(uri, false, &m); rc != SPECKV_OK) return rc;
            return open_image(std::move(m), out);
        }
        case Scheme::Anon:
            break;
    }
    return fail(SPECKV_ENOTSUP, "anon: pools live in one process's private memory: there is nothing to open from outside it");
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
            for (RefShard &rs : refs_) {
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
            unsigned char *dec = scratch_of(t_decoded, page_size_);
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

// ---------------------------------------------------------- alloc / free

namespace {
// First run of n clear bits in [from, to), or UINT64_MAX.
uint64_t find_run(const uint64_t *bm, uint64_t from, uint64_t to, uint64_t n) {
    uint64_t run = 0, start = 0;
    for (uint64_t i = from; i < to;) {
        uint64_t w = bm[i / 64];
        if ((i % 64) == 0 && w == ~uint64_t(0)) {
            run = 0;
            i += 64;
            continue;
        }
        if ((i % 64) == 0 && w == 0 && i + 64 <= to) {
            if (run == 0) start = i;
            run += 64;
            i += 64;
            if (run >= n) return start;
            continue;
        }
        if (w >> (i % 64) & 1) {
            run = 0;
        } else {
            if (run == 0) start = i;
            if (++run >= n) return start;
        }
        i++;
    }
    return UINT64_MAX;
}
}  // namespace

bool Pool::find_room_locked(uint64_t np, uint64_t *first, uint64_t slack, uint64_t *reserved) const {
    const Superblock &s = *sb();
    const SharedHeader *h = sh();
    *first = UINT64_MAX;
    if (reserved) *reserved = 0;
    if (!h->slot_free_head && h->slot_hwm >= s.max_blocks) return false;
    uint64_t cur = h->alloc_cursor < s.n_pages ? h->alloc_cursor : 0;
    if (slack && np + slack <= s.n_pages) {  // ahead of the cursor only: behind it lie other units' slack
        *first = find_run(bitmap(), cur, s.n_pages, np + slack);
        if (*first != UINT64_MAX) {
            if (reserved) *reserved = slack;
            return true;
        }
    }
    return find_pages_locked(np, first);
}

bool Pool::find_pages_locked(uint64_t np, uint64_t *first) const {
    const Superblock &s = *sb();
    const uint64_t cur = sh()->alloc_cursor < s.n_pages ? sh()->alloc_cursor : 0;
    *first = find_run(bitmap(), cur, s.n_pages, np);
    if (*first == UINT64_MAX) *first = find_run(bitmap(), 0, std::min(s.n_pages, cur + np - 1), np);
    return *first != UINT64_MAX;
}

int Pool::alloc_check_args(uint64_t bytes, int dtype, const speckv_hint *hint, uint64_t *tenant, uint64_t *np) const {
    if (read_only()) return fail(SPECKV_EPERM, "pool is open read-only");
    if (bytes == 0) return fail(SPECKV_EINVAL, "cannot allocate a zero-byte block");
    if (dtype < 0 || dtype > 3) return fail(SPECKV_EINVAL, "unknown dtype %d", dtype);
    if (hint && hint->struct_size != sizeof(speckv_hint))
        return fail(SPECKV_ESTRUCT, "speckv_hint.struct_size is %zu, this library knows %zu", hint->struct_size,
                    sizeof(speckv_hint));
    if (hint && hint->token_count > UINT64_MAX - hint->token_pos)
        return fail(SPECKV_EINVAL, "hint tokens [%" PRIu64 ", +%" PRIu64 ") run past 2^64", hint->token_pos,
                    hint->token_count);
    *tenant = hint ? hint->tenant : tenant_id_ >= 0 ? uint64_t(tenant_id_) : 0;
    if (!tenant_visible(*tenant))
        return fail(SPECKV_EPERM, "this pool handle is bound to tenant %" PRId64 " (tenant.id): it cannot allocate for tenant %" PRIu64,
                    tenant_id_, *tenant);
    const Superblock &s = *sb();
    // Rounded up without forming bytes + page_size - 1, which wraps for sizes
    // near 2^64 (a block record of 0 pages would be committed).
    *np = (bytes >> page_shift_) + ((bytes & (page_size_ - 1)) != 0);
    if (*np > s.n_pages || *np > UINT32_MAX)  // the record's page count is 32 bits
        return fail(SPECKV_ENOSPC, "a block of %" PRIu64 " bytes is larger than the pool's %" PRIu64 " data pages", bytes,
                    s.n_pages);
    return SPECKV_OK;
}

int Pool::alloc_quota_locked(TenantEntry *trow, uint64_t tenant, uint64_t np) {
    if (!trow || !trow->quota_pages) return SPECKV_OK;
    auto under = [&] { return trow->used_pages.load(std::memory_order_relaxed) + np <= trow->quota_pages; };
    if (!under()) evict_locked(under, &tenant);
    if (!under()) {
        uint64_t used = trow->used_pages.load(), quota = trow->quota_pages;
        unlock();
        return fail(SPECKV_EQUOTA,
                    "tenant %" PRIu64 ": %" PRIu64 " pages in use + %" PRIu64 " for this block exceed its quota of %" PRIu64
                    " pages (nothing of it left to evict)",
                    tenant, used, np, quota);
    }
    return SPECKV_OK;
}

bool Pool::alloc_room_locked(AllocPlace *pl) const {
    const Superblock &s = *sb();
    const SharedHeader *h = sh();
    const uint64_t *bm = bitmap();
    const uint64_t after = pl->after, np = pl->np;
    pl->follows = false;
    if (after != UINT64_MAX && after + np <= s.n_pages && (h->slot_free_head || h->slot_hwm < s.max_blocks)) {
        uint64_t p = after;
        while (p < after + np && !(bm[p / 64] >> (p % 64) & 1)) p++;
        if (p == after + np) {
            pl->first = after;
            pl->follows = true;
            return true;
        }
    }
    return find_room_locked(np, &pl->first, pl->unit ? uint64_t(unit_slack_) * np : 0, &pl->reserved);
}

int Pool::alloc_make_room_locked(AllocPlace *pl, int *offlock_rounds) {
    const Superblock &s = *sb();
    SharedHeader *h = sh();
    auto room = [&] { return alloc_room_locked(pl); };
    if (!room() && any_dead_locked()) recover_locked("processes died; reclaiming what they held for an alloc");
    // The L4 holder moves the coldest blocks out before anything is evicted:
    // a demoted block keeps its handle and its bytes. The victims are chosen
    // under the lock but written to L4 with it released, so the other
    // threads' and processes' allocations and frees do not wait for this
    // one's I/O; then the allocation starts over (someone may take the room
    // first). After a few rounds lost that way, it demotes holding the lock.
    if (pl->first == UINT64_MAX && !room() && holder()) {
        if (*offlock_rounds < kOfflockRounds) {
            std::vector<uint64_t> batch = demote_candidates_locked(UINT64_MAX, /*below_cold_only=*/false);
            if (batch.size() > cold_batch_) batch.resize(cold_batch_);
            if (!batch.empty()) {
                unlock();
                (*offlock_rounds)++;
                bump(kL4Offlock, demote_slots(batch, /*have_lock=*/false));
                clear_error();
                return kAllocRetry;
            }
        }
        demote_locked(room, UINT64_MAX);
    }
    if (pl->first == UINT64_MAX && !room() && h->blocks_published.load(std::memory_order_relaxed)) evict_locked(room, nullptr);
    if (pl->first == UINT64_MAX && !room()) {
        bool slots = h->slot_free_head || h->slot_hwm < s.max_blocks;
        uint64_t freep = s.n_pages - h->pages_used.load();
        unlock();
        if (!slots)
            return fail(SPECKV_ENOSPC, "all %" PRIu64 " block slots are in use (none holds an evictable published block)",
                        s.max_blocks);
        return fail(SPECKV_ENOSPC,
                    "no run of %" PRIu64 " free pages (%" PRIu64 " of %" PRIu64
                    " pages free; no evictable published block left)",
                    pl->np, freep, s.n_pages);
    }
    return SPECKV_OK;
}

uint64_t Pool::alloc_commit_locked(const AllocPlace &pl, uint64_t bytes, int dtype, uint64_t tenant, const speckv_hint *hint) {
    SharedHeader *h = sh();
    uint64_t *bm = bitmap();
    const uint64_t first = pl.first, np = pl.np;
    uint64_t slot;
    if (h->slot_free_head) {
        slot = h->slot_free_head - 1;
        h->slot_free_head = blocks()[slot].next_free;
    } else {
        slot = h->slot_hwm++;
    }
    BlockRecord &r = blocks()[slot];
    for (uint64_t p = first; p < first + np; p++) {
        bm[p / 64] |= uint64_t(1) << (p % 64);
        PageEntry &pe = pages()[p];
        pe.flags.store(kPageZero, std::memory_order_relaxed);
        uint64_t q = pe.seq.load(std::memory_order_relaxed);
        pe.seq.store((q | 1) + 1, std::memory_order_release);  // new contents: cached copies miss
    }
    // A slot's first generation starts at a number drawn from the pool's UUID
    // (32 random bits): a handle of another pool, or of this pool before it
    // was re-created, names a live block here only by a 1-in-2^32 chance
    // instead of always (every pool's first handle was 0x1000001).
    uint64_t gen = r.generation ? r.generation + 1 : first_generation();
    relaxed_store(r.first_page, first);
    relaxed_store(r.bytes, bytes);
    relaxed_store(r.npages, static_cast<uint32_t>(np));
    relaxed_store(r.dtype, static_cast<uint8_t>(dtype));
    relaxed_store(r.tenant, tenant);
    relaxed_store(r.state, uint32_t(0));
    // Read lock-free by translation and the prefetcher: stored atomically.
    relaxed_store(r.request, hint ? hint->request : uint64_t(0));
    relaxed_store(r.layer, hint ? hint->layer : uint32_t(0));
    r.hint_flags = hint ? hint->flags : 0;
    relaxed_store(r.token_pos, hint ? hint->token_pos : uint64_t(0));
    relaxed_store(r.token_count, hint ? hint->token_count : uint64_t(0));
    SEQLOCK_IGNORE_BEGIN();  // lookups compare keys optimistically, then re-check under a reference
    std::memset(r.content_hash, 0, sizeof r.content_hash);
    if (hint && (hint->flags & SPECKV_HINT_HAS_HASH)) std::memcpy(r.content_hash, hint->content_hash, sizeof r.content_hash);
    SEQLOCK_IGNORE_END();
    r.generation = gen;
    r.created_ns = now_ns(CLOCK_REALTIME_COARSE);  // ms resolution is plenty; the precise clock costs ~25 ns
    relaxed_store(r.packed_pages, uint64_t(0));  // read lock-free by resolve()
    r.next_free = 0;
    r.holders.store(0, std::memory_order_relaxed);
    r.hash_next.store(0, std::memory_order_relaxed);
    r.last_use.store(h->lru_clock.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
    r.owner = attach_id_;
    r.xlate_next.store(0, std::memory_order_relaxed);
    if (uint64_t t = r.tier_seq.load(std::memory_order_relaxed); t & 1)  // even: in the pool
        r.tier_seq.store(t + 1, std::memory_order_relaxed);
    r.crc = record_crc(r);
    uint64_t handle = (gen << kSlotBits) | (slot + 1);
    r.handle.store(handle, std::memory_order_release);  // commit point
    if (r.token_count) xlate_index_.insert_locked(slot);
    return handle;
}

int Pool::alloc(uint64_t bytes, int dtype, const speckv_hint *hint, uint64_t *out) {
    uint64_t tenant = 0, np = 0;
    if (int rc = alloc_check_args(bytes, dtype, hint, &tenant, &np); rc != SPECKV_OK) return rc;
    bool rec;
    int offlock_rounds = 0;  // demotions run with the lock released for this allocation (below)
    AllocPlace pl;
    TenantEntry *trow;
    for (;;) {
        if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
        trow = share_.tenant_row(tenant);
        if (int rc = alloc_quota_locked(trow, tenant, np); rc != SPECKV_OK) return rc;  // unlocked
        // Room is a free slot and a run of np free pages. Without it, what dead
        // processes left is reclaimed first, then unreferenced published blocks
        // are evicted, least recently used first.
        // Layer-aware placement (docs/tiers.md §10): a block of a (request,
        // layer) goes right after that unit's latest block when those pages are
        // free, so a unit's pages form one run for burst reads; a unit's first
        // block is placed with room for alloc.unit_slack more after it.
        pl = AllocPlace{};
        pl.np = np;
        pl.unit = hint && hint->token_count && unit_slack_;
        pl.after = pl.unit ? xlate_index_.unit_end_locked(tenant, hint->request, hint->layer) : UINT64_MAX;
        const int rc = alloc_make_room_locked(&pl, &offlock_rounds);
        if (rc == kAllocRetry) continue;  // unlocked: start over
        if (rc != SPECKV_OK) return rc;   // unlocked
        break;
    }
    SharedHeader *h = sh();
    const uint64_t handle = alloc_commit_locked(pl, bytes, dtype, tenant, hint);
    h->blocks_live.fetch_add(1, std::memory_order_relaxed);
    h->pages_used.fetch_add(np, std::memory_order_relaxed);
    h->bytes_by_dtype[dtype].fetch_add(bytes, std::memory_order_relaxed);
    if (trow) trow->used_pages.fetch_add(np, std::memory_order_relaxed);
    if (!pl.follows) h->alloc_cursor = pl.first + np + pl.reserved;  // past the unit's room: other units start beyond it
    unlock();
    bump(kAllocs);
    if (pl.after != UINT64_MAX) {
        bump(kUnitFollowers);
        if (pl.follows) bump(kUnitContiguous);
    }
    *out = handle;
    return SPECKV_OK;
}


int Pool::wait_move(uint64_t handle, uint32_t spins, uint64_t *deadline) const {
    if (spins < 64) return SPECKV_OK;
    sched_yield();
    // A move holds the pool lock: it lasts as long as the lock may be held.
    const uint64_t now = now_ns(CLOCK_MONOTONIC_COARSE);
    if (!*deadline) *deadline = now + uint64_t(lock_timeout_ms_) * 1000000u;
    else if (now > *deadline)
        return fail(SPECKV_EBUSY,
                    "block 0x%" PRIx64 " stayed in the middle of a move for %d ms (lock.timeout_ms): a process died "
                    "moving it? (the next recovery finishes the move)",
                    handle, lock_timeout_ms_);
    return SPECKV_OK;
}

bool Pool::pinned(uint64_t handle) {
    PinShard &ps = pin_shard(handle);
    if (ps.total.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard g(ps.mu);
    return ps.pinned(handle);
}

int Pool::wait_even(const PageEntry &pe, uint64_t *seq) const {
    // A page is odd only for the length of one page copy; a long wait means
    // the writer died mid-write (recovery on the next open repairs it).
    for (uint64_t spins = 0;; spins++) {
        uint64_t q = pe.seq.load(std::memory_order_acquire);
        if (!(q & 1)) {
            *seq = q;
            return SPECKV_OK;
        }
        if (spins > 64) sched_yield();
        if (spins > 200000) {
            uint64_t p = static_cast<uint64_t>(&pe - pages());
            return fail(SPECKV_EBUSY, "page %" PRIu64 " stays locked by a writer (dead process? run speckv pool check)", p);
        }
    }
}

void (*testing::placement_hook)(uint64_t slot, int stage) = nullptr;

void Pool::commit_placement_locked(BlockRecord &r, uint64_t slot, uint64_t first_page, uint64_t packed_pages,
                                   uint64_t tier_step) {
    SharedHeader *h = sh();
    h->move_first_page = first_page;
    h->move_packed_pages = packed_pages;
    h->move_slot.store(slot + 1, std::memory_order_seq_cst);  // from here recovery completes the move
    // Lock-free readers (resolve) read the two fields, then move_slot: one
    // that saw either new field sees this move in progress (or tier_seq moved).
    std::atomic_thread_fence(std::memory_order_release);
    std::atomic_ref<uint64_t>(r.first_page).store(first_page, std::memory_order_relaxed);
    if (testing::placement_hook) [[unlikely]]
        testing::placement_hook(slot, 0);
    std::atomic_ref<uint64_t>(r.packed_pages).store(packed_pages, std::memory_order_relaxed);
    r.crc = record_crc(r);
    if (testing::placement_hook) [[unlikely]]
        testing::placement_hook(slot, 1);
    // Published before the move is over: a reader that took any field of the
    // new placement finds either move_slot still set or tier_seq moved, and
    // reads the record again.
    r.tier_seq.fetch_add(tier_step, std::memory_order_seq_cst);
    h->move_slot.store(0, std::memory_order_seq_cst);
}

uint64_t Pool::claim_page(PageEntry &pe) const {
    for (;;) {
        uint64_t q;
        if (wait_even(pe, &q) != SPECKV_OK) {
            clear_error();
            return pe.seq.load() & ~uint64_t(1);  // a dead writer: the page is ours now
        }
        if (pe.seq.compare_exchange_weak(q, q + 1)) return q;
    }
}

int Pool::free(uint64_t handle) {
    if (read_only()) return fail(SPECKV_EPERM, "pool is open read-only");
    BlockView v{};
    if (int rc = resolve(handle, &v); rc != SPECKV_OK) return rc;
    // A published block is shared: free drops this process's reference.
    if (relaxed_load(v.rec->state) & kBlockPublished) {
        if (int rc = release_ref(handle); rc != SPECKV_OK) return rc;
        bump(kFrees);
        return SPECKV_OK;
    }
    bool rec;
    if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
    if (int rc = resolve(handle, &v); rc != SPECKV_OK) {
        unlock();
        return rc;
    }
    if (v.rec->state & kBlockPublished) {  // published meanwhile
        unlock();
        if (int rc = release_ref(handle); rc != SPECKV_OK) return rc;
        bump(kFrees);
        return SPECKV_OK;
    }
    if (pinned(handle)) {
        unlock();
        return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " is pinned: unpin it before freeing", handle);
    }
    // Pinned by another process (its pin holds a reference): not under its pointer.
    const uint64_t mine = attach_slot_ >= 0 ? uint64_t(1) << attach_slot_ : 0;
    if ((v.rec->holders.load(std::memory_order_seq_cst) & ~mine) && any_dead_locked())
        recover_locked("a process that pinned a block being freed is gone");
    if (uint64_t others = v.rec->holders.load(std::memory_order_seq_cst) & ~mine & ~kHoldersDying) {
        const uint32_t pid = sh()->attach[__builtin_ctzll(others)].pid.load();
        unlock();
        return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " is pinned by process %u: it must unpin it before the block is freed",
                    handle, pid);
    }
    if (int rc = resolve(handle, &v); rc != SPECKV_OK) {  // recovery may have dropped it
        unlock();
        return rc;
    }
    release_block_locked(const_cast<BlockRecord &>(*v.rec), handle);
    unlock();
    bump(kFrees);
    return SPECKV_OK;
}

void Pool::release_block_locked(BlockRecord &r, uint64_t handle) {
    SharedHeader *h = sh();
    if (r.token_count) xlate_index_.remove_locked(static_cast<uint64_t>(handle & ((1u << kSlotBits) - 1)) - 1);
    r.handle.store(0, std::memory_order_seq_cst);  // commit point: the block is gone
    if (r.tier_seq.load(std::memory_order_relaxed) & 1) {  // in L4: no pages here; its L4 copy goes
        h->cold_blocks.fetch_sub(1, std::memory_order_relaxed);
        h->cold_bytes.fetch_sub(r.bytes, std::memory_order_relaxed);
        cold_forget_locked(handle);
        if (r.state & kBlockPublished) {
            h->blocks_published.fetch_sub(1, std::memory_order_relaxed);
            h->shared_bytes.fetch_sub(r.bytes, std::memory_order_relaxed);
        }
        r.holders.store(0, std::memory_order_relaxed);
        h->blocks_live.fetch_sub(1, std::memory_order_relaxed);
        h->bytes_by_dtype[r.dtype & 3].fetch_sub(r.bytes, std::memory_order_relaxed);
        if (heat_) heat_->forget(handle);
        if (r.generation < kMaxGeneration) {
            r.next_free = h->slot_free_head;
            h->slot_free_head = (handle & ((1u << kSlotBits) - 1));
        }
        return;
    }
    // Writers lock a page, then re-check the handle; wait for any that got in first.
    const uint64_t np = r.packed_pages ? r.packed_pages : r.npages;
    bool stuck = false;
    for (uint64_t p = r.first_page; p < r.first_page + np; p++) {
        uint64_t q;
        if (wait_even(pages()[p], &q) != SPECKV_OK) stuck = true;
    }
    clear_error();
    if (!stuck) {
        uint64_t *bm = bitmap();
        for (uint64_t p = r.first_page; p < r.first_page + np; p++) bm[p / 64] &= ~(uint64_t(1) << (p % 64));
        h->pages_used.fetch_sub(np, std::memory_order_relaxed);
        if (r.first_page < h->alloc_cursor) h->alloc_cursor = r.first_page;
    } else {
        log(SPECKV_LOG_WARN, "freeing block 0x%" PRIx64 ": a page is stuck in a write; its pages stay reserved until recovery",
            handle);
    }
    if (r.state & kBlockPublished) {
        h->blocks_published.fetch_sub(1, std::memory_order_relaxed);
        h->shared_bytes.fetch_sub(r.bytes, std::memory_order_relaxed);
    }
    if (TenantEntry *t = share_.tenant_row(r.tenant)) t->used_pages.fetch_sub(np, std::memory_order_relaxed);
    r.holders.store(0, std::memory_order_relaxed);
    h->blocks_live.fetch_sub(1, std::memory_order_relaxed);
    h->bytes_by_dtype[r.dtype & 3].fetch_sub(r.bytes, std::memory_order_relaxed);
    if (heat_) heat_->forget(handle);
    if (r.generation < kMaxGeneration) {  // a slot whose generation ran out is retired
        r.next_free = h->slot_free_head;
        h->slot_free_head = (handle & ((1u << kSlotBits) - 1));
    }
}

// ---------------------------------------------------------------- sharing

template <typename Fits>
uint64_t Pool::evict_locked(Fits fits, const uint64_t *tenant_only) {
    SharedHeader *h = sh();
    uint64_t hwm = std::min<uint64_t>(h->slot_hwm, sb()->max_blocks);
    std::vector<std::pair<uint64_t, uint64_t>> cand;  // (last use, slot)
    for (uint64_t i = 0; i < hwm; i++) {
        const BlockRecord &r = blocks()[i];
        if (!r.handle.load(std::memory_order_relaxed) || !(r.state & kBlockPublished) ||
            r.holders.load(std::memory_order_relaxed) != 0 || (tenant_only && r.tenant != *tenant_only) ||
            (r.tier_seq.load(std::memory_order_relaxed) & 1))  // in L4: holds no pool page
            continue;
        cand.emplace_back(r.last_use.load(std::memory_order_relaxed), i);
    }
    // The scan costs O(blocks), so it is amortised: once it runs, at least
    // 1/64 of the candidates go (the coldest), even if fewer would fit.
    size_t batch = std::max<size_t>(1, cand.size() / 64);
    auto order = [&](size_t upto) {
        upto = std::min(upto, cand.size());
        std::partial_sort(cand.begin(), cand.begin() + static_cast<long>(upto), cand.end());
        return upto;
    };
    size_t sorted = order(batch);
    uint64_t n = 0;
    for (size_t c = 0; c < cand.size(); c++) {
        if (c == sorted) sorted = order(cand.size());  // the batch was not enough: all of them, in order
        const auto &[use, slot] = cand[c];
        BlockRecord &r = blocks()[slot];
        uint64_t hd = r.handle.load();
        uint64_t none = 0;
        // Dying first: a lookup racing us either got its reference in
        // before (we skip the block) or sees Dying and misses.
        if (!hd || !r.holders.compare_exchange_strong(none, kHoldersDying, std::memory_order_seq_cst)) continue;
        share_.remove_locked(slot, flush_);
        if (events_) events_->removed(r.tenant, r.content_hash, events::Medium::kPool);
        release_block_locked(r, hd);
        h->evictions.fetch_add(1, std::memory_order_relaxed);
        n++;
        log(SPECKV_LOG_DEBUG, "evicted published block 0x%" PRIx64, hd);
        if (n >= batch && fits()) break;
    }
    return n;
}

uint64_t Pool::evict_until_locked(const std::function<bool()> &fits, const uint64_t *tenant_only) {
    return evict_locked(fits, tenant_only);
}

int Pool::acquire_ref(uint64_t handle, bool need_published) {
    uint64_t slot = (handle & ((1u << kSlotBits) - 1)) - 1;
    BlockRecord &r = blocks()[slot];
    RefShard &rs = ref_shard(slot);
    std::lock_guard g(rs.mu);
    // An entry whose count is 0 is kept for the next reference (a pin and
    // unpin in a loop then allocate nothing); it stands for no reference.
    auto it = rs.map.find(slot);
    if (it != rs.map.end() && it->second.second > 0) {
        if (it->second.first == handle) {
            it->second.second++;
            return SPECKV_OK;
        }
        if (r.handle.load(std::memory_order_acquire) == it->second.first)
            return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " is not live (its slot holds a newer block)", handle);
        it->second.second = 0;  // a reference to a block a forced reset wiped (the reset cleared its bit)
    }
    uint64_t bit = uint64_t(1) << attach_slot_;
    uint64_t cur = r.holders.load(std::memory_order_relaxed);
    do {
        if (cur & kHoldersDying) return fail(SPECKV_EBADHANDLE, "block 0x%" PRIx64 " is being evicted", handle);
    } while (!r.holders.compare_exchange_weak(cur, cur | bit, std::memory_order_seq_cst));
    if (r.handle.load(std::memory_order_seq_cst) != handle ||
        (need_published && !(relaxed_load(r.state) & kBlockPublished))) {
        r.holders.fetch_and(~bit, std::memory_order_relaxed);
        return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " is not live (freed meanwhile)", handle);
    }
    if (it != rs.map.end()) it->second = std::make_pair(handle, 1u);
    else rs.map.emplace(slot, std::make_pair(handle, 1u));
    return SPECKV_OK;
}

int Pool::release_ref(uint64_t handle) {
    uint64_t slot = (handle & ((1u << kSlotBits) - 1)) - 1;
    RefShard &rs = ref_shard(slot);
    std::lock_guard g(rs.mu);
    auto it = rs.map.find(slot);
    if (it == rs.map.end() || it->second.first != handle || it->second.second == 0)
        return fail(SPECKV_EBADHANDLE,
                    "block 0x%" PRIx64 " is published and this process holds no reference to it (double free?)", handle);
    if (--it->second.second == 0) {
        if (rs.map.size() > kKeepIdle) rs.map.erase(it);
        BlockRecord &r = blocks()[slot];
        // A logical clock, not time: eviction order is then a function of
        // the order of operations alone (replays are deterministic). Only
        // published blocks are evicted by it; an unpublished one's reference
        // is a pin's, and bumping the shared clock on every unpin would make
        // threads that pin different blocks contend for its cache line.
        if (relaxed_load(r.state) & kBlockPublished)
            r.last_use.store(sh()->lru_clock.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
        r.holders.fetch_and(~(uint64_t(1) << attach_slot_), std::memory_order_release);
    }
    return SPECKV_OK;
}

int Pool::publish(uint64_t handle, const uint8_t *hash, uint64_t *canonical) {
    if (!hash) return fail(SPECKV_EINVAL, "hash is NULL");
    if (read_only()) return fail(SPECKV_EPERM, "pool is open read-only");
    if (BlockView v0{}; resolve(handle, &v0) == SPECKV_OK && v0.cold())  // published blocks may be flushed: in the pool
        if (int rc = ensure_hot(handle, &v0); rc != SPECKV_OK) return rc;
    bool rec;
    if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
    BlockView v{};
    if (int rc = resolve(handle, &v); rc != SPECKV_OK) {
        unlock();
        return rc;
    }
    BlockRecord &r = const_cast<BlockRecord &>(*v.rec);
    if (r.state & kBlockPublished) {
        unlock();
        return fail(SPECKV_EPERM, "block 0x%" PRIx64 " is already published (a published block is immutable)", handle);
    }
    AttachRecord &me = sh()->attach[attach_slot_];
    // A bounded chain (issue 27): a bucket already holding kIndexMaxChain
    // blocks takes no more, so no publish walks a long chain under the lock.
    auto chain_full = [&] {
        uint64_t idx = std::atomic_ref<uint64_t>(buckets()[share_.bucket_of(r.tenant, hash)]).load(std::memory_order_acquire);
        uint64_t n = 0;
        for (; idx && idx <= sb()->max_blocks && n < kIndexMaxChain; n++)
            idx = blocks()[idx - 1].hash_next.load(std::memory_order_acquire);
        return n >= kIndexMaxChain;
    };
    if (uint64_t e = share_.find_published_locked(r.tenant, hash)) {
        BlockRecord &er = blocks()[e - 1];
        uint64_t eh = er.handle.load();
        me.dedup_bytes.fetch_add(er.bytes, std::memory_order_relaxed);
        if (canonical) {
            if (int rc = acquire_ref(eh, true); rc != SPECKV_OK) {
                unlock();
                return rc;
            }
            *canonical = eh;
        }
        unlock();
        return fail(SPECKV_EEXIST,
                    "tenant %" PRIu64 " already has block 0x%" PRIx64 " published under this hash; block 0x%" PRIx64
                    " stays unpublished",
                    r.tenant, eh, handle);
    }
    if (chain_full()) {
        unlock();
        return fail(SPECKV_EBUSY,
                    "the hash index bucket of this hash already holds %" PRIu64 " blocks (its most); block 0x%" PRIx64
                    " stays unpublished",
                    kIndexMaxChain, handle);
    }
    // Commit: the state goes first, so a writer that locks a page from now
    // on sees it and backs off; then in-flight writes drain; then the block
    // becomes findable.
    SEQLOCK_IGNORE_BEGIN();
    std::memcpy(r.content_hash, hash, sizeof r.content_hash);
    SEQLOCK_IGNORE_END();
    std::atomic_ref<uint32_t>(r.state).store(r.state | kBlockPublished, std::memory_order_seq_cst);
    for (uint64_t p = v.first_page; p < v.first_page + v.stored(); p++) {
        uint64_t q;
        if (int rc = wait_even(pages()[p], &q); rc != SPECKV_OK) {
            std::atomic_ref<uint32_t>(r.state).store(r.state & ~kBlockPublished, std::memory_order_seq_cst);
            unlock();
            return rc;
        }
    }
    r.crc = record_crc(r);
    r.owner = 0;
    if (int rc = acquire_ref(handle, true); rc != SPECKV_OK) {  // cannot fail: we hold the lock and the block
        std::atomic_ref<uint32_t>(r.state).store(r.state & ~kBlockPublished, std::memory_order_seq_cst);
        r.crc = record_crc(r);
        unlock();
        return rc;
    }
    uint64_t slot = static_cast<uint64_t>(r.handle.load() & ((1u << kSlotBits) - 1)) - 1;
    if (flush_) {
        // Without hardware coherence, another host must find the data, the
        // page entries and the record in memory before it can find the link.
        writeback_range(page_data(v.first_page), size_t(v.stored()) << page_shift_);
        writeback_range(&pages()[v.first_page], v.stored() * sizeof(PageEntry));
        writeback_range(&r, sizeof r);
    }
    share_.insert_locked(slot);
    if (flush_) {
        writeback_range(&r, sizeof r);
        writeback_range(&buckets()[share_.bucket_of(r.tenant, r.content_hash)], 8);
    }
    sh()->blocks_published.fetch_add(1, std::memory_order_relaxed);
    sh()->shared_bytes.fetch_add(r.bytes, std::memory_order_relaxed);
    if (events_) events_->stored(r.tenant, r.content_hash, r.token_count, events::Medium::kPool);
    unlock();
    if (canonical) *canonical = handle;
    return SPECKV_OK;
}

int Pool::lookup(uint64_t tenant, const uint8_t *hash, uint64_t *out) {
    if (!hash || !out) return fail(SPECKV_EINVAL, "hash and out must not be NULL");
    if (!tenant_visible(tenant))
        return fail(SPECKV_EPERM, "this pool handle is bound to tenant %" PRId64 " (tenant.id): it cannot look up tenant %" PRIu64,
                    tenant_id_, tenant);
    if (read_only() || attach_slot_ < 0) return fail(SPECKV_EPERM, "pool is open read-only");
    SharedHeader *h = sh();
    AttachRecord &me = h->attach[attach_slot_];
    me.lookups.fetch_add(1, std::memory_order_relaxed);
    const uint64_t max = sb()->max_blocks;
    std::atomic_ref<uint64_t> head(buckets()[share_.bucket_of(tenant, hash)]);
    auto hit = [&](const BlockRecord &r, uint64_t hd) {
        if (flush_) {
            // Read what the publishing host wrote back, not stale lines (a
            // block in L4 has none here; a damaged record is resolve()'s to report).
            const uint64_t first = relaxed_load(r.first_page), packed = relaxed_load(r.packed_pages);
            const uint32_t npages = relaxed_load(r.npages);
            const uint64_t np = packed ? packed : npages;
            if (!(r.tier_seq.load(std::memory_order_acquire) & 1) &&
                geometry_ok(*sb(), first, packed, npages, relaxed_load(r.bytes), relaxed_load(r.dtype), false)) {
                invalidate_range(&pages()[first], np * sizeof(PageEntry));
                invalidate_range(page_data(first), size_t(np) << page_shift_);
            }
        }
        me.lookup_hits.fetch_add(1, std::memory_order_relaxed);
        me.dedup_bytes.fetch_add(relaxed_load(r.bytes), std::memory_order_relaxed);
        *out = hd;
        return SPECKV_OK;
    };
    // Lock-free: walk the chain, take a reference on a match, then confirm
    // the match under it (a referenced published block cannot change). A
    // miss counts only if no chain changed meanwhile (index_seq).
    for (int attempt = 0; attempt < 8; attempt++) {
        uint64_t s1 = h->index_seq.load(std::memory_order_acquire);
        if (s1 & 1) {
            sched_yield();
            continue;
        }
        if (flush_) invalidate_range(&buckets()[share_.bucket_of(tenant, hash)], 8);
        uint64_t idx = head.load(std::memory_order_acquire);
        for (uint64_t steps = 0; idx && idx <= max && steps <= max; steps++) {
            const BlockRecord &r = blocks()[idx - 1];
            if (flush_) invalidate_range(&r, sizeof r);
            uint64_t hd = r.handle.load(std::memory_order_acquire);
            if (hd && (relaxed_load(r.state) & kBlockPublished) && relaxed_load(r.tenant) == tenant && ShareTable::key_equal(r, hash) &&
                acquire_ref(hd, true) == SPECKV_OK) {
                if (relaxed_load(r.tenant) == tenant && ShareTable::key_equal(r, hash)) return hit(r, hd);
                release_ref(hd);
            }
            idx = r.hash_next.load(std::memory_order_acquire);
        }
        std::atomic_thread_fence(std::memory_order_acquire);
        if (h->index_seq.load(std::memory_order_relaxed) == s1)
            return fail(SPECKV_ENOENT, "tenant %" PRIu64 " has no block published under this hash", tenant);
    }
    // The index kept changing under us: look under the lock.
    bool rec;
    if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
    uint64_t e = share_.find_published_locked(tenant, hash);
    int rc = e ? acquire_ref(blocks()[e - 1].handle.load(), true) : SPECKV_ENOENT;
    uint64_t hd = e ? blocks()[e - 1].handle.load() : 0;
    unlock();
    if (rc == SPECKV_OK) return hit(blocks()[e - 1], hd);
    return fail(SPECKV_ENOENT, "tenant %" PRIu64 " has no block published under this hash", tenant);
}

int Pool::tenant_set_quota(uint64_t tenant, uint64_t max_pages) {
    if (read_only()) return fail(SPECKV_EPERM, "pool is open read-only");
    if (tenant_id_ >= 0) return fail(SPECKV_EPERM, "a pool handle bound to a tenant (tenant.id) cannot set quotas");
    bool rec;
    if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
    SharedHeader *h = sh();
    TenantEntry *t = share_.tenant_row(tenant);
    if (!t) {
        if (max_pages == 0) {
            unlock();
            return SPECKV_OK;
        }
        if (h->tenants_used >= kMaxTenants) {
            unlock();
            return fail(SPECKV_ENOSPC, "the pool's tenant table is full (%u tenants with a quota)", kMaxTenants);
        }
        t = &tenants()[h->tenants_used];
        t->tenant = tenant;
        t->reserved = 0;
        uint64_t used = 0, hwm = std::min<uint64_t>(h->slot_hwm, sb()->max_blocks);
        for (uint64_t i = 0; i < hwm; i++)
            if (const BlockRecord &r = blocks()[i]; r.handle.load() && r.tenant == tenant && !(r.tier_seq.load() & 1))
                used += r.packed_pages ? r.packed_pages : r.npages;
        t->used_pages.store(used);
        h->tenants_used++;
    }
    t->quota_pages = max_pages;
    unlock();
    return SPECKV_OK;
}

int Pool::tenant_usage(uint64_t tenant, uint64_t *used, uint64_t *quota) {
    if (!tenant_visible(tenant))
        return fail(SPECKV_EPERM, "this pool handle is bound to tenant %" PRId64 " (tenant.id)", tenant_id_);
    uint64_t u = 0, q = 0;
    if (const TenantEntry *t = share_.tenant_row(tenant)) {
        u = t->used_pages.load();
        q = t->quota_pages;
    } else {
        uint64_t hwm = std::min<uint64_t>(sh()->slot_hwm, sb()->max_blocks);
        for (uint64_t i = 0; i < hwm; i++) {
            const BlockRecord &r = blocks()[i];
            if (r.handle.load() && relaxed_load(r.tenant) == tenant && !(r.tier_seq.load() & 1))
                u += relaxed_load(r.packed_pages) ? relaxed_load(r.packed_pages) : relaxed_load(r.npages);
        }
    }
    if (used) *used = u;
    if (quota) *quota = q;
    return SPECKV_OK;
}

int Pool::repair() {
    if (read_only() || attach_slot_ < 0) return fail(SPECKV_EPERM, "pool is open read-only");
    bool rec;
    if (int rc = lock(&rec); rc != SPECKV_OK) return rc;
    if (!rec) recover_locked("repair requested");
    unlock();
    return SPECKV_OK;
}

// ------------------------------------------------------------ read/write

int Pool::lock_page(uint64_t page, uint64_t handle, const BlockRecord *rec, uint64_t *seq, uint64_t tseq) {
    PageEntry &pe = pages()[page];
    for (;;) {
        uint64_t q;
        if (int rc = wait_even(pe, &q); rc != SPECKV_OK) return rc;
        if (pe.seq.compare_exchange_weak(q, q + 1, std::memory_order_seq_cst)) {
            // Tag the page with our attach slot: if we die now, recovery
            // knows whose write this was (kPageWriterMask).
            if (attach_slot_ >= 0) pe.flags.fetch_or(uint32_t(attach_slot_ + 1) << kPageWriterShift, std::memory_order_relaxed);
            if (rec->handle.load(std::memory_order_seq_cst) != handle) {
                pe.flags.fetch_and(~kPageWriterMask, std::memory_order_relaxed);
                pe.seq.store(q + 2, std::memory_order_release);
                return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " was freed during the write", handle);
            }
            if (tseq != UINT64_MAX && rec->tier_seq.load(std::memory_order_seq_cst) != tseq) {
                pe.flags.fetch_and(~kPageWriterMask, std::memory_order_relaxed);
                pe.seq.store(q + 2, std::memory_order_release);
                return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " moved between tiers during the write", handle);
            }
            *seq = q;
            return SPECKV_OK;
        }
    }
}

int Pool::write(uint64_t handle, uint64_t off, const void *src, size_t len) {
    if (read_only()) return fail(SPECKV_EPERM, "pool is open read-only");
    int attempt = 0;
restart:
    BlockView r{};
    if (int rc = resolve(handle, &r); rc != SPECKV_OK) return rc;
    if (r.cold()) [[unlikely]]
        if (int rc = ensure_hot(handle, &r); rc != SPECKV_OK) return rc;
    if (heat_) [[unlikely]]
        heat_->touch(handle, now_ns(CLOCK_MONOTONIC_COARSE));
    if (!src && len) return fail(SPECKV_EINVAL, "src is NULL");
    if (off > r.bytes || len > r.bytes - off)
        return fail(SPECKV_ERANGE, "write of %zu bytes at offset %" PRIu64 " runs past the block's %" PRIu64 " bytes", len,
                    off, r.bytes);
    if (pinned(handle)) return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " is pinned: unpin it before writing", handle);
    if (r.packed) [[unlikely]] {  // back to a page per page first (fresh pages; the block stays packed on failure)
        if (relaxed_load(r.rec->state) & kBlockPublished)
            return fail(SPECKV_EPERM, "block 0x%" PRIx64 " is published: its contents are immutable", handle);
        if (int rc = unpack_block(handle, &r); rc != SPECKV_OK) return rc;
        if (r.packed || r.cold()) {  // packed or moved again meanwhile
            if (++attempt > 16) return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving during the write", handle);
            goto restart;
        }
    }
    auto *in = static_cast<const unsigned char *>(src);
    size_t done = 0;
    while (done < len) {
        uint64_t pos = off + done;
        uint64_t page = r.first_page + (pos >> page_shift_);  // page size is a power of two: no division
        size_t poff = pos & (page_size_ - 1);
        size_t plen = std::min<size_t>(len - done, page_size_ - poff);
        uint64_t q;
        if (int rc = lock_page(page, handle, r.rec, &q); rc != SPECKV_OK) return rc;
        PageEntry &pe = pages()[page];
        if (r.moved()) [[unlikely]] {  // moved to L4 (or back) since resolve: this page is not the block's now
            pe.flags.fetch_and(~kPageWriterMask, std::memory_order_relaxed);
            pe.seq.store(q + 2, std::memory_order_release);
            if (++attempt > 16) return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving between tiers during the write", handle);
            goto restart;  // rewriting what was written already is harmless: same bytes
        }
        if (std::atomic_ref<const uint32_t>(r.rec->state).load(std::memory_order_seq_cst) & kBlockPublished) {
            pe.flags.fetch_and(~kPageWriterMask, std::memory_order_relaxed);
            pe.seq.store(q + 2, std::memory_order_release);
            return fail(SPECKV_EPERM, "block 0x%" PRIx64 " is published: its contents are immutable", handle);
        }
        unsigned char *d = page_data(page);
        uint32_t fl = pe.flags.load(std::memory_order_relaxed) & ~kPageWriterMask;
        bool whole = plen == page_size_;
        if ((fl & kPageZero) && !whole) {
            std::memset(d, 0, page_size_);
        } else if ((fl & (kPageZero | kPageCoded)) == kPageCoded && !whole) {
            // A partial write into a coded page: the rest of the page is the
            // record's values. A record that does not check keeps the page
            // as it is (quarantined): nothing is written over it.
            unsigned char *dec = scratch_of(t_decoded, page_size_);
            int rc = crc32c(0, d, page_size_) == pe.crc.load(std::memory_order_relaxed) ? decode_page(page, d, dec)
                     : fail(SPECKV_ECORRUPT, "page %" PRIu64 " failed its CRC32C check; page quarantined", page);
            if (rc != SPECKV_OK) {
                pe.flags.store(fl | kPageQuarantined, std::memory_order_relaxed);
                pe.seq.store(q + 2, std::memory_order_release);
                return rc;
            }
            std::memcpy(d, dec, page_size_);
        }
        // A whole page is copied and checksummed in one pass (issue 27).
        const bool fused = whole;
        const uint32_t fused_crc = fused ? crc32c_copy(0, d, in + done, plen) : 0;
        if (!fused) std::memcpy(d + poff, in + done, plen);
        // A write that reaches the end of the page's bytes completes it: the
        // page is then stored coded if its block's preset says so. L1 gets the
        // values a read will return (decoded, not what was written).
        uint64_t pstart = pos - poff;
        size_t logical = static_cast<size_t>(std::min<uint64_t>(page_size_, r.bytes - pstart));
        const unsigned char *l1 = d;
        bool coded = false, summarized = false;
        if (poff + plen == logical) {
            const uint32_t hf = relaxed_load(r.rec->hint_flags);
            uint8_t mode = codec_mode_for(hf, r.dtype);
            if (mode == codec::kModeCount) [[unlikely]]
                mode = adaptive_mode(relaxed_load(r.rec->layer), hf, d, logical, r.dtype);
            if (mode) {
                unsigned char *dec = scratch_of(t_decoded, page_size_);
                if ((coded = encode_page_locked(page, logical, mode, r.dtype, dec))) l1 = dec;
            }
            // A completed K page gets its summary, of the values reads return.
            if ((hf & SPECKV_HINT_KEYS) && summaries_ && select_channels_)
                summarized = summarize_page_locked(page, l1, logical, r.dtype);
        }
        pe.crc.store(fused && !coded ? fused_crc : crc32c(0, d, page_size_), std::memory_order_relaxed);
        // A partial write into a quarantined page keeps the quarantine: the
        // rest of the page still holds the bytes that failed.
        uint32_t nfl = fl & ~(kPageZero | kPageCoded | kPageSummary);
        if (whole) nfl &= ~kPageQuarantined;
        if (coded) nfl |= kPageCoded;
        if (summarized) nfl |= kPageSummary;
        pe.flags.store(nfl, std::memory_order_relaxed);
        // Into L1 as the admission policy says (config cache.admit): stored,
        // or marked so that its first read here stores it. Done while the
        // page is still locked, so a copy is exactly version q + 2.
        if (!(nfl & kPageQuarantined)) cache_->put_written(page, q + 2, sh()->epoch.load(std::memory_order_relaxed), l1);
        pe.seq.store(q + 2, std::memory_order_release);
        done += plen;
    }
    bump(kWBytes, len);
    // The write that completes the block seals it: its coded pages are
    // packed into fewer pages (format 6, codec.pack).
    if (off + len == r.bytes && len && pack_ && r.npages > 1 && sb()->format_version >= 6 &&
        codec_mode_for(relaxed_load(r.rec->hint_flags), r.dtype) != 0)
        pack_block(handle);
    return SPECKV_OK;
}

int Pool::read_page(uint64_t page, size_t poff, size_t plen, unsigned char *dst, int *src) {
    *src = 2;
    PageEntry &pe = pages()[page];
    for (;;) {
        uint64_t s1 = pe.seq.load(std::memory_order_acquire);
        if (s1 & 1) [[unlikely]] {
            if (int rc = wait_even(pe, &s1); rc != SPECKV_OK) return rc;
        }
        // A cached copy is a verified copy of exactly this version of the
        // page, so the hit path needs neither the flags nor the media.
        uint64_t epoch = sh()->epoch.load(std::memory_order_relaxed);
        if (cache_->get(page, s1, epoch, poff, plen, dst)) [[likely]] {
            *src = 0;
            return SPECKV_OK;
        }
        uint32_t fl = pe.flags.load(std::memory_order_acquire);
        if (fl & kPagePacked) [[unlikely]]  // the block was packed since the caller resolved it: its view is stale
            return fail(SPECKV_EBUSY, "page %" PRIu64 " is part of a packed image now", page);
        if (fl & kPageQuarantined)
            return fail(SPECKV_ECORRUPT, "page %" PRIu64 " is quarantined: it failed its CRC32C check", page);
        if (fl & kPageZero) {
            std::memset(dst, 0, plen);
            if (pe.seq.load(std::memory_order_acquire) == s1) return SPECKV_OK;
            continue;
        }
        unsigned char *buf = dst;
        if (plen != page_size_) {
            if (t_scratch.size() < page_size_) t_scratch.resize(page_size_);
            buf = t_scratch.data();
        }
        // L2: a copy the prefetcher verified, of exactly this version (the
        // tag holds seq and epoch). It moves up to L1.
        if (l2_ && l2_->get(page, l2_tag(s1, epoch), 0, page_size_, buf)) {
            cache_->put(page, s1, epoch, buf);
            if (buf != dst) std::memcpy(dst, buf + poff, plen);
            *src = 1;
            return SPECKV_OK;
        }
        // Copy and CRC in one pass (issue 27); the CRC is of the copy.
        uint32_t got = copy_crc_from_pool(buf, page_data(page), page_size_);
        uint32_t stored = pe.crc.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (pe.seq.load(std::memory_order_relaxed) != s1) continue;  // a writer got in: retry
        if (got != stored) {
            pe.flags.fetch_or(kPageQuarantined);
            bump(kCrcFail);
            log(SPECKV_LOG_ERROR, "page %" PRIu64 " failed its CRC32C check; quarantined", page);
            return fail(SPECKV_ECORRUPT,
                        "page %" PRIu64 " failed its CRC32C check (stored %08x, computed %08x); page quarantined", page,
                        stored, got);
        }
        if (fl & kPageCoded) {
            unsigned char *dec = scratch_of(t_decoded, page_size_);
            if (int rc = decode_page(page, buf, dec); rc != SPECKV_OK) {
                pe.flags.fetch_or(kPageQuarantined);
                log(SPECKV_LOG_ERROR, "page %" PRIu64 " holds a bad codec record; quarantined", page);
                return rc;
            }
            if (cache_->admit_read(page)) cache_->put(page, s1, epoch, dec);
            std::memcpy(dst, dec + poff, plen);
            return SPECKV_OK;
        }
        // Into L1 only as the admission policy says (config cache.admit).
        if (cache_->admit_read(page)) cache_->put(page, s1, epoch, buf);
        if (buf != dst) std::memcpy(dst, buf + poff, plen);
        return SPECKV_OK;
    }
}

int Pool::read(uint64_t handle, uint64_t off, void *dst, size_t len) {
  for (int attempt = 0;; attempt++) {
    BlockView r{};
    if (int rc = resolve(handle, &r); rc != SPECKV_OK) return rc;
    if (r.cold()) [[unlikely]]
        if (int rc = ensure_hot(handle, &r); rc != SPECKV_OK) return rc;
    if (!dst && len) return fail(SPECKV_EINVAL, "dst is NULL");
    if (off > r.bytes || len > r.bytes - off)
        return fail(SPECKV_ERANGE, "read of %zu bytes at offset %" PRIu64 " runs past the block's %" PRIu64 " bytes", len,
                    off, r.bytes);
    auto *out = static_cast<unsigned char *>(dst);
    size_t done = 0;
    uint64_t hits = 0, misses = 0, l2 = 0;
    int rc = SPECKV_OK;
    // Fast path: a range inside one page whose verified copy is cached.
    if (size_t poff = off & (page_size_ - 1); len && len <= page_size_ - poff && !r.packed) [[likely]] {
        uint64_t page = r.first_page + (off >> page_shift_);
        const PageEntry &pe = pages()[page];
        uint64_t s1 = pe.seq.load(std::memory_order_acquire);
        if (!(s1 & 1) && cache_->get(page, s1, sh()->epoch.load(std::memory_order_relaxed), poff, len, out)) {
            hits = 1;
            done = len;
        }
    }
    while (done < len) {
        uint64_t pos = off + done;
        uint64_t page = r.first_page + (pos >> page_shift_);  // page size is a power of two: no division
        size_t poff = pos & (page_size_ - 1);
        size_t plen = std::min<size_t>(len - done, page_size_ - poff);
        int src;
        if (r.packed) [[unlikely]] {
            if ((rc = read_packed_page(r, handle, static_cast<uint32_t>(pos >> page_shift_), poff, plen, out + done, &src)) !=
                SPECKV_OK)
                break;
        } else if ((rc = read_page(page, poff, plen, out + done, &src)) != SPECKV_OK) {
            break;
        }
        hits += src == 0;
        misses += src != 0;
        l2 += src == 1;
        done += plen;
    }
    if (rc == SPECKV_OK && r.rec->handle.load(std::memory_order_acquire) != handle)
        rc = fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " was freed during the read", handle);
    // The block moved to L4 (or back) while we copied: the pages we read may
    // be another block's by now. Read again from where it is.
    if (r.moved()) [[unlikely]] {
        if (attempt < 16) {
            clear_error();
            continue;
        }
        if (rc == SPECKV_OK) rc = fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving between tiers during the read", handle);
    }
    if (heat_) [[unlikely]]
        heat_->touch(handle, now_ns(CLOCK_MONOTONIC_COARSE));
    // One shard lookup for all the counters of this call.
    std::atomic<uint64_t> *c = my_shard();
    auto add = [](std::atomic<uint64_t> &a, uint64_t n, bool own) {
        if (own) a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
        else a.fetch_add(n, std::memory_order_relaxed);
    };
    bool own = c != counters_.overflow();
    if (hits) add(c[kHits], hits, own);
    if (misses) {
        add(c[kMisses], misses, own);
        if (l2) add(c[kL2Hits], l2, own);
        if (misses != l2) add(c[kSyncReads], misses - l2, own);
    }
    if (ctl_.load(std::memory_order_relaxed)) [[unlikely]]
        note_access(r.rec, misses != l2 ? 2 : l2 ? 1 : 0, static_cast<uint32_t>(hits + misses));
    if (rc == SPECKV_OK) {
        add(c[kReads], 1, own);
        add(c[kRBytes], len, own);
    }
    return rc;
  }
}

// ---- codec (docs/codec.md §17)

bool Pool::encode_page_locked(uint64_t page, size_t logical, uint8_t mode, uint8_t dtype, unsigned char *decoded) {
    unsigned char *d = page_data(page);
    size_t es = codec::dtype_size(dtype);
    if (es == 0 || logical % es) {
        bump(kEncBypass);
        return false;
    }
    size_t cap = codec::max_record_size(logical);
    unsigned char *rec = scratch_of(t_record, cap);
    size_t len = 0;
    codec::Layout lay{codec_.channels()};
    if (codec::encode(static_cast<codec::Mode>(mode), dtype, d, logical, lay, rec, cap, &len) != SPECKV_OK) {
        clear_error();
        bump(kEncBypass);
        return false;
    }
    // A record the codec stored raw (its bypass rule), or one that would not
    // fit the page, leaves the page in clear: a raw record only adds a header.
    codec::Header hd;
    if (codec::peek_header(rec, len, &hd) != SPECKV_OK || hd.mode == codec::Mode::raw || len > page_size_) {
        clear_error();
        bump(kEncBypass);
        return false;
    }
    size_t out = 0;
    if (codec::decode(rec, len, decoded, page_size_, &out) != SPECKV_OK) {  // cannot happen: our own record
        clear_error();
        bump(kEncBypass);
        return false;
    }
    std::memset(decoded + out, 0, page_size_ - out);
    std::memcpy(d, rec, len);
    std::memset(d + len, 0, page_size_ - len);
    bump(kEncPages);
    bump(kEncRaw, logical);
    bump(kEncStored, len);
    return true;
}

int Pool::decode_page(uint64_t page, const unsigned char *slot, unsigned char *out) {
    codec::Header hd;
    size_t n = 0;
    int rc = codec::peek_header(slot, page_size_, &hd);
    if (rc == SPECKV_OK) rc = codec::decode(slot, hd.record_len(), out, page_size_, &n);
    if (rc != SPECKV_OK) {
        std::string why = last_error();
        bump(kCrcFail);
        return fail(SPECKV_ECORRUPT, "page %" PRIu64 " holds a codec record that does not decode (%s)", page, why.c_str());
    }
    std::memset(out + n, 0, page_size_ - n);
    bump(kDecPages);
    return SPECKV_OK;
}

int Pool::verify_page_inplace(uint64_t page) {
    PageEntry &pe = pages()[page];
    for (;;) {
        uint64_t s1;
        if (int rc = wait_even(pe, &s1); rc != SPECKV_OK) return rc;
        uint32_t fl = pe.flags.load(std::memory_order_acquire);
        if (fl & kPageQuarantined)
            return fail(SPECKV_ECORRUPT, "page %" PRIu64 " is quarantined: it failed its CRC32C check", page);
        uint32_t stored = pe.crc.load(std::memory_order_relaxed);
        uint32_t got = crc_of_pool(page_data(page), page_size_);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (pe.seq.load(std::memory_order_relaxed) != s1) continue;
        if (got != stored) {
            pe.flags.fetch_or(kPageQuarantined);
            bump(kCrcFail);
            return fail(SPECKV_ECORRUPT,
                        "page %" PRIu64 " failed its CRC32C check (stored %08x, computed %08x); page quarantined", page,
                        stored, got);
        }
        return SPECKV_OK;
    }
}

int Pool::block_info(uint64_t handle, speckv_block_meta *out) const {
    BlockView v{};
    if (int rc = resolve(handle, &v); rc != SPECKV_OK) return rc;
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

int Pool::pin(uint64_t handle, const void **ptr, size_t *len) {
    if (!ptr || !len) return fail(SPECKV_EINVAL, "ptr and len must not be NULL");
    if (read_only()) return fail(SPECKV_EPERM, "pool is open read-only");
    int attempt = 0;
again:
    BlockView r{};
    if (int rc = resolve(handle, &r); rc != SPECKV_OK) return rc;
    if (r.cold())
        if (int rc = ensure_hot(handle, &r); rc != SPECKV_OK) return rc;
    if (r.packed) {  // the pointer must show values page by page: unpack first
        if (int rc = unpack_block(handle, &r); rc != SPECKV_OK) return rc;
        if (r.packed || r.cold()) {
            if (++attempt < 16) goto again;
            return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving while pinning", handle);
        }
    }
    for (uint64_t p = r.first_page; p < r.first_page + r.npages; p++) {
        PageEntry &pe = pages()[p];
        if (pe.flags.load(std::memory_order_acquire) & kPageZero) {
            // Materialise the zeros so the pointer shows what a read returns.
            uint64_t q;
            if (int rc = lock_page(p, handle, r.rec, &q, r.tseq); rc != SPECKV_OK) {
                if (r.moved() && ++attempt < 16) goto again;  // it went to L4 meanwhile: from the top
                return rc;
            }
            if (pe.flags.load(std::memory_order_relaxed) & kPageZero) {
                std::memset(page_data(p), 0, page_size_);
                pe.crc.store(crc32c(0, page_data(p), page_size_), std::memory_order_relaxed);
            }
            pe.flags.store(pe.flags.load(std::memory_order_relaxed) & ~(kPageZero | kPageCoded | kPageWriterMask), std::memory_order_relaxed);
            pe.seq.store(q + 2, std::memory_order_release);
        } else if (pe.flags.load(std::memory_order_acquire) & kPageCoded) {
            // The pointer must show values, not a record: the page is stored
            // decoded from now on (the same values a read returns).
            uint64_t q;
            if (int rc = lock_page(p, handle, r.rec, &q, r.tseq); rc != SPECKV_OK) {
                if (r.moved() && ++attempt < 16) goto again;  // it went to L4 meanwhile: from the top
                return rc;
            }
            uint32_t fl = pe.flags.load(std::memory_order_relaxed) & ~kPageWriterMask;
            int rc = SPECKV_OK;
            if ((fl & (kPageCoded | kPageZero)) == kPageCoded) {
                unsigned char *dec = scratch_of(t_decoded, page_size_);
                if (crc32c(0, page_data(p), page_size_) != pe.crc.load(std::memory_order_relaxed)) {
                    bump(kCrcFail);
                    rc = fail(SPECKV_ECORRUPT, "page %" PRIu64 " failed its CRC32C check; page quarantined", p);
                } else {
                    rc = decode_page(p, page_data(p), dec);
                }
                if (rc == SPECKV_OK) {
                    std::memcpy(page_data(p), dec, page_size_);
                    pe.crc.store(crc32c(0, page_data(p), page_size_), std::memory_order_relaxed);
                    fl &= ~kPageCoded;
                } else {
                    fl |= kPageQuarantined;
                }
            }
            pe.flags.store(fl, std::memory_order_relaxed);
            pe.seq.store(q + 2, std::memory_order_release);
            if (rc != SPECKV_OK) return rc;
        } else {
            // This process holds a verified copy of exactly this version of
            // the page (L1): the bytes in the pool were checked already, as a
            // cached read would trust them. Otherwise checksum them in place.
            uint64_t s1 = pe.seq.load(std::memory_order_acquire);
            if (!(s1 & 1) && !(pe.flags.load(std::memory_order_acquire) & kPageQuarantined) &&
                cache_->contains(p, s1, sh()->epoch.load(std::memory_order_relaxed)))
                continue;
            if (int rc = verify_page_inplace(p); rc != SPECKV_OK) return rc;
        }
    }
    // A block pinned here is referenced while pinned (its holders bit is
    // set), so no process moves or frees it under the pointer: eviction,
    // demotion and packing skip referenced blocks, and another process's
    // free of an unpublished one waits for the unpin (SPECKV_EBUSY).
    bool ref = true;
    if (int rc = acquire_ref(handle, false); rc != SPECKV_OK) return rc;
    bool moved;
    {
        // The L4 holder demotes only with the handle's pin shard locked and re-checks the pins
        // before it commits: registered here and unmoved means it stays put.
        PinShard &ps = pin_shard(handle);
        std::lock_guard g(ps.mu);
        auto &e = ps.map[handle];
        e.first++;
        e.second += ref;
        ps.total.fetch_add(1, std::memory_order_release);
        moved = r.moved();
    }
    if (moved) {  // it went to L4 (or came back) between resolve and the pin: once more
        unpin(handle);
        if (++attempt < 16) goto again;
        return fail(SPECKV_EBUSY, "block 0x%" PRIx64 " kept moving between tiers while pinning", handle);
    }
    if (r.rec->handle.load(std::memory_order_acquire) != handle) {
        unpin(handle);
        return fail(SPECKV_EBADHANDLE, "handle 0x%" PRIx64 " was freed while pinning", handle);
    }
    *ptr = page_data(r.first_page);
    *len = r.bytes;
    return SPECKV_OK;
}

int Pool::unpin(uint64_t handle) {
    bool ref = false;
    {
        PinShard &ps = pin_shard(handle);
        std::lock_guard g(ps.mu);
        auto it = ps.map.find(handle);
        if (it == ps.map.end() || it->second.first == 0) {
            BlockView r{};
            if (int rc = resolve(handle, &r); rc != SPECKV_OK) return rc;
            return fail(SPECKV_EINVAL, "block 0x%" PRIx64 " is not pinned", handle);
        }
        if (it->second.second) {
            it->second.second--;
            ref = true;
        }
        if (--it->second.first == 0 && ps.map.size() > kKeepIdle) ps.map.erase(it);
        ps.total.fetch_sub(1, std::memory_order_release);
    }
    return ref ? release_ref(handle) : SPECKV_OK;
}

int Pool::prefetch(const speckv_hint *hint) {
    if (!hint) return fail(SPECKV_EINVAL, "hint is NULL");
    if (hint->struct_size != sizeof(speckv_hint))
        return fail(SPECKV_ESTRUCT, "speckv_hint.struct_size is %zu, this library knows %zu", hint->struct_size,
                    sizeof(speckv_hint));
    bump(kPrefetch);
    if (!pf_enabled_ || read_only()) return SPECKV_OK;
    std::unique_lock g(*pf_mu_);
    if (!pf_started_) {
        if (int rc = start_prefetcher(); rc != SPECKV_OK) return rc;
    }
    // Full: the oldest hint goes (the reader has most likely moved past it),
    // not this one, which says where the reader is now.
    bool dropped = false;
    if (pf_q_.size() >= pf_cap_) {
        pf_q_.pop_front();
        dropped = true;
    }
    pf_q_.push_back(PfHint{*hint, pf_clocks_.now()});
    g.unlock();
    if (dropped) bump(kPfDropped);
    pf_cv_->notify_one();
    return SPECKV_OK;
}

// ------------------------------------------------- stats, inspect, check

void Pool::stats_local(speckv_pool_stats *st) const {
    const Superblock &s = *sb();
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
    if (l2_) {
        BufferStats b = l2_->stats();
        v.prefetch_used = b.used;
        v.prefetch_wasted = b.wasted;
        v.prefetch_wasted_bytes = b.bytes_wasted;
    }
    if (tlb_) {
        TlbStats t = tlb_->stats();
        v.tlb_hits = t.hits;
        v.tlb_misses = t.misses;
    }
    if (PrefetchController *c = ctl_.load(std::memory_order_acquire)) {
        v.prefetch_beta_ppm = static_cast<uint32_t>(c->beta() * 1e6 + 0.5);
        PrefetchStats ps = c->stats();
        v.prefetch_depth = ps.history.empty() ? 0 : static_cast<uint32_t>(ps.history.back().mean_depth + 0.5);
    } else {
        v.prefetch_beta_ppm = static_cast<uint32_t>(pf_params_.beta_max * 1e6 + 0.5);
    }
    *st = v;
}

void Pool::stats(speckv_pool_stats *st) const {
    stats_local(st);
    publish_tier_counters(st);
}

void Pool::publish_tier_counters(const speckv_pool_stats *have) const {
    if (attach_slot_ < 0 || attach_pid_ != getpid() || !map_.base() || read_only()) return;
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
    AttachRecord &a = sh()->attach[attach_slot_];
    for (uint32_t i = 0; i < kTierCounters; i++) a.tier[i].store(vals[i], std::memory_order_relaxed);
}

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
    if (events_) out += events_->stats_json();  // KV events: sent, batches, dropped, replays
    out += ",\"placement_latency_ns\":" + std::to_string(placement_.latency_ns) +
           ",\"placement_bandwidth\":" + std::to_string(placement_.bandwidth) +
           ",\"placement_distance\":" + std::to_string(placement_.distance);
    // codec.mode = adaptive: the preset id chosen per layer and K/V, as
    // codec_mode_l<layer>_<k|v> (flat numbers, like every key here).
    codec_.append_json(&out);
    return out + "}";
}

void Pool::info(PoolInfo *o) const {
    const Superblock &s = *sb();
    const SharedHeader *h = sh();
    o->location = map_.path().empty() ? "anonymous memory" : map_.path();
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
        o->tenants.push_back({tenants()[t].tenant, tenants()[t].quota_pages, tenants()[t].used_pages.load()});
    o->pages_quarantined = o->pages_in_write = 0;
    o->pages_coded = o->coded_raw_bytes = o->coded_stored_bytes = 0;
    o->blocks_packed = o->packed_pages = o->packed_saved = o->packed_damaged = 0;
    // Packed blocks: what their directories say (a snapshot: a block moved
    // meanwhile is skipped).
    for (uint64_t i = 0, hwm = std::min<uint64_t>(h->slot_hwm, s.max_blocks); i < hwm; i++) {
        const BlockRecord &r = blocks()[i];
        const uint64_t hd = r.handle.load();
        BlockView v{};
        if (!hd || !relaxed_load(r.packed_pages) || resolve(hd, &v) != SPECKV_OK || v.cold() || !v.packed) {
            clear_error();
            continue;
        }
        uint64_t coded = 0, raw = 0, stored = 0;
        bool damaged = false;
        for (uint32_t k = 0; k < v.npages && !damaged; k++) {
            PackEntry e;
            if (!pack_entry(v, k, &e)) damaged = true;  // the accessor, as every reader: a bad entry is never followed
            if (damaged || !(e.flags & kPageCoded)) continue;
            uint8_t hb[codec::kHeaderSize];
            copy_from_pool(hb, page_data(v.first_page) + e.off, sizeof hb);
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
        uint32_t fl = pages()[p].flags.load();
        uint64_t q = pages()[p].seq.load();
        o->pages_quarantined += (fl & kPageQuarantined) != 0;
        o->pages_in_write += q & 1;
        if ((fl & (kPageCoded | kPageZero)) != kPageCoded || (q & 1)) continue;
        if (!(__atomic_load_n(&bitmap()[p / 64], __ATOMIC_RELAXED) >> (p % 64) & 1)) continue;  // a freed page keeps its last flags
        // The record's own header says what it holds (a page rewritten
        // meanwhile is skipped: figures of a live pool are a snapshot).
        uint8_t hb[codec::kHeaderSize];
        copy_from_pool(hb, page_data(p), sizeof hb);
        codec::Header ch;
        if (pages()[p].seq.load() != q || codec::peek_header(hb, s.page_size, &ch) != SPECKV_OK) {
            clear_error();
            continue;
        }
        o->pages_coded++;
        o->coded_raw_bytes += ch.decoded_bytes();
        o->coded_stored_bytes += ch.record_len();
    }
}

int Pool::list_blocks(std::vector<BlockInfo> *out) const {
    const Superblock &s = *sb();
    uint64_t hwm = std::min<uint64_t>(sh()->slot_hwm, s.max_blocks);
    for (uint64_t i = 0; i < hwm; i++) {
        const BlockRecord &r = blocks()[i];
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

namespace {
// One line of `speckv pool check`'s report.
__attribute__((format(printf, 2, 3))) void problem(CheckReport *rep, const char *f, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, f);
    std::vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    rep->problems.emplace_back(buf);
}
}  // namespace

// What check() counts while it walks the block table, then compares with
// the shared counters.
struct Pool::CheckTally {
    uint64_t hwm = 0;
    std::vector<uint64_t> owned;  // pages some block holds (bitmap)
    std::vector<unsigned char> buf, dec;
    uint64_t live = 0, used = 0, published = 0, shared = 0, cold_n = 0, cold_b = 0;
    uint64_t live_mask = 0;
    std::vector<uint64_t> live_ids;
    uint32_t nt = 0;
    std::vector<uint64_t> tenant_pages;
};

int Pool::check(CheckReport *rep) const {
    const Superblock &s = *sb();
    CheckTally t;
    check_lock_state(rep);
    t.hwm = sh()->slot_hwm;
    if (t.hwm > s.max_blocks) {
        problem(rep, "slot high-water mark %" PRIu64 " exceeds max_blocks %" PRIu64, t.hwm, s.max_blocks);
        t.hwm = s.max_blocks;
    }
    t.owned.assign((s.n_pages + 63) / 64, 0);
    t.buf.resize(s.page_size);
    t.dec.resize(s.page_size);
    for (uint32_t i = 0; i < kMaxAttach; i++) {
        const AttachRecord &a = sh()->attach[i];
        if (a.pid.load() && process_alive(a.pid.load(), a.start_time)) {
            t.live_mask |= uint64_t(1) << i;
            t.live_ids.push_back(a.id);
        }
    }
    t.nt = std::min<uint32_t>(sh()->tenants_used, kMaxTenants);
    t.tenant_pages.assign(t.nt, 0);
    for (uint64_t i = 0; i < s.max_blocks; i++) check_block(i, &t, rep);
    check_counters(t, rep);
    check_free_list(t.hwm, rep);
    for (const auto &a : sh()->attach) {
        uint32_t pid = a.pid.load();
        if (pid && !process_alive(pid, a.start_time))
            problem(rep, "process %u is recorded as attached but is gone (recovered on the next open)", pid);
    }
    share_.check(t.hwm, t.published, &rep->problems);
    xlate_index_.check(t.hwm, &rep->problems);
    check_shared_counters(t, rep);
    return SPECKV_OK;
}

void Pool::check_lock_state(CheckReport *rep) const {
    const SharedHeader *h = sh();
    if (h->lock_magic != kLockMagic) problem(rep, "the pool lock is not initialised (metadata corrupt)");
    // The robust lock's word: the kernel marks it FUTEX_OWNER_DIED when its
    // holder dies. Whatever that holder was changing (an alloc, a publish,
    // recovery itself rebuilding the bitmap and index) is half-done; the next
    // locker recovers it. Read without taking the lock (check changes nothing).
    constexpr int kFutexOwnerDied = 0x40000000;
    if (h->lock_magic == kLockMagic &&
        (__atomic_load_n(&h->lock.__data.__lock, __ATOMIC_ACQUIRE) & kFutexOwnerDied)) {
        rep->recovery_pending = true;
        problem(rep, "a process died holding the pool lock (perhaps inside recovery): what it was changing is half-done "
                "and is recovered at the next open (or `speckv pool check --repair`); the problems below may be that");
    }
    if (h->move_slot.load())
        problem(rep, "a move of block slot %" PRIu64 " was cut short by a crash (repair finishes it)", h->move_slot.load() - 1);
}

void Pool::check_block(uint64_t i, CheckTally *t, CheckReport *rep) const {
    const Superblock &s = *sb();
    const BlockRecord &r = blocks()[i];
    uint64_t hd = r.handle.load();
    if (!hd) return;
    if (i >= t->hwm) {
        problem(rep, "block slot %" PRIu64 " is live above the high-water mark", i);
        return;
    }
    rep->blocks_checked++;
    if ((hd & ((1u << kSlotBits) - 1)) != i + 1 || (hd >> kSlotBits) != r.generation) {
        problem(rep, "block slot %" PRIu64 ": handle 0x%" PRIx64 " does not match the slot", i, hd);
        return;
    }
    if (record_crc(r) != r.crc) {
        problem(rep, "block 0x%" PRIx64 ": record checksum mismatch", hd);
        return;
    }
    const bool cold = r.tier_seq.load() & 1;  // in L4: its pages are in the L4 file, not here
    const uint64_t np = r.packed_pages ? r.packed_pages : r.npages;  // packed: its image's pages
    if (!geometry_ok(s, r.first_page, r.packed_pages, r.npages, r.bytes, r.dtype, cold)) {
        problem(rep, "block 0x%" PRIx64 ": geometry out of bounds", hd);
        return;
    }
    t->live++;
    if (cold) {
        t->cold_n++;
        t->cold_b += r.bytes;
    } else {
        t->used += np;
        for (uint32_t k = 0; k < t->nt; k++)
            if (tenants()[k].tenant == r.tenant) t->tenant_pages[k] += np;
    }
    uint64_t holders = r.holders.load();
    if (r.state & kBlockPublished) {
        t->published++;
        t->shared += r.bytes;
        if (holders & kHoldersDying) problem(rep, "block 0x%" PRIx64 ": an eviction was cut short (repair finishes it)", hd);
        if (holders & ~kHoldersDying & ~t->live_mask)
            problem(rep, "block 0x%" PRIx64 ": holds references of processes that are gone (repair drops them)", hd);
        if (share_.find_published_locked(r.tenant, r.content_hash) != i + 1)
            problem(rep, "block 0x%" PRIx64 " is published but the hash index does not find it", hd);
    } else {
        if (holders & ~t->live_mask)
            problem(rep, "block 0x%" PRIx64 " is unpublished and pinned by processes that are gone (repair drops them)", hd);
        if (r.owner && std::find(t->live_ids.begin(), t->live_ids.end(), r.owner) == t->live_ids.end())
            problem(rep, "block 0x%" PRIx64 " is an unpublished block of a process that is gone (repair reclaims it)", hd);
    }
    if (!cold && r.packed_pages) check_packed(r, hd, rep);
    for (uint64_t p = r.first_page; !cold && p < r.first_page + np; p++) check_block_page(r, hd, p, t, rep);
}

void Pool::check_block_page(const BlockRecord &r, uint64_t hd, uint64_t p, CheckTally *t, CheckReport *rep) const {
    const Superblock &s = *sb();
    if (t->owned[p / 64] >> (p % 64) & 1) problem(rep, "page %" PRIu64 " belongs to two blocks", p);
    t->owned[p / 64] |= uint64_t(1) << (p % 64);
    if (!(bitmap()[p / 64] >> (p % 64) & 1)) problem(rep, "page %" PRIu64 " is used by block 0x%" PRIx64 " but marked free", p, hd);
    const PageEntry &pe = pages()[p];
    uint64_t q = pe.seq.load();
    uint32_t fl = pe.flags.load();
    if (q & 1) {
        problem(rep, "page %" PRIu64 " of block 0x%" PRIx64 ": a write is in progress or was torn by a crash", p, hd);
        return;
    }
    if (fl & kPageQuarantined) problem(rep, "page %" PRIu64 " of block 0x%" PRIx64 " is quarantined", p, hd);
    if (bool(fl & kPagePacked) != bool(r.packed_pages))
        problem(rep, "page %" PRIu64 " of block 0x%" PRIx64 " %s", p, hd,
            fl & kPagePacked ? "is flagged as a packed image's, but its block is not packed"
                             : "is not flagged as a packed image's, but its block is packed");
    if (fl & kPageZero) return;
    copy_from_pool(t->buf.data(), page_data(p), s.page_size);
    uint32_t got = crc32c(0, t->buf.data(), s.page_size);
    rep->pages_verified++;
    if (got != pe.crc.load() && pe.seq.load() == q) {
        problem(rep, "page %" PRIu64 " of block 0x%" PRIx64 ": CRC32C mismatch (stored %08x, computed %08x)", p, hd,
                pe.crc.load(), got);
        return;
    }
    if ((fl & kPageSummary) && summaries_) {
        const unsigned char *sm = summaries_ + p * summary_bytes_;
        uint32_t ch = uint32_t(sm[8]) | uint32_t(sm[9]) << 8;
        size_t need = nmp::summary_size(ch);
        if ((need > summary_bytes_ || nmp::check_summary(sm, need, ch) != SPECKV_OK) && pe.seq.load() == q)
            problem(rep, "page %" PRIu64 " of block 0x%" PRIx64 ": its summary fails its checks (%s)", p, hd,
                    need > summary_bytes_ ? "channel count too large" : last_error());
        clear_error();
    }
    if (fl & kPageCoded) {
        codec::Header ch;
        size_t n = 0;
        int rc = codec::peek_header(t->buf.data(), s.page_size, &ch);
        if (rc == SPECKV_OK) rc = codec::decode(t->buf.data(), ch.record_len(), t->dec.data(), t->dec.size(), &n);
        if (rc != SPECKV_OK && pe.seq.load() == q)
            problem(rep, "page %" PRIu64 " of block 0x%" PRIx64 ": codec record does not decode (%s)", p, hd, last_error());
        clear_error();
    }
}

void Pool::check_counters(const CheckTally &t, CheckReport *rep) const {
    const SharedHeader *h = sh();
    uint64_t leaked = 0;
    for (uint64_t w = 0; w < t.owned.size(); w++) leaked += __builtin_popcountll(bitmap()[w] & ~t.owned[w]);
    if (leaked) problem(rep, "%" PRIu64 " pages are marked used but belong to no block (reclaimed by recovery)", leaked);
    if (h->blocks_live.load() != t.live)
        problem(rep, "live-block counter says %" PRIu64 ", the block table holds %" PRIu64, h->blocks_live.load(), t.live);
    if (h->pages_used.load() != t.used + leaked)
        problem(rep, "used-page counter says %" PRIu64 ", the bitmap holds %" PRIu64, h->pages_used.load(), t.used + leaked);
    if (h->cold_blocks.load() != t.cold_n || h->cold_bytes.load() != t.cold_b)
        problem(rep, "L4 counters say %" PRIu64 " blocks / %" PRIu64 " bytes, the block table holds %" PRIu64 " / %" PRIu64,
                h->cold_blocks.load(), h->cold_bytes.load(), t.cold_n, t.cold_b);
}

void Pool::check_free_list(uint64_t hwm, CheckReport *rep) const {
    const Superblock &s = *sb();
    uint64_t n = 0;
    for (uint64_t f = sh()->slot_free_head; f; n++) {
        if (f > hwm || n > s.max_blocks) {
            problem(rep, "free-slot list is damaged");
            break;
        }
        if (blocks()[f - 1].handle.load()) {
            problem(rep, "free-slot list holds live slot %" PRIu64, f - 1);
            break;
        }
        f = blocks()[f - 1].next_free;
    }
}

void Pool::check_shared_counters(const CheckTally &t, CheckReport *rep) const {
    const SharedHeader *h = sh();
    if (h->blocks_published.load() != t.published || h->shared_bytes.load() != t.shared)
        problem(rep, "published-block counters say %" PRIu64 " blocks / %" PRIu64 " bytes, the table holds %" PRIu64 " / %" PRIu64,
                h->blocks_published.load(), h->shared_bytes.load(), t.published, t.shared);
    for (uint32_t k = 0; k < t.nt; k++)
        if (tenants()[k].used_pages.load() != t.tenant_pages[k])
            problem(rep, "tenant %" PRIu64 ": usage counter says %" PRIu64 " pages, its blocks hold %" PRIu64,
                    tenants()[k].tenant, tenants()[k].used_pages.load(), t.tenant_pages[k]);
}

int Pool::reset_uri(const std::string &uri_text, bool even_if_attached) {
    Uri uri;
    if (int rc = parse_uri(uri_text, &uri); rc != SPECKV_OK) return rc;
    Mapping m;
    switch (uri.scheme) {
        case Scheme::File:
            if (int rc = Mapping::open_file(uri.target, true, &m, file_access(uri, nullptr)); rc != SPECKV_OK) return rc;
            break;
        case Scheme::Dax:
            if (int rc = Mapping::open_dax(uri.target, true, &m); rc != SPECKV_OK) return rc;
            break;
        case Scheme::Numa:  // named: its shared file; unnamed: SPECKV_ENOTSUP saying how to name it
            if (int rc = Mapping::attach_numa_uri(uri, true, &m); rc != SPECKV_OK) return rc;
            break;
        case Scheme::Anon:
            return fail(SPECKV_ENOTSUP, "anon: pools live in one process's private memory: nothing to reset from outside");
    }
    return reset_pool_mapping(std::move(m), uri.target, even_if_attached);
}

}  // namespace speckv
