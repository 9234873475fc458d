// SPDX-License-Identifier: Apache-2.0
// The L4 cold tier's spill store (L5; cold_tier.h set_spill, docs/remote.md
// "Demotion to L5"): room is made by moving the oldest extents out of the
// file, items the file cannot take go there whole, reads of their keys are
// served from there, and their copies there are deleted when the keys go.
// Which copies the store holds is kept in a directory beside the file, so
// they outlive the tier (below). Everything here runs under the tier's mutex.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <unordered_set>
#include <vector>

#include "tiers/cold_tier.h"
#include "util/crc32c.h"
#include "util/file_access.h"
#include "util/status.h"

namespace speckv {

namespace {
constexpr uint64_t kMoveBytes = 64ull << 20;  // most bytes one make-room pass reads out of the file
constexpr size_t kMaxValue = 256ull << 20;     // larger items are not sent (Redis takes 512 MB per value)
constexpr uint64_t kGenBound = uint64_t(1) << 62;  // generations are below it (cold_tier.cc, kMaxGen)

// ---- the directory: `<path>.l5`, a log of 40-byte records (little-endian):
// magic "SKV5" (u32), op (u16), version 1 (u16), key (u64), len (u64), gen
// (u64), CRC32C of the 36 bytes before it (u32). The first record is kHead
// (key = the store id). kAdd: the key's copy is (or is being) in the store
// with this length and generation, written before the copy is sent, so no
// copy the store holds is ever unlisted; kDel: it is gone, written after the
// store confirmed the delete; kDead: to delete (a rewrite's form of an
// unconfirmed one). Replay stops at the first record that does not check
// (a torn tail). Rewritten whole (temporary file + rename) at open and when
// it has grown far past what it lists.
constexpr uint32_t kDirMagic = 0x35564b53;  // "SKV5"
enum : uint16_t { kHead = 1, kAdd = 2, kDel = 3, kDead = 4 };
constexpr size_t kRecBytes = 40;
}  // namespace

struct ColdTier::SpillRecord {
    uint16_t op;
    uint64_t key, len, gen;
};

namespace {
void encode(const ColdTier::SpillRecord &r, unsigned char *out) {
    std::memset(out, 0, kRecBytes);
    const uint16_t version = 1;
    std::memcpy(out, &kDirMagic, 4);
    std::memcpy(out + 4, &r.op, 2);
    std::memcpy(out + 6, &version, 2);
    std::memcpy(out + 8, &r.key, 8);
    std::memcpy(out + 16, &r.len, 8);
    std::memcpy(out + 24, &r.gen, 8);
    const uint32_t crc = crc32c(0, out, 36);
    std::memcpy(out + 36, &crc, 4);
}

bool decode(const unsigned char *in, ColdTier::SpillRecord *r) {
    uint32_t magic, crc;
    uint16_t version;
    std::memcpy(&magic, in, 4);
    std::memcpy(&crc, in + 36, 4);
    std::memcpy(&r->op, in + 4, 2);
    std::memcpy(&version, in + 6, 2);
    std::memcpy(&r->key, in + 8, 8);
    std::memcpy(&r->len, in + 16, 8);
    std::memcpy(&r->gen, in + 24, 8);
    if (magic != kDirMagic || version != 1 || crc != crc32c(0, in, 36)) return false;
    if (r->op < kHead || r->op > kDead) return false;
    if (r->op == kAdd && (r->len > kMaxValue || r->gen == 0 || r->gen >= kGenBound)) return false;
    return true;
}

bool write_all(int fd, const unsigned char *p, size_t n, uint64_t off) {
    while (n) {
        ssize_t w = ::pwrite(fd, p, n, off_t(off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w, n -= size_t(w), off += uint64_t(w);
    }
    return true;
}
}  // namespace

// Reads the directory (if any), settles it against the file's copies and
// rewrites it compacted. With recover, a listed copy the file also holds
// at the same or a newer generation is stale (deleted from the store), and
// a file copy older than the listed one is stale (forgotten); without
// recover the file was emptied, so every listed copy is to delete.
int ColdTier::spill_dir_open() {
    const std::string path = opt_.path + ".l5";
    bool have = false;
    std::unordered_set<uint64_t> dead;
    int fd = ::open(path.c_str(), O_RDONLY | secure_open_flags(path));
    if (fd < 0 && errno != ENOENT) return open_failure(errno, path, "L5 directory");
    if (fd >= 0) {
        struct stat st;
        int rc = check_open_file(fd, path, opt_.access, "L5 directory", SPECKV_EINVAL);
        if (rc == SPECKV_OK && fstat(fd, &st) != 0) rc = fail(SPECKV_EIO, "%s: fstat: %s", path.c_str(), strerror(errno));
        std::vector<unsigned char> buf;
        if (rc == SPECKV_OK) {
            buf.resize(size_t(st.st_size) / kRecBytes * kRecBytes);
            size_t got = 0;
            while (got < buf.size()) {
                ssize_t r = ::pread(fd, buf.data() + got, buf.size() - got, off_t(got));
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0) break;
                got += size_t(r);
            }
            buf.resize(got / kRecBytes * kRecBytes);
        }
        ::close(fd);
        if (rc != SPECKV_OK) return rc;
        for (size_t at = 0; at < buf.size(); at += kRecBytes) {
            SpillRecord r;
            if (!decode(buf.data() + at, &r)) break;  // a torn tail, or not ours: the rest is unknown
            if (!have) {
                if (r.op != kHead) break;
                spill_id_ = r.key;
                have = true;
                continue;
            }
            switch (r.op) {
            case kAdd:
                spilled_[r.key] = Spilled{r.len, r.gen, false};
                dead.erase(r.key);
                break;
            case kDel:
                spilled_.erase(r.key);
                dead.erase(r.key);
                break;
            case kDead:
                spilled_.erase(r.key);
                dead.insert(r.key);
                break;
            default:
                break;
            }
        }
    }
    if (!have) {  // a new store id (and nothing listed)
        std::random_device rd;
        spill_id_ = (uint64_t(rd()) << 32) ^ rd();
        spilled_.clear();
        dead.clear();
    }
    for (auto s = spilled_.begin(); s != spilled_.end();) {
        auto f = index_.find(s->first);
        if (!opt_.recover || (f != index_.end() && f->second.gen >= s->second.gen)) {
            dead.insert(s->first);
            s = spilled_.erase(s);
            continue;
        }
        if (f != index_.end()) {  // the file's copy is older than the store's
            forgotten_.push_back(f->second);
            index_.erase(f);
        }
        next_gen_ = std::max(next_gen_, s->second.gen + 1);
        ++s;
    }
    spill_dead_.assign(dead.begin(), dead.end());
    if (!have) return SPECKV_OK;  // created when a store is set
    return spill_dir_rewrite_locked();
}

int ColdTier::spill_dir_rewrite_locked() {
    const std::string path = opt_.path + ".l5";
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    std::vector<SpillRecord> recs;
    recs.push_back(SpillRecord{kHead, spill_id_, 0, 0});
    for (const auto &[k, s] : spilled_) recs.push_back(SpillRecord{kAdd, k, s.len, s.gen});
    std::unordered_set<uint64_t> dead(spill_dead_.begin(), spill_dead_.end());
    dead.insert(spill_undeleted_.begin(), spill_undeleted_.end());
    for (uint64_t k : dead) recs.push_back(SpillRecord{kDead, k, 0, 0});
    std::vector<unsigned char> buf(recs.size() * kRecBytes);
    for (size_t i = 0; i < recs.size(); i++) encode(recs[i], buf.data() + i * kRecBytes);
    (void)::unlink(tmp.c_str());  // one a crash of this pid left
    int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | secure_open_flags(tmp), opt_.access.mode & 0777);
    if (fd < 0) return open_failure(errno, tmp, "L5 directory");
    const bool ok = fchmod(fd, opt_.access.mode & 0777) == 0 && write_all(fd, buf.data(), buf.size(), 0) &&
                    fdatasync(fd) == 0 && ::rename(tmp.c_str(), path.c_str()) == 0;
    if (!ok) {
        const int e = errno;
        ::close(fd);
        (void)::unlink(tmp.c_str());
        st_.spill_dir_errors++;
        return fail(SPECKV_EIO, "L5 directory %s: rewrite: %s", path.c_str(), strerror(e));
    }
    if (dir_fd_ >= 0) ::close(dir_fd_);
    dir_fd_ = fd;
    dir_bytes_ = buf.size();
    dir_records_ = recs.size();
    return SPECKV_OK;
}

int ColdTier::spill_dir_append_locked(const std::vector<SpillRecord> &recs) {
    if (recs.empty()) return SPECKV_OK;
    if (dir_fd_ < 0) return fail(SPECKV_EIO, "L5 directory %s.l5 is not open", opt_.path.c_str());
    std::vector<unsigned char> buf(recs.size() * kRecBytes);
    for (size_t i = 0; i < recs.size(); i++) encode(recs[i], buf.data() + i * kRecBytes);
    bool ok = write_all(dir_fd_, buf.data(), buf.size(), dir_bytes_);
    if (ok && opt_.durable) ok = fdatasync(dir_fd_) == 0;
    if (!ok) {
        const int e = errno;
        st_.spill_dir_errors++;
        // A torn record would end the replay there: cut it off, or write no more.
        if (ftruncate(dir_fd_, off_t(dir_bytes_)) != 0) {
            ::close(dir_fd_);
            dir_fd_ = -1;
        }
        return fail(SPECKV_EIO, "L5 directory %s.l5: append: %s", opt_.path.c_str(), strerror(e));
    }
    dir_bytes_ += buf.size();
    dir_records_ += recs.size();
    return SPECKV_OK;
}

// A key put to the store again: a delete still pending for its old copy
// must not remove the new one.
void ColdTier::unbury(uint64_t key) {
    spill_dead_.erase(std::remove(spill_dead_.begin(), spill_dead_.end(), key), spill_dead_.end());
    spill_undeleted_.erase(key);
}

void ColdTier::set_spill(std::shared_ptr<ColdSpill> spill, bool demote) {
    std::lock_guard lk(mu_);
    spill_ = std::move(spill);
    spill_new_ = demote;
    if (!spill_) return;
    spill_->bind(spill_id_);
    if (dir_fd_ < 0 && spill_dir_rewrite_locked() != SPECKV_OK) clear_error();  // no directory: no new copies
    spill_dead_.insert(spill_dead_.end(), spill_undeleted_.begin(), spill_undeleted_.end());
    spill_flush_locked();  // deletions that waited for a store
}

bool ColdTier::in_spill(uint64_t key) const {
    std::lock_guard lk(mu_);
    return spilled_.count(key) != 0;
}

std::vector<uint64_t> ColdTier::take_spill_moves() {
    std::lock_guard lk(mu_);
    std::vector<uint64_t> out;
    out.swap(spill_moved_);
    return out;
}

bool ColdTier::spill_listed() const {
    std::lock_guard lk(mu_);
    return !spilled_.empty() || !spill_dead_.empty() || !spill_undeleted_.empty();
}

void ColdTier::spill_make_room_locked(std::span<PutItem> items) {
    uint64_t need = 0;
    std::unordered_set<uint64_t> batch;
    for (const PutItem &it : items) {
        batch.insert(it.key);
        // One the file could never hold goes to the store whole: no room is made for it.
        if (it.len <= alloc_->total_blocks() * opt_.block && extent_blocks(it.len) <= alloc_->total_blocks())
            need += extent_blocks(it.len);
    }
    need = std::min(need, alloc_->total_blocks());
    if (alloc_->free_blocks() >= need) return;  // (a fragmented file may still refuse one: it goes whole)
    // The oldest copies first (lowest generation): demoted longest ago.
    std::vector<std::pair<uint64_t, uint64_t>> by_gen;
    for (const auto &kv : index_)
        if (!batch.count(kv.first)) by_gen.emplace_back(kv.second.gen, kv.first);
    std::sort(by_gen.begin(), by_gen.end());
    uint64_t have = alloc_->free_blocks(), bytes = 0;
    std::vector<uint64_t> move;
    for (const auto &[gen, key] : by_gen) {
        if (have >= need || bytes >= kMoveBytes) break;
        const Extent &e = index_.at(key);
        move.push_back(key);
        have += e.blocks;
        bytes += e.len;
    }
    if (move.empty()) return;
    std::vector<std::vector<unsigned char>> bufs(move.size());
    std::vector<GetItem> gets;
    for (size_t i = 0; i < move.size(); i++) {
        bufs[i].resize(index_.at(move[i]).len);
        gets.push_back(GetItem{move[i], bufs[i].data(), bufs[i].size()});
    }
    const uint64_t g0 = st_.gets, gf0 = st_.get_failures, br0 = st_.bytes_read;
    (void)get_locked(gets);  // CRC32C checked; a copy that fails stays in the file
    st_.gets = g0, st_.get_failures = gf0, st_.bytes_read = br0;  // internal reads: not the caller's gets
    std::vector<ColdSpill::PutItem> puts;
    std::vector<SpillRecord> recs;
    for (const GetItem &g : gets) {
        if (g.status != SPECKV_OK) continue;
        puts.push_back(ColdSpill::PutItem{g.key, g.dst, g.len});
        recs.push_back(SpillRecord{kAdd, g.key, g.len, index_.at(g.key).gen});
    }
    clear_error();
    if (puts.empty()) return;
    if (spill_dir_append_locked(recs) != SPECKV_OK) {  // unlisted copies would outlive everything: none sent
        clear_error();
        return;
    }
    spill_->put(puts);
    for (const ColdSpill::PutItem &p : puts) {
        if (!p.ok) {  // it may have landed all the same: deleted later (the file keeps its copy)
            spill_dead_.push_back(p.key);
            continue;
        }
        auto f = index_.find(p.key);
        unbury(p.key);
        spilled_[p.key] = Spilled{f->second.len, f->second.gen, false};  // same generation: forget_if still matches
        forgotten_.push_back(f->second);
        index_.erase(f);
        st_.spilled++;
        spill_moved_.push_back(p.key);
    }
    (void)flush_forgotten_locked();  // their blocks are free from here
    clear_error();
}

void ColdTier::spill_rest_locked(std::span<PutItem> items, std::vector<int> &status) {
    std::vector<ColdSpill::PutItem> puts;
    std::vector<size_t> at;
    std::vector<SpillRecord> recs;
    for (size_t i = 0; i < items.size(); i++) {
        if (status[i] != SPECKV_ENOSPC || items[i].len > kMaxValue) continue;
        puts.push_back(ColdSpill::PutItem{items[i].key, items[i].data, items[i].len});
        recs.push_back(SpillRecord{kAdd, items[i].key, items[i].len, next_gen_++});
        at.push_back(i);
    }
    if (puts.empty()) return;
    if (spill_dir_append_locked(recs) != SPECKV_OK) {  // they stay SPECKV_ENOSPC: the caller keeps its copies
        clear_error();
        return;
    }
    spill_->put(puts);
    for (size_t j = 0; j < puts.size(); j++) {
        if (!puts[j].ok) {  // stays SPECKV_ENOSPC: the caller keeps its copy; one that landed is deleted later
            if (!spilled_.count(puts[j].key)) spill_dead_.push_back(puts[j].key);
            continue;
        }
        status[at[j]] = kInSpill;
        unbury(puts[j].key);
        spilled_[puts[j].key] = Spilled{puts[j].len, recs[j].gen, false};
        st_.spilled_direct++;
    }
    clear_error();
}

void ColdTier::spill_get_locked(std::span<GetItem> items, std::vector<int> &status, const std::vector<char> &in_spill) {
    std::vector<ColdSpill::GetItem> gets;
    std::vector<size_t> at;
    for (size_t i = 0; i < items.size(); i++) {
        if (!in_spill[i]) continue;
        GetItem &it = items[i];
        const Spilled &s = spilled_.at(it.key);
        it.len = s.len;
        if (it.cap < s.len || (s.len && !it.dst)) {
            status[i] = fail(SPECKV_ERANGE, "cold tier: key %llu holds %llu bytes, buffer has %zu",
                             (unsigned long long)it.key, (unsigned long long)s.len, it.cap);
            continue;
        }
        if (s.lost) {
            status[i] = fail(SPECKV_ENOENT, "cold tier: the L5 copy of key %llu is gone (evicted or deleted from the "
                                            "cluster): a miss",
                             (unsigned long long)it.key);
            continue;
        }
        gets.push_back(ColdSpill::GetItem{it.key, it.dst, size_t(s.len)});
        at.push_back(i);
    }
    if (gets.empty()) return;
    spill_->get(gets);
    for (size_t j = 0; j < gets.size(); j++) {
        const size_t i = at[j];
        if (gets[j].status == SPECKV_OK) {
            st_.spill_gets++;
            items[i].spilled = true;
            continue;
        }
        if (gets[j].status == SPECKV_ENOENT) {  // gone for good: later gets miss without asking
            spilled_.at(items[i].key).lost = true;
            st_.spill_lost++;
            status[i] = fail(SPECKV_ENOENT, "cold tier: the L5 copy of key %llu is gone (evicted, deleted or "
                                            "overwritten in the cluster): a miss",
                             (unsigned long long)items[i].key);
        } else {
            st_.spill_failures++;
            status[i] = fail(SPECKV_EIO, "cold tier: the L5 copy of key %llu could not be read (no answer from the "
                                         "cluster)",
                             (unsigned long long)items[i].key);
        }
    }
}

bool ColdTier::spill_forget_locked(uint64_t key) {
    auto s = spilled_.find(key);
    if (s == spilled_.end()) return false;
    spilled_.erase(s);
    spill_dead_.push_back(key);
    return true;
}

// Confirmed deletions are struck from the directory; one the store did not
// confirm (or that waits for a store) is listed as to delete, and retried
// when a store is set and at the next open.
void ColdTier::spill_flush_locked() {
    if (spill_dead_.empty()) return;
    std::vector<ColdSpill::DelItem> dels;
    for (uint64_t k : spill_dead_) dels.push_back(ColdSpill::DelItem{k});
    spill_dead_.clear();
    if (spill_) spill_->del(dels);  // without a store: none confirmed, all wait
    std::vector<SpillRecord> recs;
    for (const ColdSpill::DelItem &d : dels) {
        if (d.ok) {
            spill_undeleted_.erase(d.key);
            recs.push_back(SpillRecord{kDel, d.key, 0, 0});
        } else if (spill_undeleted_.insert(d.key).second) {
            recs.push_back(SpillRecord{kDead, d.key, 0, 0});
        }
    }
    if (spill_dir_append_locked(recs) != SPECKV_OK) clear_error();  // listed still: deleted again at the next open
    const uint64_t listed = spilled_.size() + spill_undeleted_.size();
    if (dir_records_ > 4 * listed + 65536 && spill_dir_rewrite_locked() != SPECKV_OK) clear_error();
}

}  // namespace speckv
