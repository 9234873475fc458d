// SPDX-License-Identifier: Apache-2.0
// The prefetch engine (prefetch/engine.h): settings and L2, the thread's
// work (plan a hint, bring its units' blocks into L2 through the pool's
// ports), the queue behind speckv_prefetch, and the read-stream attribution
// behind note_access.
#include "prefetch/engine.h"

#include <time.h>

#include <algorithm>
#include <iterator>
#include <new>

#include "util/seqlock.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;
using enum PoolCounters::Counter;

namespace {
uint64_t mono_ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}
}  // namespace

// ------------------------------------------------------------ settings, L2

int PrefetchEngine::configure(const Config &cfg, const PrefetchSetup &setup, PrefetchPorts ports) {
    PrefetchParams p;
    p.k_min = static_cast<uint32_t>(cfg.get("prefetch.k_min"));
    p.k_max = static_cast<uint32_t>(cfg.get("prefetch.k_max"));
    p.ucb_c = double(cfg.get("prefetch.ucb_c_milli")) / 1000.0;
    p.kappa = double(cfg.get("prefetch.kappa_milli")) / 1000.0;
    p.theta_target = double(cfg.get("prefetch.theta_milli")) / 1000.0;
    p.beta_min = double(cfg.get("prefetch.beta_min_milli")) / 1000.0;
    p.bandwidth = setup.bandwidth;
    p.tick_ns = uint64_t(cfg.get("prefetch.tick_us")) * 1000;
    if (p.k_min > p.k_max)
        return fail(SPECKV_EINVAL, "prefetch.k_min (%u) is larger than prefetch.k_max (%u)", p.k_min, p.k_max);
    if (int rc = validate(p); rc != SPECKV_OK) return rc;
    params_ = p;
    page_size_ = setup.page_size;
    tenant_id_ = setup.tenant_id;
    resolver_ = setup.resolver;
    counters_ = setup.counters;
    ports_ = std::move(ports);
    enabled_ = cfg.get("prefetch.enable") != 0 && cfg.get("prefetch.l2_bytes") > 0;
    sync_ = cfg.get("prefetch.sync") != 0;
    queue_.configure(static_cast<size_t>(cfg.get("prefetch.queue")), p.tick_ns, work(), sync_);
    hinted_ = cfg.get("prefetch.policy") == 1;
    return SPECKV_OK;
}

int PrefetchEngine::open_l2(const Config &cfg) {
    if (!enabled_) return SPECKV_OK;
    int64_t l2 = cfg.get("prefetch.l2_bytes");
    if (uint64_t(l2) < 2ull * page_size_)
        return fail(SPECKV_EINVAL, "prefetch.l2_bytes %lld holds fewer than two pages of %u bytes", (long long)l2,
                    page_size_);
    if (int rc = PrefetchBuffer::create(static_cast<size_t>(l2), page_size_, &l2_); rc != SPECKV_OK) return rc;
    l2_->set_resolve(&PrefetchEngine::on_l2_resolved, this);
    return SPECKV_OK;
}

void PrefetchEngine::on_l2_resolved(void *user, uint64_t owner, uint64_t, bool used) {
    auto *e = static_cast<PrefetchEngine *>(user);
    if (PrefetchController *c = e->ctl_.load(std::memory_order_acquire))
        c->on_resolved(owner >> 16, static_cast<uint32_t>(owner & 0xFFFF), used, e->page_size_);
}

// ------------------------------------------------------------ the thread

// Before the thread starts (under its queue's lock): the controller.
int PrefetchEngine::start() {
    if (!ctl_owner_)
        if (int rc = PrefetchController::create(params_, nullptr, &ctl_owner_); rc != SPECKV_OK) return rc;
    return SPECKV_OK;
}

HintQueue::Work PrefetchEngine::work() {
    // Every 100 ms the pool's part of the tick (its tier counters go to its
    // attach record, where `speckv pool stats` reads them; the L4 holder's pass).
    auto published = std::make_shared<uint64_t>(0);
    HintQueue::Work w;
    w.prepare = [this] { return start(); };
    w.started = [this] { ctl_.store(ctl_owner_.get(), std::memory_order_release); };
    w.hint = [this](const QueuedHint &h, bool newer) { hint(h, newer); };
    w.tick = [this, published] {
        const uint64_t now = mono_ns();
        // After a hint; when idle, an idle link lets beta recover. Sync: the
        // caller keeps the time (a replay's is virtual), so beta stays put.
        if (!sync_) ctl_owner_->tick(now);
        if (now - *published < 100'000'000) return;
        *published = now;
        if (ports_.tick) ports_.tick();
    };
    return w;
}

void PrefetchEngine::hint(const QueuedHint &ph, bool newer) {
    const speckv_hint &h = ph.h;
    PrefetchController *c = ctl_owner_.get();
    if (tenant_id_ >= 0 && uint64_t(tenant_id_) != h.tenant) {
        bump(kPfIgnored);
        return;
    }
    if (req_.size() >= 65536) req_.clear();  // bounded; re-learnt from the next hints
    req_[h.request] = {h.tenant, h.token_pos};
    // The hint says how much of its unit the reader reads from the pool:
    // the blocks that start before token_count.
    if (h.flags & SPECKV_HINT_SPAN) clocks_.mark_span(h.tenant, h.request, h.layer, h.token_count, true);
    c->on_hint(h.request, h.layer, h.token_pos);
    // Behind the reader: it has read the unit this hint names already, and a
    // newer hint (planned from where the reader is now) waits in the queue.
    if (newer && clocks_.read_past(h.tenant, h.request, h.layer, ph.clock)) {
        bump(kPfHintsStale);
        return;
    }
    PrefetchController::Plan plan;
    if (hinted_) plan.units.push_back(PrefetchUnit{h.request, h.layer});  // exactly what the engine named
    else c->plan(h.request, h.layer, &plan);
    std::vector<uint64_t> hs;
    std::vector<Alias> al;
    uint64_t pages = 0, link = 0, stale = 0, cut = 0, window = 0, capped = 0, outside = 0;
    bool any = false;
    // The plan's window (the pages of the units it names, fetched now or
    // earlier) stays within 3/4 of L2 (the rest holds what the reader is
    // on): a deeper plan would evict what it fetched before it is read. The
    // first unit always goes. (Half was measured too: it starved the
    // shared-prefix test's learned plans, 0.81 -> 0.40 of shared reads from L2.)
    const uint64_t window_cap = l2_ ? uint64_t(l2_->frames()) * 3 / 4 : ~0ull;
    for (const PrefetchUnit &u : plan.units) {
        auto t = req_.find(u.request);
        uint64_t tenant = t != req_.end() ? t->second.first : h.tenant;
        uint64_t appending = t != req_.end() ? t->second.second : ~0ull;
        if (clocks_.read_past(tenant, u.request, u.layer, ph.clock)) {  // read already: its next read is a step away
            stale++;
            continue;
        }
        ports_.collect(tenant, u.request, u.layer, ~0ull, &hs);
        aliases_.collect(AliasKey{tenant, u.request, u.layer}, ~0ull, &al);  // the shared blocks it reads, prefix first
        if (!al.empty()) {
            std::vector<uint64_t> own;
            own.swap(hs);
            for (const Alias &a : al) hs.push_back(a.handle);
            hs.insert(hs.end(), own.begin(), own.end());
        }
        any |= !hs.empty();
        if (!hs.empty()) outside += trim_to_span(tenant, u, appending, &hs);
        if (!hs.empty()) {
            // The unit's pages, from its last block's size (a unit's blocks are alike).
            BlockView v{};
            uint64_t per = 1;
            if (resolver_ && resolver_->resolve(hs.back(), &v) == SPECKV_OK) per = v.npages ? v.npages : 1;
            else clear_error();
            uint64_t up = per * hs.size();
            if (window && window + up > window_cap) {
                capped = plan.units.size() - size_t(&u - plan.units.data());
                break;
            }
            window += up;
        }
        uint64_t owner = u.request << 16 ^ (u.layer & 0xFFFF);
        uint64_t n = 0, moved = 0;
        for (size_t i = 0; i < hs.size(); i++) {
            // The reader got through the unit while we fetched it: the rest would be waste.
            if (i && clocks_.read_past(tenant, u.request, u.layer, ph.clock)) {
                cut++;
                break;
            }
            n += ports_.fetch_block(hs[i], owner, appending, &moved);
        }
        if (n) c->on_issued(u.request, static_cast<uint32_t>(n), moved);
        pages += n;
        link += moved;
    }
    if (stale) bump(kPfUnitsStale, stale);
    if (cut) bump(kPfUnitsCut, cut);
    if (capped) bump(kPfUnitsCapped, capped);
    if (outside) bump(kPfOutsideSpan, outside);
    if (!plan.units.empty() && stale == plan.units.size()) bump(kPfHintsStale);  // every unit planned was read already
    else if (!any) bump(kPfIgnored);  // nothing known to fetch: unknown request, or its blocks are gone
    if (pages) {
        bump(kPfPages, pages);
        bump(kLinkBytes, link);
        c->on_transfer(link);
    }
}

// Read spans (docs/tiers.md): of a unit whose reader reads only the blocks
// before some token (an engine that keeps the newest tokens in HBM reads
// the older ones from the pool), only those blocks are fetched. A span
// learnt from the reads is a step old: a reader that read up to its
// frontier then reads the block completed since as well, so such a span
// keeps every block. A span a hint named is taken as it is. Returns the
// blocks left out.
uint64_t PrefetchEngine::trim_to_span(uint64_t tenant, const PrefetchUnit &u, uint64_t appending,
                                      std::vector<uint64_t> *hs) const {
    uint64_t end = 0;
    bool named = false;
    if (!resolver_ || !clocks_.span(tenant, u.request, u.layer, &end, &named)) return 0;
    std::vector<uint64_t> &v = *hs;
    std::vector<uint64_t> start(v.size(), ~0ull);  // ~0: not resolved (fetch_block drops it)
    uint64_t frontier = 0, block = 0;  // end of the last complete block; largest block, in tokens
    for (size_t i = 0; i < v.size(); i++) {
        BlockView bv{};
        if (resolver_->resolve(v[i], &bv) != SPECKV_OK) {
            clear_error();
            continue;
        }
        uint64_t tp = relaxed_field(bv.rec->token_pos), tc = relaxed_field(bv.rec->token_count);
        start[i] = tp;
        if (appending != ~0ull && tc && appending + 1 >= tp && appending < tp + tc) continue;  // being appended to
        frontier = std::max(frontier, tp + tc);
        block = std::max(block, tc);
    }
    if (!named && end + block >= frontier) return 0;  // read up to its frontier
    size_t n = 0;
    for (size_t i = 0; i < v.size(); i++)
        if (start[i] == ~0ull || start[i] < end) v[n++] = v[i];
    uint64_t left = v.size() - n;
    v.resize(n);
    return left;
}

// ------------------------------------------------- speckv_prefetch (the queue)

int PrefetchEngine::prefetch(const speckv_hint *hint, bool writable) {
    if (!hint) return fail(SPECKV_EINVAL, "hint is NULL");
    if (hint->struct_size != sizeof(speckv_hint))
        return fail(SPECKV_ESTRUCT, "speckv_hint.struct_size is %zu, this library knows %zu", hint->struct_size,
                    sizeof(speckv_hint));
    bump(kPrefetch);
    if (!enabled_ || !writable) return SPECKV_OK;
    bool dropped = false;
    if (int rc = queue_.push(QueuedHint{*hint, clocks_.now()}, &dropped); rc != SPECKV_OK) return rc;
    if (dropped) bump(kPfDropped);
    return SPECKV_OK;
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

struct PrefetchEngine::ReadStep {
    struct Shared {
        uint64_t handle, request, token_pos, token_count;
    };
    uint64_t serial = 0;  // the engine (PrefetchEngine::serial_) whose step this is; 0 = none
    uint64_t tenant = 0, last_handle = 0, last_pos = 0, reader = 0, private_reader = 0;
    uint64_t clock = 0;  // clocks_ when the step started
    uint64_t end = 0;    // end of the blocks read, in tokens (the unit's read span)
    uint32_t layer = 0;
    bool has_private = false;
    uint32_t pages[3] = {};     // by source: L1, L2, L3
    std::vector<Shared> shared;  // published blocks read, in order
    static constexpr size_t kMaxShared = 1024;
};

uint64_t PrefetchEngine::next_serial() {
    static std::atomic<uint64_t> n{0};
    return n.fetch_add(1, std::memory_order_relaxed) + 1;
}

namespace {
// A thread reading from several pools keeps a step per pool (the least
// recently started one gives way: its pending step is lost, not reported).
constexpr int kStepsPerThread = 4;
}  // namespace

void PrefetchEngine::note_access(const BlockRecord *rec, int worst, uint32_t pages) {
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
        if (x.serial == serial_) s = &x;
    if (!s) {
        s = &steps[next_victim++ % kStepsPerThread];
        s->serial = 0;
    }
    bool boundary = s->serial == 0 || tenant != s->tenant || layer != s->layer || tp < s->last_pos ||
                    (tp == s->last_pos && hd != s->last_handle);
    if (boundary) {
        if (s->serial) flush_step(*s, c);
        s->serial = serial_;
        s->clock = clocks_.clock().fetch_add(1, std::memory_order_acq_rel) + 1;
        s->tenant = tenant, s->layer = layer;
        s->has_private = false;
        s->end = 0;
        s->pages[0] = s->pages[1] = s->pages[2] = 0;
        s->shared.clear();
    }
    s->pages[worst < 0 ? 0 : worst > 2 ? 2 : worst] += pages;
    s->last_pos = tp, s->last_handle = hd, s->reader = request;
    s->end = std::max(s->end, tp + tc);
    if (!published) {
        // The step's reader is known once it reads a private block: it has started its unit.
        if (!s->has_private || s->private_reader != request) clocks_.mark_started(tenant, request, layer, s->clock);
        s->private_reader = request, s->has_private = true;
    } else if (s->shared.size() < ReadStep::kMaxShared && (s->shared.empty() || s->shared.back().handle != hd))
        s->shared.push_back({hd, request, tp, tc});
}

void PrefetchEngine::flush_step(ReadStep &s, PrefetchController *c) {
    uint64_t reader = s.has_private ? s.private_reader : s.reader;
    if (!s.has_private) clocks_.mark_started(s.tenant, reader, s.layer, s.clock);  // known only now, the step over
    clocks_.mark_span(s.tenant, reader, s.layer, s.end, false);
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

// Whether an alias still names a live block of its key (the block table, read lock-free).
bool PrefetchEngine::alias_valid(const AliasKey &k, const Alias &a) const {
    BlockView v{};
    if (!resolver_ || resolver_->resolve(a.handle, &v) != SPECKV_OK) {  // freed, or its slot reused: the generation differs
        clear_error();
        return false;
    }
    const BlockRecord &r = *v.rec;
    bool ok = relaxed_field(r.tenant) == k.tenant && relaxed_field(r.layer) == k.layer &&
              relaxed_field(r.token_pos) == a.token_pos && relaxed_field(r.token_count) == a.token_count;
    return ok && r.handle.load(std::memory_order_acquire) == a.handle;
}

}  // namespace speckv
