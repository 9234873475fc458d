// Content hashes of prefix blocks (docs/sharing.md "The block hash") and the
// SHA-256 they are built on (FIPS 180-4), written here so every process and
// binding computes the same bytes without a crypto dependency.
#pragma once
#include <cstddef>
#include <cstdint>

namespace speckv {

class Sha256 {
  public:
    Sha256();
    void update(const void *data, size_t len);
    void final(uint8_t out[32]);

  private:
    void block(const uint8_t *p);
    uint32_t h_[8];
    uint8_t buf_[64];
    size_t fill_ = 0;
    uint64_t total_ = 0;
};

// Length of the well-formed CBOR data item at the start of [p, p + n)
// (definite lengths only, nesting at most 64 deep), or 0 if there is none.
size_t cbor_item_length(const uint8_t *p, size_t n);

// speckv_block_hash without the argument checks of the ABI layer.
int block_hash(int algo, uint64_t tenant, const uint8_t *parent, const uint32_t *tokens, size_t ntokens,
               const uint8_t *extra, size_t extra_len, uint8_t out[32]);

}  // namespace speckv
