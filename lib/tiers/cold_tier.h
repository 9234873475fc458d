// SPDX-License-Identifier: Apache-2.0
// The L4 cold tier: blocks demoted from the pool live in one file on NVMe,
// read and written in batches through io_uring (registered buffers, O_DIRECT
// where the file system takes it). Self-contained: keys are opaque 64-bit
// numbers chosen by the caller (the tier manager uses block handles).
//
// On disk an extent is [64-byte header | payload | zero pad to `block`]. The
// header names the key, the payload length, the payload CRC32C and a write
// generation, so open(recover=true) rebuilds the index from the file alone.
// The file is untrusted input: every header read from it goes through one
// validating decoder (cold_tier.cc, decode_header: magic, version, CRC32C,
// generation, and an extent that fits the file), and every payload byte
// through one bounds-checked span (payload_part); a hostile file yields
// skipped extents at recovery and SPECKV_ECORRUPT at get, never a crash.
// Invariants:
//   - a key maps to at most one extent, and only after every byte of it was
//     confirmed written; until put() returns OK for an item the caller's copy
//     is the only one that counts (a failed put leaves the previous mapping, if
//     any, untouched);
//   - a get never returns bytes whose CRC32C does not match (SPECKV_ECORRUPT);
//   - a block of the file is in exactly one free extent or one live extent.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tiers/cold_spill.h"
#include "util/file_access.h"

namespace speckv {

// Free space of the file in units of blocks: best fit, coalescing on free.
// Not thread-safe (the ColdTier holds its mutex around it).
class ExtentAllocator {
  public:
    explicit ExtentAllocator(uint64_t total_blocks);
    // Takes n contiguous blocks (n >= 1); false when no free extent is large enough.
    bool alloc(uint64_t n, uint64_t *first);
    // Returns [first, first+n) to the free space, merging with its neighbours.
    void release(uint64_t first, uint64_t n);
    // Carves [first, first+n) out of the free space (recovery). False if any
    // block of it is not free.
    bool reserve(uint64_t first, uint64_t n);
    uint64_t free_blocks() const { return free_; }
    uint64_t total_blocks() const { return total_; }
    uint64_t largest_free() const;
    size_t fragments() const { return by_off_.size(); }

  private:
    void insert(uint64_t off, uint64_t len);
    void erase(std::map<uint64_t, uint64_t>::iterator it);
    uint64_t total_, free_;
    std::map<uint64_t, uint64_t> by_off_;          // first block -> length
    std::set<std::pair<uint64_t, uint64_t>> by_len_;  // (length, first block)
};

enum class ColdEngine : uint8_t { kAuto, kUring, kSync };

struct ColdTierOptions {
    std::string path;                  // the file; created when `create`
    uint64_t capacity = 1ull << 30;    // most bytes the file may grow to: [block, 2^50]
    uint32_t block = 4096;             // extent unit, power of two: [512, 1 MiB]
    uint32_t queue_depth = 32;         // ring entries = staging slots: [1, 1024]
    uint32_t slot_bytes = 256 << 10;   // one I/O at most, multiple of block: [block, 16 MiB]
    uint64_t grow_bytes = 64 << 20;    // the file is preallocated this far ahead: [0, 2^40], 0 = never
    bool create = true;                // create the file when missing (else ENOENT)
    bool direct = true;                // try O_DIRECT; falls back, reason recorded
    bool recover = false;              // rebuild the index from the file's headers
    bool durable = false;              // fdatasync each put batch before reporting success
                                       // (else "written" means handed to the device / page cache)
    ColdEngine engine = ColdEngine::kAuto;  // kAuto: io_uring, pread/pwrite if refused
    // Owner check and mode of a new file, as for pool files (lib/util/file_access.h):
    // no symbolic link, owned by the effective user, root or whom it names.
    FileAccess access;
    // Test-only: behave as if the file system refused O_DIRECT (tmpfs did
    // before Linux 6.6), to exercise the fallback where every fs takes it.
    bool test_refuse_direct = false;
};

struct ColdTierStats {
    uint64_t puts = 0, put_failures = 0, gets = 0, get_failures = 0, drops = 0;
    uint64_t bytes_written = 0, bytes_read = 0;  // payload bytes confirmed
    uint64_t submissions = 0, completions = 0;   // io_uring_submit calls, completions reaped
    uint64_t io_errors = 0, short_transfers = 0, crc_failures = 0, enospc = 0, syncs = 0;
    uint64_t bad_headers = 0;  // recovery: headers with a valid CRC32C that describe no valid extent
    uint64_t keys = 0, used_bytes = 0, free_bytes = 0, capacity = 0;
    // With a spill store (set_spill): extents moved out of the file to make
    // room, items put there directly (no room in the file), copies read back,
    // copies found gone (a miss each), copies that could not be read (no answer).
    uint64_t spilled = 0, spilled_direct = 0, spill_gets = 0, spill_lost = 0, spill_failures = 0;
    uint64_t spill_keys = 0;  // keys whose copy is in the spill store (included in `keys`)
    uint64_t spill_dir_errors = 0;  // writes to the store's directory that failed (no copy sent then)
};

// What the fault hook sees for each completion before it is acted on.
struct ColdCompletion {
    bool write;
    uint64_t nth;      // 1-based count of completions since open
    uint64_t file_off;
    uint32_t want;     // bytes asked for
    int res;           // what the kernel (or pwrite/pread) returned
};
// Returns the result to act on: `c.res` to pass through, -EIO to fail it, a
// smaller count for a short transfer. Test-only.
using ColdFaultHook = std::function<int(const ColdCompletion &c)>;

class ColdTier {
  public:
    struct PutItem {
        uint64_t key;
        const void *data;
        size_t len;
        int status = 0;        // out: SPECKV_OK or the item's failure code
        bool spilled = false;  // out, with SPECKV_OK: the copy went to the spill store, not the file
    };
    struct GetItem {
        uint64_t key;
        void *dst;
        size_t cap;
        size_t len = 0;  // out: payload length (also set on SPECKV_ERANGE)
        int status = 0;  // out
        bool spilled = false;  // out, with SPECKV_OK: served from the spill store
    };

    // Opens (or creates) the file. Returns SPECKV_OK, SPECKV_EINVAL (option out
    // of bounds), SPECKV_ENOENT (missing and !create), SPECKV_EBUSY (another
    // ColdTier holds the file), SPECKV_EIO, SPECKV_ENOMEM.
    static int open(const ColdTierOptions &opt, std::unique_ptr<ColdTier> *out);
    ~ColdTier();
    ColdTier(const ColdTier &) = delete;
    ColdTier &operator=(const ColdTier &) = delete;

    // Writes every item, batched. Returns SPECKV_OK when all succeeded, else
    // the first failing item's code (per-item codes in `status`): SPECKV_ENOSPC
    // (capacity or disk full, file size limit), SPECKV_EIO (I/O error, short
    // write), SPECKV_EINVAL (duplicate key in one batch). A key written before
    // keeps its old bytes when its new write fails.
    // may_spill = false: nothing goes to the spill store (L5) in this call,
    // neither the items nor extents moved out to make room, and deletions
    // waiting for the store wait on: the caller holds the pool lock and must
    // not wait on the network (docs/remote.md "Demotion to L5").
    int put(std::span<PutItem> items, bool may_spill = true);
    // Reads every item into its dst. Codes: SPECKV_ENOENT (unknown key),
    // SPECKV_ERANGE (cap < len; len set), SPECKV_EIO (I/O error, short read),
    // SPECKV_ECORRUPT (header or CRC32C mismatch). A failed get changes nothing.
    int get(std::span<GetItem> items);
    // Forgets the keys and invalidates their headers on disk. Unknown keys
    // count as SPECKV_ENOENT in the return but do not stop the others.
    int drop(std::span<const uint64_t> keys);
    // Forgets the keys now, without I/O: their extents stay reserved until
    // their headers are invalidated, which the next put (or flush, or the
    // destructor) does in one batch. Safe across a crash because recovery
    // keeps only the newest generation of a key and its user (the pool)
    // drops copies its records do not name. Unknown keys: SPECKV_ENOENT.
    int forget(std::span<const uint64_t> keys);
    // Invalidates the headers of forgotten extents and frees them.
    int flush_forgotten();
    // The write generation of a key's extent (false: no such key). With
    // forget_if, a caller forgets exactly the copy it saw, not a newer one
    // another thread put meanwhile (which stays).
    bool generation(uint64_t key, uint64_t *gen) const;
    int forget_if(uint64_t key, uint64_t gen);

    bool contains(uint64_t key) const;
    // Every key held, in no particular order.
    std::vector<uint64_t> keys() const;
    // Payload length of a key, or -1.
    int64_t length(uint64_t key) const;
    ColdTierStats stats() const;
    bool direct() const { return direct_; }
    bool uring() const { return ring_ != nullptr; }
    bool fixed_buffers() const { return fixed_; }
    // Why O_DIRECT / io_uring / registered buffers are not in use ("" if they are).
    const std::string &fallback_reason() const { return reason_; }
    const ColdTierOptions &options() const { return opt_; }

    void set_fault_hook(ColdFaultHook hook);

    // A store behind the file (L5; docs/remote.md "Demotion to L5"). From
    // then on a put that finds too little room first moves the oldest extents
    // (lowest generation) there, and an item that still does not fit goes
    // there itself; get, drop, forget, keys, contains, length and generation
    // cover both places. A copy the store lost (evicted) is SPECKV_ENOENT at
    // get, counted in spill_lost. Which keys are in the store is kept in a
    // directory beside the file (`<path>.l5`: the store id and one record
    // per copy, written before the copy is sent), so the copies outlive the
    // tier: the next open with recover finds them again (a copy older than
    // the file's copy of the same key is deleted), and one without recover
    // deletes them all. A store copy is deleted when its key is dropped or
    // forgotten (or put into the file again), never at destruction. With
    // demote = false the store only serves and deletes the copies already
    // there. Without a store, gets of such keys are SPECKV_EIO and their
    // deletions wait in the directory until a tier with a store opens it.
    void set_spill(std::shared_ptr<ColdSpill> spill, bool demote = true);
    // Whether the key's copy is in the spill store now (tests, reports).
    bool in_spill(uint64_t key) const;
    // Whether the directory lists copies in the store (live or to delete).
    bool spill_listed() const;
    // The keys whose file copies moved to the store (to make room) since the
    // last call, oldest first (the pool reports them as KV events).
    std::vector<uint64_t> take_spill_moves();

    struct Extent {
        uint64_t first_block, blocks, len, gen;
        uint32_t crc;
    };
    struct SpillRecord;  // one record of the spill store's directory (cold_spill.cc)

  private:
    struct Ring;
    struct Chunk;
    ColdTier() = default;
    int init(const ColdTierOptions &opt);
    int recover();
    // Runs the chunks through the engine; `fill` stages a write, `done` takes
    // a finished chunk (res < 0: its failure, as -errno or a SPECKV code).
    int execute(bool write, std::vector<Chunk> &chunks, const std::function<void(Chunk &, unsigned char *)> &fill,
                const std::function<void(Chunk &, unsigned char *, int)> &done);
    int zero_headers(const std::vector<uint64_t> &first_blocks);
    int flush_forgotten_locked(bool with_spill = true);
    int get_locked(std::span<GetItem> items);
    // The spill store's side (cold_spill.cc). kInSpill: a put item's status
    // while it is being decided, for one whose copy went to the store.
    static constexpr int kInSpill = 1;
    struct Spilled {
        uint64_t len, gen;
        bool lost;  // a get found it gone: later gets miss without asking
    };
    void spill_make_room_locked(std::span<PutItem> items);
    void spill_rest_locked(std::span<PutItem> items, std::vector<int> &status);
    void spill_get_locked(std::span<GetItem> items, std::vector<int> &status, const std::vector<char> &in_spill);
    bool spill_forget_locked(uint64_t key);
    void spill_flush_locked();
    void unbury(uint64_t key);
    // The directory of the store's copies (`<path>.l5`, cold_spill.cc).
    int spill_dir_open();
    int spill_dir_rewrite_locked();
    int spill_dir_append_locked(const std::vector<SpillRecord> &recs);
    void preallocate(uint64_t end);
    uint64_t extent_blocks(size_t len) const;

    ColdTierOptions opt_;
    int fd_ = -1;
    bool direct_ = false, fixed_ = false;
    std::string reason_;
    std::unique_ptr<Ring> ring_;
    unsigned char *staging_ = nullptr;
    size_t staging_bytes_ = 0;
    mutable std::mutex mu_;  // one batch at a time: the ring has one issuer
    std::unique_ptr<ExtentAllocator> alloc_;
    std::unordered_map<uint64_t, Extent> index_;
    std::vector<Extent> forgotten_;  // forget()ten, header still valid on disk, blocks still reserved
    uint64_t next_gen_ = 1;
    uint64_t file_bytes_ = 0;  // the file's size as far as this tier made it
    uint64_t completions_ = 0;
    ColdTierStats st_;
    ColdFaultHook hook_;
    std::shared_ptr<ColdSpill> spill_;
    std::unordered_map<uint64_t, Spilled> spilled_;  // keys whose copy is in the spill store
    std::vector<uint64_t> spill_dead_;              // copies there to delete (flush_forgotten)
    std::unordered_set<uint64_t> spill_undeleted_;  // deletions the store refused: retried at the next open
    bool spill_new_ = true;                         // false: the store takes no new copies
    std::vector<uint64_t> spill_moved_;             // file -> store since take_spill_moves
    uint64_t spill_id_ = 0;                         // the store id (ColdSpill::bind), kept in the directory
    int dir_fd_ = -1;                               // the directory, open for appends at dir_bytes_
    uint64_t dir_bytes_ = 0, dir_records_ = 0;
};

}  // namespace speckv
