// SPDX-License-Identifier: Apache-2.0
// KV events in vLLM's wire format (docs/events.md): the event records the pool
// hands to the publisher, and their msgpack encoding as one KVEventBatch.
// Pure: no sockets, no threads, no pool (tests/events/test_encode.cc).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace speckv::events {

// Where a block is, as the `medium` field says it (docs/events.md "Media").
enum class Medium : uint8_t { kPool, kCold, kRemote };
const char *medium_name(Medium m);  // "CXL", "NVME", "REMOTE" (L5 behind L4)

enum class Kind : uint8_t { kStored, kRemoved, kCleared };

// One event: one block (Stored / Removed) or the whole pool (Cleared).
struct Event {
    Kind kind = Kind::kStored;
    Medium medium = Medium::kPool;
    uint64_t tenant = 0;
    uint64_t block_size = 0;  // tokens the block covers (its hint's token_count; 0 = unknown)
    uint8_t hash[32] = {};    // speckv's content hash of the block
};

// The batch's shape: vLLM >= the map encoding (vllm-project/vllm#42892; the
// pinned v0.26.0) or the positional arrays of the versions before it.
enum class Encoding : uint8_t { kMap, kArray };

// The integer vLLM publishes for a 32-byte hash (its default,
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1): the last 8 bytes, big-endian.
uint64_t external_hash(const uint8_t hash[32]);

// Appends the msgpack bytes of KVEventBatch [ts, [events...], 0] to *out.
// Never throws (std::bad_alloc aside, which the caller catches).
void encode_batch(double ts, const Event *ev, size_t n, Encoding enc, std::string *out);

}  // namespace speckv::events
