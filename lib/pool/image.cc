// SPDX-License-Identifier: Apache-2.0
// The pool image: geometry, formatting, validation, liveness of attached
// processes, reset (pool/image.h, docs/pool-format.md).
#include "pool/image.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>

#include "util/crc32c.h"
#include "share/index_key.h"
#include "util/status.h"

namespace speckv {

using namespace fmt;

namespace {

uint64_t now_ns(clockid_t c = CLOCK_REALTIME) {
    timespec ts;
    clock_gettime(c, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

PoolLayout PoolLayout::bind(unsigned char *b) {
    PoolLayout L;
    const Superblock &s = *reinterpret_cast<const Superblock *>(b);
    L.base = b;
    L.sb = reinterpret_cast<Superblock *>(b);
    L.page_size = s.page_size;
    L.page_shift = static_cast<uint32_t>(__builtin_ctz(s.page_size));
    L.sh = reinterpret_cast<SharedHeader *>(b + s.shared_off);
    L.pages = reinterpret_cast<PageEntry *>(b + s.page_table_off);
    L.blocks = reinterpret_cast<BlockRecord *>(b + s.block_table_off);
    L.bitmap = reinterpret_cast<uint64_t *>(b + s.bitmap_off);
    L.buckets = reinterpret_cast<uint64_t *>(b + s.index_off);
    L.xlate = reinterpret_cast<uint64_t *>(b + s.xlate_off);
    L.summaries = s.summary_bytes ? b + s.summary_off : nullptr;
    L.summary_bytes = s.summary_bytes;
    L.bucket_mask = s.index_buckets - 1;
    L.tenants = reinterpret_cast<TenantEntry *>(b + s.tenant_off);
    L.data = b + s.data_off;
    return L;
}

// Field 22 of /proc/<pid>/stat: start time in clock ticks since boot. 0 if unknown.
uint64_t proc_start_time(pid_t pid) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    std::ifstream in(path);
    std::string s;
    if (!std::getline(in, s)) return 0;
    size_t rp = s.rfind(')');
    if (rp == std::string::npos) return 0;
    const char *p = s.c_str() + rp + 2;  // field 3 starts here
    for (int field = 3; field < 22 && *p; p++)
        if (*p == ' ') field++;
    return std::strtoull(p, nullptr, 10);
}

bool process_alive(uint32_t pid, uint64_t start_time) {
    if (pid == 0) return false;
    if (pid == static_cast<uint32_t>(getpid())) return true;
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
    uint64_t st = proc_start_time(static_cast<pid_t>(pid));
    return st == 0 || start_time == 0 || st == start_time;
}

uint32_t superblock_crc(const Superblock &s) { return crc32c(0, &s, offsetof(Superblock, checksum)); }

uint32_t record_crc(const BlockRecord &r) {
    return crc32c(0, reinterpret_cast<const unsigned char *>(&r) + 8, offsetof(BlockRecord, crc) - 8);
}

int plan_geometry(uint64_t size, uint32_t page_size, uint64_t max_blocks, Superblock *out, uint32_t summary_bytes) {
    if (page_size < 4096 || page_size > (2u << 20) || (page_size & (page_size - 1)))
        return fail(SPECKV_EINVAL, "page size %u is not a power of two in [4096, 2 MiB]", page_size);
    if (size % page_size)
        return fail(SPECKV_EINVAL, "pool size %" PRIu64 " is not a multiple of the page size %u", size, page_size);
    if (max_blocks >= (uint64_t(1) << kSlotBits))
        return fail(SPECKV_EINVAL, "max_blocks %" PRIu64 " exceeds %" PRIu64, max_blocks, (uint64_t(1) << kSlotBits) - 1);
    if (summary_bytes && (summary_bytes % 16 || summary_bytes < 32 || summary_bytes > page_size))
        return fail(SPECKV_EINVAL, "summary bytes %u per page is not 0 or a multiple of 16 in [32, page size %u]",
                    summary_bytes, page_size);
    uint64_t n = size / page_size;
    Superblock s{};
    for (int iter = 0; iter < 64; iter++) {
        uint64_t mb = max_blocks ? max_blocks : std::min<uint64_t>(std::max<uint64_t>(64, n / 4), (1u << kSlotBits) - 1);
        s.shared_off = kSharedOff;
        s.tenant_off = kSharedOff + kSharedSize;
        s.page_table_off = s.tenant_off + kMaxTenants * sizeof(TenantEntry);
        s.block_table_off = align_up(s.page_table_off + n * sizeof(PageEntry), 64);
        s.index_buckets = 64;
        while (s.index_buckets < mb) s.index_buckets <<= 1;
        s.index_off = align_up(s.block_table_off + mb * sizeof(BlockRecord), 64);
        s.xlate_off = align_up(s.index_off + s.index_buckets * 8, 64);
        s.bitmap_off = align_up(s.xlate_off + s.index_buckets * 8, 64);
        s.summary_off = align_up(s.bitmap_off + (n + 63) / 64 * 8, 64);
        s.summary_bytes = summary_bytes;
        uint64_t meta_end = s.summary_off + n * summary_bytes;
        s.data_off = align_up(meta_end, kDataAlign);
        s.max_blocks = mb;
        if (s.data_off + page_size > size)
            return fail(SPECKV_EINVAL,
                        "pool size %" PRIu64 " is too small: metadata and 2 MiB alignment need %" PRIu64
                        " bytes before the first data page",
                        size, s.data_off);
        uint64_t fit = (size - s.data_off) / page_size;
        if (fit >= n) break;
        n = fit;
    }
    // An automatic max_blocks follows n while n shrinks, so its fixed point can differ from the
    // one a fixed max_blocks reaches; an opener re-plans with the stored max_blocks
    // (validate_superblock), so the plan recorded must be that one (pools of 2 GiB and more
    // failed to open before).
    if (!max_blocks) return plan_geometry(size, page_size, s.max_blocks, out, summary_bytes);
    s.n_pages = n;
    s.pool_bytes = size;
    s.page_size = page_size;
    s.sb_size = sizeof(Superblock);
    s.format_version = kFormatVersion;
    s.magic = kMagic;
    *out = s;
    return SPECKV_OK;
}

int format_pool(unsigned char *base, size_t size, uint32_t page_size, uint64_t max_blocks, bool zeroed,
                uint32_t summary_bytes) {
    Superblock s;
    if (int rc = plan_geometry(size, page_size, max_blocks, &s, summary_bytes); rc != SPECKV_OK) return rc;
    if (getrandom(s.uuid, sizeof s.uuid, 0) != sizeof s.uuid) {
        uint64_t t = now_ns() ^ uint64_t(getpid());
        std::memcpy(s.uuid, &t, 8);
        t = now_ns(CLOCK_MONOTONIC);
        std::memcpy(s.uuid + 8, &t, 8);
    }
    s.uuid[6] = (s.uuid[6] & 0x0F) | 0x40;  // RFC 4122 version 4
    s.uuid[8] = (s.uuid[8] & 0x3F) | 0x80;
    s.created_ns = now_ns();
    // The hash index's bucket key (issue 27): random, in the first reserved
    // bytes, announced by a flag (docs/pool-format.md).
    static_assert(sizeof s.reserved >= kIndexKeyBytes);
    if (getrandom(s.reserved, kIndexKeyBytes, 0) != static_cast<ssize_t>(kIndexKeyBytes)) {
        uint64_t t = now_ns(CLOCK_MONOTONIC) * 0x9E3779B97F4A7C15ull;
        std::memcpy(s.reserved, s.uuid, kIndexKeyBytes);
        for (size_t i = 0; i < 8; i++) s.reserved[i] ^= static_cast<uint8_t>(t >> (8 * i));
    }
    s.flags |= kSbFlagKeyedIndex;
    // Zero is the initial state of every table. A fresh file or anonymous
    // memory is zero already; a device may hold anything.
    if (!zeroed) std::memset(base, 0, s.data_off);
    auto *sh = new (base + s.shared_off) SharedHeader;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    int e = pthread_mutex_init(&sh->lock, &a);
    pthread_mutexattr_destroy(&a);
    if (e) return fail(SPECKV_EINTERNAL, "pthread_mutex_init: %s", strerror(e));
    sh->lock_magic = kLockMagic;
    sh->epoch.store(1);
    sh->clean.store(1);
    s.checksum = superblock_crc(s);
    // The magic last: an opener that sees it sees a whole superblock.
    std::memcpy(base + sizeof s.magic, reinterpret_cast<const unsigned char *>(&s) + sizeof s.magic, sizeof s - sizeof s.magic);
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(base)).store(s.magic, std::memory_order_release);
    return SPECKV_OK;
}

int format_if_blank(const Mapping &m, uint32_t page_size, uint64_t max_blocks, bool create, bool *formatted,
                    uint32_t summary_bytes) {
    *formatted = false;
    const char *where = m.path().c_str();
    auto blank = [&] {
        uint64_t magic;
        std::memcpy(&magic, m.base(), sizeof magic);
        return magic != kMagic;
    };
    if (!blank()) return SPECKV_OK;
    if (!create) return fail(SPECKV_ENOTPOOL, "%s holds no speckv pool (and create=0)", where);
    // Checked before anything is written: a bad geometry must leave the device untouched.
    if (m.size() % page_size)
        return fail(SPECKV_EINVAL, "%s: device size %zu is not a multiple of page_size %u", where, m.size(), page_size);
    Superblock plan;
    if (int rc = plan_geometry(m.size(), page_size, max_blocks, &plan, summary_bytes); rc) return rc;
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = 0;
    fl.l_len = 1;
    bool locked = m.fd() >= 0 && fcntl(m.fd(), F_OFD_SETLKW, &fl) == 0;
    int rc = SPECKV_OK;
    if (blank()) {  // still: nobody formatted it while we waited
        rc = format_pool(m.base(), m.size(), page_size, max_blocks, /*zeroed=*/false, summary_bytes);
        *formatted = rc == SPECKV_OK;
    }
    if (locked) {
        fl.l_type = F_UNLCK;
        fcntl(m.fd(), F_OFD_SETLK, &fl);
    }
    return rc;
}

int validate_superblock(const Mapping &m, const char *where) {
    if (m.size() < sizeof(Superblock))
        return fail(SPECKV_ENOTPOOL, "%s: %zu bytes is too small to hold a speckv pool", where, m.size());
    Superblock s;
    std::memcpy(&s, m.base(), sizeof s);
    if (s.magic != kMagic) return fail(SPECKV_ENOTPOOL, "%s is not a speckv pool (no pool magic at offset 0)", where);
    if (superblock_crc(s) != s.checksum)
        return fail(SPECKV_ECORRUPT, "%s: superblock checksum mismatch (stored %08x, computed %08x): the superblock is corrupt",
                    where, s.checksum, superblock_crc(s));
    if (s.format_version > kFormatVersion)
        return fail(SPECKV_EVERSION, "%s: pool format version %u is newer than this library understands (%u): upgrade speckv",
                    where, s.format_version, kFormatVersion);
    if (s.format_version != 0 && s.format_version < kMinFormatVersion)
        return fail(SPECKV_EVERSION,
                    "%s: pool format version %u predates this library's (%u), which has no upgrade path from it: "
                    "recreate the pool (speckv pool reset --force, or delete the file)",
                    where, s.format_version, kMinFormatVersion);
    if (s.format_version == 0 || s.sb_size != sizeof(Superblock))
        return fail(SPECKV_ECORRUPT, "%s: superblock has format version %u, size %u: corrupt", where, s.format_version,
                    s.sb_size);
    if (s.pool_bytes > m.size())
        return fail(SPECKV_ECORRUPT, "%s is truncated: the superblock says %" PRIu64 " bytes, only %zu are there", where,
                    s.pool_bytes, m.size());
    if (s.pool_bytes != m.size())
        return fail(SPECKV_ECORRUPT, "%s: size %zu differs from the %" PRIu64 " bytes the superblock records", where,
                    m.size(), s.pool_bytes);
    Superblock plan;
    if (plan_geometry(s.pool_bytes, s.page_size, s.max_blocks, &plan, s.summary_bytes) != SPECKV_OK ||
        plan.n_pages != s.n_pages || plan.summary_off != s.summary_off ||
        plan.data_off != s.data_off || plan.bitmap_off != s.bitmap_off || plan.block_table_off != s.block_table_off ||
        plan.page_table_off != s.page_table_off || plan.shared_off != s.shared_off || plan.tenant_off != s.tenant_off ||
        plan.index_off != s.index_off || plan.index_buckets != s.index_buckets || plan.xlate_off != s.xlate_off)
        return fail(SPECKV_ECORRUPT, "%s: superblock geometry is inconsistent", where);
    return SPECKV_OK;
}

std::vector<uint32_t> pool_live_pids(const Mapping &m) {
    std::vector<uint32_t> out;
    if (validate_superblock(m, "pool") != SPECKV_OK) return out;
    Superblock s;
    std::memcpy(&s, m.base(), sizeof s);
    const auto *h = reinterpret_cast<const SharedHeader *>(m.base() + s.shared_off);
    for (const AttachRecord &a : h->attach) {
        uint32_t pid = a.pid.load();
        if (pid && pid != static_cast<uint32_t>(getpid()) && process_alive(pid, a.start_time)) out.push_back(pid);
    }
    return out;
}

int reset_pool_mapping(Mapping &&m, const std::string &path, bool even_if_attached) {
    if (int rc = validate_superblock(m, path.c_str()); rc != SPECKV_OK) return rc;
    const PoolLayout p = PoolLayout::bind(m.base());
    const Superblock &s = *p.sb;
    SharedHeader *h = p.sh;
    std::vector<uint32_t> others = pool_live_pids(m);
    std::string list;
    for (uint32_t pid : others) list += (list.empty() ? "" : ", ") + std::to_string(pid);
    if (!others.empty() && !even_if_attached)
        return fail(SPECKV_EBUSY, "processes are attached to '%s' (pid %s): stop them before a reset", path.c_str(),
                    list.c_str());
    // With processes attached the wipe happens under the pool lock and their
    // attach records stay: their handles and references simply stop being
    // valid. A pool whose lock is damaged gets a new one (nobody can be
    // using it then, or the lock would not be damaged).
    bool locked = false;
    if (h->lock_magic == kLockMagic) {
        timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 5;
        int e = pthread_mutex_timedlock(&h->lock, &ts);
        if (e == EOWNERDEAD) pthread_mutex_consistent(&h->lock);
        if (e == 0 || e == EOWNERDEAD) locked = true;
        else if (!others.empty())
            return fail(SPECKV_EBUSY, "'%s': the pool lock is held by an attached process (pid %s): not reset", path.c_str(),
                        list.c_str());
    }
    // Keep each slot's generation so handles issued before stay unique.
    for (uint64_t i = 0; i < s.max_blocks; i++) {
        BlockRecord &r = p.blocks[i];
        uint64_t gen = std::min(r.generation, kMaxGeneration);
        r.handle.store(0);
        std::memset(reinterpret_cast<unsigned char *>(&r) + 8, 0, sizeof r - 8);
        r.generation = gen;
    }
    // Page sequence numbers keep growing (cached copies must never match).
    for (uint64_t q = 0; q < s.n_pages; q++) {
        PageEntry &pe = p.pages[q];
        pe.flags.store(0);
        pe.crc.store(0);
        pe.seq.store((pe.seq.load() | 1) + 1);
    }
    std::memset(p.bitmap, 0, (s.n_pages + 63) / 64 * 8);
    std::memset(p.buckets, 0, s.index_buckets * 8);
    std::memset(p.xlate, 0, s.index_buckets * 8);
    std::memset(static_cast<void *>(p.tenants), 0, kMaxTenants * sizeof(TenantEntry));
    uint64_t epoch = h->epoch.load() + 1, recoveries = h->recoveries.load();
    uint64_t next_id = h->next_attach_id, iseq = (h->index_seq.load() | 1) + 1, xseq = (h->xlate_seq.load() | 1) + 1;
    // The attached processes' records, as bytes (they hold atomics).
    std::vector<std::pair<uint32_t, std::array<unsigned char, sizeof(AttachRecord)>>> keep;
    for (uint32_t i = 0; i < kMaxAttach; i++) {
        uint32_t pid = h->attach[i].pid.load();
        if (locked && pid && std::find(others.begin(), others.end(), pid) != others.end()) {
            keep.emplace_back(i, std::array<unsigned char, sizeof(AttachRecord)>{});
            std::memcpy(keep.back().second.data(), static_cast<const void *>(&h->attach[i]), sizeof(AttachRecord));
        }
    }
    if (locked) {
        // Everything after the lock itself.
        size_t from = offsetof(SharedHeader, lock_magic);
        std::memset(reinterpret_cast<unsigned char *>(h) + from, 0, sizeof *h - from);
    } else {
        std::memset(static_cast<void *>(h), 0, sizeof *h);
        new (h) SharedHeader;
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        pthread_mutex_init(&h->lock, &a);
        pthread_mutexattr_destroy(&a);
    }
    h->lock_magic = kLockMagic;
    h->epoch.store(epoch);
    h->recoveries.store(recoveries);
    h->next_attach_id = next_id;  // attach ids are never reused: they own blocks
    h->index_seq.store(iseq);
    h->xlate_seq.store(xseq);
    for (auto &[i, a] : keep) {
        std::memcpy(static_cast<void *>(&h->attach[i]), a.data(), sizeof(AttachRecord));
        h->attach[i].lookups.store(0);
        h->attach[i].lookup_hits.store(0);
        h->attach[i].dedup_bytes.store(0);
    }
    h->attached = static_cast<uint32_t>(keep.size());
    h->clean.store(keep.empty() ? 1 : 0);
    // Every slot is free again, lowest first.
    h->slot_hwm = s.max_blocks;
    for (uint64_t i = s.max_blocks; i-- > 0;) {
        if (p.blocks[i].generation >= kMaxGeneration) continue;
        p.blocks[i].next_free = h->slot_free_head;
        h->slot_free_head = i + 1;
    }
    if (locked) pthread_mutex_unlock(&h->lock);
    return SPECKV_OK;
}

}  // namespace speckv
