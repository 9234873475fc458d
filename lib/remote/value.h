// SPDX-License-Identifier: Apache-2.0
// What L5 stores for a block: the key (tenant and content hash under one hash
// tag, so everything of a block lands on one slot) and the value (a header
// with magic, format version, lengths, the block's metadata and two CRC32Cs,
// then the block's bytes). docs/remote.md "Keys and values".
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace speckv::remote {

constexpr uint32_t kValueMagic = 0x354b5653;  // "SVK5" as little-endian bytes
constexpr uint16_t kValueVersion = 1;
constexpr size_t kHeaderBytes = 96;

struct BlockMeta {
    uint64_t tenant = 0;
    uint8_t hash[32] = {};
    int32_t dtype = 0;
    uint32_t flags = 0;  // the alloc hint's SPECKV_HINT_* flags
    uint32_t layer = 0;
    uint64_t token_pos = 0, token_count = 0;
    uint64_t bytes = 0;  // the block's bytes after the header
};

// "skv:{<tenant as 16 hex>:<hash as 64 hex>}".
std::string key_of(uint64_t tenant, const uint8_t hash[32]);

// A value of kHeaderBytes + m.bytes bytes whose header is filled in and whose
// data part is left for the caller to fill (then seal() it).
std::string make_value(const BlockMeta &m);
// The same into *v, reusing its memory: the header is written whole, the data
// part is left as it was (the caller fills all of it).
void make_value(const BlockMeta &m, std::string *v);
// Computes the data and header checksums once the data part is in place.
void seal(std::string *value);

enum class Verdict {
    ok,
    bad_format,    // too short, wrong magic or version, lengths that do not add up
    bad_checksum,  // a header or data CRC32C mismatch (truncated, overwritten, flipped)
    wrong_block,   // a sound value of another tenant or hash under this key
};
const char *verdict_text(Verdict v);

// Checks everything about `v` against the key it was fetched under.
Verdict check_value(std::string_view v, uint64_t tenant, const uint8_t hash[32], BlockMeta *m,
                    std::string_view *data);

}  // namespace speckv::remote
