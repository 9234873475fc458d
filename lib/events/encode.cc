// SPDX-License-Identifier: Apache-2.0
// msgpack with msgpack-c's packer (its C API; the pack functions are inline,
// so the library links no msgpack code). Field names, order and types are
// vLLM's (docs/events.md "Schema").
#include "events/encode.h"

#include <msgpack.h>

#include <cstring>

namespace speckv::events {

const char *medium_name(Medium m) {
    return m == Medium::kCold ? "NVME" : m == Medium::kRemote ? "REMOTE" : "CXL";
}

uint64_t external_hash(const uint8_t hash[32]) {
    uint64_t v = 0;
    for (int i = 24; i < 32; i++) v = (v << 8) | hash[i];
    return v;
}

namespace {

int append(void *data, const char *buf, size_t len) {
    static_cast<std::string *>(data)->append(buf, len);
    return 0;
}

void str(msgpack_packer *pk, const char *s) {
    const size_t n = std::strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

void one_hash(msgpack_packer *pk, const Event &e) {
    msgpack_pack_array(pk, 1);
    msgpack_pack_uint64(pk, external_hash(e.hash));
}

const char *tag(Kind k) {
    switch (k) {
    case Kind::kStored: return "BlockStored";
    case Kind::kRemoved: return "BlockRemoved";
    default: return "AllBlocksCleared";
    }
}

// vLLM v0.26.0: a tagged map, the tag under "type"; speckv adds "tenant",
// which vLLM's decoders (msgspec, unknown fields allowed) skip.
void event_map(msgpack_packer *pk, const Event &e) {
    switch (e.kind) {
    case Kind::kStored:
        msgpack_pack_map(pk, 9);
        str(pk, "type"), str(pk, tag(e.kind));
        str(pk, "block_hashes"), one_hash(pk, e);
        str(pk, "parent_block_hash"), msgpack_pack_nil(pk);
        str(pk, "token_ids"), msgpack_pack_array(pk, 0);
        str(pk, "block_size"), msgpack_pack_uint64(pk, e.block_size);
        str(pk, "lora_id"), msgpack_pack_nil(pk);
        str(pk, "medium"), str(pk, medium_name(e.medium));
        str(pk, "lora_name"), msgpack_pack_nil(pk);
        str(pk, "tenant"), msgpack_pack_uint64(pk, e.tenant);
        break;
    case Kind::kRemoved:
        msgpack_pack_map(pk, 4);
        str(pk, "type"), str(pk, tag(e.kind));
        str(pk, "block_hashes"), one_hash(pk, e);
        str(pk, "medium"), str(pk, medium_name(e.medium));
        str(pk, "tenant"), msgpack_pack_uint64(pk, e.tenant);
        break;
    default:
        msgpack_pack_map(pk, 1);
        str(pk, "type"), str(pk, tag(e.kind));
    }
}

// Before vllm-project/vllm#42892: a tagged array, the tag first, fields in
// declaration order up to lora_name (a decoder of an older version that ends
// at `medium` ignores the trailing field). No room for the tenant here.
void event_array(msgpack_packer *pk, const Event &e) {
    switch (e.kind) {
    case Kind::kStored:
        msgpack_pack_array(pk, 8);
        str(pk, tag(e.kind));
        one_hash(pk, e);
        msgpack_pack_nil(pk);
        msgpack_pack_array(pk, 0);
        msgpack_pack_uint64(pk, e.block_size);
        msgpack_pack_nil(pk);
        str(pk, medium_name(e.medium));
        msgpack_pack_nil(pk);
        break;
    case Kind::kRemoved:
        msgpack_pack_array(pk, 3);
        str(pk, tag(e.kind));
        one_hash(pk, e);
        str(pk, medium_name(e.medium));
        break;
    default:
        msgpack_pack_array(pk, 1);
        str(pk, tag(e.kind));
    }
}

}  // namespace

void encode_batch(double ts, const Event *ev, size_t n, Encoding enc, std::string *out) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, append);
    // EventBatch stays positional in every version: ts, events, data_parallel_rank
    // (0: one rank, as a vLLM engine without data parallelism sends).
    msgpack_pack_array(&pk, 3);
    msgpack_pack_double(&pk, ts);
    msgpack_pack_array(&pk, n);
    for (size_t i = 0; i < n; i++) enc == Encoding::kMap ? event_map(&pk, ev[i]) : event_array(&pk, ev[i]);
    msgpack_pack_uint64(&pk, 0);
}

}  // namespace speckv::events
