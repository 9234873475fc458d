#include "share/block_hash.h"

#include <cstring>

#include "speckv.h"
#include "util/status.h"

namespace speckv {

namespace {
constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
}  // namespace

Sha256::Sha256() {
    static constexpr uint32_t init[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                         0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::memcpy(h_, init, sizeof h_);
}

void Sha256::block(const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 | uint32_t(p[4 * i + 2]) << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d, h_[4] += e, h_[5] += f, h_[6] += g, h_[7] += h;
}

void Sha256::update(const void *data, size_t len) {
    auto *p = static_cast<const uint8_t *>(data);
    total_ += len;
    while (len) {
        if (fill_ == 0 && len >= 64) {
            block(p);
            p += 64;
            len -= 64;
            continue;
        }
        size_t n = std::min(len, 64 - fill_);
        std::memcpy(buf_ + fill_, p, n);
        fill_ += n;
        p += n;
        len -= n;
        if (fill_ == 64) {
            block(buf_);
            fill_ = 0;
        }
    }
}

void Sha256::final(uint8_t out[32]) {
    uint64_t bits = total_ * 8;
    uint8_t pad = 0x80;
    update(&pad, 1);
    uint8_t zero = 0;
    while (fill_ != 56) update(&zero, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
    update(len, 8);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) out[4 * i + j] = static_cast<uint8_t>(h_[i] >> (24 - 8 * j));
}

// ------------------------------------------------------------------- CBOR

namespace {
// Parses one item at p[0..n); returns its length or 0.
size_t cbor_skip(const uint8_t *p, size_t n, int depth) {
    if (n == 0 || depth > 64) return 0;
    uint8_t ib = p[0], major = ib >> 5, info = ib & 31;
    size_t hdr = 1;
    uint64_t arg = info;
    if (info == 24 || info == 25 || info == 26 || info == 27) {
        size_t bytes = size_t(1) << (info - 24);
        if (n < 1 + bytes) return 0;
        arg = 0;
        for (size_t i = 0; i < bytes; i++) arg = arg << 8 | p[1 + i];
        hdr += bytes;
    } else if (info > 27) {
        // 28-30 are reserved; 31 is indefinite length (not canonical) or "break".
        return 0;
    }
    switch (major) {
        case 0:
        case 1:
            return hdr;
        case 2:
        case 3:
            if (arg > n - hdr) return 0;
            return hdr + static_cast<size_t>(arg);
        case 4:
        case 5: {
            uint64_t items = major == 4 ? arg : arg * 2;
            if (major == 5 && arg > (uint64_t(1) << 62)) return 0;
            size_t at = hdr;
            for (uint64_t i = 0; i < items; i++) {
                size_t l = cbor_skip(p + at, n - at, depth + 1);
                if (!l) return 0;
                at += l;
            }
            return at;
        }
        case 6: {
            size_t l = cbor_skip(p + hdr, n - hdr, depth + 1);
            return l ? hdr + l : 0;
        }
        default:  // 7: simple values and floats; 24 needs a value >= 32
            if (info == 24 && arg < 32) return 0;
            return hdr;
    }
}

void cbor_head(Sha256 &h, uint8_t major, uint64_t v) {
    uint8_t b[9];
    size_t n;
    if (v < 24) {
        b[0] = static_cast<uint8_t>(major << 5 | v);
        n = 1;
    } else if (v <= 0xFF) {
        b[0] = static_cast<uint8_t>(major << 5 | 24);
        b[1] = static_cast<uint8_t>(v);
        n = 2;
    } else if (v <= 0xFFFF) {
        b[0] = static_cast<uint8_t>(major << 5 | 25);
        b[1] = static_cast<uint8_t>(v >> 8);
        b[2] = static_cast<uint8_t>(v);
        n = 3;
    } else if (v <= 0xFFFFFFFFu) {
        b[0] = static_cast<uint8_t>(major << 5 | 26);
        for (int i = 0; i < 4; i++) b[1 + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
        n = 5;
    } else {
        b[0] = static_cast<uint8_t>(major << 5 | 27);
        for (int i = 0; i < 8; i++) b[1 + i] = static_cast<uint8_t>(v >> (56 - 8 * i));
        n = 9;
    }
    h.update(b, n);
}

void le64(Sha256 &h, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = static_cast<uint8_t>(v >> (8 * i));
    h.update(b, 8);
}
}  // namespace

size_t cbor_item_length(const uint8_t *p, size_t n) { return p ? cbor_skip(p, n, 0) : 0; }

int block_hash(int algo, uint64_t tenant, const uint8_t *parent, const uint32_t *tokens, size_t ntokens,
               const uint8_t *extra, size_t extra_len, uint8_t out[32]) {
    Sha256 h;
    if (algo == SPECKV_HASH_NATIVE) {
        static constexpr char tag[16] = {'s', 'p', 'e', 'c', 'k', 'v', '-', 'b', 'l', 'o', 'c', 'k', '-', 'v', '1', 0};
        h.update(tag, sizeof tag);
        le64(h, tenant);
        uint8_t has_parent = parent != nullptr;
        h.update(&has_parent, 1);
        if (parent) h.update(parent, SPECKV_HASH_BYTES);
        le64(h, ntokens);
        for (size_t i = 0; i < ntokens; i++) {
            uint8_t b[4] = {uint8_t(tokens[i]), uint8_t(tokens[i] >> 8), uint8_t(tokens[i] >> 16), uint8_t(tokens[i] >> 24)};
            h.update(b, 4);
        }
        le64(h, extra_len);
        if (extra_len) h.update(extra, extra_len);
    } else if (algo == SPECKV_HASH_VLLM_CBOR) {
        if (extra && (extra_len == 0 || cbor_item_length(extra, extra_len) != extra_len))
            return fail(SPECKV_EINVAL, "extra is not exactly one well-formed CBOR data item (%zu bytes)", extra_len);
        static constexpr uint8_t kNull = 0xF6;
        cbor_head(h, 4, 3);
        if (parent) {
            cbor_head(h, 2, SPECKV_HASH_BYTES);
            h.update(parent, SPECKV_HASH_BYTES);
        } else {
            h.update(&kNull, 1);
        }
        cbor_head(h, 4, ntokens);
        for (size_t i = 0; i < ntokens; i++) cbor_head(h, 0, tokens[i]);
        if (extra) h.update(extra, extra_len);
        else h.update(&kNull, 1);
    } else {
        return fail(SPECKV_EINVAL, "unknown hash algorithm %d (SPECKV_HASH_NATIVE or SPECKV_HASH_VLLM_CBOR)", algo);
    }
    h.final(out);
    return SPECKV_OK;
}

}  // namespace speckv
