// SPDX-License-Identifier: Apache-2.0
// Golden records: the exact bytes of every preset on a fixed page are pinned
// (by CRC32C of the record), so any change to the format is a deliberate one
// (docs/codec.md: existing bytes never change meaning).
#include <doctest/doctest.h>

#include <cstdio>
#include <vector>

#include "codec/codec.h"
#include "util/crc32c.h"
#include "speckv.h"

namespace c = speckv::codec;

// 2048 FP16 values, 64 tokens x 32 channels: a smooth signal per channel,
// an outlier channel, some zeros, made from integers only (portable).
static std::vector<uint16_t> golden_page() {
    std::vector<uint16_t> h(2048);
    uint32_t x = 12345;
    for (size_t i = 0; i < h.size(); i++) {
        x = x * 1103515245u + 12345u;
        const size_t t = i / 32, ch = i % 32;
        float v = float(int((x >> 16) % 2001) - 1000) / 1000.0f + float(t % 16) / 8.0f - float(ch) / 16.0f;
        if (ch == 5) v *= 16.0f;
        if (ch == 9) v = 0.0f;
        h[i] = c::fp32_to_fp16_rne(v);
    }
    return h;
}

TEST_CASE("codec golden: record bytes of every preset are pinned") {
    const uint32_t want[c::kModeCount] = {
        0x5CA604DF, 0x83503B7D, 0xA5CDB873, 0xBB8C0B0F, 0xFA8CFA57, 0x1477C684, 0xE04D136C, 0xF590E38F,
        0x4B82BE33, 0xE83646C7, 0xCEB674D4, 0xE61E6C83, 0x0FD53C6B, 0x81BAFCEA, 0x5CA604DF, 0x60B71C2F,
        0x6A71CE16, 0xDB456D9F,
        // §18 split Rice (k12s is stored raw, as k12)
        0x1D187739, 0xBD178DE8, 0x307A8D9E, 0xE3E98A7A, 0x66FC3599, 0x75309F37, 0xFC5434ED, 0x9AFACA8E,
        0x591D0518, 0xB93E7F6E, 0x5BC70880, 0x5CA604DF, 0x95B8F61D, 0xF2E934EF, 0xDCA60607,
        // §19 packed: k3p v3p k4p v4p k5p v5p
        0xFB4868E8, 0xA1AAE37E, 0x20B94A23, 0x55121073, 0x37047878, 0x592098B4};
    auto page = golden_page();
    std::vector<uint8_t> rec(c::max_record_size(4096));
    for (int m = 0; m < c::kModeCount; m++) {
        for (c::Impl impl : {c::Impl::scalar, c::Impl::best}) {
            size_t len = 0;
            REQUIRE(c::encode(c::Mode(m), SPECKV_DTYPE_FP16, page.data(), 4096, {32}, rec.data(), rec.size(), &len, impl) ==
                    SPECKV_OK);
            const uint32_t crc = speckv::crc32c(0, rec.data(), len);
            if (crc != want[m]) std::printf("mode %s: len %zu crc 0x%08X\n", c::mode_name(c::Mode(m)), len, crc);
            CHECK(crc == want[m]);
        }
    }
}
