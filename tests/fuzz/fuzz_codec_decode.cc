// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: codec records are untrusted bytes. decode() must never
// read or write out of bounds, and every implementation must agree on the
// verdict and on the decoded bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "codec/codec.h"
#include "speckv.h"

namespace c = speckv::codec;

#include "util/crc32c.h"

// Decodes `rec` with every implementation; all must agree.
static void check(const std::vector<uint8_t> &rec) {
    c::Header h;
    size_t cap = 1 << 16;
    if (c::peek_header(rec.data(), rec.size(), &h) == SPECKV_OK) cap = h.decoded_bytes();
    std::vector<uint8_t> ref(cap), out(cap);
    size_t n0 = 0;
    int rc0 = c::decode(rec.data(), rec.size(), ref.data(), ref.size(), &n0, c::Impl::scalar);
    for (c::Impl i : {c::Impl::avx2, c::Impl::avx512}) {
        if (!c::impl_available(i)) continue;
        size_t n1 = 0;
        int rc1 = c::decode(rec.data(), rec.size(), out.data(), out.size(), &n1, i);
        if (rc1 != rc0) std::abort();
        if (rc0 == SPECKV_OK && (n1 != n0 || std::memcmp(ref.data(), out.data(), n0) != 0)) std::abort();
    }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // Exact-size copies so ASan sees any over-read of the record.
    std::vector<uint8_t> rec(data, data + size);
    check(rec);
    // The same bytes with a valid CRC, so mutations reach the stream parsers
    // instead of stopping at the checksum.
    if (size >= c::kHeaderSize) {
        uint32_t crc = speckv::crc32c(0, rec.data(), 20);
        crc = speckv::crc32c(crc, rec.data() + c::kHeaderSize, size - c::kHeaderSize);
        std::memcpy(rec.data() + 20, &crc, 4);
        check(rec);
    }
    return 0;
}
