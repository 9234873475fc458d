// SPDX-License-Identifier: Apache-2.0
#include "share/block_hash.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include <bit>
#include <cstring>

#include "speckv.h"
#include "util/status.h"

namespace speckv {

namespace {
// libcrypto's SHA-256, fetched once per process rather than looked up by
// name on every call. NULL when no loaded provider has it.
const EVP_MD *sha256_md() {
    static const EVP_MD *md = EVP_MD_fetch(nullptr, "SHA2-256", nullptr);
    return md;
}
}  // namespace

Sha256::Sha256() {
    const EVP_MD *md = sha256_md();
    if (!md) failed(SPECKV_EINTERNAL, "EVP_MD_fetch(SHA2-256): no loaded OpenSSL provider offers it (OPENSSL_CONF?)");
    else if (!(ctx_ = EVP_MD_CTX_new())) failed(SPECKV_ENOMEM, "EVP_MD_CTX_new");
    else if (EVP_DigestInit_ex(ctx_, md, nullptr) != 1) failed(SPECKV_EINTERNAL, "EVP_DigestInit_ex");
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::failed(int code, const char *what) {
    if (rc_) return;
    // libcrypto's reason, taken off this thread's OpenSSL error queue (which
    // is the caller's too: left clean).
    unsigned long e = ERR_get_error();
    char why[256] = "";
    if (e) ERR_error_string_n(e, why, sizeof why);
    ERR_clear_error();
    rc_ = fail(code, "SHA-256 (libcrypto): %s failed%s%s", what, e ? ": " : "", why);
}

void Sha256::flush() {
    if (fill_ && !rc_ && EVP_DigestUpdate(ctx_, buf_, fill_) != 1) failed(SPECKV_EINTERNAL, "EVP_DigestUpdate");
    fill_ = 0;
}

void Sha256::update(const void *data, size_t len) {
    if (rc_ || len == 0) return;
    if (fill_ + len <= sizeof buf_) {
        std::memcpy(buf_ + fill_, data, len);
        fill_ += len;
        return;
    }
    flush();
    if (len < sizeof buf_) {
        std::memcpy(buf_, data, len);
        fill_ = len;
    } else if (!rc_ && EVP_DigestUpdate(ctx_, data, len) != 1) {
        failed(SPECKV_EINTERNAL, "EVP_DigestUpdate");
    }
}

int Sha256::final(uint8_t out[32]) {
    flush();
    if (rc_) return rc_;
    uint8_t md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(ctx_, md, &n) != 1 || n != 32) {
        failed(SPECKV_EINTERNAL, "EVP_DigestFinal_ex");
        return rc_;
    }
    std::memcpy(out, md, 32);
    // A second final() reports the context as used up, not a stale digest.
    rc_ = SPECKV_EINTERNAL;
    return SPECKV_OK;
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
        if constexpr (std::endian::native == std::endian::little) {
            if (ntokens) h.update(tokens, ntokens * sizeof(uint32_t));  // already the bytes to hash
        } else {
            for (size_t i = 0; i < ntokens; i++) {
                uint8_t b[4] = {uint8_t(tokens[i]), uint8_t(tokens[i] >> 8), uint8_t(tokens[i] >> 16),
                                uint8_t(tokens[i] >> 24)};
                h.update(b, 4);
            }
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
    return h.final(out);
}

}  // namespace speckv
