// SPDX-License-Identifier: Apache-2.0
#include "tiers/cold_tier.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <span>
#include <unordered_set>

#include "tiers/cold_disk.h"
#include "util/crc32c.h"
#include "util/status.h"

namespace speckv {

using namespace cold_disk;

// ---- open / close

int ColdTier::open(const ColdTierOptions &opt, std::unique_ptr<ColdTier> *out) {
    if (!out) return fail(SPECKV_EINVAL, "cold tier: out is NULL");
    std::unique_ptr<ColdTier> t(new ColdTier());
    if (int rc = t->init(opt)) return rc;
    *out = std::move(t);
    return SPECKV_OK;
}

int ColdTier::init(const ColdTierOptions &opt) {
    opt_ = opt;
    auto pow2 = [](uint64_t v) { return v && !(v & (v - 1)); };
    if (opt.path.empty()) return fail(SPECKV_EINVAL, "cold tier: empty path");
    if (!pow2(opt.block) || opt.block < 512 || opt.block > (1u << 20))
        return fail(SPECKV_EINVAL, "cold tier: block %u is not a power of two in [512, 1048576]", opt.block);
    if (opt.capacity < opt.block || opt.capacity > (1ull << 50))
        return fail(SPECKV_EINVAL, "cold tier: capacity %llu out of [block, 2^50]", (unsigned long long)opt.capacity);
    if (opt.queue_depth < 1 || opt.queue_depth > 1024)
        return fail(SPECKV_EINVAL, "cold tier: queue_depth %u out of [1, 1024]", opt.queue_depth);
    if (opt.slot_bytes < opt.block || opt.slot_bytes > (16u << 20) || opt.slot_bytes % opt.block)
        return fail(SPECKV_EINVAL, "cold tier: slot_bytes %u is not a multiple of block in [block, 16 MiB]",
                    opt.slot_bytes);
    if (opt.grow_bytes > (1ull << 40))
        return fail(SPECKV_EINVAL, "cold tier: grow_bytes %llu out of [0, 2^40]", (unsigned long long)opt.grow_bytes);

    if (int rc = check_directory(directory_of(opt.path), "L4 file"); rc != SPECKV_OK) return rc;
    // Created with O_EXCL (then given exactly opt.access.mode), else opened
    // as it is; never through a symbolic link, and only a file of ours.
    int flags = O_RDWR | secure_open_flags(opt.path);
    bool created = false;
    auto open_it = [&](int extra) {
        int fd = -1;
        if (opt.create) {
            fd = ::open(opt.path.c_str(), flags | extra | O_CREAT | O_EXCL, opt.access.mode & 0777);
            if (fd >= 0) {
                created = true;
                return fd;
            }
            if (errno != EEXIST) return -1;
        }
        return ::open(opt.path.c_str(), flags | extra);
    };
    if (opt.direct) {
        fd_ = opt.test_refuse_direct ? (errno = EINVAL, -1) : open_it(O_DIRECT);
        if (fd_ >= 0) {
            direct_ = true;
        } else if (errno == EINVAL) {
            reason_ = "O_DIRECT refused by the file system (EINVAL): buffered I/O";
        } else {
            fd_ = -1;
        }
    }
    if (fd_ < 0) fd_ = open_it(0);
    if (fd_ < 0) {
        int e = errno;
        if (e == ENOENT) return fail(SPECKV_ENOENT, "cold tier file %s does not exist", opt.path.c_str());
        return open_failure(e, opt.path, "L4 file");
    }
    if (created && fchmod(fd_, opt.access.mode & 0777) != 0)
        return fail(SPECKV_EIO, "cold tier file %s: fchmod: %s", opt.path.c_str(), strerror(errno));
    if (int rc = check_open_file(fd_, opt.path, opt.access, "L4 file", SPECKV_EINVAL); rc != SPECKV_OK) return rc;
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0)
        return fail(errno == EWOULDBLOCK ? SPECKV_EBUSY : SPECKV_EIO, "cold tier file %s is in use: %s",
                    opt.path.c_str(), strerror(errno));
    struct stat st;
    if (fstat(fd_, &st) != 0) return fail(SPECKV_EIO, "cold tier file %s: fstat: %s", opt.path.c_str(), strerror(errno));
    if (!S_ISREG(st.st_mode)) return fail(SPECKV_EINVAL, "cold tier file %s is not a regular file", opt.path.c_str());
    if (direct_) {
        struct statx sx;
        if (statx(fd_, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
            if (sx.stx_dio_offset_align == 0 || sx.stx_dio_offset_align > opt.block || sx.stx_dio_mem_align > 4096) {
                char why[160];
                std::snprintf(why, sizeof why, "O_DIRECT needs %u-byte offsets (block is %u): buffered I/O",
                              sx.stx_dio_offset_align, opt.block);
                reason_ = why;
                direct_ = false;
            }
        }
        if (!direct_ && fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) & ~O_DIRECT) != 0)
            return fail(SPECKV_EIO, "cold tier: clearing O_DIRECT: %s", strerror(errno));
    }

    staging_bytes_ = size_t(opt.queue_depth) * opt.slot_bytes;
    staging_ = static_cast<unsigned char *>(std::aligned_alloc(4096, staging_bytes_));
    if (!staging_) return fail(SPECKV_ENOMEM, "cold tier: %zu bytes of staging", staging_bytes_);
    std::memset(staging_, 0, staging_bytes_);

    if (opt.engine != ColdEngine::kSync) {
        auto r = std::make_unique<Ring>();
        int rc = io_uring_queue_init(opt.queue_depth, &r->ring, 0);
        if (rc < 0) {
            if (opt.engine == ColdEngine::kUring)
                return fail(SPECKV_ENOTSUP, "cold tier: io_uring_queue_init: %s", strerror(-rc));
            if (!reason_.empty()) reason_ += "; ";
            reason_ += std::string("io_uring unavailable (") + strerror(-rc) + "): pread/pwrite";
        } else {
            ring_ = std::move(r);
            iovec iov{staging_, staging_bytes_};
            rc = io_uring_register_buffers(&ring_->ring, &iov, 1);
            if (rc == 0) {
                fixed_ = true;
            } else {
                if (!reason_.empty()) reason_ += "; ";
                reason_ += std::string("registered buffers refused (") + strerror(-rc) + "): plain reads/writes";
            }
        }
    }

    alloc_ = std::make_unique<ExtentAllocator>(opt.capacity / opt.block);
    if (opt.recover) {
        file_bytes_ = uint64_t(st.st_size);
        if (int rc = recover(); rc != SPECKV_OK) return rc;
    } else if (st.st_size != 0 && ftruncate(fd_, 0) != 0) {
        return fail(SPECKV_EIO, "cold tier file %s: truncate: %s", opt.path.c_str(), strerror(errno));
    }
    return spill_dir_open();  // the spill store's copies (after recover: the file's copies are known)
}

ColdTier::~ColdTier() {
    if (fd_ >= 0 && (!forgotten_.empty() || !spill_dead_.empty())) {
        std::lock_guard lk(mu_);
        (void)flush_forgotten_locked();  // the spill store's live copies stay: the directory lists them
    }
    if (dir_fd_ >= 0) ::close(dir_fd_);
    if (ring_) io_uring_queue_exit(&ring_->ring);  // waits for anything in flight
    std::free(staging_);
    if (fd_ >= 0) ::close(fd_);
}

void ColdTier::set_fault_hook(ColdFaultHook hook) {
    std::lock_guard lk(mu_);
    hook_ = std::move(hook);
}

// Writes that extend a file serialise in most file systems (ext4 and XFS
// take the inode lock exclusively for them), so the file grows ahead of the
// extents in big steps. Best effort: when the space cannot be reserved (full
// disk, a file size limit, no fallocate) the writes themselves report it.
void ColdTier::preallocate(uint64_t end) {
    if (end <= file_bytes_ || opt_.grow_bytes == 0) return;
    uint64_t want = std::min(std::max(end, file_bytes_ + opt_.grow_bytes), alloc_->total_blocks() * opt_.block);
    for (uint64_t target : {want, end}) {
        if (fallocate(fd_, 0, off_t(file_bytes_), off_t(target - file_bytes_)) == 0) {
            file_bytes_ = target;
            return;
        }
        if (errno == EOPNOTSUPP || errno == ENOSYS) break;
    }
}

uint64_t ColdTier::extent_blocks(size_t len) const { return (kHeaderBytes + len + opt_.block - 1) / opt_.block; }

// ---- put / get / drop

int ColdTier::put(std::span<PutItem> items, bool may_spill) {
    std::lock_guard lk(mu_);
    if (!forgotten_.empty() || (may_spill && !spill_dead_.empty()))
        (void)flush_forgotten_locked(may_spill);  // their space may be needed now
    const bool spill = spill_ && spill_new_ && may_spill;
    if (spill) spill_make_room_locked(items);  // the oldest extents go to the spill store (L4 -> L5)
    const uint32_t blk = opt_.block;
    std::vector<Extent> fresh(items.size());
    std::vector<DiskHeader> hdr(items.size());
    std::vector<int> status(items.size(), SPECKV_OK);
    std::unordered_set<uint64_t> seen;
    std::vector<Chunk> chunks;
    st_.puts += items.size();
    for (size_t i = 0; i < items.size(); i++) {
        PutItem &it = items[i];
        if (!seen.insert(it.key).second) {
            status[i] = fail(SPECKV_EINVAL, "cold tier: key %llu twice in one put", (unsigned long long)it.key);
            continue;
        }
        if (it.len && !it.data) {
            status[i] = fail(SPECKV_EINVAL, "cold tier: key %llu has NULL data", (unsigned long long)it.key);
            continue;
        }
        if (it.len > alloc_->total_blocks() * blk - kHeaderBytes) {
            st_.enospc++;
            status[i] = fail(SPECKV_ENOSPC, "cold tier %s: key %llu has %zu bytes, more than the tier holds",
                             opt_.path.c_str(), (unsigned long long)it.key, it.len);
            continue;
        }
        uint64_t nb = extent_blocks(it.len), first;
        if (!alloc_->alloc(nb, &first)) {
            st_.enospc++;
            status[i] = fail(SPECKV_ENOSPC, "cold tier %s full: key %llu needs %llu blocks, largest free run %llu",
                             opt_.path.c_str(), (unsigned long long)it.key, (unsigned long long)nb,
                             (unsigned long long)alloc_->largest_free());
            continue;
        }
        uint32_t crc = crc32c(0, it.data, it.len);
        fresh[i] = Extent{first, nb, it.len, next_gen_++, crc};
        hdr[i] = make_header(it.key, it.len, fresh[i].gen, crc);
        for (uint64_t s = 0; s < nb * blk; s += opt_.slot_bytes)
            chunks.push_back(Chunk{uint32_t(i), first * blk + s, uint32_t(std::min<uint64_t>(opt_.slot_bytes, nb * blk - s)), s});
    }
    uint64_t end = 0;
    for (size_t i = 0; i < items.size(); i++)
        if (!status[i]) end = std::max(end, (fresh[i].first_block + fresh[i].blocks) * blk);
    preallocate(end);
    auto fill = [&](Chunk &c, unsigned char *dst) {
        const PutItem &it = items[c.item];
        const auto *h = reinterpret_cast<const unsigned char *>(&hdr[c.item]);
        const auto *p = static_cast<const unsigned char *>(it.data);
        for (uint64_t s = c.stream_off, e = c.stream_off + c.len; s < e;) {
            if (s < kHeaderBytes) {
                size_t n = std::min<uint64_t>(kHeaderBytes, e) - s;
                std::memcpy(dst, h + s, n);
                dst += n, s += n;
            } else if (s < kHeaderBytes + it.len) {
                size_t n = std::min<uint64_t>(kHeaderBytes + it.len, e) - s;
                std::memcpy(dst, p + (s - kHeaderBytes), n);
                dst += n, s += n;
            } else {
                std::memset(dst, 0, e - s);
                s = e;
            }
        }
    };
    auto done = [&](Chunk &c, unsigned char *, int rc) {
        if (rc && !status[c.item]) status[c.item] = rc;
    };
    execute(true, chunks, fill, done);
    if (opt_.durable && std::count(status.begin(), status.end(), SPECKV_OK)) {
        st_.syncs++;
        if (fdatasync(fd_) != 0) {  // nothing of this batch is known to be on the device
            int e = errno;
            st_.io_errors++;
            int code = fail(is_nospace(e) ? SPECKV_ENOSPC : SPECKV_EIO, "cold tier: fdatasync of %s: %s",
                            opt_.path.c_str(), strerror(e));
            for (int &x : status)
                if (!x) x = code;
        }
    }

    if (spill) spill_rest_locked(items, status);  // no room in the file: to the spill store

    std::vector<uint64_t> stale;
    std::vector<Extent> stale_ext;
    int first_rc = SPECKV_OK;
    for (size_t i = 0; i < items.size(); i++) {
        PutItem &it = items[i];
        it.spilled = false;
        if (status[i] == kInSpill) {  // its copy is in the spill store; one in the file is stale
            it.status = SPECKV_OK;
            it.spilled = true;
            if (fresh[i].blocks) alloc_->release(fresh[i].first_block, fresh[i].blocks);
            if (auto f = index_.find(it.key); f != index_.end()) {
                stale.push_back(f->second.first_block);
                stale_ext.push_back(f->second);
                index_.erase(f);
            }
            continue;
        }
        it.status = status[i];
        if (status[i]) {
            st_.put_failures++;
            if (!first_rc) first_rc = status[i];
            if (fresh[i].blocks) alloc_->release(fresh[i].first_block, fresh[i].blocks);
            continue;
        }
        auto [pos, inserted] = index_.try_emplace(it.key, fresh[i]);
        if (!inserted) {
            stale.push_back(pos->second.first_block);
            stale_ext.push_back(pos->second);
            pos->second = fresh[i];
        }
        spill_forget_locked(it.key);  // a copy there is older
        st_.bytes_written += it.len;
    }
    // The replaced copies: their headers are cleared so recovery cannot bring
    // them back; even when that fails they lose to the newer generation.
    if (!stale.empty()) zero_headers(stale);
    for (auto &e : stale_ext) alloc_->release(e.first_block, e.blocks);
    return first_rc;
}

int ColdTier::zero_headers(const std::vector<uint64_t> &first_blocks) {
    std::vector<Chunk> chunks;
    for (size_t i = 0; i < first_blocks.size(); i++)
        chunks.push_back(Chunk{uint32_t(i), first_blocks[i] * opt_.block, opt_.block, 0});
    std::vector<int> status(first_blocks.size(), SPECKV_OK);
    execute(
        true, chunks, [](Chunk &c, unsigned char *dst) { std::memset(dst, 0, c.len); },
        [&](Chunk &c, unsigned char *, int rc) {
            if (rc) status[c.item] = rc;
        });
    for (int s : status)
        if (s) return s;
    return SPECKV_OK;
}

int ColdTier::get(std::span<GetItem> items) {
    std::lock_guard lk(mu_);
    return get_locked(items);
}

int ColdTier::get_locked(std::span<GetItem> items) {
    const uint32_t blk = opt_.block;
    std::vector<int> status(items.size(), SPECKV_OK);
    std::vector<const Extent *> ext(items.size(), nullptr);
    std::vector<char> in_spill(items.size(), 0);
    std::vector<Chunk> chunks;
    st_.gets += items.size();
    for (size_t i = 0; i < items.size(); i++) {
        GetItem &it = items[i];
        it.spilled = false;
        auto f = index_.find(it.key);
        if (f == index_.end() && spilled_.count(it.key)) {
            in_spill[i] = 1;  // read below, from the spill store
            continue;
        }
        if (f == index_.end()) {
            status[i] = fail(SPECKV_ENOENT, "cold tier: no key %llu", (unsigned long long)it.key);
            continue;
        }
        it.len = f->second.len;
        if (it.cap < f->second.len || (f->second.len && !it.dst)) {
            status[i] = fail(SPECKV_ERANGE, "cold tier: key %llu holds %llu bytes, buffer has %zu",
                             (unsigned long long)it.key, (unsigned long long)f->second.len, it.cap);
            continue;
        }
        ext[i] = &f->second;
        uint64_t bytes = f->second.blocks * blk;
        for (uint64_t s = 0; s < bytes; s += opt_.slot_bytes)
            chunks.push_back(Chunk{uint32_t(i), f->second.first_block * blk + s,
                                   uint32_t(std::min<uint64_t>(opt_.slot_bytes, bytes - s)), s});
    }
    auto done = [&](Chunk &c, unsigned char *src, int rc) {
        if (status[c.item]) return;
        if (rc) {
            status[c.item] = rc;
            return;
        }
        GetItem &it = items[c.item];
        const Extent &e = *ext[c.item];
        if (c.stream_off == 0) {  // slot_bytes >= 512: the header is whole in the first chunk
            DiskHeader h;
            uint64_t nb = 0;
            const char *why = nullptr;
            int rc = decode_header({src, c.len}, blk, e.first_block, e.first_block + e.blocks, &h, &nb, &why);
            if (!rc && (h.key != it.key || h.len != e.len || h.gen != e.gen || h.crc != e.crc || nb != e.blocks))
                why = "header names another extent", rc = SPECKV_ECORRUPT;
            if (rc) {
                st_.crc_failures++;
                status[c.item] = fail(SPECKV_ECORRUPT, "cold tier: extent header of key %llu at offset %llu in %s is damaged: %s",
                                      (unsigned long long)it.key, (unsigned long long)c.file_off, opt_.path.c_str(), why);
                return;
            }
        }
        uint64_t s, end;
        if (payload_part(c.stream_off, c.len, e.len, &s, &end) && end - kHeaderBytes <= it.cap)
            std::memcpy(static_cast<unsigned char *>(it.dst) + (s - kHeaderBytes), src + (s - c.stream_off), end - s);
    };
    execute(false, chunks, {}, done);
    if (spill_) {
        spill_get_locked(items, status, in_spill);
    } else {
        for (size_t i = 0; i < items.size(); i++)
            if (in_spill[i])
                status[i] = fail(SPECKV_EIO, "cold tier: the copy of key %llu is in the L5 store and this tier has "
                                             "none (remote.uri unset): not readable here",
                                 (unsigned long long)items[i].key);
    }

    int first_rc = SPECKV_OK;
    for (size_t i = 0; i < items.size(); i++) {
        GetItem &it = items[i];
        if (!status[i] && ext[i] && crc32c(0, it.dst, ext[i]->len) != ext[i]->crc) {
            st_.crc_failures++;
            status[i] = fail(SPECKV_ECORRUPT, "cold tier: CRC32C mismatch for key %llu (extent at offset %llu in %s)",
                             (unsigned long long)it.key, (unsigned long long)(ext[i]->first_block * blk), opt_.path.c_str());
        }
        it.status = status[i];
        if (status[i]) {
            st_.get_failures++;
            if (!first_rc) first_rc = status[i];
        } else {
            st_.bytes_read += it.len;
        }
    }
    return first_rc;
}

int ColdTier::drop(std::span<const uint64_t> keys) {
    std::lock_guard lk(mu_);
    std::vector<uint64_t> firsts;
    std::vector<uint64_t> found;
    int rc = SPECKV_OK;
    for (uint64_t k : keys) {
        auto f = index_.find(k);
        if (f == index_.end() && spill_forget_locked(k)) {
            st_.drops++;
            continue;
        }
        if (f == index_.end()) {
            if (!rc) rc = fail(SPECKV_ENOENT, "cold tier: no key %llu to drop", (unsigned long long)k);
            continue;
        }
        firsts.push_back(f->second.first_block);
        found.push_back(k);
    }
    std::vector<Chunk> chunks;
    for (size_t i = 0; i < firsts.size(); i++) chunks.push_back(Chunk{uint32_t(i), firsts[i] * opt_.block, opt_.block, 0});
    std::vector<int> status(firsts.size(), SPECKV_OK);
    execute(
        true, chunks, [](Chunk &c, unsigned char *dst) { std::memset(dst, 0, c.len); },
        [&](Chunk &c, unsigned char *, int r) {
            if (r) status[c.item] = r;
        });
    for (size_t i = 0; i < found.size(); i++) {
        if (status[i]) {  // the header is still valid on disk: the key stays, so nothing comes back from the dead
            if (!rc) rc = status[i];
            continue;
        }
        auto f = index_.find(found[i]);
        alloc_->release(f->second.first_block, f->second.blocks);
        index_.erase(f);
        st_.drops++;
    }
    return rc;
}

int ColdTier::forget(std::span<const uint64_t> keys) {
    std::lock_guard lk(mu_);
    int rc = SPECKV_OK;
    for (uint64_t k : keys) {
        auto f = index_.find(k);
        if (f == index_.end() && spill_forget_locked(k)) {
            st_.drops++;
            continue;
        }
        if (f == index_.end()) {
            if (!rc) rc = fail(SPECKV_ENOENT, "cold tier: no key %llu to forget", (unsigned long long)k);
            continue;
        }
        forgotten_.push_back(f->second);
        index_.erase(f);
        st_.drops++;
    }
    return rc;
}

bool ColdTier::generation(uint64_t key, uint64_t *gen) const {
    std::lock_guard lk(mu_);
    auto f = index_.find(key);
    if (f == index_.end()) {
        auto s = spilled_.find(key);
        if (s == spilled_.end()) return false;
        *gen = s->second.gen;
        return true;
    }
    *gen = f->second.gen;
    return true;
}

int ColdTier::forget_if(uint64_t key, uint64_t gen) {
    std::lock_guard lk(mu_);
    auto f = index_.find(key);
    if (f == index_.end()) {
        auto s = spilled_.find(key);
        if (s != spilled_.end() && s->second.gen == gen && spill_forget_locked(key)) st_.drops++;
        return SPECKV_OK;
    }
    if (f->second.gen != gen) return SPECKV_OK;  // gone, or a newer copy: not ours
    forgotten_.push_back(f->second);
    index_.erase(f);
    st_.drops++;
    return SPECKV_OK;
}

int ColdTier::flush_forgotten() {
    std::lock_guard lk(mu_);
    return flush_forgotten_locked();
}

int ColdTier::flush_forgotten_locked(bool with_spill) {
    if (with_spill && !spill_dead_.empty()) spill_flush_locked();
    if (forgotten_.empty()) return SPECKV_OK;
    std::vector<uint64_t> firsts;
    firsts.reserve(forgotten_.size());
    for (const Extent &e : forgotten_) firsts.push_back(e.first_block);
    // Freed even when a header could not be cleared: a later put overwrites
    // the blocks, and until then a stale header loses to any newer copy of
    // its key at recovery (and the pool drops copies it does not name).
    int rc = zero_headers(firsts);
    for (const Extent &e : forgotten_) alloc_->release(e.first_block, e.blocks);
    forgotten_.clear();
    return rc;
}

std::vector<uint64_t> ColdTier::keys() const {
    std::lock_guard lk(mu_);
    std::vector<uint64_t> out;
    out.reserve(index_.size() + spilled_.size());
    for (const auto &kv : index_) out.push_back(kv.first);
    for (const auto &kv : spilled_) out.push_back(kv.first);
    return out;
}

bool ColdTier::contains(uint64_t key) const {
    std::lock_guard lk(mu_);
    return index_.count(key) != 0 || spilled_.count(key) != 0;
}

int64_t ColdTier::length(uint64_t key) const {
    std::lock_guard lk(mu_);
    auto f = index_.find(key);
    if (f == index_.end()) {
        auto s = spilled_.find(key);
        return s == spilled_.end() ? -1 : int64_t(s->second.len);
    }
    return int64_t(f->second.len);
}

ColdTierStats ColdTier::stats() const {
    std::lock_guard lk(mu_);
    ColdTierStats s = st_;
    s.keys = index_.size() + spilled_.size();
    s.spill_keys = spilled_.size();
    s.capacity = alloc_->total_blocks() * opt_.block;
    s.free_bytes = alloc_->free_blocks() * opt_.block;
    s.used_bytes = s.capacity - s.free_bytes;
    return s;
}


}  // namespace speckv
