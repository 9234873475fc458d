// SPDX-License-Identifier: Apache-2.0
// The pool: one mapping holding superblock, metadata and data pages
// (docs/pool-format.md), attached by one or more processes.
#pragma once
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "events/fwd.h"
#include "backend/backend.h"
#include "tiers/cold_tier.h"
#include "config/config.h"
#include "tiers/page_cache.h"
#include "pool/block_io.h"
#include "pool/block_resolver.h"
#include "pool/block_table.h"
#include "pool/block_view.h"
#include "pool/codec_choice.h"
#include "pool/cold_role.h"
#include "pool/counters.h"
#include "pool/image.h"
#include "pool/log.h"
#include "pool/packed_image.h"
#include "pool/packer.h"
#include "pool/page_lock.h"
#include "pool/page_reader.h"
#include "pool/page_writer.h"
#include "pool/pool_lock.h"
#include "pool/allocator.h"
#include "pool/attach_table.h"
#include "pool/pool_format.h"
#include "pool/pool_report.h"
#include "pool/reporter.h"
#include "pool/refs.h"
#include "pool/room.h"
#include "pool/selector.h"
#include "pool/sharing.h"
#include "prefetch/engine.h"
#include "share/share_table.h"
#include "speckv.h"
#include "tiers/tier_buffers.h"
#include "pool/translator.h"
#include "pool/xlate_index.h"

namespace speckv {
class Pool {
  public:
    // Opens by URI (attach or create).
    static int open(const std::string &uri, const Config &cfg, std::unique_ptr<Pool> *out);
    // Opens an existing pool file (or an in-memory image) read-only for
    // inspect/check: no attach record, no lock, nothing written.
    // The file's owner is checked as for open (lib/util/file_access.h).
    static int open_readonly(const std::string &path, std::unique_ptr<Pool> *out, const FileAccess &access = {});
    static int open_image(Mapping &&m, std::unique_ptr<Pool> *out);
    // Read-only by URI: file:, dax: and named numa: (anon: and unnamed numa: are process-private).
    static int open_readonly_uri(const std::string &uri, std::unique_ptr<Pool> *out);
    ~Pool();
    int close();

    // Blocks (pool/allocator.h).
    int alloc(uint64_t bytes, int dtype, const speckv_hint *hint, uint64_t *out) {
        return allocator_.alloc(bytes, dtype, hint, out);
    }
    int free(uint64_t handle) { return allocator_.free(handle); }
    // A block's bytes (pool/block_io.h).
    int write(uint64_t handle, uint64_t off, const void *src, size_t len) { return io_.write(handle, off, src, len); }
    int read(uint64_t handle, uint64_t off, void *dst, size_t len) { return io_.read(handle, off, dst, len); }
    int pin(uint64_t handle, const void **ptr, size_t *len) { return io_.pin(handle, ptr, len); }
    int unpin(uint64_t handle) { return io_.unpin(handle); }
    int block_info(uint64_t handle, speckv_block_meta *out) const;
    // Moves a block to the L4 cold tier now (speckv_demote; docs/tiers.md §9).
    int demote(uint64_t handle);
    int prefetch(const speckv_hint *hint) { return pf_.prefetch(hint, !read_only()); }

    // Sharing (pool/sharing.h, docs/sharing.md).
    int publish(uint64_t handle, const uint8_t *hash, uint64_t *canonical) {
        return sharing_.publish(handle, hash, canonical);
    }
    int lookup(uint64_t tenant, const uint8_t *hash, uint64_t *out) { return sharing_.lookup(tenant, hash, out); }
    int tenant_set_quota(uint64_t tenant, uint64_t max_pages) { return sharing_.set_quota(tenant, max_pages); }
    int tenant_usage(uint64_t tenant, uint64_t *used, uint64_t *quota) { return sharing_.usage(tenant, used, quota); }
    // Runs recovery now (reclaims what dead processes left, rebuilds the
    // derived tables): `speckv pool check --repair`.
    int repair();

    // (tenant, request, layer, token) -> block (pool/translator.h, docs/tiers.md §3).
    int translate(uint64_t tenant, uint64_t request, uint32_t layer, uint64_t pos, uint64_t *handle, uint64_t *offset) {
        return translator_.translate(tenant, request, layer, pos, handle, offset);
    }

    // Near-memory page selection (pool/selector.h, docs/selection.md).
    int select(uint64_t tenant, uint64_t request, uint32_t layer, const float *q, size_t q_len,
               const speckv_select_params &p, speckv_page_ref *out, size_t cap, size_t *n_out, size_t *n_pages) {
        return sel_.select(tenant, request, layer, q, q_len, p, out, cap, n_out, n_pages);
    }
    int attend(uint64_t tenant, uint64_t request, uint32_t layer, const float *q, size_t q_len,
               const speckv_select_params &p, const speckv_page_ref *exclude, size_t n_exclude,
               const speckv_partial &out) {
        return sel_.attend(tenant, request, layer, q, q_len, p, exclude, n_exclude, out);
    }

    // The memory class L3 was placed in and the L3->L2 bandwidth the
    // prefetcher measures against (docs/devices.md "placement").
    const Placement &placement() const { return placement_; }
    // Reporting, block table walks and `pool check` (pool/reporter.h, pool/checker.h).
    void stats(speckv_pool_stats *s) const;
    void publish_tier_counters(const speckv_pool_stats *have = nullptr) const;
    std::string stats_json() const;
    void info(PoolInfo *out) const;
    int list_blocks(std::vector<BlockInfo> *out) const;
    int check(CheckReport *r) const;
    // Wipes every block of a pool file and re-creates its metadata (lock
    // included), keeping the geometry and UUID. Refuses while a live process
    // is attached. Works on pools whose metadata is damaged.
    // even_if_attached: wipe under the pool lock although live processes
    // are attached (their handles and references become invalid).
    static int reset_uri(const std::string &uri, bool even_if_attached = false);

    bool read_only() const { return !map_.writable(); }
    // The L4 tier, when this handle holds it (L5 attaches behind it: lib/api.cc).
    ColdTier *l4_tier() { return cold_.holder() ? cold_.tier() : nullptr; }
    // The raw mapping, for tools and tests that need the pool's bytes.
    const unsigned char *image() const { return map_.base(); }
    size_t image_size() const { return map_.size(); }
    void log(int level, const char *fmt, ...) const __attribute__((format(printf, 3, 4)));

  private:
    Pool() = default;
    int attach();
    int lock(bool *recovered);
    void unlock() { lock_.release(); }
    PoolLock lock_;  // the pool lock (pool/pool_lock.h)
    // Recovery (pool/recovery.h) under the lock; why: for the log.
    void recover_locked(const char *why);
    bool any_dead_locked() const { return AttachTable(sh()).any_dead_locked(); }
    // Tenant rows and the hash index of published blocks (share/share_table.h).
    ShareTable share_;
    // New blocks, release, placement commits, eviction, references (pool/block_table.h).
    BlockTable blocks_;
    // Publish, lookup, quotas (pool/sharing.h).
    Sharing sharing_;
    // Translation index (pool/xlate_index.h) and the TLB in front of it (pool/translator.h).
    XlateIndex xlate_index_;
    Translator translator_;
    int init_tiers(const Config &cfg);  // the placement, the prefetch engine, the TLB, L1 -> L2
    // A live block's placement from its handle, without the lock (pool/block_resolver.h).
    BlockResolver resolver_;
    // Reporting (pool/reporter.h), made per call over this handle's parts.
    PoolReporter report() const;
    PageLocks plocks_;  // the seqlocked page protocol (pool/page_lock.h)
    // Pages and packed pages through L1, L2 and the pool, checked and decoded;
    // the prefetcher's L2 fill (pool/page_reader.h). Pages written, coded,
    // made ready for a pin (pool/page_writer.h). Write, read, pin and unpin
    // of a block by handle over both (pool/block_io.h).
    PageReader reader_;
    PageWriter writer_;
    BlockIO io_;
    // Packed blocks: pack on the write that completes a coded block, unpack
    // for a write or a pin (pool/packer.h, docs/pool-format.md "Packed blocks").
    Packer packer_;
    PackedImage packed_;  // the validating accessors of a packed image (pool/packed_image.h)
    RoomFinder room_;  // where a block's pages go (pool/room.h)
    // alloc and free, their steps (pool/allocator.h).
    Allocator allocator_;

    // The L4 cold tier role (pool/cold_role.h): the file, the heat, demotion
    // and promotion, the holder's request server.
    ColdRole cold_;

    // Where the areas are, resolved once from the validated superblock.
    void bind_layout();
    void set_tiers();  // L1 (cache_) and L2, once made, to the parts that use them
    fmt::Superblock *sb() const { return reinterpret_cast<fmt::Superblock *>(map_.base()); }
    fmt::SharedHeader *sh() const { return L_.sh; }
    fmt::BlockRecord *blocks() const { return L_.blocks; }
    PoolLayout L_;  // where the areas of the image are (pool/image.h)

    Mapping map_;
    std::unique_ptr<PageCache> cache_;
    // KV events for routers (config events.endpoint; null when unset): the
    // few places a published block is stored, removed or moved tell it.
    std::unique_ptr<events::Publisher> events_;
    int attach_slot_ = -1;
    pid_t attach_pid_ = 0;  // the process that attached (a fork() child is not it)
    uint32_t page_size_ = 0;
    int64_t tenant_id_ = -1;      // config tenant.id: -1 = unbound
    CodecChoice codec_;  // which preset a page is stored with (pool/codec_choice.h)
    uint64_t attach_id_ = 0;      // our AttachRecord::id
    // References and pins this process holds (pool/refs.h).
    ProcessRefs refs_;
    // Tiers: the prefetch engine (L2, the policy, the thread and its queue,
    // reader clocks and aliases: prefetch/engine.h).
    PrefetchEngine pf_;
    Placement placement_;
    PoolLog log_;  // the callback set in the config at log.level, else SPECKV_LOG
    Selector sel_;  // near-memory page selection (pool/selector.h)
    PoolCounters counters_;  // process-local counters (pool/counters.h)
};

}  // namespace speckv

namespace speckv::remote {
class Tier;
}
struct speckv_pool {
    std::unique_ptr<speckv::Pool> rep;
    std::unique_ptr<speckv::remote::Tier> remote;  // L5 (lib/remote), when config remote.uri is set
};
