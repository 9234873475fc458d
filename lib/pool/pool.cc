// SPDX-License-Identifier: Apache-2.0
// The pool coordinator: open, attach and close, the pool lock, repair and
// reset; recovery itself is pool/recovery.cc's. The operations live
// in the other pool_*.cc files (docs/architecture.md says which).
#include "pool/pool.h"

#include <unistd.h>

#include <algorithm>
#include <cstdarg>

#include "backend/prefault.h"
#include "backend/registry.h"
#include "config/uri.h"
#include "events/publisher.h"
#include "pool/attach_table.h"
#include "pool/checker.h"
#include "pool/open_plan.h"
#include "pool/pool_internal.h"
#include "pool/recovery.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;

// ------------------------------------------------------------------ open

void Pool::bind_layout() {
    const PoolLayout L = PoolLayout::bind(map_.base());
    L_ = L;
    page_size_ = L.page_size;
    lock_.bind(L.sh);
    resolver_.bind(L, &lock_);
    packed_.bind(L);
    room_.bind(L);
    share_.bind(L);
    xlate_index_.bind(L);
    translator_.bind(&xlate_index_, &resolver_, &pf_);
    plocks_.bind(L.pages);
    reader_.bind(L, &plocks_, &packed_, &counters_, &log_);
    writer_.bind(L, {&plocks_, &reader_, &codec_, &sel_, &counters_, &log_});
    io_.bind(L, {&resolver_, &cold_, &refs_, &blocks_, &packer_, &reader_, &writer_, &codec_, &pf_, &counters_}, read_only());
    const LockPort pool_lock{[this](bool *rec) { return lock(rec); }, [this] { unlock(); }};
    cold_.bind(L, {&resolver_, &room_, &plocks_, &refs_, &share_, &counters_, &log_}, read_only());
    blocks_.bind(L, {&xlate_index_, &share_, &cold_, &plocks_, &refs_, &log_});
    packer_.bind(L, {&resolver_, &room_, &refs_, &share_, &blocks_, &cold_, &plocks_, &packed_, &counters_, &log_});
    const LockRecoverPort lock_recover{pool_lock, [this](const char *why) {
                                           if (any_dead_locked()) recover_locked(why);
                                       }};
    packer_.set_ports(lock_recover);
    allocator_.bind(L, {&resolver_, &share_, &blocks_, &room_, &cold_, &xlate_index_, &refs_, &counters_}, read_only());
    allocator_.set_ports(lock_recover);
    sharing_.bind(L, {&resolver_, &blocks_, &share_, &plocks_, &cold_}, read_only());
    sharing_.set_lock(pool_lock);
    translator_.set_lock(pool_lock);
    cold_.set_ports({pool_lock,
                     [this](BlockRecord &r, uint64_t slot, uint64_t first, uint64_t packed, uint64_t step) {
                         blocks_.commit_placement_locked(r, slot, first, packed, step);
                     },
                     [this](BlockRecord &r, uint64_t slot, uint64_t handle, events::Medium m) {
                         blocks_.evict_dying_locked(r, slot, handle, m);
                     },
                     [this] { return pf_.on_thread(); }});
    sel_.bind(L, &resolver_, &packed_, &plocks_, &counters_);
    sel_.set_ports({[this](uint64_t t, uint64_t r, uint32_t l, std::vector<uint64_t> *hs) {
                        translator_.collect(t, r, l, ~0ull, hs);
                    },
                    [this](uint64_t h, BlockView *v) { return cold_.ensure_hot(h, v); },
                    [this](uint64_t h, uint64_t off, void *dst, size_t len) { return io_.read(h, off, dst, len); }});
}

int Pool::open(const std::string &uri_text, const Config &cfg, std::unique_ptr<Pool> *out) {
    Uri uri;
    if (int rc = parse_uri(uri_text, &uri); rc != SPECKV_OK) return rc;
    OpenPlan plan;  // the geometry, who owns the file, how to make a pool (pool/open_plan.h)
    if (int rc = plan_open(&uri, cfg, &plan); rc != SPECKV_OK) return rc;
    const PoolMaker make = pool_maker(&plan);

    std::unique_ptr<Pool> p(new Pool);
    const Backend &backend = backend_of(uri);
    if (int rc = backend.open(uri, OpenArgs{static_cast<size_t>(plan.size), plan.create != 0, plan.access, make}, &p->map_); rc)
        return rc;
    const char *label = backend.label ? backend.label(uri) : nullptr;
    const char *where = label ? label : uri.target.c_str();
    if (int rc = validate_superblock(p->map_, where); rc != SPECKV_OK) return rc;
    // No page-fault storm on the first pass after attaching (issue 27).
    if (backend.prefault)
        prefault_mapping(p->map_.base(), p->map_.size(), p->map_.writable(), static_cast<size_t>(cfg.get("pool.prefault")));
    p->bind_layout();
    p->lock_.set_timeout_ms(static_cast<int>(cfg.get("lock.timeout_ms")));
    p->log_ = PoolLog{cfg.log_fn, cfg.log_user, static_cast<int>(cfg.get("log.level"))};
    p->tenant_id_ = cfg.get("tenant.id");
    p->resolver_.set_tenant(p->tenant_id_);
    const bool flush = cfg.get("share.flush") != 0;  // explicit write-back / invalidation
    p->blocks_.set_flush(flush);
    p->sharing_.set_flush(flush);
    p->codec_.configure(cfg);
    p->room_.set_unit_slack(static_cast<uint32_t>(cfg.get("alloc.unit_slack")));
    p->io_.set_pack(cfg.get("codec.pack") != 0);
    p->sel_.configure(cfg);
    p->cache_ = std::make_unique<PageCache>(static_cast<size_t>(cfg.get("cache.bytes")), p->page_size_,
                                            cfg.get("cache.associative") != 0, static_cast<int>(cfg.get("cache.admit")),
                                            p->sb()->n_pages);
    if (int rc = p->init_tiers(cfg); rc != SPECKV_OK) return rc;
    p->set_tiers();
    if (int rc = events::Publisher::open(cfg, &p->events_); rc != SPECKV_OK) return rc;  // docs/events.md
    p->blocks_.set_events(p->events_.get());
    p->sharing_.set_events(p->events_.get());
    if (int rc = p->attach(); rc != SPECKV_OK) return rc;
    if (int rc = p->cold_.open(cfg, {p->attach_slot_, p->attach_pid_, p->attach_id_, p->read_only()}, p->events_.get());
        rc != SPECKV_OK) {
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
    Mapping m;
    if (int rc = attach_uri(uri_text, false, "there is nothing to open from outside it", &m); rc != SPECKV_OK) return rc;
    return open_image(std::move(m), out);
}

int Pool::open_image(Mapping &&m, std::unique_ptr<Pool> *out) {
    if (int rc = validate_superblock(m, m.path().empty() ? "pool image" : m.path().c_str()); rc != SPECKV_OK) return rc;
    std::unique_ptr<Pool> p(new Pool);
    p->map_ = std::move(m);
    p->bind_layout();
    p->cache_ = std::make_unique<PageCache>(0, p->page_size_);
    p->set_tiers();
    *out = std::move(p);
    return SPECKV_OK;
}

// The placement, the prefetch engine with its ports, the TLB, the L1 -> L2
// evict hook (docs/tiers.md).
int Pool::init_tiers(const Config &cfg) {
    // The L3->L2 bandwidth beta measures link use against: the pool memory's
    // placement class (a remote or CXL node is slower than local DRAM), unless
    // placement.* or prefetch.bandwidth say otherwise (docs/devices.md).
    Placement where = placement_for_mapping(map_);
    apply_placement_config(cfg, &where);
    placement_ = where;
    // What the engine asks of the pool (prefetch/engine.h); it calls none of it before its thread runs.
    PrefetchPorts ports;
    ports.collect = [this](uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, std::vector<uint64_t> *hs) {
        translator_.collect(tenant, request, layer, pos, hs);
    };
    ports.fetch_block = [this](uint64_t handle, uint64_t owner, uint64_t skip_from, uint64_t *link) {
        return io_.prefetch_block(handle, owner, skip_from, link);
    };
    ports.tick = [this] {
        publish_tier_counters();  // to the attach record, where `speckv pool stats` reads them
        cold_.tick();  // the L4 holder: above the pressure target, blocks below T_c go ahead of need
    };
    const PrefetchSetup setup{double(where.bandwidth), page_size_, tenant_id_, &resolver_, &counters_};
    if (int rc = pf_.configure(cfg, setup, std::move(ports)); rc != SPECKV_OK) return rc;
    if (int rc = translator_.configure(cfg); rc != SPECKV_OK) return rc;
    if (int rc = pf_.open_l2(cfg); rc != SPECKV_OK) return rc;
    if (PrefetchBuffer *l2 = pf_.l2()) {
        // A page that only L1 holds moves down into L2 when L1 evicts it,
        // rather than leaving: a page completed by this process's write (the
        // full page behind a growing block's tail; the prefetcher skips the
        // block being appended to, and its other pages came through L2 and
        // are still there). Its next read is an L2 hit, not a link transfer
        // (docs/tiers.md §2). L1 and L2 share the tag (seq ^ epoch << 44).
        cache_->set_evict(
            [](void *u, uint64_t page, uint64_t tag, const void *data) {
                static_cast<PrefetchBuffer *>(u)->insert_victim(page, tag, data);
            },
            l2);
    }
    return SPECKV_OK;
}

// L1 and L2 (null: none), once made, to the parts that read, write, move or free pages.
void Pool::set_tiers() {
    reader_.set_tiers(cache_.get(), pf_.l2());
    packer_.set_l1(cache_.get());
    writer_.set_l1(cache_.get());
    io_.set_l1(cache_.get());
    allocator_.set_tiers(cache_.get(), pf_.l2());
}

Pool::~Pool() { close(); }

int Pool::close() {
    pf_.stop();
    cold_.close();
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
    int rc = lock_.acquire(recovered);
    if (rc == SPECKV_OK && *recovered) recover_locked("a process died holding the pool lock");
    return rc;
}

int Pool::attach() {
    bool recovered;
    if (int rc = lock(&recovered); rc != SPECKV_OK) return rc;
    AttachTable table(sh());
    // Recovery frees the records of dead processes (and what they held)
    // before any of their records can be handed out again.
    if (const char *why = recovered ? nullptr : table.recovery_due_locked()) recover_locked(why);
    AttachTable::Claim c;
    const int rc = table.claim_locked(&c);
    unlock();
    if (rc != SPECKV_OK) return rc;
    attach_slot_ = c.slot;
    attach_id_ = c.id;
    attach_pid_ = getpid();
    blocks_.set_self(attach_slot_, attach_id_);
    sharing_.set_attach_slot(attach_slot_);
    packer_.set_attach_slot(attach_slot_);
    writer_.set_attach_slot(attach_slot_);
    allocator_.set_attach_slot(attach_slot_);
    return SPECKV_OK;
}

void Pool::recover_locked(const char *why) {
    Recovery(PoolLayout::bind(map_.base()), share_, xlate_index_, PageDecoder(page_size_, &counters_), log_)
        .run_locked(why);
}

int Pool::demote(uint64_t handle) {
    if (read_only()) return fail(SPECKV_EPERM, "pool is open read-only");
    return cold_.demote(handle);
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
    Mapping m;
    std::string target;
    if (int rc = attach_uri(uri_text, true, "nothing to reset from outside", &m, &target); rc != SPECKV_OK) return rc;
    return reset_pool_mapping(std::move(m), target, even_if_attached);
}

// Reporting (pool/reporter.h) and `pool check` (pool/checker.h).
PoolReporter Pool::report() const {
    return PoolReporter({&L_, &map_.path(), &resolver_, &packed_, &counters_, pf_.l2(), translator_.tlb(),
                         pf_.controller(), pf_.params().beta_max, &placement_, events_.get(), &codec_,
                         cold_.opened(), attach_slot_, attach_pid_, map_.base() && !read_only()});
}
int Pool::block_info(uint64_t handle, speckv_block_meta *out) const { return report().block_info(handle, out); }
void Pool::stats(speckv_pool_stats *st) const { report().stats(st); }
void Pool::publish_tier_counters(const speckv_pool_stats *have) const { report().publish_tier_counters(have); }
std::string Pool::stats_json() const { return report().stats_json(); }
void Pool::info(PoolInfo *out) const { report().info(out); }
int Pool::list_blocks(std::vector<BlockInfo> *out) const { return report().list_blocks(out); }
int Pool::check(CheckReport *rep) const { return PoolChecker(L_, share_, xlate_index_).run(rep); }

}  // namespace speckv
