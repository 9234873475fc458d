// SPDX-License-Identifier: Apache-2.0
// Fuzz target: arbitrary bytes as a pool file, opened read-only and inspected
// and checked (what `speckv pool inspect|check` do with a file).
// Input byte 0 chooses the form:
//   even: the rest IS the pool file (exercises superblock validation);
//   odd:  the rest is a list of patches (u32 offset, u8 length, bytes) applied
//         to a valid 4 MiB pool holding a few blocks (one of them packed:
//         int8 records in a PackHead image), so the metadata tables and the
//         image get hostile values behind a superblock that passes; if byte
//         0 & 2, the superblock checksum is recomputed after patching.
// Packed blocks are also read (their reads never wait on page locks).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "util/crc32c.h"
#include "pool/pool.h"
#include "speckv.h"

using namespace speckv;

static const std::vector<unsigned char> &base_image() {
    static std::vector<unsigned char> img = [] {
        std::vector<unsigned char> out;
        Config cfg;
        cfg.set_str("codec.mode", "int8");
        std::unique_ptr<Pool> p;
        if (Pool::open("anon:?size=4M&max_blocks=64", cfg, &p) != SPECKV_OK) return out;
        unsigned char buf[9000];
        for (size_t i = 0; i < sizeof buf; i++) buf[i] = static_cast<unsigned char>(i * 13);
        for (int i = 0; i < 5; i++) {
            uint64_t h;
            if (p->alloc(1000 + 2000 * i, i % 4, nullptr, &h) == SPECKV_OK && i % 2 == 0)
                p->write(h, 0, buf, 1000 + 2000 * i);
        }
        // Four FP16 pages of smooth values: coded, then packed into three.
        std::vector<uint16_t> kv(4 * 2048);
        for (size_t i = 0; i < kv.size(); i++) kv[i] = static_cast<uint16_t>(0x3800 + (i % 64) * 3);
        uint64_t h;
        if (p->alloc(kv.size() * 2, SPECKV_DTYPE_FP16, nullptr, &h) == SPECKV_OK) p->write(h, 0, kv.data(), kv.size() * 2);
        out.assign(p->image(), p->image() + p->image_size());
        return out;
    }();
    return img;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    std::vector<unsigned char> img;
    if ((data[0] & 1) == 0) {
        img.assign(data + 1, data + size);
    } else {
        img = base_image();
        if (img.empty()) return 0;
        size_t i = 1;
        while (i + 5 <= size) {
            uint32_t off;
            std::memcpy(&off, data + i, 4);
            size_t n = data[i + 4];
            i += 5;
            n = std::min(n, size - i);
            off %= static_cast<uint32_t>(img.size());
            n = std::min(n, img.size() - off);
            std::memcpy(img.data() + off, data + i, n);
            i += n;
        }
        if (data[0] & 2) {
            fmt::Superblock sb;
            std::memcpy(&sb, img.data(), sizeof sb);
            sb.checksum = superblock_crc(sb);
            std::memcpy(img.data(), &sb, sizeof sb);
        }
    }
    if (img.empty()) return 0;
    Mapping m;
    if (Mapping::open_anon(img.size(), &m) != SPECKV_OK) return 0;
    std::memcpy(m.base(), img.data(), img.size());
    std::unique_ptr<Pool> p;
    if (Pool::open_image(std::move(m), &p) != SPECKV_OK) return 0;
    PoolInfo info;
    p->info(&info);
    std::vector<BlockInfo> blocks;
    p->list_blocks(&blocks);
    CheckReport rep;
    p->check(&rep);
    std::vector<unsigned char> out(1 << 16);
    for (const BlockInfo &b : blocks)
        if (b.packed_pages && !b.cold) p->read(b.handle, 0, out.data(), std::min<size_t>(b.bytes, out.size()));
    return 0;
}
