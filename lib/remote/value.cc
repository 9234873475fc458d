// SPDX-License-Identifier: Apache-2.0
#include "remote/value.h"

#include <cstring>

#include "util/crc32c.h"

namespace speckv::remote {

namespace {
// Header layout (little-endian), kHeaderBytes bytes:
//   0 magic u32, 4 version u16, 6 header bytes u16, 8 dtype i32, 12 flags u32,
//   16 layer u32, 20 reserved u32 (0), 24 tenant u64, 32 token_pos u64,
//   40 token_count u64, 48 data bytes u64, 56 hash [32], 88 data crc32c u32,
//   92 header crc32c u32 (of bytes 0..91).
template <typename T>
void put(std::string *s, size_t off, T v) {
    std::memcpy(s->data() + off, &v, sizeof v);
}
template <typename T>
T get(std::string_view s, size_t off) {
    T v;
    std::memcpy(&v, s.data() + off, sizeof v);
    return v;
}
}  // namespace

std::string key_of(uint64_t tenant, const uint8_t hash[32]) {
    static const char *hex = "0123456789abcdef";
    std::string k = "skv:{";
    for (int i = 60; i >= 0; i -= 4) k += hex[(tenant >> i) & 15];
    k += ':';
    for (int i = 0; i < 32; i++) {
        k += hex[hash[i] >> 4];
        k += hex[hash[i] & 15];
    }
    k += '}';
    return k;
}

std::string make_value(const BlockMeta &m) {
    std::string v;
    make_value(m, &v);
    return v;
}

void make_value(const BlockMeta &m, std::string *v) {
    v->resize(kHeaderBytes + m.bytes);
    std::memset(v->data(), 0, kHeaderBytes);
    put<uint32_t>(v, 0, kValueMagic);
    put<uint16_t>(v, 4, kValueVersion);
    put<uint16_t>(v, 6, static_cast<uint16_t>(kHeaderBytes));
    put<int32_t>(v, 8, m.dtype);
    put<uint32_t>(v, 12, m.flags);
    put<uint32_t>(v, 16, m.layer);
    put<uint64_t>(v, 24, m.tenant);
    put<uint64_t>(v, 32, m.token_pos);
    put<uint64_t>(v, 40, m.token_count);
    put<uint64_t>(v, 48, m.bytes);
    std::memcpy(v->data() + 56, m.hash, 32);
}

void seal(std::string *v) {
    uint64_t n = get<uint64_t>(*v, 48);
    put<uint32_t>(v, 88, crc32c(0, v->data() + kHeaderBytes, n));
    put<uint32_t>(v, 92, crc32c(0, v->data(), 92));
}

const char *verdict_text(Verdict v) {
    switch (v) {
        case Verdict::ok: return "ok";
        case Verdict::bad_format: return "not a speckv value (length, magic or version)";
        case Verdict::bad_checksum: return "checksum mismatch";
        case Verdict::wrong_block: return "a value of another block under this key";
    }
    return "?";
}

Verdict check_value(std::string_view v, uint64_t tenant, const uint8_t hash[32], BlockMeta *m, std::string_view *data) {
    if (v.size() < kHeaderBytes || get<uint32_t>(v, 0) != kValueMagic || get<uint16_t>(v, 4) != kValueVersion ||
        get<uint16_t>(v, 6) != kHeaderBytes)
        return Verdict::bad_format;
    if (crc32c(0, v.data(), 92) != get<uint32_t>(v, 92)) return Verdict::bad_checksum;
    uint64_t n = get<uint64_t>(v, 48);
    if (n == 0 || n != v.size() - kHeaderBytes) return Verdict::bad_checksum;  // truncated or extended
    if (crc32c(0, v.data() + kHeaderBytes, n) != get<uint32_t>(v, 88)) return Verdict::bad_checksum;
    if (get<uint64_t>(v, 24) != tenant || std::memcmp(v.data() + 56, hash, 32) != 0) return Verdict::wrong_block;
    m->dtype = get<int32_t>(v, 8);
    m->flags = get<uint32_t>(v, 12);
    m->layer = get<uint32_t>(v, 16);
    m->tenant = tenant;
    m->token_pos = get<uint64_t>(v, 32);
    m->token_count = get<uint64_t>(v, 40);
    m->bytes = n;
    std::memcpy(m->hash, hash, 32);
    *data = v.substr(kHeaderBytes);
    return Verdict::ok;
}

}  // namespace speckv::remote
