// The pool: one mapping holding superblock, metadata and data pages
// (docs/pool-format.md), attached by one or more processes.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend.h"
#include "config.h"
#include "page_cache.h"
#include "pool_format.h"
#include "speckv.h"

namespace speckv {

struct BlockInfo {
    uint64_t handle, slot, first_page, npages, bytes;
    int dtype;
    uint64_t tenant, request, token_pos, token_count;
    uint32_t layer, hint_flags;
    uint8_t content_hash[16];
};

struct PoolInfo {
    std::string location;     // path, or "anonymous memory"
    uint32_t format_version;
    uint8_t uuid[16];
    uint64_t created_ns, pool_bytes, page_size, n_pages, max_blocks, data_off;
    uint64_t pages_used, blocks_live, bytes_by_dtype[4];
    uint64_t epoch, recoveries;
    uint32_t attached;
    bool clean;
    uint64_t pages_quarantined, pages_in_write;
};

struct CheckReport {
    std::vector<std::string> problems;  // empty = clean
    uint64_t blocks_checked = 0, pages_verified = 0;
};

class Pool {
  public:
    // Opens by URI (attach or create).
    static int open(const std::string &uri, const Config &cfg, std::unique_ptr<Pool> *out);
    // Opens an existing pool file (or an in-memory image) read-only for
    // inspect/check: no attach record, no lock, nothing written.
    static int open_readonly(const std::string &path, std::unique_ptr<Pool> *out);
    static int open_image(Mapping &&m, std::unique_ptr<Pool> *out);
    // Read-only by URI: file: and dax: (anon: and numa: are process-private).
    static int open_readonly_uri(const std::string &uri, std::unique_ptr<Pool> *out);
    ~Pool();
    int close();

    int alloc(uint64_t bytes, int dtype, const speckv_hint *hint, uint64_t *out);
    int free(uint64_t handle);
    int write(uint64_t handle, uint64_t off, const void *src, size_t len);
    int read(uint64_t handle, uint64_t off, void *dst, size_t len);
    int block_info(uint64_t handle, speckv_block_meta *out) const;
    int pin(uint64_t handle, const void **ptr, size_t *len);
    int unpin(uint64_t handle);
    int prefetch(const speckv_hint *hint);

    void stats(speckv_pool_stats *s) const;
    std::string stats_json() const;
    void info(PoolInfo *out) const;
    int list_blocks(std::vector<BlockInfo> *out) const;
    int check(CheckReport *r) const;
    // Wipes every block of a pool file and re-creates its metadata (lock
    // included), keeping the geometry and UUID. Refuses while a live process
    // is attached. Works on pools whose metadata is damaged.
    static int reset_uri(const std::string &uri);

    bool read_only() const { return !map_.writable(); }
    // The raw mapping, for tools and tests that need the pool's bytes.
    const unsigned char *image() const { return map_.base(); }
    size_t image_size() const { return map_.size(); }
    void log(int level, const char *fmt, ...) const __attribute__((format(printf, 3, 4)));

  private:
    Pool() = default;
    static int validate_superblock(const Mapping &m, const char *where);
    static int reset_mapping(Mapping &&m, const std::string &where);
    int attach();
    int lock(bool *recovered);
    void unlock();
    void recover_locked(const char *why);
    // A consistent snapshot of a live block's placement, taken without the
    // lock: fields are read atomically and validated, so a slot freed and
    // reused meanwhile can never send us out of bounds (callers re-check
    // rec->handle afterwards to detect the reuse).
    struct BlockView {
        const fmt::BlockRecord *rec;
        uint64_t first_page, bytes;
        uint32_t npages;
        uint8_t dtype;
    };
    int resolve(uint64_t handle, BlockView *out) const;
    int lock_page(uint64_t page, uint64_t handle, const fmt::BlockRecord *rec, uint64_t *seq);
    int read_page(uint64_t page, size_t off, size_t len, unsigned char *dst, bool *hit);
    int verify_page_inplace(uint64_t page);
    int wait_even(const fmt::PageEntry &pe, uint64_t *seq) const;
    bool pinned(uint64_t handle);

    // Where the areas are, resolved once from the validated superblock.
    void bind_layout();
    fmt::Superblock *sb() const { return reinterpret_cast<fmt::Superblock *>(map_.base()); }
    fmt::SharedHeader *sh() const { return sh_; }
    fmt::PageEntry *pages() const { return pages_; }
    fmt::BlockRecord *blocks() const { return blocks_; }
    uint64_t *bitmap() const { return bitmap_; }
    unsigned char *page_data(uint64_t p) const { return data_ + (p << page_shift_); }

    Mapping map_;
    Config cfg_;
    std::unique_ptr<PageCache> cache_;
    int attach_slot_ = -1;
    uint32_t page_size_ = 0;
    uint32_t page_shift_ = 12;  // log2(page_size_)
    fmt::SharedHeader *sh_ = nullptr;
    fmt::PageEntry *pages_ = nullptr;
    fmt::BlockRecord *blocks_ = nullptr;
    uint64_t *bitmap_ = nullptr;
    unsigned char *data_ = nullptr;
    int lock_timeout_ms_ = 5000;
    int log_level_ = 1;
    // Pins are per process: a pinned block can't be written or freed here.
    std::mutex pin_mu_;
    std::unordered_map<uint64_t, uint32_t> pins_;
    std::atomic<uint64_t> pin_total_{0};
    // Process-local counters, sharded per thread so the hot paths do no
    // locked read-modify-write: shard i < kShards belongs to one thread only.
    enum Counter { kAllocs, kFrees, kWBytes, kRBytes, kReads, kHits, kMisses, kCrcFail, kPrefetch, kNumCounters };
    static constexpr int kShards = 64;
    struct alignas(64) Shard {
        std::atomic<uint64_t> v[kNumCounters];
    };
    std::unique_ptr<Shard[]> shards_ = std::make_unique<Shard[]>(kShards + 1);  // last: shared overflow
    void bump(Counter c, uint64_t n = 1);
    std::atomic<uint64_t> *my_shard();
    uint64_t total(Counter c) const;
};

// Lays out and initialises a fresh pool image of `size` bytes in `base`.
// `zeroed`: the memory is known to be zero already (fresh file, anonymous).
int format_pool(unsigned char *base, size_t size, uint32_t page_size, uint64_t max_blocks, bool zeroed);

// The layout a pool of this size would get (no writes). For tests and docs.
int plan_geometry(uint64_t size, uint32_t page_size, uint64_t max_blocks, fmt::Superblock *out);

uint32_t superblock_crc(const fmt::Superblock &s);
uint32_t record_crc(const fmt::BlockRecord &r);

}  // namespace speckv

struct speckv_pool {
    std::unique_ptr<speckv::Pool> rep;
};
