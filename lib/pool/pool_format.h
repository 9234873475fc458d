// SPDX-License-Identifier: Apache-2.0
// The pool on media (docs/pool-format.md). Everything here lives inside the
// shared mapping: offsets, never pointers; fixed-width fields; atomics and the
// robust lock are usable from every attached process.
#pragma once
#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace speckv::fmt {

inline constexpr uint64_t kMagic = 0x314C4F4F50564B53ULL;  // "SKVPOOL1" little-endian
inline constexpr uint32_t kFormatVersion = 6;  // 2: sharing; 3: translation index; 4: coded pages; 5: L4 tier; 6: packed blocks
// The oldest format this library opens as it is: a format 5 pool has no
// packed block, and never gets one (packing needs 6), so binaries of format
// 5 keep opening it.
inline constexpr uint32_t kMinFormatVersion = 5;
inline constexpr uint64_t kDataAlign = 2u << 20;  // devdax alignment
// Attach records; a block's `holders` word has one bit per record (bit 63 is
// kHoldersDying), so there can be at most 63.
inline constexpr uint32_t kMaxAttach = 63;
inline constexpr uint32_t kMaxTenants = 256;  // tenants with a quota
inline constexpr uint32_t kSlotBits = 24;  // handle = generation << 24 | (slot + 1)
inline constexpr uint64_t kMaxGeneration = (uint64_t(1) << 40) - 1;

// Immutable after creation: written once, then only read. 512 bytes at offset 0.
struct Superblock {
    uint64_t magic;
    uint32_t format_version;
    uint32_t sb_size;        // sizeof(Superblock)
    uint8_t uuid[16];
    uint64_t pool_bytes;     // size of the whole mapping
    uint32_t page_size;
    uint32_t flags;          // none defined
    uint64_t created_ns;     // CLOCK_REALTIME at creation
    uint64_t n_pages;        // data pages
    uint64_t max_blocks;     // block slots
    uint64_t shared_off;     // SharedHeader
    uint64_t page_table_off; // n_pages x PageEntry
    uint64_t block_table_off;// max_blocks x BlockRecord
    uint64_t bitmap_off;     // ceil(n_pages / 64) x uint64_t, bit set = page used
    uint64_t data_off;       // first data page, kDataAlign-aligned
    uint64_t tenant_off;     // kMaxTenants x TenantEntry
    uint64_t index_off;      // index_buckets x uint64_t: hash-index bucket heads
    uint64_t index_buckets;  // a power of two >= max_blocks
    uint64_t xlate_off;      // index_buckets x uint64_t: translation-index bucket heads
    uint64_t summary_off;    // n_pages x summary_bytes: page summaries (0 bytes = none)
    uint32_t summary_bytes;  // per page; 0 or a multiple of 16 in [32, page_size]
    uint32_t pad0;
    uint8_t reserved[348];
    uint32_t checksum;       // CRC32C of every byte before this field
};
static_assert(sizeof(Superblock) == 512);

// A process's tier and codec counters as it last published them (at
// speckv_stats, every 100 ms from its prefetch thread, and at close): what
// `speckv pool stats` shows. Written by that process alone.
enum TierCounter : uint32_t {
    kTcReads, kTcL1Hits, kTcL1Misses, kTcL2Hits, kTcSyncReads, kTcHints, kTcPfPages, kTcPfUsed, kTcPfWasted,
    kTcPfWastedBytes, kTcLinkBytes, kTcTlbHits, kTcTlbMisses, kTcEncPages, kTcEncRaw, kTcEncStored, kTcDecPages,
    kTcSummed,          // the counters above are summed over processes
    kTcBetaDepth = kTcSummed,  // beta in ppm << 32 | prefetch depth (a gauge)
    kTcUpdatedNs,       // CLOCK_REALTIME of the last publication (0 = never)
    kTierCounters
};

// A process attached to the pool. pid + start time (from /proc) tell a live
// holder from a dead one whose pid was reused.
// Its counters are written by that process alone (no shared cache line on
// the lookup path) and folded into the SharedHeader totals when it detaches
// or is found dead.
struct alignas(64) AttachRecord {
    std::atomic<uint32_t> pid;  // 0 = free
    uint32_t pad;
    uint64_t start_time;        // /proc/<pid>/stat field 22
    uint64_t attach_ns;
    uint64_t epoch;             // pool epoch when it attached
    uint64_t id;                // unique per attach (SharedHeader::next_attach_id): owns unpublished blocks
    std::atomic<uint64_t> lookups, lookup_hits, dedup_bytes;
    std::atomic<uint64_t> tier[kTierCounters];  // TierCounter
};
static_assert(sizeof(AttachRecord) == 256);

// A request from a process that does not hold the L4 tier for the holder to
// bring a block back (docs/tiers.md §9.1). `state` moves 0 free -> 1 claimed
// (by the requester, CAS) -> 2 posted -> 3 being served (by the holder, CAS;
// `server` = its pid) -> 4 answered (`rc`) -> 0 (the requester, once it read
// the answer). A row of a dead requester or a dead server is freed by the
// other side. Zero in pools made before it (format 5 pools gained it
// without a version bump: old binaries never post, and ignore the rows).
struct ColdRequest {
    std::atomic<uint32_t> state;
    std::atomic<uint32_t> pid;     // the requester
    uint64_t start_time;           // its /proc start time
    std::atomic<uint64_t> handle;  // the block to bring back
    std::atomic<int32_t> rc;       // the holder's answer (SPECKV_OK or why not)
    std::atomic<uint32_t> server;  // pid of the holder serving it (state 3)
};
static_assert(sizeof(ColdRequest) == 32);
inline constexpr uint32_t kColdRequests = 32;
enum ColdRequestState : uint32_t { kReqFree, kReqClaimed, kReqPosted, kReqServing, kReqAnswered };
// `rc` of a posted request nobody waits for (a prefetch): the holder frees
// the row when done instead of answering.
inline constexpr int32_t kReqDetached = INT32_MIN;

// Mutable pool-wide state, all changed under `lock` (atomics may be read
// without it). 4096 bytes at shared_off.
struct SharedHeader {
    pthread_mutex_t lock;            // PTHREAD_PROCESS_SHARED + ROBUST
    uint64_t lock_magic;             // kLockMagic once `lock` is initialised
    std::atomic<uint64_t> epoch;     // bumped by recovery and reset: invalidates caches
    std::atomic<uint32_t> clean;     // 1 = the last process detached cleanly
    uint32_t attached;               // live AttachRecords
    std::atomic<uint64_t> blocks_live;
    std::atomic<uint64_t> pages_used;
    uint64_t slot_free_head;         // slot + 1 of the first free slot; 0 = none
    uint64_t slot_hwm;               // slots [0, hwm) were ever used; above are fresh
    uint64_t alloc_cursor;           // page where the next free-run search starts
    std::atomic<uint64_t> bytes_by_dtype[4];
    std::atomic<uint64_t> recoveries;
    // Sharing (docs/sharing.md).
    uint64_t next_attach_id;             // last attach id handed out
    std::atomic<uint64_t> index_seq;     // hash index seqlock: odd while a chain changes
    std::atomic<uint64_t> xlate_seq;     // translation index seqlock, likewise
    std::atomic<uint64_t> lru_clock;     // logical clock of BlockRecord::last_use (deterministic LRU)
    std::atomic<uint64_t> blocks_published, shared_bytes;
    std::atomic<uint64_t> lookups, lookup_hits, dedup_bytes;  // of detached processes
    std::atomic<uint64_t> evictions, reclaimed;
    uint32_t tenants_used;               // TenantEntry rows in use
    uint32_t pad;
    std::atomic<uint64_t> tier_detached[kTcSummed];  // tier counters of processes gone
    AttachRecord attach[kMaxAttach];
    // The L4 cold tier (docs/tiers.md §9): at most one live process holds it
    // (the file named by its cold.path); it alone moves blocks to and from it.
    std::atomic<uint32_t> cold_pid;      // 0 = no holder
    uint32_t pad2;
    uint64_t cold_start_time;            // /proc/<pid>/stat field 22 of the holder
    std::atomic<uint64_t> cold_blocks, cold_bytes;   // blocks in L4 and their bytes
    std::atomic<uint64_t> demotions, promotions;     // block moves L3 -> L4 and back, ever
    std::atomic<uint64_t> demote_failures;           // demotions that failed (the block stayed in L3)
    // Promotion requests of processes that do not hold L4 (ColdRequest). The
    // two words are futexes: requesters bump `cold_req_seq` and wake the
    // holder's server thread; the holder bumps `cold_ans_seq` and wakes them.
    std::atomic<uint32_t> cold_req_seq, cold_ans_seq;
    std::atomic<uint64_t> cold_remote;                // requests answered SPECKV_OK, ever
    ColdRequest cold_req[kColdRequests];
    // A block move being committed (pack, unpack, promotion; under the lock):
    // the new placement, written before the record's first_page,
    // packed_pages and CRC change and cleared after, so a process killed
    // between those stores leaves a move recovery finishes instead of a
    // record that fails its checksum. move_slot = slot + 1 (0 = none). In
    // the zeroed tail: pools made before it read "none".
    std::atomic<uint64_t> move_slot;
    uint64_t move_first_page, move_packed_pages;
};
inline constexpr uint64_t kLockMagic = 0x4B434F4C564B5350ULL;
inline constexpr uint64_t kSharedSize = 20480;
static_assert(sizeof(SharedHeader) <= kSharedSize);

// A tenant with a page quota. Rows [0, tenants_used) are in use; changed
// under the lock; `used` is recomputed by recovery.
struct TenantEntry {
    uint64_t tenant;
    uint64_t quota_pages;  // 0 = none (the row then only caches usage)
    std::atomic<uint64_t> used_pages;
    uint64_t reserved;
};
static_assert(sizeof(TenantEntry) == 32);

// Per data page. `seq` is a sequence lock: even = stable, odd = a write is in
// progress. It only grows (cache tags rely on it).
struct PageEntry {
    std::atomic<uint32_t> crc;    // CRC32C of the page's page_size bytes
    std::atomic<uint32_t> flags;  // kPage*
    std::atomic<uint64_t> seq;
};
static_assert(sizeof(PageEntry) == 16);
inline constexpr uint32_t kPageZero = 1;         // reads as zeros; media bytes undefined
inline constexpr uint32_t kPageQuarantined = 2;  // failed its checksum; reads fail until rewritten
// The page's bytes are a codec record (docs/codec.md) followed by zeros up to
// page_size; `crc` still covers the whole page. Reads decode it. A page
// flagged kPageZero reads as zeros whatever this bit says.
inline constexpr uint32_t kPageCoded = 4;
// The page's slot in the summary area holds a summary of its current keys
// (lib/select/nmp.h: per-channel min/max, self-checksummed). Cleared by any write
// that does not write a new one, and by recovery of a torn write.
inline constexpr uint32_t kPageSummary = 8;
// A page of a packed block's image (format 6): its bytes are part of a
// PackHead image, never a page of values. Reads of such a block go through
// the image's directory; the page's `crc` covers its bytes as for any page.
inline constexpr uint32_t kPagePacked = 16;

// A packed block (docs/pool-format.md "Packed blocks"): the block's pages as
// one image in fewer pool pages. Written whole into fresh pages before the
// block record points at it, and never changed while it does (so readers copy
// from it without page locks and re-check the record's tier_seq, as for L4
// moves). Layout: PackHead, npages PackEntry, npages summary slots (when
// summary_bytes != 0), then the records, each at an 8-byte aligned offset.
struct PackHead {
    uint32_t magic;          // kPackMagic
    uint32_t npages;         // logical pages (the block record's npages)
    uint64_t handle;         // the block's handle when it was packed
    uint64_t bytes;          // the block's bytes
    uint64_t image_bytes;    // bytes of the image
    uint32_t page_size;
    uint32_t summary_bytes;  // per logical page, 0 = no summary slots
    uint32_t dir_crc;        // CRC32C of the head (this field 0) and the directory
    uint32_t pad;
};
static_assert(sizeof(PackHead) == 48);
inline constexpr uint32_t kPackMagic = 0x4B504B53;  // "SKPK"

// One logical page of a packed block. flags: kPageZero (len 0, reads as
// zeros), kPageCoded (a codec record of len bytes; its own CRC32C guards it),
// else the page's page_size bytes in clear (crc = their CRC32C); kPageSummary:
// its summary slot in the image holds its summary.
struct PackEntry {
    uint32_t off;            // from the image start
    uint32_t len;
    uint32_t flags;
    uint32_t crc;            // clear pages: CRC32C of the bytes; coded: the record's CRC field
};
static_assert(sizeof(PackEntry) == 16);

// A block slot. The slot is live iff `handle` != 0; setting `handle` is the
// commit point of alloc and clearing it the commit point of free, so a crash
// leaves a block either wholly present or absent (its pages are then
// reclaimed by recovery, which rebuilds the bitmap and free-slot list).
// Bytes [8, offsetof(crc)) are fixed between alloc and free except at publish
// (state, content_hash), which happens under the lock and re-seals `crc`. The
// rest is mutable, outside the checksum.
struct BlockRecord {
    std::atomic<uint64_t> handle;
    uint64_t first_page;
    uint64_t bytes;
    uint32_t npages;
    uint8_t dtype;
    uint8_t pad0;
    uint16_t pad1;
    uint64_t tenant;
    uint64_t request;
    uint32_t layer;
    uint32_t hint_flags;
    uint64_t token_pos;
    uint64_t token_count;
    uint8_t content_hash[32];  // the hint's; once published, the key
    uint64_t generation;   // of the current or last handle of this slot
    uint64_t created_ns;
    // Format 6: 0 = the block's pages are its npages pages at first_page;
    // n > 0 = the block is packed: a PackHead image (its pages' codec
    // records, back to back) in n < npages pages at first_page.
    uint64_t packed_pages;
    uint32_t state;        // kBlock*
    uint32_t crc;          // CRC32C over bytes [8, offsetof(crc))
    // ---- mutable
    uint64_t next_free;    // slot + 1 of the next free slot (free-list link)
    std::atomic<uint64_t> holders;    // bit i: attach record i holds references; kHoldersDying
    std::atomic<uint64_t> hash_next;  // slot + 1 of the next block in this hash chain
    std::atomic<uint64_t> last_use;   // SharedHeader::lru_clock when last allocated, published or released
    uint64_t owner;        // attach id of the allocating process while unpublished; 0 = the pool's
    std::atomic<uint64_t> xlate_next;  // slot + 1 of the next block in this translation chain
    // Tier sequence: even = the block's pages are in the pool at first_page;
    // odd = it lives in the L4 cold tier (its pages are free; first_page is
    // stale). Bumped under the lock by each move; readers that resolved the
    // block re-check it after copying, so they never return bytes of pages
    // the block left.
    std::atomic<uint64_t> tier_seq;
};
static_assert(sizeof(BlockRecord) == 192);
inline constexpr uint32_t kBlockPublished = 1;
inline constexpr uint64_t kHoldersDying = uint64_t(1) << 63;  // being evicted: no new references

// PageEntry::flags bits 8..15: attach slot + 1 of the writer holding the
// page's sequence lock (0 = not recorded yet), so recovery re-seals only the
// pages of writers that are gone.
inline constexpr uint32_t kPageWriterShift = 8;
inline constexpr uint32_t kPageWriterMask = 0xFF00;

inline constexpr uint64_t kSharedOff = 4096;

}  // namespace speckv::fmt
