// SPDX-License-Identifier: Apache-2.0
// The tier manager inside the pool (docs/tiers.md): the translation index
// (tenant, request, layer, token) -> block, the per-process TLB in front of
// it, and the prefetcher behind speckv_prefetch, which reads and verifies the
// pages the policy (lib/prefetch/prefetch_ctl.h) predicts into the L2 prefetch buffer
// (lib/tiers/tier_buffers.h) from where Pool::read serves them.
#include <sched.h>
#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <memory>
#include <new>
#include <atomic>
#include <cinttypes>
#include <iterator>
#include <cstring>
#include <vector>

#include "codec/codec.h"
#include "util/crc32c.h"
#include "pool/page_decoder.h"
#include "pool/pool.h"
#include "pool/pool_internal.h"
#include "util/seqlock.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;

namespace {
uint64_t mono_ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}
}  // namespace

// ------------------------------------------------------ translation index

void Pool::xlate_collect(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, std::vector<uint64_t> *out) {
    if (xlate_index_.collect_lockfree(tenant, request, layer, pos, out)) return;
    // The chains kept changing under us (other threads freeing blocks): walk
    // under the lock, where they cannot. A miss here is a real miss.
    bool rec;
    if (lock(&rec) != SPECKV_OK) {
        clear_error();
        out->clear();
        return;
    }
    xlate_index_.walk(tenant, request, layer, pos, out);
    unlock();
}

int Pool::translate(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, uint64_t *handle, uint64_t *offset) {
    if (!handle) return fail(SPECKV_EINVAL, "out is NULL");
    if (!tenant_visible(tenant))
        return fail(SPECKV_ENOENT, "no block of tenant %" PRIu64 " is visible to this pool handle (tenant.id)", tenant);
    // A TLB entry is only a hint: it is checked against the live record, so
    // a block freed or reused by any process is never returned.
    // A block of another request counts if this process learnt that the
    // request reads it (a shared prefix block: an alias, see note_access).
    const AliasKey key{tenant, request, layer};
    std::vector<Alias> al;
    auto valid = [&](uint64_t hd) {
        BlockView v{};
        if (!hd || resolve(hd, &v) != SPECKV_OK) return false;
        const BlockRecord &r = *v.rec;
        uint64_t tp = relaxed_field(r.token_pos), tc = relaxed_field(r.token_count);
        bool ok = relaxed_field(r.tenant) == tenant && relaxed_field(r.layer) == layer && pos >= tp && pos - tp < tc;
        if (ok && relaxed_field(r.request) != request) {
            aliases_.collect(key, pos, &al);
            ok = !al.empty() && al.front().handle == hd;
        }
        if (ok && offset) *offset = pos - tp;
        return ok && r.handle.load(std::memory_order_acquire) == hd;
    };
    TlbKey k{static_cast<uint32_t>(tenant ^ (tenant >> 32)), layer, request, pos};
    TlbValue tv{};
    if (tlb_ && tlb_->lookup(k, &tv) && valid(tv.handle)) {
        *handle = tv.handle;
        return SPECKV_OK;
    }
    uint64_t seen = tlb_ ? tlb_->inval_seq() : 0;
    std::vector<uint64_t> hs;
    xlate_collect(tenant, request, layer, pos, &hs);
    if (hs.empty()) {
        aliases_.collect(key, pos, &al);
        for (const Alias &a : al) hs.push_back(a.handle);
    }
    for (uint64_t hd : hs)
        if (valid(hd)) {
            if (tlb_) {
                if (tv.handle) tlb_->invalidate(k);  // the stale entry
                tlb_->insert(k, TlbValue{hd, 0}, seen);
            }
            *handle = hd;
            return SPECKV_OK;
        }
    clear_error();
    return fail(SPECKV_ENOENT, "no live block of tenant %" PRIu64 ", request %" PRIu64 ", layer %u covers token %" PRIu64,
                tenant, request, layer, pos);
}

// ------------------------------------------------------------ prefetcher

int Pool::init_tiers(const Config &cfg) {
    PrefetchParams p;
    p.k_min = static_cast<uint32_t>(cfg.get("prefetch.k_min"));
    p.k_max = static_cast<uint32_t>(cfg.get("prefetch.k_max"));
    p.ucb_c = double(cfg.get("prefetch.ucb_c_milli")) / 1000.0;
    p.kappa = double(cfg.get("prefetch.kappa_milli")) / 1000.0;
    p.theta_target = double(cfg.get("prefetch.theta_milli")) / 1000.0;
    p.beta_min = double(cfg.get("prefetch.beta_min_milli")) / 1000.0;
    // The L3->L2 bandwidth beta measures link use against: the pool memory's
    // placement class (a remote or CXL node is slower than local DRAM), unless
    // placement.* or prefetch.bandwidth say otherwise (docs/devices.md).
    Placement where = placement_for_mapping(map_);
    apply_placement_config(cfg, &where);
    p.bandwidth = double(where.bandwidth);
    placement_ = where;
    p.tick_ns = uint64_t(cfg.get("prefetch.tick_us")) * 1000;
    if (p.k_min > p.k_max)
        return fail(SPECKV_EINVAL, "prefetch.k_min (%u) is larger than prefetch.k_max (%u)", p.k_min, p.k_max);
    if (int rc = validate(p); rc != SPECKV_OK) return rc;
    pf_params_ = p;
    int64_t l2 = cfg.get("prefetch.l2_bytes");
    pf_enabled_ = cfg.get("prefetch.enable") != 0 && l2 > 0;
    pf_queue_.configure(static_cast<size_t>(cfg.get("prefetch.queue")), p.tick_ns, prefetch_work());
    pf_hinted_ = cfg.get("prefetch.policy") == 1;
    int64_t entries = cfg.get("tlb.entries");
    if (entries & (entries - 1)) return fail(SPECKV_EINVAL, "tlb.entries %lld is not a power of two", (long long)entries);
    unsigned shift = 0;  // one TLB entry per token: blocks may be as small as one token
    if (int rc = Tlb::create(static_cast<size_t>(entries), shift, &tlb_); rc != SPECKV_OK) return rc;
    if (pf_enabled_) {
        if (uint64_t(l2) < 2ull * page_size_)
            return fail(SPECKV_EINVAL, "prefetch.l2_bytes %lld holds fewer than two pages of %u bytes", (long long)l2,
                        page_size_);
        if (int rc = PrefetchBuffer::create(static_cast<size_t>(l2), page_size_, &l2_); rc != SPECKV_OK) return rc;
        l2_->set_resolve(&Pool::on_l2_resolved, this);
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
            l2_.get());
    }
    return SPECKV_OK;
}

void Pool::on_l2_resolved(void *user, uint64_t owner, uint64_t, bool used) {
    auto *p = static_cast<Pool *>(user);
    if (PrefetchController *c = p->ctl_.load(std::memory_order_acquire))
        c->on_resolved(owner >> 16, static_cast<uint32_t>(owner & 0xFFFF), used, p->page_size_);
}

// Before the prefetch thread starts (under its queue's lock): the controller.
int Pool::start_prefetcher() {
    if (!ctl_owner_)
        if (int rc = PrefetchController::create(pf_params_, nullptr, &ctl_owner_); rc != SPECKV_OK) return rc;
    return SPECKV_OK;
}

void Pool::stop_prefetcher() { pf_queue_.stop(); }

HintQueue::Work Pool::prefetch_work() {
    // Every 100 ms this process's tier counters go to its attach record,
    // where `speckv pool stats` reads them.
    auto published = std::make_shared<uint64_t>(0);
    HintQueue::Work w;
    w.prepare = [this] { return start_prefetcher(); };
    w.started = [this] { ctl_.store(ctl_owner_.get(), std::memory_order_release); };
    w.hint = [this](const QueuedHint &h, bool newer) { prefetch_hint(h, newer); };
    w.tick = [this, published] {
        const uint64_t now = mono_ns();
        ctl_owner_->tick(now);  // after a hint; when idle, an idle link lets beta recover
        if (now - *published < 100'000'000) return;
        *published = now;
        publish_tier_counters();
        cold_.tick();  // the L4 holder: above the pressure target, blocks below T_c go ahead of need
    };
    return w;
}

// Reader progress: pf_clocks_ (prefetch/aliases.h).

// Reads a block's pages that are in neither L1 nor L2 into L2, verified.
// Returns the pages brought in.
uint64_t Pool::prefetch_block(uint64_t handle, uint64_t owner, uint64_t skip_from, uint64_t *link) {
    BlockView v{};
    if (resolve(handle, &v) != SPECKV_OK) {
        clear_error();
        return 0;
    }
    // In L4: the holder brings it back into the pool ahead of its use (L4 -> L3), then on into L2.
    if (v.cold() && cold_.ensure_hot(handle, &v) != SPECKV_OK) {
        clear_error();
        return 0;
    }
    // The block the request is appending to (it covers the token being
    // decoded, or the next one) is about to be rewritten: a copy fetched now
    // would be stale before it is read. Its writer puts it in L1 instead.
    uint64_t tp = relaxed_field(v.rec->token_pos), tc = relaxed_field(v.rec->token_count);
    if (skip_from != ~0ull && tc && skip_from + 1 >= tp && skip_from < tp + tc) return 0;
    return reader_.prefetch_block(v, handle, owner, link);  // pool/page_reader.h
}

void Pool::prefetch_hint(const PfHint &ph, bool newer) {
    const speckv_hint &h = ph.h;
    PrefetchController *c = ctl_owner_.get();
    if (!tenant_visible(h.tenant)) {
        bump(kPfIgnored);
        return;
    }
    if (pf_req_.size() >= 65536) pf_req_.clear();  // bounded; re-learnt from the next hints
    pf_req_[h.request] = {h.tenant, h.token_pos};
    c->on_hint(h.request, h.layer, h.token_pos);
    // Behind the reader: it has read the unit this hint names already, and a
    // newer hint (planned from where the reader is now) waits in the queue.
    if (newer && pf_clocks_.read_past(h.tenant, h.request, h.layer, ph.clock)) {
        bump(kPfHintsStale);
        return;
    }
    PrefetchController::Plan plan;
    if (pf_hinted_) plan.units.push_back(PrefetchUnit{h.request, h.layer});  // exactly what the engine named
    else c->plan(h.request, h.layer, &plan);
    std::vector<uint64_t> hs;
    std::vector<Alias> al;
    uint64_t pages = 0, link = 0, stale = 0, cut = 0;
    bool any = false;
    for (const PrefetchUnit &u : plan.units) {
        auto t = pf_req_.find(u.request);
        uint64_t tenant = t != pf_req_.end() ? t->second.first : h.tenant;
        uint64_t appending = t != pf_req_.end() ? t->second.second : ~0ull;
        if (pf_clocks_.read_past(tenant, u.request, u.layer, ph.clock)) {  // read already: its next read is a step away
            stale++;
            continue;
        }
        xlate_collect(tenant, u.request, u.layer, ~0ull, &hs);
        aliases_.collect(AliasKey{tenant, u.request, u.layer}, ~0ull, &al);  // the shared blocks it reads, prefix first
        if (!al.empty()) {
            std::vector<uint64_t> own;
            own.swap(hs);
            for (const Alias &a : al) hs.push_back(a.handle);
            hs.insert(hs.end(), own.begin(), own.end());
        }
        any |= !hs.empty();
        uint64_t owner = u.request << 16 ^ (u.layer & 0xFFFF);
        uint64_t n = 0, moved = 0;
        for (size_t i = 0; i < hs.size(); i++) {
            // The reader got through the unit while we fetched it: the rest would be waste.
            if (i && pf_clocks_.read_past(tenant, u.request, u.layer, ph.clock)) {
                cut++;
                break;
            }
            n += prefetch_block(hs[i], owner, appending, &moved);
        }
        if (n) c->on_issued(u.request, static_cast<uint32_t>(n), moved);
        pages += n;
        link += moved;
    }
    if (stale) bump(kPfUnitsStale, stale);
    if (cut) bump(kPfUnitsCut, cut);
    if (!plan.units.empty() && stale == plan.units.size()) bump(kPfHintsStale);  // every unit planned was read already
    else if (!any) bump(kPfIgnored);  // nothing known to fetch: unknown request, or its blocks are gone
    if (pages) {
        bump(kPfPages, pages);
        bump(kLinkBytes, link);
        c->on_transfer(link);
    }
}

// ------------------------------------------------ shared-block attribution
//
// A read names a block, not its reader: a published block may be read by
// every request that found it by speckv_lookup (or got it as the canonical
// copy from speckv_publish), while its record names the request that
// allocated it. The reader is inferred from the thread's read stream:
// an engine reads a unit (request, layer) in token order, and prefix sharing
// puts the shared blocks first, the reader's own after them. So each thread's
// reads are cut into steps at a change of tenant or layer, or where the token
// position falls back (or repeats with another block); a step's reader is the
// request of its last unpublished block (private blocks are never shared),
// else of its last block. The step is reported to the controller as one
// access of (reader, layer), once it is complete (at the thread's next step:
// a unit's step is reported one unit late, which the predictor, learning
// edges a whole step before it uses them, does not notice), and every
// published block of another request read in it becomes an alias of
// (tenant, reader, layer). Process-local, like L2 and the predictor; the
// pool's format and index do not change.

struct Pool::ReadStep {
    struct Shared {
        uint64_t handle, request, token_pos, token_count;
    };
    uint64_t serial = 0;  // the pool (Pool::attr_serial_) whose step this is; 0 = none
    uint64_t tenant = 0, last_handle = 0, last_pos = 0, reader = 0, private_reader = 0;
    uint64_t clock = 0;  // Pool::pf_clocks_ when the step started
    uint32_t layer = 0;
    bool has_private = false;
    uint32_t pages[3] = {};     // by source: L1, L2, L3
    std::vector<Shared> shared;  // published blocks read, in order
    static constexpr size_t kMaxShared = 1024;
};

uint64_t Pool::next_attr_serial() {
    static std::atomic<uint64_t> n{0};
    return n.fetch_add(1, std::memory_order_relaxed) + 1;
}

namespace {
// A thread reading from several pools keeps a step per pool (the least
// recently started one gives way: its pending step is lost, not reported).
constexpr int kStepsPerThread = 4;
}  // namespace

void Pool::note_access(const BlockRecord *rec, int worst, uint32_t pages) {
    PrefetchController *c = ctl_.load(std::memory_order_acquire);
    if (!c) return;
    const BlockRecord &r = *rec;
    uint64_t hd = r.handle.load(std::memory_order_acquire);
    uint64_t tc = relaxed_field(r.token_count);
    if (!hd || !tc) return;  // gone, or not a KV block of a request
    uint64_t tenant = relaxed_field(r.tenant), request = relaxed_field(r.request), tp = relaxed_field(r.token_pos);
    uint32_t layer = relaxed_field(r.layer);
    bool published = relaxed_field(r.state) & kBlockPublished;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (r.handle.load(std::memory_order_relaxed) != hd) return;  // freed and reused while we read it

    // Behind a pointer: the library's static TLS block stays small enough for
    // dlopen (util/status.h has an initial-exec variable; tests/symbols.sh).
    struct StepTable {
        ReadStep steps[kStepsPerThread];
        unsigned next_victim = 0;
    };
    thread_local std::unique_ptr<StepTable> t_steps;
    if (!t_steps) {
        t_steps.reset(new (std::nothrow) StepTable);
        if (!t_steps) return;  // no memory: this read goes unattributed, as a hint would be dropped
    }
    ReadStep (&steps)[kStepsPerThread] = t_steps->steps;
    unsigned &next_victim = t_steps->next_victim;
    ReadStep *s = nullptr;
    for (ReadStep &x : steps)
        if (x.serial == attr_serial_) s = &x;
    if (!s) {
        s = &steps[next_victim++ % kStepsPerThread];
        s->serial = 0;
    }
    bool boundary = s->serial == 0 || tenant != s->tenant || layer != s->layer || tp < s->last_pos ||
                    (tp == s->last_pos && hd != s->last_handle);
    if (boundary) {
        if (s->serial) flush_step(*s, c);
        s->serial = attr_serial_;
        s->clock = pf_clocks_.clock().fetch_add(1, std::memory_order_acq_rel) + 1;
        s->tenant = tenant, s->layer = layer;
        s->has_private = false;
        s->pages[0] = s->pages[1] = s->pages[2] = 0;
        s->shared.clear();
    }
    s->pages[worst < 0 ? 0 : worst > 2 ? 2 : worst] += pages;
    s->last_pos = tp, s->last_handle = hd, s->reader = request;
    if (!published) {
        // The step's reader is known once it reads a private block: it has started its unit.
        if (!s->has_private || s->private_reader != request) pf_clocks_.mark_started(tenant, request, layer, s->clock);
        s->private_reader = request, s->has_private = true;
    } else if (s->shared.size() < ReadStep::kMaxShared && (s->shared.empty() || s->shared.back().handle != hd))
        s->shared.push_back({hd, request, tp, tc});
}

void Pool::flush_step(ReadStep &s, PrefetchController *c) {
    uint64_t reader = s.has_private ? s.private_reader : s.reader;
    if (!s.has_private) pf_clocks_.mark_started(s.tenant, reader, s.layer, s.clock);  // known only now, the step over
    static constexpr AccessOutcome kOutcome[3] = {AccessOutcome::kL1Hit, AccessOutcome::kL2Hit, AccessOutcome::kMiss};
    for (int i = 0; i < 3; i++)
        if (s.pages[i]) c->on_access(reader, s.layer, kOutcome[i], s.pages[i]);
    Alias a[64];
    size_t n = 0;
    const AliasKey k{s.tenant, reader, s.layer};
    for (const ReadStep::Shared &e : s.shared) {
        if (e.request == reader) continue;  // its own
        a[n++] = Alias{e.handle, e.token_pos, e.token_count};
        if (n == std::size(a)) aliases_.learn(k, a, n), n = 0;
    }
    if (n) aliases_.learn(k, a, n);
    s.shared.clear();
}

bool Pool::alias_valid(const AliasKey &k, const Alias &a) const {
    BlockView v{};
    if (resolve(a.handle, &v) != SPECKV_OK) {  // freed, or its slot reused: the generation differs
        clear_error();
        return false;
    }
    const BlockRecord &r = *v.rec;
    bool ok = relaxed_field(r.tenant) == k.tenant && relaxed_field(r.layer) == k.layer &&
              relaxed_field(r.token_pos) == a.token_pos && relaxed_field(r.token_count) == a.token_count;
    return ok && r.handle.load(std::memory_order_acquire) == a.handle;
}

// ------------------------------------------------- speckv_prefetch (the queue)

int Pool::prefetch(const speckv_hint *hint) {
    if (!hint) return fail(SPECKV_EINVAL, "hint is NULL");
    if (hint->struct_size != sizeof(speckv_hint))
        return fail(SPECKV_ESTRUCT, "speckv_hint.struct_size is %zu, this library knows %zu", hint->struct_size,
                    sizeof(speckv_hint));
    bump(kPrefetch);
    if (!pf_enabled_ || read_only()) return SPECKV_OK;
    bool dropped = false;
    if (int rc = pf_queue_.push(PfHint{*hint, pf_clocks_.now()}, &dropped); rc != SPECKV_OK) return rc;
    if (dropped) bump(kPfDropped);
    return SPECKV_OK;
}


}  // namespace speckv
