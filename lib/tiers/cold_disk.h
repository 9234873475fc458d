// SPDX-License-Identifier: Apache-2.0
// The L4 cold file's on-disk extent header and its one decoder, and the
// engine's private types: what cold_tier.cc (put, get, drop), cold_engine.cc
// (the batched I/O) and cold_recover.cc (the index from the file) share.
// Internal to lib/tiers/; docs/tiers.md §9 describes the format.
#pragma once
#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "speckv.h"
#include "tiers/cold_tier.h"
#include "util/crc32c.h"

namespace speckv {
namespace cold_disk {

constexpr uint32_t kMagic = 0x43564b53;  // "SKVC"
constexpr uint32_t kHeaderBytes = 64;

struct DiskHeader {
    uint32_t magic;
    uint32_t version;
    uint64_t key;
    uint64_t len;
    uint64_t gen;
    uint32_t crc;      // payload CRC32C
    uint32_t hdr_crc;  // CRC32C of the bytes before it
    unsigned char pad[24];
};
static_assert(sizeof(DiskHeader) == kHeaderBytes);
constexpr size_t kHdrCrcSpan = offsetof(DiskHeader, hdr_crc);

inline DiskHeader make_header(uint64_t key, uint64_t len, uint64_t gen, uint32_t crc) {
    DiskHeader h{};
    h.magic = kMagic;
    h.version = 1;
    h.key = key;
    h.len = len;
    h.gen = gen;
    h.crc = crc;
    h.hdr_crc = crc32c(0, &h, kHdrCrcSpan);
    return h;
}

// Generations are counted from 1 by one process at a time; a header claiming
// one at or past this bound is not ours (and would wrap next_gen_).
constexpr uint64_t kMaxGen = uint64_t(1) << 62;

// The one reader of an extent header from the cold file. `bytes` holds what
// was read at block `first_block`; the file (as far as this tier may use it)
// ends at block `file_blocks`. Checks that the bytes hold a whole header,
// its magic, version and CRC32C, a generation in [1, kMaxGen), and that the
// extent it describes (header + payload rounded up to `block`) fits between
// `first_block` and `file_blocks` (no arithmetic on the length can wrap).
// On success fills *out and *blocks; else returns SPECKV_ECORRUPT with the
// reason in *why (the status is not touched: recovery skips such blocks).
// *intact: the bytes carry the magic and a matching header CRC32C (a header
// was written there, whatever it claims).
inline int decode_header(std::span<const unsigned char> bytes, uint32_t block, uint64_t first_block,
                         uint64_t file_blocks, DiskHeader *out, uint64_t *blocks, const char **why, bool *intact = nullptr) {
    if (intact) *intact = false;
    if (bytes.size() < sizeof(DiskHeader)) return *why = "short read: no whole header", SPECKV_ECORRUPT;
    DiskHeader h;
    std::memcpy(&h, bytes.data(), sizeof h);
    if (h.magic != kMagic) return *why = "no extent header (magic)", SPECKV_ECORRUPT;
    if (h.hdr_crc != crc32c(0, &h, kHdrCrcSpan)) return *why = "header CRC32C mismatch", SPECKV_ECORRUPT;
    if (intact) *intact = true;
    if (h.version != 1) return *why = "unknown header version", SPECKV_ECORRUPT;
    if (h.gen == 0 || h.gen >= kMaxGen) return *why = "generation out of range", SPECKV_ECORRUPT;
    if (first_block >= file_blocks) return *why = "extent starts past the end of the file", SPECKV_ECORRUPT;
    // Payload bytes that fit from first_block to the end of the file.
    const uint64_t room = (file_blocks - first_block) * block - kHeaderBytes;  // file_blocks <= 2^50 / 512
    if (h.len > room) return *why = "payload length runs past the end of the file", SPECKV_ECORRUPT;
    *blocks = (kHeaderBytes + h.len + block - 1) / block;
    *out = h;
    return SPECKV_OK;
}

// The one reader of payload bytes from the cold file: the part of an
// extent's payload (length `len`) that a read of `n` bytes at offset `s` of
// the extent ([header | payload | pad]) holds, as [*lo, *hi) in extent
// offsets; false when it holds none. `len` was bounded by decode_header (or
// by put), so kHeaderBytes + len cannot wrap.
inline bool payload_part(uint64_t s, uint64_t n, uint64_t len, uint64_t *lo, uint64_t *hi) {
    *lo = std::max<uint64_t>(s, kHeaderBytes);
    *hi = std::min<uint64_t>(s + n, kHeaderBytes + len);
    return *lo < *hi;
}

inline bool is_nospace(int err) { return err == ENOSPC || err == EFBIG || err == EDQUOT; }

}  // namespace cold_disk

struct ColdTier::Ring {
    io_uring ring;
};

struct ColdTier::Chunk {
    uint32_t item;
    uint64_t file_off;
    uint32_t len;
    uint64_t stream_off;  // where in the extent ([header|payload|pad]) this chunk starts
    uint32_t done = 0;
    int slot = -1;
    uint8_t retries = 0;
};

}  // namespace speckv
