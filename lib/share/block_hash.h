// SPDX-License-Identifier: Apache-2.0
// Content hashes of prefix blocks (docs/sharing.md "The block hash"). The
// SHA-256 under them is libcrypto's (OpenSSL EVP): it uses the CPU's SHA
// extensions where they exist (bench/README.md "Block hash" has the
// measurement against the hand-written one it replaced).
#pragma once
#include <cstddef>
#include <cstdint>

struct evp_md_ctx_st;

namespace speckv {

// SHA-256 of what is fed to update(). Small updates are gathered in a
// buffer, so a caller may feed a token at a time. Never throws or aborts:
// a libcrypto failure (no SHA-256 in the loaded providers, no memory) is
// kept and returned by final().
class Sha256 {
  public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256 &) = delete;
    Sha256 &operator=(const Sha256 &) = delete;
    void update(const void *data, size_t len);
    // SPECKV_OK and the digest in out, or the failure's code (SPECKV_ENOMEM,
    // SPECKV_EINTERNAL) with the message set (out untouched).
    int final(uint8_t out[32]);

  private:
    void flush();
    void failed(int code, const char *what);
    evp_md_ctx_st *ctx_ = nullptr;
    int rc_ = 0;
    size_t fill_ = 0;
    uint8_t buf_[1024];
};

// Length of the well-formed CBOR data item at the start of [p, p + n)
// (definite lengths only, nesting at most 64 deep), or 0 if there is none.
size_t cbor_item_length(const uint8_t *p, size_t n);

// speckv_block_hash without the argument checks of the ABI layer.
int block_hash(int algo, uint64_t tenant, const uint8_t *parent, const uint32_t *tokens, size_t ntokens,
               const uint8_t *extra, size_t extra_len, uint8_t out[32]);

}  // namespace speckv
