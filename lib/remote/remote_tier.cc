// SPDX-License-Identifier: Apache-2.0
#include "remote/remote_tier.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "pool/pool.h"
#include "remote/value.h"
#include "util/status.h"

namespace speckv::remote {

namespace {
constexpr size_t kBatchItems = 64;
constexpr size_t kBatchBytes = 32u << 20;
constexpr size_t kQueueBytes = 64u << 20;  // write-back: beyond this, blocks are dropped (and counted)
}  // namespace

int Tier::create(const Config &cfg, std::unique_ptr<Tier> *out) {
    std::unique_ptr<Tier> t(new Tier);
    std::string err;
    if (!parse_uri(cfg.get_str("remote.uri"), &t->seeds_, &err)) return fail(SPECKV_EINVAL, "%s", err.c_str());
    t->timeout_ms_ = static_cast<int>(cfg.get("remote.timeout_ms"));
    t->ttl_s_ = cfg.get("remote.ttl_s");
    t->mode_ = static_cast<Write>(cfg.get("remote.write"));
    t->demote_ = cfg.get("remote.demote") != 0;
    t->log_.fn = cfg.log_fn;
    t->log_.user = cfg.log_user;
    t->log_.level = static_cast<int>(cfg.get("log.level"));
    t->reader_ = std::make_unique<Cluster>(t->seeds_, t->timeout_ms_);
    t->writer_cluster_ = std::make_unique<Cluster>(t->seeds_, t->timeout_ms_);
    if (t->mode_ == kBack) t->writer_ = std::thread([p = t.get()] { p->writer_loop(); });
    *out = std::move(t);
    return SPECKV_OK;
}

Tier::~Tier() {
    {
        std::lock_guard<std::mutex> g(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (writer_.joinable()) writer_.join();
}

// A sent value's buffer, for the next publish to fill (mu_ held).
void Tier::keep_spare(std::string &&v) {
    if (spare_.size() >= kSpares || spare_bytes_ + v.capacity() > kSpareBytes) return;
    spare_bytes_ += v.capacity();
    spare_.push_back(std::move(v));
}

// Takes one batch off the queue (mu_ held via g), sends it unlocked, counts.
void Tier::send_batch(Cluster &cluster, std::unique_lock<std::mutex> &g) {
    std::vector<Item> batch;
    size_t bytes = 0;
    while (!queue_.empty() && batch.size() < kBatchItems &&
           (batch.empty() || bytes + queue_.front().value.size() <= kBatchBytes)) {
        bytes += queue_.front().value.size();
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
    }
    queued_bytes_ -= bytes;
    g.unlock();
    std::vector<Command> cmds;
    cmds.reserve(batch.size());
    for (auto &it : batch) {
        Command c;
        c.key = it.key;
        c.args.reserve(ttl_s_ > 0 ? 5 : 3);  // not an initializer list: that would copy the value
        c.args.emplace_back("SET");
        c.args.push_back(std::move(it.key));
        c.args.push_back(std::move(it.value));
        if (ttl_s_ > 0) {
            c.args.push_back("EX");
            c.args.push_back(std::to_string(ttl_s_));
        }
        cmds.push_back(std::move(c));
    }
    std::vector<Reply> rs = cluster.exec(cmds);
    uint64_t ok = 0, okb = 0, bad = 0;
    std::string first_err;
    for (size_t i = 0; i < rs.size(); i++) {
        if (rs[i].kind == Reply::kOk) {
            ok++;
            okb += cmds[i].args[2].size();
        } else {
            bad++;
            if (first_err.empty()) first_err = rs[i].data;
        }
    }
    if (bad) log_(SPECKV_LOG_WARN, "remote tier: %" PRIu64 " of %zu block writes failed (%s)", bad, rs.size(), first_err.c_str());
    g.lock();
    for (auto &c : cmds) keep_spare(std::move(c.args[2]));
    st_.puts += ok;
    st_.put_bytes += okb;
    st_.errors += bad;
    writer_redirects_ = cluster.counters().redirects;
    done_seq_ = batch.back().seq;
    done_cv_.notify_all();
}

void Tier::writer_loop() {  // write-back: a thread sends the queue
    std::unique_lock<std::mutex> g(mu_);
    while (true) {
        cv_.wait(g, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) break;  // stopping, all sent
        send_batch(*writer_cluster_, g);
    }
}

void Tier::on_publish(Pool &pool, uint64_t handle) {
    if (mode_ == kOff) return;
    speckv_block_meta bm{};
    bm.struct_size = sizeof bm;
    if (pool.block_info(handle, &bm) != SPECKV_OK || bm.bytes == 0 || bm.bytes > (uint64_t(1) << 36)) return;
    BlockMeta m;
    m.tenant = bm.tenant;
    std::memcpy(m.hash, bm.content_hash, 32);
    m.dtype = bm.dtype;
    m.flags = bm.flags;
    m.layer = bm.layer;
    m.token_pos = bm.token_pos;
    m.token_count = bm.token_count;
    m.bytes = bm.bytes;
    Item it;
    it.key = key_of(m.tenant, m.hash);
    {
        std::lock_guard<std::mutex> g(mu_);
        if (!spare_.empty()) {
            spare_bytes_ -= spare_.back().capacity();
            it.value = std::move(spare_.back());
            spare_.pop_back();
        }
    }
    make_value(m, &it.value);
    if (pool.read(handle, 0, it.value.data() + kHeaderBytes, m.bytes) != SPECKV_OK) {
        std::lock_guard<std::mutex> g(mu_);
        st_.errors++;
        return;
    }
    seal(&it.value);
    std::unique_lock<std::mutex> g(mu_);
    if (mode_ == kBack && queued_bytes_ + it.value.size() > kQueueBytes) {
        st_.dropped++;
        return;
    }
    uint64_t seq = it.seq = next_seq_++;
    queued_bytes_ += it.value.size();
    queue_.push_back(std::move(it));
    if (mode_ == kBack) {
        cv_.notify_one();
        return;
    }
    // Write-through: the first publisher to find nobody sending sends the
    // queue (its own block and whatever concurrent publishers added, in
    // batches); the others wait for their block's batch. No thread hand-off.
    while (done_seq_ < seq) {
        if (!sending_) {
            sending_ = true;
            while (done_seq_ < seq && !queue_.empty()) send_batch(*writer_cluster_, g);
            sending_ = false;
            done_cv_.notify_all();
        } else {
            done_cv_.wait(g, [&] { return done_seq_ >= seq || !sending_; });
        }
    }
}

int Tier::on_lookup_miss(Pool &pool, uint64_t tenant, const uint8_t *hash, uint64_t *out) {
    std::vector<Command> cmds(1);
    cmds[0].key = key_of(tenant, hash);
    cmds[0].args = {"GET", cmds[0].key};
    cmds[0].view = true;
    std::vector<Reply> rs;
    uint64_t redirects;
    {
        std::lock_guard<std::mutex> g(read_mu_);
        rs = reader_->exec(cmds);
        redirects = reader_->counters().redirects;
    }
    const Reply &r = rs[0];
    auto miss = [&](bool error, bool checksum, const char *why) {
        {
            std::lock_guard<std::mutex> g(mu_);
            st_.misses++;
            st_.errors += error;
            st_.checksum_failures += checksum;
            st_.redirects = redirects;
        }
        if (error || checksum) log_(SPECKV_LOG_WARN, "remote tier: lookup of %s: %s", cmds[0].key.c_str(), why);
        return fail(SPECKV_ENOENT, "no block for this tenant and hash in the pool; remote tier: %s", why);
    };
    if (r.kind == Reply::kNil) return miss(false, false, "no such key");
    if (r.kind == Reply::kIo) return miss(true, false, r.data.empty() ? "no answer" : r.data.c_str());
    if (r.kind != Reply::kValue) return miss(true, false, r.data.c_str());
    BlockMeta m;
    std::string_view data;
    Verdict v = check_value(r.bytes(), tenant, hash, &m, &data);
    {
        std::lock_guard<std::mutex> g(mu_);
        st_.get_bytes += r.bytes().size();
    }
    if (v != Verdict::ok) return miss(false, true, verdict_text(v));

    speckv_hint h{};
    h.struct_size = sizeof h;
    h.tenant = tenant;
    h.layer = m.layer;
    h.flags = (m.flags & (SPECKV_HINT_KEYS | SPECKV_HINT_VALUES)) | SPECKV_HINT_HAS_HASH;
    h.token_pos = m.token_pos;
    h.token_count = m.token_count;
    std::memcpy(h.content_hash, hash, 32);
    if (m.dtype < SPECKV_DTYPE_OPAQUE || m.dtype > SPECKV_DTYPE_FP32) return miss(false, true, "unknown dtype");
    uint64_t handle = 0;
    int rc = pool.alloc(m.bytes, m.dtype, &h, &handle);
    if (rc != SPECKV_OK) return rc;  // the pool's error (no room, quota) stands
    rc = pool.write(handle, 0, data.data(), data.size());
    if (rc == SPECKV_OK) {
        uint64_t canon = 0;
        rc = pool.publish(handle, hash, &canon);
        if (rc == SPECKV_EEXIST) {  // another thread or process published it meanwhile: use theirs
            pool.free(handle);
            handle = canon;
            rc = SPECKV_OK;
        }
    }
    if (rc != SPECKV_OK) {
        int keep = rc;
        std::string msg = last_error();
        pool.free(handle);
        return fail(keep, "%s", msg.c_str());
    }
    {
        std::lock_guard<std::mutex> g(mu_);
        st_.hits++;
        st_.redirects = redirects;
    }
    *out = handle;
    return SPECKV_OK;
}

std::shared_ptr<Spill> Tier::spill_for_l4(bool listed) {
    if (!demote_ && !listed) return nullptr;
    std::lock_guard<std::mutex> g(mu_);
    if (!spill_) spill_ = std::make_shared<Spill>(seeds_, timeout_ms_, ttl_s_);
    return spill_;
}

TierStats Tier::stats() const {
    std::lock_guard<std::mutex> g(mu_);
    TierStats s = st_;
    s.redirects += writer_redirects_;
    return s;
}

std::string Tier::json_fields() const {
    TierStats s = stats();
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  ",\"remote_hits\":%" PRIu64 ",\"remote_misses\":%" PRIu64 ",\"remote_checksum_failures\":%" PRIu64
                  ",\"remote_errors\":%" PRIu64 ",\"remote_puts\":%" PRIu64 ",\"remote_put_bytes\":%" PRIu64
                  ",\"remote_get_bytes\":%" PRIu64 ",\"remote_dropped\":%" PRIu64 ",\"remote_redirects\":%" PRIu64,
                  s.hits, s.misses, s.checksum_failures, s.errors, s.puts, s.put_bytes, s.get_bytes, s.dropped,
                  s.redirects);
    std::string out = buf;
    std::shared_ptr<Spill> sp;
    {
        std::lock_guard<std::mutex> g(mu_);
        sp = spill_;
    }
    if (sp) {
        SpillStats d = sp->stats();
        std::snprintf(buf, sizeof buf,
                      ",\"remote_demoted\":%" PRIu64 ",\"remote_demoted_bytes\":%" PRIu64 ",\"remote_promoted\":%" PRIu64
                      ",\"remote_lost\":%" PRIu64 ",\"remote_demote_checksum_failures\":%" PRIu64
                      ",\"remote_demote_errors\":%" PRIu64,
                      d.puts, d.put_bytes, d.gets, d.lost, d.checksum_failures, d.errors);
        out += buf;
    }
    return out;
}

}  // namespace speckv::remote
