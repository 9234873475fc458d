// SPDX-License-Identifier: Apache-2.0
// The pool coordinator: open, attach and close, the pool lock, repair and
// reset; recovery itself is pool/recovery.cc's. The operations live
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
#include "pool/recovery.h"

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
    Recovery(PoolLayout::bind(map_.base()), share_, xlate_index_, PageDecoder(page_size_, &counters_), log_)
        .run_locked(why);
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
