// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: encode -> decode round trip. Input: byte 0 mode id,
// byte 1 dtype, bytes 2-3 channels (LE), the rest the page. Every
// implementation must produce the same record; raw records must round-trip
// exactly; a lossy record must decode to the same size.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "codec/codec.h"
#include "speckv.h"

namespace c = speckv::codec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 5) return 0;
    const auto mode = c::Mode(data[0] % c::kModeCount);
    const int dtype = data[1] % 4;
    const uint32_t C = uint32_t(data[2] | (data[3] << 8));
    const size_t esz = c::dtype_size(dtype);
    size_t bytes = (size - 4) / esz * esz;
    if (bytes == 0) return 0;
    std::vector<uint8_t> src(data + 4, data + 4 + bytes);
    std::vector<uint8_t> rec(c::max_record_size(bytes)), rec2(rec.size());
    size_t len = 0;
    if (c::encode(mode, dtype, src.data(), bytes, {C}, rec.data(), rec.size(), &len, c::Impl::scalar) != SPECKV_OK)
        std::abort();
    for (c::Impl i : {c::Impl::avx2, c::Impl::avx512}) {
        if (!c::impl_available(i)) continue;
        size_t len2 = 0;
        if (c::encode(mode, dtype, src.data(), bytes, {C}, rec2.data(), rec2.size(), &len2, i) != SPECKV_OK) std::abort();
        if (len2 != len || std::memcmp(rec.data(), rec2.data(), len) != 0) std::abort();
    }
    rec.resize(len);
    std::vector<uint8_t> out(bytes);
    size_t n = 0;
    if (c::decode(rec.data(), rec.size(), out.data(), out.size(), &n) != SPECKV_OK || n != bytes) std::abort();
    if (rec[3] == 0 && out != src) std::abort();
    return 0;
}
