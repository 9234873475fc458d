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
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint64_t kDataAlign = 2u << 20;  // devdax alignment
inline constexpr uint32_t kMaxAttach = 64;
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
    uint8_t reserved[396];
    uint32_t checksum;       // CRC32C of every byte before this field
};
static_assert(sizeof(Superblock) == 512);

// A process attached to the pool. pid + start time (from /proc) tell a live
// holder from a dead one whose pid was reused.
struct AttachRecord {
    std::atomic<uint32_t> pid;  // 0 = free
    uint32_t pad;
    uint64_t start_time;        // /proc/<pid>/stat field 22
    uint64_t attach_ns;
    uint64_t epoch;             // pool epoch when it attached
};

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
    AttachRecord attach[kMaxAttach];
};
inline constexpr uint64_t kLockMagic = 0x4B434F4C564B5350ULL;
static_assert(sizeof(SharedHeader) <= 4096);

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

// A block slot. The slot is live iff `handle` != 0; setting `handle` is the
// commit point of alloc and clearing it the commit point of free, so a crash
// leaves a block either wholly present or absent (its pages are then
// reclaimed by recovery, which rebuilds the bitmap and free-slot list).
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
    uint8_t content_hash[16];
    uint64_t generation;   // of the current or last handle of this slot
    uint64_t next_free;    // slot + 1 of the next free slot (free-list link)
    uint64_t created_ns;
    uint64_t reserved;     // zero
    uint32_t pad2;
    uint32_t crc;          // CRC32C over bytes [8, offsetof(crc)) excluding next_free
};
static_assert(sizeof(BlockRecord) == 128);

inline constexpr uint64_t kSharedOff = 4096;

}  // namespace speckv::fmt
