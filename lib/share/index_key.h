// SPDX-License-Identifier: Apache-2.0
// The hash index's bucket function (issue 27, docs/pool-format.md "Hash
// index"): a keyed mix of the tenant and all 32 bytes of a block's content
// hash, so that hashes sharing their first bytes (or chosen to) spread over
// every bucket instead of one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace speckv {

// Superblock flag: the pool's hash index uses index_mix() with the 16-byte key
// kept in the superblock's first reserved bytes. Without it (pools formatted
// before), the bucket comes from the first 8 bytes of the hash.
constexpr uint32_t kSbFlagKeyedIndex = 1u << 0;
// Where the key lives: Superblock::reserved[0..16).
constexpr size_t kIndexKeyBytes = 16;
// Most blocks a publish accepts in one bucket chain: a tenant cannot make
// every publish (which walks the chain under the pool lock) slow. Random
// hashes at the index's load factor (<= 1) reach it with probability ~1/64!.
constexpr uint64_t kIndexMaxChain = 64;

namespace index_detail {
inline uint64_t mum(uint64_t a, uint64_t b) {
    const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
    return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
}
inline uint64_t le64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
}  // namespace index_detail

// A 64-bit keyed mix of (tenant, hash[0..32)): two 64x64->128-bit multiplies
// of key-xored words, folded, then a final multiply with the tenant.
inline uint64_t index_mix(const uint8_t key[kIndexKeyBytes], uint64_t tenant, const uint8_t hash[32]) {
    using namespace index_detail;
    const uint64_t k0 = le64(key), k1 = le64(key + 8);
    const uint64_t a = mum(le64(hash) ^ k0, le64(hash + 8) ^ k1 ^ 0x9E3779B97F4A7C15ull);
    const uint64_t b = mum(le64(hash + 16) ^ k1, le64(hash + 24) ^ k0 ^ 0xD6E8FEB86659FD93ull);
    return mum(a ^ tenant ^ 0xA0761D6478BD642Full, b ^ k0 ^ 0xE7037ED1A0B428DBull);
}

}  // namespace speckv
